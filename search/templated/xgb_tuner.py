"""``XGBTuner``: the templated search guided by the shared XGBoost cost model.

The model ranks configs (knob values, loop-nest features or intensity-curve features);
simulated annealing over the space finds the best-predicted unmeasured ones; a plan is
thinned for diversity and topped up with random picks, and replanned every
``plan_size`` measurements. A plan is never longer than the trials left, and with loop-nest
features (each config scored is a lowering) a short plan gets a walk as much shorter: a
4-trial tuning used to lower about 850 configs to pick 4. The ask/tell loop, resume and
records are ``Tuner``'s (tuners.py).
"""
from __future__ import annotations

import heapq
import math
from typing import Sequence

import numpy as np

from tvmlite.checks import check_int, check_number
from tvmlite.schedule.schedule import Schedule
from tvmlite.schedule.state import ScheduleError
from tvmlite.search.model.cost_model import XGBModel
from tvmlite.search.model.features import FEATURE_NAMES, schedule_features
from tvmlite.search.model.pretrained import load_pretrained
from tvmlite.search.records.record import Record
from tvmlite.search.templated.space import Config
from tvmlite.search.templated.task import TemplatedTask
from tvmlite.search.templated.tuners import (
    EPS_GREEDY,
    SA_EARLY_STOP,
    SA_EVALUATIONS,
    SA_FULL_PLAN,
    SA_MIN_POINTS,
    SA_POINTS,
    Tuner,
)

__all__ = ["XGBTuner"]


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
    two-core machine a second thread made a training many times slower (its threads wait
    for a core the measuring process holds).
    """
    name = "xgb"
    _learns = True
    CURVE_COLUMNS = ("vec_hw_vectors", "parallel_per_core", "unroll_len")

    def __init__(self, task: TemplatedTask, plan_size: int = 64, feature_type: str = "itervar",
                 loss_type: str = "rank", num_threads: int | None = None, optimizer: str = "sa",
                 diversity_filter_ratio: float | None = None, seed: int = 0):
        super().__init__(task, seed)
        self.plan_size = check_int(plan_size, "XGBTuner(plan_size=...)", 1)
        if feature_type not in SA_EVALUATIONS:
            raise ValueError(f"XGBTuner(feature_type=...) must be one of "
                             f"{', '.join(SA_EVALUATIONS)}, got {feature_type!r}")
        losses = {"rank": "rank", "reg": "pack-sum"}
        if loss_type not in losses:
            raise ValueError(f"XGBTuner(loss_type=...) must be 'rank' or 'reg', got {loss_type!r}")
        if optimizer != "sa":
            raise ValueError(f"XGBTuner(optimizer=...): only 'sa' (simulated annealing) is "
                             f"implemented, got {optimizer!r}")
        check_number(diversity_filter_ratio, "XGBTuner(diversity_filter_ratio=...)", 1,
                     allow_none=True)
        self.feature_type, self.diversity = feature_type, diversity_filter_ratio
        if num_threads is not None:
            check_int(num_threads, "XGBTuner(num_threads=...)", 1)
        self.model = XGBModel(seed=seed, n_threads=num_threads or 1, loss=losses[loss_type])
        self._features: dict[int, np.ndarray | None] = {}
        self._plan: list[Config] = []
        self._since_plan = 0
        names = list(FEATURE_NAMES)
        self._curve = [names.index(c) for c in names if c.startswith("ai_curve_")] + \
            [names.index(c) for c in self.CURVE_COLUMNS]

    def _prepare(self, options) -> None:
        """Start from the shipped pretrained model (``pretrained_itervar.npz``) when
        ``options.pretrained`` and the model has learnt nothing yet; only the default
        "itervar" features with the "rank" loss have one (knob features do not transfer
        across templates, and "curve" rows are narrower)."""
        if not options.pretrained or self.model.num_programs or \
                self.feature_type != "itervar" or self.model.loss != "rank":
            return
        model = load_pretrained("itervar", n_threads=self.model.n_threads)
        if model is not None:
            self.model = model

    # -- features ---------------------------------------------------------------------------
    def _schedule_row(self, s: Schedule, tensors: list) -> np.ndarray:
        """One fixed-length row from a schedule's per-store features."""
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
        built = [(i, x) for i, c in enumerate(configs) if (x := self.features(c)) is not None]
        out = np.full(len(configs), -np.inf)
        if built:
            out[[i for i, _ in built]] = self.model.predict([x for _, x in built])
        return out

    # -- ask / tell ---------------------------------------------------------------------------
    def _learn(self, measured: list[tuple[Config, float]]) -> None:
        rows = [(x, t) for c, t in measured if (x := self.features(c)) is not None]
        if rows:
            self.model.update([x for x, _ in rows], [t for _, t in rows],
                              [self.task.workload.key] * len(rows))
        self._since_plan += len(measured)

    def _propose(self, n: int) -> list[Config]:
        if not self.model.trained:
            return self._random_unvisited(n)
        if self._since_plan >= self.plan_size or \
                sum(c.index not in self.visited for c in self._plan) < n:
            left = self.plan_size if self.budget is None else \
                self.budget - len(self.throughput)
            self._plan = self._anneal(max(min(self.plan_size, left), n))
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

    def _walk(self, n: int) -> tuple[int, int]:
        """(walkers, model queries) of the walk planning ``n`` configs: the full walk for
        knob features (a query is a vector) or a plan of ``SA_FULL_PLAN``; with loop-nest
        features a shorter plan's share of it (a query is a lowering)."""
        walkers, queries = SA_POINTS, SA_EVALUATIONS[self.feature_type]
        if self.feature_type != "knob" and n < SA_FULL_PLAN:
            walkers = max(SA_MIN_POINTS, walkers * n // SA_FULL_PLAN)
            queries = queries * n // SA_FULL_PLAN
        return min(walkers, len(self.space)), queries

    def _anneal(self, n: int) -> list[Config]:
        """The ``n`` best-predicted unmeasured configs seen by a simulated-annealing walk
        (temperature falling linearly to 0, scaled by the spread of the scores)."""
        keep = int(math.ceil(n * self.diversity)) if self.diversity else n
        walkers, queries = self._walk(n)
        points = [self.space.random_config(self.rng) for _ in range(walkers)]
        scores = self.predict(points)
        top: list[tuple[float, int, Config]] = []      # min-heap of (score, index, config)
        self._keep(top, points, scores, keep)
        steps = max(4, queries // len(points))
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
        xs: list[np.ndarray] = []
        ys: list[float] = []
        groups: list[str] = []
        if self.feature_type == "knob":
            for c, r in self._history_configs(records):
                x = self.features(c)
                if x is not None:    # always: knob features need no build
                    xs.append(x)
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
