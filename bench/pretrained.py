"""What the shipped cost model buys: the template-free search cold, with the shipped
pretrained model, and with a model trained without this CPU's logs, same cases and seeds.

For every case (bench/suite.py's names), mode and seed it tunes ``--trials`` measurements
into ``<out>/<case>-<mode>-s<seed>.jsonl`` (an interrupted run resumes from its log), then
reads the run's curve from its own log: the best GFLOP/s after 64 trials and after all of
them (as measured while tuning), and the first trial at which 90% of that run's final best
was reached. The results page (``--results``, Markdown with JSON beside it:
bench/results.py) is rebuilt from every run in ``<out>``, so several invocations with
different trials or cases add up; medians over seeds.

Modes:
- ``cold``: ``TuningOptions(pretrained=False)``;
- ``pretrained``: the shipped model (search/model/pretrained.npz), the default;
- ``leave-out``: a model trained here by ``python -m tvmlite.search.model.pretrained`` on
  the logs of ``--leave-out-logs`` with this CPU's records excluded (``--exclude-cpu``):
  how the model does on a CPU it has never seen.

    python -m bench pretrained [--cases gmm_1024x1024x1024 ...] [--trials 200]
        [--seeds 0 1 2] [--modes cold pretrained leave-out] [--population 2048]
        [--out bench/out/pretrained] [--results <out>/results.md]

Run it alone (flock /work/timing.lock ...): the tuning measures kernels.
"""
from __future__ import annotations

import argparse
import json
import statistics
import time
import warnings
from collections.abc import Sequence
from pathlib import Path

from bench import args as bench_args
from bench import peers, results, suite
from bench.results import Table

HERE = Path(__file__).resolve().parent

MODES = ("cold", "pretrained", "leave-out")
LEAVE_OUT_LOGS = [HERE.parent / "tuning_logs" / "x86_64-avx512-zen4-2core.jsonl",
                  HERE.parent / "tests" / "search" / "model" / "data" /
                  "conv2d_nhwc_random.jsonl.gz"]
EARLY = 64     # the "within 64 trials"


def leave_out_model(out: Path, logs: list[Path]):
    """A pack-sum model trained on ``logs`` without this CPU's records (trained once,
    kept in ``<out>/leave-out/``, loaded afresh for each run)."""
    from tvmlite.search.model.pretrained import cpu_label, load_pretrained, train
    from tvmlite.target.target import Target
    here = cpu_label(Target.host())
    folder = out / "leave-out"
    model_file = folder / "pretrained.npz"
    if not model_file.exists():
        counts = train([str(p) for p in logs], folder, exclude_cpu=here)
        print(f"leave-out model: {counts['pack-sum']} programs of other CPUs (not {here})",
              flush=True)
    return load_pretrained("pack-sum", path=model_file)


def tune_run(name: str, f, mode: str, seed: int, a: argparse.Namespace, model_for) -> dict:
    from tvmlite.search.options import TuningOptions
    from tvmlite.search.records.record import load_records
    from tvmlite.search.template_free.task import SearchTask
    stem = f"{name}-{mode}-s{seed}"
    # one log per run; one summary per budget read from it (a 64-trial view of a longer run
    # is that run's first 64 trials, exactly what a 64-trial run with that seed measures)
    log, side = a.out / f"{stem}.jsonl", a.out / f"{stem}-t{a.trials}.json"
    task = SearchTask(func=f.op, kwargs=f.kwargs, constants=f.constants)
    key = task.workload.key
    meta = json.loads(side.read_text()) if side.exists() else {"seconds": None}
    done = sum(r.workload.key == key for r in load_records(log, missing_ok=True))
    if done < a.trials:
        meta["seconds"] = meta["seconds"] or 0.0
        options = TuningOptions(seed=seed, population=a.population,
                                pretrained=mode == "pretrained")
        print(f"  [{name} {mode} seed {seed}] tuning {a.trials} trials", flush=True)
        t0 = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            task.tune(a.trials, str(log), options, model=model_for(mode))
        meta["seconds"] += time.perf_counter() - t0
    curve = peers.curve_from_log(str(log), key)[:a.trials]
    final = curve[-1][2] if curve else 0.0
    meta.update(case=name, mode=mode, seed=seed, trials=len(curve), final=final,
                at_early=curve[min(EARLY, len(curve)) - 1][2] if curve else 0.0,
                t90=peers.trials_to_reach(curve))
    side.write_text(json.dumps(meta))
    return meta


