"""The tuning loop both searches share: ask a proposer for candidates, measure them, tell
it the results, until the budget is spent.

A search is a ``Proposer`` (MetaSchedule's ``generate_measure_candidates`` /
``notify_runner_results``; here ``next_batch(n)`` / ``update(candidates, results)``): the
templated ``Tuner`` proposes configs, the template-free ``SketchPolicy`` candidates. One
loop, ``tune_loop``, owns everything around them, for one job or for several sharing one
log (the task scheduler picks the job of each round with ``choose``):

- resume: the log's records that belong to a job (its ``belongs``) are told to its
  proposer first, oldest first, and count toward its budget, so nothing is measured twice;
- budgets count records *in the log*, re-read before every round and checked again
  before every append (the measurer's ``Quota``): another writer's records count too;
- a candidate the proposer cannot turn into a measurement (a ScheduleError: a config the
  template cannot build) is an INVALID_SCHEDULE trial without a record; it counts toward
  the budget of this run and toward ``Trial.index``;
- a job stops at its budget, when its proposer has nothing left (an empty batch,
  ``has_next()`` false, or ``dry_rounds`` rounds in a row adding nothing to the log), or
  after ``early_stopping`` trials without a better record;
- accounting (``Tally``): counts, errors, the best record, one ``Trial`` per measurement
  as soon as its record is in the log, and the time split: proposing / measuring, and
  per round the seconds of each phase (``result.RoundTimes``: the proposer's ``clock``
  and the measurer's, when they have one);
- the end (``retime_job``): each job's few best distinct candidates are re-timed,
  interleaved, and logged as re-timing records (``Measurer.retime``), with its default
  schedule when it has one (a model's kernel), unless the job holds fewer than
  ``options.retime_min_trials`` records (then only its best against that default), the
  runner is emulated, or
  the log already holds a re-timing of the job after its last measurement (a resumed
  tuning that measured nothing new). Re-timings are not trials: they count toward no
  budget and resume no proposer;
- the summary: each job's best valid record in the log, other writers' records too
  (``records.best_valid``: a re-timing supersedes what it judged).

Map: Proposer · Job · Tally · tune_loop (and the round it measures) · retime_job.
"""
from __future__ import annotations

import abc
import time
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from tvmlite.schedule.state import ScheduleError
from tvmlite.search.measure.inputs import MeasureErrorNo, MeasureInput, MeasureResult
from tvmlite.search.measure.measurer import Measurer, Quota
from tvmlite.search.options import TuningOptions
from tvmlite.search.records.best import (
    best_first,
    best_valid,
    better,
    is_retiming,
    is_seed,
    retiming_session,
)
from tvmlite.search.records.record import Record
from tvmlite.search.records.workload import Workload
from tvmlite.search.result import PhaseClock, Retimed, RoundTimes, Trial, TuneResult, since

__all__ = ["Proposer", "Job", "Tally", "tune_loop", "record_input", "of_workload",
           "retime_job", "DRY_ROUNDS"]

DRY_ROUNDS = 3   # rounds in a row without a new record before a proposer counts as exhausted
MAX_MSG = 2000   # characters of a ScheduleError kept in an INVALID_SCHEDULE result


def record_input(record: Record) -> MeasureInput:
    """The candidate a record measured (its workload, Steps and decisions)."""
    return MeasureInput(record.workload, record.steps, record.decisions)


def _trial_of(belongs: Callable[[Record], bool]) -> Callable[[Record], bool]:
    """``belongs`` restricted to trials: a re-timing is not one."""
    return lambda record: belongs(record) and not is_retiming(record)


def of_workload(key: str) -> Callable[[Record], bool]:
    """``belongs`` of a job that owns every record of one workload (by key)."""
    return lambda record: record.workload.key == key


