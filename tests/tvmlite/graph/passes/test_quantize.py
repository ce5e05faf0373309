"""The QDQ fold (graph/passes/quantize.py): models quantized by onnxruntime's
quantize_static (QDQ format) on random calibration data become integer kernels, and
give onnxruntime's outputs within one quantization step (onnx's reference evaluator's
where onnxruntime's u8 x s8 kernels saturate: testing/onnx_reference.py); what does not match stays
correct as float kernels."""
from __future__ import annotations

import re

import numpy as np
import pytest

pytest.importorskip("onnxruntime")
quantization = pytest.importorskip("onnxruntime.quantization")
import onnx  # noqa: E402
from onnx import TensorProto as TP  # noqa: E402
from onnx import helper as oh  # noqa: E402
from onnx import numpy_helper as nh  # noqa: E402

from tvmlite.frontend import from_onnx  # noqa: E402
from tvmlite.graph import optimize  # noqa: E402
from tvmlite.graph.build import build_graph  # noqa: E402
from tvmlite.graph.passes import fold_qdq  # noqa: E402
from tvmlite.graph.passes.zero_points import channel_padding  # noqa: E402
from tvmlite.target.intrinsics import best_intrinsic  # noqa: E402
from tvmlite.testing.onnx_reference import reference_outputs  # noqa: E402

RNG = np.random.default_rng(5)
SHAPE = (1, 3, 10, 10)


def _w(*shape: int) -> np.ndarray:
    return (RNG.standard_normal(shape) * 0.3).astype(np.float32)


