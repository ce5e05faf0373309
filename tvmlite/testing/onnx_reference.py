"""The reference a quantized model's outputs are checked against: onnxruntime where its
integer kernels are exact on this CPU, onnx's own ``ReferenceEvaluator`` where they are
not.

onnxruntime's u8 x s8 products are exact where the CPU has a dot-product instruction that
accumulates in int32 (x86 VNNI, AArch64 dotprod). On x86 without VNNI (AVX2 alone, as
on Zen 3) MLAS multiplies with ``vpmaddubsw``, which adds each pair of u8 x s8 products
into an int16 and saturates it (255 x 127 x 2 = 64770 > 32767): on such a CPU a
MatMulInteger of large values is off by thousands, and QLinearConv / QDQ models by tens
of quantization steps (onnxruntime's documentation advises ``reduce_range`` there). A
test that compares an exact integer kernel with such results would fail for the peer's
sake, so the reference is chosen by asking onnxruntime, once, a product that saturates
an int16, not by reading the CPU's flags (a newer onnxruntime may take another path).
"""
from __future__ import annotations

import functools
from collections.abc import Mapping

import numpy as np

__all__ = ["onnxruntime_integers_exact", "reference_outputs", "INEXACT_REASON"]

EVALUATOR_OPSET = 21
INEXACT_REASON = "int16 saturation of vpmaddubsw without VNNI"   # for reports


@functools.cache
def onnxruntime_integers_exact() -> bool:
    """Whether onnxruntime's MatMulInteger (u8 x s8, B an initializer, as models give
    their weights) returns the exact int32 products on this CPU (False also where
    onnxruntime is not installed)."""
    try:
        import onnxruntime as ort
        from onnx import TensorProto, helper, numpy_helper
    except ImportError:
        return False
    k = 64
    a = np.full((4, k), 255, np.uint8)
    b = np.full((k, 8), 127, np.int8)
    graph = helper.make_graph(
        [helper.make_node("MatMulInteger", ["a", "b"], ["y"])], "probe",
        [helper.make_tensor_value_info("a", TensorProto.UINT8, a.shape)],
        [helper.make_tensor_value_info("y", TensorProto.INT32, None)],
        [numpy_helper.from_array(b, "b")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 10)])
    model.ir_version = 8
    session = ort.InferenceSession(model.SerializeToString(),
                                   providers=["CPUExecutionProvider"])
    got = session.run(None, {"a": a})[0]
    return bool(np.array_equal(got, a.astype(np.int32) @ b.astype(np.int32)))


def reference_outputs(model, feeds: Mapping[str, np.ndarray]) -> list[np.ndarray]:
    """The outputs of ``model`` (an ``onnx.ModelProto``) on ``feeds`` from the exact
    reference of this CPU: onnxruntime (CPU provider) where its integers are exact,
    else ``onnx.reference.ReferenceEvaluator`` (numpy, exact integer arithmetic)."""
    if onnxruntime_integers_exact():
        import onnxruntime as ort
        session = ort.InferenceSession(model.SerializeToString(),
                                       providers=["CPUExecutionProvider"])
        return list(session.run(None, dict(feeds)))
    from onnx import version_converter
    from onnx.reference import ReferenceEvaluator
    # the evaluator implements QuantizeLinear / DequantizeLinear from opset 19 on only
    if opset_of(model) < EVALUATOR_OPSET:
        model = version_converter.convert_version(model, EVALUATOR_OPSET)
    return [np.asarray(out) for out in ReferenceEvaluator(model).run(None, dict(feeds))]


def opset_of(model) -> int:
    """The default domain's opset ``model`` imports."""
    return next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 1)
