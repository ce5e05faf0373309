"""Loop primitives (split, tile, reorder, fuse, vectorize, parallel, unroll, pragma),
alone and combined, each built, run and checked against numpy.

Shapes are small and odd (17x23x19) so every split has a remainder somewhere.
"""
from __future__ import annotations

import numpy as np
import pytest

from tvmlite import ops, te
from tvmlite.testing.check import check_schedule as check
from tvmlite.testing.workloads import ODD_MNK, matmul_reference

M, N, K = ODD_MNK


def matmul(m=M, n=N, k=K, dtype="float32"):
    return ops.matmul(m, n, k, dtype)


def elementwise(shape=(M, N), dtype="float32"):
    A = te.placeholder(shape, dtype, name="A")
    if len(shape) == 1:
        C = te.compute(shape, lambda i: A[i] * 2 + 1, name="C")
    elif len(shape) == 2:
        C = te.compute(shape, lambda i, j: A[i, j] * 2 + 1, name="C")
    else:
        C = te.compute(shape, lambda i, j, k: A[i, j, k] * 2 + 1, name="C")
    return A, C


def ew_ref(a):
    return a * 2 + 1


def extents(s, stage):
    return [(it.name, it.extent) for it in s.state.stage(stage).leaves]


# -- split -----------------------------------------------------------------------------

@pytest.mark.parametrize("n,factor,nparts,want", [
    (16, 4, None, (4, 4)),        # perfect
    (17, 4, None, (5, 4)),        # imperfect: 5 * 4 = 20 > 17
    (17, 1, None, (17, 1)),
    (17, 17, None, (1, 17)),
    (17, 32, None, (1, 32)),      # factor bigger than the loop
    (16, None, 4, (4, 4)),        # nparts, perfect
    (17, None, 3, (3, 6)),        # nparts, imperfect: 3 * 6 = 18 > 17
    (17, None, 17, (17, 1)),
    (17, None, 20, (20, 1)),      # more parts than iterations
])
def test_split_1d(n, factor, nparts, want):
    A, C = elementwise((n,))
    s = te.create_schedule(C.op)
    xo, xi = s[C].split(s[C].op.axis[0], factor=factor, nparts=nparts)
    assert (xo.name, xi.name) == ("i_outer", "i_inner")
    assert [e for _, e in extents(s, "C")] == list(want)
    check(s, [A, C], ew_ref)


def test_split_2d_both_axes_imperfect_and_perfect():
    A, C = elementwise((M, 24))
    s = te.create_schedule(C.op)
    i, j = s[C].op.axis
    s[C].split(i, factor=4)       # 17 = 4*4 + 1
    s[C].split(j, nparts=6)       # 24 = 6*4
    check(s, [A, C], ew_ref)


def test_split_of_a_split():
    A, C = elementwise((M, N))
    s = te.create_schedule(C.op)
    i, j = s[C].op.axis
    jo, ji = s[C].split(j, factor=8)           # 23 -> 3 x 8
    jio, jii = s[C].split(ji, factor=3)        # 8 -> 3 x 3 (imperfect inside)
    io, ii = s[C].split(i, nparts=2)           # 17 -> 2 x 9
    iio, iii = s[C].split(io, factor=1)
    assert [n for n, _ in extents(s, "C")] == ["i_outer_outer", "i_outer_inner", "i_inner",
                                               "j_outer", "j_inner_outer", "j_inner_inner"]
    check(s, [A, C], ew_ref)


def test_split_reduce_axis_imperfect():
    A, B, C = matmul()
    s = te.create_schedule(C.op)
    (k,) = s[C].op.reduce_axis
    ko, ki = s[C].split(k, factor=4)           # 19 = 4*5 - 1
    check(s, [A, B, C], matmul_reference)


def test_split_reduce_axis_nparts():
    A, B, C = matmul()
    s = te.create_schedule(C.op)
    (k,) = s[C].op.reduce_axis
    s[C].split(k, nparts=4)
    check(s, [A, B, C], matmul_reference)


# -- tile / reorder ------------------------------------------------------------------

@pytest.mark.parametrize("fx,fy", [(4, 8), (5, 5), (1, 23), (17, 1), (32, 32)])
def test_tile(fx, fy):
    A, B, C = matmul()
    s = te.create_schedule(C.op)
    i, j = s[C].op.axis
    io, jo, ii, ji = s[C].tile(i, j, fx, fy)
    assert [n for n, _ in extents(s, "C")] == ["i_outer", "j_outer", "i_inner", "j_inner", "k"]
    check(s, [A, B, C], matmul_reference)


