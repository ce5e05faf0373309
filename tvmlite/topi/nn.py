"""``topi.nn``: neural-network operators over te tensors, TOPI's names and argument order
(``tvmlite.topi`` module doc). Each checks its tensors and arguments and calls the
compute ``tvmlite.ops`` defines.

Map: checks (check_tensor, check_dtype, window arguments) · relu, softmax · dense,
batch_matmul · conv2d_nchw, depthwise_conv2d_nchw · pool2d.
"""
from __future__ import annotations

from typing import Any, Sequence

from tvmlite import te
from tvmlite.checks import is_int
from tvmlite.ops.common import dtype_arg, out_size, tuple_arg
from tvmlite.ops.elementwise import relu_compute, softmax_compute
from tvmlite.ops.linalg import batch_matmul_compute, dense_compute
from tvmlite.ops.nn import (
    avg_pool2d_compute,
    conv2d_nchw_compute,
    depthwise_conv2d_nchw_compute,
    max_pool2d_compute,
)

__all__ = ["relu", "softmax", "dense", "batch_matmul", "conv2d_nchw",
           "depthwise_conv2d_nchw", "pool2d", "check_tensor", "check_dtype"]


def check_tensor(op: str, name: str, t: Any, ndim: int | None = None) -> te.Tensor:
    """``t`` if it is a te tensor (of rank ``ndim``), else a TypeError/ValueError naming
    the operator and the argument."""
    if not isinstance(t, te.Tensor):
        raise TypeError(f"{op}: {name} must be a te tensor (te.placeholder or te.compute), "
                        f"got {type(t).__name__}")
    if ndim is not None and len(t.shape) != ndim:
        raise ValueError(f"{op}: {name} must be {ndim}-D, got shape {t.shape}")
    dtype_arg(op, t.dtype)
    return t


def check_dtype(op: str, out_dtype: Any, *tensors: te.Tensor) -> str:
    """The one dtype of ``tensors``; ``out_dtype`` (TOPI's mixed precision) must be None
    or that dtype: tvmlite's computes accumulate in their input dtype."""
    dtypes = {t.dtype for t in tensors}
    if len(dtypes) != 1:
        raise ValueError(f"{op}: inputs must share one dtype, got {sorted(dtypes)}")
    (dtype,) = dtypes
    if out_dtype not in (None, "", dtype):
        raise ValueError(f"{op}: out_dtype={out_dtype!r} differs from the inputs' {dtype}; "
                         f"tvmlite computes in the input dtype (cast the inputs instead)")
    return dtype


def _pairs(op: str, name: str, value: Any, allow_zero: bool = False) -> tuple[int, int]:
    """A per-dimension (h, w) pair from an int or a 2-sequence."""
    h, w = tuple_arg(op, name, list(value) if isinstance(value, (list, tuple)) else value, 2,
                     allow_zero)
    return h, w


def _padding(op: str, padding: Any) -> tuple[int, int]:
    """TOPI's padding (an int, (h, w), or (top, left, bottom, right)) as symmetric (h, w):
    tvmlite pads both sides of a dimension alike."""
    if isinstance(padding, (list, tuple)) and len(padding) == 4:
        top, left, bottom, right = tuple_arg(op, "padding", list(padding), 4, allow_zero=True)
        if (top, left) != (bottom, right):
            raise ValueError(f"{op}: padding {tuple(padding)} is asymmetric; tvmlite pads "
                             f"both sides alike (top == bottom, left == right)")
        return top, left
    return _pairs(op, "padding", padding, allow_zero=True)


# -- elementwise and softmax --------------------------------------------------------

def relu(x: te.Tensor) -> te.Tensor:
    """``max(x, 0)``."""
    return relu_compute(check_tensor("topi.nn.relu", "x", x), name="T_relu")


def softmax(x: te.Tensor, axis: int = -1) -> te.Tensor:
    """Softmax along the last axis of a 2-D ``x`` (rows), numerically stable."""
    check_tensor("topi.nn.softmax", "x", x, ndim=2)
    if not is_int(axis) or axis not in (-1, 1):
        raise ValueError(f"topi.nn.softmax: axis must be -1 (the rows of a 2-D x), got "
                         f"{axis!r}")
    dtype_arg("topi.nn.softmax", x.dtype, floats_only=True)
    return softmax_compute(x, name="T_softmax_norm")


# -- matrix products ----------------------------------------------------------------

def dense(data: te.Tensor, weight: te.Tensor, bias: te.Tensor | None = None,
          out_dtype: Any = None) -> te.Tensor:
    """``out[i, j] = sum_k data[i, k] * weight[j, k] (+ bias[j])``: data (N, K), weight
    (M, K), bias (M,)."""
    op = "topi.nn.dense"
    check_tensor(op, "data", data, ndim=2)
    check_tensor(op, "weight", weight, ndim=2)
    tensors = [data, weight]
    if bias is not None:
        tensors.append(check_tensor(op, "bias", bias, ndim=1))
        if bias.shape[0] != weight.shape[0]:
            raise ValueError(f"{op}: bias {bias.shape} must have weight's {weight.shape[0]} "
                             f"output features")
    check_dtype(op, out_dtype, *tensors)
    if data.shape[1] != weight.shape[1]:
        raise ValueError(f"{op}: data {data.shape} and weight {weight.shape} disagree on "
                         f"the input features (weight is (out, in))")
    return dense_compute(data, weight, bias)


