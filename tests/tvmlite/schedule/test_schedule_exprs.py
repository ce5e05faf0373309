"""Reductions, dtypes and expressions under schedules, checked against numpy."""
from __future__ import annotations

import numpy as np
import pytest

import tvmlite
from tvmlite import ops, te
from tvmlite.testing.check import check_schedule as check
from tvmlite.testing.workloads import ODD_MNK

M, N, K = ODD_MNK


def matmul(m=M, n=N, k=K, dtype="float32"):
    return ops.matmul(m, n, k, dtype)


# -- reductions and dtypes ---------------------------------------------------------------

@pytest.mark.parametrize("combiner", ["max", "min"])
@pytest.mark.parametrize("dtype", ["float32", "int32", "float64"])
def test_max_min_reductions(combiner, dtype):
    A = te.placeholder((M, N), dtype, name="A")
    k = te.reduce_axis((0, N), name="k")
    fn = te.max if combiner == "max" else te.min
    C = te.compute((M,), lambda i: fn(A[i, k], axis=k), name="C")
    s = te.create_schedule(C.op)
    ko, ki = s[C].split(k, factor=4)
    s[C].unroll(ki)
    check(s, [A, C], lambda a: getattr(a, combiner)(axis=1))


def test_max_reduction_vectorized_over_spatial():
    A = te.placeholder((K, N), name="A")
    k = te.reduce_axis((0, K), name="k")
    C = te.compute((N,), lambda j: te.max(A[k, j], axis=k), name="C")
    s = te.create_schedule(C.op)
    j, = s[C].op.axis
    s[C].reorder(k, j)
    s[C].vectorize(j)
    check(s, [A, C], lambda a: a.max(axis=0))


@pytest.mark.parametrize("vectorize", [False, True])
def test_max_min_propagate_nan_like_numpy(vectorize):
    A = te.placeholder((K, N), name="A")
    k1 = te.reduce_axis((0, K), name="k1")
    k2 = te.reduce_axis((0, K), name="k2")
    C = te.compute((N,), lambda j: te.max(A[k1, j], axis=k1), name="C")
    D = te.compute((N,), lambda j: te.min(A[k2, j], axis=k2), name="D")
    s = te.create_schedule([C.op, D.op])
    if vectorize:
        for T, k in ((C, k1), (D, k2)):
            s[T].reorder(k, s[T].op.axis[0])
            s[T].vectorize(s[T].op.axis[0])
    mod = tvmlite.build(s, [A, C, D])
    a = np.random.default_rng(0).uniform(-1, 1, (K, N)).astype("float32")
    a[3, 5] = a[0, 7] = a[K - 1, 20] = np.nan
    c, d = np.zeros(N, "float32"), np.zeros(N, "float32")
    mod(a, c, d)
    np.testing.assert_array_equal(c, a.max(axis=0))
    np.testing.assert_array_equal(d, a.min(axis=0))


def test_multiple_reduce_axes_with_where():
    A = te.placeholder((5, 7, 9), name="A")
    r1 = te.reduce_axis((0, 7), name="r1")
    r2 = te.reduce_axis((1, 9), name="r2")       # a reduce axis starting at 1
    C = te.compute((5,), lambda i: te.sum(A[i, r1, r2], axis=[r1, r2], where=r1 < r2),
                   name="C")
    s = te.create_schedule(C.op)
    r2o, r2i = s[C].split(r2, factor=3)
    s[C].reorder(r2o, C.op.axis[0], r1, r2i)

    def ref(a):
        mask = np.arange(7)[:, None] < np.arange(9)[None, :]
        mask[:, 0] = False
        return (a * mask).sum(axis=(1, 2))
    check(s, [A, C], ref)


def test_float64_matmul_full_schedule():
    A, B, C = matmul(dtype="float64")
    s = te.create_schedule(C.op)
    i, j = s[C].op.axis
    (k,) = s[C].op.reduce_axis
    io, jo, ii, ji = s[C].tile(i, j, 4, 4)
    ko, ki = s[C].split(k, factor=3)
    s[C].reorder(io, jo, ko, ii, ki, ji)
    s[C].vectorize(ji)
    s[C].unroll(ki)
    s[C].parallel(io)
    check(s, [A, B, C], lambda a, b: a @ b, rtol=1e-12, atol=1e-12)


