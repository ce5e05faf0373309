"""ONNX's quantized ops (QuantizeLinear, DequantizeLinear, QLinearConv, QLinearMatMul,
ConvInteger, MatMulInteger) imported and built, against onnxruntime bit for bit (their
results are exact integers, and float32 products of them), and onnx's backend node
tests of those ops: each passes or is skipped with its reason."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto as TP  # noqa: E402
from onnx import helper as oh  # noqa: E402
from onnx import numpy_helper as nh  # noqa: E402

from tvmlite.frontend import ConversionError, from_onnx, onnx_backend  # noqa: E402
from tvmlite.graph.build import build_graph  # noqa: E402
from tvmlite.graph.dot_kernel import dot_schedule  # noqa: E402
from tvmlite.graph.kernel import kernel_compute  # noqa: E402
from tvmlite.testing.onnx_reference import reference_outputs  # noqa: E402

RNG = np.random.default_rng(29)
ONNX_TYPE = {"uint8": TP.UINT8, "int8": TP.INT8, "float32": TP.FLOAT, "int32": TP.INT32}


def _model(node, feeds: dict, inits: dict, opset: int = 13):
    g = oh.make_graph([node], "q", [oh.make_tensor_value_info(k, ONNX_TYPE[v.dtype.name],
                                                              v.shape)
                                    for k, v in feeds.items()],
                      [oh.make_empty_tensor_value_info(o) for o in node.output],
                      [nh.from_array(np.asarray(v), k) for k, v in inits.items()])
    m = oh.make_model(g, opset_imports=[oh.make_opsetid("", opset)])
    m.ir_version = 8
    return m


def _same_as_reference(m, feeds: dict) -> np.ndarray:
    """Bit for bit onnxruntime's result, or onnx's reference evaluator's where
    onnxruntime's u8 x s8 kernels saturate (x86 without VNNI: testing/onnx_reference.py)."""
    ours = build_graph(from_onnx(m), quiet=True).run(feeds)[0]
    ref = reference_outputs(m, feeds)[0]
    assert ours.dtype == ref.dtype and ours.shape == ref.shape
    np.testing.assert_array_equal(ours, ref)
    return ours


def _q(shape, dtype):
    info = np.iinfo(dtype)
    return RNG.integers(info.min, int(info.max) + 1, shape).astype(dtype)


def _scale(n=None):
    return (RNG.random(n) * 0.02 + 0.001).astype(np.float32) if n else np.float32(0.017)