def batch_matmul(tensor_a: te.Tensor, tensor_b: te.Tensor, oshape: Any = None,
                 out_dtype: Any = None, transpose_a: bool = False,
                 transpose_b: bool = True) -> te.Tensor:
    """``C[b, i, j] = sum_k A[b, i, k] * B[b, j, k]`` (TOPI's default ``transpose_b``:
    B is (batch, N, K)); ``transpose_b=False`` reads B (batch, K, N)."""
    op = "topi.nn.batch_matmul"
    check_tensor(op, "tensor_a", tensor_a, ndim=3)
    check_tensor(op, "tensor_b", tensor_b, ndim=3)
    if transpose_a or oshape is not None:
        raise ValueError(f"{op}: transpose_a and oshape are not supported")
    if not isinstance(transpose_b, bool):
        raise ValueError(f"{op}: transpose_b must be True or False, got {transpose_b!r}")
    check_dtype(op, out_dtype, tensor_a, tensor_b)
    kb = tensor_b.shape[2] if transpose_b else tensor_b.shape[1]
    if tensor_a.shape[0] != tensor_b.shape[0] or tensor_a.shape[2] != kb:
        raise ValueError(f"{op}: tensor_a {tensor_a.shape} and tensor_b {tensor_b.shape} "
                         f"(transpose_b={transpose_b}) disagree on the batch or K (no "
                         f"broadcasting)")
    return batch_matmul_compute(tensor_a, tensor_b, transpose_b, name="T_batch_matmul")


# -- convolutions and pooling ---------------------------------------------------------

def _window(op: str, data: te.Tensor, kernel_hw: Sequence[int], stride: Any, padding: Any,
            dilation: Any) -> tuple:
    s, p, d = _pairs(op, "stride", stride), _padding(op, padding), _pairs(op, "dilation",
                                                                          dilation)
    out = tuple(out_size(op, dim, n, k, st, pd, dl) for dim, n, k, st, pd, dl in
                zip("HW", data.shape[2:], kernel_hw, s, p, d))
    return s, p, d, out


def conv2d_nchw(Input: te.Tensor, Filter: te.Tensor, stride: Any, padding: Any,
                dilation: Any, out_dtype: Any = None) -> te.Tensor:
    """2-D convolution: Input (N, CI, H, W), Filter (CO, CI, KH, KW) -> (N, CO, OH, OW);
    padding an int, (h, w) or a symmetric (top, left, bottom, right)."""
    op = "topi.nn.conv2d_nchw"
    check_tensor(op, "Input", Input, ndim=4)
    check_tensor(op, "Filter", Filter, ndim=4)
    check_dtype(op, out_dtype, Input, Filter)
    if Filter.shape[1] != Input.shape[1]:
        raise ValueError(f"{op}: Filter {Filter.shape} must read Input's {Input.shape[1]} "
                         f"channels (CO, CI, KH, KW)")
    s, p, d, out = _window(op, Input, Filter.shape[2:], stride, padding, dilation)
    return conv2d_nchw_compute(Input, Filter, s, p, d, 1, out)


def depthwise_conv2d_nchw(Input: te.Tensor, Filter: te.Tensor, stride: Any, padding: Any,
                          dilation: Any, out_dtype: Any = None) -> te.Tensor:
    """Depthwise convolution: Input (N, C, H, W), Filter (C, multiplier, KH, KW) ->
    (N, C * multiplier, OH, OW)."""
    op = "topi.nn.depthwise_conv2d_nchw"
    check_tensor(op, "Input", Input, ndim=4)
    check_tensor(op, "Filter", Filter, ndim=4)
    check_dtype(op, out_dtype, Input, Filter)
    if Filter.shape[0] != Input.shape[1]:
        raise ValueError(f"{op}: Filter {Filter.shape} must have one row per channel of "
                         f"Input ({Input.shape[1]}): (C, multiplier, KH, KW)")
    s, p, d, out = _window(op, Input, Filter.shape[2:], stride, padding, dilation)
    return depthwise_conv2d_nchw_compute(Input, Filter, s, p, d, out)


def pool2d(data: te.Tensor, kernel: Any, stride: Any, dilation: Any, padding: Any,
           pool_type: str, ceil_mode: bool = False, layout: str = "NCHW",
           count_include_pad: bool = True) -> te.Tensor:
    """Max or average pooling (``pool_type`` "max" or "avg") over the H and W of ``data``
    in ``layout`` ("NCHW" or "NHWC"); padding as TOPI's (top, left, bottom, right), kept
    symmetric; dilation 1 and ``ceil_mode=False`` only."""
    op = "topi.nn.pool2d"
    check_tensor(op, "data", data, ndim=4)
    if _pairs(op, "dilation", dilation) != (1, 1) or ceil_mode:
        raise ValueError(f"{op}: dilation must be 1 and ceil_mode False (got {dilation!r}, "
                         f"{ceil_mode!r})")
    ks, ss, ps = _pairs(op, "kernel", kernel), _pairs(op, "stride", stride), \
        _padding(op, padding)
    if pool_type == "max":
        return max_pool2d_compute(data, ks, ss, ps, layout)
    if pool_type == "avg":
        return avg_pool2d_compute(data, ks, ss, ps, layout, count_include_pad)
    raise ValueError(f"{op}: pool_type must be 'max' or 'avg', got {pool_type!r}")
