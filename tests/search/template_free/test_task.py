"""SearchTask end to end on small shapes: tuning measures distinct, correct candidates and
keeps the best, resume never re-measures, the scheduler shares a budget."""
import json
from dataclasses import replace

import pytest

from tvmlite import ops
from tvmlite.search.measure.inputs import MeasureErrorNo, MeasureInput
from tvmlite.search.model.cost_model import RandomModel
from tvmlite.search.options import TuningOptions
from tvmlite.search.records.record import load_records
from tvmlite.search.template_free.policy import SketchPolicy
from tvmlite.search.template_free.scheduler import TaskScheduler
from tvmlite.search.template_free.task import SearchTask
from tvmlite.testing.check import check_schedule, evaluate_te, reduction_length, tolerance

QUICK = TuningOptions(population=16, generations=1, measures_per_round=8, number=2, repeat=2,
                      min_repeat_ms=1, seeds_from_best=4)


CASES = [
    ("matmul", (64, 64, 64), {}),
    ("conv2d_nhwc", (1, 14, 14, 16, 16, 3), {"padding": 1}),
    ("depthwise_conv2d_nhwc", (1, 14, 14, 32, 3), {"padding": 1}),
    ("softmax", (64, 256), {}),
    ("norm2", (256, 256), {}),
]


@pytest.mark.parametrize("name,args,kwargs", CASES, ids=[c[0] for c in CASES])
def test_tuning_measures_distinct_correct_candidates_and_keeps_the_best(tmp_path, name, args,
                                                                        kwargs):
    """What a tuning must do, whatever the machine's load: measure ``trials`` distinct
    candidates, none wrong, keep the fastest record as the best, and that best must
    rebuild from the log into a kernel that matches the compute. (Whether it is faster
    than the unscheduled program is a benchmark's question: bench/.)"""
    task = SearchTask(func=ops.OPS[name], args=args, kwargs=kwargs)
    log = tmp_path / "log.jsonl"
    res = task.tune(6, log, replace(QUICK, measures_per_round=4))   # rounds of 4 and 2
    recs = load_records(log)
    assert len(recs) == 6 == res.measured and len({r.key for r in recs}) == 6
    assert not any(r.result.error_no == MeasureErrorNo.WRONG_ANSWER for r in recs)
    valid = [r for r in recs if r.result.ok]
    assert valid and res.best is not None and res.best.result.ok
    assert res.best.key == min(valid, key=lambda r: r.mean_cost).key
    assert res.trials[-1].best_gflops == res.best.gflops
    s, tensors = task.apply_best(log)
    assert tuple(s.steps) == res.best.steps
    rtol, atol = tolerance("float32", reduction_length(tensors))
    check_schedule(s, tensors, lambda *ins: evaluate_te(tensors, ins), rtol=rtol, atol=atol)


def test_apply_best_gives_a_correct_schedule(tmp_path):
    task = SearchTask(func=ops.matmul, args=(32, 32, 32, "float32"))
    log = tmp_path / "mm.jsonl"
    task.tune(8, log, QUICK)
    s, args = task.apply_best(log)
    check_schedule(s, args, lambda a, b: a @ b, rtol=1e-4, atol=1e-4)
    with pytest.raises(LookupError, match="tune it first"):
        SearchTask(func=ops.matmul, args=(16, 16, 16, "float32")).apply_best(log)


def test_resume_measures_only_what_is_missing(tmp_path):
    task = SearchTask(func=ops.matmul, args=(32, 32, 32, "float32"))
    log = tmp_path / "mm.jsonl"
    seen = []
    task.tune(8, log, QUICK)
    res = task.tune(16, log, QUICK, callback=seen.append)
    recs = load_records(log)
    assert len(recs) == 16 and res.measured == 8
    assert len({r.key for r in recs}) == 16            # nothing measured twice
    assert [t.index for t in seen] == list(range(9, 17))
    assert task.tune(16, log, QUICK).measured == 0     # budget already in the log


def test_records_carry_the_sampled_decisions(tmp_path):
    task = SearchTask(func=ops.matmul, args=(32, 32, 32, "float32"))
    log = tmp_path / "mm.jsonl"
    task.tune(4, log, QUICK)
    line = json.loads(log.read_text().splitlines()[0])
    d = line["decisions"]
    assert line["tuner"] == "template-free" and line["seed"] == 0
    assert set(d) == {"sketch", "sketch_desc", "decisions"}
    assert any(k.startswith("tile:") for k in d["decisions"])


def test_same_seed_same_measurements_same_search():
    task = SearchTask(func=ops.matmul, args=(64, 64, 64, "float32"))

    def batches():
        pol = SketchPolicy(task.workload, task.target, RandomModel(seed=1), QUICK, seed=3)
        first = pol.next_batch(6)
        from tvmlite.search.measure.inputs import MeasureResult
        pol.update(first, [MeasureResult(costs=(1e-3 * (i + 1),)) for i in range(len(first))])
        return [i.key for i in first] + [i.key for i in pol.next_batch(6)]

    a, b = batches(), batches()
    assert a == b and len(set(a)) == 12


