"""Schedule primitives, alone and combined, each built, run and checked against numpy;
and illegal schedules, each raising ScheduleError naming the stage and the axis.

Shapes are small and odd (17x23x19) so every split has a remainder somewhere.
"""
from __future__ import annotations

import re

import numpy as np
import pytest

import tvmlite
from tvmlite import ScheduleError, te

M, N, K = 17, 23, 19


# -- helpers -------------------------------------------------------------------------

def _is_float(dtype: str) -> bool:
    return str(dtype).startswith("float")


def check(s, tensors, ref_fn, rtol=1e-4, atol=1e-5, low=-1.0, high=1.0, seed=0):
    """Build ``s`` with ``tensors`` as arguments, run it on seeded random inputs (the
    placeholders, in argument order) and compare every computed argument with
    ``ref_fn(*inputs)`` (one array, or a tuple in argument order). Outputs start as NaN
    (or a sentinel for integers) so an element the kernel forgets to write fails."""
    mod = tvmlite.build(s, tensors)
    rng = np.random.default_rng(seed)
    arrays, ins, outs = [], [], []
    for t in tensors:
        if isinstance(t.op, te.PlaceholderOp):
            if _is_float(t.dtype):
                a = rng.uniform(low, high, t.shape).astype(t.dtype)
            else:
                a = rng.integers(-8, 8, t.shape).astype(t.dtype)
            ins.append(a)
        else:
            a = np.full(t.shape, np.nan if _is_float(t.dtype) else -123456, t.dtype)
            outs.append(a)
        arrays.append(a)
    mod(*arrays)
    expected = ref_fn(*ins)
    if not isinstance(expected, tuple):
        expected = (expected,)
    assert len(expected) == len(outs)
    for got, want in zip(outs, expected):
        want = np.asarray(want)
        assert got.shape == want.shape
        if _is_float(got.dtype):
            np.testing.assert_allclose(got, want, rtol=rtol, atol=atol)
        else:
            np.testing.assert_array_equal(got, want.astype(got.dtype))
    return mod


def matmul(m=M, n=N, k=K, dtype="float32"):
    A = te.placeholder((m, k), dtype, name="A")
    B = te.placeholder((k, n), dtype, name="B")
    r = te.reduce_axis((0, k), name="k")
    C = te.compute((m, n), lambda i, j: te.sum(A[i, r] * B[r, j], axis=r), name="C")
    return A, B, C


def mm_ref(a, b):
    return (a.astype(np.float64) @ b.astype(np.float64)).astype(a.dtype)


def elementwise(shape=(M, N), dtype="float32"):
    A = te.placeholder(shape, dtype, name="A")
    if len(shape) == 1:
        C = te.compute(shape, lambda i: A[i] * 2 + 1, name="C")
    elif len(shape) == 2:
        C = te.compute(shape, lambda i, j: A[i, j] * 2 + 1, name="C")
    else:
        C = te.compute(shape, lambda i, j, l: A[i, j, l] * 2 + 1, name="C")
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
    check(s, [A, B, C], mm_ref)


def test_split_reduce_axis_nparts():
    A, B, C = matmul()
    s = te.create_schedule(C.op)
    (k,) = s[C].op.reduce_axis
    s[C].split(k, nparts=4)
    check(s, [A, B, C], mm_ref)


# -- tile / reorder ------------------------------------------------------------------

@pytest.mark.parametrize("fx,fy", [(4, 8), (5, 5), (1, 23), (17, 1), (32, 32)])
def test_tile(fx, fy):
    A, B, C = matmul()
    s = te.create_schedule(C.op)
    i, j = s[C].op.axis
    io, jo, ii, ji = s[C].tile(i, j, fx, fy)
    assert [n for n, _ in extents(s, "C")] == ["i_outer", "j_outer", "i_inner", "j_inner", "k"]
    check(s, [A, B, C], mm_ref)


def test_reorder_subset_keeps_other_positions():
    A = te.placeholder((5, 7, 9), name="A")
    C = te.compute((5, 7, 9), lambda i, j, l: A[i, j, l] + 1, name="C")
    s = te.create_schedule(C.op)
    i, j, l = s[C].op.axis
    s[C].reorder(l, i)                        # j stays in the middle
    assert [n for n, _ in extents(s, "C")] == ["l", "j", "i"]
    check(s, [A, C], lambda a: a + 1)


def test_reorder_reduce_outermost():
    """Every spatial loop inside the reduce loop: init gets its own nest."""
    A, B, C = matmul()
    s = te.create_schedule(C.op)
    i, j = s[C].op.axis
    (k,) = s[C].op.reduce_axis
    s[C].reorder(k, i, j)
    assert [n for n, _ in extents(s, "C")] == ["k", "i", "j"]
    check(s, [A, B, C], mm_ref)


