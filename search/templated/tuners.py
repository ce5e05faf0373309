"""Tuners for templated tasks: which configs of a space to measure next (ask/tell).

Every tuner answers ``next_batch(n)`` with configs it never proposed before (by index)
and learns from ``update(configs, results)``: a ``Proposer`` of the tuning loop both
searches share (``search/tuning.py``). ``tune`` runs that loop through a Measurer, so
records land in the same JSON-lines log as every other measurement, and resumes: the
log's records of this template and workload are fed to ``update`` first and count toward
``n_trial``, so nothing is measured twice.

- ``RandomTuner``: uniform, without repeats. ``GridSearchTuner``: index order.
- ``GATuner``: a genetic algorithm over knob choices (fitness-weighted parents, uniform
  crossover, per-knob mutation, elites kept as parents).
- ``XGBTuner``: the shared XGBoost cost model (rank loss) on knob values, loop-nest
  features or intensity-curve features; simulated annealing over the space picks a plan
  of the best-predicted unmeasured configs, optionally thinned for diversity; replanned
  every ``plan_size`` measurements; a share of random picks keeps the model honest.

A config the template cannot build (a ScheduleError while applying its Steps) counts as
an INVALID_SCHEDULE trial but is not logged: it has no Steps to record.
"""
from __future__ import annotations

import abc
import os
import random
import time
import warnings
from collections.abc import Iterable
from typing import Any, Callable, Sequence

from tvmlite.checks import check_int, check_number
from tvmlite.errors import TvmliteWarning
from tvmlite.search.measure.inputs import MeasureInput, MeasureResult
from tvmlite.search.options import TuningOptions
from tvmlite.search.records.record import Record, RecordWarning, load_records
from tvmlite.search.result import Trial, TuneResult
from tvmlite.search.templated.space import Config, SpaceError
from tvmlite.search.templated.task import TemplatedTask
from tvmlite.search.tuning import Job, Proposer, tune_loop

__all__ = ["Tuner", "RandomTuner", "GridSearchTuner", "GATuner",
           "SmallHistoryWarning", "MIN_HISTORY"]

MIN_HISTORY = 64           # records below which a transferred history is called small
EPS_GREEDY = 0.05          # share of an XGBTuner batch picked at random
SA_POINTS = 128            # parallel walkers of simulated annealing
SA_EVALUATIONS = {"knob": 12_800, "itervar": 2_000, "curve": 2_000}  # model queries per plan
SA_FULL_PLAN = 64          # configs in a plan that gets the whole walk (TVM's plan_size) ...
SA_MIN_POINTS = 16         # ... a shorter plan a share of it, walkers never fewer than this
SA_EARLY_STOP = 30         # annealing steps without a new top config before stopping


class SmallHistoryWarning(TvmliteWarning):
    """load_history got fewer usable records than min_records; they are used anyway."""


