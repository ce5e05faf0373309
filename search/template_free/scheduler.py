"""Tune several tasks under one trial budget, into one log (Ansor's task scheduler).

Each round gives one task a batch of measurements. ``round-robin`` takes the tasks in
turn. ``gradient`` first gives every task one round, then picks the task whose next round
is expected to cut the objective -- the weighted sum of the tasks' best latencies -- the
most: for task i the estimate is ``w_i * (alpha * backward + (1 - alpha) * forward)``,
where ``backward`` is how fast its best latency fell over its own last ``window`` rounds
and ``forward`` the optimistic guess that latency keeps falling like ``best / rounds``
(Ansor §6). With probability ``eps`` a random task is picked instead, so no task starves
on a flat stretch.

What is shared (``share_models``, on by default): tasks that look alike -- one family
(``families.family_of``: the anchor's kind, conv / depthwise / matmul / pool / reduce /
elementwise, its dtype, and whether it fits in L2) -- share one cost model. It starts
from the shipped pretrained one when ``options.pretrained`` says so (dropped once the
family has ``pretrained.PRIOR_UNTIL`` programs of its own) and trains on every
measurement of every task in the family, each labelled by its throughput over the best
of its own task, so tasks of different sizes are comparable. A task's first round is
then ranked by what its siblings taught the model, not at random. The price: the shared
model retrains on the whole family's programs each round (at most ``max_training``).

When a task stops (``early_stop_rounds``, default ``EARLY_STOP_ROUNDS``): after that many
of its own rounds in a row, and at least ``early_stop_trials`` (``EARLY_STOP_TRIALS``) of
its measurements, without its best latency falling by ``MIN_GAIN``, it is no longer
chosen; the budget it would have used goes to the others (every task may use the whole
budget, so it is spent in full while any task is live), the gradient rule sending it
where the model's time is. When every task that could still measure has stopped,
the tuning ends before the budget is spent: ``ended_early`` says so, and each stopped
task's TuneResult has ``stopped_early``.

The rounds are the shared tuning loop's (``search.tuning.tune_loop``, through
``run_tuning``): the scheduler is its ``choose``; budgets, resume, accounting and the best
records are the loop's.
"""
from __future__ import annotations

import math
import random
from typing import Any, Callable, Sequence

from tvmlite.checks import check_int
from tvmlite.search.measure.measurer import Measurer
from tvmlite.search.options import TuningOptions
from tvmlite.search.result import Trial, TuneResult
from tvmlite.search.template_free.families import group_families
from tvmlite.search.template_free.task import TUNER, SearchTask, run_tuning

STRATEGIES = ("round-robin", "gradient")
# A round is a batch the evolution chose under a model retrained on everything measured
# so far (a model's tuning: up to 16 candidates). Four of them in a row -- up to 64
# candidates, the per-task budget issue 30 aims at -- finding nothing better says the
# search sits at what it can reach; Ansor's per-task early stopping counts rounds too.
EARLY_STOP_ROUNDS = 4
# ... and at least this many measurements: a model of many tasks tuned on a small budget
# has rounds of 2 (cli/model_tune.round_size), and four of them -- 8 candidates -- stopped
# the classifier of a small MobileNet-V2, a third of its time, after 10 trials.
EARLY_STOP_TRIALS = 32
# A new best less than 1% faster is within the timing noise of a shared machine (the
# re-timing at the end moves bests by more): it does not count as progress.
MIN_GAIN = 0.01


def _cost(result: TuneResult) -> float:
    return result.best.mean_cost if result.best is not None else math.inf