@pytest.mark.parametrize("name", ["conv_bias_relu", "matmul_tn", "bmm_softmax"])
def test_user_written_computes_tune_correctly(tmp_path, user_computes, name):
    tensors = user_computes[name]
    task = SearchTask.from_tensors(tensors, name=name)
    log = tmp_path / "user.jsonl"
    res = task.tune(5, log, replace(QUICK, measures_per_round=4))
    assert res.best is not None
    assert not any(r.result.error_no == MeasureErrorNo.WRONG_ANSWER for r in load_records(log))
    s, args = task.apply_best(log)
    rtol, atol = tolerance("float32", reduction_length(args))
    check_schedule(s, args, lambda *ins: evaluate_te(args, ins), rtol=rtol, atol=atol)


def test_pretraining_from_logs_teaches_the_model(tmp_path):
    from tvmlite.search.model.cost_model import XGBModel
    from tvmlite.search.template_free.policy import pretrain_from_logs
    log = tmp_path / "mm.jsonl"
    task = SearchTask(func=ops.matmul, args=(32, 32, 32, "float32"))
    task.tune(6, log, QUICK)
    model = XGBModel(seed=0)
    assert pretrain_from_logs(model, [log], task.target) == 6
    assert model.num_programs == 6


def test_task_scheduler_shares_one_budget_and_one_log(tmp_path):
    tasks = [SearchTask(func=ops.matmul, args=(32, 32, 32, "float32")),
             SearchTask(func=ops.softmax, args=(16, 64, "float32"))]
    log = tmp_path / "two.jsonl"
    rounds_of_4 = replace(QUICK, measures_per_round=4)
    for strategy, trials in (("round-robin", 8), ("gradient", 12)):
        log.unlink(missing_ok=True)
        sched = TaskScheduler(tasks, strategy=strategy)
        results = sched.tune(trials, log, rounds_of_4)    # a round each, then the strategy picks
        recs = load_records(log)
        assert len(recs) == trials
        assert {r.workload.key for r in recs} == {t.workload.key for t in tasks}
        assert all(r.best is not None for r in results)


def _lines(log):
    return len(log.read_text().splitlines()) if log.exists() else 0


def test_each_trial_is_in_the_log_when_its_callback_runs(tmp_path):
    """The progress bar ticks per candidate, and a kill loses at most the one being
    timed: when the callback of trial n runs, the log holds exactly n records (with
    batches of 8, the whole batch used to arrive at once)."""
    task = SearchTask(func=ops.matmul, args=(32, 32, 32, "float32"))
    log = tmp_path / "mm.jsonl"
    seen = []
    task.tune(10, log, QUICK, callback=lambda t: seen.append((t.index, _lines(log))))
    assert seen == [(n, n) for n in range(1, 11)]
    tasks = [task, SearchTask(func=ops.softmax, args=(16, 64, "float32"))]
    log2 = tmp_path / "two.jsonl"
    calls = []
    TaskScheduler(tasks, strategy="round-robin").tune(
        12, log2, QUICK, callback=lambda i, t: calls.append(_lines(log2)))
    assert calls == list(range(1, 13))


def test_the_budget_counts_records_another_writer_appends(tmp_path):
    """Another process tuning the same workload into the same log: its records count
    toward --trials as they arrive, so the log ends with exactly the budget."""
    from tvmlite.search.measure.inputs import MeasureResult
    from tvmlite.search.records.record import append_record, make_record
    task = SearchTask(func=ops.matmul, args=(32, 32, 32, "float32"))
    log = tmp_path / "mm.jsonl"
    foreign = [MeasureInput(task.workload, tuple(s.steps)) for s in _splits(task, 5)]

    def other_process(trial):
        if trial.index == 2:            # meanwhile, another tuning appends five records
            for inp in foreign:
                append_record(log, make_record(inp, MeasureResult(costs=(1.0,)),
                                               task.target, tuner="other"))
    res = task.tune(12, log, QUICK, callback=other_process)
    recs = load_records(log)
    assert len(recs) == 12 and sum(r.tuner == "other" for r in recs) == 5
    assert res.measured == 7 and res.trials[-1].index == 12


def _splits(task, n):
    from tvmlite.schedule.schedule import Schedule
    out = []
    for f in (1, 2, 4, 8, 16)[:n]:
        s = Schedule.create(task.workload.outputs)
        s[task.workload.outputs[0]].split("j", factor=f)
        out.append(s)
    return out


def test_bad_arguments_are_clear():
    with pytest.raises(TypeError, match="func="):
        SearchTask()
    with pytest.raises(ValueError, match="trials"):
        SearchTask(func=ops.matmul, args=(8, 8, 8)).tune(0)
    with pytest.raises(ValueError, match="population"):
        TuningOptions(population=0)
    with pytest.raises(ValueError, match="strategy"):
        TaskScheduler([SearchTask(func=ops.matmul, args=(8, 8, 8))], strategy="best")
