"""Placement and stage-creating primitives (compute_at, compute_inline, compute_root,
cache_write, cache_read, rfactor), each built, run and checked against numpy."""
from __future__ import annotations

import numpy as np
import pytest

import tvmlite
from tvmlite import ops, te
from tvmlite.testing.check import check_schedule as check
from tvmlite.testing.workloads import ODD_MNK, matmul_reference

M, N, K = ODD_MNK


def matmul(m=M, n=N, k=K, dtype="float32"):
    return ops.matmul(m, n, k, dtype)


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
    check(s, [A, B, C], lambda a, b: matmul_reference(a * 2, b))


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
    check(s, [A, B, D], lambda a, b: np.maximum(matmul_reference(a, b), 0))


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
    check(s, [A, B, C], matmul_reference)


def test_cache_write_at_root_and_global():
    A, B, C = matmul()
    s = te.create_schedule(C.op)
    CC = s.cache_write(C, "global")
    s[CC].parallel(s[CC].op.axis[0])
    check(s, [A, B, C], matmul_reference)


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
    check(s, [A, B, C], matmul_reference)


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
    check(s, [A, B, C], matmul_reference)


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
