"""Symbolic dimensions (te.var): one kernel over M, correct for every M from 1 up.

Each schedule is built once and run at every size of SIZES (including sizes that are
not multiples of any split factor, 1, and sizes far beyond any tile), against numpy."""
from __future__ import annotations

import numpy as np
import pytest

import tvmlite
from tvmlite import te
from tvmlite.ops.common import pad
from tvmlite.schedule.state import ScheduleError
from tvmlite.testing import reference

SIZES = (1, 2, 3, 7, 15, 16, 17, 100, 1023, 1024, 1025, 2048, 3000)
N = K = 64


def rand(shape, seed=0):
    return np.random.default_rng(seed).uniform(-1, 1, shape).astype("float32")


def run_all_sizes(mod, make_inputs, out_shape, ref, sizes=SIZES):
    for m in sizes:
        ins = make_inputs(m)
        out = np.full(out_shape(m), np.nan, "float32")
        mod(*ins, out)
        np.testing.assert_allclose(out, ref(m, *ins), rtol=2e-5, atol=2e-5,
                                   err_msg=f"size {m}")


def matmul_sched(kind):
    M = te.var("M")
    A, B, C = tvmlite.ops.matmul(M, N, K)
    s = te.create_schedule(C.op)
    i, j = s[C].op.axis
    (k,) = s[C].op.reduce_axis
    if kind == "split_vec_unroll_par":
        io, ii = s[C].split(i, factor=8)
        jo, ji = s[C].split(j, factor=16)
        s[C].reorder(io, jo, k, ii, ji)
        s[C].vectorize(ji)
        s[C].unroll(ii)
        s[C].parallel(io)
    elif kind == "cache_write_compute_at":
        CL = s.cache_write(C, "local")
        io, jo, ii, ji = s[C].tile(i, j, 32, 32)
        s[C].parallel(io)
        s[CL].compute_at(s[C], jo)
        ci, cj = s[CL].op.axis
        (ck,) = s[CL].op.reduce_axis
        cjo, cji = s[CL].split(cj, factor=16)
        s[CL].reorder(ck, ci, cjo, cji)
        s[CL].vectorize(cji)
        s[C].vectorize(ji)  # constant extent 32: vectorizing the inner tile is fine
    elif kind == "fuse_split_vec":
        f = s[C].fuse(i, j)
        fo, fi = s[C].split(f, factor=48)   # 48 does not divide 64: tails everywhere
        s[C].parallel(fo)
        s[C].vectorize(fi)
    elif kind == "nparts_cache_read":
        io, ii = s[C].split(i, nparts=3)   # inner extent ceil(M / 3): symbolic
        iio, iii = s[C].split(ii, factor=5)
        s[C].parallel(io)
        AL = s.cache_read(A, "local", [C])
        s[AL].compute_at(s[C], iio)
        jo, ji = s[C].split(j, factor=16)
        s[C].reorder(io, iio, jo, k, iii, ji)
        s[C].vectorize(ji)
    return s, [A, B, C]


@pytest.mark.parametrize("kind", ["split_vec_unroll_par", "cache_write_compute_at",
                                  "fuse_split_vec", "nparts_cache_read"])
def test_matmul_symbolic_m_every_size(kind):
    s, args = matmul_sched(kind)
    mod = tvmlite.build(s, args, name="matmul")
    b = rand((K, N), 1)
    run_all_sizes(mod, lambda m: (rand((m, K)), b), lambda m: (m, N),
                  lambda m, a, b_: a.astype("float64") @ b_)


def test_signature_lower_and_header(tmp_path):
    s, args = matmul_sched("split_vec_unroll_par")
    text = str(tvmlite.lower(s, args, name="matmul"))
    assert "def matmul(M: int64" in text and "< M" in text
    mod = tvmlite.build(s, args, name="matmul")
    src = mod.get_source()
    assert "int32_t matmul(int64_t M, const float* restrict A" in src
    assert "if (M < 1) return -2;" in src
    assert mod.sizes == ("M",)
    mod.export_library(tmp_path / "matmul.so")
    h = (tmp_path / "matmul.h").read_text()
    assert "int32_t matmul(int64_t M, const float* A, const float* B, float* C);" in h
    assert "symbolic sizes (M = A dimension 0)" in h


