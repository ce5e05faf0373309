"""search.extract_tasks: one task per distinct fused kernel with its weight; records
tuned for two tasks are used by tvmlite.build(graph) under apply_history_best."""
from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto as TP  # noqa: E402
from onnx import helper as oh  # noqa: E402
from onnx import numpy_helper as nh  # noqa: E402

import tvmlite  # noqa: E402
from tvmlite import search  # noqa: E402
from tvmlite.frontend import from_onnx  # noqa: E402
from tvmlite.search.records.best import is_retiming, is_seed  # noqa: E402
from tvmlite.search.records.record import load_records  # noqa: E402

RNG = np.random.default_rng(2)


def _graph():
    def w(*s):
        return RNG.standard_normal(s).astype(np.float32)
    nodes = [oh.make_node("MatMul", ["x", "W1"], ["a"]), oh.make_node("Relu", ["a"], ["ra"]),
             oh.make_node("MatMul", ["ra", "W2"], ["b"]), oh.make_node("Relu", ["b"], ["rb"]),
             oh.make_node("MatMul", ["rb", "W3"], ["c"]), oh.make_node("Add", ["c", "x"], ["y"])]
    g = oh.make_graph(nodes, "mlp", [oh.make_tensor_value_info("x", TP.FLOAT, (8, 16))],
                      [oh.make_tensor_value_info("y", TP.FLOAT, None)],
                      [nh.from_array(w(16, 16), n) for n in ("W1", "W2", "W3")])
    m = oh.make_model(g, opset_imports=[oh.make_opsetid("", 17)])
    m.ir_version = 8
    return from_onnx(m)


def test_identical_kernels_are_one_task_with_a_weight():
    tasks = search.extract_tasks(_graph())
    assert [t.weight for t in tasks] == [2, 1]       # matmul+relu twice, matmul+add once
    assert tasks[0].kernel_names == ["k0_matmul", "k1_matmul"]
    assert all(t.constants for t in tasks)            # the weights are declared constants
    sched = search.TaskScheduler(tasks, strategy="round-robin")
    assert sched.weights == [2, 1]


def test_tuned_records_are_found_by_build(tmp_path):
    g = _graph()
    tasks = search.extract_tasks(g)
    log = tmp_path / "mlp.jsonl"
    options = search.TuningOptions(seed=0, repeat=1, number=1, min_repeat_ms=0,
                                   population=32, generations=1, measures_per_round=2,
                                   pretrained=False)
    for t in tasks:
        t.tune(trials=2, log_file=str(log), options=options)
    x = RNG.standard_normal((8, 16)).astype(np.float32)
    plain = tvmlite.build(g)
    with search.apply_history_best(str(log)):
        tuned = tvmlite.build(g)
    assert plain.kernels_without_record == 2 and tuned.kernels_without_record == 0
    assert all(k.record is not None for k in tuned.kernels)
    np.testing.assert_allclose(tuned.run({"x": x})[0], plain.run({"x": x})[0], rtol=1e-4,
                               atol=1e-4)


def test_each_tasks_first_measurement_is_its_default_schedule(tmp_path):
    """A model task measures the schedule the untuned build gives its kernel first, so
    the log always holds it and a tuned model is never slower than the untuned one."""
    task = search.extract_tasks(_graph())[1]
    assert len(task.seed_steps) == 1
    log = tmp_path / "seed.jsonl"
    options = search.TuningOptions(seed=0, repeat=1, number=1, min_repeat_ms=0,
                                   population=16, generations=1, measures_per_round=2,
                                   pretrained=False)
    task.tune(trials=3, log_file=str(log), options=options)
    recs = load_records(str(log))
    assert recs[0].decisions["seed"] == "default schedule" and recs[0].result.ok
    assert tuple(recs[0].steps) == tuple(task.seed_steps[0])
    trials = [r for r in recs if not is_retiming(r)]
    assert sum(1 for r in trials if is_seed(r)) == 1          # measured once as a trial
    # and re-timed at the end beside the best, unless it is the best
    again = [r for r in recs if is_retiming(r)]
    assert all(r.key in {t.key for t in trials} for r in again)
    assert not again or any(is_seed(r) for r in again)


def test_a_model_tunings_rounds_share_the_budget_among_its_tasks():
    from tvmlite.cli.model_tune import ROUND_MAX, ROUND_MIN, round_size
    assert round_size(64, 32) == ROUND_MIN            # every task gets two rounds' worth
    assert round_size(2000, 25) == ROUND_MAX
    assert round_size(400, 20) == 10


def test_kernels_over_the_symbolic_size_are_dynamic_tasks():
    """x (1, L, 16) -> relu(x @ W1) depends on L; z (4, 16) @ W2 does not."""
    nodes = [oh.make_node("MatMul", ["x", "W1"], ["a"]), oh.make_node("Relu", ["a"], ["y"]),
             oh.make_node("MatMul", ["z", "W2"], ["y2"])]
    g = oh.make_graph(nodes, "two", [oh.make_tensor_value_info("x", TP.FLOAT, (1, "L", 16)),
                                     oh.make_tensor_value_info("z", TP.FLOAT, (4, 16))],
                      [oh.make_tensor_value_info("y", TP.FLOAT, None),
                       oh.make_tensor_value_info("y2", TP.FLOAT, None)],
                      [nh.from_array(RNG.standard_normal((16, 16)).astype(np.float32), n)
                       for n in ("W1", "W2")])
    m = oh.make_model(g, opset_imports=[oh.make_opsetid("", 17)])
    m.ir_version = 8
    graph = from_onnx(m, shapes={"x": (1, (1, 40), 16)})
    dyn, static = search.extract_tasks(graph)
    assert dyn.dynamic and not static.dynamic
    assert dyn.size_name == "L" and dyn.sizes[0] == 1 and dyn.sizes[-1] == 40
    assert dyn.workload.size_names == ("L",) or list(dyn.workload.size_names) == ["L"]
    assert static.shapes is None and dyn.seed_steps and static.seed_steps