def test_reorder_subset_keeps_other_positions():
    A = te.placeholder((5, 7, 9), name="A")
    C = te.compute((5, 7, 9), lambda i, j, k: A[i, j, k] + 1, name="C")
    s = te.create_schedule(C.op)
    i, j, k = s[C].op.axis
    s[C].reorder(k, i)                        # j stays in the middle
    assert [n for n, _ in extents(s, "C")] == ["k", "j", "i"]
    check(s, [A, C], lambda a: a + 1)


def test_reorder_reduce_outermost():
    """Every spatial loop inside the reduce loop: init gets its own nest."""
    A, B, C = matmul()
    s = te.create_schedule(C.op)
    i, j = s[C].op.axis
    (k,) = s[C].op.reduce_axis
    s[C].reorder(k, i, j)
    assert [n for n, _ in extents(s, "C")] == ["k", "i", "j"]
    check(s, [A, B, C], matmul_reference)


def test_reorder_reduce_between_spatial():
    A, B, C = matmul()
    s = te.create_schedule(C.op)
    i, j = s[C].op.axis
    (k,) = s[C].op.reduce_axis
    ko, ki = s[C].split(k, factor=5)
    jo, ji = s[C].split(j, factor=6)
    s[C].reorder(jo, ko, i, ki, ji)
    check(s, [A, B, C], matmul_reference)


# -- fuse ------------------------------------------------------------------------------

def test_fuse_two():
    A, C = elementwise((M, N))
    s = te.create_schedule(C.op)
    i, j = s[C].op.axis
    f = s[C].fuse(i, j)
    assert extents(s, "C") == [(f.name, M * N)]
    check(s, [A, C], ew_ref)


def test_fuse_three():
    A, C = elementwise((3, 5, 7))
    s = te.create_schedule(C.op)
    s[C].fuse(*s[C].op.axis)
    check(s, [A, C], ew_ref)


def test_fuse_then_split_imperfect_vectorize_parallel():
    A, C = elementwise((M, N))
    s = te.create_schedule(C.op)
    i, j = s[C].op.axis
    f = s[C].fuse(i, j)                       # 17 * 23 = 391 iterations
    fo, fi = s[C].split(f, factor=16)         # 391 = 16 * 25 - 9
    s[C].parallel(fo)
    s[C].vectorize(fi)
    check(s, [A, C], ew_ref)


def test_fuse_after_split_and_reorder():
    A, C = elementwise((M, N))
    s = te.create_schedule(C.op)
    i, j = s[C].op.axis
    io, jo, ii, ji = s[C].tile(i, j, 4, 8)
    f = s[C].fuse(io, jo)
    s[C].parallel(f)
    s[C].vectorize(ji)
    check(s, [A, C], ew_ref)


def test_fuse_reduce_axes():
    A = te.placeholder((M, 5, 7), name="A")
    r1 = te.reduce_axis((0, 5), name="r1")
    r2 = te.reduce_axis((0, 7), name="r2")
    C = te.compute((M,), lambda i: te.sum(A[i, r1, r2], axis=[r1, r2]), name="C")
    s = te.create_schedule(C.op)
    f = s[C].fuse(r1, r2)
    fo, fi = s[C].split(f, factor=8)          # 35 = 8 * 5 - 5
    check(s, [A, C], lambda a: a.sum(axis=(1, 2)))


def test_fuse_spatial_in_reduction_and_parallel():
    A, B, C = matmul()
    s = te.create_schedule(C.op)
    i, j = s[C].op.axis
    f = s[C].fuse(i, j)
    s[C].parallel(f)
    check(s, [A, B, C], matmul_reference)


# -- vectorize -----------------------------------------------------------------------

@pytest.mark.parametrize("n", [16, 20, 7, 1, 2, 33])
def test_vectorize_extents(n):
    A = te.placeholder((5, n), name="A")
    B = te.placeholder((5, n), name="B")
    C = te.compute((5, n), lambda i, j: A[i, j] * B[i, j] + 1.5, name="C")
    s = te.create_schedule(C.op)
    s[C].vectorize(s[C].op.axis[1])
    check(s, [A, B, C], lambda a, b: a * b + 1.5)


def test_vectorize_transposed_read_gathers():
    """C = A @ B.T with B[j, k]: vectorizing j reads B with stride K (a gather)."""
    A = te.placeholder((M, K), name="A")
    B = te.placeholder((N, K), name="B")
    k = te.reduce_axis((0, K), name="k")
    C = te.compute((M, N), lambda i, j: te.sum(A[i, k] * B[j, k], axis=k), name="C")
    s = te.create_schedule(C.op)
    i, j = s[C].op.axis
    jo, ji = s[C].split(j, factor=8)
    s[C].reorder(i, jo, k, ji)
    s[C].vectorize(ji)
    mod = check(s, [A, B, C], lambda a, b: matmul_reference(a, b.T))
    assert "tvmlite_f32x8" in mod.get_source()


