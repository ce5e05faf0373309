"""Reads outside a tensor are an error at lowering unless the compute guards them (padding
keeps working, and is still correct); a constant zero divisor is an error; a zero divisor
at run time gives 0 (defined in the generated C) instead of killing the process."""
from __future__ import annotations

import subprocess
import sys
import textwrap

import numpy as np
import pytest

import tvmlite
from tvmlite import ops, te
from tvmlite.passes.check_reads import OutOfBoundsError
from tvmlite.testing.check import check_schedule


def _sched(t):
    return te.create_schedule(t.op)


def test_a_shifted_read_is_an_error_naming_tensor_index_and_ranges():
    A = te.placeholder((8,), name="A")
    C = te.compute((8,), lambda i: A[i + 4], name="C")
    with pytest.raises(OutOfBoundsError) as err:
        tvmlite.lower(_sched(C), [A, C])
    msg = str(err.value)
    assert "compute C reads A[i + 4]" in msg and "[4, 11]" in msg and "i in [0, 7]" in msg
    assert "allowed [0, 7]" in msg and "at i=7 it reads index 11" in msg
    with pytest.raises(IndexError):  # also an IndexError / ValueError for callers
        tvmlite.build(_sched(C), [A, C])


def test_a_reduce_axis_reading_past_the_end_is_an_error():
    A = te.placeholder((4, 6), name="A")
    k = te.reduce_axis((0, 6), name="k")
    C = te.compute((4,), lambda i: te.sum(A[i, k + 1], axis=k), name="C")
    with pytest.raises(OutOfBoundsError, match=r"index 1 \(k \+ 1\) ranges over \[1, 6\]"):
        tvmlite.lower(_sched(C), [A, C])


def test_a_negative_index_is_an_error_whatever_the_schedule():
    A = te.placeholder((16,), name="A")
    C = te.compute((16,), lambda i: A[i - 1] + A[i], name="C")
    s = _sched(C)
    io, ii = s[C].split(s[C].op.axis[0], factor=4)
    s[C].vectorize(ii)
    with pytest.raises(OutOfBoundsError, match=r"A\[i - 1\].*\[-1, 14\].*at i=0 it reads index -1"):
        tvmlite.build(s, [A, C])


def test_a_guarded_pad_lowers_and_matches_numpy():
    A = te.placeholder((8, 5), name="A")
    P = te.compute((10, 9), lambda i, j: te.if_then_else(
        te.all(i >= 1, i < 9, j >= 2, j < 7), A[i - 1, j - 2], 0.0), name="P")
    s = _sched(P)
    io, ii = s[P].split(s[P].op.axis[0], factor=3)  # imperfect split: its own guard
    check_schedule(s, [A, P], lambda a: np.pad(a, ((1, 1), (2, 2))))


def test_a_guard_that_leaves_part_of_the_overflow_is_still_an_error():
    A = te.placeholder((8,), name="A")
    P = te.compute((10,), lambda i: te.if_then_else(i >= 1, A[i - 1], 0.0), name="P")
    with pytest.raises(OutOfBoundsError, match=r"at i=9 it reads index 8"):
        tvmlite.lower(_sched(P), [A, P])


def test_a_data_dependent_guard_is_not_provable_so_not_refused():
    A = te.placeholder((8,), name="A")
    B = te.placeholder((8,), name="B")
    C = te.compute((8,), lambda i: te.if_then_else(B[i] > 0, A[(i + 4) % 8], A[i]), name="C")
    tvmlite.lower(_sched(C), [A, B, C])
    D = te.compute((8,), lambda i: te.if_then_else(B[i] > 10, A[i + 4], 0.0), name="D")
    tvmlite.lower(_sched(D), [A, B, D])  # conservative: only a witness raises


def test_the_operator_library_pads_and_pools_still_lower_and_compute():
    for tensors, pad in ((ops.conv2d_nchw(1, 3, 7, 7, 4, 3, stride=2, padding=1), 1),
                         (ops.max_pool2d(1, 2, 7, 7, 3, stride=2, padding=1), 1)):
        s = _sched(tensors[-1])
        tvmlite.build(s, tensors)  # lowers: every guarded read is understood


def test_a_constant_zero_divisor_is_an_error_at_compute_and_at_lowering():
    A = te.placeholder((8,), "int32", name="A")
    with pytest.raises(ZeroDivisionError, match=r"compute C: integer division by zero"):
        te.compute((8,), lambda i: A[i] // 0, name="C")
    with pytest.raises(ZeroDivisionError, match=r"modulo by zero"):
        te.compute((8,), lambda i: A[i] % 0, name="C")
    C = te.compute((8,), lambda i: A[i] // (i - i), name="C")  # zero only once simplified
    with pytest.raises(ZeroDivisionError, match=r"the divisor i - i is always 0"):
        tvmlite.build(_sched(C), [A, C])


RUNTIME_ZERO = textwrap.dedent("""
    import numpy as np, tvmlite
    from tvmlite import te
    A = te.placeholder((8,), "int32", name="A")
    B = te.placeholder((8,), "int32", name="B")
    C = te.compute((8,), lambda i: A[i] // B[i], name="C")
    D = te.compute((8,), lambda i: A[i] % B[i], name="D")
    s = te.create_schedule([C.op, D.op])
    m = tvmlite.build(s, [A, B, C, D])
    a = np.array([-7, 7, 5, -2**31, 9, 0, -5, 3], "int32")
    b = np.array([0, 0, 2, -1, -1, 0, 3, -2], "int32")
    c, d = np.ones(8, "int32"), np.ones(8, "int32")
    m(a, b, c, d)
    print(" ".join(map(str, c)), "|", " ".join(map(str, d)))
""")


def test_a_zero_divisor_at_run_time_gives_zero_and_does_not_kill_the_caller():
    out = subprocess.run([sys.executable, "-c", RUNTIME_ZERO], capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, f"killed by signal {-out.returncode}: {out.stderr[-400:]}"
    c, d = out.stdout.split("|")
    # x // 0 == 0 and x % 0 == 0; INT_MIN // -1 wraps to INT_MIN; elsewhere Python's floor
    assert [int(x) for x in c.split()] == [0, 0, 2, -2**31, -9, 0, -2, -2]
    assert [int(x) for x in d.split()] == [0, 0, 1, 0, 0, 0, 1, -1]