def test_int32_matmul_exact():
    A, B, C = matmul(dtype="int32")
    s = te.create_schedule(C.op)
    i, j = s[C].op.axis
    jo, ji = s[C].split(j, factor=8)
    s[C].vectorize(ji)
    check(s, [A, B, C], lambda a, b: a @ b)


# -- expressions -------------------------------------------------------------------------

@pytest.mark.parametrize("vectorize", [False, True])
def test_if_then_else_all_any(vectorize):
    A = te.placeholder((M, N), name="A")
    C = te.compute((M, N), lambda i, j: te.if_then_else(
        te.any(te.all(i > 3, j < 10, A[i, j] > 0), i + 0 >= j + 12, A[i, j] < -0.9),
        A[i, j], -A[i, j] * 2), name="C")
    s = te.create_schedule(C.op)
    if vectorize:
        s[C].vectorize(s[C].op.axis[1])
    ii, jj = np.meshgrid(np.arange(M), np.arange(N), indexing="ij")

    def ref(a):
        cond = ((ii > 3) & (jj < 10) & (a > 0)) | (ii >= jj + 12) | (a < -0.9)
        return np.where(cond, a, -a * 2)
    check(s, [A, C], ref)


@pytest.mark.parametrize("vectorize", [False, True])
def test_iter_var_equality_in_condition(vectorize):
    A = te.placeholder((M, N), name="A")
    C = te.compute((M, N), lambda i, j: te.if_then_else(i == j, A[i, j], 0.0) +
                   te.if_then_else(i != j + 1, 0.0, 1.0), name="C")
    s = te.create_schedule(C.op)
    if vectorize:
        s[C].vectorize(s[C].op.axis[1])
    check(s, [A, C], lambda a: a * np.eye(M, N, dtype=a.dtype) + np.eye(M, N, -1, a.dtype))


MATH = {
    "exp": (te.exp, np.exp, -1, 1),
    "log": (te.log, np.log, 0.1, 3),
    "sqrt": (te.sqrt, np.sqrt, 0, 4),
    "tanh": (te.tanh, np.tanh, -3, 3),
    "sigmoid": (te.sigmoid, lambda x: 1 / (1 + np.exp(-x)), -5, 5),
    "abs": (te.abs, np.abs, -2, 2),
}


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("func", sorted(MATH) + ["erf"])
def test_math_functions(func, dtype):
    if func == "erf":
        from scipy.special import erf as np_fn
        te_fn, lo, hi = te.erf, -2, 2
    else:
        te_fn, np_fn, lo, hi = MATH[func]
    A = te.placeholder((3, N), dtype, name="A")
    C = te.compute((3, N), lambda i, j: te_fn(A[i, j]), name="C")
    s = te.create_schedule(C.op)
    s[C].vectorize(s[C].op.axis[1])           # vector lanes + scalar tail
    tol = 1e-5 if dtype == "float32" else 1e-12
    check(s, [A, C], lambda a: np_fn(a.astype(np.float64)).astype(dtype), rtol=tol,
          atol=tol, low=lo, high=hi)


def test_vector_erf_in_its_tails_and_at_special_values():
    """The float32 vector erf's erfc branch takes min(|x|, 4): past 4 it is exactly 1
    (no subnormal arithmetic on the way), and a NaN stays NaN, -0 stays -0."""
    from scipy.special import erf as np_erf
    x = np.array([0.5, 0.8, 2.5, 3.9, 4.0, 4.5, 9.0, 10.0, 100.0, 1e30, np.inf, 0.0] * 2,
                 np.float32) * np.repeat(np.float32([1, -1]), 12)
    x = np.concatenate([x, np.float32([np.nan] * 8)])
    A = te.placeholder((x.size,), name="A")
    C = te.compute((x.size,), lambda i: te.erf(A[i]), name="C")
    s = te.create_schedule(C.op)
    s[C].vectorize(s[C].op.axis[0])
    out = tvmlite.nd.empty((x.size,), "float32")
    tvmlite.build(s, [A, C])(tvmlite.nd.array(x), out)
    got, want = out.numpy(), np_erf(x.astype(np.float64)).astype(np.float32)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=0)   # as test_math_functions
    assert np.all(got[np.abs(x) >= 4] == np.sign(x[np.abs(x) >= 4]))
    assert np.signbit(got[x.size - 9]) and got[x.size - 9] == 0     # erf(-0) = -0


