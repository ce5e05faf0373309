"""The operator library under TVM's TOPI names: functions that take te tensors and return
the output tensor, as ``tvm.topi`` does (``tvmlite.ops`` takes sizes instead, so that an
operator is a workload a log can name).

Each function is a thin adapter over the compute that ``tvmlite.ops`` defines (one
definition of each compute): it checks the tensors' shapes and TOPI's arguments, then
calls ``tvmlite.ops``' tensor-taking compute. Only the operators tvmlite has, and only
the argument values it supports; any other value is a ValueError that says so.

    from tvmlite import te, topi
    A = te.placeholder((64, 32), name="A"); B = te.placeholder((32, 16), name="B")
    C = topi.matmul(A, B)
    s = te.create_schedule(C.op)

Map: here ``add``, ``matmul`` (and ``nn`` re-exported); ``nn.py`` ``relu``, ``softmax``,
``dense``, ``batch_matmul``, ``conv2d_nchw``, ``depthwise_conv2d_nchw``, ``pool2d``.
"""
from __future__ import annotations

from typing import Any

from tvmlite import te
from tvmlite.ops.elementwise import add_compute
from tvmlite.ops.linalg import matmul_compute
from tvmlite.topi import nn
from tvmlite.topi.nn import check_dtype, check_tensor

__all__ = ["add", "matmul", "nn"]


def add(lhs: te.Tensor, rhs: te.Tensor) -> te.Tensor:
    """``lhs + rhs`` of two tensors of one shape and dtype (TOPI also broadcasts; tvmlite
    has the same-shape add only)."""
    check_tensor("topi.add", "lhs", lhs)
    check_tensor("topi.add", "rhs", rhs)
    if lhs.shape != rhs.shape or lhs.dtype != rhs.dtype:
        raise ValueError(f"topi.add: lhs {lhs.shape} {lhs.dtype} and rhs {rhs.shape} "
                         f"{rhs.dtype} must have one shape and dtype (no broadcasting)")
    return add_compute(lhs, rhs, name="T_add")


def matmul(tensor_a: te.Tensor, tensor_b: te.Tensor, bias: Any = None, out_dtype: Any = None,
           transpose_a: bool = False, transpose_b: bool = False) -> te.Tensor:
    """``C[i, j] = sum_k A[i, k] * B[k, j]`` of A (M, K) and B (K, N) (TOPI's argument
    order; no bias, no transposes)."""
    op = "topi.matmul"
    check_tensor(op, "tensor_a", tensor_a, ndim=2)
    check_tensor(op, "tensor_b", tensor_b, ndim=2)
    if bias is not None or transpose_a or transpose_b:
        raise ValueError(f"{op}: bias and transposes are not supported (tvmlite's matmul "
                         f"is A (M, K) @ B (K, N)); add a bias with topi.add")
    check_dtype(op, out_dtype, tensor_a, tensor_b)
    if tensor_a.shape[1] != tensor_b.shape[0]:
        raise ValueError(f"{op}: tensor_a {tensor_a.shape} and tensor_b {tensor_b.shape} "
                         f"disagree on K")
    return matmul_compute(tensor_a, tensor_b, name="T_matmul")
