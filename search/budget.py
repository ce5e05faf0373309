"""One model budget over static and dynamic tasks: ``split_budget`` and ``tune_model``.

A model with a symbolic dimension has static tasks (kernels without it), which the
gradient ``TaskScheduler`` tunes together, and dynamic tasks (``task.dynamic``: over the
size, tuned once for its range by the dynamic search). The scheduler cannot mix them (a
dynamic task's search is not a round-by-round policy), so the budget is split first, by
a rule simple enough to say in one line: **each task's share is proportional to its
weight times the measurements one of its candidates costs** -- 1 for a static task, the
number of representative sizes for a dynamic one (its candidates are measured at several
sizes; ``len(task.sizes)`` bounds it) -- and a dynamic task gets at least one
measurement per size, which its search needs. The static shares go to the scheduler as
one budget (it spends them by its own gradient); each dynamic task is tuned with its
share. Leftovers from rounding go to the largest share.
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

from tvmlite.search.options import TuningOptions
from tvmlite.search.result import Trial, TuneResult
from tvmlite.search.template_free.scheduler import TaskScheduler

__all__ = ["split_budget", "tune_model"]


def _cost(task: Any) -> int:
    return len(task.sizes) if getattr(task, "dynamic", False) else 1


def split_budget(tasks: Sequence[Any], trials: int) -> list[int]:
    """Each task's trials (see the module docstring); they sum to ``trials``. A budget
    too small for one measurement per size of every dynamic task and one per static
    task is a ValueError saying how much is needed."""
    if isinstance(trials, bool) or not isinstance(trials, int) or trials < 1:
        raise ValueError(f"split_budget: trials must be a positive int, got {trials!r}")
    if not tasks:
        return []
    floor = [_cost(t) for t in tasks]
    if sum(floor) > trials:
        raise ValueError(f"--trials {trials} is too small for this model: its "
                         f"{len(tasks)} task(s) need at least {sum(floor)} (one measurement "
                         f"per task, and per size of each dynamic task)")
    raw = [t.weight * _cost(t) for t in tasks]
    total = sum(raw)
    shares = [max(f, int(trials * r / total)) for f, r in zip(floor, raw)]
    while sum(shares) > trials:   # the floors took more than their proportion
        i = max(range(len(shares)), key=lambda j: shares[j] - floor[j])
        shares[i] -= 1
    shares[max(range(len(shares)), key=lambda j: shares[j])] += trials - sum(shares)
    return shares


def tune_model(tasks: Sequence[Any], trials: int, log_file: Any,
               options: TuningOptions | None = None,
               callback: Callable[[int, Trial], None] | None = None,
               seed: int = 0) -> list[TuneResult]:
    """Tune a model's tasks under one budget of ``trials``: the static ones with the
    TaskScheduler (their shares summed), then each dynamic one with its share. Results
    and ``callback(task index, trial)`` are in the order of ``tasks``."""
    options = options or TuningOptions()
    shares = split_budget(tasks, trials)
    static = [i for i, t in enumerate(tasks) if not getattr(t, "dynamic", False)]
    results: dict[int, TuneResult] = {}
    if static:
        def on_static(j: int, trial: Trial) -> None:
            if callback is not None:
                callback(static[j], trial)
        sched = TaskScheduler([tasks[i] for i in static], seed=seed)
        for i, r in zip(static, sched.tune(sum(shares[i] for i in static), log_file,
                                           options, on_static)):
            results[i] = r
    for i, t in enumerate(tasks):
        if i in results:
            continue

        def on_dynamic(trial: Trial, i: int = i) -> None:
            if callback is not None:
                callback(i, trial)
        results[i] = t.tune(shares[i], log_file, options, on_dynamic)
    return [results[i] for i in range(len(tasks))]
