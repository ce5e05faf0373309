"""The output comparison that tests and measurement share (``mismatch``/``mismatches``),
the seeded inputs, and the light import the measuring worker relies on."""
from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from tvmlite import te
from tvmlite.search.measure import worker
from tvmlite.testing.check import (
    assert_allclose,
    mismatch,
    mismatches,
    random_inputs,
    seeded_arrays,
)


def test_nan_matches_only_nan_and_infinity_only_the_same_infinity() -> None:
    want = np.array([1.0, np.nan, np.inf, -np.inf, 2.0], "float32")
    assert not mismatches(want.copy(), want, 1e-4, 1e-5).any()
    got = np.array([1.0 + 1e-7, 0.0, -np.inf, -np.inf, np.nan], "float32")
    assert mismatches(got, want, 1e-4, 1e-5).tolist() == [False, True, True, False, True]
    msg = mismatch("C", got, want, 1e-4, 1e-5)
    assert msg is not None and msg.startswith("output C: 3 of 5 elements wrong")
    assert "(1 NaN/unwritten)" in msg and "rtol=0.0001, atol=1e-05" in msg
    assert mismatch("C", want, want, 0.0, 0.0) is None
    # an expected infinity makes |got - want| <= atol + rtol * |want| always true: not here
    assert mismatches(np.array([1.0, -np.inf]), np.array([np.inf, np.inf]), 1e-4, 1e-5).all()


def test_assert_allclose_uses_the_same_rule_and_names_the_worst_element() -> None:
    want = np.array([[1.0, 2.0], [3.0, np.nan]])
    assert_allclose(want.copy(), want, "float64")
    with pytest.raises(AssertionError, match=r"1 of 4 elements differ .* at index \(1, 0\)"):
        assert_allclose(np.array([[1.0, 2.0], [3.5, np.nan]]), want, "float64")
    ints = np.array([1, 2], "int32")
    assert mismatch("I", ints + np.array([0, 1], "int32"), ints, 0.0, 0.0) is not None


def test_seeded_arrays_are_the_inputs_of_the_tests_and_of_the_worker() -> None:
    A = te.placeholder((3, 4), name="A")
    B = te.placeholder((4,), name="B", dtype="int32")
    C = te.compute((3, 4), lambda i, j: A[i, j] * B[j], name="C")
    args = [{"name": t.name, "shape": list(t.shape), "dtype": t.dtype,
             "is_output": t is C} for t in (A, B, C)]
    for x, y, z in zip(random_inputs([A, B, C], seed=4), worker.make_inputs(args, 4),
                       seeded_arrays([((3, 4), "float32"), ((4,), "int32")], 4)):
        np.testing.assert_array_equal(x, y)
        np.testing.assert_array_equal(x, z)
        assert x.ctypes.data % 64 == 0


def test_the_measuring_worker_does_not_import_the_interpreter_or_scipy() -> None:
    """Nor the operators, the compiler pipeline or the checks built on them: a worker
    starts per tuning and after every crash (0.7 s with them, 0.2 s without)."""
    heavy = ("scipy", "tvmlite.testing.interpreter", "tvmlite.te", "tvmlite.ops",
             "tvmlite.passes.pipeline", "tvmlite.testing.check", "tvmlite.graph")
    code = ("import sys, tvmlite.search.measure.worker; "
            f"print(sorted(m for m in {heavy!r} if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert out.strip() == "[]"
    from tvmlite.testing import evaluate_te as same
    from tvmlite.testing.check import evaluate_te  # still importable, loaded on use
    assert evaluate_te is same and callable(evaluate_te)
