"""Loop versioning of unrolled blocks (passes/version.py): one unrolled, unguarded copy
of each block plus its edge copies or a rolled, guarded one, correct at every size around
each tile edge; Hypothesis draws blocked matmuls over a symbolic M, N or K, and over static
sizes whose last tiles are peeled."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tvmlite
from tvmlite import te
from tvmlite.ir.expr import Cmp, Var, walk
from tvmlite.ir.stmt import For, IfThenElse, walk_stmts
from tvmlite.passes import version
from tvmlite.passes.pipeline import loop_nest
from tvmlite.passes.version import EDGE_BUDGET, EDGE_MAX, EDGE_STEPS

N = K = 32
TILE, ROWS = 12, 4   # rows per tile, rows per unrolled block (3 blocks a tile)


def tiled_matmul(tile, k=K):
    """A matmul over a symbolic M (depth ``k``) with a local accumulator CL, C's rows split
    into tiles of ``tile``: (schedule, [A, B, C], CL, the tile loop, the row loop, C's
    column axis)."""
    A, B, C = tvmlite.ops.matmul(te.var("M"), N, k)
    s = te.create_schedule(C.op)
    CL = s.cache_write(C, "local")
    i, j = s[C].op.axis
    io, ii = s[C].split(i, factor=tile)
    return s, [A, B, C], CL, io, ii, j


def blocked_matmul(tile=TILE, rows=ROWS):
    """Ansor's shape of a matmul: a local accumulator of ``rows`` x 16 per block, unrolled
    under an auto_unroll pragma, inside tiles of ``tile`` rows of the symbolic M."""
    s, args, CL, io, ii, j = tiled_matmul(tile)
    C = args[2]
    jo, ji = s[C].split(j, factor=16)
    s[C].reorder(io, jo, ii, ji)
    s[C].parallel(io)
    s[C].vectorize(ji)
    s[CL].compute_at(s[C], jo)
    ci, cj = s[CL].op.axis
    (ck,) = s[CL].op.reduce_axis
    cio, cii = s[CL].split(ci, factor=rows)
    s[CL].reorder(ck, cio, cii, cj)
    s[CL].vectorize(cj)
    s[CL].pragma(ck, "auto_unroll_max_step", 64)
    return s, args


def test_blocks_are_versioned_once_and_rolled_in_the_remainder():
    s, args = blocked_matmul()
    body = loop_nest(s, args).body
    versioned = [x for x in walk_stmts(body) if isinstance(x, IfThenElse) and x.other is not None]
    assert versioned, "no unrolled block was versioned"
    for v in versioned:
        fast_guards = [x for x in walk_stmts(v.then) if isinstance(x, IfThenElse)]
        assert not fast_guards, "the fast copy of a block still has guards"
        assert any(isinstance(x, For) and x.kind == "unroll" for x in walk_stmts(v.then))
        guarded = {n.name for x in walk_stmts(v.other) if isinstance(x, IfThenElse)
                   for n in walk(x.cond) if isinstance(n, Var)}
        assert all(x.kind != "unroll" for x in walk_stmts(v.other)
                   if isinstance(x, For) and x.var.name in guarded), \
            "the guarded remainder of a block is unrolled along a guarded axis"


def row_block_matmul(rows, unroll_k=False, k=K):
    """Tiles of ``rows`` rows, each one unrolled block of rows x 2 vectors inside k (or,
    ``unroll_k``, the block inside k and k unrolled too)."""
    s, args, CL, io, ii, j = tiled_matmul(rows, k)
    C = args[2]
    s[C].reorder(io, j, ii)
    s[CL].compute_at(s[C], io)
    ci, cj = s[CL].op.axis
    (ck,) = s[CL].op.reduce_axis
    cjo, cji = s[CL].split(cj, factor=16)
    s[CL].reorder(ck, ci, cjo, cji)
    s[CL].unroll(ci)
    s[CL].unroll(cjo)
    s[CL].vectorize(cji)
    if unroll_k:
        s[CL].unroll(ck)
    return s, args


def direct_row_block(rows, cols=N):
    """``C = 2 * A`` over (symbolic M) x ``cols``, blocks of ``rows`` unrolled rows x
    ``cols`` (vectors unrolled): each block stores into C itself, so no row past M may be
    computed. (schedule, [A, C])."""
    A = te.placeholder((te.var("M"), cols), name="A")
    C = te.compute(A.shape, lambda i, j: A[i, j] * 2.0, name="C")
    s = te.create_schedule(C.op)
    i, j = s[C].op.axis
    io, ii = s[C].split(i, factor=rows)
    jo, ji = s[C].split(j, factor=16)
    s[C].unroll(ii)
    s[C].unroll(jo)
    s[C].vectorize(ji)
    return s, [A, C]


def check_direct(mod, cols, m_values):
    for m in m_values:
        a = np.random.default_rng(m).uniform(-1, 1, (m, cols)).astype("float32")
        c = np.full((m, cols), np.nan, "float32")
        mod(a, c)
        np.testing.assert_array_equal(c, 2 * a, err_msg=f"M={m}")


def conditions(body, op):
    """The IfThenElses of ``body`` whose condition is one comparison ``op``."""
    return [x for x in walk_stmts(body) if isinstance(x, IfThenElse)
            and isinstance(x.cond, Cmp) and x.cond.op == op]


def ladder_conditions(rows):
    """How many ``count <= step`` branches a clamped remainder of ``rows`` rows has: one per
    step below the height, but none for the last step when it is the height less one (it
    serves every count, so the whole block is not copied)."""
    if rows > EDGE_MAX:
        return 0
    steps = [n for n in EDGE_STEPS if n < rows]
    return len(steps) - (steps[-1] == rows - 1)


def unguarded(stmt):
    return not [g for g in walk_stmts(stmt) if isinstance(g, IfThenElse)]


@pytest.mark.parametrize("rows", [2, 5, 9, 12, 17])
def test_block_remainders_into_a_tile_get_clamped_copies_of_1_2_4_8_rows(rows):
    """A block of ``rows`` guarded rows accumulating into a local tile: its remainder is an
    unguarded copy of EDGE_STEPS rows below the block's height, the first one at or above
    the count of valid rows runs, else the whole block (BLIS's edge: the rows past M are
    computed into the tile, from the last valid row, and never copied out); above EDGE_MAX
    rows (17), the rolled remainder. Correct at every M up to three tiles."""
    s, args = row_block_matmul(rows)
    body = loop_nest(s, args).body
    ladders = conditions(body, "<=")
    assert len(ladders) == 2 * ladder_conditions(rows)  # the initialisation's, the update's
    assert not conditions(body, "==")
    for x in ladders:
        assert unguarded(x.then)
    check_against_numpy(tvmlite.build(s, args, name="mm"), range(1, 3 * rows + 2), rows)


def test_a_block_reducing_over_the_size_is_not_clamped():
    """K symbolic, its loop split by 4 and unrolled, accumulating into a local tile: the
    block's rows are reduction steps, so computing the steps past K from a copy of the
    last one would add it again (it did, at K = 3 and 7). Exact copies per count instead,
    and the sums right at every K."""
    A, B, C = tvmlite.ops.matmul(8, 32, te.var("K"))
    s = te.create_schedule(C.op)
    CL = s.cache_write(C, "local")
    io, ii = s[C].split(s[C].op.axis[0], factor=4)
    s[CL].compute_at(s[C], io)
    ci, cj = s[CL].op.axis
    ko, ki = s[CL].split(s[CL].op.reduce_axis[0], factor=4)
    s[CL].reorder(ko, ci, ki, cj)
    s[CL].unroll(ki)
    s[CL].vectorize(cj)
    body = loop_nest(s, [A, B, C]).body
    assert not conditions(body, "<=") and len(conditions(body, "==")) == 4 - 2
    mod = tvmlite.build(s, [A, B, C], name="mm")
    rng = np.random.default_rng(0)
    for k in range(1, 10):
        a = rng.uniform(-1, 1, (8, k)).astype("float32")
        b = rng.uniform(-1, 1, (k, 32)).astype("float32")
        c = np.full((8, 32), np.nan, "float32")
        mod(a, b, c)
        np.testing.assert_allclose(c, a.astype("float64") @ b, rtol=2e-5, atol=2e-5,
                                   err_msg=f"K={k}")


@pytest.mark.parametrize("rows", [2, 5, 9])
def test_block_remainders_into_the_output_get_one_copy_per_row_count(rows):
    """A block storing into C itself cannot compute rows past M: its remainder is one
    unrolled, unguarded copy per count of valid rows (BLAS's edge kernels), rows - 1 of
    them (rows - 2 conditions), none with a guard on a row."""
    s, args = direct_row_block(rows)
    body = loop_nest(s, args).body
    counts = conditions(body, "==")
    assert len(counts) == rows - 2
    for x in counts:
        assert unguarded(x.then)
    check_direct(tvmlite.build(s, args, name="twice"), N, range(1, 3 * rows + 2))


def test_edge_copies_beyond_the_budget_are_not_made(monkeypatch):
    """Into C, 8 rows of 32 vectors: the seven per-count copies would hold 28 * 32 stores
    (a load, a multiply and their indices each), more than EDGE_BUDGET expression nodes
    (gcc's time grows with them), so the remainder is the rolled one. Into a tile, 8 (16)
    rows x 2 vectors x 32 unrolled reduction steps, 512 (1024) stores a block: the
    clamped copies of 1, 2 and 4 (and 8) rows beside the whole block would hold 15 / 8
    times its stores, over the budget too, so the update's remainder is the whole block
    alone (the initialisation, 2 stores a row, keeps its copies).

    Correct all the same, checked where gcc is quick: the same kernels an eighth the size
    (4 vectors; 4 reduction steps) under an eighth of the budget take the same paths, and
    run. (The full-size 8-row matmul alone took gcc 15 s.)"""
    assert 28 * 32 > EDGE_BUDGET / 8 and 15 * 64 > EDGE_BUDGET / 8

    def check_paths(budget, cols, k, build):
        monkeypatch.setattr(version, "EDGE_BUDGET", budget)
        s, args = direct_row_block(8, cols=cols)
        assert not conditions(loop_nest(s, args).body, "==")
        if build:
            check_direct(tvmlite.build(s, args, name="twice"), cols, range(1, 18))
        for rows in (8, 16):
            s, args = row_block_matmul(rows, unroll_k=True, k=k)
            assert len(conditions(loop_nest(s, args).body, "<=")) == ladder_conditions(rows)
            if build and rows == 8:
                check_against_numpy(tvmlite.build(s, args, name="mm"),
                                    range(1, 2 * rows + 2), rows, k=k)

    check_paths(EDGE_BUDGET, 512, K, build=False)
    check_paths(EDGE_BUDGET // 8, 64, K // 8, build=True)


@pytest.mark.parametrize("tile,rows", [(4, 2), (9, 3), (10, 5), (16, 8), (18, 9), (34, 17)])
def test_every_block_height_correct_at_every_remainder(tile, rows):
    """Clamped edge copies for 1..rows-1 valid rows (17 rows: above EDGE_MAX, the rolled
    remainder), at every M up to three tiles and one past."""
    s, args = blocked_matmul(tile, rows)
    check_against_numpy(tvmlite.build(s, args, name="mm"), range(1, 3 * tile + 2), tile)


@pytest.mark.parametrize("m_values", [
    [1, 2, 3, 4, 5, 7, 8, 9, 11, 12, 13],       # around every block edge of the first tile
    [23, 24, 25, 35, 36, 37, 100, 1023],        # around tile edges further up
])
def test_blocked_matmul_correct_around_every_tile_edge(m_values):
    s, args = blocked_matmul()
    check_against_numpy(tvmlite.build(s, args, name="mm"), m_values, 0)


def check_against_numpy(mod, m_values, seed, k=K):
    """``mod`` (a matmul over symbolic M, k x N fixed) against numpy at each M."""
    rng = np.random.default_rng(seed)
    b = rng.uniform(-1, 1, (k, N)).astype("float32")
    for m in m_values:
        a = rng.uniform(-1, 1, (m, k)).astype("float32")
        c = np.full((m, N), np.nan, "float32")
        mod(a, b, c)
        np.testing.assert_allclose(c, a.astype("float64") @ b, rtol=2e-5, atol=2e-5,
                                   err_msg=f"M={m}")


def draw_blocked_matmul(data, dims: dict, axis_name: str) -> tuple:
    """A matmul of ``dims`` with a local accumulator at a drawn loop of C, the axis
    ``axis_name`` split by drawn factors (a tile of C's, where it has one, and a block of
    the accumulator's, unrolled), the reduction inside or outside the block, drawn unrolls
    of the rest: (schedule, [A, B, C])."""
    A, B, C = tvmlite.ops.matmul(dims["M"], dims["N"], dims["K"])
    s = te.create_schedule(C.op)
    CL = s.cache_write(C, "local")
    i, j = s[C].op.axis
    outer = {"M": i, "N": j, "K": None}[axis_name]
    tile = data.draw(st.integers(2, 12), label="tile")
    at = s[C].split(outer, factor=tile)[0] if outer is not None else \
        data.draw(st.sampled_from([i, j]), label="at")
    s[CL].compute_at(s[C], at)
    ci, cj = s[CL].op.axis
    (ck,) = s[CL].op.reduce_axis
    axis = {"M": ci, "N": cj, "K": ck}[axis_name]
    vo, vi = s[CL].split(axis, factor=data.draw(st.integers(2, 17), label="block"))
    others = [x for x in (ci, cj, ck) if x is not axis]
    order = data.draw(st.permutations([vo, vi, *others]), label="order")
    s[CL].reorder(*order)
    s[CL].unroll(vi)
    for x in others:
        if data.draw(st.booleans(), label=f"unroll {x}"):
            s[CL].unroll(x)
    return s, [A, B, C]


def matmul_inputs(rng, shape: dict) -> tuple:
    a = rng.uniform(-1, 1, (shape["M"], shape["K"])).astype("float32")
    b = rng.uniform(-1, 1, (shape["K"], shape["N"])).astype("float32")
    return a, b, np.full((shape["M"], shape["N"]), np.nan, "float32")


@settings(max_examples=15, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_random_blocked_matmuls_over_a_symbolic_size_match_numpy(data):
    """Blocked matmuls (``draw_blocked_matmul``), one of M, N, K symbolic (the block the
    pass versions: rows of a tile, or steps of a reduction): checked against numpy on
    both sides of each factor."""
    size = data.draw(st.sampled_from("MNK"), label="symbolic")
    dims = {"M": 6, "N": 32, "K": 5, size: te.var(size)}
    s, args = draw_blocked_matmul(data, dims, size)
    mod = tvmlite.build(s, args, name="mm")
    rng = np.random.default_rng(0)
    for n in (1, 2, 3, 7, 8, 9, 16, 17, 25):
        a, b, c = matmul_inputs(rng, {**dims, size: n})
        mod(a, b, c)
        np.testing.assert_allclose(c, a.astype("float64") @ b, rtol=2e-5, atol=2e-5,
                                   err_msg=f"{size}={n}")


def test_a_static_loose_block_runs_its_full_tiles_unguarded():
    """128 rows in tiles of 14 (a loose register block, as ``blocked_schedule`` takes):
    the tile loop runs 9 tiles without a guard and the last, peeled after them, has its
    guards resolved when its block is unrolled (2 rows, no branch); as numpy's."""
    A, B, C = tvmlite.ops.matmul(128, 32, 16)
    s = te.create_schedule(C.op)
    CL = s.cache_write(C, "local")
    i, j = s[C].op.axis
    io, ii = s[C].split(i, factor=14)
    s[C].reorder(io, j, ii)
    s[C].unroll(ii)
    s[CL].compute_at(s[C], j)
    ci, cj = s[CL].op.axis
    (ck,) = s[CL].op.reduce_axis
    s[CL].reorder(ck, ci, cj)
    s[CL].unroll(ci)
    body = tvmlite.lower(s, [A, B, C]).body
    assert any(isinstance(x, IfThenElse) for x in walk_stmts(loop_nest(s, [A, B, C]).body))
    assert not any(isinstance(x, IfThenElse) for x in walk_stmts(body))
    tiles = [x for x in walk_stmts(body) if isinstance(x, For) and x.var.name == io.name]
    assert [t.extent for t in tiles] == [9]
    a, b, c = matmul_inputs(np.random.default_rng(0), {"M": 128, "N": 32, "K": 16})
    tvmlite.build(s, [A, B, C], name="mm")(a, b, c)
    np.testing.assert_allclose(c, a.astype("float64") @ b, rtol=2e-5, atol=2e-5)


@settings(max_examples=15, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_random_static_blocked_matmuls_with_peeled_tiles_match_numpy(data):
    """Blocked matmuls (``draw_blocked_matmul``) of static sizes, the split axis's size
    drawn so that tiles and blocks rarely divide it: the peeled tails as numpy's."""
    size = data.draw(st.sampled_from("MNK"), label="split axis")
    dims = {"M": 6, "N": 32, "K": 5, size: data.draw(st.integers(1, 40), label="size")}
    s, args = draw_blocked_matmul(data, dims, size)
    a, b, c = matmul_inputs(np.random.default_rng(0), dims)
    tvmlite.build(s, args, name="mm")(a, b, c)
    np.testing.assert_allclose(c, a.astype("float64") @ b, rtol=2e-5, atol=2e-5,
                               err_msg=str(dims))
