"""TaskScheduler: alike tasks share one cost model trained on all their records; a task
whose best stalls stops getting rounds, its budget going to the others; when all stop the
tuning ends early and says so. Measured through a fake measurer (no compiling): each
task's cost is a function of how many of its records the log holds."""
from __future__ import annotations

from collections import Counter

import pytest

from tvmlite import ops
from tvmlite.search.measure.inputs import MeasureResult
from tvmlite.search.model.pretrained import PRIOR_UNTIL
from tvmlite.search.options import TuningOptions
from tvmlite.search.records.record import make_record
from tvmlite.search.template_free.scheduler import (
    EARLY_STOP_ROUNDS,
    EARLY_STOP_TRIALS,
    TaskScheduler,
)
from tvmlite.search.template_free.task import SearchTask
from tvmlite.target.target import Target

OPTS = TuningOptions(population=8, generations=1, measures_per_round=2, seeds_from_best=2,
                     pretrained=False, retime_best=0)


def flat(n: int) -> float:
    """Every candidate takes 1 ms: the best never improves after the first round."""
    return 1e-3


def falling(n: int) -> float:
    """The n-th record takes 1 ms / (n + 1): every round finds a better one."""
    return 1e-3 / (n + 1)


class CostMeasurer:
    """What the tuning loop needs of a Measurer, without compiling: the log in memory,
    each candidate's cost ``costs[workload key](records of that workload so far)``, quotas
    checked before every append as the real one does."""

    def __init__(self, costs: dict):
        self.costs = costs
        self.target = Target.host()
        self.known: dict = {}
        self.logged: list = []

    def refresh(self) -> int:
        return 0

    def measure(self, inputs, on_result=None, quotas=()):
        out = []
        for inp in inputs:
            if inp.key in self.known:
                out.append(self.known[inp.key].result)
                continue
            if any(q.room(self) <= 0 for q in quotas):
                out.append(None)
                continue
            n = sum(r.workload.key == inp.workload.key for r in self.logged)
            res = MeasureResult(costs=(self.costs[inp.workload.key](n),))
            rec = make_record(inp, res, self.target, "fake")
            self.logged.append(rec)
            self.known[rec.key] = rec
            if on_result is not None:
                on_result(inp, res, rec)
            out.append(res)
        return out

    def per_task(self) -> Counter:
        return Counter(r.workload.key for r in self.logged)


def tasks3() -> list[SearchTask]:
    """Two alike matmuls (one family) and a softmax (another)."""
    return [SearchTask(func=ops.matmul, args=(8, 8, 8)),
            SearchTask(func=ops.matmul, args=(8, 8, 16)),
            SearchTask(func=ops.softmax, args=(4, 16))]


def test_alike_tasks_get_one_model_trained_on_both_tasks_records():
    tasks = tasks3()
    sched = TaskScheduler(tasks, strategy="round-robin")
    models = sched.make_models(OPTS)
    assert models[0] is models[1] and models[2] is not models[0]
    measurer = CostMeasurer({t.workload.key: falling for t in tasks})
    sched.run(measurer, 12, OPTS)
    shared = sched.models[0]
    assert shared is sched.models[1] and shared is not sched.models[2]
    counts = measurer.per_task()
    mm = {t.workload.key: counts[t.workload.key] for t in tasks[:2]}
    assert all(mm.values())
    assert shared.task_programs == mm              # both matmuls' records, and only theirs
    assert sched.models[2].task_programs == {tasks[2].workload.key: counts[tasks[2].workload.key]}


def test_without_sharing_every_task_has_its_own_model():
    models = TaskScheduler(tasks3(), share_models=False).make_models(OPTS)
    assert len({id(m) for m in models}) == 3


def test_a_family_starts_from_the_pretrained_model_once():
    models = TaskScheduler(tasks3()).make_models(TuningOptions(pretrained=True))
    assert models[0] is models[1]
    assert models[0].prior_until == PRIOR_UNTIL and models[0].num_programs > 0


def test_a_stalled_task_stops_and_the_others_spend_its_budget():
    tasks = tasks3()[:2]
    a, b = (t.workload.key for t in tasks)
    sched = TaskScheduler(tasks, strategy="round-robin", early_stop_rounds=2,
                          early_stop_trials=0)
    measurer = CostMeasurer({a: flat, b: falling})
    results = sched.run(measurer, 20, OPTS)
    counts = measurer.per_task()
    # a: a round that set its best, then two without a gain -> stopped after 3 rounds
    assert counts[a] == 3 * OPTS.measures_per_round and len(sched.history[0]) == 3
    assert sum(counts.values()) == 20                # the budget is spent in full, on b
    assert sched.stopped == [True, False] and not sched.ended_early
    assert [r.stopped_early for r in results] == [True, False]


def test_a_stopped_task_is_not_chosen_even_at_random():
    tasks = tasks3()[:2]
    a, b = (t.workload.key for t in tasks)
    sched = TaskScheduler(tasks, eps=1.0, early_stop_rounds=1, early_stop_trials=0,
                          seed=3)   # always random
    measurer = CostMeasurer({a: flat, b: falling})
    sched.run(measurer, 16, OPTS)
    # a: a first round, one without a gain, then never again
    assert sched.rounds.count(0) == 2 and sched.stopped == [True, False]
    assert sum(measurer.per_task().values()) == 16


def test_when_every_task_has_stopped_the_tuning_ends_early_and_says_so():
    tasks = tasks3()[:2]
    sched = TaskScheduler(tasks, early_stop_rounds=2, early_stop_trials=0)
    measurer = CostMeasurer({t.workload.key: flat for t in tasks})
    results = sched.run(measurer, 40, OPTS)
    assert sum(measurer.per_task().values()) == 2 * 3 * OPTS.measures_per_round < 40
    assert sched.ended_early and all(r.stopped_early for r in results)
    off = TaskScheduler(tasks, early_stop_rounds=None)
    measurer = CostMeasurer({t.workload.key: flat for t in tasks})
    off.run(measurer, 16, OPTS)
    assert sum(measurer.per_task().values()) == 16 and not off.ended_early


def test_gains_below_the_noise_do_not_keep_a_task_alive_nor_do_few_trials_stop_it():
    """A best that improves by 0.1% a round is flat; with rounds of 2 it stops after
    EARLY_STOP_ROUNDS rounds only once they measured ``early_stop_trials`` candidates."""
    tasks = tasks3()[:1]
    sched = TaskScheduler(tasks, early_stop_trials=12)
    key = tasks[0].workload.key
    measurer = CostMeasurer({key: lambda n: 1e-3 * 0.9995 ** n})
    sched.run(measurer, 60, OPTS)
    per_round = OPTS.measures_per_round
    assert sched.stopped == [True]
    assert len(measurer.logged) == (1 + max(EARLY_STOP_ROUNDS, 12 // per_round)) * per_round
    assert TaskScheduler(tasks).early_stop_trials == EARLY_STOP_TRIALS


def test_bad_arguments_are_clear():
    with pytest.raises(ValueError, match="early_stop_rounds"):
        TaskScheduler(tasks3(), early_stop_rounds=0)
    with pytest.raises(ValueError, match="early_stop_trials"):
        TaskScheduler(tasks3(), early_stop_trials=-1)
    with pytest.raises(TypeError, match="share_models"):
        TaskScheduler(tasks3(), share_models="yes")