def test_bad_sizes_are_clear_errors():
    s, args = matmul_sched("split_vec_unroll_par")
    mod = tvmlite.build(s, args, name="matmul")
    with pytest.raises(ValueError, match=r"A and C disagree on the size M: A.shape\[0\] = 5 "
                                         r"but C.shape\[0\] = 6"):
        mod(rand((5, K)), rand((K, N)), np.empty((6, N), "float32"))
    with pytest.raises(ValueError, match="size M = 0 .*at least 1"):
        mod(np.empty((0, K), "float32"), rand((K, N)), np.empty((0, N), "float32"))
    with pytest.raises(ValueError, match=r"must have shape \(64, 64\)"):
        mod(rand((5, K)), rand((K, 3)), np.empty((5, N), "float32"))
    # a C caller can pass anything: the kernel refuses sizes < 1 without touching memory
    a, b, c = rand((4, K)), rand((K, N)), np.zeros((4, N), "float32")
    ptrs = mod._pointers((a, b, c))[1:]
    for bad in (0, -1, -(2**40)):
        assert mod._kernel(bad, *ptrs) == -2
    assert not c.any()


def test_constant_extent_primitives_refuse_symbolic_axes():
    M = te.var("M")
    A, B, C = tvmlite.ops.matmul(M, N, K)
    s = te.create_schedule(C.op)
    i, _ = s[C].op.axis
    with pytest.raises(ScheduleError, match="cannot unroll i: its extent M is symbolic"):
        s[C].unroll(i)
    with pytest.raises(ScheduleError, match="cannot vectorize i: its extent M is symbolic"):
        s[C].vectorize(i)
    io, _ = s[C].split(i, factor=4)
    with pytest.raises(ScheduleError, match="cannot unroll i_outer"):
        s[C].unroll(io)


def softmax_sched(kind):
    R = te.var("R")
    data, out = tvmlite.ops.softmax(R, 100)
    s = te.create_schedule(out.op)
    ops = {t.op.name: t for t in (out.op.input_tensors[0], out.op.input_tensors[1])}
    expv, expsum = ops["expv"], ops["expsum"]
    maxelem = expv.op.input_tensors[1]
    i, j = s[out].op.axis
    if kind == "rows_parallel_compute_at":
        io, ii = s[out].split(i, factor=4)
        jo, ji = s[out].split(j, factor=16)
        s[out].parallel(io)
        s[out].vectorize(ji)
        for t in (expsum, expv, maxelem):
            s[t].compute_at(s[out], ii)
        ei, ej = s[expv].op.axis
        ejo, eji = s[expv].split(ej, factor=16)
        s[expv].vectorize(eji)
    elif kind == "inline_exp":
        s[expv].compute_inline()
        f = s[out].fuse(i, j)
        fo, fi = s[out].split(f, factor=64)
        s[out].parallel(fo)
        s[out].vectorize(fi)
    return s, [data, out]


def _softmax_ref(m, x):
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


@pytest.mark.parametrize("kind", ["rows_parallel_compute_at", "inline_exp"])
def test_softmax_symbolic_rows(kind):
    s, args = softmax_sched(kind)
    mod = tvmlite.build(s, args, name="softmax")
    run_all_sizes(mod, lambda m: (rand((m, 100)),), lambda m: (m, 100), _softmax_ref)


def test_softmax_symbolic_row_length_vector_tail():
    """The reduced axis itself symbolic: reductions over M, vector tails on M."""
    L = te.var("L")
    data = te.placeholder((8, L), name="data")
    k = te.reduce_axis((0, L), name="k")
    mx = te.compute((8,), lambda i: te.max(data[i, k], axis=k), name="mx")
    ex = te.compute((8, L), lambda i, j: te.exp(data[i, j] - mx[i]), name="ex")
    k2 = te.reduce_axis((0, L), name="k2")
    sm = te.compute((8,), lambda i: te.sum(ex[i, k2], axis=k2), name="sm")
    out = te.compute((8, L), lambda i, j: ex[i, j] / sm[i], name="out")
    s = te.create_schedule(out.op)
    i, j = s[out].op.axis
    jo, ji = s[out].split(j, factor=16)
    s[out].vectorize(ji)
    ko, ki = s[mx].split(s[mx].op.reduce_axis[0], factor=8)
    s[out].parallel(i)
    for t in (sm, ex, mx):
        s[t].compute_at(s[out], i)
    mod = tvmlite.build(s, [data, out], name="softmax_cols")
    for m in (1, 2, 15, 16, 17, 100, 1025):
        x = rand((8, m))
        o = np.full((8, m), np.nan, "float32")
        mod(x, o)
        np.testing.assert_allclose(o, _softmax_ref(m, x), rtol=2e-5, atol=2e-6)