class Proposer(abc.ABC):
    """A search as the loop sees it: it proposes candidates and learns their results.

    A candidate is whatever the search works with (a templated config, a MeasureInput);
    ``measure_input`` turns it into what is measured."""

    # rounds in a row that add nothing to the log before the loop calls this proposer
    # exhausted: one that may propose only what the log holds would loop for ever. None
    # for a proposer that never proposes a candidate twice (it ends by ``has_next``).
    dry_rounds: int | None = DRY_ROUNDS

    @abc.abstractmethod
    def next_batch(self, n: int) -> list:
        """Up to ``n`` new candidates; none when the search has nothing left."""

    @abc.abstractmethod
    def update(self, candidates: Sequence[Any], results: Sequence[MeasureResult]) -> Any:
        """Learn from measured candidates (this run's, or the log's on resume)."""

    def measure_input(self, candidate: Any) -> MeasureInput:
        """What to measure for ``candidate`` (here: the candidate itself). A ScheduleError
        makes it an INVALID_SCHEDULE trial without a record."""
        return candidate

    def resume(self, records: Sequence[Record]) -> None:
        """Learn from the log's records of this job, oldest first, before the first round."""
        if records:
            self.update([record_input(r) for r in records], [r.result for r in records])

    def unmeasured(self, candidates: Sequence[Any]) -> None:
        """Candidates proposed but left unmeasured (another writer filled the budget
        first): a proposer that never repeats itself may propose them again."""

    def has_next(self) -> bool:
        """Whether the search may still have new candidates."""
        return True


@dataclass(frozen=True)
class Job:
    """One tuning the loop drives: its proposer, its workload, and its budget of records
    in the log; ``belongs(record)`` says which of the log's records are this job's (they
    resume it, count toward its budget and compete for its best)."""
    proposer: Proposer
    workload: Workload
    budget: int
    belongs: Callable[[Record], bool]


class Tally:
    """The accounting of one tuning into its TuneResult: counts, errors, the best valid
    record of each group (by workload key, or ``group(record)``: a dynamic tuning keeps
    one per size), the early-stopping streak, and one Trial per measurement, given to
    ``callback`` as it is made. ``result.best`` is the group best of highest throughput
    (with one group, the best record)."""

    def __init__(self, result: TuneResult, start: float,
                 callback: Callable[[Trial], None] | None = None,
                 group: Callable[[Record], Any] | None = None):
        self.result, self.start, self.callback = result, start, callback
        self.group = group or (lambda record: record.workload.key)
        self.best: dict[Any, Record] = {}   # group -> its best valid record
        self.stale = 0                      # measurements since the best last improved

    def seed(self, records: Sequence[Record]) -> None:
        """Start from earlier records (the log's, on resume): their bests."""
        for rec in records:
            self._improve(rec)

    def _improve(self, rec: Record) -> bool:
        g = self.group(rec)
        if not better(rec, self.best.get(g)):
            return False
        self.best[g] = rec
        self.result.best = max(self.best.values(), key=lambda r: r.gflops)
        return True

    def add(self, result: MeasureResult, record: Record | None,
            index: int | None = None) -> Trial:
        """Account one measurement (``record`` is its logged record; None for a candidate
        that has none). ``index`` is the Trial's: the job's records in the log then
        (default: this run's measurements so far)."""
        res = self.result
        res.measured += 1
        res.errors[result.error_no.name] += 1
        improved = record is not None and result.ok and self._improve(record)
        self.stale = 0 if improved else self.stale + 1
        trial = Trial(res.measured if index is None else index, time.perf_counter() - self.start,
                      record.gflops if record is not None and result.ok else 0.0,
                      res.best_gflops, result.error_no.name)
        res.trials.append(trial)
        if self.callback is not None:
            self.callback(trial)
        return trial


