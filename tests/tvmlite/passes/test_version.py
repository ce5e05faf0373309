"""Loop versioning of unrolled blocks (passes/version.py): one unrolled, unguarded copy
of each block plus a rolled, guarded one, correct at every size around each tile edge."""
from __future__ import annotations

import numpy as np
import pytest

import tvmlite
from tvmlite import te
from tvmlite.ir.expr import Var, walk
from tvmlite.ir.stmt import For, IfThenElse, walk_stmts
from tvmlite.passes.pipeline import loop_nest

N = K = 32
TILE, ROWS = 12, 4   # rows per tile, rows per unrolled block (3 blocks a tile)


def blocked_matmul():
    """Ansor's shape of a matmul: a local accumulator of ROWS x 16 per block, unrolled
    under an auto_unroll pragma, inside tiles of TILE rows of the symbolic M."""
    M = te.var("M")
    A, B, C = tvmlite.ops.matmul(M, N, K)
    s = te.create_schedule(C.op)
    CL = s.cache_write(C, "local")
    i, j = s[C].op.axis
    io, ii = s[C].split(i, factor=TILE)
    jo, ji = s[C].split(j, factor=16)
    s[C].reorder(io, jo, ii, ji)
    s[C].parallel(io)
    s[C].vectorize(ji)
    s[CL].compute_at(s[C], jo)
    ci, cj = s[CL].op.axis
    (ck,) = s[CL].op.reduce_axis
    cio, cii = s[CL].split(ci, factor=ROWS)
    s[CL].reorder(ck, cio, cii, cj)
    s[CL].vectorize(cj)
    s[CL].pragma(ck, "auto_unroll_max_step", 64)
    return s, [A, B, C]


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


@pytest.mark.parametrize("m_values", [
    [1, 2, 3, 4, 5, 7, 8, 9, 11, 12, 13],       # around every block edge of the first tile
    [23, 24, 25, 35, 36, 37, 100, 1023],        # around tile edges further up
])
def test_blocked_matmul_correct_around_every_tile_edge(m_values):
    s, args = blocked_matmul()
    mod = tvmlite.build(s, args, name="mm")
    rng = np.random.default_rng(0)
    b = rng.uniform(-1, 1, (K, N)).astype("float32")
    for m in m_values:
        a = rng.uniform(-1, 1, (m, K)).astype("float32")
        c = np.full((m, N), np.nan, "float32")
        mod(a, b, c)
        np.testing.assert_allclose(c, a.astype("float64") @ b, rtol=2e-5, atol=2e-5,
                                   err_msg=f"M={m}")