class TaskScheduler:
    """Tune ``tasks`` under one budget into one log (module doc). ``weights`` default to
    each task's ``weight``; ``share_models``: one cost model per family of alike tasks;
    ``early_stop_rounds``, ``early_stop_trials``: own rounds and measurements without a
    ``MIN_GAIN`` before a task stops (None rounds: never). After a tuning: ``models``
    (per task), ``stopped``, ``ended_early``."""

    def __init__(self, tasks: Sequence[SearchTask], weights: Sequence[float] | None = None,
                 strategy: str = "gradient", alpha: float = 0.2, window: int = 3,
                 eps: float = 0.05, seed: int = 0, share_models: bool = True,
                 early_stop_rounds: int | None = EARLY_STOP_ROUNDS,
                 early_stop_trials: int = EARLY_STOP_TRIALS):
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
        if not isinstance(share_models, bool):
            raise TypeError(f"TaskScheduler(share_models=...) must be True or False, "
                            f"got {share_models!r}")
        check_int(early_stop_rounds, "TaskScheduler(early_stop_rounds=...)", 1, allow_none=True)
        check_int(early_stop_trials, "TaskScheduler(early_stop_trials=...)", 0)
        # default: each task's ``weight`` (extract_tasks sets how often the model runs it)
        weights = list(weights) if weights is not None else \
            [getattr(t, "weight", 1.0) for t in tasks]
        if len(weights) != len(tasks) or any(not isinstance(w, (int, float)) or w <= 0
                                             for w in weights):
            raise ValueError("TaskScheduler: weights must be one positive number per task")
        self.tasks, self.weights, self.strategy = list(tasks), weights, strategy
        self.alpha, self.window, self.eps, self.seed = alpha, window, eps, seed
        self.share_models, self.early_stop_rounds = share_models, early_stop_rounds
        self.early_stop_trials = early_stop_trials
        # task i's family is that of task family[i] (the first of its kind); alone: itself
        self.family = group_families([t.workload for t in tasks], [t.target for t in tasks]) \
            if share_models else list(range(len(tasks)))
        self._reset(0)

    def _reset(self, total: int) -> None:
        """The state of one tuning (``run``): nothing chosen, nothing stopped."""
        n = len(self.tasks)
        self._total = total
        self.rng = random.Random(self.seed)
        self.history: list[list[float]] = [[] for _ in range(n)]  # best after each own round
        self.rounds: list[int] = []                                # task index per round
        self.models: list[Any] = []          # each task's cost model (one object per family)
        self.stale = [0] * n                 # own rounds in a row without a MIN_GAIN
        self.stale_trials = [0] * n          # ... and the measurements they made
        self.stopped = [False] * n           # early-stopped: no longer chosen
        self.ended_early = False             # every task able to measure had stopped
        self._mark: list[float] = []         # best when the task last gained MIN_GAIN
        self._seen = [0] * n                 # rounds of each task's TuneResult accounted

    def make_models(self, options: TuningOptions) -> list[Any]:
        """One cost model per family (``SearchTask.new_model``), listed per task: the
        tasks of one family get the same object."""
        made: dict[int, Any] = {}
        for i, f in enumerate(self.family):
            if f not in made:
                made[f] = self.tasks[i].new_model(options)
        return [made[f] for f in self.family]

    def tune(self, trials: int, log_file: Any = None, options: TuningOptions | None = None,
             callback: Callable[[int, Trial], None] | None = None) -> list[TuneResult]:
        """Spend ``trials`` measurements in total (the log's earlier records of these
        workloads count); ``callback(task_index, trial)`` sees every measurement."""
        check_int(trials, "TaskScheduler.tune(trials=...)", 1)
        options = options or TuningOptions()
        with options.measurer(log_file, self.tasks[0].target, TUNER) as measurer:
            return self.run(measurer, trials, options, callback)

    def run(self, measurer: Measurer, trials: int, options: TuningOptions,
            callback: Callable[[int, Trial], None] | None = None) -> list[TuneResult]:
        """``tune`` through an open measurer (``tune`` opens the log's)."""
        self._reset(trials)
        self.models = self.make_models(options)
        cb = None if callback is None else (lambda t: callback(self.rounds[-1], t))
        results = run_tuning(self.tasks, [trials] * len(self.tasks), measurer, options, cb,
                             models=self.models, choose=self.choose, total=trials)
        for r, stopped in zip(results, self.stopped):
            r.stopped_early = stopped
        return results

    def choose(self, active: list[bool], results: list[TuneResult],
               done: list[int]) -> int | None:
        """The next task to get a round (the tuning loop's ``choose``), or None when the
        shared budget is spent or every task able to measure has stopped."""
        if not self._mark:       # the first call: the bests the log had (resume)
            self._mark = [_cost(r) for r in results]
        for i, r in enumerate(results):
            if len(r.rounds) > self._seen[i]:      # task i had a round since the last call
                measured = sum(t.measured for t in r.rounds[self._seen[i]:])
                self._seen[i] = len(r.rounds)
                self._account(i, _cost(r), measured)
        if sum(done) >= self._total:
            return None
        live = [i for i, a in enumerate(active) if a and not self.stopped[i]]
        if not live:
            self.ended_early = any(active)
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

    def _account(self, i: int, best: float, measured: int) -> None:
        """Task i's round of ``measured`` candidates ended with ``best``: its history,
        and whether it stops."""
        self.history[i].append(best)
        if best < self._mark[i] * (1 - MIN_GAIN):
            self._mark[i], self.stale[i], self.stale_trials[i] = best, 0, 0
        else:
            self.stale[i] += 1
            self.stale_trials[i] += measured
        stop = self.early_stop_rounds
        self.stopped[i] = stop is not None and self.stale[i] >= stop and \
            self.stale_trials[i] >= self.early_stop_trials

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
