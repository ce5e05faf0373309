"""Choosing among records: the one rule of the best valid record.

``best_valid`` answers "which record is best" everywhere (tunings, apply_history_best,
replay, comparisons, benchmarks): ok results only, real timings before emulated ones
(an emulated timing says nothing of speed), the lowest mean cost, ties to the earliest.
``best_record`` first keeps one workload and the records tuned for a target.
"""
from __future__ import annotations

import os
import warnings
from typing import Iterable

from tvmlite.search.records.record import (
    Record,
    RecordError,
    TargetMismatchWarning,
    load_records,
    short_value,
)
from tvmlite.search.records.workload import Workload
from tvmlite.target.target import Target

__all__ = ["real_first", "rank", "best_first", "best_valid", "better", "best_record"]


def real_first(records: list[Record]) -> list[Record]:
    """Emulated timings never compete with real ones: the real records when there are
    any, else the emulated ones (then every figure drawn from them is emulated)."""
    real = [r for r in records if not r.emulated]
    return real if real else list(records)


def rank(record: Record) -> tuple[bool, float]:
    """The order of valid records, best first: real timings before emulated ones (an
    emulated timing says nothing of speed), then the lowest mean cost. Sorting by it is
    stable, so among equals the earliest comes first."""
    return (record.emulated, record.mean_cost)


def best_first(records: Iterable[Record]) -> list[Record]:
    """The valid records (ok results) of ``records``, best first (``rank``; ties keep
    their order, so the earliest of equals comes first)."""
    return sorted((r for r in records if r.result.ok), key=rank)


def best_valid(records: Iterable[Record]) -> Record | None:
    """The best valid record of ``records``: ok results only, real timings before emulated
    ones, the lowest mean cost, ties to the earliest; None when none is valid. This is
    the one answer to "the best record": ``best_record`` first keeps one workload and the
    target's records; tunings, comparisons and benchmarks ask it directly."""
    return min((r for r in records if r.result.ok), key=rank, default=None)


def better(record: Record | None, than: Record | None) -> bool:
    """Whether ``record`` is valid and beats ``than`` (None, or a valid record) by
    ``best_valid``'s rule; a tie does not beat the earlier record."""
    if record is None or not record.result.ok:
        return False
    return than is None or rank(record) < rank(than)




def best_record(log: str | os.PathLike | Iterable[Record], workload: Workload | str | None = None,
                target: Target | None = None, fallback: bool = True) -> Record | None:
    """The fastest valid record of ``workload`` (a Workload, a key, or None when the log
    holds one workload) among those tuned for ``target`` (default: this machine); ties
    go to the earliest. With ``fallback``, when only other CPUs have records, their best
    is returned with a TargetMismatchWarning. None when there is nothing to return."""
    records = load_records(log) if isinstance(log, (str, os.PathLike)) else list(log)
    if not all(isinstance(r, Record) for r in records):
        raise RecordError("best_record: log must be a path or an iterable of Records")
    if isinstance(workload, Workload):
        key = workload.key
    elif isinstance(workload, str):
        key = workload
    elif workload is None:
        found = {r.workload.key: r.workload for r in records}
        if not found:
            return None
        if len(found) > 1:
            raise RecordError(f"best_record: the log holds {len(found)} workloads ("
                              + ", ".join(repr(w) for w in list(found.values())[:10])
                              + "); pass workload= (a Workload or its key)")
        key = next(iter(found))
    else:
        raise RecordError(f"best_record: workload must be a Workload, a key or None, "
                          f"got {short_value(workload)}")
    valid = [r for r in records if r.workload.key == key and r.result.ok]
    if not valid:
        return None
    target = Target.host() if target is None else target
    here = best_valid(r for r in valid if r.target.same_cpu(target))
    if here is not None:
        return here
    if not fallback:
        return None
    best = min(valid, key=rank)   # best_valid(valid): every record in valid is ok
    warnings.warn(f"best_record: no record of {best.workload!r} was tuned for this target "
                  f"({target.arch}: {' '.join(target.features) or 'no features'}); using one "
                  f"tuned on {best.target.arch} with features "
                  f"{' '.join(best.target.features) or '(none)'}", TargetMismatchWarning,
                  stacklevel=2)
    return best