def tune_loop(jobs: Sequence[Job], measurer: Measurer, options: TuningOptions,
              callback: Callable[[Trial], None] | None = None,
              choose: Callable[[list, list, list], int | None] | None = None,
              total: int | None = None, early_stopping: int | None = None,
              start: float | None = None) -> list[TuneResult]:
    """Tune ``jobs`` through ``measurer`` (open, on the log) round after round; one
    TuneResult per job.

    Each round, ``choose(active, results, done)`` picks the job (None stops; default:
    round-robin over the active jobs): ``active`` says which jobs may still measure,
    ``done`` how many trials each has (its records in the log, and this run's candidates
    without a record). The job's proposer gets ``min(options.measures_per_round, room)``
    to propose, where room is what its budget -- and ``total``, the cap on the records of
    all jobs together -- has left. ``early_stopping`` (default
    ``options.early_stopping``) ends a job after that many trials without a better
    record. ``callback`` gets each Trial as soon as its record is logged; ``start``
    (default: now) is when the tuning began, for ``Trial.elapsed``."""
    start = time.perf_counter() if start is None else start
    stop = options.early_stopping if early_stopping is None else early_stopping
    results = [TuneResult(j.workload) for j in jobs]
    tallies = [Tally(r, start, callback) for r in results]
    quotas = [Quota(_trial_of(j.belongs), j.budget) for j in jobs]
    shared = [Quota(_trial_of(lambda r: any(j.belongs(r) for j in jobs)), total)] \
        if total is not None else []
    unlogged = [0] * len(jobs)      # this run's trials without a record, per job
    dry = [0] * len(jobs)           # rounds in a row that added nothing to the log
    exhausted = [False] * len(jobs)
    for job, tally in zip(jobs, tallies):
        old = sorted((r for r in measurer.known.values()
                      if job.belongs(r) and not is_retiming(r)),
                     key=lambda r: r.result.timestamp)
        job.proposer.resume(old)
        tally.seed(old)

    def trials(i: int) -> int:
        return quotas[i].count(measurer) + unlogged[i]

    def active(i: int, done: list[int]) -> bool:
        over = stop is not None and tallies[i].stale >= stop
        return done[i] < jobs[i].budget and not exhausted[i] and not over \
            and jobs[i].proposer.has_next()

    clocks = [c for c in (getattr(measurer, "clock", None),) if isinstance(c, PhaseClock)]
    rounds = 0
    turn = 0
    while True:
        measurer.refresh()
        done = [trials(i) for i in range(len(jobs))]
        live = [active(i, done) for i in range(len(jobs))]
        if not any(live):
            break
        if choose is not None:
            picked = choose(live, results, list(done))
            if picked is None:
                break
            i = picked
        else:
            i = next(j for j in ((turn + k) % len(jobs) for k in range(len(jobs))) if live[j])
            turn = i + 1
        job = jobs[i]
        t0 = time.perf_counter()
        mine = clocks + [c for c in (getattr(job.proposer, "clock", None),)
                         if isinstance(c, PhaseClock)]
        before = [c.snapshot() for c in mine]
        room = min([job.budget - done[i]] + [q.room(measurer) - sum(unlogged) for q in shared])
        if room <= 0:
            break
        batch = job.proposer.next_batch(min(options.measures_per_round, room))
        t1 = time.perf_counter()
        results[i].search_seconds += t1 - t0
        if not batch:
            exhausted[i] = True
            continue

        def index(i: int = i) -> int:
            return trials(i)

        def invalid(i: int = i) -> None:
            unlogged[i] += 1

        kept, told = _measure(job, batch, measurer, [quotas[i], *shared], tallies[i],
                              index, invalid)
        results[i].measure_seconds += time.perf_counter() - t1
        job.proposer.update(kept, told)
        rounds += 1
        results[i].rounds.append(RoundTimes(rounds, i, len(told), time.perf_counter() - t0,
                                            since(mine, before)))
        if job.proposer.dry_rounds is not None:
            dry[i] = dry[i] + 1 if trials(i) == done[i] else 0
            exhausted[i] = exhausted[i] or dry[i] >= job.proposer.dry_rounds
    measurer.refresh()
    for job, res in zip(jobs, results):   # the best in the log, other writers' records too
        retime_job(job, res, measurer, options)
        logged = [r for r in measurer.logged if job.belongs(r)]
        res.best = best_valid(logged + ([res.best] if res.best is not None else []))
    return results


