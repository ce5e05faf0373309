"""Fixtures of the graph and model CLI tests: a tiny conv model with a heavy epilogue (a SiLU:
x * sigmoid(x)) and its onnxruntime reference, made once per module that uses them."""
from __future__ import annotations

import numpy as np
import pytest


@pytest.fixture(scope="module")
def silu_conv_model():
    """(ModelProto, feeds, onnxruntime's outputs) of conv(1x3x6x6 -> 8 channels, bias)
    -> SiLU -> max pool -> flatten -> gemm: a conv kernel whose epilogue has three nodes
    (bias add, sigmoid, mul), a pool and a classifier."""
    pytest.importorskip("onnx")
    ort = pytest.importorskip("onnxruntime")
    from onnx import TensorProto as TP
    from onnx import helper as oh
    from onnx import numpy_helper as nh
    rng = np.random.default_rng(7)
    nodes = [oh.make_node("Conv", ["x", "W", "B"], ["c"], pads=[1, 1, 1, 1]),
             oh.make_node("Sigmoid", ["c"], ["s"]), oh.make_node("Mul", ["c", "s"], ["a"]),
             oh.make_node("MaxPool", ["a"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
             oh.make_node("Flatten", ["p"], ["f"]),
             oh.make_node("Gemm", ["f", "FW"], ["y"], transB=1)]
    inits = [("W", rng.standard_normal((8, 3, 3, 3))), ("B", rng.standard_normal(8)),
             ("FW", rng.standard_normal((4, 72)))]
    g = oh.make_graph(nodes, "silu", [oh.make_tensor_value_info("x", TP.FLOAT, (1, 3, 6, 6))],
                      [oh.make_tensor_value_info("y", TP.FLOAT, None)],
                      [nh.from_array(np.asarray(v, np.float32), k) for k, v in inits])
    m = oh.make_model(g, opset_imports=[oh.make_opsetid("", 17)])
    m.ir_version = 8
    feeds = {"x": rng.standard_normal((1, 3, 6, 6)).astype(np.float32)}
    sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    return m, feeds, sess.run(None, feeds)


def close(ours, ref) -> bool:
    """Outputs equal within the graph tests' tolerance (differently vectorized code)."""
    return len(ours) == len(ref) and all(
        a.shape == b.shape and np.abs(a - b).max() <= 1e-3 * np.abs(b).max() + 1e-4
        for a, b in zip(ours, ref))


@pytest.fixture(scope="module")
def outputs_close():
    """``close``, for test modules (they cannot import a conftest under importlib mode)."""
    return close
