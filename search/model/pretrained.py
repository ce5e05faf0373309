"""The cost models that ship trained: what a tuning starts from instead of random guesses.

Two plain ``.npz`` files (``XGBModel.save``: trees, training programs and the per-task
normalization; never a pickle) sit beside this module:

- ``pretrained.npz``: the template-free search's model (per-store rows, "pack-sum");
- ``pretrained_itervar.npz``: ``XGBTuner``'s default model (one row per program, the sum
  and the max of the per-store rows; "rank" loss).

Both are trained by ``python -m tvmlite.search.model.pretrained LOG...`` from tuning logs of
any CPUs. Programs are comparable across workloads and CPUs because (1) each program's
label is its throughput divided by the best of its own workload *on its own CPU* (the
group is the workload key plus the CPU the record names), and (2) its features are
extracted for the target its record names, so the vector-width, cache-line and
cache-size columns describe the CPU it ran on, not the one training it.

A tuning loads them by default (``TuningOptions(pretrained=False)``, ``--no-pretrained``
to start cold) as a *prior*: the pretrained trees rank the first rounds (where a cold
model guesses at random), the task's own measurements join the training programs, and
once ``PRIOR_UNTIL`` of them are in, the pretrained programs are dropped. Kept longer
(``until=None``), hundreds of programs of other workloads outvoted the task's few own:
in leave-one-CPU-out runs GMM 512 ended well below the cold search's best.

Map: files · ``training_rows`` (logs -> features, labels, groups) · ``train`` ·
``load_pretrained`` · CLI ``main``.
"""
from __future__ import annotations

import argparse
import gzip
import random
import shutil
import sys
import tempfile
import warnings
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from tvmlite.errors import TvmliteWarning
from tvmlite.schedule.schedule import Schedule
from tvmlite.schedule.state import ScheduleError
from tvmlite.search.model.cost_model import CostModelFileError, XGBModel
from tvmlite.search.model.features import FEATURE_NAMES, schedule_features
from tvmlite.search.records.record import load_records
from tvmlite.target.target import Target

HERE = Path(__file__).resolve().parent
FILES = {"pack-sum": HERE / "pretrained.npz", "itervar": HERE / "pretrained_itervar.npz"}
MAX_PROGRAMS = 3000        # programs kept in a shipped file (a random sample beyond)
PRIOR_UNTIL = 32           # own programs after which a tuning drops the pretrained ones


class PretrainedWarning(TvmliteWarning):
    """The shipped model does not fit this tvmlite (features changed): starting cold."""


def cpu_label(target: Target) -> str:
    """What tells two CPUs apart in a record: arch, vector width, cores and caches."""
    caches = ",".join(f"{k}={v}" for k, v in sorted(dict(target.caches or {}).items()))
    return f"{target.arch}/{target.vector_bits}b/{target.cores}c/{caches}"


def itervar_row(per_store: np.ndarray) -> np.ndarray:
    """XGBTuner's "itervar" row of a program: the sum and the max over its stores."""
    return np.concatenate([per_store.sum(axis=0), per_store.max(axis=0)])[None, :] \
        .astype(np.float32)


def _records(log: Any) -> list:
    """The records of a log, gzip-compressed (``.gz``) or not."""
    if str(log).endswith(".gz"):
        with tempfile.TemporaryDirectory() as tmp:
            plain = Path(tmp) / "log.jsonl"
            with gzip.open(log, "rb") as src, open(plain, "wb") as dst:
                shutil.copyfileobj(src, dst)
            return load_records(plain)
    return load_records(log)