def test_vectorize_transposed_store_scatters():
    A = te.placeholder((M, N), name="A")
    C = te.compute((N, M), lambda i, j: A[j, i] * 3, name="C")
    s = te.create_schedule(C.op)
    i, j = s[C].op.axis
    s[C].reorder(j, i)
    s[C].vectorize(i)                          # C[i, j] with i innermost: stride M
    check(s, [A, C], lambda a: a.T * 3)


def test_vectorize_guarded_inner_of_imperfect_split():
    A, C = elementwise((M, N))
    s = te.create_schedule(C.op)
    i, j = s[C].op.axis
    jo, ji = s[C].split(j, factor=8)           # the last chunk of 8 covers 21..23 only
    s[C].vectorize(ji)
    mod = check(s, [A, C], ew_ref)
    assert "tvmlite_f32x8" in mod.get_source()


def test_vectorize_outer_of_reduce_spatial_axis():
    A, B, C = matmul()
    s = te.create_schedule(C.op)
    i, j = s[C].op.axis
    (k,) = s[C].op.reduce_axis
    s[C].reorder(i, k, j)
    s[C].vectorize(j)                          # 23 = 16 + 7 tail
    check(s, [A, B, C], matmul_reference)


@pytest.mark.parametrize("dtype", ["float64", "int32", "int64"])
def test_vectorize_other_dtypes(dtype):
    A, B, C = matmul(dtype=dtype)
    s = te.create_schedule(C.op)
    i, j = s[C].op.axis
    (k,) = s[C].op.reduce_axis
    jo, ji = s[C].split(j, factor=4)
    s[C].reorder(i, jo, k, ji)
    s[C].vectorize(ji)
    check(s, [A, B, C], lambda a, b: a @ b, rtol=1e-12)


def test_vectorize_select_call_and_cast():
    A = te.placeholder((M, N), name="A")
    Ints = te.placeholder((M, N), "int32", name="I")
    C = te.compute((M, N), lambda i, j: te.if_then_else(
        A[i, j] > 0, te.exp(A[i, j]), te.cast(Ints[i, j], "float32") * 0.5), name="C")
    s = te.create_schedule(C.op)
    s[C].vectorize(s[C].op.axis[1])
    check(s, [A, Ints, C], lambda a, n: np.where(a > 0, np.exp(a), n.astype("float32") * 0.5))


# -- parallel / unroll / pragma ------------------------------------------------------

def test_parallel_outer():
    A, C = elementwise((M, N))
    s = te.create_schedule(C.op)
    s[C].parallel(s[C].op.axis[0])
    mod = check(s, [A, C], ew_ref)
    assert "#pragma omp parallel for" in mod.get_source()


def test_parallel_inner_and_imperfect():
    A, B, C = matmul()
    s = te.create_schedule(C.op)
    i, j = s[C].op.axis
    io, ii = s[C].split(i, factor=3)
    s[C].parallel(ii)                          # a parallel loop inside a serial one
    check(s, [A, B, C], matmul_reference)


def test_unroll_spatial_and_reduce():
    A, B, C = matmul()
    s = te.create_schedule(C.op)
    i, j = s[C].op.axis
    (k,) = s[C].op.reduce_axis
    jo, ji = s[C].split(j, factor=4)
    ko, ki = s[C].split(k, factor=4)
    s[C].reorder(i, jo, ko, ki, ji)
    s[C].unroll(ki)
    s[C].unroll(ji)
    mod = check(s, [A, B, C], matmul_reference)
    assert "k_inner" not in mod.get_source()   # unrolled in the IR


def test_unroll_whole_small_loop():
    A, C = elementwise((M, 5))
    s = te.create_schedule(C.op)
    s[C].unroll(s[C].op.axis[1])
    check(s, [A, C], ew_ref)


@pytest.mark.parametrize("limit", [0, 4, 16, 512])
def test_pragma_auto_unroll_max_step(limit):
    A, B, C = matmul()
    s = te.create_schedule(C.op)
    i, j = s[C].op.axis
    (k,) = s[C].op.reduce_axis
    io, jo, ii, ji = s[C].tile(i, j, 2, 4)
    s[C].pragma(io, "auto_unroll_max_step", limit)
    check(s, [A, B, C], matmul_reference)
