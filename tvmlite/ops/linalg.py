"""Matrix products and norms: matmul, batch_matmul, dense (+bias, +relu), norm2.

Each size-taking op makes its placeholders and calls the tensor-taking compute
(``matmul_compute``, ``batch_matmul_compute``, ``dense_compute``), which ``tvmlite.topi``
calls on the user's tensors: one definition of each compute. ``broadcast_matmul_compute``
is numpy's ``@`` over any batch dimensions, which the graph level (ONNX MatMul) uses."""
from __future__ import annotations

from typing import Any

from tvmlite import te
from tvmlite.ops.common import dtype_arg, named, positive, product, size_arg


def matmul(M: int, N: int, K: int, dtype: str = "float32") -> list[te.Tensor]:
    """``C[i, j] = sum_k A[i, k] * B[k, j]`` with A (M, K), B (K, N); returns [A, B, C]."""
    op = "matmul"
    M, N, K = (size_arg(op, n, v) for n, v in (("M", M), ("N", N), ("K", K)))
    dtype_arg(op, dtype)
    A = te.placeholder((M, K), dtype, name="A")
    B = te.placeholder((K, N), dtype, name="B")
    return [A, B, matmul_compute(A, B)]


def matmul_compute(A: te.Tensor, B: te.Tensor, name: str = "C") -> te.Tensor:
    """``C[i, j] = sum_k A[i, k] * B[k, j]`` of the tensors A (M, K) and B (K, N)."""
    (M, K), (_, N) = A.shape, B.shape
    k = te.reduce_axis((0, K), name="k")
    return te.compute((M, N), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name=name)


def batch_matmul(B: int, M: int, N: int, K: int, dtype: str = "float32") -> list[te.Tensor]:
    """``C[b, i, j] = sum_k A[b, i, k] * B[b, k, j]``; A (B, M, K), B (B, K, N)."""
    op = "batch_matmul"
    B, M, N, K = (positive(op, n, v) for n, v in (("B", B), ("M", M), ("N", N), ("K", K)))
    dtype_arg(op, dtype)
    lhs = te.placeholder((B, M, K), dtype, name="A")
    rhs = te.placeholder((B, K, N), dtype, name="B")
    return [lhs, rhs, batch_matmul_compute(lhs, rhs)]


def batch_matmul_compute(lhs: te.Tensor, rhs: te.Tensor, transpose_b: bool = False,
                         name: str = "C") -> te.Tensor:
    """``C[b, i, j] = sum_k lhs[b, i, k] * rhs[b, k, j]`` of lhs (B, M, K) and rhs
    (B, K, N); with ``transpose_b`` rhs is (B, N, K), read ``rhs[b, j, k]`` (TOPI's
    default layout)."""
    B, M, K = lhs.shape
    N = rhs.shape[1] if transpose_b else rhs.shape[2]
    k = te.reduce_axis((0, K), name="k")
    if transpose_b:
        return te.compute((B, M, N), lambda b, i, j: te.sum(lhs[b, i, k] * rhs[b, j, k],
                                                            axis=k), name=name)
    return te.compute((B, M, N), lambda b, i, j: te.sum(lhs[b, i, k] * rhs[b, k, j], axis=k),
                      name=name)