@pytest.mark.parametrize("kind", ["fused_parallel_vec", "pad_compute_at"])
def test_conv2d_dynamic_batch(kind):
    Nb = te.var("N")
    data, weight, out = tvmlite.ops.conv2d_nhwc(Nb, 6, 6, 8, 16, 3, 1, 1)
    s = te.create_schedule(out.op)
    n, h, w, f = s[out].op.axis
    pad = out.op.input_tensors[0]
    if kind == "fused_parallel_vec":
        nh = s[out].fuse(n, h)
        s[out].parallel(nh)
        fo, fi = s[out].split(f, factor=16)
        s[out].vectorize(fi)
        s[pad].compute_inline()
    else:
        no, ni = s[out].split(n, factor=2)
        s[out].parallel(no)
        s[pad].compute_at(s[out], ni)
        fo, fi = s[out].split(f, factor=8)
        s[out].vectorize(fi)
    mod = tvmlite.build(s, [data, weight, out], name="conv")
    wt = rand((3, 3, 8, 16), 2)
    sizes = SIZES
    run_all_sizes(mod, lambda m: (rand((m, 6, 6, 8)), wt), lambda m: (m, 6, 6, 16),
                  lambda m, x, w_: reference("conv2d_nhwc", [x, w_], N=m, H=6, W=6, CI=8,
                                             CO=16, kernel=3, stride=1, padding=1),
                  sizes)


def test_dense_symbolic_batch():
    Nb = te.var("N")
    data, weight, out = tvmlite.ops.dense(Nb, 32, 24)
    s = te.create_schedule(out.op)
    i, j = s[out].op.axis
    io, ii = s[out].split(i, factor=4)
    s[out].parallel(io)
    mod = tvmlite.build(s, [data, weight, out], name="dense")
    wt = rand((24, 32), 3)
    run_all_sizes(mod, lambda m: (rand((m, 32)), wt), lambda m: (m, 24),
                  lambda m, x, w_: x.astype("float64") @ w_.T.astype("float64"), (1, 5, 64, 1025))


def test_user_compute_symbolic_index_and_reduction():
    """M in a shape, in an index expression (a reversal) and as a reduction bound."""
    M = te.var("M")
    A = te.placeholder((M, 8), name="A")
    rev = te.compute((M, 8), lambda i, j: A[M - 1 - i, j] * 2.0, name="rev")
    k = te.reduce_axis((0, M), name="k")
    colsum = te.compute((8,), lambda j: te.sum(rev[k, j], axis=k), name="colsum")
    s = te.create_schedule(colsum.op)
    (k_,) = s[colsum].op.reduce_axis
    ko, ki = s[colsum].split(k_, factor=7)
    s[rev].compute_at(s[colsum], ko)
    mod = tvmlite.build(s, [A, colsum], name="revsum")
    for m in (1, 2, 6, 7, 8, 100, 1025):
        a = rand((m, 8))
        o = np.full((8,), np.nan, "float32")
        mod(a, o)
        np.testing.assert_allclose(o, (a[::-1] * 2).sum(axis=0), rtol=1e-5, atol=1e-5)


def test_axes_named_like_a_size_are_told_apart_from_it():
    """A size ``h`` and an axis ``h`` (an NHWC pad's loop; a reduction named ``k`` over a
    size ``k``): variables go by name, so the pad's guard ``h < h + 1`` once read as true
    and the last padded row came from past the input's end. The input is the head of a
    larger array filled with a value no pad would produce, so such a read shows."""
    h, k = te.var("h"), te.var("k")
    A = te.placeholder((h, 3), name="A")
    P = te.compute((h + 2, 3), lambda h_, c: te.if_then_else(
        te.all(h_ >= 1, h_ < h + 1), A[h_ - 1, c], 0.0), name="P")
    assert [iv.name for iv in P.op.axis] == ["h_", "c"]
    P = pad(A, (1, 0), "HC", name="P")
    assert [iv.name for iv in P.op.axis] == ["h_1", "c"]
    B = te.placeholder((4, k), name="B")
    r = te.reduce_axis((0, k), name="k")
    S = te.compute((4,), lambda i: te.sum(B[i, r], axis=r), name="S")
    assert [iv.name for iv in S.op.body.axes] == ["k_1"]
    pad_mod = tvmlite.build(te.create_schedule(P.op), [A, P])
    sum_mod = tvmlite.build(te.create_schedule(S.op), [B, S])
    for m in (1, 2, 5):
        poisoned = np.full(m * 3 + 64, 1e30, "float32")
        poisoned[:m * 3] = rand((m * 3,))
        a = poisoned[:m * 3].reshape(m, 3)
        p = np.full((m + 2, 3), np.nan, "float32")
        pad_mod(a, p)
        np.testing.assert_array_equal(p, np.pad(a, ((1, 1), (0, 0))))
        b, s = rand((4, m)), np.full((4,), np.nan, "float32")
        sum_mod(b, s)
        np.testing.assert_allclose(s, b.sum(axis=1), rtol=1e-5)


