"""Unrolling in the IR, so small local accumulators become registers in C.

``unroll``-annotated loops are replicated with their variable replaced by each value.
Inside a loop carrying ``auto_unroll_max_step = n``, every serial loop nest whose
total step count (stores executed, a vectorized loop counting as one) is at most n is
unrolled too. Explicit unrolling is capped at ``MAX_COPIES`` statements: a bigger
loop is left serial rather than exploding compile time.
"""
from __future__ import annotations

from ..expr import Const, substitute
from ..stmt import Allocate, For, IfThenElse, Seq, Stmt, Store, map_exprs, map_stmt, seq

MAX_COPIES = 4096


def steps(s: Stmt) -> int:
    if isinstance(s, Store):
        return 1
    if isinstance(s, For):
        return steps(s.body) * (1 if s.kind == "vectorize" else s.extent)
    if isinstance(s, Seq):
        return sum(steps(x) for x in s.stmts)
    if isinstance(s, IfThenElse):
        return steps(s.then) + (0 if s.other is None else steps(s.other))
    if isinstance(s, Allocate):
        return steps(s.body)
    return 1


def mark_auto_unroll(s: Stmt, limit: int = 0) -> Stmt:
    """Turn serial loops under an auto_unroll_max_step pragma into unroll loops."""
    if isinstance(s, For) and s.unroll_limit:
        limit = max(limit, s.unroll_limit)
    s = map_stmt(s, lambda c: mark_auto_unroll(c, limit))
    if isinstance(s, For) and s.kind == "serial" and limit and steps(s) <= limit:
        return For(s.var, s.extent, "unroll", s.body, s.unroll_limit)
    return s


def unroll(s: Stmt) -> Stmt:
    """Replicate every ``unroll`` loop (innermost first)."""
    s = map_stmt(s, unroll)
    if isinstance(s, For) and s.kind == "unroll":
        if s.extent * steps(s.body) > MAX_COPIES:
            return For(s.var, s.extent, "serial", s.body, s.unroll_limit)
        copies = [map_exprs(s.body, lambda e, i=i: substitute(e, {s.var.name: Const(i)}))
                  for i in range(s.extent)]
        return seq(*copies)
    return s