def _float_model() -> onnx.ModelProto:
    """A few convs (plain, depthwise, strided 1x1), a max pool before a conv (NHWC, so the
    layout pass meets an integer conv reading an NHWC value), a residual add, a global
    pool and a Gemm."""
    nodes = [oh.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]),
             oh.make_node("Relu", ["c1"], ["r1"]),
             oh.make_node("MaxPool", ["r1"], ["m1"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
             oh.make_node("Conv", ["m1", "w2", "b2"], ["c2"], pads=[1, 1, 1, 1], group=8),
             oh.make_node("Relu", ["c2"], ["r2"]),
             oh.make_node("Add", ["m1", "r2"], ["s"]),
             oh.make_node("Conv", ["s", "w3", "b3"], ["c3"], strides=[2, 2]),
             oh.make_node("GlobalAveragePool", ["c3"], ["p"]),
             oh.make_node("Flatten", ["p"], ["f"]),
             oh.make_node("Gemm", ["f", "w4", "b4"], ["y"], transB=1)]
    weights = dict(w1=_w(8, 3, 3, 3), b1=_w(8), w2=_w(8, 1, 3, 3), b2=_w(8),
                   w3=_w(16, 8, 1, 1), b3=_w(16), w4=_w(10, 16), b4=_w(10))
    g = oh.make_graph(nodes, "qdq", [oh.make_tensor_value_info("x", TP.FLOAT, SHAPE)],
                      [oh.make_tensor_value_info("y", TP.FLOAT, None)],
                      [nh.from_array(v, k) for k, v in weights.items()])
    m = oh.make_model(g, opset_imports=[oh.make_opsetid("", 13)])
    m.ir_version = 8
    return m


class _Calibration(quantization.CalibrationDataReader):
    def __init__(self) -> None:
        self.batches = iter([{"x": RNG.standard_normal(SHAPE).astype(np.float32)}
                             for _ in range(4)])

    def get_next(self) -> dict | None:
        return next(self.batches, None)


@pytest.fixture(scope="module", params=[False, True], ids=["per-tensor", "per-channel"])
def qdq_model(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("qdq")
    fp, qp = root / "float.onnx", root / "qdq.onnx"
    onnx.save(_float_model(), str(fp))
    quantization.quantize_static(str(fp), str(qp), _Calibration(),
                                 quant_format=quantization.QuantFormat.QDQ,
                                 per_channel=request.param,
                                 activation_type=quantization.QuantType.QUInt8,
                                 weight_type=quantization.QuantType.QInt8)
    return onnx.load(str(qp))


def _last_step(m: onnx.ModelProto) -> float:
    """The scale of the QuantizeLinear feeding the model's output (one step of it)."""
    out = m.graph.output[0].name
    prod = {o: n for n in m.graph.node for o in n.output}
    dq = prod[out]
    inits = {t.name: nh.to_array(t) for t in m.graph.initializer}
    return float(inits[dq.input[1]])


def test_quantize_static_model_folds_into_integer_kernels(qdq_model) -> None:
    g = from_onnx(qdq_model)
    ops = [n.op for n in optimize(g).nodes]
    assert "conv" not in ops and "matmul" not in ops
    assert ops.count("conv_integer") == 3 and ops.count("matmul_integer") == 1
    mod = build_graph(g, quiet=True)
    step = _last_step(qdq_model)
    for _ in range(2):
        x = RNG.standard_normal(SHAPE).astype(np.float32)
        ours, ref = mod.run({"x": x})[0], reference_outputs(qdq_model, {"x": x})[0]
        assert ours.shape == ref.shape
        assert np.abs(ours - ref).max() <= step * 1.001


def _qdq_conv(relu: bool, bias_float: bool, runtime_weight: bool = False, out: int = 4):
    """DQ(x) -> Conv(DQ(w)) [+ bias] [-> Relu] -> Q -> DQ, written by hand: 3 input
    channels, ``out`` output channels."""
    inits = {"xs": np.float32(0.02), "xz": np.uint8(128), "wq": RNG.integers(
        -127, 128, (out, 3, 3, 3)).astype(np.int8), "ws": np.float32(0.01),
        "wz": np.int8(0), "ys": np.float32(0.015), "yz": np.uint8(3)}
    nodes = [oh.make_node("QuantizeLinear", ["x", "xs", "xz"], ["xq"]),
             oh.make_node("DequantizeLinear", ["xq", "xs", "xz"], ["xf"])]
    inputs = [oh.make_tensor_value_info("x", TP.FLOAT, SHAPE)]
    if runtime_weight:
        inputs.append(oh.make_tensor_value_info("wrt", TP.INT8, (4, 3, 3, 3)))
        nodes.append(oh.make_node("DequantizeLinear", ["wrt", "ws", "wz"], ["wf"]))
    else:
        nodes.append(oh.make_node("DequantizeLinear", ["wq", "ws", "wz"], ["wf"]))
    if bias_float:
        inits["b"] = _w(out)
    else:
        inits["bq"] = RNG.integers(-500, 500, out).astype(np.int32)
        inits["bs"], inits["bz"] = np.float32(0.02 * 0.01), np.int32(0)
        nodes.append(oh.make_node("DequantizeLinear", ["bq", "bs", "bz"], ["b"]))
    nodes.append(oh.make_node("Conv", ["xf", "wf", "b"], ["c"], pads=[1, 1, 1, 1]))
    last = "c"
    if relu:
        nodes.append(oh.make_node("Relu", ["c"], ["r"]))
        last = "r"
    nodes += [oh.make_node("QuantizeLinear", [last, "ys", "yz"], ["yq"]),
              oh.make_node("DequantizeLinear", ["yq", "ys", "yz"], ["y"])]
    g = oh.make_graph(nodes, "conv", inputs, [oh.make_tensor_value_info("y", TP.FLOAT, None)],
                      [nh.from_array(np.asarray(v), k) for k, v in inits.items()])
    m = oh.make_model(g, opset_imports=[oh.make_opsetid("", 13)])
    m.ir_version = 8
    return m


@pytest.mark.parametrize("relu,bias_float", [(True, False), (False, True)])
def test_fold_takes_relu_and_bias(relu: bool, bias_float: bool) -> None:
    m = _qdq_conv(relu, bias_float)
    folded = fold_qdq(from_onnx(m))
    req = [n for n in folded.nodes if n.op == "requantize"]
    assert len(req) == 1 and req[0].attr("relu") == int(relu)
    assert not any(n.op in ("conv", "relu") for n in folded.nodes)
    x = RNG.standard_normal(SHAPE).astype(np.float32)
    ours = build_graph(from_onnx(m), quiet=True).run({"x": x})[0]
    ref = reference_outputs(m, {"x": x})[0]
    assert np.abs(ours - ref).max() <= 0.015 * 1.001
    if relu:
        assert ours.min() >= 0


def test_a_three_channel_integer_conv_is_padded_to_four_and_uses_the_dot_instruction():
    """An image's first conv: its input padded to 4 channels (the extra one the zero
    point's byte), its weight given a zero channel, so the kernel takes the target's
    dot-product instruction (a group of 2 or 4 input channels) and stays exact."""
    assert [channel_padding(c, c) for c in (1, 2, 3, 4, 5, 8, 30)] == [0, 0, 1, 0, 3, 0, 2]
    assert channel_padding(3, 1) == 0                    # grouped: not padded
    m = _qdq_conv(relu=True, bias_float=False, out=16)
    g = optimize(from_onnx(m))
    (conv,) = [n for n in g.nodes if n.op == "conv_integer"]
    weight = g.constants[conv.inputs[1]]                 # HWIO after the layout pass
    assert weight.shape == (3, 3, 4, 16) and not weight[:, :, 3].any()
    (pad,) = [n for n in g.nodes if n.op == "pad"]       # NCHW, before the transpose
    assert pad.attr("pads") == (0, 0, 1, 1, 0, 1, 1, 1) and pad.attr("value") == 128
    mod = build_graph(from_onnx(m), quiet=True)
    host = mod.target
    intr = best_intrinsic(host.arch, host.features, "uint8", "int8", "int32")
    if intr is not None and 16 % intr.lanes == 0:
        (kernel,) = [k for k in mod.kernels if "conv_integer" in k.name]
        assert f"tvmlite_{intr.name}_" in kernel.code.source
    x = RNG.standard_normal(SHAPE).astype(np.float32)
    ours, ref = mod.run({"x": x})[0], reference_outputs(m, {"x": x})[0]
    assert np.abs(ours - ref).max() <= 0.015 * 1.001


def test_unmatched_pattern_stays_float_and_correct() -> None:
    """A weight given at run time: no integer weight to take, so the conv stays float
    between its dequantize and quantize kernels, and still computes the QDQ model."""
    m = _qdq_conv(relu=False, bias_float=False, runtime_weight=True)
    g = from_onnx(m)
    assert fold_qdq(g) is g
    feeds = {"x": RNG.standard_normal(SHAPE).astype(np.float32),
             "wrt": RNG.integers(-127, 128, (4, 3, 3, 3)).astype(np.int8)}
    ours = build_graph(g, quiet=True).run(feeds)[0]
    ref = reference_outputs(m, feeds)[0]
    assert np.abs(ours - ref).max() <= 0.015 * 1.001


def test_a_depthwise_conv_with_a_quantized_batch_norm_pads_in_vectors_and_folds_the_norm():
    """quantize_static's form of MobileNet's block: a 1x1 conv, then DQ -> Conv(group=C)
    -> Q -> DQ -> BatchNormalization (gamma and beta themselves DequantizeLinear of int8)
    -> Q -> DQ. The norm becomes one multiply and add (no square root, no divide left), the
    padded copy the depthwise kernel reads is made in vectors, and the output stays
    within one step of the reference."""
    c = 16
    inits = {"xs": np.float32(0.02), "xz": np.uint8(128),
             "pq": RNG.integers(-127, 128, (c, c, 1, 1)).astype(np.int8),
             "wq": RNG.integers(-127, 128, (c, 1, 3, 3)).astype(np.int8),
             "ws": np.float32(0.01), "wz": np.int8(0), "cs": np.float32(0.03),
             "cz": np.uint8(120), "gq": RNG.integers(60, 127, c).astype(np.int8),
             "gs": np.float32(0.01), "bq": RNG.integers(-50, 50, c).astype(np.int8),
             "bs": np.float32(0.02), "qz": np.int8(0), "mean": _w(c),
             "var": (RNG.random(c) + 0.5).astype(np.float32), "ys": np.float32(0.02),
             "yz": np.uint8(3)}
    nodes = [oh.make_node("QuantizeLinear", ["x", "xs", "xz"], ["xq"]),
             oh.make_node("DequantizeLinear", ["xq", "xs", "xz"], ["xf"]),
             oh.make_node("DequantizeLinear", ["pq", "ws", "wz"], ["pf"]),
             oh.make_node("Conv", ["xf", "pf"], ["pw"]),
             oh.make_node("QuantizeLinear", ["pw", "xs", "xz"], ["pwq"]),
             oh.make_node("DequantizeLinear", ["pwq", "xs", "xz"], ["pwf"]),
             oh.make_node("DequantizeLinear", ["wq", "ws", "wz"], ["wf"]),
             oh.make_node("Conv", ["pwf", "wf"], ["conv"], pads=[1, 1, 1, 1], group=c),
             oh.make_node("QuantizeLinear", ["conv", "cs", "cz"], ["cq"]),
             oh.make_node("DequantizeLinear", ["cq", "cs", "cz"], ["cf"]),
             oh.make_node("DequantizeLinear", ["gq", "gs", "qz"], ["gamma"]),
             oh.make_node("DequantizeLinear", ["bq", "bs", "qz"], ["beta"]),
             oh.make_node("BatchNormalization", ["cf", "gamma", "beta", "mean", "var"],
                          ["bn"]),
             oh.make_node("QuantizeLinear", ["bn", "ys", "yz"], ["yq"]),
             oh.make_node("DequantizeLinear", ["yq", "ys", "yz"], ["y"])]
    g = oh.make_graph(nodes, "dw", [oh.make_tensor_value_info("x", TP.FLOAT, (1, c, 8, 8))],
                      [oh.make_tensor_value_info("y", TP.FLOAT, None)],
                      [nh.from_array(np.asarray(v), k) for k, v in inits.items()])
    m = oh.make_model(g, opset_imports=[oh.make_opsetid("", 13)])
    m.ir_version = 8
    ops = {n.op for n in optimize(from_onnx(m)).nodes}
    assert "conv_integer" in ops and not ops & {"sqrt", "div", "batch_norm"}
    mod = build_graph(from_onnx(m), quiet=True)
    depthwise = [k for k in mod.kernels if "conv_integer" in k.name][-1]
    assert re.search(r'\["\w*pad"\]\.vectorize', str(depthwise.schedule))
    x = RNG.standard_normal((1, c, 8, 8)).astype(np.float32)
    ours, ref = mod.run({"x": x})[0], reference_outputs(m, {"x": x})[0]
    assert np.abs(ours - ref).max() <= 0.02 * 1.001
