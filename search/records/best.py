"""Choosing among records: the one rule of the best valid record.

``best_valid`` answers "which record is best" everywhere (tunings, apply_history_best,
replay, comparisons, benchmarks): ok results only, real timings before emulated ones
(an emulated timing says nothing of speed), the lowest cost, ties to the earliest.
``best_record`` first keeps one workload and the records tuned for a target.

Re-timings. The fastest of many noisy timings is biased upward: the candidate that won
the search is often the one whose timing was luckiest. So a tuning ends by re-timing
its few best candidates, interleaved (``Measurer.retime``), and logs one record per
candidate tagged as a re-timing (``is_retiming``: its decisions hold ``"retiming":
{"session": start, "rounds": n}``, beside the candidate's own decisions). The rule
treats them so:

- a re-timing is judged by the **median** of its costs (``cost``; a measurement by
  their mean): the re-timing rounds interleave the candidates, and the median drops a
  round disturbed by another process;
- a re-timing **supersedes** every plain measurement of its workload made before its
  session started (``contenders``): the re-timed candidates were the best of those by
  their own timings, so a plain figure measured before cannot beat them by luck alone;
  a measurement made after the session (a resumed, longer tuning) still competes by its
  mean until the next re-timing judges it;
- of several re-timings of one candidate, only the latest counts.

``best_first`` orders the contenders first (by that rule), then the superseded records
(for a caller that falls back when the best no longer applies).
"""
from __future__ import annotations

import math
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

__all__ = ["real_first", "rank", "best_first", "best_valid", "better", "best_record",
           "is_retiming", "retiming_session", "is_seed", "cost", "contenders", "RETIMING",
           "SEED", "DEFAULT_SEED"]

RETIMING = "retiming"   # the decisions key that tags a re-timing record
# the decisions key of a candidate a task measures first because it is already known
# (a model kernel's default schedule: ``SearchTask.seed_steps``), and its value there
SEED, DEFAULT_SEED = "seed", "default schedule"


def is_seed(record: Record) -> bool:
    """Whether ``record`` measured a task's default schedule (``SEED``): the schedule the
    untuned build uses, which a tuning must not end slower than."""
    d = record.decisions
    return isinstance(d, dict) and d.get(SEED) == DEFAULT_SEED


def is_retiming(record: Record) -> bool:
    """Whether ``record`` is a re-timing of a candidate measured before (module doc)."""
    d = record.decisions
    return isinstance(d, dict) and isinstance(d.get(RETIMING), dict)


def retiming_session(record: Record) -> float:
    """When the re-timing session of a re-timing record started (seconds since the
    epoch, as a result's timestamp); -inf for a plain record."""
    if not is_retiming(record):
        return -math.inf
    start = record.decisions[RETIMING].get("session")
    return float(start) if isinstance(start, (int, float)) and not isinstance(start, bool) \
        else -math.inf


def cost(record: Record) -> float:
    """The seconds per call a record is judged by: the median of a re-timing's costs,
    the mean of a measurement's (+inf for an error)."""
    return record.result.median_cost if is_retiming(record) else record.mean_cost


def real_first(records: list[Record]) -> list[Record]:
    """Emulated timings never compete with real ones: the real records when there are
    any, else the emulated ones (then every figure drawn from them is emulated)."""
    real = [r for r in records if not r.emulated]
    return real if real else list(records)


def rank(record: Record) -> tuple[bool, float]:
    """The order of valid records, best first: real timings before emulated ones (an
    emulated timing says nothing of speed), then the lowest ``cost`` (a re-timing's
    median, a measurement's mean). Sorting by it is stable, so among equals the earliest
    comes first."""
    return (record.emulated, cost(record))


def contenders(records: Iterable[Record]) -> list[Record]:
    """The valid records of ``records`` that compete for the best, in their order: all
    of them, except (per workload) the plain measurements made before its latest valid
    re-timing session started, and the re-timings of a candidate re-timed again later
    (module doc)."""
    valid = [r for r in records if r.result.ok]
    latest: dict[str, float] = {}          # workload key -> its latest session's start
    newest: dict[str, float] = {}          # candidate key -> its latest re-timing's session
    for r in valid:
        if is_retiming(r):
            start = retiming_session(r)
            latest[r.workload.key] = max(start, latest.get(r.workload.key, -math.inf))
            newest[r.key] = max(start, newest.get(r.key, -math.inf))
    if not latest:
        return valid
    return [r for r in valid
            if (retiming_session(r) == newest[r.key] if is_retiming(r)
                else r.result.timestamp >= latest.get(r.workload.key, -math.inf))]


def best_first(records: Iterable[Record]) -> list[Record]:
    """The valid records (ok results) of ``records``, best first: the ``contenders`` by
    ``rank``, then the records they supersede by ``rank`` (ties keep their order, so the
    earliest of equals comes first)."""
    valid = [r for r in records if r.result.ok]
    first = contenders(valid)
    chosen = {id(r) for r in first}
    return sorted(first, key=rank) + sorted((r for r in valid if id(r) not in chosen),
                                            key=rank)


def best_valid(records: Iterable[Record]) -> Record | None:
    """The best valid record of ``records``: ok results only, re-timings superseding
    what they judged (``contenders``), real timings before emulated ones, the lowest
    cost, ties to the earliest; None when none is valid. This is the one answer to "the
    best record": ``best_record`` first keeps one workload and the target's records;
    tunings, comparisons and benchmarks ask it directly."""
    return min(contenders(records), key=rank, default=None)


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
    best = best_valid(valid)   # never None: valid records always leave a contender
    if best is None:
        return None
    warnings.warn(f"best_record: no record of {best.workload!r} was tuned for this target "
                  f"({target.arch}: {' '.join(target.features) or 'no features'}); using one "
                  f"tuned on {best.target.arch} with features "
                  f"{' '.join(best.target.features) or '(none)'}", TargetMismatchWarning,
                  stacklevel=2)
    return best
