"""The bf16 precision pass and build: a tiny conv + relu + max pool + gemm model against
onnxruntime's float32, within bf16's rounding; what stays float32; the AVX2 target
(bf16 storage, float32 arithmetic); the exported library."""
from __future__ import annotations

import dataclasses
import re

import numpy as np
import pytest

import tvmlite
from tvmlite.graph import Graph, Node, TensorType, optimize
from tvmlite.graph.accuracy import error_against_fp32, output_error
from tvmlite.graph.dot_kernel import dot_schedule
from tvmlite.graph.ir import attrs_of
from tvmlite.graph.kernel import blocked_schedule, kernel_compute
from tvmlite.graph.library import ModelLibrary
from tvmlite.graph.passes.precision import PrecisionError, check_precision, lower_precision
from tvmlite.runtime.module import generate_c
from tvmlite.target.intrinsics import best_intrinsic
from tvmlite.target.target import Target

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto as TP  # noqa: E402
from onnx import helper as oh  # noqa: E402
from onnx import numpy_helper as nh  # noqa: E402

from tvmlite.frontend import from_onnx  # noqa: E402

# a bf16 operand is rounded to 8 mantissa bits (relative 2**-9): over a few layers the
# outputs move by a few of those relative to their largest magnitude
BF16_TOLERANCE = 3e-2