@pytest.mark.parametrize("x_dtype,per_channel,group,pads,strides", [
    ("uint8", False, 1, (1, 1, 1, 1), (1, 1)),
    ("uint8", True, 2, (0, 1, 2, 1), (2, 1)),      # grouped, asymmetric pads
    ("int8", True, 8, (1, 1, 1, 1), (1, 1)),       # depthwise, int8 activations
])
def test_qlinearconv(x_dtype: str, per_channel: bool, group: int, pads: tuple,
                     strides: tuple) -> None:
    ci, co = 8, 8
    x = _q((1, ci, 7, 6), x_dtype)
    zx = np.array(RNG.integers(-5, 5), x_dtype) if x_dtype == "int8" else np.uint8(131)
    inits = {"xs": np.float32(0.03), "xz": zx, "w": _q((co, ci // group, 3, 3), "int8"),
             "ws": _scale(co) if per_channel else _scale(),
             "wz": np.zeros(co if per_channel else (), np.int8),
             "ys": np.float32(0.11), "yz": np.array(7, x_dtype),
             "b": RNG.integers(-3000, 3000, co).astype(np.int32)}
    node = oh.make_node("QLinearConv", ["x", "xs", "xz", "w", "ws", "wz", "ys", "yz", "b"],
                        ["y"], pads=list(pads), strides=list(strides), group=group)
    out = _same_as_reference(_model(node, {"x": x}, inits), {"x": x})
    assert len(np.unique(out)) > 10     # not all saturated


def test_exported_library_takes_and_returns_uint8(tmp_path) -> None:
    """The C library of a QLinearConv model: uint8 in and out, onnxruntime's integers."""
    import ctypes
    x = _q((1, 4, 6, 6), "uint8")
    inits = {"xs": np.float32(0.03), "xz": np.uint8(100), "w": _q((4, 4, 3, 3), "int8"),
             "ws": _scale(), "wz": np.int8(0), "ys": np.float32(0.2), "yz": np.uint8(9)}
    node = oh.make_node("QLinearConv", ["x", "xs", "xz", "w", "ws", "wz", "ys", "yz"], ["y"],
                        pads=[1, 1, 1, 1])
    m = _model(node, {"x": x}, inits)
    want = _same_as_reference(m, {"x": x})
    lib = build_graph(from_onnx(m), quiet=True).export_library(tmp_path, name="qnet")
    assert "int qnet_run(const uint8_t *in0, uint8_t *out0);" in (tmp_path / "qnet.h").read_text()
    so = ctypes.CDLL(str(lib))
    assert so.qnet_init(str(tmp_path / "qnet.weights").encode()) == 0
    got = np.empty_like(want)
    assert so.qnet_run(x.ctypes.data_as(ctypes.c_void_p), got.ctypes.data_as(ctypes.c_void_p)) == 0
    so.qnet_free()
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("a_shape,b_shape,per_column", [
    ((5, 16), (16, 6), False), ((2, 3, 8), (2, 8, 4), False), ((2, 3, 8), (8, 4), True)])
def test_qlinearmatmul(a_shape: tuple, b_shape: tuple, per_column: bool) -> None:
    n = b_shape[-1]
    a = _q(a_shape, "uint8")
    inits = {"as": np.float32(0.02), "az": np.uint8(120), "b": _q(b_shape, "int8"),
             "bs": _scale(n) if per_column else _scale(),
             "bz": np.zeros(n if per_column else (), np.int8), "ys": np.float32(0.05),
             "yz": np.uint8(100)}
    node = oh.make_node("QLinearMatMul", ["a", "as", "az", "b", "bs", "bz", "ys", "yz"], ["y"])
    _same_as_reference(_model(node, {"a": a}, inits), {"a": a})


def test_matmulinteger_and_convinteger_with_zero_points() -> None:
    a = _q((4, 32), "uint8")
    node = oh.make_node("MatMulInteger", ["a", "b", "az", "bz"], ["y"])
    inits = {"b": _q((32, 5), "int8"), "az": np.uint8(255),
             "bz": RNG.integers(-128, 128, 5).astype(np.int8)}
    out = _same_as_reference(_model(node, {"a": a}, inits, opset=10), {"a": a})
    assert out.dtype == np.int32 and np.abs(out).max() > 2 ** 16
    x = _q((1, 3, 6, 6), "uint8")
    node = oh.make_node("ConvInteger", ["x", "w", "xz"], ["y"], pads=[1, 1, 1, 1])
    inits = {"w": _q((4, 3, 3, 3), "uint8"), "xz": np.uint8(17)}
    _same_as_reference(_model(node, {"x": x}, inits, opset=10), {"x": x})


def test_convinteger_runs_on_the_targets_dot_instruction() -> None:
    """The layout's transpose back to NCHW is a kernel of its own, as after a float conv:
    fused into the conv it changed the kernel's output shape, so the conv never reached
    the dot-product block (graph/dot_kernel.py) and ran as scalar loops."""
    x = _q((1, 16, 8, 8), "uint8")
    node = oh.make_node("ConvInteger", ["x", "w"], ["y"], pads=[1, 1, 1, 1])
    m = _model(node, {"x": x}, {"w": _q((32, 16, 3, 3), "int8")}, opset=10)
    _same_as_reference(m, {"x": x})
    mod = build_graph(from_onnx(m), quiet=True)
    conv, *rest = mod.graph.kernels
    assert conv.name.endswith("conv_integer") and [k.name.split("_", 1)[1] for k in rest] \
        == ["transpose"]
    # the dot block on every CPU: the target's intrinsic (vpdpbusd with VNNI), else
    # plain vectors of int32
    assert dot_schedule(kernel_compute(mod.graph, conv), mod.target) is not None


@pytest.mark.parametrize("axis,dtype", [(1, "uint8"), (-1, "int8"), (None, "uint8")])
def test_quantize_and_dequantize_linear(axis: int | None, dtype: str) -> None:
    x = (RNG.standard_normal((2, 4, 3, 5)) * 3).astype(np.float32)
    x.flat[:4] = [0.25, -0.25, 0.75, 1e6]     # ties at scale 0.5, saturation
    c = x.shape[axis] if axis is not None else None
    scale = np.full(c, 0.5, np.float32) if c else np.float32(0.5)
    zp = (RNG.integers(-3, 3, c) if c else np.array(2)).astype(dtype)
    attrs = {} if axis is None else {"axis": axis}
    q = oh.make_node("QuantizeLinear", ["x", "s", "z"], ["y"], **attrs)
    _same_as_reference(_model(q, {"x": x}, {"s": scale, "z": zp}), {"x": x})
    xq = _q((2, 4, 3, 5), dtype)
    dq = oh.make_node("DequantizeLinear", ["x", "s", "z"], ["y"], **attrs)
    _same_as_reference(_model(dq, {"x": xq}, {"s": scale * 0.3, "z": zp}), {"x": xq})
    x32 = RNG.integers(-2 ** 20, 2 ** 20, (3, 4)).astype(np.int32)
    dq32 = oh.make_node("DequantizeLinear", ["x", "s"], ["y"])
    _same_as_reference(_model(dq32, {"x": x32}, {"s": np.float32(1e-3)}), {"x": x32})


def test_run_time_scale_and_blocked_quantization_are_clear_errors() -> None:
    x = RNG.standard_normal((2, 4)).astype(np.float32)
    q = oh.make_node("QuantizeLinear", ["x", "s", "z"], ["y"])
    m = _model(q, {"x": x, "s": np.ones((), np.float32)}, {"z": np.uint8(0)})
    with pytest.raises(ConversionError, match="y_scale .* must be a constant"):
        from_onnx(m)
    q = oh.make_node("QuantizeLinear", ["x", "s", "z"], ["y"], axis=1, block_size=2)
    m = _model(q, {"x": x}, {"s": np.ones((2, 2), np.float32), "z": np.zeros((2, 2), np.uint8)},
               opset=21)
    with pytest.raises(ConversionError, match="blocked quantization is not supported"):
        from_onnx(m)


# -- onnx's backend node tests of these ops ---------------------------------------------

PREFIXES = ("quantizelinear", "dequantizelinear", "qlinearconv", "qlinearmatmul",
            "matmulinteger", "convinteger")
OURS = ("uint8", "int8", "int32", "float")     # onnx's names of the dtypes taken here


def _node_tests() -> dict:
    """onnx's node tests of these ops, generating only their modules' cases (loading
    all 1900 would take seconds)."""
    import importlib

    import onnx.backend.test.case.node as cases
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for mod in PREFIXES:
            importlib.import_module(f"{cases.__name__}.{mod}")
    return {c.name[len("test_"):]: c for c in cases._NodeTestCases
            if c.name[len("test_"):].startswith(PREFIXES)}


NODE_TESTS = _node_tests()


def _skip_reason(case) -> str | None:
    """Why tvmlite does not run this node test (a dtype it does not have, block-wise
    quantization), or None."""
    for vi in list(case.model.graph.input) + list(case.model.graph.output) + \
            [t for t in case.model.graph.initializer]:
        elem = vi.type.tensor_type.elem_type if hasattr(vi, "type") else vi.data_type
        name = TP.DataType.Name(elem).lower()
        if name not in OURS:
            return (f"dtype {name}: tvmlite's quantized ops take uint8/int8 (and int32 "
                    f"to dequantize) with float32 scales")
    for n in case.model.graph.node:
        for at in n.attribute:
            if at.name == "block_size" and at.i:
                return "block-wise quantization (block_size) is not supported"
    return None


@pytest.mark.parametrize("name", sorted(NODE_TESTS))
def test_onnx_node_test(name: str) -> None:
    case = NODE_TESTS[name]
    reason = _skip_reason(case)
    if reason:
        pytest.skip(reason)
    model = case.model
    opset = max(o.version for o in model.opset_import if o.domain in ("", "ai.onnx"))
    if opset > 21:
        # these ops mean the same for uint8/int8 from opset 21 to the node tests' opset
        # (later opsets added dtypes and blocks only); tvmlite follows opsets up to 21
        for o in model.opset_import:
            if o.domain in ("", "ai.onnx"):
                o.version = 21
    inputs, outputs = case.data_sets[0]
    got = onnx_backend.prepare(model).run(inputs)
    for g, want in zip(got, outputs):
        assert g.dtype == want.dtype and g.shape == want.shape
        np.testing.assert_array_equal(g, want)


def test_quantize_linear_kernel_is_vectorized() -> None:
    """A kernel storing bytes computes its (de)quantize arithmetic in float32 and int32
    vectors of the target's float32 lanes, stored as byte vectors of as many lanes."""
    x = (RNG.standard_normal((2, 3, 64)) * 40).astype(np.float32)
    q = oh.make_node("QuantizeLinear", ["x", "s", "z"], ["y"])
    m = _model(q, {"x": x}, {"s": np.float32(0.5), "z": np.uint8(3)})
    _same_as_reference(m, {"x": x})
    mod = build_graph(from_onnx(m), quiet=True)
    lanes = mod.target.vector_lanes("float32")
    assert lanes > 1 and f"tvmlite_u8x{lanes}" in mod.kernels[0].code.source
