"""Simplify every expression knowing each loop variable's range; drop dead branches."""
from __future__ import annotations

from ..expr import Const
from ..simplify import simplify
from ..stmt import Allocate, For, IfThenElse, Seq, Stmt, Store, map_stmt, seq


def simplify_stmt(stmt: Stmt, ranges: dict | None = None) -> Stmt:
    return _go(stmt, dict(ranges or {}))


def _go(s: Stmt, R: dict) -> Stmt:
    if isinstance(s, For):
        if s.extent == 1 and s.kind in ("serial", "unroll", "vectorize"):
            from ..stmt import map_exprs
            from ..expr import substitute
            body = map_exprs(s.body, lambda e: substitute(e, {s.var.name: Const(0)}))
            return _go(_carry_unroll_limit(body, s.unroll_limit), R)
        R2 = dict(R)
        R2[s.var.name] = (0, s.extent - 1)
        return For(s.var, s.extent, s.kind, _go(s.body, R2), s.unroll_limit)
    if isinstance(s, Seq):
        return seq(*(_go(x, R) for x in s.stmts))
    if isinstance(s, IfThenElse):
        c = simplify(s.cond, R)
        if isinstance(c, Const):
            if c.value:
                return _go(s.then, R)
            return _go(s.other, R) if s.other is not None else Seq(())
        return IfThenElse(c, _go(s.then, R), None if s.other is None else _go(s.other, R))
    if isinstance(s, Store):
        return Store(s.buffer, tuple(simplify(i, R) for i in s.indices), simplify(s.value, R))
    if isinstance(s, Allocate):
        return Allocate(s.buffer, _go(s.body, R))
    return s


def _carry_unroll_limit(s: Stmt, limit: int) -> Stmt:
    """An auto_unroll_max_step pragma on a dropped extent-1 loop moves to the loops just
    inside it; otherwise a stage computed at a tile would silently lose its pragma."""
    if not limit:
        return s
    if isinstance(s, For):
        return For(s.var, s.extent, s.kind, s.body, max(s.unroll_limit, limit))
    return map_stmt(s, lambda c: _carry_unroll_limit(c, limit))