def test_reorder_reduce_between_spatial():
    A, B, C = matmul()
    s = te.create_schedule(C.op)
    i, j = s[C].op.axis
    (k,) = s[C].op.reduce_axis
    ko, ki = s[C].split(k, factor=5)
    jo, ji = s[C].split(j, factor=6)
    s[C].reorder(jo, ko, i, ki, ji)
    check(s, [A, B, C], mm_ref)


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
    check(s, [A, B, C], mm_ref)


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
    mod = check(s, [A, B, C], lambda a, b: mm_ref(a, b.T))
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
    check(s, [A, B, C], mm_ref)


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
    I = te.placeholder((M, N), "int32", name="I")
    C = te.compute((M, N), lambda i, j: te.if_then_else(
        A[i, j] > 0, te.exp(A[i, j]), te.cast(I[i, j], "float32") * 0.5), name="C")
    s = te.create_schedule(C.op)
    s[C].vectorize(s[C].op.axis[1])
    check(s, [A, I, C], lambda a, n: np.where(a > 0, np.exp(a), n.astype("float32") * 0.5))


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
    check(s, [A, B, C], mm_ref)


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
    mod = check(s, [A, B, C], mm_ref)
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
    check(s, [A, B, C], mm_ref)


# -- compute_at ------------------------------------------------------------------------

def two_stage(shape=(M, N)):
    A = te.placeholder(shape, name="A")
    B = te.compute(shape, lambda i, j: A[i, j] * 2, name="B")
    C = te.compute(shape, lambda i, j: B[i, j] + 1, name="C")
    return A, B, C


@pytest.mark.parametrize("loop", ["i_outer", "j_outer", "i_inner", "j_inner"])
def test_compute_at_elementwise_each_loop(loop):
    A, B, C = two_stage()
    s = te.create_schedule(C.op)
    i, j = s[C].op.axis
    s[C].tile(i, j, 4, 8)
    s[B].compute_at(s[C], loop)
    check(s, [A, C], lambda a: a * 2 + 1)


def test_compute_at_stencil_region_bigger_than_one():
    n = 37
    A = te.placeholder((n + 2,), name="A")
    B = te.compute((n + 2,), lambda i: A[i] * 2 + 1, name="B")
    C = te.compute((n,), lambda i: B[i] + B[i + 1] + B[i + 2], name="C")
    s = te.create_schedule(C.op)
    xo, xi = s[C].split(s[C].op.axis[0], factor=8)   # 37 = 8 * 5 - 3: last tile clipped
    s[B].compute_at(s[C], xo)
    s[C].vectorize(xi)
    assert "allocate B[float32 * 10]" in str(tvmlite.lower(s, [A, C]))

    def ref(a):
        b = a * 2 + 1
        return b[:-2] + b[1:-1] + b[2:]
    check(s, [A, C], ref)


def test_compute_at_stencil_2d_tiled():
    A = te.placeholder((M + 2, N + 2), name="A")
    B = te.compute((M + 2, N + 2), lambda i, j: te.sqrt(A[i, j] * A[i, j] + 1), name="B")
    C = te.compute((M, N), lambda i, j: B[i, j] + B[i + 2, j + 1] * 2 - B[i + 1, j + 2],
                   name="C")
    s = te.create_schedule(C.op)
    i, j = s[C].op.axis
    io, jo, ii, ji = s[C].tile(i, j, 4, 8)
    s[B].compute_at(s[C], jo)
    s[C].parallel(io)

    def ref(a):
        b = np.sqrt(a * a + 1)
        return b[:-2, :-2] + b[2:, 1:-1] * 2 - b[1:-1, 2:]
    check(s, [A, C], ref)


def pad_conv1d(n=29, r=5, pad=2):
    A = te.placeholder((n,), name="A")
    W = te.placeholder((r,), name="W")
    P = te.compute((n + 2 * pad,), lambda i: te.if_then_else(
        te.all(i >= pad, i < n + pad), A[i - pad], 0.0), name="P")
    rr = te.reduce_axis((0, r), name="rr")
    m = n + 2 * pad - r + 1
    C = te.compute((m,), lambda i: te.sum(P[i + rr] * W[rr], axis=rr), name="C")

    def ref(a, w):
        p = np.pad(a, pad)
        return np.array([(p[x:x + r] * w).sum() for x in range(m)], dtype=a.dtype)
    return A, W, P, C, ref


@pytest.mark.parametrize("where", ["outer", "inner", "reduce"])
def test_compute_at_padding_stage(where):
    A, W, P, C, ref = pad_conv1d()
    s = te.create_schedule(C.op)
    xo, xi = s[C].split(s[C].op.axis[0], factor=4)
    loop = {"outer": xo, "inner": xi, "reduce": s[C].op.reduce_axis[0]}[where]
    s[P].compute_at(s[C], loop)
    check(s, [A, W, C], ref)


