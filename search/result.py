"""What a tuning returns, for either search: one ``Trial`` per measurement (for progress
displays and curves) and a ``TuneResult`` (the best record, counts, time split).

The templated and the template-free search both produce these, and neither imports the
other, so the shared vocabulary lives here; the shared tuning loop fills them
(``tuning.Tally``).
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from tvmlite.search.records.workload import Workload


@dataclass(frozen=True)
class Trial:
    """One measurement as seen by progress displays and curves."""
    index: int             # records of this workload in the log once this one was logged
                           # (earlier runs' and other writers' records included, and this
                           # run's configs without a record; for a tuning over a range of
                           # sizes: this run's measurements)
    elapsed: float         # seconds since the tuning started
    gflops: float          # this candidate's (0 for an error)
    best_gflops: float     # best so far
    error: str             # MeasureErrorNo name


@dataclass
class TuneResult:
    workload: Workload
    best: Any = None                      # the best Record (None if nothing valid)
    trials: list = field(default_factory=list)
    measured: int = 0                     # new measurements in this run
    search_seconds: float = 0.0           # proposing candidates (sketches, evolution, model)
    measure_seconds: float = 0.0          # building and running them
    errors: Counter = field(default_factory=Counter)

    @property
    def best_gflops(self) -> float:
        return self.best.gflops if self.best is not None else 0.0
