"""decompositions: the general forms of listed ops as several graph nodes, checked
against numpy through the graph's reference interpreter (``graph.ops.evaluate``) and
onnx's reference implementation; onnx's node tests run them compiled
(test_onnx_node_tests.py)."""
from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto as TP  # noqa: E402
from onnx import helper as oh  # noqa: E402
from onnx.reference import ReferenceEvaluator  # noqa: E402

from tvmlite.frontend import from_onnx  # noqa: E402
from tvmlite.graph.ops import evaluate  # noqa: E402


def _model(node, inputs, outputs, opset=17):
    g = oh.make_graph([node], "m", [oh.make_tensor_value_info(n, t, s) for n, t, s in inputs],
                      [oh.make_tensor_value_info(o, TP.FLOAT, None) for o in outputs])
    m = oh.make_model(g, opset_imports=[oh.make_opsetid("", opset)])
    m.ir_version = 8
    return m


def _interpret(g, feeds):
    env = {**g.constants, **feeds}
    for n in g.nodes:
        env[n.output] = evaluate(n, [env[i] for i in n.inputs if i])
    return [env[o] for o in g.outputs]


def _check(m, feeds):
    got = _interpret(from_onnx(m), feeds)
    want = ReferenceEvaluator(m).run(None, feeds)
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    return from_onnx(m)


rng = np.random.default_rng(0)
x3 = rng.standard_normal((2, 3, 4)).astype(np.float32)


def test_clip_with_run_time_bounds_is_max_then_min():
    m = _model(oh.make_node("Clip", ["x", "lo", "hi"], ["y"]),
               [("x", TP.FLOAT, (2, 3, 4)), ("lo", TP.FLOAT, ()), ("hi", TP.FLOAT, ())], ["y"])
    g = _check(m, {"x": x3, "lo": np.float32(-0.5), "hi": np.float32(0.5)})
    assert [n.op for n in g.nodes] == ["max", "min"]


def test_layer_norm_off_the_last_axis_with_mean_and_inv_std_dev():
    m = _model(oh.make_node("LayerNormalization", ["x", "s", "b"], ["y", "mean", "inv"],
                            axis=1), [("x", TP.FLOAT, (2, 3, 4)), ("s", TP.FLOAT, (3, 4)),
                                      ("b", TP.FLOAT, (3, 4))], ["y", "mean", "inv"])
    g = _check(m, {"x": x3, "s": rng.standard_normal((3, 4)).astype(np.float32),
                   "b": rng.standard_normal((3, 4)).astype(np.float32)})
    assert g.types["mean"].shape == g.types["inv"].shape == (2, 1, 1)


def test_softmax_off_the_last_axis_and_gelu_tanh():
    _check(_model(oh.make_node("Softmax", ["x"], ["y"], axis=1), [("x", TP.FLOAT, (2, 3, 4))],
                  ["y"], opset=13), {"x": x3})
    g = _check(_model(oh.make_node("Gelu", ["x"], ["y"], approximate="tanh"),
                      [("x", TP.FLOAT, (2, 3, 4))], ["y"], opset=20), {"x": x3})
    assert "tanh" in [n.op for n in g.nodes]


def test_batch_norm_in_training_mode_and_with_run_time_weights():
    c = [("s", TP.FLOAT, (3,)), ("b", TP.FLOAT, (3,)), ("m", TP.FLOAT, (3,)),
         ("v", TP.FLOAT, (3,))]
    feeds = {"x": x3, "s": np.ones(3, np.float32), "b": np.zeros(3, np.float32),
             "m": np.full(3, 0.1, np.float32), "v": np.full(3, 2.0, np.float32)}
    _check(_model(oh.make_node("BatchNormalization", ["x", "s", "b", "m", "v"], ["y"]),
                  [("x", TP.FLOAT, (2, 3, 4))] + c, ["y"], opset=15), feeds)
    _check(_model(oh.make_node("BatchNormalization", ["x", "s", "b", "m", "v"],
                               ["y", "rm", "rv"], training_mode=1),
                  [("x", TP.FLOAT, (2, 3, 4))] + c, ["y", "rm", "rv"], opset=15), feeds)


def test_pow_casts_the_exponent_to_the_base_dtype():
    m = _model(oh.make_node("Pow", ["x", "e"], ["y"]),
               [("x", TP.FLOAT, (3,)), ("e", TP.INT64, (3,))], ["y"], opset=15)
    g = _check(m, {"x": np.array([1, 2, 3], np.float32), "e": np.array([4, 5, 6], np.int64)})
    assert [n.op for n in g.nodes] == ["cast", "pow"] and g.types["y"].dtype == "float32"