def training_rows(logs: Sequence[Any], exclude_cpu: str | None = None,
                  max_programs: int = MAX_PROGRAMS, seed: int = 0) -> tuple[list, list, list]:
    """(per-store features, GFLOP/s, groups) of every valid record in ``logs``, its
    features extracted for the record's own target; ``exclude_cpu`` drops the records of
    CPUs whose ``cpu_label`` contains it (to evaluate on a CPU left out of training)."""
    xs, ys, groups = [], [], []
    recs = [r for log in logs for r in _records(log)
            if r.result.ok and not r.emulated and not r.workload.is_dynamic]
    if exclude_cpu:
        recs = [r for r in recs if exclude_cpu not in cpu_label(r.target)]
    if len(recs) > max_programs:
        recs = random.Random(seed).sample(recs, max_programs)
    for r in recs:
        wl = r.workload
        try:
            s = Schedule.from_steps(wl.outputs, r.steps)
            xs.append(schedule_features(s, list(wl.tensors), r.target))
        except ScheduleError:
            continue
        ys.append(r.gflops)
        groups.append(f"{wl.key}@{cpu_label(r.target)}")
    return xs, ys, groups


def train(logs: Sequence[Any], out_dir: Any = HERE, exclude_cpu: str | None = None,
          max_programs: int = MAX_PROGRAMS) -> dict:
    """Train and save both shipped models from ``logs``; returns {kind: programs}."""
    xs, ys, groups = training_rows(logs, exclude_cpu, max_programs)
    if len(xs) < 16:
        raise ValueError(f"train: only {len(xs)} usable records in {list(map(str, logs))}; "
                         f"a pretrained model needs at least 16 (tune a few workloads first)")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    packsum = XGBModel(seed=0, max_training=max(max_programs, 16), loss="pack-sum")
    packsum.update(xs, ys, groups)
    packsum.save(out / FILES["pack-sum"].name)
    rank = XGBModel(seed=0, n_threads=1, max_training=max(max_programs, 16), loss="rank")
    rank.update([itervar_row(x) for x in xs], ys, groups)
    rank.save(out / FILES["itervar"].name)
    return {"pack-sum": packsum.num_programs, "itervar": rank.num_programs}


def load_pretrained(kind: str = "pack-sum", n_threads: int | None = None,
                    path: Any = None, until: int | None = PRIOR_UNTIL) -> XGBModel | None:
    """The shipped model of ``kind`` ("pack-sum": template-free; "itervar": XGBTuner),
    or None (with a PretrainedWarning) when it is missing or does not fit this tvmlite's
    features, so a tuning then starts cold instead of failing. Its programs are a prior
    (``XGBModel.as_prior``): they rank the first rounds and are dropped once the task
    has ``until`` programs of its own (None: kept, aging out past ``max_training``)."""
    if kind not in FILES:
        raise ValueError(f"load_pretrained(kind=...) must be one of {sorted(FILES)}, got "
                         f"{kind!r}")
    path = Path(path) if path is not None else FILES[kind]
    try:
        model = XGBModel.load(path, n_threads=n_threads)
    except CostModelFileError as e:
        warnings.warn(f"pretrained cost model not used, starting cold: {e}", PretrainedWarning,
                      stacklevel=2)
        return None
    want = len(FEATURE_NAMES) * (2 if kind == "itervar" else 1)
    if model.n_features != want:
        warnings.warn(f"pretrained cost model {path} has {model.n_features} features, this "
                      f"tvmlite extracts {want}: starting cold (retrain it with python -m "
                      f"tvmlite.search.model.pretrained)", PretrainedWarning, stacklevel=2)
        return None
    return model.as_prior(until) if until is not None else model


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m tvmlite.search.model.pretrained",
                                description="train the shipped cost models from tuning logs")
    p.add_argument("logs", nargs="+", help="JSON-lines tuning logs (.jsonl or .jsonl.gz)")
    p.add_argument("--out", default=str(HERE), help="directory to write the .npz files into "
                   "(default: the package's)")
    p.add_argument("--exclude-cpu", default=None, help="leave out records of CPUs whose label "
                   "(arch/bits/cores/caches) contains this text")
    p.add_argument("--max-programs", type=int, default=MAX_PROGRAMS)
    a = p.parse_args(argv)
    counts = train(a.logs, a.out, a.exclude_cpu, a.max_programs)
    print(f"trained on {counts['pack-sum']} programs: {a.out}/{FILES['pack-sum'].name}, "
          f"{FILES['itervar'].name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