def broadcast_matmul_compute(lhs: te.Tensor, rhs: te.Tensor, name: str = "C",
                             acc: str | None = None) -> te.Tensor:
    """numpy's ``lhs @ rhs`` for operands of rank 2 or more: the batch dimensions
    broadcast (a dimension of 1 is read at index 0), ``C[..., i, j] = sum_k lhs[..., i, k]
    * rhs[..., k, j]``, one stage that reads both tensors directly -- so a weight matrix
    shared by every batch row stays a plain input the search can pack, with no reshaped
    copy in between. ``acc``: the dtype the products are summed in when it is not the
    operands' (``common.product``: bfloat16 operands, float32 sums)."""
    sa, sb = tuple(lhs.shape), tuple(rhs.shape)
    m, kk, n = sa[-2], sa[-1], sb[-1]
    rank = max(len(sa), len(sb))
    batch = [max(x, y) for x, y in zip((1,) * (rank - len(sa)) + sa[:-2],
                                       (1,) * (rank - len(sb)) + sb[:-2])]
    k = te.reduce_axis((0, kk), name="k")

    def operand(t: te.Tensor, shape: tuple, idx: tuple, last: tuple) -> Any:
        lead = idx[len(idx) - 2 - (len(shape) - 2):len(idx) - 2] if len(shape) > 2 else ()
        return t[tuple(0 if d == 1 else i for d, i in zip(shape[:-2], lead)) + last]

    def body(*idx: Any) -> Any:
        i, j = idx[-2], idx[-1]
        return te.sum(product(operand(lhs, sa, idx, (i, k)), operand(rhs, sb, idx, (k, j)),
                              acc), axis=k)
    names = [f"b{d}" for d in range(len(batch))] + ["i", "j"]
    return te.compute(tuple(batch) + (m, n), named(names, body), name=name)


def dense(N: int, K: int, M: int, dtype: str = "float32", bias: bool = False,
          relu: bool = False) -> list[te.Tensor]:
    """A fully connected layer as in TVM: ``out[i, j] = sum_k data[i, k] * weight[j, k]``.

    N is the batch, K the input features, M the output features: data (N, K), weight
    (M, K). ``bias`` adds a (M,) input after weight and a "bias_add" stage; ``relu`` adds a
    "relu" stage. The last tensor returned is the output.
    """
    op = "dense"
    N = size_arg(op, "N", N)
    K, M = (positive(op, n, v) for n, v in (("K", K), ("M", M)))
    dtype_arg(op, dtype)
    for name, flag in (("bias", bias), ("relu", relu)):
        if not isinstance(flag, bool):
            raise ValueError(f"{op}: {name} must be True or False, got {flag!r}")
    data = te.placeholder((N, K), dtype, name="data")
    weight = te.placeholder((M, K), dtype, name="weight")
    tensors = [data, weight]
    b = None
    if bias:
        b = te.placeholder((M,), dtype, name="bias")
        tensors.append(b)
    out = dense_compute(data, weight, b)
    if relu:
        pre = out
        out = te.compute((N, M), lambda i, j: te.max(pre[i, j], te.const(0, dtype)),
                         name="relu")
    return tensors + [out]


def dense_compute(data: te.Tensor, weight: te.Tensor, bias: te.Tensor | None = None
                  ) -> te.Tensor:
    """``dense[i, j] = sum_k data[i, k] * weight[j, k]`` of data (N, K) and weight (M, K),
    then a "bias_add" stage adding ``bias[j]`` when a bias (M,) is given."""
    N, K = data.shape
    M = weight.shape[0]
    k = te.reduce_axis((0, K), name="k")
    out = te.compute((N, M), lambda i, j: te.sum(data[i, k] * weight[j, k], axis=k),
                     name="dense")
    if bias is None:
        return out
    return te.compute((N, M), lambda i, j: out[i, j] + bias[j], name="bias_add")


def norm2(N: int, M: int, dtype: str = "float32") -> list[te.Tensor]:
    """Frobenius norm of A (N, M) as a (1,) tensor: "sumsq" reduces both axes, "norm" roots."""
    op = "norm2"
    N, M = positive(op, "N", N), positive(op, "M", M)
    dtype_arg(op, dtype, floats_only=True)
    A = te.placeholder((N, M), dtype, name="A")
    ri = te.reduce_axis((0, N), name="ri")
    rj = te.reduce_axis((0, M), name="rj")
    sumsq = te.compute((1,), lambda i: te.sum(A[ri, rj] * A[ri, rj], axis=[ri, rj]),
                       name="sumsq")
    norm = te.compute((1,), lambda i: te.sqrt(sumsq[i]), name="norm")
    return [A, norm]
