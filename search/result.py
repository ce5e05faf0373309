"""What a tuning returns, for either search: one ``Trial`` per measurement (for progress
displays and curves) and a ``TuneResult`` (the best record, counts, time split).

The time split: a ``PhaseClock`` adds up the seconds of each ``PHASES`` part of the
work (the policy times sampling, lowering, features, prediction and training; the
measurer compiling and measuring), and the loop keeps one ``RoundTimes`` per round, the
clocks' difference over it. ``Retimed`` is one candidate re-timed at the end of a
tuning (``search.records.best``'s module doc says why and how it is judged).

The templated and the template-free search both produce these, and neither imports the
other, so the shared vocabulary lives here; the shared tuning loop fills them
(``tuning.Tally``).
"""
from __future__ import annotations

import statistics
import time
from collections import Counter
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Iterator

from tvmlite.search.records.best import cost, is_retiming
from tvmlite.search.records.workload import Workload

__all__ = ["Trial", "TuneResult", "PHASES", "PhaseClock", "RoundTimes", "Retimed", "since"]

# where a tuning's seconds go: sampling schedules (and mutating them), lowering them to
# the loop nest, extracting its features, the cost model's predictions and training,
# compiling candidates, and running them (checking and timing, in the runner)
PHASES = ("sample", "lower", "features", "predict", "train", "compile", "measure")


class PhaseClock:
    """Seconds spent per phase (``PHASES``), added up as ``timed(phase)`` blocks end."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = dict.fromkeys(PHASES, 0.0)

    @contextmanager
    def timed(self, phase: str) -> Iterator[None]:
        t0 = time.perf_counter()
        try:
            yield
        finally:
            self.seconds[phase] += time.perf_counter() - t0

    def snapshot(self) -> dict[str, float]:
        return dict(self.seconds)


def since(clocks: list[PhaseClock], before: list[dict[str, float]]) -> dict[str, float]:
    """Seconds per phase the ``clocks`` added up since their snapshots ``before``."""
    out = dict.fromkeys(PHASES, 0.0)
    for clock, snap in zip(clocks, before):
        for phase, secs in clock.seconds.items():
            out[phase] += secs - snap.get(phase, 0.0)
    return out


@dataclass(frozen=True)
class RoundTimes:
    """One round of a tuning: which job, how many candidates it measured, its wall
    seconds and their split by phase (``PHASES``; the rest of the wall time is the
    loop's own bookkeeping)."""
    index: int              # rounds of this run so far, this one included
    job: int                # index of the job (task) in the tuning
    measured: int
    seconds: float
    phases: dict

    def line(self) -> str:
        parts = " ".join(f"{p} {self.phases.get(p, 0.0):.2f}" for p in PHASES)
        return (f"round {self.index:3d} task {self.job}: {self.measured:3d} measured in "
                f"{self.seconds:6.2f}s ({parts})")


@dataclass(frozen=True)
class Retimed:
    """One candidate re-timed at the end of a tuning: its re-timing record (costs of
    every round) and its figure while tuning; the spread is in GFLOP/s."""
    record: Any            # the re-timing Record
    tuned_gflops: float    # its throughput as measured during the search

    def _gflops(self, seconds: float) -> float:
        return self.record.workload.flops / seconds / 1e9

    @property
    def rounds(self) -> int:
        return int(self.record.decisions["retiming"].get("rounds", 0))

    @property
    def min_gflops(self) -> float:
        return self._gflops(max(self.record.result.costs))

    @property
    def median_gflops(self) -> float:
        return self._gflops(statistics.median(self.record.result.costs))

    @property
    def max_gflops(self) -> float:
        return self._gflops(min(self.record.result.costs))

    def line(self) -> str:
        return (f"{self.median_gflops:.2f} GFLOP/s median of {len(self.record.result.costs)} "
                f"timings in {self.rounds} round(s) (min {self.min_gflops:.2f}, max "
                f"{self.max_gflops:.2f}; {self.tuned_gflops:.2f} while tuning)")


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
    rounds: list = field(default_factory=list)     # RoundTimes of this run's rounds
    retimed: tuple = ()                   # Retimed, best first: the end's re-timing
    retime_seconds: float = 0.0           # building and running the re-timing
    stopped_early: bool = False           # the task scheduler stopped it: its best had stalled

    @property
    def best_gflops(self) -> float:
        """The best's throughput: for a re-timed best, the median of its re-timings."""
        if self.best is None:
            return 0.0
        if is_retiming(self.best) and self.best.result.ok:
            return self.best.workload.flops / cost(self.best) / 1e9
        return self.best.gflops

    @property
    def phases(self) -> dict[str, float]:
        """Seconds per phase over this run's rounds (``PHASES``)."""
        out = dict.fromkeys(PHASES, 0.0)
        for r in self.rounds:
            for p, secs in r.phases.items():
                out[p] += secs
        return out
