"""The shared test workloads: the matmul reference, the tiled matmul schedule and the
two-stage chain build, run and match numpy, and their sizes leave remainders."""
from __future__ import annotations

import numpy as np

from tvmlite import te
from tvmlite.testing import check_schedule
from tvmlite.testing.workloads import ODD_MNK, matmul_reference, tiled_matmul, two_stage


def test_matmul_reference_accumulates_wide_and_keeps_the_dtype() -> None:
    rng = np.random.default_rng(0)
    a, b = rng.uniform(-1, 1, (5, 7)).astype("float32"), rng.uniform(-1, 1, (7, 3)).astype(
        "float32")
    got = matmul_reference(a, b)
    assert got.dtype == np.float32
    np.testing.assert_array_equal(got, (a.astype(np.float64) @ b).astype(np.float32))
    big = np.full((1, 2), 2**30, "int32")
    assert matmul_reference(big, np.ones((2, 1), "int32")).dtype == np.int32


def test_tiled_matmul_matches_numpy_with_remainders_everywhere() -> None:
    m, n, k = ODD_MNK
    assert all(x % t for x in (m, n, k) for t in (4, 8))
    s, tensors = tiled_matmul()
    assert [t.shape for t in tensors] == [(m, k), (k, n), (m, n)]
    check_schedule(s, tensors, matmul_reference)
    s, tensors = tiled_matmul(16, 16, 16, "float64")
    check_schedule(s, tensors, matmul_reference, rtol=1e-12, atol=1e-12)


def test_two_stage_is_a_times_two_plus_one() -> None:
    A, B, C = two_stage((6, 5))
    s = te.create_schedule(C.op)
    s[B].compute_inline()
    check_schedule(s, [A, C], lambda a: a * 2 + 1)
