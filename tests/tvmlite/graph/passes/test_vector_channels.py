"""graph/passes/vector_channels.py: a conv of 1000 output channels (SqueezeNet's
classifier) computes 1008 and slices them back, its outputs as onnxruntime's, at any
spatial size; a grouped conv, or one whose padding would waste more than ``MAX_WASTE``,
is left as it is."""
from __future__ import annotations

import numpy as np
import pytest

import tvmlite
from tvmlite.graph import optimize
from tvmlite.graph.accuracy import output_error
from tvmlite.graph.passes.vector_channels import MAX_WASTE, VECTOR_CHANNELS

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto as TP  # noqa: E402
from onnx import helper as oh  # noqa: E402
from onnx import numpy_helper as nh  # noqa: E402

from tvmlite.frontend import from_onnx  # noqa: E402


def classifier(tmp_path, channels_out: int, size: int, group: int = 1):
    """(path, model): a 1x1 conv of ``channels_out`` with a bias, a relu and a global
    average pool over a 32-channel size x size input, as SqueezeNet's last layers."""
    rng = np.random.default_rng(0)
    w = (rng.standard_normal((channels_out, 32 // group, 1, 1)) * 0.2).astype(np.float32)
    b = (rng.standard_normal(channels_out) * 0.1).astype(np.float32)
    g = oh.make_graph([oh.make_node("Conv", ["x", "w", "b"], ["c"], group=group),
                       oh.make_node("Relu", ["c"], ["r"]),
                       oh.make_node("GlobalAveragePool", ["r"], ["y"])], "classifier",
                      [oh.make_tensor_value_info("x", TP.FLOAT, [1, 32, size, size])],
                      [oh.make_tensor_value_info("y", TP.FLOAT, [1, channels_out, 1, 1])],
                      [nh.from_array(w, "w"), nh.from_array(b, "b")])
    m = oh.make_model(g, opset_imports=[oh.make_opsetid("", 13)])
    m.ir_version = 8
    path = tmp_path / "classifier.onnx"
    onnx.save(m, str(path))
    return path, m


def _conv_channels(g) -> list[int]:
    return [g.types[n.output].shape[-1] for n in g.nodes if n.op == "conv"]


@pytest.mark.parametrize("size", [13, 1])
def test_a_1000_channel_conv_computes_1008_and_slices_them_off(tmp_path, size):
    """At 13 x 13 and at 1 x 1 alike: the choice never reads the spatial size (a model
    over a symbolic size is optimized at several and its graphs must agree)."""
    path, m = classifier(tmp_path, 1000, size)
    mod = tvmlite.build(from_onnx(path))
    fused = mod.graph
    assert _conv_channels(fused) == [1008] and 1008 % VECTOR_CHANNELS == 0
    (sl,) = [n for n in fused.nodes if n.op == "slice"]
    assert fused.types[sl.output].shape[-1] == 1000
    assert not np.any(fused.constants[next(n for n in fused.nodes if n.op == "conv")
                                      .inputs[1]][..., 1000:])
    x = np.random.default_rng(1).standard_normal((1, 32, size, size)).astype(np.float32)
    want = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]
                                ).run(None, {"x": x})
    assert output_error(mod.run({"x": x}), want).relative < 1e-5


@pytest.mark.parametrize("channels,size,group,why", [
    (100, 13, 1, f"12 padded channels of 100: above {MAX_WASTE:.3f} of the work"),
    (1024, 13, 1, "whole vectors already"),
    (1000, 13, 4, "grouped"),
])
def test_convs_the_padding_would_not_pay_for_are_left(tmp_path, channels, size, group, why):
    path, _ = classifier(tmp_path, channels, size, group)
    fused = optimize(from_onnx(path))
    assert _conv_channels(fused) == [channels], why
    assert not any(n.op == "slice" for n in fused.nodes)
