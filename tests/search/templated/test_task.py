"""Templates: registration, the task (space, workload, measure input), the dispatch
context (apply_history_best picks the best record; fallback warns), and a sampled
space that builds and matches numpy on every config."""
from __future__ import annotations

import dataclasses
import random
import threading
import warnings

import numpy as np
import pytest

from tvmlite import te
from tvmlite.ops import OPS
from tvmlite.runtime.module import build
from tvmlite.schedule.schedule import Schedule
from tvmlite.search.measure.inputs import MeasureErrorNo, MeasureResult
from tvmlite.search.records.record import (
    RecordWarning,
    TargetMismatchWarning,
    append_record,
    make_record,
)
from tvmlite.search.records.workload import Workload
from tvmlite.search.templated.space import SpaceError
from tvmlite.search.templated.task import (
    TEMPLATES,
    FallbackConfigWarning,
    TemplatedTask,
    TemplateError,
    apply_history_best,
    create,
    template,
)
from tvmlite.target.target import Target
from tvmlite.testing.check import check_schedule


@template("test_templated_matmul")
def matmul_tmpl(cfg, M, N, K, dtype="float32"):
    """A small expert-style template: tiles, an inner-loop order, unroll/vectorize, a knob."""
    A, B, C = OPS["matmul"](M, N, K, dtype)
    s = te.create_schedule(C.op)
    i, j = s[C].op.axis
    (k,) = s[C].op.reduce_axis
    cfg.define_split("tile_i", i, num_outputs=3)
    cfg.define_split("tile_j", j, policy="power2", max_factor=8)
    cfg.define_split("tile_k", k)
    i0, i1, i2 = cfg["tile_i"].apply(s, C, i)
    jo, ji = cfg["tile_j"].apply(s, C, j)
    ko, ki = cfg["tile_k"].apply(s, C, k)
    s[C].reorder(i0, jo, ko, i1, i2, ki, ji)
    cfg.define_reorder("inner", [i1, i2, ki])
    cfg["inner"].apply(s, C, [i1, i2, ki])
    cfg.define_annotate("ann", [i2, ki, ji], policy="try_unroll_vec")
    cfg["ann"].apply(s, C, [i2, ki, ji])
    cfg.define_knob("parallel", [False, True])
    if cfg["parallel"].val:
        s[C].parallel(i0)
    return s, [A, B, C]


def host() -> Target:
    return Target.host()


def records_for(task: TemplatedTask, costs: dict, target: Target | None = None,
                name: str | None = None) -> list:
    """Records of configs ``{index: seconds or None (an error)}``, as a tuner logs them."""
    out = []
    for index, cost in costs.items():
        inp = task.measure_input(task.space.get(index))
        if name is not None:
            inp = dataclasses.replace(inp, decisions={**inp.decisions, "template": name})
        res = MeasureResult(costs=(cost,)) if cost else \
            MeasureResult(error_no=MeasureErrorNo.RUNTIME_CRASH, error_msg="boom")
        out.append(make_record(inp, res, target or host(), tuner="random"))
    return out


def test_task_space_workload_and_measure_input():
    task = create("test_templated_matmul", (16, 16, 16))
    assert set(task.space.knobs) == {"tile_i", "tile_j", "tile_k", "inner", "ann", "parallel"}
    assert len(task.space) == 15 * 4 * 5 * 6 * 12 * 2
    # the compute is the library's matmul, so both searches share the workload key
    assert task.workload.key == Workload.from_op("matmul", 16, 16, 16).key
    assert task.workload.name == "test_templated_matmul"
    assert task.workload.args == {"M": 16, "N": 16, "K": 16, "dtype": "float32"}
    config = task.space.get(1234)
    inp = task.measure_input(config)
    assert inp.workload is task.workload
    assert inp.decisions == {"template": "test_templated_matmul", "config": config.to_json()}
    s, _ = task.instantiate(config)
    assert tuple(s.steps) == inp.steps
    assert create("test_templated_matmul", {"M": 16, "N": 16, "K": 16}).workload == task.workload


def test_sampled_space_is_legal_and_correct():
    """Every sampled config (and the fallback) builds and matches numpy."""
    task = create("test_templated_matmul", (8, 8, 8))
    rng = random.Random(0)
    configs = [task.space.fallback()] + [task.space.random_config(rng) for _ in range(10)]
    for config in configs:
        s, (A, B, C) = task.instantiate(config)
        check_schedule(s, [A, B, C], lambda a, b: a @ b, rtol=1e-5, atol=1e-5)


def test_fallback_warns_and_names_the_template():
    with pytest.warns(FallbackConfigWarning, match="test_templated_matmul.*XGBTuner.*"
                                                   "apply_history_best"):
        s, tensors = matmul_tmpl(16, 16, 16)
    task = create("test_templated_matmul", (16, 16, 16))
    fallback, _ = task.instantiate(task.space.fallback())
    assert s.steps == fallback.steps and len(tensors) == 3


def test_apply_history_best_picks_the_best_record(tmp_path):
    task = create("test_templated_matmul", (16, 16, 16))
    log = tmp_path / "log.jsonl"
    recs = records_for(task, {3: 2e-3, 700: 5e-4, 9001: 1e-3, 42: None})
    recs += records_for(task, {5: 1e-5}, name="another_template")   # same compute, not ours
    for r in recs:
        append_record(log, r)
    for source in (str(log), recs):
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            with apply_history_best(source):
                s, _ = matmul_tmpl(16, 16, 16)
        assert tuple(s.steps) == recs[1].steps


