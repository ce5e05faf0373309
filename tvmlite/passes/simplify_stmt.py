"""Simplify every expression knowing each loop variable's range; drop dead branches."""
from __future__ import annotations

from tvmlite.ir.expr import Const, substitute
from tvmlite.ir.simplify import INF, simplify
from tvmlite.ir.stmt import Allocate, For, IfThenElse, Seq, Stmt, Store, map_stmt, seq


def simplify_stmt(stmt: Stmt, ranges: dict | None = None) -> Stmt:
    return _go(stmt, dict(ranges or {}), {})


def _go(s: Stmt, R: dict, Z: dict) -> Stmt:
    """``R``: ranges of the enclosing loop variables; ``Z``: variables of dropped
    extent-1 loops, replaced by 0 where expressions are simplified (once, at the leaves,
    rather than by rewriting the whole body per dropped loop)."""
    if isinstance(s, For):
        if s.extent == 1 and s.kind in ("serial", "unroll", "vectorize"):
            return _go(_carry_unroll_limit(s.body, s.unroll_limit), R,
                       {**Z, s.var.name: Const(0)})
        R2 = dict(R)
        R2[s.var.name] = (0, s.extent - 1) if isinstance(s.extent, int) else (0, INF)
        Z2 = {k: v for k, v in Z.items() if k != s.var.name}   # an inner loop rebinding it
        return For(s.var, s.extent, s.kind, _go(s.body, R2, Z2), s.unroll_limit)
    if isinstance(s, Seq):
        return seq(*(_go(x, R, Z) for x in s.stmts))
    if isinstance(s, IfThenElse):
        c = _simp(s.cond, R, Z)
        if isinstance(c, Const):
            if c.value:
                return _go(s.then, R, Z)
            return _go(s.other, R, Z) if s.other is not None else Seq(())
        return IfThenElse(c, _go(s.then, R, Z),
                          None if s.other is None else _go(s.other, R, Z))
    if isinstance(s, Store):
        return Store(s.buffer, tuple(_simp(i, R, Z) for i in s.indices), _simp(s.value, R, Z))
    if isinstance(s, Allocate):
        return Allocate(s.buffer, _go(s.body, R, Z))
    return s


def _simp(e, R: dict, Z: dict):
    return simplify(substitute(e, Z) if Z else e, R)


def _carry_unroll_limit(s: Stmt, limit: int) -> Stmt:
    """An auto_unroll_max_step pragma on a dropped extent-1 loop moves to the loops just
    inside it; otherwise a stage computed at a tile would silently lose its pragma."""
    if not limit:
        return s
    if isinstance(s, For):
        return For(s.var, s.extent, s.kind, s.body, max(s.unroll_limit, limit))
    return map_stmt(s, lambda c: _carry_unroll_limit(c, limit))