class Tuner(Proposer):
    """Ask/tell over the configs of ``task.space``; subclasses implement ``_propose``.
    A proposer of the shared tuning loop (``search.tuning``); ``tune`` runs it."""
    name = "tuner"      # the record's tuner field
    _learns = False     # whether load_history can teach it anything
    dry_rounds = None   # never proposes a config twice: it ends by has_next()

    def __init__(self, task: TemplatedTask, seed: int = 0):
        if not isinstance(task, TemplatedTask):
            raise TypeError(f"{type(self).__name__}(task=...) takes a TemplatedTask "
                            f"(search.templated.create(name, args)), got {type(task).__name__}")
        self.task, self.space = task, task.space
        self.seed = check_int(seed, f"{type(self).__name__}(seed=...)", 0)
        self.rng = random.Random(seed)
        self.visited: set[int] = set()          # indices proposed or measured
        self.budget: int | None = None          # n_trial of the running tune(), if any
        self.throughput: dict[int, float] = {}  # index -> GFLOP/s measured (0 = failed)

    # -- ask / tell -----------------------------------------------------------------------
    def next_batch(self, n: int) -> list[Config]:
        """Up to ``n`` configs never proposed before (fewer once the space runs out)."""
        check_int(n, "next_batch(n=...)", 1)
        out: list[Config] = []
        for c in self._propose(n):
            if c.index not in self.visited and len(out) < n:
                self.visited.add(c.index)
                out.append(c)
        return out

    @abc.abstractmethod
    def _propose(self, n: int) -> list[Config]:
        """Candidates for the next batch (the caller drops visited ones)."""

    def update(self, configs: Sequence[Config], results: Sequence[MeasureResult]) -> None:
        """Learn from measured configs (this run's or a log's)."""
        if len(configs) != len(results):
            raise ValueError(f"update: {len(configs)} configs but {len(results)} results")
        new = []
        for c, r in zip(configs, results):
            if c.index in self.throughput:
                continue
            thr = self.task.workload.flops / r.mean_cost / 1e9 if r.ok else 0.0
            self.visited.add(c.index)
            self.throughput[c.index] = thr
            new.append((c, thr))
        if new:
            self._learn(new)

    def _learn(self, measured: list[tuple[Config, float]]) -> None:
        """Hook for tuners that learn; ``measured`` is (config, GFLOP/s) of new results."""

    def has_next(self) -> bool:
        return len(self.visited) < len(self.space)

    def _random_unvisited(self, n: int, taken: set | None = None) -> list[Config]:
        """``n`` distinct random configs outside ``visited`` (and ``taken``)."""
        taken = set(taken or ()) | self.visited
        left = len(self.space) - len(taken)
        if left <= 4 * n:   # nearly exhausted: list what is left
            rest = [i for i in range(len(self.space)) if i not in taken]
            return [self.space.get(i) for i in self.rng.sample(rest, min(n, len(rest)))]
        out: dict[int, Config] = {}
        while len(out) < n:
            c = self.space.random_config(self.rng)
            if c.index not in taken:
                out.setdefault(c.index, c)
        return list(out.values())

    # -- transfer -------------------------------------------------------------------------
    def load_history(self, records: str | os.PathLike | Iterable[Record],
                     min_records: int = MIN_HISTORY) -> int:
        """Learn from earlier records (other workloads, other runs) before tuning; returns
        how many were used. Fewer than ``min_records`` usable records are still used, with
        a SmallHistoryWarning. Tuners that do not learn say so with the same warning."""
        if isinstance(records, (str, os.PathLike)):
            records = load_records(records)
        records = list(records) if isinstance(records, Iterable) else [None]
        if not all(isinstance(r, Record) for r in records):
            raise TypeError("load_history(records=...) takes a log path or a list of "
                            "search.record.Record")
        check_int(min_records, "load_history(min_records=...)", 0)
        used = self._use_history(records)
        if used < min_records:
            what = "" if self._learns else f"; {type(self).__name__} does not learn from history"
            warnings.warn(f"load_history: {used} usable record(s) of {len(records)}, fewer "
                          f"than min_records={min_records}: a small history, used as it is "
                          f"(the model may mislead the first rounds){what}",
                          SmallHistoryWarning, stacklevel=2)
        return used

    def _use_history(self, records: list[Record]) -> int:
        return 0

    def _history_configs(self, records: list[Record]) -> list[tuple[Config, Record]]:
        """Records of this template whose config fits this space (any workload)."""
        out = []
        for r in records:
            d = r.decisions
            if isinstance(d, dict) and d.get("template") == self.task.name:
                try:
                    out.append((Config.from_json(self.space, d.get("config")), r))
                except SpaceError:
                    continue
        return out

    # -- the proposer the tuning loop drives (search/tuning.py) ----------------------------
    def measure_input(self, candidate: Config) -> MeasureInput:
        """The config's Steps to measure; a ScheduleError (the template cannot build it)
        makes it an INVALID_SCHEDULE trial without a record."""
        return self.task.measure_input(candidate)

    def resume(self, records: Sequence[Record]) -> None:
        """Learn the log's records of this template and workload (oldest first)."""
        # every record the tuning loop passes belongs to the task, so each has a config
        pairs = [(c, r.result) for r in records if (c := self.task.config_of(r)) is not None]
        self.update([c for c, _ in pairs], [res for _, res in pairs])

    def unmeasured(self, candidates: Sequence[Config]) -> None:
        """Configs left unmeasured (the log's budget filled): they may be proposed again."""
        for c in candidates:
            self.visited.discard(c.index)

    def _prepare(self, options: TuningOptions) -> None:
        """Before a tuning starts (XGBTuner: load the pretrained model)."""

    def tune(self, n_trial: int, log_file: Any = None, options: TuningOptions | None = None,
             callback: Callable[[Trial], None] | None = None,
             early_stopping: int | None = None) -> TuneResult:
        """Measure until the log holds ``n_trial`` measurements of this template and
        workload (re-read as records arrive: another process's count too; configs the
        template cannot build count as trials of this run), the space runs out, or
        ``early_stopping`` trials pass without a better config (default:
        ``options.early_stopping``). Each record is logged, and ``callback`` called, as
        soon as it is measured. The loop is the shared one (``search.tuning.tune_loop``)."""
        check_int(n_trial, "tune(n_trial=...)", 1)
        options = TuningOptions() if options is None else options
        if not isinstance(options, TuningOptions):
            raise TypeError(f"tune(options=...) must be a search.TuningOptions, got "
                            f"{type(options).__name__}")
        stop = options.early_stopping if early_stopping is None else \
            check_int(early_stopping, "tune(early_stopping=...)", 1)
        self._prepare(options)
        self.budget = n_trial
        start = time.perf_counter()
        with options.measurer(log_file, self.task.target, self.name) as measurer:
            self._warn_stale(measurer.known.values())
            job = Job(self, self.task.workload, n_trial, self._belongs)
            return tune_loop([job], measurer, options, callback, early_stopping=stop,
                             start=start)[0]

    def _belongs(self, rec: Record) -> bool:
        """Whether a log record counts toward this tuning's budget: a record of this
        template and workload whose config fits the space."""
        try:
            return self.task.config_of(rec) is not None
        except SpaceError:
            return False

    def _warn_stale(self, records: Iterable[Record]) -> None:
        """Warn about the log's records of this template and workload whose config no
        longer fits the space (the template changed): they are ignored."""
        stale = 0
        for rec in records:
            try:
                self.task.config_of(rec)
            except SpaceError:
                stale += 1
        if stale:
            warnings.warn(f"tune: {stale} record(s) of template {self.task.name!r} in the log "
                          "do not fit its current space; ignored", RecordWarning, stacklevel=3)


