"""Unrolling in the IR, so small local accumulators become registers in C.

``unroll``-annotated loops are replicated with their variable replaced by each value.
Inside a loop carrying ``auto_unroll_max_step = n``, every serial loop nest whose
total step count (statements it becomes, a vectorized loop counting as its native
vectors) is at most n is unrolled too. Explicit unrolling is capped at ``MAX_COPIES``
native statements: a bigger loop is left serial rather than exploding compile time.
Every function takes ``vector_bytes``, the target's native vector (``Target.vector_bytes``):
the unit a vectorized loop's steps are counted in.
"""
from __future__ import annotations

from tvmlite.ir.expr import ITEMSIZE, Const, substitute
from tvmlite.ir.stmt import (
    Allocate,
    For,
    IfThenElse,
    Seq,
    Stmt,
    Store,
    map_exprs,
    map_stmt,
    seq,
    walk_stmts,
)

MAX_COPIES = 1024


def steps(s: Stmt, vector_bytes: int) -> int:
    """Statements the nest becomes once unrolled, counting a vectorized loop as the
    native vectors it is cut into: the measure of generated code size (and of lowering
    and compile time), so on a 64-byte vector a 64-lane float32 loop counts four times a
    16-lane one."""
    if isinstance(s, Store):
        return 1
    if isinstance(s, For) and not isinstance(s.extent, int):
        return MAX_COPIES * MAX_COPIES  # a symbolic trip count: never unrolled
    if isinstance(s, For):
        if s.kind == "vectorize":
            width = max((ITEMSIZE.get(st.buffer.dtype, 4) for st in walk_stmts(s)
                         if isinstance(st, Store)), default=4)
            return steps(s.body, vector_bytes) * max(1, -(-s.extent * width // vector_bytes))
        return steps(s.body, vector_bytes) * s.extent
    if isinstance(s, Seq):
        return sum(steps(x, vector_bytes) for x in s.stmts)
    if isinstance(s, IfThenElse):
        other = 0 if s.other is None else steps(s.other, vector_bytes)
        return steps(s.then, vector_bytes) + other
    if isinstance(s, Allocate):
        return steps(s.body, vector_bytes)
    return 1


def mark_auto_unroll(s: Stmt, limit: int, vector_bytes: int) -> Stmt:
    """Turn serial loops under an auto_unroll_max_step pragma into unroll loops."""
    if isinstance(s, For) and s.unroll_limit:
        limit = max(limit, s.unroll_limit)
    s = map_stmt(s, lambda c: mark_auto_unroll(c, limit, vector_bytes))
    if isinstance(s, For) and s.kind == "serial" and limit and steps(s, vector_bytes) <= limit:
        return For(s.var, s.extent, "unroll", s.body, s.unroll_limit)
    return s


def unroll(s: Stmt, vector_bytes: int) -> Stmt:
    """Replicate every ``unroll`` loop (innermost first); one whose copies would exceed
    ``MAX_COPIES`` native statements stays a serial loop."""
    s = map_stmt(s, lambda c: unroll(c, vector_bytes))
    if isinstance(s, For) and s.kind == "unroll":
        if s.extent * steps(s.body, vector_bytes) > MAX_COPIES:
            return For(s.var, s.extent, "serial", s.body, s.unroll_limit)
        loop = s

        def copy(i: int) -> Stmt:
            return map_exprs(loop.body, lambda e: substitute(e, {loop.var.name: Const(i)}))
        return seq(*(copy(i) for i in range(s.extent)))
    return s