def tiny_model(tmp_path):
    rng = np.random.default_rng(0)
    consts = {"w1": rng.standard_normal((16, 8, 3, 3)).astype(np.float32) * 0.2,
              "b1": rng.standard_normal(16).astype(np.float32) * 0.1,
              "w2": rng.standard_normal((10, 16 * 3 * 3)).astype(np.float32) * 0.05,
              "b2": rng.standard_normal(10).astype(np.float32) * 0.1}
    nodes = [oh.make_node("Conv", ["x", "w1", "b1"], ["c"], pads=[1, 1, 1, 1]),
             oh.make_node("Relu", ["c"], ["r"]),
             oh.make_node("MaxPool", ["r"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
             oh.make_node("Flatten", ["p"], ["f"]),
             oh.make_node("Gemm", ["f", "w2", "b2"], ["y"], transB=1)]
    g = oh.make_graph(nodes, "tiny", [oh.make_tensor_value_info("x", TP.FLOAT, [1, 8, 6, 6])],
                      [oh.make_tensor_value_info("y", TP.FLOAT, [1, 10])],
                      [nh.from_array(v, k) for k, v in consts.items()])
    m = oh.make_model(g, opset_imports=[oh.make_opsetid("", 13)])
    m.ir_version = 8
    path = tmp_path / "tiny.onnx"
    onnx.save(m, str(path))
    return path, m


def one_conv_model(tmp_path, weight_shape, size):
    """(path, model) of one Conv of a seeded random float32 weight (OIHW) over a
    size x size input, padded to keep its size."""
    co, ci, kh, kw = weight_shape
    w = (np.random.default_rng(0).standard_normal(weight_shape) * 0.1).astype(np.float32)
    pads = [kh // 2, kw // 2, kh // 2, kw // 2]
    g = oh.make_graph([oh.make_node("Conv", ["x", "w"], ["y"], pads=pads)], "conv",
                      [oh.make_tensor_value_info("x", TP.FLOAT, [1, ci, size, size])],
                      [oh.make_tensor_value_info("y", TP.FLOAT, [1, co, size, size])],
                      [nh.from_array(w, "w")])
    m = oh.make_model(g, opset_imports=[oh.make_opsetid("", 13)])
    m.ir_version = 8
    path = tmp_path / "conv.onnx"
    onnx.save(m, str(path))
    return path, m


def _feeds():
    return {"x": np.random.default_rng(1).standard_normal((1, 8, 6, 6)).astype(np.float32)}


def _reference(m, feeds):
    return ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]
                                ).run(None, feeds)


def test_bf16_build_is_within_bf16_rounding_of_onnxruntime(tmp_path):
    path, m = tiny_model(tmp_path)
    g = from_onnx(path)
    feeds = _feeds()
    mod = tvmlite.build(g, precision="bf16")
    fused = mod.graph
    assert fused.precision == "bf16"
    anchors = [n for n in fused.nodes if n.op in ("conv", "matmul")]
    assert len(anchors) == 2
    for n in anchors:   # bf16 operands, float32 sums
        assert [fused.types[i].dtype for i in n.inputs[:2]] == ["bfloat16", "bfloat16"]
        assert fused.types[n.output].dtype == "float32"
    # the model's boundary stays float32
    assert fused.types["x"].dtype == "float32" and fused.types["y"].dtype == "float32"
    (got,) = mod.run(feeds)
    assert got.dtype == np.float32
    err = output_error([got], _reference(m, feeds))
    assert 0 < err.relative < BF16_TOLERANCE    # rounded, and only by bf16's rounding
    fp32 = error_against_fp32(g, mod, feeds)
    assert fp32.relative < BF16_TOLERANCE and "relative" in fp32.line()


def test_bf16_conv_runs_on_vdpbf16ps_where_the_cpu_has_it(tmp_path):
    host = Target.host()
    if best_intrinsic(host.arch, host.features, "bfloat16", "bfloat16", "float32") is None:
        pytest.skip("this CPU has no bf16 dot-product instruction")
    path, _ = tiny_model(tmp_path)
    mod = tvmlite.build(from_onnx(path), precision="bf16")
    conv = next(k for k in mod.kernels if "conv" in k.name)
    assert "dpbf16" in conv.code.source


def test_what_stays_float32():
    """A matmul of two run-time values (attention's scores) and the softmax after it
    stay float32; the weighted matmul reads bf16."""
    t = lambda *s: TensorType(s, "float32")   # noqa: E731
    w = np.ones((4, 4), np.float32)
    g = Graph((Node("matmul", ("q", "k"), ("s",)),
               Node("softmax", ("s",), ("p",), attrs_of({"axis": -1})),
               Node("matmul", ("p", "w"), ("y",))),
              ("q", "k"), ("y",), {"q": t(4, 4), "k": t(4, 4), "s": t(4, 4), "p": t(4, 4),
                                   "w": t(4, 4), "y": t(4, 4)}, {"w": w}, precision="bf16")
    low = lower_precision(g)
    first, soft, cast, last = low.nodes
    assert first.inputs == ("q", "k") and low.types["s"].dtype == "float32"
    assert soft.op == "softmax" and cast.op == "cast" and cast.inputs == ("p",)
    assert last.inputs[0] == cast.output and low.constants[last.inputs[1]].dtype.name == \
        "bfloat16"
    assert "w" not in low.constants     # the float32 copy is gone
    assert lower_precision(g.replace(precision="fp32")).nodes == g.nodes


def test_a_bad_precision_is_a_clear_error(tmp_path):
    with pytest.raises(PrecisionError, match="precision must be one of fp32, bf16"):
        check_precision("fp16")
    path, _ = tiny_model(tmp_path)
    g = from_onnx(path)
    with pytest.raises(PrecisionError, match="'int4'"):
        tvmlite.build(g, precision="int4")
    with pytest.raises(tvmlite.graph.GraphError, match="optimized in fp32"):
        tvmlite.build(optimize(g), precision="bf16")


def test_a_target_without_bf16_compiles_and_is_correct(tmp_path):
    host = Target.host()
    if host.arch != "x86_64" or "avx2" not in host.features:
        pytest.skip("the named AVX2 target runs on an x86-64 CPU with AVX2")
    target = Target.from_name("x86_64-avx2")
    assert best_intrinsic(target.arch, target.features, "bfloat16", "bfloat16",
                          "float32") is None
    path, m = tiny_model(tmp_path)
    feeds = _feeds()
    mod = tvmlite.build(from_onnx(path), target=target, precision="bf16")
    assert not any("dpbf16" in k.code.source for k in mod.kernels)
    assert output_error(mod.run(feeds), _reference(m, feeds)).relative < BF16_TOLERANCE


def test_the_exported_bf16_library_loads_and_runs(tmp_path):
    path, m = tiny_model(tmp_path)
    feeds = _feeds()
    mod = tvmlite.build(from_onnx(path), precision="bf16")
    mod.export_library(tmp_path / "lib", name="tiny")
    got = ModelLibrary(tmp_path / "lib").run(feeds)
    np.testing.assert_allclose(got[0], mod.run(feeds)[0], rtol=1e-5, atol=1e-5)
    assert output_error(got, _reference(m, feeds)).relative < BF16_TOLERANCE


def test_a_bf16_conv_of_200_channels_gets_enough_accumulators(tmp_path):
    """200 output channels over 13 x 13 are no whole vectors of the 16-lane vdpbf16ps
    (and too few to pad to 208: ``passes.vector_channels``), and the dot block's rows and
    vectors must divide 13 x 200. Where the CPU has the 8-lane ymm form (AVX512-VL) it
    takes that with 13 rows; where it has none (AVX2) dot_schedule declines the
    one-accumulator plain block and the float blocking takes it. Either way the build is
    correct."""
    rng = np.random.default_rng(0)
    path, m = one_conv_model(tmp_path, (200, 64, 1, 1), 13)
    fused = optimize(from_onnx(path).replace(precision="bf16"))
    (conv,) = [k for k in fused.kernels if "conv" in k.name]
    kc = kernel_compute(fused, conv)
    avx2 = Target.from_name("x86_64-avx2")
    assert dot_schedule(kc, avx2) is None and blocked_schedule(kc, avx2) is not None
    vl = Target.from_name("x86_64-avx512")
    vl = dataclasses.replace(vl, features=tuple(sorted(vl.features + ("avx512bf16",))))
    s = dot_schedule(kc, vl)
    src = generate_c(s, list(kc.tensors), vl)[1]
    assert "_mm256_dpbf16_ps" in src and len(set(re.findall(r"local_r\d+\b", src))) >= 8
    feeds = {"x": rng.standard_normal((1, 64, 13, 13)).astype(np.float32)}
    mod = tvmlite.build(fused)
    err = output_error(mod.run(feeds), _reference(m, feeds))
    assert err.relative < BF16_TOLERANCE


def test_a_3_channel_bf16_conv_is_padded_to_whole_pairs(tmp_path):
    """An RGB first conv of a 7x7 window (ResNet's): its bf16 input gets a zero 4th
    channel (a pad node) and its bf16 weight a zero 4th input channel, so vdpbf16ps
    takes it in pairs; the outputs are those of the 3-channel conv, within bf16's
    rounding."""
    rng = np.random.default_rng(0)
    path, m = one_conv_model(tmp_path, (16, 3, 7, 7), 10)
    mod = tvmlite.build(from_onnx(path), precision="bf16")
    fused = mod.graph
    (conv,) = [n for n in fused.nodes if n.op == "conv"]
    x, wb = conv.inputs[:2]
    assert fused.types[x].shape[-1] == 4 and fused.constants[wb].shape[2] == 4
    assert not np.any(fused.constants[wb][:, :, 3, :].astype(np.float32))
    feeds = {"x": rng.standard_normal((1, 3, 10, 10)).astype(np.float32)}
    err = output_error(mod.run(feeds), _reference(m, feeds))
    assert err.relative < BF16_TOLERANCE


def test_a_depthwise_conv_stays_float32_between_bf16_convs(tmp_path):
    """A depthwise conv has no pairs to sum: it reads a float32 input (the conv before it
    stores float32) and its float32 weight, and stores bf16 for the conv after it; within
    bf16's rounding of onnxruntime."""
    rng = np.random.default_rng(0)
    ws = {"w1": rng.standard_normal((32, 16, 1, 1)), "w2": rng.standard_normal((32, 1, 3, 3)),
          "w3": rng.standard_normal((16, 32, 1, 1))}
    g = oh.make_graph([oh.make_node("Conv", ["x", "w1"], ["a"]),
                       oh.make_node("Conv", ["a", "w2"], ["b"], pads=[1, 1, 1, 1], group=32),
                       oh.make_node("Conv", ["b", "w3"], ["y"])], "dw",
                      [oh.make_tensor_value_info("x", TP.FLOAT, [1, 16, 12, 12])],
                      [oh.make_tensor_value_info("y", TP.FLOAT, [1, 16, 12, 12])],
                      [nh.from_array((v * 0.2).astype(np.float32), k) for k, v in ws.items()])
    m = oh.make_model(g, opset_imports=[oh.make_opsetid("", 13)])
    m.ir_version = 8
    onnx.save(m, str(tmp_path / "dw.onnx"))
    mod = tvmlite.build(from_onnx(tmp_path / "dw.onnx"), precision="bf16")
    fused = mod.graph
    first, dw, last = [n for n in fused.nodes if n.op == "conv"]
    dtypes = lambda n: [fused.types[i].dtype for i in n.inputs[:2]]   # noqa: E731
    assert dtypes(first) == dtypes(last) == ["bfloat16", "bfloat16"]
    assert dtypes(dw) == ["float32", "float32"]
    feeds = {"x": rng.standard_normal((1, 16, 12, 12)).astype(np.float32)}
    err = output_error(mod.run(feeds), _reference(m, feeds))
    assert 0 < err.relative < BF16_TOLERANCE


def test_a_3x3_rgb_stem_stays_float32_and_stores_bf16(tmp_path):
    """A 3x3 conv of 3 channels (MobileNet's, SqueezeNet's stem) stays float32, reading
    the model's input with its layout transpose fused in; the conv after it reads its
    output in bf16, cast in the stem's epilogue."""
    rng = np.random.default_rng(0)
    co = 16
    w1 = (rng.standard_normal((co, 3, 3, 3)) * 0.2).astype(np.float32)
    w2 = (rng.standard_normal((8, co, 3, 3)) * 0.1).astype(np.float32)
    g = oh.make_graph([oh.make_node("Conv", ["x", "w1"], ["c"], pads=[1, 1, 1, 1]),
                       oh.make_node("Relu", ["c"], ["r"]),
                       oh.make_node("Conv", ["r", "w2"], ["y"], pads=[1, 1, 1, 1])], "stem",
                      [oh.make_tensor_value_info("x", TP.FLOAT, [1, 3, 10, 10])],
                      [oh.make_tensor_value_info("y", TP.FLOAT, [1, 8, 10, 10])],
                      [nh.from_array(w1, "w1"), nh.from_array(w2, "w2")])
    m = oh.make_model(g, opset_imports=[oh.make_opsetid("", 13)])
    m.ir_version = 8
    onnx.save(m, str(tmp_path / "stem.onnx"))
    mod = tvmlite.build(from_onnx(tmp_path / "stem.onnx"), precision="bf16")
    fused = mod.graph
    stem, second = [n for n in fused.nodes if n.op == "conv"]
    assert [fused.types[i].dtype for i in stem.inputs[:2]] == ["float32", "float32"]
    assert [fused.types[i].dtype for i in second.inputs[:2]] == ["bfloat16", "bfloat16"]
    first = fused.kernels[0]     # the stem's kernel reads the model's input itself
    assert first.inputs[0] == "x" and fused.types[first.output].dtype == "bfloat16"
    feeds = {"x": rng.standard_normal((1, 3, 10, 10)).astype(np.float32)}
    err = output_error(mod.run(feeds), _reference(m, feeds))
    assert 0 < err.relative < BF16_TOLERANCE