def test_compute_at_padding_stage_2d_conv():
    n, kh, pad = 9, 3, 1
    A = te.placeholder((n, n), name="A")
    W = te.placeholder((kh, kh), name="W")
    P = te.compute((n + 2, n + 2), lambda y, x: te.if_then_else(
        te.all(y >= pad, y < n + pad, x >= pad, x < n + pad), A[y - pad, x - pad], 0.0),
        name="P")
    ry = te.reduce_axis((0, kh), name="ry")
    rx = te.reduce_axis((0, kh), name="rx")
    C = te.compute((n, n), lambda y, x: te.sum(P[y + ry, x + rx] * W[ry, rx], axis=[ry, rx]),
                   name="C")
    s = te.create_schedule(C.op)
    y, x = s[C].op.axis
    yo, xo, yi, xi = s[C].tile(y, x, 4, 4)
    s[P].compute_at(s[C], xo)
    s[C].reorder(yo, xo, ry, rx, yi, xi)
    s[C].vectorize(xi)

    def ref(a, w):
        p = np.pad(a, pad)
        out = np.zeros((n, n), a.dtype)
        for dy in range(kh):
            for dx in range(kh):
                out += p[dy:dy + n, dx:dx + n] * w[dy, dx]
        return out
    check(s, [A, W, C], ref)


def test_compute_at_into_reduce_loop_of_matmul():
    A = te.placeholder((M, K), name="A")
    B = te.placeholder((K, N), name="B")
    A2 = te.compute((M, K), lambda i, k: A[i, k] * 2, name="A2")
    k = te.reduce_axis((0, K), name="r")
    C = te.compute((M, N), lambda i, j: te.sum(A2[i, k] * B[k, j], axis=k), name="C")
    s = te.create_schedule(C.op)
    i, j = s[C].op.axis
    ko, ki = s[C].split(k, factor=4)
    s[C].reorder(i, ko, j, ki)
    s[A2].compute_at(s[C], ko)
    check(s, [A, B, C], lambda a, b: mm_ref(a * 2, b))


def test_compute_at_chain():
    A = te.placeholder((M, N), name="A")
    B = te.compute((M, N), lambda i, j: A[i, j] + 1, name="B")
    C = te.compute((M, N), lambda i, j: B[i, j] * 3, name="C")
    D = te.compute((M, N), lambda i, j: C[i, j] - A[i, j], name="D")
    s = te.create_schedule(D.op)
    i, j = s[D].op.axis
    io, ii = s[D].split(i, factor=5)
    s[C].compute_at(s[D], io)
    ci, cj = s[C].op.axis
    s[B].compute_at(s[C], ci)
    check(s, [A, D], lambda a: (a + 1) * 3 - a)


def test_compute_at_producer_with_two_readers_inside_the_loop():
    A = te.placeholder((M, N), name="A")
    B = te.compute((M, N), lambda i, j: A[i, j] * 2, name="B")
    C = te.compute((M, N), lambda i, j: B[i, j] + 1, name="C")
    D = te.compute((M, N), lambda i, j: C[i, j] * B[i, j], name="D")
    s = te.create_schedule(D.op)
    io, ii = s[D].split(s[D].op.axis[0], factor=4)
    s[C].compute_at(s[D], io)
    s[B].compute_at(s[D], io)
    check(s, [A, D], lambda a: (a * 2 + 1) * (a * 2))


def test_compute_at_fused_and_split_consumer():
    A = te.placeholder((M + 2, N), name="A")
    B = te.compute((M + 2, N), lambda i, j: A[i, j] * 2, name="B")
    C = te.compute((M, N), lambda i, j: B[i, j] + B[i + 2, j], name="C")
    s = te.create_schedule(C.op)
    f = s[C].fuse(*s[C].op.axis)
    fo, fi = s[C].split(f, factor=16)          # index via // and %: rows cross tiles
    s[B].compute_at(s[C], fo)
    s[C].vectorize(fi)
    check(s, [A, C], lambda a: a[:-2] * 2 + a[2:] * 2)


