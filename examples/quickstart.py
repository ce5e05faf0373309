"""Quickstart: declare a matmul, schedule it the classic CPU way, build, check, time.

Run: python examples/quickstart.py [--size 512]
"""
from __future__ import annotations

import argparse

import numpy as np

import tvmlite
from tvmlite import te


def matmul_schedule(M: int, N: int, K: int, bn: int, mb: int = 8):
    """Pack B into bn-wide panels, keep an mb x bn block of C in vector registers."""
    A = te.placeholder((M, K), name="A")
    B = te.placeholder((K, N), name="B")
    packedB = te.compute((N // bn, K, bn), lambda x, y, z: B[y, x * bn + z], name="packedB")
    k = te.reduce_axis((0, K), name="k")
    C = te.compute((M, N), lambda i, j: te.sum(A[i, k] * packedB[j // bn, k, j % bn], axis=k),
                   name="C")
    s = te.create_schedule(C.op)
    CC = s.cache_write(C, "local")                # the accumulator block
    i, j = s[C].op.axis
    jo, ji = s[C].split(j, factor=bn)
    io, ii = s[C].split(i, factor=mb)
    s[C].reorder(jo, io, ii, ji)
    s[C].vectorize(ji)
    s[C].unroll(ii)
    s[C].parallel(jo)
    s[CC].compute_at(s[C], io)                   # computed per mb x bn block
    ci, cj = s[CC].op.axis
    (kk,) = s[CC].op.reduce_axis
    ko, ki = s[CC].split(kk, factor=4)
    s[CC].reorder(ko, ki, ci, cj)
    s[CC].unroll(ki)
    s[CC].unroll(ci)
    s[CC].vectorize(cj)
    x, _, z = s[packedB].op.axis
    s[packedB].vectorize(z)
    s[packedB].parallel(x)
    return s, [A, B, C]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--size", type=int, default=1024, help="M = N = K (multiple of 32)")
    size = parser.parse_args().size
    target = tvmlite.Target.host()
    bn = 2 * target.vector_lanes("float32")
    if size % bn:
        parser.error(f"--size must be a multiple of {bn} on this CPU")
    s, args = matmul_schedule(size, size, size, bn)
    print(s)                                     # the schedule, as the steps that made it
    print(tvmlite.lower(s, args))                # the loop nest
    mod = tvmlite.build(s, args, target=target)
    rng = np.random.default_rng(0)
    a = rng.random((size, size), dtype=np.float32)
    b = rng.random((size, size), dtype=np.float32)
    c = np.empty((size, size), np.float32)
    mod(a, b, c)
    np.testing.assert_allclose(c, a.astype(np.float64) @ b.astype(np.float64), rtol=1e-3)
    t = mod.time_evaluator(number=5, repeat=15)(a, b, c)
    gflops = 2 * size**3 / t.median / 1e9
    print(f"\nmatmul {size}^3 float32 on {target.arch} ({target.vector_bits}-bit vectors, "
          f"{target.cores} cores): correct, {t.median * 1e3:.3f} ms median, {gflops:.1f} GFLOP/s")


if __name__ == "__main__":
    main()
