"""Small workloads that many tests build the same way, and their numpy references.

The schedule, pass, codegen and runtime tests each used to carry a copy of the same
matmul reference and the same tiled matmul schedule; one copy here keeps them from
drifting apart (a tolerance or a loop order changed in one file and not another). The
reference goes through ``references.REFERENCES`` so that a test checks a kernel against
the same numpy the operator library's checks use, not a second implementation.
"""
from __future__ import annotations

import numpy as np

from tvmlite import ops, te
from tvmlite.schedule.schedule import Schedule
from tvmlite.testing.references import REFERENCES

ODD_MNK: tuple[int, int, int] = (17, 23, 19)
"""Matmul sizes (M, N, K) prime to every tile and vector width the tests use, so that
each split leaves a remainder somewhere."""


def matmul_reference(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``a @ b`` accumulated in float64 (int64 for integers), cast back to ``a``'s dtype:
    what a correct kernel computes up to its own rounding."""
    return np.asarray(REFERENCES["matmul"]([a, b], {})).astype(a.dtype)


def tiled_matmul(m: int = ODD_MNK[0], n: int = ODD_MNK[1], k: int = ODD_MNK[2],
                 dtype: str = "float32") -> tuple[Schedule, list[te.Tensor]]:
    """``ops.matmul(m, n, k)`` under the loop schedule most tests start from: C tiled
    4 x 8, k split by 4, the k tile between the row and column tiles, the 8 columns
    vectorized, the k tile unrolled and the row tiles parallel. Returns (schedule,
    [A, B, C])."""
    A, B, C = ops.matmul(m, n, k, dtype)
    s = te.create_schedule(C.op)
    i, j = s[C].op.axis
    (r,) = s[C].op.reduce_axis
    io, jo, ii, ji = s[C].tile(i, j, 4, 8)
    ko, ki = s[C].split(r, factor=4)
    s[C].reorder(io, jo, ko, ii, ki, ji)
    s[C].vectorize(ji)
    s[C].unroll(ki)
    s[C].parallel(io)
    return s, [A, B, C]


def two_stage(shape: tuple[int, ...] = ODD_MNK[:2]
              ) -> tuple[te.Tensor, te.Tensor, te.Tensor]:
    """A 2-D chain A -> B = A * 2 -> C = B + 1: the smallest compute with a producer to
    place (compute_at, compute_inline) or to misplace. Returns (A, B, C); C is
    ``a * 2 + 1`` of A."""
    A = te.placeholder(shape, name="A")
    B = te.compute(shape, lambda i, j: A[i, j] * 2, name="B")
    return A, B, te.compute(shape, lambda i, j: B[i, j] + 1, name="C")