def test_vectorize_non_affine_condition_stays_correct():
    A = te.placeholder((M, N), name="A")
    C = te.compute((M, N), lambda i, j: te.if_then_else(j % 2 + 0 < 1, A[i, j], 1.0), name="C")
    s = te.create_schedule(C.op)
    s[C].vectorize(s[C].op.axis[1])
    check(s, [A, C], lambda a: np.where(np.arange(N) % 2 == 0, a, 1.0).astype("float32"))


def test_abs_int():
    A = te.placeholder((M,), "int32", name="A")
    C = te.compute((M,), lambda i: te.abs(A[i]), name="C")
    s = te.create_schedule(C.op)
    check(s, [A, C], np.abs)


def test_casts():
    A = te.placeholder((M, N), name="A")
    Ints = te.compute((M, N), lambda i, j: te.cast(A[i, j] * 10, "int32"), name="I")
    D = te.compute((M, N), lambda i, j: te.cast(Ints[i, j], "float64") / 4 +
                   te.cast(A[i, j], "float64"), name="D")
    s = te.create_schedule(D.op)
    s[D].vectorize(s[D].op.axis[1])
    s[Ints].vectorize(s[Ints].op.axis[1])

    def ref(a):
        i = (a * np.float32(10)).astype(np.int32)       # C truncates toward zero
        return i, i.astype(np.float64) / 4 + a.astype(np.float64)
    check(s, [A, Ints, D], ref, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("vectorize", [False, True])
def test_floordiv_floormod_of_index_negative(vectorize):
    n = 23
    C = te.compute((n,), lambda i: (i - 5) // 3 * 100 + (i - 11) % 4, name="C")
    s = te.create_schedule(C.op)
    if vectorize:
        s[C].vectorize(s[C].op.axis[0])
    i = np.arange(n)
    check(s, [C], lambda: ((i - 5) // 3 * 100 + (i - 11) % 4).astype("int32"))


def test_floordiv_floormod_of_values_negative_divisor():
    A = te.placeholder((M, N), "int32", name="A")
    C = te.compute((M, N), lambda i, j: te.floordiv(A[i, j], -3) * 10 + te.floormod(A[i, j], 3),
                   name="C")
    D = te.compute((M, N), lambda i, j: A[i, j] // 4 + A[i, j] % -5, name="D")
    s = te.create_schedule([C.op, D.op])
    check(s, [A, C, D], lambda a: (a // -3 * 10 + a % 3, a // 4 + a % -5))


def test_padding_select_vectorized():
    A = te.placeholder((M, N), name="A")
    P = te.compute((M, N + 4), lambda i, j: te.if_then_else(
        te.all(j >= 2, j < N + 2), A[i, j - 2], 0.0), name="P")
    s = te.create_schedule(P.op)
    s[P].vectorize(s[P].op.axis[1])
    check(s, [A, P], lambda a: np.pad(a, ((0, 0), (2, 2))))


def test_zero_dim_output():
    A = te.placeholder((N,), name="A")
    k = te.reduce_axis((0, N), name="k")
    C = te.compute((), lambda: te.sum(A[k], axis=k), name="C")
    s = te.create_schedule(C.op)
    s[C].split(k, factor=4)
    check(s, [A, C], lambda a: np.array(a.sum(), "float32"))


def test_two_outputs_one_kernel():
    A = te.placeholder((M, N), name="A")
    B = te.compute((M, N), lambda i, j: A[i, j] + 1, name="B")
    C = te.compute((M, N), lambda i, j: B[i, j] * 2, name="C")
    s = te.create_schedule([B.op, C.op])
    s[C].vectorize(s[C].op.axis[1])
    check(s, [A, B, C], lambda a: (a + 1, (a + 1) * 2))
