"""graph/dot_kernel.py on AMX: a MatMulInteger whose shape is whole tiles runs tdpbusd,
bit for bit onnxruntime's result; one that is not keeps the vector intrinsic. Skipped
where the CPU has no AMX-INT8."""
from __future__ import annotations

import re

import numpy as np
import pytest

from tvmlite.target.target import Target

ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto as TP  # noqa: E402
from onnx import helper as oh  # noqa: E402
from onnx import numpy_helper as nh  # noqa: E402

from tvmlite.frontend import from_onnx  # noqa: E402
from tvmlite.graph.build import build_graph  # noqa: E402

pytestmark = pytest.mark.skipif(
    not {"amx_tile", "amx_int8"} <= set(Target.host().features),
    reason="this CPU lacks amx_tile / amx_int8")
RNG = np.random.default_rng(32)


def _q(shape, dtype):
    info = np.iinfo(dtype)
    return RNG.integers(info.min, int(info.max) + 1, shape).astype(dtype)


def _run(node, x: np.ndarray, inits: dict) -> str:
    """Our build against onnxruntime, bit for bit; the kernels' C."""
    g = oh.make_graph([node], "q", [oh.make_tensor_value_info("x", TP.UINT8, x.shape)],
                      [oh.make_empty_tensor_value_info("y")],
                      [nh.from_array(v, k) for k, v in inits.items()])
    m = oh.make_model(g, opset_imports=[oh.make_opsetid("", 10)])
    m.ir_version = 8
    mod = build_graph(from_onnx(m), quiet=True)
    ours = mod.run({"x": x})[0]
    ref = ort.InferenceSession(m.SerializeToString(),
                               providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    np.testing.assert_array_equal(ours, ref)
    return "\n".join(k.code.source for k in mod.kernels)


def test_matmulinteger_of_whole_tiles_runs_tdpbusd():
    """The tiles start at zero (the helper's last argument, fresh = 1: tilezero, the
    local block not zeroed nor loaded)."""
    src = _run(oh.make_node("MatMulInteger", ["x", "b"], ["y"]), _q((32, 128), "uint8"),
               {"b": _q((128, 32), "int8")})
    assert "_tile_dpbusd" in src
    assert re.search(r"\n\s*tvmlite_tdpbusd_amx_u8i8_2x2\([^;]*, 1\);", src)


def test_matmulinteger_not_of_whole_tiles_keeps_the_vector_intrinsic():
    src = _run(oh.make_node("MatMulInteger", ["x", "b"], ["y"]), _q((8, 128), "uint8"),
               {"b": _q((128, 32), "int8")})
    assert "_tile_dpbusd" not in src and "dpbusd" in src