def test_size_only_inside_expressions_is_refused():
    M = te.var("M")
    A = te.placeholder((M + 1,), name="A")
    B = te.compute((M + 1,), lambda i: A[i] + 1.0, name="B")
    s = te.create_schedule(B.op)
    with pytest.raises(ValueError, match="make it a whole dimension"):
        tvmlite.build(s, [A, B])


def test_bad_dimension_is_refused():
    with pytest.raises(ValueError, match="positive int or an expression of te.var"):
        te.placeholder((te.var("M"), 0), name="A")
    with pytest.raises(ValueError, match="matmul: M must be a positive int or a te.var"):
        tvmlite.ops.matmul("M", 4, 4)


def test_cache_stage_region_is_constant_so_its_axes_unroll():
    """C_local's axis i has extent M, but computed at a tile of C its region is 8 rows:
    unrolling it is fine; the full tiles run without guards (loop versioning)."""
    M = te.var("M")
    A, B, C = tvmlite.ops.matmul(M, N, K)
    s = te.create_schedule(C.op)
    CL = s.cache_write(C, "local")
    i, j = s[C].op.axis
    io, jo, ii, ji = s[C].tile(i, j, 8, 32)
    f = s[C].fuse(io, jo)
    s[C].parallel(f)
    s[CL].compute_at(s[C], f)
    ci, cj = s[CL].op.axis
    (ck,) = s[CL].op.reduce_axis
    cjo, cji = s[CL].split(cj, factor=16)
    s[CL].reorder(ck, ci, cjo, cji)
    s[CL].vectorize(cji)
    s[CL].unroll(ci)
    s[CL].unroll(cjo)
    text = str(tvmlite.lower(s, [A, B, C]))
    assert "* 8 + 7 < M" in text    # the hoisted guard of a whole 8-row tile
    mod = tvmlite.build(s, [A, B, C], name="matmul")
    b = rand((K, N), 1)
    run_all_sizes(mod, lambda m: (rand((m, K)), b), lambda m: (m, N),
                  lambda m, a, b_: a.astype("float64") @ b_, (1, 7, 8, 9, 100, 1025))


def test_symbolic_unroll_of_a_root_cache_stage_fails_when_lowered():
    M = te.var("M")
    A, B, C = tvmlite.ops.matmul(M, N, K)
    s = te.create_schedule(C.op)
    CL = s.cache_write(C, "local")
    s[CL].unroll(s[CL].op.axis[0])      # allowed now: a compute_at could still bound it
    with pytest.raises(ScheduleError, match="cannot unroll i: its extent M is symbolic"):
        tvmlite.lower(s, [A, B, C])


@pytest.mark.parametrize("keep", ["inner", "outer"])
def test_rfactor_of_a_symbolic_reduction(keep):
    """sum over k < M split by 16 and factored: the factored loop is spatial, the other
    one keeps the symbolic extent and the guard k < M."""
    M = te.var("M")
    A = te.placeholder((M, 16), name="A")
    k = te.reduce_axis((0, M), name="k")
    colsum = te.compute((16,), lambda j: te.sum(A[k, j], axis=k), name="colsum")
    s = te.create_schedule(colsum.op)
    ko, ki = s[colsum].split(s[colsum].op.reduce_axis[0], factor=16)
    s.rfactor(colsum, ki if keep == "inner" else ko)
    mod = tvmlite.build(s, [A, colsum], name="colsum")
    for m in (1, 15, 16, 17, 1025):
        a = rand((m, 16))
        o = np.full((16,), np.nan, "float32")
        mod(a, o)
        np.testing.assert_allclose(o, a.astype("float64").sum(axis=0), rtol=1e-5, atol=1e-4)