def test_compute_at_strided_and_upsampling_readers():
    A = te.placeholder((2 * M,), name="A")
    B = te.compute((2 * M,), lambda i: A[i] + 1, name="B")
    C = te.compute((M,), lambda i: B[2 * i] - B[2 * i + 1], name="C")
    D = te.compute((4 * M,), lambda i: C[i // 4] * 3, name="D")
    s = te.create_schedule(D.op)
    xo, xi = s[D].split(s[D].op.axis[0], factor=8)
    s[C].compute_at(s[D], xo)
    co, ci = s[C].split(s[C].op.axis[0], factor=2)
    s[B].compute_at(s[C], co)
    assert "allocate C[float32 * 2]" in str(tvmlite.lower(s, [A, D]))
    check(s, [A, D], lambda a: np.repeat(((a[0::2] + 1) - (a[1::2] + 1)) * 3, 4))


def test_compute_at_reduction_into_elementwise_consumer():
    A, B, C = matmul()
    D = te.compute((M, N), lambda i, j: te.max(C[i, j], 0.0), name="D")
    s = te.create_schedule(D.op)
    i, j = s[D].op.axis
    io, jo, ii, ji = s[D].tile(i, j, 4, 8)
    s[C].compute_at(s[D], jo)
    ci, cj = s[C].op.axis
    (k,) = s[C].op.reduce_axis
    s[C].reorder(k, ci, cj)
    s[C].vectorize(cj)
    s[D].vectorize(ji)
    s[D].parallel(io)
    check(s, [A, B, D], lambda a, b: np.maximum(mm_ref(a, b), 0))


def test_compute_at_with_parallel_and_unrolled_producer():
    A, B, C = two_stage()
    s = te.create_schedule(C.op)
    i, j = s[C].op.axis
    jo, ji = s[C].split(j, factor=4)
    s[B].compute_at(s[C], ji)
    s[C].unroll(ji)                               # the attached stage is copied 4 times
    s[C].parallel(i)                              # its buffer is private to each thread
    check(s, [A, C], lambda a: a * 2 + 1)


def test_compute_at_two_levels_of_stencil_at_one_loop():
    A = te.placeholder((M + 4,), name="A")
    B = te.compute((M + 4,), lambda i: A[i] * 2, name="B")
    Cc = te.compute((M + 2,), lambda i: B[i] + B[i + 2], name="Cc")
    D = te.compute((M,), lambda i: Cc[i] * Cc[i + 2], name="D")
    s = te.create_schedule(D.op)
    xo, xi = s[D].split(s[D].op.axis[0], factor=4)
    s[Cc].compute_at(s[D], xo)
    s[B].compute_at(s[D], xo)                    # B's region grows through Cc's: 4 + 2 + 2
    text = str(tvmlite.lower(s, [A, D]))
    assert "allocate Cc[float32 * 6]" in text and "allocate B[float32 * 8]" in text

    def ref(a):
        b = a * 2
        c = b[:-2] + b[2:]
        return c[:-2] * c[2:]
    check(s, [A, D], ref)


def test_compute_at_follows_a_later_split_and_fuse_of_its_loop():
    A, B, C = two_stage()
    s = te.create_schedule(C.op)
    i, j = s[C].op.axis
    s[B].compute_at(s[C], i)
    io, ii = s[C].split(i, factor=4)
    assert s.state.stage("B").attach == ("C", "i_inner")
    f = s[C].fuse(ii, j)
    assert s.state.stage("B").attach == ("C", f.name)
    s[C].parallel(io)
    check(s, [A, C], lambda a: a * 2 + 1)


def test_compute_root_undoes_compute_at_and_inline():
    A, B, C = two_stage()
    s = te.create_schedule(C.op)
    s[B].compute_at(s[C], s[C].op.axis[0])
    s[B].compute_root()
    assert s.state.stage("B").attach is None
    check(s, [A, C], lambda a: a * 2 + 1)
    s[B].compute_inline()
    s[B].compute_root()
    check(s, [A, C], lambda a: a * 2 + 1)


# -- compute_inline ----------------------------------------------------------------------

def test_compute_inline_chain():
    A = te.placeholder((M, N), name="A")
    B = te.compute((M, N), lambda i, j: A[i, j] + 1, name="B")
    C = te.compute((M, N), lambda i, j: B[i, j] * B[i, j], name="C")
    D = te.compute((M, N), lambda i, j: C[i, j] - B[i, j], name="D")
    s = te.create_schedule(D.op)
    s[B].compute_inline()
    s[C].compute_inline()
    s[D].vectorize(s[D].op.axis[1])
    text = str(tvmlite.lower(s, [A, D]))
    assert "B[" not in text and "C[" not in text
    check(s, [A, D], lambda a: (a + 1) ** 2 - (a + 1))


def test_compute_inline_into_reduction_and_padding():
    A, W, P, C, ref = pad_conv1d()
    s = te.create_schedule(C.op)
    s[P].compute_inline()
    xo, xi = s[C].split(s[C].op.axis[0], factor=8)
    s[C].vectorize(xi)
    check(s, [A, W, C], ref)


def test_compute_inline_producer_of_compute_at_stage():
    A = te.placeholder((M + 2,), name="A")
    B = te.compute((M + 2,), lambda i: A[i] * 2, name="B")
    Bp = te.compute((M + 2,), lambda i: B[i] + 1, name="Bp")
    C = te.compute((M,), lambda i: Bp[i] * Bp[i + 2], name="C")
    s = te.create_schedule(C.op)
    xo, xi = s[C].split(s[C].op.axis[0], factor=4)
    s[B].compute_inline()
    s[Bp].compute_at(s[C], xo)
    check(s, [A, C], lambda a: (a[:-2] * 2 + 1) * (a[2:] * 2 + 1))


# -- cache_write / cache_read ----------------------------------------------------------

def test_cache_write_gemm_recipe():
    A, B, C = matmul()
    s = te.create_schedule(C.op)
    CC = s.cache_write(C, "local")
    assert CC.name == "C_local"
    i, j = s[C].op.axis
    io, jo, ii, ji = s[C].tile(i, j, 4, 8)
    s[CC].compute_at(s[C], jo)
    ci, cj = s[CC].op.axis
    (k,) = s[CC].op.reduce_axis
    ko, ki = s[CC].split(k, factor=4)
    s[CC].reorder(ko, ci, ki, cj)
    s[CC].vectorize(cj)
    s[CC].unroll(ki)
    s[C].vectorize(ji)
    s[C].parallel(io)
    assert "allocate C_local[float32 * 4x8]" in str(tvmlite.lower(s, [A, B, C]))
    check(s, [A, B, C], mm_ref)


def test_cache_write_at_root_and_global():
    A, B, C = matmul()
    s = te.create_schedule(C.op)
    CC = s.cache_write(C, "global")
    s[CC].parallel(s[CC].op.axis[0])
    check(s, [A, B, C], mm_ref)


def test_cache_read_packed_tile():
    A, B, C = matmul()
    s = te.create_schedule(C.op)
    AA = s.cache_read(A, "local", [C])
    BB = s.cache_read(B, "local", [C])
    i, j = s[C].op.axis
    (k,) = s[C].op.reduce_axis
    io, jo, ii, ji = s[C].tile(i, j, 4, 8)
    ko, ki = s[C].split(k, factor=4)
    s[C].reorder(io, jo, ko, ii, ki, ji)
    s[AA].compute_at(s[C], ko)
    s[BB].compute_at(s[C], ko)
    s[BB].vectorize(s[BB].op.axis[1])
    s[C].vectorize(ji)
    text = str(tvmlite.lower(s, [A, B, C]))
    assert "allocate A_local[float32 * 4x4]" in text
    assert "allocate B_local[float32 * 4x8]" in text
    check(s, [A, B, C], mm_ref)


def test_cache_read_and_write_together():
    A, B, C = matmul()
    s = te.create_schedule(C.op)
    AA = s.cache_read(A, "local", [C])
    CC = s.cache_write(C, "local")
    # the cache_read reader was renamed to the compute stage C_local
    assert s.state.consumers("A_local") == ["C_local"]
    i, j = s[C].op.axis
    io, jo, ii, ji = s[C].tile(i, j, 8, 8)
    s[CC].compute_at(s[C], jo)
    s[AA].compute_at(s[CC], s[CC].op.reduce_axis[0])
    check(s, [A, B, C], mm_ref)


def test_cache_read_shared_by_two_readers():
    A = te.placeholder((M, N), name="A")
    B = te.compute((M, N), lambda i, j: A[i, j] * 2, name="B")
    C = te.compute((M, N), lambda i, j: A[i, j] + B[i, j], name="C")
    s = te.create_schedule(C.op)
    AA = s.cache_read(A, "global", [B, C])
    assert sorted(s.state.consumers(AA.name)) == ["B", "C"]
    s[AA].vectorize(s[AA].op.axis[1])
    check(s, [A, C], lambda a: a * 3)


# -- rfactor ---------------------------------------------------------------------------

def row_sum(rows=3, length=1000, combiner="sum", dtype="float32"):
    A = te.placeholder((rows, length), dtype, name="A")
    k = te.reduce_axis((0, length), name="k")
    fn = {"sum": te.sum, "max": te.max, "min": te.min}[combiner]
    C = te.compute((rows,), lambda i: fn(A[i, k], axis=k), name="C")
    ref = {"sum": lambda a: a.astype(np.float64).sum(axis=1).astype(dtype),
           "max": lambda a: a.max(axis=1), "min": lambda a: a.min(axis=1)}[combiner]
    return A, C, k, ref


@pytest.mark.parametrize("length", [1000, 1001])
def test_rfactor_inner_vectorized(length):
    A, C, k, ref = row_sum(length=length)
    s = te.create_schedule(C.op)
    ko, ki = s[C].split(k, factor=16)
    CF = s.rfactor(C, ki)
    assert CF.name == "C_rf" and CF.shape == (16, 3)
    kv, i = s[CF].op.axis
    (kr,) = s[CF].op.reduce_axis
    s[CF].reorder(i, kr, kv)
    s[CF].vectorize(kv)
    check(s, [A, C], ref, atol=1e-4)


def test_rfactor_outer_parallel():
    A, C, k, ref = row_sum()
    s = te.create_schedule(C.op)
    ko, ki = s[C].split(k, nparts=4)
    CF = s.rfactor(C, ko)
    s[CF].parallel(s[CF].op.axis[0])
    check(s, [A, C], ref, atol=1e-4)


def test_rfactor_factor_axis_last_and_compute_at():
    A, C, k, ref = row_sum(rows=5, length=203)
    s = te.create_schedule(C.op)
    ko, ki = s[C].split(k, factor=8)
    CF = s.rfactor(C, ki, factor_axis=1)
    assert CF.shape == (5, 8)
    s[CF].compute_at(s[C], s[C].op.axis[0])
    s[CF].vectorize(s[CF].op.axis[1])
    check(s, [A, C], ref, atol=1e-4)


@pytest.mark.parametrize("combiner", ["max", "min"])
def test_rfactor_max_min(combiner):
    A, C, k, ref = row_sum(length=333, combiner=combiner)
    s = te.create_schedule(C.op)
    ko, ki = s[C].split(k, factor=8)
    s.rfactor(C, ki)
    check(s, [A, C], ref)


def test_rfactor_int32_and_scalar_output():
    A = te.placeholder((777,), "int32", name="A")
    k = te.reduce_axis((0, 777), name="k")
    C = te.compute((1,), lambda i: te.sum(A[k], axis=k), name="C")
    s = te.create_schedule(C.op)
    ko, ki = s[C].split(k, factor=16)
    CF = s.rfactor(C, ki)
    s[CF].vectorize(s[CF].op.axis[0])
    check(s, [A, C], lambda a: np.array([a.sum()], "int32"))


def test_rfactor_with_a_second_reduce_axis_and_where():
    A = te.placeholder((4, 30, 7), name="A")
    k1 = te.reduce_axis((0, 30), name="k1")
    k2 = te.reduce_axis((0, 7), name="k2")
    C = te.compute((4,), lambda i: te.sum(A[i, k1, k2], axis=[k1, k2], where=k2 > 1), name="C")
    s = te.create_schedule(C.op)
    ko, ki = s[C].split(k1, factor=4)           # 30 = 4 * 8 - 2
    CF = s.rfactor(C, ki)
    assert [it.kind for it in s.state.stage(CF.name).leaves] == \
        ["spatial", "spatial", "reduce", "reduce"]
    s[CF].parallel(s[CF].op.axis[0])
    check(s, [A, C], lambda a: a[:, :, 2:].sum(axis=(1, 2)), atol=1e-4)


def test_rfactor_where_and_vectorized_rf_axis():
    A = te.placeholder((M, 37), name="A")
    k = te.reduce_axis((0, 37), name="k")
    C = te.compute((M,), lambda i: te.sum(A[i, k], axis=k, where=A[i, k] > 0), name="C")
    s = te.create_schedule(C.op)
    ko, ki = s[C].split(k, factor=8)
    CF = s.rfactor(C, ki, factor_axis=1)
    i, kv = s[CF].op.axis
    s[CF].reorder(i, s[CF].op.reduce_axis[0], kv)
    s[CF].vectorize(kv)
    check(s, [A, C], lambda a: np.where(a > 0, a, 0).sum(axis=1))


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
    I = te.compute((M, N), lambda i, j: te.cast(A[i, j] * 10, "int32"), name="I")
    D = te.compute((M, N), lambda i, j: te.cast(I[i, j], "float64") / 4 +
                   te.cast(A[i, j], "float64"), name="D")
    s = te.create_schedule(D.op)
    s[D].vectorize(s[D].op.axis[1])
    s[I].vectorize(s[I].op.axis[1])

    def ref(a):
        i = (a * np.float32(10)).astype(np.int32)       # C truncates toward zero
        return i, i.astype(np.float64) / 4 + a.astype(np.float64)
    check(s, [A, I, D], ref, rtol=1e-12, atol=1e-12)


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


# -- illegal schedules ---------------------------------------------------------------------

def _raises(fn, *words):
    """fn() raises ScheduleError whose message names every word (as a whole word)."""
    with pytest.raises(ScheduleError) as info:
        fn()
    msg = str(info.value)
    for w in words:
        assert re.search(rf"(?<![A-Za-z0-9_]){re.escape(w)}(?![A-Za-z0-9_])", msg), \
            f"{w!r} not named in: {msg}"
    return msg


def test_error_split_factor_zero_and_negative():
    A, B, C = matmul()
    s = te.create_schedule(C.op)
    i, j = s[C].op.axis
    _raises(lambda: s[C].split(i, factor=0), "C", "i")
    _raises(lambda: s[C].split(j, nparts=-2), "C", "j")
    _raises(lambda: s[C].split(i, factor=True), "C", "i")
    _raises(lambda: s[C].split(i, factor=4, nparts=2), "C", "i")
    _raises(lambda: s[C].split(i), "C", "i")
    assert s.steps == []                          # a failed step leaves no trace
    check(s, [A, B, C], mm_ref)


def test_error_unknown_axis_and_stage():
    A, B, C = matmul()
    s = te.create_schedule(C.op)
    _raises(lambda: s[C].split("zz", factor=4), "C", "zz")
    _raises(lambda: s[C].vectorize("zz"), "C", "zz")
    _raises(lambda: s[C].reorder("k", "zz"), "C", "zz")
    i, j = s[C].op.axis
    s[C].split(i, factor=4)
    _raises(lambda: s[C].split(i, factor=2), "C", "i")   # i was replaced by its halves
    with pytest.raises(ScheduleError, match="nope"):
        s["nope"]


def test_error_repeated_axis_in_reorder():
    A, B, C = matmul()
    s = te.create_schedule(C.op)
    i, j = s[C].op.axis
    _raises(lambda: s[C].reorder(i, j, i), "C", "i")


def test_error_vectorize_or_parallel_reduce_axis():
    A, B, C = matmul()
    s = te.create_schedule(C.op)
    (k,) = s[C].op.reduce_axis
    _raises(lambda: s[C].vectorize(k), "C", "k")
    _raises(lambda: s[C].parallel(k), "C", "k")
    ko, ki = s[C].split(k, factor=4)
    _raises(lambda: s[C].vectorize(ki), "C", "k_inner")
    _raises(lambda: s[C].parallel(ko), "C", "k_outer")
    s[C].unroll(ki)                               # unrolling a reduce loop is fine
    check(s, [A, B, C], mm_ref)


def test_error_annotate_twice_and_split_annotated():
    A, B, C = matmul()
    s = te.create_schedule(C.op)
    i, j = s[C].op.axis
    s[C].parallel(i)
    _raises(lambda: s[C].vectorize(i), "C", "i")
    _raises(lambda: s[C].split(i, factor=2), "C", "i")
    s[C].parallel(i)                              # the same annotation again is harmless
    check(s, [A, B, C], mm_ref)


def test_error_nested_parallel():
    A, B, C = matmul()
    s = te.create_schedule(C.op)
    i, j = s[C].op.axis
    s[C].parallel(i)
    s[C].parallel(j)
    _raises(lambda: tvmlite.lower(s, [A, B, C]), "j")


def test_error_compute_at_stage_that_does_not_read_it():
    A = te.placeholder((M, N), name="A")
    B = te.compute((M, N), lambda i, j: A[i, j] * 2, name="B")
    C = te.compute((M, N), lambda i, j: B[i, j] + 1, name="C")
    D = te.compute((M, N), lambda i, j: A[i, j] - 1, name="D")
    s = te.create_schedule([C.op, D.op])
    # B is read by C only; D's loop i does not run any reader of B
    s[B].compute_at(s[D], s[D].op.axis[0])
    _raises(lambda: tvmlite.lower(s, [A, C, D]), "B", "D", "i")


def test_error_compute_at_reader_outside_the_loop():
    A = te.placeholder((M, N), name="A")
    B = te.compute((M, N), lambda i, j: A[i, j] * 2, name="B")
    C = te.compute((M, N), lambda i, j: B[i, j] + 1, name="C")
    D = te.compute((M, N), lambda i, j: C[i, j] + B[i, j], name="D")
    s = te.create_schedule(D.op)
    # D reads B too, but D runs after C's loop: B inside C's loop cannot serve it
    s[B].compute_at(s[C], s[C].op.axis[0])
    _raises(lambda: tvmlite.lower(s, [A, D]), "B", "C", "i", "D")


def test_error_compute_at_inside_the_reader_but_outside_its_inner_reader():
    A, B, C = two_stage()
    D = te.compute((M, N), lambda i, j: C[i, j] + B[i, j], name="D")
    s = te.create_schedule(D.op)
    di, dj = s[D].op.axis
    s[C].compute_at(s[D], dj)
    s[B].compute_at(s[D], di)                     # covers C (inside dj) and D itself: legal
    check(s, [A, D], lambda a: a * 2 + 1 + a * 2)
    s[C].compute_root()
    s[C].split(s[C].op.axis[0], factor=4)
    s[B].compute_at(s[C], "i_inner")              # D now reads B outside C
    _raises(lambda: tvmlite.lower(s, [A, D]), "B", "C", "i_inner")


def test_error_compute_at_producer_that_does_not_read_it():
    A = te.placeholder((M, N), name="A")
    B = te.compute((M, N), lambda i, j: A[i, j] * 2, name="B")
    X = te.compute((M, N), lambda i, j: A[i, j] - 1, name="X")
    C = te.compute((M, N), lambda i, j: B[i, j] + X[i, j], name="C")
    s = te.create_schedule(C.op)
    s[X].compute_at(s[B], s[B].op.axis[1])       # B runs before X's reader C
    _raises(lambda: tvmlite.lower(s, [A, C]), "X", "B", "j")
    s[B].compute_inline()                        # and now the target has no loops at all
    _raises(lambda: tvmlite.lower(s, [A, C]), "X", "B", "j")
    s[X].compute_root()
    check(s, [A, C], lambda a: a * 2 + a - 1)


def test_error_compute_at_cycle():
    A, B, C = two_stage()
    D = te.compute((M, N), lambda i, j: C[i, j] + 1, name="D")
    s = te.create_schedule(D.op)
    s[B].compute_at(s[C], s[C].op.axis[0])
    _raises(lambda: s[C].compute_at(s[B], s[B].op.axis[1]), "C", "B", "j")
    _raises(lambda: s[B].compute_at(s[B], s[B].op.axis[1]), "B")
    _raises(lambda: s[D].compute_at(s[C], s[C].op.axis[0]), "D")   # D is the output


def test_error_compute_at_unknown_loop():
    A, B, C = two_stage()
    s = te.create_schedule(C.op)
    _raises(lambda: s[B].compute_at(s[C], "zz"), "C", "zz")


def test_error_fuse_non_consecutive_and_mixed():
    A = te.placeholder((3, 5, 7), name="A")
    k = te.reduce_axis((0, 7), name="k")
    C = te.compute((3, 5), lambda i, j: te.sum(A[i, j, k], axis=k), name="C")
    s = te.create_schedule(C.op)
    i, j = s[C].op.axis
    _raises(lambda: s[C].fuse(i, k), "C", "i", "k")          # j sits between
    _raises(lambda: s[C].fuse(j, i), "C", "j", "i")          # wrong order
    _raises(lambda: s[C].fuse(j, k), "C", "j", "k")          # spatial with reduce
    _raises(lambda: s[C].fuse(j), "C")
    _raises(lambda: s[C].fuse(i, i), "C", "i")
    check(s, [A, C], lambda a: a.sum(axis=2))


def test_error_inline_output_or_reduction():
    A, B, C = matmul()
    D = te.compute((M, N), lambda i, j: C[i, j] + 1, name="D")
    s = te.create_schedule(D.op)
    _raises(lambda: s[D].compute_inline(), "D")
    _raises(lambda: s[C].compute_inline(), "C")


def test_error_cache_write_after_split_or_annotation():
    A, B, C = matmul()
    s = te.create_schedule(C.op)
    i, j = s[C].op.axis
    s[C].split(i, factor=4)
    _raises(lambda: s.cache_write(C, "local"), "C")
    s2 = te.create_schedule(C.op)
    s2[C].parallel(s2[C].op.axis[0])
    _raises(lambda: s2.cache_write(C, "local"), "C")
    _raises(lambda: s2.cache_write(C, "shared"), "C")


def test_error_cache_read_bad_reader():
    A, B, C = two_stage()
    s = te.create_schedule(C.op)
    _raises(lambda: s.cache_read(A, "local", [C]), "A", "C")
    _raises(lambda: s.cache_read(A, "local", []), "A")
    _raises(lambda: s.cache_read("Q", "local", [B]), "Q")


def test_error_rfactor():
    A, B, C = matmul()
    s = te.create_schedule(C.op)
    i, j = s[C].op.axis
    (k,) = s[C].op.reduce_axis
    _raises(lambda: s.rfactor(C, k), "C", "k")                 # not split
    io, ii = s[C].split(i, factor=4)
    _raises(lambda: s.rfactor(C, ii), "C", "i_inner")           # a spatial split
    A2, C2 = elementwise()
    s2 = te.create_schedule(C2.op)
    _raises(lambda: s2.rfactor(C2, s2[C2].op.axis[0]), "C")     # not a reduction


def test_error_intermediate_kernel_argument_not_at_root():
    A, B, C = two_stage()
    s = te.create_schedule(C.op)
    s[B].compute_at(s[C], s[C].op.axis[0])
    _raises(lambda: tvmlite.lower(s, [A, B, C]), "B")
