"""The loop IR: buffers, loops, stores, guards and allocations.

``lower()`` turns a schedule into these nodes; passes are functions ``Stmt -> Stmt``;
``codegen_c`` prints them as C. Loops always start at 0 and have constant extents
(bound inference makes every extent a number), which keeps every pass simple -- except
over a symbolic size (``te.var``): then an extent or a buffer dimension is an integer
expression of SizeVars (``tvmlite.ir.symbolic``), and passes leave such loops serial.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterator

from tvmlite.ir.expr import Expr, Var


@dataclass(frozen=True, eq=False)
class Buffer:
    """A named array. scope: "arg" (kernel argument), "global" (whole-size
    intermediate), "local" (a region living at its attach point)."""
    name: str
    shape: tuple
    dtype: str
    scope: str = "global"

    @property
    def size(self) -> int:
        n = 1
        for d in self.shape:
            n *= d
        return n

    def __repr__(self) -> str:
        return f"Buffer({self.name}, {self.shape}, {self.dtype}, {self.scope})"


class Stmt:
    __slots__ = ()

    def __str__(self) -> str:
        from tvmlite.ir.printer import stmt_str
        return stmt_str(self)


@dataclass(frozen=True, eq=False)
class For(Stmt):
    """``for var in range(extent)``; kind: serial, parallel, vectorize or unroll.
    ``unroll_limit`` carries the auto_unroll_max_step pragma of this loop."""
    var: Var
    extent: int
    kind: str
    body: Stmt
    unroll_limit: int = 0


@dataclass(frozen=True, eq=False)
class Seq(Stmt):
    stmts: tuple


@dataclass(frozen=True, eq=False)
class IfThenElse(Stmt):
    cond: Expr
    then: Stmt
    other: Stmt | None = None


@dataclass(frozen=True, eq=False)
class Store(Stmt):
    buffer: Buffer
    indices: tuple
    value: Expr


@dataclass(frozen=True, eq=False)
class Allocate(Stmt):
    """``buffer`` exists (uninitialized) for the duration of ``body``."""
    buffer: Buffer
    body: Stmt


@dataclass(frozen=True, eq=False)
class TensorIntrinsic(Stmt):
    """One dot-product intrinsic (``tvmlite.target.intrinsics``) where a tensorized
    loop nest was: ``out[o + x] += sum(a[ai + r] * b[bi + x * group + r] for r)`` for
    each of its lanes ``x``, on flat indices ``o``, ``ai``, ``bi`` (``passes.tensorize``).
    A tile intrinsic's ``tile`` is (rows, lanes, kgroups, ldc, lda, ldb, fresh): the
    block's extents, the row strides, in elements, of out, a and b's k groups, and 1 when
    the sum starts at zero there (the zeroing it replaced: ``tilezero``, out not read),
    else 0 (empty for a vector intrinsic)."""
    name: str
    out: Buffer
    out_index: Expr
    a: Buffer
    a_index: Expr
    b: Buffer
    b_index: Expr
    tile: tuple[int, ...] = ()


def seq(*stmts: Stmt | None) -> Stmt:
    """A flat sequence; nested sequences and Nones are folded away."""
    out: list[Stmt] = []
    for s in stmts:
        if s is None:
            continue
        if isinstance(s, Seq):
            out.extend(s.stmts)
        else:
            out.append(s)
    return out[0] if len(out) == 1 else Seq(tuple(out))


def stmt_children(s: Stmt) -> tuple:
    if isinstance(s, For):
        return (s.body,)
    if isinstance(s, Seq):
        return s.stmts
    if isinstance(s, IfThenElse):
        return (s.then,) if s.other is None else (s.then, s.other)
    if isinstance(s, Allocate):
        return (s.body,)
    return ()


def walk_stmts(s: Stmt) -> Iterator[Stmt]:
    stack = [s]
    while stack:
        node = stack.pop()
        yield node
        stack.extend(reversed(stmt_children(node)))


def map_stmt(s: Stmt, fn: Callable[[Stmt], Stmt]) -> Stmt:
    """Apply ``fn`` to the direct child statements of ``s``."""
    if isinstance(s, For):
        b = fn(s.body)
        return s if b is s.body else For(s.var, s.extent, s.kind, b, s.unroll_limit)
    if isinstance(s, Seq):
        kids = [fn(x) for x in s.stmts]
        return s if all(a is b for a, b in zip(kids, s.stmts)) else seq(*kids)
    if isinstance(s, IfThenElse):
        t = fn(s.then)
        o = None if s.other is None else fn(s.other)
        return s if t is s.then and o is s.other else IfThenElse(s.cond, t, o)
    if isinstance(s, Allocate):
        b = fn(s.body)
        return s if b is s.body else Allocate(s.buffer, b)
    return s


def map_exprs(s: Stmt, fn: Callable[[Expr], Expr]) -> Stmt:
    """Apply ``fn`` to every expression in the statement tree."""
    def go(x: Stmt) -> Stmt:
        if isinstance(x, Store):
            return Store(x.buffer, tuple(fn(i) for i in x.indices), fn(x.value))
        if isinstance(x, IfThenElse):
            x = IfThenElse(fn(x.cond), x.then, x.other)
        if isinstance(x, TensorIntrinsic):
            return TensorIntrinsic(x.name, x.out, fn(x.out_index), x.a, fn(x.a_index), x.b,
                                   fn(x.b_index), x.tile)
        return map_stmt(x, go)
    return go(s)
