"""Hand-made kernels with one known fault each, for the explain tests."""
from __future__ import annotations

import dataclasses

from tvmlite import te
from tvmlite.target.target import Target


def forced_gather(n: int = 64):
    """B[i, j] = A[j, i] with j vectorized: A's lanes are n elements apart."""
    A = te.placeholder((n, n), name="A")
    B = te.compute((n, n), lambda i, j: A[j, i] * 2.0, name="B")
    s = te.create_schedule(B.op)
    s[B].vectorize(s[B].op.axis[1])
    return s, [A, B]


def forced_scalar_select(n: int = 64):
    """C[i] = A[i] if i < n/2 else B[i], vectorized: the select's branches load."""
    A = te.placeholder((n,), name="A")
    B = te.placeholder((n,), name="B")
    C = te.compute((n,), lambda i: te.if_then_else(i < n // 2, A[i], B[i]), name="C")
    s = te.create_schedule(C.op)
    s[C].vectorize(s[C].op.axis[0])
    return s, [A, B, C]


def avx2_like(host: Target) -> Target:
    """This machine as a 256-bit, 16-vector-register target (AVX2 + FMA code)."""
    feats = tuple(f for f in host.features if not f.startswith(("avx512", "amx")))
    flags = tuple(f for f in host.cflags if not f.startswith("-mprefer-vector-width"))
    if host.arch == "x86_64":
        flags = tuple(f for f in flags if f != "-march=native") + ("-mavx2", "-mfma")
    return dataclasses.replace(host, features=feats, vector_bits=256, cflags=flags)


def big_register_block(lanes: int, rows: int = 5, vectors: int = 8, k: int = 64):
    """A matmul whose register block is rows x vectors accumulators (5 x 8 = 40)."""
    M, N = rows * 2, vectors * lanes * 2
    A = te.placeholder((M, k), name="A")
    B = te.placeholder((k, N), name="B")
    r = te.reduce_axis((0, k), name="r")
    C = te.compute((M, N), lambda i, j: te.sum(A[i, r] * B[r, j], axis=r), name="C")
    s = te.create_schedule(C.op)
    CL = s.cache_write(C, "local")
    i, j = s[C].op.axis
    io, jo, ii, ji = s[C].tile(i, j, rows, vectors * lanes)
    s[CL].compute_at(s[C], jo)
    ci, cj = s[CL].op.axis
    s[CL].reorder(s[CL].op.reduce_axis[0], ci, cj)
    s[CL].unroll(ci)
    s[CL].vectorize(cj)
    s[C].unroll(ii)
    s[C].vectorize(ji)
    return s, [A, B, C]


def elementwise_add(n: int = 1 << 20):
    """C = A + B over n floats: two loads and a store per flop."""
    A = te.placeholder((n,), name="A")
    B = te.placeholder((n,), name="B")
    C = te.compute((n,), lambda i: A[i] + B[i], name="C")
    s = te.create_schedule(C.op)
    io, ii = s[C].split(s[C].op.axis[0], factor=64)
    s[C].vectorize(ii)
    s[C].parallel(io)
    return s, [A, B, C]


def recompute_9x(n: int = 256, rows: int = 9):
    """P = 2 A computed at C's row loop: each of C's 9 rows recomputes all of P."""
    A = te.placeholder((n,), name="A")
    B = te.placeholder((rows, n), name="B")
    P = te.compute((n,), lambda k: A[k] * 2.0, name="P")
    C = te.compute((rows, n), lambda i, k: P[k] + B[i, k], name="C")
    s = te.create_schedule(C.op)
    s[P].compute_at(s[C], s[C].op.axis[0])
    return s, [A, B, C]
