"""Tuners for templated tasks: which configs of a space to measure next (ask/tell).

Every tuner answers ``next_batch(n)`` with configs it never proposed before (by index)
and learns from ``update(configs, results)``; ``tune`` runs that loop through a Measurer,
so records land in the same JSON-lines log as every other measurement, and resumes: the
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
import heapq
import math
import os
import random
import time
import warnings
from collections.abc import Iterable
from typing import Any, Callable, Sequence

import numpy as np

from tvmlite.schedule import Schedule, ScheduleError

from .measure import MeasureErrorNo, MeasureResult
from .options import TuningOptions
from .record import Record, RecordWarning, load_records
from .space import Config, SpaceError
from .task import Trial, TuneResult
from .templated import TemplatedTask

__all__ = ["Tuner", "RandomTuner", "GridSearchTuner", "GATuner", "XGBTuner",
           "SmallHistoryWarning", "MIN_HISTORY"]

MIN_HISTORY = 64           # records below which a transferred history is called small
EPS_GREEDY = 0.05          # share of an XGBTuner batch picked at random
SA_POINTS = 128            # parallel walkers of simulated annealing
SA_EVALUATIONS = {"knob": 12_800, "itervar": 2_000, "curve": 2_000}  # model queries per plan
SA_EARLY_STOP = 30         # annealing steps without a new top config before stopping


class SmallHistoryWarning(UserWarning):
    """load_history got fewer usable records than min_records; they are used anyway."""


def _int_at_least(v: Any, what: str, lo: int = 1) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or v < lo:
        raise ValueError(f"{what} must be an int >= {lo}, got {v!r}")
    return v


class Tuner(abc.ABC):
    """Ask/tell over the configs of ``task.space``; subclasses implement ``_propose``."""
    name = "tuner"      # the record's tuner field
    _learns = False     # whether load_history can teach it anything

    def __init__(self, task: TemplatedTask, seed: int = 0):
        if not isinstance(task, TemplatedTask):
            raise TypeError(f"{type(self).__name__}(task=...) takes a TemplatedTask "
                            f"(search.templated.create(name, args)), got {type(task).__name__}")
        self.task, self.space = task, task.space
        self.seed = _int_at_least(seed, f"{type(self).__name__}(seed=...)", 0)
        self.rng = random.Random(seed)
        self.visited: set[int] = set()          # indices proposed or measured
        self.throughput: dict[int, float] = {}  # index -> GFLOP/s measured (0 = failed)

    # -- ask / tell -----------------------------------------------------------------------
    def next_batch(self, n: int) -> list[Config]:
        """Up to ``n`` configs never proposed before (fewer once the space runs out)."""
        _int_at_least(n, "next_batch(n=...)")
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
        _int_at_least(min_records, "load_history(min_records=...)", 0)
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

    # -- the tuning loop --------------------------------------------------------------------
    def tune(self, n_trial: int, log_file: Any = None, options: TuningOptions | None = None,
             callback: Callable[[Trial], None] | None = None,
             early_stopping: int | None = None) -> TuneResult:
        """Measure until the log holds ``n_trial`` measurements of this template and
        workload, the space runs out, or ``early_stopping`` trials pass without a better
        config (default: ``options.early_stopping``)."""
        _int_at_least(n_trial, "tune(n_trial=...)")
        options = TuningOptions() if options is None else options
        if not isinstance(options, TuningOptions):
            raise TypeError(f"tune(options=...) must be a search.TuningOptions, got "
                            f"{type(options).__name__}")
        stop = options.early_stopping if early_stopping is None else \
            _int_at_least(early_stopping, "tune(early_stopping=...)")
        start = time.perf_counter()
        res = TuneResult(self.task.workload)
        with options.measurer(log_file, self.task.target, self.name) as measurer:
            done = self._resume(measurer, res)
            stale = 0
            while done < n_trial and self.has_next() and (stop is None or stale < stop):
                t0 = time.perf_counter()
                configs = self.next_batch(min(options.measures_per_round, n_trial - done))
                t1 = time.perf_counter()
                res.search_seconds += t1 - t0
                if not configs:
                    break
                results, records = self._measure(configs, measurer)
                res.measure_seconds += time.perf_counter() - t1
                self.update(configs, results)
                for r, rec in zip(results, records):
                    done += 1
                    res.measured += 1
                    res.errors[r.error_no.name] += 1
                    better = rec is not None and r.ok and \
                        (res.best is None or rec.mean_cost < res.best.mean_cost)
                    res.best = rec if better else res.best
                    stale = 0 if better else stale + 1
                    trial = Trial(done, time.perf_counter() - start,
                                  rec.gflops if rec is not None and r.ok else 0.0,
                                  res.best_gflops, r.error_no.name)
                    res.trials.append(trial)
                    if callback is not None:
                        callback(trial)
        return res

    def _resume(self, measurer: Any, res: TuneResult) -> int:
        """Feed the log's records of this task to ``update``; return how many there are."""
        old, stale = [], 0
        for rec in measurer.known.values():
            try:
                config = self.task.config_of(rec)
            except SpaceError:
                stale += 1
                continue
            if config is not None:
                old.append((rec.result.timestamp, config, rec))
        if stale:
            warnings.warn(f"tune: {stale} record(s) of template {self.task.name!r} in the log "
                          "do not fit its current space; ignored", RecordWarning, stacklevel=3)
        old.sort(key=lambda t: t[0])
        self.update([c for _, c, _ in old], [r.result for _, _, r in old])
        res.best = min((r for _, _, r in old if r.result.ok), key=lambda r: r.mean_cost,
                       default=None)
        return len(old)

    def _measure(self, configs: list[Config], measurer: Any) -> tuple[list, list]:
        """Results and records in config order; a config the template cannot build
        becomes an INVALID_SCHEDULE result without a record."""
        inputs, results = {}, {}
        for i, c in enumerate(configs):
            try:
                inputs[i] = self.task.measure_input(c)
            except ScheduleError as err:
                results[i] = MeasureResult(error_no=MeasureErrorNo.INVALID_SCHEDULE,
                                           error_msg=str(err)[:2000])
        for i, r in zip(inputs, measurer.measure(list(inputs.values()))):
            results[i] = r
        records = [measurer.known.get(inputs[i].key) if i in inputs else None
                   for i in range(len(configs))]
        return [results[i] for i in range(len(configs))], records


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
        out = []
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
        self.pop_size = min(_int_at_least(pop_size, "GATuner(pop_size=...)", 2),
                            len(self.space))
        self.elite_num = _int_at_least(elite_num, "GATuner(elite_num=...)")
        if self.elite_num > pop_size:
            raise ValueError(f"GATuner(elite_num={elite_num}) must be at most pop_size={pop_size}")
        if isinstance(mutation_prob, bool) or not isinstance(mutation_prob, (int, float)) \
                or not 0 <= mutation_prob <= 1:
            raise ValueError(f"GATuner(mutation_prob=...) must be in [0, 1], got {mutation_prob!r}")
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


