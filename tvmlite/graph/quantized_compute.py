"""The computes of a graph's quantized nodes; their arithmetic is ``tvmlite.ops.quantized``'s.

QuantizeLinear, DequantizeLinear and the QDQ fold's requantize are elementwise
(``QUANT_VALUE``: one value from x, its scale and zero point); ConvInteger and
MatMulInteger are anchors over int32 sums, with zero points that are one value or, for
the weights, a tensor read per output channel.
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

from tvmlite import te
from tvmlite.graph.ir import GraphError, Node
from tvmlite.graph.scalar import Operand, Scalar
from tvmlite.ops.quantized import (
    dequantize_value,
    qconv2d_nchw_compute,
    qconv2d_nhwc_compute,
    qmatmul_compute,
    quantize_value,
    requantize_value,
)

__all__ = ["QUANT_VALUE", "zero_point", "conv_integer_compute", "matmul_integer_compute"]

QUANT_VALUE: dict[str, Callable[..., Any]] = {
    "quantize": lambda n, x, s, z: quantize_value(x, s, z, n.attr("to")),
    "dequantize": lambda n, x, s, z: dequantize_value(x, s, z),
    "requantize": lambda n, x, s, z: requantize_value(x, s, z, n.attr("to"),
                                                      bool(n.attr("relu", 0))),
}


def zero_point(z: Operand) -> Any:
    """A zero point as an int (one value) or the (C,) tensor read per channel."""
    return int(z.value) if isinstance(z, Scalar) else z


def conv_integer_compute(node: Node, args: Sequence[Operand], out_shape: tuple[int, ...],
                         name: str) -> te.Tensor:
    x, w, x_zp, w_zp = args
    if isinstance(w_zp, te.Tensor) and len(w_zp.shape) != 1:
        raise GraphError(f"node {node.name!r}: a per-channel weight zero point must be 1-D")
    if not isinstance(x_zp, Scalar):
        raise GraphError(f"node {node.name!r}: the input zero point must be one value")
    nhwc = node.attr("layout", "NCHW") == "NHWC"     # the layout pass's choice
    conv = qconv2d_nhwc_compute if nhwc else qconv2d_nchw_compute
    return conv(x, w, zero_point(x_zp), zero_point(w_zp), node.attr("strides"),
                node.attr("pads"), node.attr("dilations"), node.attr("group"),
                out_shape[1:3] if nhwc else out_shape[2:], name=name)


def matmul_integer_compute(node: Node, args: Sequence[Operand],
                           out_shape: tuple[int, ...], name: str) -> te.Tensor:
    a, b, a_zp, b_zp = args
    if len(b.shape) < 2 or len(a.shape) < 2 or not isinstance(a_zp, Scalar):
        raise GraphError(f"node {node.name!r}: MatMulInteger takes A (..., M, K) with one "
                         f"zero point and B (..., K, N), got {tuple(a.shape)} and "
                         f"{tuple(b.shape)}")
    return qmatmul_compute(a, b, zero_point(a_zp), zero_point(b_zp), name=name)