def test_apply_history_best_falls_back_to_other_targets_and_outer_contexts():
    task = create("test_templated_matmul", (16, 16, 16))
    other = dataclasses.replace(host(), features=("made_up_feature",))
    foreign = records_for(task, {11: 1e-4}, target=other)
    outer = records_for(create("test_templated_matmul", (8, 8, 8)), {12: 1e-4})
    with apply_history_best(outer):
        with apply_history_best(foreign):
            with pytest.warns(TargetMismatchWarning, match="made_up_feature"):
                s, _ = matmul_tmpl(16, 16, 16)
            assert tuple(s.steps) == foreign[0].steps
            with warnings.catch_warnings():
                warnings.simplefilter("error")
                s8, _ = matmul_tmpl(8, 8, 8)              # not in the inner log: the outer's
            assert tuple(s8.steps) == outer[0].steps
        with pytest.warns(FallbackConfigWarning, match="in the apply_history_best context"):
            matmul_tmpl(16, 16, 16)


def test_dispatch_context_is_per_thread_and_restored():
    task = create("test_templated_matmul", (16, 16, 16))
    best = records_for(task, {77: 1e-4})
    seen = []

    def other_thread():
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            matmul_tmpl(16, 16, 16)
        seen.extend(w.category for w in caught)

    with apply_history_best(best):
        t = threading.Thread(target=other_thread)
        t.start()
        t.join()
    assert seen == [FallbackConfigWarning]
    with pytest.warns(FallbackConfigWarning):
        matmul_tmpl(16, 16, 16)


def test_stale_records_are_skipped_with_a_warning():
    task = create("test_templated_matmul", (16, 16, 16))
    recs = records_for(task, {100: 1e-4, 200: 2e-4})
    config = recs[0].decisions["config"]
    stale = dataclasses.replace(recs[0], decisions={
        "template": "test_templated_matmul",
        "config": {"index": config["index"], "knobs": {**config["knobs"], "tile_k": [3, 5]}}})
    with apply_history_best([stale, recs[1]]):
        with pytest.warns(RecordWarning, match="no longer fits"):
            s, _ = matmul_tmpl(16, 16, 16)
    assert tuple(s.steps) == recs[1].steps


def test_record_steps_win_when_the_template_changed():
    task = create("test_templated_matmul", (16, 16, 16))
    rec = records_for(task, {100: 1e-4})[0]
    changed = dataclasses.replace(rec, steps=rec.steps[:3])
    with apply_history_best([changed]):
        with pytest.warns(RecordWarning, match="other Steps"):
            s, tensors = matmul_tmpl(16, 16, 16)
    assert tuple(s.steps) == rec.steps[:3]
    assert isinstance(s, Schedule) and s.outputs[0] is tensors[-1]


def test_template_errors():
    with pytest.raises(TemplateError, match="unknown template 'nope'"):
        create("nope", (1,))
    with pytest.raises(TemplateError, match="matmul_tmpl"):
        template("test_templated_matmul")(lambda cfg: None)
    with pytest.raises(TemplateError, match="identifier"):
        template("bad name")
    with pytest.raises(TemplateError, match="first positional"):
        template("test_templated_nocfg")(lambda: None)
    with pytest.raises(TemplateError, match="missing a required argument"):
        create("test_templated_matmul", (16,))
    with pytest.raises(TemplateError, match="tuple of its arguments"):
        create("test_templated_matmul", 16)
    with pytest.raises(TemplateError, match="Target"):
        create("test_templated_matmul", (8, 8, 8), target="x86")
    task = create("test_templated_matmul", (8, 8, 8))
    with pytest.raises(SpaceError, match="Config of this task's space"):
        task.instantiate(create("test_templated_matmul", (8, 8, 8)).space.get(0))
    with pytest.raises(TypeError, match="log path or a list"):
        apply_history_best(3)


def test_template_must_return_a_schedule_and_keep_its_compute():
    @template("test_templated_bad_return")
    def bad_return(cfg, n):
        return OPS["matmul"](n, n, n)

    @template("test_templated_knob_compute")
    def knob_compute(cfg, n):
        cfg.define_knob("size", [n, 2 * n])
        A, B, C = OPS["matmul"](cfg["size"].val, n, n)
        return te.create_schedule(C.op), [A, B, C]

    try:
        with pytest.raises(TemplateError, match=r"must return \(schedule"):
            create("test_templated_bad_return", (8,))
        task = create("test_templated_knob_compute", (8,))
        task.instantiate(task.space.get(0))
        with pytest.raises(TemplateError, match="another compute"):
            task.instantiate(task.space.get(1))
    finally:
        del TEMPLATES["test_templated_bad_return"], TEMPLATES["test_templated_knob_compute"]


def test_a_built_record_runs(tmp_path):
    """The chosen config is a real schedule: it builds and computes the matmul."""
    task = create("test_templated_matmul", (8, 8, 8))
    recs = records_for(task, {1: 3e-4, 2: 1e-4})
    with apply_history_best(recs):
        s, (A, B, C) = matmul_tmpl(8, 8, 8)
    a, b = np.ones((8, 8), "float32"), np.full((8, 8), 2, "float32")
    c = np.zeros((8, 8), "float32")
    build(s, [A, B, C])(a, b, c)
    np.testing.assert_allclose(c, a @ b)
