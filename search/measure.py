"""What one measurement is: its input (a workload and the Steps of a schedule), its
result (times or a typed error), and the loop that builds, runs and logs a batch.

Both searches measure through ``Measurer.measure``: it skips candidates the log already
holds (so a resumed tuning never pays for a candidate twice), builds the rest in parallel,
then times them one by one in the isolated runner while nothing else of ours runs, and
appends one record per candidate to the log as soon as it is measured.
"""
from __future__ import annotations

import enum
import hashlib
import json
import math
import time
from dataclasses import dataclass, field
from typing import Any, Sequence

__all__ = ["MeasureErrorNo", "MeasureInput", "MeasureResult", "Measurer", "state_key"]


class MeasureErrorNo(enum.IntEnum):
    """Why a candidate has no valid time. Stored by name in records."""
    NO_ERROR = 0
    INVALID_SCHEDULE = 1   # a Step does not apply, or lowering rejects the schedule
    COMPILE_ERROR = 2      # the C compiler rejected the source
    RUNTIME_CRASH = 3      # the kernel crashed (signal) or failed at run time
    WRONG_ANSWER = 4       # output differs from the unscheduled build of the same compute
    BUILD_TIMEOUT = 5      # lowering + compiling took longer than the build timeout
    RUN_TIMEOUT = 6        # the kernel ran longer than the run timeout
    UNKNOWN = 7            # anything else; the message says what

    @classmethod
    def parse(cls, name: Any) -> "MeasureErrorNo":
        """From a record's error code (its name); ValueError naming the known codes."""
        if isinstance(name, str) and name in cls.__members__:
            return cls[name]
        raise ValueError(f"unknown error code {str(name)[:40]!r}; known: "
                         f"{', '.join(cls.__members__)}")


def state_key(workload_key: str, steps: Sequence[Any]) -> str:
    """Identity of a candidate: the workload and its exact Step list (canonical JSON).
    Two searches that reach the same schedule share the key, so neither re-measures it."""
    canon = json.dumps([workload_key, [s if isinstance(s, dict) else s.to_json()
                                       for s in steps]], sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canon.encode()).hexdigest()


@dataclass(frozen=True, eq=False)
class MeasureInput:
    """A candidate: the workload, the Steps of its schedule, and the search's decisions
    that produced them (a templated config or sampled decisions; plain JSON, never run)."""
    workload: Any                    # search.workload.Workload
    steps: tuple
    decisions: Any = None

    @property
    def key(self) -> str:
        return state_key(self.workload.key, self.steps)


@dataclass(frozen=True)
class MeasureResult:
    """Seconds per call, one per repeat (empty on error), and the error with its message."""
    costs: tuple = ()
    error_no: MeasureErrorNo = MeasureErrorNo.NO_ERROR
    error_msg: str = ""
    build_seconds: float = 0.0
    run_seconds: float = 0.0
    timestamp: float = field(default_factory=time.time)

    @property
    def ok(self) -> bool:
        return self.error_no == MeasureErrorNo.NO_ERROR and bool(self.costs)

    @property
    def mean_cost(self) -> float:
        """Mean seconds per call; +inf for an error, so a failed candidate is never best."""
        return sum(self.costs) / len(self.costs) if self.ok else math.inf

    @property
    def median_cost(self) -> float:
        if not self.ok:
            return math.inf
        c = sorted(self.costs)
        n = len(c)
        return c[n // 2] if n % 2 else (c[n // 2 - 1] + c[n // 2]) / 2


class Measurer:
    """Builds, runs and logs batches of candidates for one tuning run.

    ``log_file`` may already hold records (from an interrupted run, or another search on
    the same workload): a candidate whose state key is in it is not measured again, its
    logged result is returned instead. New results are appended to the log one record at
    a time, as soon as each is measured.
    """

    def __init__(self, log_file: Any = None, builder: Any = None, runner: Any = None,
                 target: Any = None, tuner: str = "", seed: int | None = None):
        from tvmlite.target import Target
        from .builder import LocalBuilder
        from .runner import LocalRunner
        self.target = target or Target.host()
        self.builder = builder or LocalBuilder(self.target)
        self.runner = runner or LocalRunner()
        self.tuner, self.seed = tuner, seed
        self.log_file = log_file
        self.known: dict[str, Any] = {}     # state key -> Record (this target's, from the log)
        self.records: list = []             # records measured by this Measurer
        if log_file is not None:
            from .record import load_records, target_matches
            for rec in load_records(log_file, missing_ok=True):
                if target_matches(rec.target, self.target):
                    self.known.setdefault(rec.key, rec)

    def measure(self, inputs: Sequence[MeasureInput]) -> list[MeasureResult]:
        """Results in input order. Duplicates within the batch are measured once."""
        from .record import append_record, make_record
        results: dict[str, MeasureResult] = {}
        todo: list[MeasureInput] = []
        for inp in inputs:
            k = inp.key
            if k in self.known:
                results[k] = self.known[k].result
            elif k not in results and all(t.key != k for t in todo):
                todo.append(inp)
        if todo:
            builds = self.builder.build(todo)   # all compiles happen before any timing
            measured = self.runner.run(todo, builds, reference=self.builder.build_reference)
            for inp, res in zip(todo, measured):
                rec = make_record(inp, res, self.target, tuner=self.tuner, seed=self.seed)
                if self.log_file is not None:
                    append_record(self.log_file, rec)
                self.known[inp.key] = rec
                self.records.append(rec)
                results[inp.key] = res
        return [results[inp.key] for inp in inputs]

    def close(self) -> None:
        self.runner.close()

    def __enter__(self) -> "Measurer":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
