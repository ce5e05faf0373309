"""Loop versioning of unrolled blocks (passes/version.py): one unrolled, unguarded copy
of each block plus a rolled, guarded one, correct at every size around each tile edge."""
from __future__ import annotations

import numpy as np
import pytest

import tvmlite
from tvmlite import te
from tvmlite.ir.expr import Cmp, Var, walk
from tvmlite.ir.stmt import For, IfThenElse, walk_stmts
from tvmlite.passes.pipeline import loop_nest
from tvmlite.passes.version import EDGE_BUDGET, EDGE_MAX

N = K = 32
TILE, ROWS = 12, 4   # rows per tile, rows per unrolled block (3 blocks a tile)


def tiled_matmul(tile):
    """A matmul over a symbolic M with a local accumulator CL, C's rows split into tiles of
    ``tile``: (schedule, [A, B, C], CL, the tile loop, the row loop, C's column axis)."""
    A, B, C = tvmlite.ops.matmul(te.var("M"), N, K)
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


def row_block_matmul(rows, unroll_k=False):
    """Tiles of ``rows`` rows, each one unrolled block of rows x 2 vectors inside k (or,
    ``unroll_k``, the block inside k and k unrolled too)."""
    s, args, CL, io, ii, j = tiled_matmul(rows)
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


@pytest.mark.parametrize("rows", [2, 5, 9, 12, 17])
def test_block_remainders_get_one_unguarded_copy_per_row_count(rows):
    """A block of ``rows`` guarded rows: its remainder is rows - 1 unrolled copies chosen
    by the count of valid rows (BLAS's edge kernels), none with a guard on a row; above
    EDGE_MAX rows (17), the rolled remainder. Correct at every M up to three tiles."""
    s, args = row_block_matmul(rows)
    body = loop_nest(s, args).body
    counts = [x for x in walk_stmts(body) if isinstance(x, IfThenElse)
              and isinstance(x.cond, Cmp) and x.cond.op == "=="]
    assert len(counts) == (2 * (rows - 2) if rows <= EDGE_MAX else 0)  # init and update
    for x in counts:
        assert not [g for g in walk_stmts(x.then) if isinstance(g, IfThenElse)]
    check_against_numpy(tvmlite.build(s, args, name="mm"), range(1, 3 * rows + 2), rows)


def test_edge_copies_beyond_the_budget_are_not_made():
    """8 rows x 2 vectors x 32 unrolled reduction steps: 512 stores a block, so its seven
    edge copies would hold 1792, with more than EDGE_BUDGET expression nodes (gcc's time
    grows with them): the update's remainder is the rolled one (the initialisation, 2
    stores a row, keeps its copies); correct all the same."""
    s, args = row_block_matmul(8, unroll_k=True)
    body = loop_nest(s, args).body
    assert 1792 * 4 > EDGE_BUDGET           # a store, a load of each input, a multiply-add
    counts = [x for x in walk_stmts(body) if isinstance(x, IfThenElse)
              and isinstance(x.cond, Cmp) and x.cond.op == "=="]
    assert len(counts) == 8 - 2                  # the initialisation's only
    check_against_numpy(tvmlite.build(s, args, name="mm"), range(1, 18), 8)


@pytest.mark.parametrize("tile,rows", [(4, 2), (9, 3), (10, 5), (16, 8), (18, 9), (34, 17)])
def test_every_block_height_correct_at_every_remainder(tile, rows):
    """Edge copies for 1..rows-1 valid rows (17 rows: above EDGE_MAX, the rolled
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


def check_against_numpy(mod, m_values, seed):
    """``mod`` (a matmul over symbolic M, K x N fixed) against numpy at each M."""
    rng = np.random.default_rng(seed)
    b = rng.uniform(-1, 1, (K, N)).astype("float32")
    for m in m_values:
        a = rng.uniform(-1, 1, (m, K)).astype("float32")
        c = np.full((m, N), np.nan, "float32")
        mod(a, b, c)
        np.testing.assert_allclose(c, a.astype("float64") @ b, rtol=2e-5, atol=2e-5,
                                   err_msg=f"M={m}")