class RandomTuner(Tuner):
    """Uniformly random configs, never one twice."""
    name = "random"

    def _propose(self, n: int) -> list[Config]:
        return self._random_unvisited(n)


class GridSearchTuner(Tuner):
    """Configs in index order (the first knob varies fastest)."""
    name = "grid"

    def __init__(self, task: TemplatedTask, seed: int = 0):
        super().__init__(task, seed)
        self._cursor = 0

    def _propose(self, n: int) -> list[Config]:
        out: list[Config] = []
        while len(out) < n and self._cursor < len(self.space):
            if self._cursor not in self.visited:
                out.append(self.space.get(self._cursor))
            self._cursor += 1
        return out


class GATuner(Tuner):
    """A genetic algorithm on knob choices. Each generation of ``pop_size`` children comes
    from parents drawn in proportion to their throughput (over the best of their
    workload), among the last generation and the ``elite_num`` best ever; a child takes
    each knob from either parent and mutates it with ``mutation_prob``."""
    name = "ga"
    _learns = True

    def __init__(self, task: TemplatedTask, pop_size: int = 100, elite_num: int = 3,
                 mutation_prob: float = 0.1, seed: int = 0):
        super().__init__(task, seed)
        self.pop_size = min(check_int(pop_size, "GATuner(pop_size=...)", 2),
                            len(self.space))
        self.elite_num = check_int(elite_num, "GATuner(elite_num=...)", 1)
        if self.elite_num > pop_size:
            raise ValueError(f"GATuner(elite_num={elite_num}) must be at most pop_size={pop_size}")
        check_number(mutation_prob, "GATuner(mutation_prob=...)", 0, 1)
        self.mutation_prob = float(mutation_prob)
        self._pending: list[Config] = []
        self._generation: list[tuple[tuple, float]] = []   # (choices, fitness) measured
        self._elites: list[tuple[float, tuple]] = []       # (fitness, choices), best first
        self._best = 0.0

    def _propose(self, n: int) -> list[Config]:
        out: list[Config] = []
        while len(out) < n:
            if not self._pending:
                self._pending = self._next_generation()
                if not self._pending:
                    break
            c = self._pending.pop(0)
            if c.index not in self.visited:
                out.append(c)
        return out

    def _learn(self, measured: list[tuple[Config, float]]) -> None:
        self._best = max([self._best] + [t for _, t in measured])
        self._add_parents([(c.choices, t / self._best if self._best else 0.0)
                           for c, t in measured])

    def _add_parents(self, genes: list[tuple[tuple, float]]) -> None:
        self._generation = (self._generation + genes)[-self.pop_size:]
        pool = {ch: f for f, ch in self._elites}
        pool.update({ch: f for ch, f in genes})
        self._elites = sorted(((f, ch) for ch, f in pool.items()), reverse=True)[:self.elite_num]

    def _next_generation(self) -> list[Config]:
        parents = {ch: f for ch, f in self._generation}
        parents.update({ch: f for f, ch in self._elites})
        if not parents or not any(parents.values()):
            return self._random_unvisited(self.pop_size)
        genes, weights = list(parents), [f + 1e-6 for f in parents.values()]
        sizes = [len(k) for k in self.space.knobs.values()]
        children: dict[int, Config] = {}
        for _ in range(20 * self.pop_size):
            if len(children) >= self.pop_size:
                break
            a, b = self.rng.choices(genes, weights, k=2)
            child = [x if self.rng.random() < 0.5 else y for x, y in zip(a, b)]
            for k, n in enumerate(sizes):
                if n > 1 and self.rng.random() < self.mutation_prob:
                    child[k] = self.rng.randrange(n)
            c = self.space.from_choices(child)
            if c.index not in self.visited:
                children.setdefault(c.index, c)
        missing = self.pop_size - len(children)
        if missing > 0 and self.has_next():
            for c in self._random_unvisited(missing, set(children)):
                children[c.index] = c
        return list(children.values())

    def _use_history(self, records: list[Record]) -> int:
        """Configs of this template that fit the space become parents, with their
        throughput over the best of their workload as fitness."""
        pairs = self._history_configs(records)
        best: dict[str, float] = {}
        for _, r in pairs:
            best[r.workload.key] = max(best.get(r.workload.key, 0.0), r.gflops)
        genes = [(c.choices, r.gflops / best[r.workload.key] if best[r.workload.key] else 0.0)
                 for c, r in pairs]
        self._add_parents(sorted(genes, key=lambda g: g[1])[-self.pop_size:])
        return len(pairs)