def write_results(path: Path, out: Path, header: str, argv: Sequence[str]) -> None:
    runs = [json.loads(p.read_text()) for p in sorted(out.glob("*-s*-t*.json"))]
    lines = []
    groups: dict = {}
    for r in runs:
        groups.setdefault((r["case"], r["trials"], r["mode"]), []).append(r)

    def cell(rs: list, k: str, fmt: str) -> str:
        vals = [r[k] for r in rs if r.get(k) is not None]
        if not vals:
            return ""
        return f"{format(statistics.median(vals), fmt)} [{' '.join(format(v, fmt) for v in vals)}]"

    for (case, trials, mode), rs in sorted(groups.items(), key=lambda g: (
            g[0][0], g[0][1], MODES.index(g[0][2]))):
        rs.sort(key=lambda r: r["seed"])
        lines.append((case, trials, mode, cell(rs, "at_early", ".1f"), cell(rs, "final", ".1f"),
                      cell(rs, "t90", "g"), cell(rs, "seconds", ".0f")))
    results.write(
        path, "The cost model that arrives trained: cold vs pretrained vs leave-this-CPU-out",
        [Table(("case", "trials", "mode", f"best @{EARLY}", "best @end", "trials to 90%",
                "tune s"), tuple(lines))], name="pretrained", argv=argv,
        notes=[header, "Per run, from its own log (GFLOP/s as measured while tuning): the "
               f"best after {EARLY} trials and after all, and the first trial reaching 90% of "
               "that run's final best. Medians over seeds (each seed's value in brackets). A "
               "shorter budget's row of a longer run is that run's first trials (tune s then "
               "blank: the run was timed whole)."], header={"runs": runs})


def main(argv: list[str] | None = None) -> int:
    p = bench_args.parser("pretrained", __doc__, trials=200, seeds=[0, 1, 2],
                          out=HERE / "out" / "pretrained")
    p.add_argument("--cases", nargs="+", default=["gmm_1024x1024x1024"])
    p.add_argument("--modes", nargs="+", choices=MODES, default=list(MODES))
    p.add_argument("--population", type=int, default=2048)
    p.add_argument("--leave-out-logs", type=Path, nargs="+", default=LEAVE_OUT_LOGS)
    p.add_argument("--results", type=Path, default=None,
                   help="the results page (default <out>/results.md; JSON beside it)")
    a = p.parse_args(argv)
    a.results = a.results or a.out / "results.md"
    cases = suite.select_cases(list(suite.CASES), quick=False, only=a.cases)
    if len(cases) != len(set(a.cases)):
        p.error(f"unknown case among {a.cases}; names as `python -m bench suite --cases` "
                "takes them")
    if a.trials < 1 or a.population < 1:
        p.error("--trials and --population must be positive")
    a.out.mkdir(parents=True, exist_ok=True)
    from tvmlite.target.target import Target
    target = Target.host()
    def model_for(mode: str):
        """A fresh model per run: a tuning trains the one it is given."""
        return leave_out_model(a.out, a.leave_out_logs) if mode == "leave-out" else None

    header = (f"CPU: {target.arch}, {target.cores} cores, {target.vector_bits}-bit vectors, "
              f"caches {dict(target.caches or {})} (`Target.host()`); population "
              f"{a.population}; leave-out model trained on "
              f"{', '.join(p.name for p in a.leave_out_logs)} without this CPU's records.")
    for name, f in ((suite.case_name(op, shape), f) for op, shape, f in cases):
        for seed in a.seeds:
            for mode in a.modes:
                r = tune_run(name, f, mode, seed, a, model_for)
                print(f"  [{name} {mode} seed {seed}] best@{EARLY} {r['at_early']:.1f}, "
                      f"final {r['final']:.1f} GFLOP/s, 90% at trial {r['t90']}", flush=True)
                write_results(a.results, a.out, header, argv or [])
    print(f"wrote {a.results}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
