"""Quickstart: the classic CPU GEMM schedule (schedules/recipes.py, written with
the public te/schedule API): print its steps and loop nest, build, check, time.

Run: python examples/quickstart.py [--size 1024]
"""
from __future__ import annotations

import argparse

import numpy as np

import tvmlite
from tvmlite.schedules.recipes import gemm_packed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--size", type=int, default=1024, help="M = N = K (multiple of 32)")
    size = parser.parse_args().size
    target = tvmlite.Target.host()
    bn = 2 * target.vector_lanes("float32")
    if size % bn:
        parser.error(f"--size must be a multiple of {bn} on this CPU")
    s, args = gemm_packed(size, size, size, block_cols=bn)
    print(s)                                     # the schedule, as the steps that made it
    print(tvmlite.lower(s, args))                # the loop nest
    mod = tvmlite.build(s, args, target=target)
    rng = np.random.default_rng(0)
    a = tvmlite.asaligned(rng.random((size, size), dtype=np.float32))   # 64-byte aligned
    b = tvmlite.asaligned(rng.random((size, size), dtype=np.float32))
    c = tvmlite.empty((size, size), np.float32)
    mod(a, b, c)
    np.testing.assert_allclose(c, a.astype(np.float64) @ b.astype(np.float64), rtol=1e-3)
    t = mod.time_evaluator(number=5, repeat=15)(a, b, c)
    gflops = 2 * size**3 / t.median / 1e9
    print(f"\nmatmul {size}^3 float32 on {target.arch} ({target.vector_bits}-bit vectors, "
          f"{target.cores} cores): correct, {t.median * 1e3:.3f} ms median, {gflops:.1f} GFLOP/s")


if __name__ == "__main__":
    main()
