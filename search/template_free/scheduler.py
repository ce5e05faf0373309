"""Tune several tasks under one trial budget, into one log (Ansor's task scheduler).

Each round gives one task a batch of measurements. ``round-robin`` takes the tasks in
turn. ``gradient`` first gives every task one round, then picks the task whose next round
is expected to cut the objective -- the weighted sum of the tasks' best latencies -- the
most: for task i the estimate is ``w_i * (alpha * backward + (1 - alpha) * forward)``,
where ``backward`` is how fast its best latency fell over the last ``window`` rounds and
``forward`` the optimistic guess that latency keeps falling like ``best / rounds``
(Ansor §6). With probability ``eps`` a random task is picked instead, so no task starves
on a flat stretch.

The rounds are the shared tuning loop's (``search.tuning.tune_loop``, through
``run_tuning``): the scheduler is its ``choose``; budgets, resume, accounting and the best
records are the loop's.
"""
from __future__ import annotations

import math
import random
from typing import Any, Callable, Sequence

from tvmlite.checks import check_int
from tvmlite.search.options import TuningOptions
from tvmlite.search.result import Trial, TuneResult
from tvmlite.search.template_free.task import TUNER, SearchTask, run_tuning

STRATEGIES = ("round-robin", "gradient")


class TaskScheduler:
    def __init__(self, tasks: Sequence[SearchTask], weights: Sequence[float] | None = None,
                 strategy: str = "gradient", alpha: float = 0.2, window: int = 3,
                 eps: float = 0.05, seed: int = 0):
        if not tasks or not all(isinstance(t, SearchTask) for t in tasks):
            raise TypeError("TaskScheduler(tasks=...) needs a non-empty list of SearchTask")
        dynamic = [t.workload.name for t in tasks if t.workload.is_dynamic]
        if dynamic:
            raise ValueError(f"TaskScheduler: {', '.join(dynamic)} has a symbolic size; tune "
                             f"it on its own (SearchTask(..., shapes=...).tune), which shares "
                             f"one budget and one model over its sizes")
        if strategy not in STRATEGIES:
            raise ValueError(f"TaskScheduler: strategy must be one of {STRATEGIES}, "
                             f"got {strategy!r}")
        # default: each task's ``weight`` (extract_tasks sets how often the model runs it)
        weights = list(weights) if weights is not None else \
            [getattr(t, "weight", 1.0) for t in tasks]
        if len(weights) != len(tasks) or any(not isinstance(w, (int, float)) or w <= 0
                                             for w in weights):
            raise ValueError("TaskScheduler: weights must be one positive number per task")
        self.tasks, self.weights, self.strategy = list(tasks), weights, strategy
        self.alpha, self.window, self.eps = alpha, window, eps
        self.rng = random.Random(seed)
        self.history: list[list[float]] = [[] for _ in tasks]   # best latency after each round
        self.rounds: list[int] = []                              # task index per round

    def tune(self, trials: int, log_file: Any = None, options: TuningOptions | None = None,
             callback: Callable[[int, Trial], None] | None = None) -> list[TuneResult]:
        """Spend ``trials`` measurements in total (the log's earlier records of these
        workloads count); ``callback(task_index, trial)`` sees every measurement."""
        check_int(trials, "TaskScheduler.tune(trials=...)", 1)
        options = options or TuningOptions()
        self._total = trials
        cb = None if callback is None else (lambda t: callback(self.rounds[-1], t))
        with options.measurer(log_file, self.tasks[0].target, TUNER) as measurer:
            return run_tuning(self.tasks, [trials] * len(self.tasks), measurer, options, cb,
                              choose=self._choose, total=trials)

    def _choose(self, active: list[bool], results: list[TuneResult],
                done: list[int]) -> int | None:
        """The next task to get a round, or None when the shared budget is spent."""
        for i, r in enumerate(results):
            self.history[i].append(r.best.mean_cost if r.best is not None else math.inf)
        live = [i for i, a in enumerate(active) if a]
        if sum(done) >= self._total or not live:
            return None
        unseen = [i for i in live if i not in self.rounds]
        if self.strategy == "round-robin" or unseen:
            i = unseen[0] if unseen else live[len(self.rounds) % len(live)]
        elif self.rng.random() < self.eps:
            i = self.rng.choice(live)
        else:
            i = min(live, key=self._gradient)
        self.rounds.append(i)
        return i

    def _gradient(self, i: int) -> float:
        """d(objective)/d(round) if task i gets the next round (negative = improves)."""
        hist = [c for c in self.history[i] if math.isfinite(c)]
        if not hist:
            return -math.inf                     # nothing valid yet: try it
        best = hist[-1]
        n = max(1, self.rounds.count(i))
        past = hist[-1 - self.window] if len(hist) > self.window else hist[0]
        backward = (best - past) / self.window
        forward = -best / (n + 1)
        return self.weights[i] * (self.alpha * backward + (1 - self.alpha) * forward)
