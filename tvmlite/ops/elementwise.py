"""Elementwise operators of any rank (add, relu, bias_add) and the row softmax.

The size-taking ops make placeholders and call the tensor-taking computes
(``add_compute``, ``relu_compute``, ``softmax_compute``) that ``tvmlite.topi`` calls on
the user's tensors."""
from __future__ import annotations

from typing import Any

from tvmlite import te
from tvmlite.checks import is_int
from tvmlite.ops.common import dtype_arg, named, positive, shape_arg, size_arg


def _axes(rank: int) -> list[str]:
    """Loop names for a rank-``rank`` elementwise op: i, j, k, l, then i4, i5, ..."""
    letters = ["i", "j", "k", "l"]
    return letters[:rank] + [f"i{d}" for d in range(len(letters), rank)]


def add(shape: Any, dtype: str = "float32") -> list[te.Tensor]:
    """``add = A + B`` for two tensors of the same shape."""
    op = "add"
    shape = shape_arg(op, shape)
    dtype_arg(op, dtype)
    A = te.placeholder(shape, dtype, name="A")
    B = te.placeholder(shape, dtype, name="B")
    return [A, B, add_compute(A, B)]


def add_compute(A: te.Tensor, B: te.Tensor, name: str = "add") -> te.Tensor:
    """``A + B`` of two tensors of one shape."""
    return te.compute(A.shape, named(_axes(len(A.shape)), lambda *i: A[i] + B[i]), name=name)


def relu(shape: Any, dtype: str = "float32") -> list[te.Tensor]:
    """``relu = max(A, 0)``."""
    op = "relu"
    shape = shape_arg(op, shape)
    dtype_arg(op, dtype)
    A = te.placeholder(shape, dtype, name="A")
    return [A, relu_compute(A)]


def relu_compute(A: te.Tensor, name: str = "relu") -> te.Tensor:
    """``max(A, 0)`` of a tensor of any rank."""
    zero = te.const(0, A.dtype)
    return te.compute(A.shape, named(_axes(len(A.shape)), lambda *i: te.max(A[i], zero)),
                      name=name)


def bias_add(shape: Any, axis: int = 1, dtype: str = "float32") -> list[te.Tensor]:
    """``bias_add = data + bias`` with bias (shape[axis],) broadcast along ``axis``
    (negative axes count from the end, as in numpy)."""
    op = "bias_add"
    shape = shape_arg(op, shape)
    dtype_arg(op, dtype)
    if not is_int(axis, -len(shape), len(shape) - 1):
        raise ValueError(f"{op}: axis must be an int in [{-len(shape)}, {len(shape)}) for "
                         f"shape {shape}, got {axis!r}")
    axis %= len(shape)
    data = te.placeholder(shape, dtype, name="data")
    bias = te.placeholder((shape[axis],), dtype, name="bias")
    body = named(_axes(len(shape)), lambda *i: data[i] + bias[i[axis]])
    return [data, bias, te.compute(shape, body, name=op)]


def softmax(N: int, M: int, dtype: str = "float32") -> list[te.Tensor]:
    """Softmax of each row of data (N, M), numerically stable, in four stages:
    maxelem (row max), expv = exp(x - max), expsum (row sum), softmax = expv / expsum."""
    op = "softmax"
    N, M = size_arg(op, "N", N), positive(op, "M", M)
    dtype_arg(op, dtype, floats_only=True)
    data = te.placeholder((N, M), dtype, name="data")
    return [data, softmax_compute(data)]


def softmax_compute(data: te.Tensor, name: str = "softmax") -> te.Tensor:
    """The softmax of each row of ``data`` (N, M), in the four stages of ``softmax``."""
    N, M = data.shape
    k = te.reduce_axis((0, M), name="k")
    maxelem = te.compute((N,), lambda i: te.max(data[i, k], axis=k), name="maxelem")
    expv = te.compute((N, M), lambda i, j: te.exp(data[i, j] - maxelem[i]), name="expv")
    k2 = te.reduce_axis((0, M), name="k")
    expsum = te.compute((N,), lambda i: te.sum(expv[i, k2], axis=k2), name="expsum")
    return te.compute((N, M), lambda i, j: expv[i, j] / expsum[i], name=name)