def retime_job(job: Job, result: TuneResult, measurer: Any, options: TuningOptions) -> None:
    """Re-time the ``options.retime_best`` best distinct candidates of ``job`` in the log
    ``options.retime_rounds`` times, interleaved (``Measurer.retime``), and put them in
    ``result.retimed``, best first (by the median of their re-timings). Candidates are
    ranked by what is known of them: a re-timed candidate by its latest re-timing, the
    others by their measurement. Nothing is re-timed when it is off (0), the job holds
    fewer than ``options.retime_min_trials`` records, the runner is emulated, or the log
    already holds a re-timing session of the job after its last measurement: then that
    session's records are the result's. A job with a default schedule (``is_seed``: a
    model's kernel) always re-times it beside its best, whatever its trials, unless it
    is the best: so a task ends on the default unless a candidate beats it re-timed."""
    if not options.retime_best:
        return
    mine = [r for r in measurer.logged if job.belongs(r)]
    trials = [r for r in mine if not is_retiming(r)]
    retimings = [r for r in mine if is_retiming(r) and r.result.ok]
    last = max((retiming_session(r) for r in retimings), default=None)
    if last is not None and all(r.result.timestamp < last for r in trials):
        done = [r for r in retimings if retiming_session(r) == last]
    else:
        if getattr(getattr(measurer, "runner", None), "emulated", False):
            return
        latest: dict[str, Record] = {}     # candidate key -> what is known of it best
        for r in best_first(trials + retimings):
            if not r.emulated:
                latest.setdefault(r.key, r)
        few = len(trials) < options.retime_min_trials
        top = list(latest.values())[:1 if few else options.retime_best]
        # the task's default schedule is re-timed beside its best, however few the
        # trials: a best that only won by its timing's luck must not replace the
        # schedule the untuned build already has
        seed = next((r for r in latest.values() if is_seed(r)), None)
        if seed is not None and seed.key not in {r.key for r in top}:
            top.append(seed)
        if not top or (few and len(top) < 2):
            return
        t0 = time.perf_counter()
        done = measurer.retime([record_input(r) for r in top], options.retime_rounds)
        result.retime_seconds += time.perf_counter() - t0
    tuned: dict[str, Any] = {}
    for r in trials:
        if r.result.ok:
            tuned.setdefault(r.key, r.gflops)
    result.retimed = tuple(Retimed(r, tuned.get(r.key, 0.0))
                           for r in best_first(done))


def _measure(job: Job, batch: list, measurer: Measurer, quotas: list[Quota], tally: Tally,
             index: Callable[[], int], invalid: Callable[[], None]
             ) -> tuple[list, list[MeasureResult]]:
    """One round's measurements: the candidates measured (or found in the log) and their
    results, in batch order. A candidate without a measure input (ScheduleError) is an
    INVALID_SCHEDULE trial at once; the others are accounted one by one as their records
    reach the log. Candidates left unmeasured because a quota filled (another writer)
    are handed back to the proposer (``unmeasured``) and dropped."""
    inputs: dict[int, MeasureInput] = {}
    results: dict[int, MeasureResult] = {}
    for k, cand in enumerate(batch):
        try:
            inputs[k] = job.proposer.measure_input(cand)
        except ScheduleError as err:
            results[k] = MeasureResult(error_no=MeasureErrorNo.INVALID_SCHEDULE,
                                       error_msg=str(err)[:MAX_MSG])
            invalid()
            tally.add(results[k], None, index())
    measured = measurer.measure(list(inputs.values()),
                                lambda inp, r, rec: tally.add(r, rec, index()), quotas)
    left = []
    for k, r in zip(inputs, measured):
        if r is not None:
            results[k] = r
        else:
            left.append(batch[k])
    if left:
        job.proposer.unmeasured(left)
    kept = sorted(results)
    return [batch[k] for k in kept], [results[k] for k in kept]
