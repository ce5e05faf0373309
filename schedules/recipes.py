"""Hand-written schedules: the classic expert recipes, written with the public API.

``gemm_packed`` is the CPU GEMM recipe of BLAS libraries: B packed into panels of
``block_cols`` columns (a layout-changing compute stage), a ``block_rows x block_cols``
block of C accumulated in vector registers (cache_write + compute_at, the k loop
outside the unrolled row loop), vectorized columns, parallel panels.
"""
from __future__ import annotations

from tvmlite import te
from tvmlite.checks import check_int
from tvmlite.schedule.schedule import Schedule


def gemm_packed(M: int, N: int, K: int, block_cols: int, block_rows: int = 8,
                k_unroll: int = 4, dtype: str = "float32") -> tuple[Schedule, list]:
    """(schedule, [A, B, C]) for ``C = A @ B``; ``N`` must be a multiple of block_cols."""
    for name, value in (("M", M), ("N", N), ("K", K), ("block_cols", block_cols),
                        ("block_rows", block_rows), ("k_unroll", k_unroll)):
        check_int(value, f"gemm_packed: {name}", 1)
    if N % block_cols:
        raise ValueError(f"gemm_packed: N={N} must be a multiple of block_cols={block_cols}")
    bn = block_cols
    A = te.placeholder((M, K), dtype, name="A")
    B = te.placeholder((K, N), dtype, name="B")
    packedB = te.compute((N // bn, K, bn), lambda x, y, z: B[y, x * bn + z], name="packedB")
    k = te.reduce_axis((0, K), name="k")
    C = te.compute((M, N), lambda i, j: te.sum(A[i, k] * packedB[j // bn, k, j % bn], axis=k),
                   name="C")
    s = te.create_schedule(C.op)
    CC = s.cache_write(C, "local")                # the accumulator block
    i, j = s[C].op.axis
    jo, ji = s[C].split(j, factor=bn)
    io, ii = s[C].split(i, factor=block_rows)
    s[C].reorder(jo, io, ii, ji)
    s[C].vectorize(ji)
    s[C].unroll(ii)
    s[C].parallel(jo)
    s[CC].compute_at(s[C], io)                   # computed per block
    ci, cj = s[CC].op.axis
    (kk,) = s[CC].op.reduce_axis
    ko, ki = s[CC].split(kk, factor=k_unroll)
    s[CC].reorder(ko, ki, ci, cj)
    s[CC].unroll(ki)
    s[CC].unroll(ci)
    s[CC].vectorize(cj)
    x, _, z = s[packedB].op.axis
    s[packedB].vectorize(z)
    s[packedB].parallel(x)
    return s, [A, B, C]
