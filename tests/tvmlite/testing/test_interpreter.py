"""tvmlite/testing/interpreter.py (``evaluate_te``): the numpy meaning of a compute.

Each compute is checked against numpy written by hand, and against the unscheduled C
build of the same compute: reductions (sum/max/min, several axes, ``where``), selects
that read out of bounds only in the branch they do not take, short-circuit ``and``,
floor division of negative integers, and the evaluation in blocks."""
from __future__ import annotations

import numpy as np
import pytest

import tvmlite
from tvmlite import te
from tvmlite.testing import evaluate_te, random_inputs

RNG = np.random.default_rng(0)


def _built(tensors, inputs):
    """The unscheduled C build of the same compute, on the same inputs."""
    out_t = tensors[-1]
    mod = tvmlite.build(te.create_schedule(out_t.op), tensors)
    out = tvmlite.empty(out_t.shape, out_t.dtype)
    mod(*inputs, out)
    return out


def test_sum_reduction_is_a_matrix_product():
    A = te.placeholder((5, 7), name="A")
    B = te.placeholder((7, 3), name="B")
    k = te.reduce_axis((0, 7), "k")
    C = te.compute((5, 3), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    a, b = random_inputs([A, B, C], seed=1)
    got = evaluate_te([A, B, C], [a, b])
    np.testing.assert_allclose(got, a.astype(np.float64) @ b, rtol=1e-5)
    np.testing.assert_allclose(_built([A, B, C], [a, b]), got, rtol=1e-5, atol=1e-6)


def test_max_with_where_over_a_triangle_and_min_over_two_axes():
    A = te.placeholder((6, 6), name="A")
    k = te.reduce_axis((0, 6), "k")
    M = te.compute((6,), lambda i: te.max(A[i, k], axis=k, where=k <= i), name="M")
    a, = random_inputs([A, M], seed=2)
    got = evaluate_te([A, M], [a])
    want = np.array([a[i, :i + 1].max() for i in range(6)], np.float32)
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(_built([A, M], [a]), want)

    X = te.placeholder((4, 3, 5), name="X")
    r, s = te.reduce_axis((0, 3), "r"), te.reduce_axis((0, 5), "s")
    N = te.compute((4,), lambda i: te.min(X[i, r, s], axis=[r, s]), name="N")
    x, = random_inputs([X, N], seed=3)
    np.testing.assert_array_equal(evaluate_te([X, N], [x]), x.min(axis=(1, 2)))


def test_a_select_reads_out_of_bounds_only_where_it_is_not_taken():
    """Padding: the else branch covers the border, so the read A[i - 1] at i = 0 is
    never used and must not raise."""
    A = te.placeholder((8,), name="A")
    P = te.compute((10,), lambda i: te.if_then_else(te.all(i >= 1, i <= 8), A[i - 1], 0.0),
                   name="P")
    a, = random_inputs([A, P], seed=4)
    got = evaluate_te([A, P], [a])
    np.testing.assert_array_equal(got, np.pad(a, 1))
    np.testing.assert_array_equal(_built([A, P], [a]), got)


def test_a_live_out_of_bounds_read_is_an_index_error_naming_the_compute():
    A = te.placeholder((8,), name="A")
    B = te.compute((8,), lambda i: A[i + 1], name="shifted")
    with pytest.raises(IndexError, match=r"compute shifted reads A out of bounds.*i=7"):
        evaluate_te([A, B], [np.zeros(8, np.float32)])


def test_and_short_circuits_the_guarded_read():
    A = te.placeholder((4,), "int32", name="A")
    B = te.compute((6,), lambda i: te.if_then_else(te.all(i < 4, A[te.min(i, 3)] > 0), 1, 0),
                   name="B")
    a = np.array([3, -1, 0, 5], np.int32)
    got = evaluate_te([A, B], [a])
    np.testing.assert_array_equal(got, [1, 0, 0, 1, 0, 0])
    np.testing.assert_array_equal(_built([A, B], [a]), got)


def test_floor_division_and_modulo_of_negative_integers():
    A = te.placeholder((9,), "int32", name="A")
    B = te.compute((9,), lambda i: te.floordiv(A[i], 4) * 10 + te.floormod(A[i], 4), name="B")
    a = np.arange(-4, 5, dtype=np.int32)
    got = evaluate_te([A, B], [a])
    np.testing.assert_array_equal(got, (a // 4) * 10 + a % 4)
    np.testing.assert_array_equal(_built([A, B], [a]), got)


def test_blocked_evaluation_gives_the_same_values():
    A = te.placeholder((12, 10), name="A")
    k = te.reduce_axis((0, 10), "k")
    S = te.compute((12,), lambda i: te.sum(te.exp(A[i, k]) * 0.5, axis=k), name="S")
    a, = random_inputs([A, S], seed=5)
    whole = evaluate_te([A, S], [a])
    tiny = evaluate_te([A, S], [a], max_elements=3)   # splits rows and the reduction
    np.testing.assert_allclose(tiny, whole, rtol=1e-6)
    np.testing.assert_allclose(whole, (np.exp(a.astype(np.float64)) * 0.5).sum(1), rtol=1e-5)


def test_bad_inputs_name_the_placeholder():
    A = te.placeholder((3,), name="A")
    B = te.compute((3,), lambda i: A[i] + 1.0, name="B")
    with pytest.raises(ValueError, match="input for A must be float32"):
        evaluate_te([A, B], [np.zeros(3, np.float64)])
    with pytest.raises(ValueError, match="1 placeholders"):
        evaluate_te([A, B], [])


def test_low_precision_computes_agree_with_the_kernels_bit_for_bit():
    """bfloat16/float16 computed in float32 and rounded where stored or converted; int8
    wrapping after each operation; a max over bfloat16: as the generated C does them."""
    n = 50
    A = te.placeholder((n,), "bfloat16", name="A")
    B = te.placeholder((n,), "int8", name="B")
    k = te.reduce_axis((0, n), name="k")
    stages = [
        te.compute((n,), lambda i: A[i] * A[i] - te.cast(A[i] * 3.0, "float16") + 0.1,
                   name="C"),
        te.compute((n,), lambda i: (B[i] * B[i] * 7) // 3 + te.max(B[i], 2), name="D"),
        te.compute((1,), lambda i: te.max(A[k], axis=k), name="M")]
    a, b = random_inputs([A, B])
    b[:] = np.arange(-25, 25, dtype=np.int8)
    for T in stages:
        mod = tvmlite.build(te.create_schedule(T.op), [A, B, T])
        got = tvmlite.nd.empty(T.shape, T.dtype)
        mod(a, b, got)
        want = evaluate_te([A, B, T], [a, b])
        assert want.dtype == got.data.dtype
        np.testing.assert_array_equal(got.numpy().astype(np.float64), want.astype(np.float64))
