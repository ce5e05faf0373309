"""Multi-dimensional buffer accesses become one row-major flat index."""
from __future__ import annotations

from tvmlite.ir.expr import BinOp, Const, Expr, Load, Var, rebuild
from tvmlite.ir.simplify import simplify
from tvmlite.ir.stmt import IfThenElse, Stmt, Store, map_stmt
from tvmlite.ir.symbolic import Extent, as_extent_expr, ext_mul, is_static


def flat_index(shape: tuple, indices: tuple) -> Expr:
    out: Expr = Const(0)
    stride: Extent = 1
    for dim, idx in zip(reversed(shape), reversed(indices)):
        term = idx if is_static(stride) and stride == 1 else BinOp("*", idx, as_extent_expr(stride))
        out = term if (isinstance(out, Const) and out.value == 0) else BinOp("+", term, out)
        stride = ext_mul(stride, dim)
    return simplify(out)


def _expr(e: Expr, memo: dict) -> Expr:
    """``e`` with flat accesses; ``memo`` holds the expressions already flattened in this
    nest (the rows of an unrolled block load the same elements row after row)."""
    if isinstance(e, (Const, Var)):
        return e
    out = memo.get(e)
    if out is None:
        if isinstance(e, Load):
            idx = tuple(_expr(i, memo) for i in e.indices)
            out = Load(e.buffer, (flat_index(e.buffer.shape, idx),))
        else:
            out = rebuild(e, lambda x: _expr(x, memo))
        memo[e] = out
    return out


def flatten(stmt: Stmt) -> Stmt:
    """Every Load/Store gets a single index: sum of index * row-major stride."""
    memo: dict = {}

    def go(s: Stmt) -> Stmt:
        if isinstance(s, Store):
            idx = tuple(_expr(i, memo) for i in s.indices)
            return Store(s.buffer, (flat_index(s.buffer.shape, idx),), _expr(s.value, memo))
        if isinstance(s, IfThenElse):
            s = IfThenElse(_expr(s.cond, memo), s.then, s.other)
        return map_stmt(s, go)
    return go(stmt)
