"""Hypothesis draws small random graphs from the supported ops (convs, pools,
elementwise and broadcast ops, transposes, reshapes, residual adds, and the ops the
NHWC layout renumbers: concat, softmax over channels, reductions, pads, slices) and
compares tvmlite's outputs with onnxruntime's."""
from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from onnx import TensorProto as TP  # noqa: E402
from onnx import helper as oh  # noqa: E402
from onnx import numpy_helper as nh  # noqa: E402

from tvmlite.frontend import from_onnx  # noqa: E402
from tvmlite.graph.build import build_graph  # noqa: E402

UNARY = ["Relu", "Sigmoid", "Tanh", "Erf", "Abs", "HardSwish", "HardSigmoid", "LeakyRelu"]
STEPS = UNARY + ["Conv", "DepthwiseConv", "MaxPool", "AveragePool", "AddConst", "MulConst",
                 "Transpose", "Residual", "Softmax", "SoftmaxC", "Concat", "ReduceMean",
                 "PadPool", "SliceC", "Reshape"]


@st.composite
def graphs(draw):
    c = draw(st.sampled_from([2, 4]))
    hw = draw(st.sampled_from([4, 6, 8]))
    steps = draw(st.lists(st.sampled_from(STEPS), min_size=2, max_size=5))
    seed = draw(st.integers(0, 2**16))
    rng = np.random.default_rng(seed)
    nodes, inits = [], []
    shape = [1, c, hw, hw]
    cur, history = "x", {"x": tuple(shape)}
    for i, step in enumerate(steps):
        out = f"v{i}"
        if step in UNARY:
            nodes.append(oh.make_node(step, [cur], [out]))
        elif step in ("Conv", "DepthwiseConv"):
            co = shape[1] if step == "DepthwiseConv" else draw(st.sampled_from([2, 4, 6]))
            group = shape[1] if step == "DepthwiseConv" else 1
            k = draw(st.sampled_from([1, 3]))
            w = rng.standard_normal((co, shape[1] // group, k, k)).astype(np.float32)
            inits.append(nh.from_array(w, f"w{i}"))
            nodes.append(oh.make_node("Conv", [cur, f"w{i}"], [out], group=group,
                                      pads=[k // 2] * 4))
            shape[1] = co
        elif step in ("MaxPool", "AveragePool"):
            if min(shape[2:]) < 2:     # a window larger than the input: refused
                continue
            nodes.append(oh.make_node(step, [cur], [out], kernel_shape=[2, 2], strides=[2, 2]))
            shape[2] //= 2
            shape[3] //= 2
        elif step in ("AddConst", "MulConst"):
            v = rng.standard_normal((shape[1], 1, 1)).astype(np.float32)
            inits.append(nh.from_array(v, f"c{i}"))
            nodes.append(oh.make_node(step[:3], [cur, f"c{i}"], [out]))
        elif step == "Transpose":
            nodes.append(oh.make_node("Transpose", [cur], [out], perm=[0, 1, 3, 2]))
            shape[2], shape[3] = shape[3], shape[2]     # not square after a Reshape
        elif step == "Residual":
            same = [v for v, s in history.items() if s == tuple(shape) and v != cur]
            if not same:
                continue
            nodes.append(oh.make_node("Add", [cur, draw(st.sampled_from(same))], [out]))
        elif step == "Softmax":
            nodes.append(oh.make_node("Softmax", [cur], [out], axis=-1))
        # the ops the NHWC layout pass renumbers, converts around or reads through
        elif step == "SoftmaxC":
            nodes.append(oh.make_node("Softmax", [cur], [out], axis=1))
        elif step == "Concat":
            same = [v for v, s in history.items() if s[2:] == tuple(shape[2:])]
            other = draw(st.sampled_from(same))
            nodes.append(oh.make_node("Concat", [cur, other], [out], axis=1))
            shape[1] += history[other][1]
        elif step == "ReduceMean":
            nodes.append(oh.make_node("ReduceMean", [cur], [out], axes=[2, 3], keepdims=1))
            shape[2] = shape[3] = 1
        elif step == "PadPool":     # asymmetric pads: an explicitly padded copy
            nodes.append(oh.make_node("AveragePool", [cur], [out], kernel_shape=[3, 3],
                                      pads=[1, 0, 1, 2]))
        elif step == "SliceC":
            if shape[1] < 2:
                continue
            for name, v in (("st", [0]), ("en", [shape[1] // 2]), ("ax", [1])):
                inits.append(oh.make_tensor(f"{name}{i}", TP.INT64, (1,), v))
            nodes.append(oh.make_node("Slice", [cur, f"st{i}", f"en{i}", f"ax{i}"], [out]))
            shape[1] //= 2
        elif step == "Reshape":      # order-dependent: the layout converts around it
            inits.append(oh.make_tensor(f"s{i}", TP.INT64, (4,),
                                        [1, shape[1] * shape[2], shape[3], 1]))
            nodes.append(oh.make_node("Reshape", [cur, f"s{i}"], [out]))
            shape = [1, shape[1] * shape[2], shape[3], 1]
        cur = out
        history[cur] = tuple(shape)
    if cur == "x":
        nodes.append(oh.make_node("Relu", ["x"], ["v_last"]))
        cur = "v_last"
    g = oh.make_graph(nodes, "random", [oh.make_tensor_value_info("x", TP.FLOAT, (1, c, hw, hw))],
                      [oh.make_tensor_value_info(cur, TP.FLOAT, None)], inits)
    m = oh.make_model(g, opset_imports=[oh.make_opsetid("", 17)])
    m.ir_version = 8
    return m, rng.standard_normal((1, c, hw, hw)).astype(np.float32)


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(graphs())
def test_random_graph_matches_onnxruntime(case):
    m, x = case
    ours = build_graph(from_onnx(m), quiet=True).run({"x": x})[0]
    ref = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]
                               ).run(None, {"x": x})[0]
    assert ours.shape == ref.shape
    assert np.abs(ours - ref).max() <= 1e-3 * np.abs(ref).max() + 1e-4