class XGBTuner(Tuner):
    """Model-guided search: XGBoost (the shared cost model) ranks configs, simulated
    annealing over the space finds the best-predicted unmeasured ones.

    ``feature_type``: "knob" (the config's knob values: cheapest, but only records of
    this template and space transfer), "itervar" (the loop-nest features of the built
    schedule, summed and maxed over its stores), or "curve" (the arithmetic-intensity
    curve and the target-relative vector/parallel columns only: the most transferable).
    ``loss_type``: "rank" (pairwise ranking within each workload) or "reg" (the model's
    pack-sum regression). ``diversity_filter_ratio`` r: annealing keeps r * plan_size
    configs and a plan of plan_size is picked from them for score and knob diversity.
    ``num_threads`` of XGBoost default to one: the training sets are small, and on a busy
    two-core machine a second thread made one training 70x slower (4 s instead of 0.06).
    """
    name = "xgb"
    _learns = True
    CURVE_COLUMNS = ("vec_hw_vectors", "parallel_per_core", "unroll_len")

    def __init__(self, task: TemplatedTask, plan_size: int = 64, feature_type: str = "itervar",
                 loss_type: str = "rank", num_threads: int | None = None, optimizer: str = "sa",
                 diversity_filter_ratio: float | None = None, seed: int = 0):
        from .cost_model import XGBModel
        from .features import FEATURE_NAMES
        super().__init__(task, seed)
        self.plan_size = _int_at_least(plan_size, "XGBTuner(plan_size=...)")
        if feature_type not in SA_EVALUATIONS:
            raise ValueError(f"XGBTuner(feature_type=...) must be one of "
                             f"{', '.join(SA_EVALUATIONS)}, got {feature_type!r}")
        losses = {"rank": "rank", "reg": "pack-sum"}
        if loss_type not in losses:
            raise ValueError(f"XGBTuner(loss_type=...) must be 'rank' or 'reg', got {loss_type!r}")
        if optimizer != "sa":
            raise ValueError(f"XGBTuner(optimizer=...): only 'sa' (simulated annealing) is "
                             f"implemented, got {optimizer!r}")
        if diversity_filter_ratio is not None and (
                isinstance(diversity_filter_ratio, bool)
                or not isinstance(diversity_filter_ratio, (int, float))
                or diversity_filter_ratio < 1):
            raise ValueError(f"XGBTuner(diversity_filter_ratio=...) must be None or a number "
                             f">= 1, got {diversity_filter_ratio!r}")
        self.feature_type, self.diversity = feature_type, diversity_filter_ratio
        if num_threads is not None:
            _int_at_least(num_threads, "XGBTuner(num_threads=...)")
        self.model = XGBModel(seed=seed, n_threads=num_threads or 1, loss=losses[loss_type])
        self._features: dict[int, np.ndarray | None] = {}
        self._plan: list[Config] = []
        self._since_plan = 0
        names = list(FEATURE_NAMES)
        self._curve = [names.index(c) for c in names if c.startswith("ai_curve_")] + \
            [names.index(c) for c in self.CURVE_COLUMNS]

    # -- features ---------------------------------------------------------------------------
    def _schedule_row(self, s: Schedule, tensors: list) -> np.ndarray:
        """One fixed-length row from a schedule's per-store features."""
        from .features import schedule_features
        f = schedule_features(s, tensors, self.task.target)
        if self.feature_type == "curve":
            f = f[:, self._curve]
        return np.concatenate([f.sum(axis=0), f.max(axis=0)])[None, :].astype(np.float32)

    def features(self, config: Config) -> np.ndarray | None:
        """The model's input for a config (cached by index); None if it does not build."""
        i = config.index
        if i not in self._features:
            if self.feature_type == "knob":
                self._features[i] = np.asarray([config.to_vector() or [0.0]], np.float32)
            else:
                try:
                    self._features[i] = self._schedule_row(*self.task.instantiate(config))
                except ScheduleError:
                    self._features[i] = None
        return self._features[i]

    def predict(self, configs: Sequence[Config]) -> np.ndarray:
        """Model scores (higher = faster); -inf for configs that do not build."""
        xs = [self.features(c) for c in configs]
        ok = [i for i, x in enumerate(xs) if x is not None]
        out = np.full(len(configs), -np.inf)
        if ok:
            out[ok] = self.model.predict([xs[i] for i in ok])
        return out

    # -- ask / tell ---------------------------------------------------------------------------
    def _learn(self, measured: list[tuple[Config, float]]) -> None:
        rows = [(self.features(c), t) for c, t in measured]
        rows = [(x, t) for x, t in rows if x is not None]
        if rows:
            self.model.update([x for x, _ in rows], [t for _, t in rows],
                              [self.task.workload.key] * len(rows))
        self._since_plan += len(measured)

    def _propose(self, n: int) -> list[Config]:
        if not self.model.trained:
            return self._random_unvisited(n)
        if self._since_plan >= self.plan_size or \
                sum(c.index not in self.visited for c in self._plan) < n:
            self._plan = self._anneal(max(self.plan_size, n))
            self._since_plan = 0
        out: dict[int, Config] = {}
        for _ in range(n):
            if self.rng.random() < EPS_GREEDY:
                for c in self._random_unvisited(1, set(out)):
                    out[c.index] = c
                continue
            while self._plan and (self._plan[0].index in self.visited
                                  or self._plan[0].index in out):
                self._plan.pop(0)
            if self._plan:
                c = self._plan.pop(0)
                out[c.index] = c
        if len(out) < n:
            for c in self._random_unvisited(n - len(out), set(out)):
                out[c.index] = c
        return list(out.values())

    def _neighbor(self, config: Config) -> Config:
        """The config with one knob (of more than one choice) changed at random."""
        sizes = [len(k) for k in self.space.knobs.values()]
        movable = [k for k, s in enumerate(sizes) if s > 1]
        if not movable:
            return config
        k = self.rng.choice(movable)
        choices = list(config.choices)
        choices[k] = (choices[k] + self.rng.randrange(1, sizes[k])) % sizes[k]
        return self.space.from_choices(choices)

    def _anneal(self, n: int) -> list[Config]:
        """The ``n`` best-predicted unmeasured configs seen by a simulated-annealing walk
        (temperature falling linearly to 0, scaled by the spread of the scores)."""
        keep = int(math.ceil(n * self.diversity)) if self.diversity else n
        points = [self.space.random_config(self.rng) for _ in range(min(SA_POINTS,
                                                                         len(self.space)))]
        scores = self.predict(points)
        top: list[tuple[float, int, Config]] = []      # min-heap of (score, index, config)
        self._keep(top, points, scores, keep)
        steps = max(4, SA_EVALUATIONS[self.feature_type] // len(points))
        rng = np.random.default_rng(self.rng.randrange(2**32))
        stale = 0
        for step in range(steps):
            temp = 1.0 - step / steps
            cands = [self._neighbor(p) for p in points]
            new = self.predict(cands)
            finite = scores[np.isfinite(scores)]
            scale = float(finite.std()) if finite.size > 1 and finite.std() > 0 else 1.0
            with np.errstate(invalid="ignore", over="ignore"):
                accept = (new >= scores) | (rng.random(len(points)) <
                                            np.exp((new - scores) / (scale * temp)))
            points = [c if a else p for c, p, a in zip(cands, points, accept)]
            scores = np.where(accept, new, scores)
            stale = 0 if self._keep(top, cands, new, keep) else stale + 1
            if stale >= SA_EARLY_STOP:
                break
        ranked = [c for _, _, c in sorted(top, key=lambda t: (-t[0], t[1]))]
        return self._diverse(ranked, n) if self.diversity else ranked

    def _keep(self, top: list, configs: list[Config], scores: np.ndarray, n: int) -> bool:
        """Push unmeasured configs into the top-n heap; True if any got in."""
        inside = {i for _, i, _ in top}
        changed = False
        for c, s in zip(configs, scores):
            if not np.isfinite(s) or c.index in self.visited or c.index in inside:
                continue
            if len(top) < n:
                heapq.heappush(top, (float(s), c.index, c))
            elif s > top[0][0]:
                inside.discard(heapq.heapreplace(top, (float(s), c.index, c))[1])
            else:
                continue
            inside.add(c.index)
            changed = True
        return changed

    def _diverse(self, ranked: list[Config], n: int) -> list[Config]:
        """Greedy pick: each step takes the config with the highest rank score (1 for the
        best-predicted, falling linearly) plus the share of its knob values no picked
        config has yet."""
        seen: set = set()
        left = list(enumerate(ranked))
        picked: list[Config] = []
        while left and len(picked) < n:
            def gain(item: tuple[int, Config]) -> float:
                r, c = item
                new = sum((k, v) not in seen for k, v in enumerate(c.choices))
                return (1 - r / len(ranked)) + new / max(1, len(c.choices))
            best = max(left, key=gain)
            left.remove(best)
            picked.append(best[1])
            seen.update(enumerate(best[1].choices))
        return picked

    # -- transfer ---------------------------------------------------------------------------
    def _use_history(self, records: list[Record]) -> int:
        """Pretrain the model: knob features from records of this template that fit the
        space; loop-nest/curve features from any record whose Steps replay."""
        xs, ys, groups = [], [], []
        if self.feature_type == "knob":
            for c, r in self._history_configs(records):
                xs.append(self.features(c))
                ys.append(r.gflops)
                groups.append(r.workload.key)
        else:
            for r in records:
                try:
                    s = Schedule.from_steps(r.workload.outputs, r.steps)
                    xs.append(self._schedule_row(s, list(r.workload.tensors)))
                except ScheduleError:
                    continue
                ys.append(r.gflops)
                groups.append(r.workload.key)
        if xs:
            self.model.pretrain(xs, ys, groups)
        return len(xs)
