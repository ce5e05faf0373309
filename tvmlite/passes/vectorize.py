"""Vectorized loops become vector expressions (Ramp, Broadcast, vector Load/Store).

A loop ``for v in range(E)`` marked vectorize is cut into chunks of L lanes (the native
width, or the largest power of two up to E; wider vector types make GCC spill), each chunk
substituting ``v -> ramp(base, 1, L)``; a remainder runs as a scalar tail. A guard that
depends on ``v`` (an imperfect split) is checked at the first and last lane of a chunk:
when it holds for both, the chunk runs as a vector, otherwise as scalars. A body that
cannot be a vector (a store not depending on ``v``, an inner loop, a vector condition
choosing between loads) stays a scalar loop: correct first, fast where possible.

Every decision is recorded when the caller passes a ``decisions`` list: one
``VectorDecision`` per vectorize-marked loop says how many lanes it got, what stayed
scalar (the whole loop and why, a scalar tail, guarded chunks) and which vector accesses
are not contiguous (gathers, scatters), so ``tvmlite explain`` reports our own reasons.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from tvmlite.errors import TvmliteError
from tvmlite.ir.dtypes import BUFFER_DTYPES, compute_dtype
from tvmlite.ir.expr import (
    ITEMSIZE,
    BinOp,
    Broadcast,
    Call,
    Cast,
    Cmp,
    Const,
    Expr,
    Load,
    Not,
    Ramp,
    Select,
    Var,
    free_vars,
    lanes_of,
    rebuild,
    same,
    substitute,
    walk,
)
from tvmlite.ir.simplify import linear, simplify
from tvmlite.ir.stmt import For, IfThenElse, Seq, Stmt, Store, map_exprs, map_stmt, seq, walk_stmts

MAX_UNROLLED_CHUNKS = 8
MAX_LANE_SELECTS = 4    # a chunk is versioned on at most this many selects (``_Chunk``)


class NotVectorizable(TvmliteError):
    """Internal: this loop body stays scalar; the message says why."""


@dataclass(frozen=True)
class VectorDecision:
    """What the pass did with one ``vectorize`` loop. ``lanes`` is 0 when the whole loop
    stayed scalar (``reason`` says why); ``scalar_tail`` elements after the last chunk run
    as scalars; ``guarded`` chunks fall back to scalar lanes where an imperfect split's
    guard fails; ``selects`` are the conditions on the lane of selects that load, on
    which chunks are versioned (the chunks across a border run lane by lane);
    ``gathers``/``scatters`` are (buffer, stride) vector accesses that are not
    contiguous; ``calls`` the functions applied to vectors (codegen decides their lanes)."""
    loop: str
    stages: tuple
    extent: int
    lanes: int
    chunks: int = 0
    scalar_tail: int = 0
    reason: str = ""
    guarded: bool = False
    gathers: tuple = ()
    scatters: tuple = ()
    calls: tuple = ()
    selects: tuple = ()

    @property
    def fell_back(self) -> bool:
        """Some lane of this loop runs as scalar code (or as a lane-by-lane access)."""
        return bool(self.reason or self.scalar_tail or self.guarded or self.selects
                    or self.gathers or self.scatters)


def vectorize(s: Stmt, native_bytes: int, decisions: list | None = None,
              memo: dict | None = None) -> Stmt:
    """``memo``: {(lane variable, ramp): {expression: vectorized}}, shared by every loop
    of the nest: the rows of an unrolled block (and its edge copies) each have their own
    vectorized loop, loading and storing the same indices row after row."""
    memo = {} if memo is None else memo
    s = map_stmt(s, lambda c: vectorize(c, native_bytes, decisions, memo))
    if isinstance(s, For) and s.kind == "vectorize":
        out, decision = _vectorize_loop(s, native_bytes, memo)
        if decisions is not None:
            decisions.append(decision)
        return out
    return s


def _store_dtypes(s: Stmt) -> set:
    return {x.buffer.dtype for x in walk_stmts(s) if isinstance(x, Store)}


def _vectorize_loop(loop: For, native_bytes: int, memo: dict) -> tuple[Stmt, VectorDecision]:
    scalar = For(loop.var, loop.extent, "serial", loop.body)
    stages = tuple(sorted({x.buffer.name for x in walk_stmts(loop.body) if isinstance(x, Store)}))
    E = loop.extent

    def stays_scalar(reason: str) -> tuple[Stmt, VectorDecision]:
        return scalar, VectorDecision(loop.var.name, stages, E, 0, reason=reason)
    dtypes = _store_dtypes(loop.body)
    if not dtypes:
        return stays_scalar("the loop body stores nothing")
    if not isinstance(loop.extent, int):
        return stays_scalar("its trip count is a symbolic size: split it by a constant "
                            "factor and vectorize the inner loop")
    # lanes of the widest dtype stored, a storage float counted as the float32 it is
    # computed in: 32 bf16 lanes on AVX-512 are two float32 registers, which GCC lowers
    # in part to scalars (a NaN test of the rounding: 32 vucomiss)
    native = native_bytes // max(ITEMSIZE[compute_dtype(d)] for d in dtypes)
    L = native if native <= E else 1 << (E.bit_length() - 1)
    if L < 2:
        return stays_scalar(f"extent {E} is less than two lanes")
    chunks, tail = divmod(E, L)
    v = loop.var
    guards = _LaneGuards.of(loop.body, v.name)
    try:
        if chunks <= MAX_UNROLLED_CHUNKS:
            body = seq(*(_chunk(guards, v, Const(c * L), L, memo) for c in range(chunks)))
        else:
            vo = Var(f"{v.name}_v")
            body = For(vo, chunks, "serial",
                       _chunk(guards, v, BinOp("*", vo, Const(L)), L, memo))
    except NotVectorizable as why:
        return stays_scalar(str(why))
    guarded, gathers, scatters, calls = _vector_accesses(body, v.name)
    selects = tuple(str(c) for c in guards.selects) if guarded else ()
    decision = VectorDecision(v.name, stages, E, L, chunks, tail, "",
                              guarded and guards.split is not None, gathers, scatters, calls,
                              selects)
    if tail:
        vt = Var(f"{v.name}_t")
        shifted = map_exprs(loop.body, lambda e: substitute(
            e, {v.name: BinOp("+", vt, Const(chunks * L))}))
        body = seq(body, For(vt, tail, "serial", shifted))
    return body, decision


def _vector_accesses(body: Stmt, v: str) -> tuple:
    """(guarded, gathers, scatters, calls) of a vectorized body: the facts codegen turns
    into lane-by-lane code."""
    guarded = any(isinstance(x, For) and x.var.name == f"{v}_l" for x in walk_stmts(body))
    gathers, scatters, calls = set(), set(), set()
    for st in walk_stmts(body):
        exprs = [st.value, *st.indices] if isinstance(st, Store) else \
            [st.cond] if isinstance(st, IfThenElse) else []
        if isinstance(st, Store) and isinstance(st.indices[0], Ramp) and st.indices[0].stride != 1:
            scatters.add((st.buffer.name, st.indices[0].stride))
        for e in exprs:
            for x in walk(e):
                if isinstance(x, Load) and isinstance(x.indices[0], Ramp) \
                        and x.indices[0].stride != 1:
                    gathers.add((x.buffer.name, x.indices[0].stride))
                elif isinstance(x, Call) and lanes_of(x) > 1:
                    calls.add(x.func)
    return guarded, tuple(sorted(gathers)), tuple(sorted(scatters)), tuple(sorted(calls))


@dataclass(frozen=True)
class _LaneGuards:
    """A vectorize loop's body and its guards on the lane, found once per loop (every
    chunk of it has the same): ``split``, the condition of an ``if`` around the body (an
    imperfect split), ``inner`` the body inside it, ``selects`` the conditions of its
    selects that load (``_lane_selects``)."""
    body: Stmt
    inner: Stmt
    split: Expr | None
    selects: tuple

    @staticmethod
    def of(body: Stmt, v: str) -> "_LaneGuards":
        inner, split = body, None
        if isinstance(body, IfThenElse) and body.other is None and v in free_vars(body.cond):
            inner, split = body.then, body.cond
        return _LaneGuards(body, inner, split, tuple(_lane_selects(inner, v)))


def _chunk(guards: _LaneGuards, v: Var, base: Expr, L: int, memo: dict) -> Stmt:
    """One chunk of L lanes starting at ``base``; guards on ``v`` checked at both ends
    (``_Chunk.versions``)."""
    ramp = Ramp(simplify(base), 1, L)
    lane_memo = memo.setdefault((v.name, ramp), {})
    if guards.split is None and not guards.selects:
        return _vec_stmt(guards.body, v.name, ramp, lane_memo)
    lanes = Var(f"{v.name}_l")
    scalar = For(lanes, L, "serial", map_exprs(guards.body, lambda e: substitute(
        e, {v.name: BinOp("+", base, lanes)})))
    chunk = _Chunk(v.name, base, L, ramp, lane_memo, scalar)
    return chunk.versions(guards.inner, guards.split)


@dataclass(frozen=True)
class _Chunk:
    """One chunk's versions. The guards on the lane are an ``if`` around the body (an
    imperfect split) and the conditions of selects whose branches load (a window
    clamped at a border, as LRN's over the channels; a concat's parts): where every lane
    meets one the same way, the chunk is a vector with that select's branch taken and
    the clamps the condition makes redundant dropped (``assuming``); a chunk whose lanes
    differ runs lane by lane (``scalar``). Without this, one guarded tap kept the whole
    loop scalar."""
    v: str
    base: Expr
    L: int
    ramp: Ramp
    memo: dict
    scalar: Stmt

    def at_both_ends(self, cond: Expr) -> Expr:
        first = substitute(cond, {self.v: self.base})
        last = substitute(cond, {self.v: BinOp("+", self.base, Const(self.L - 1))})
        return simplify(BinOp("and", first, last))

    def versions(self, body: Stmt, guard: Expr | None, facts: tuple = ()) -> Stmt:
        """``if (guard and c at both ends) {body, c taken} else if (guard and not c at
        both ends) {body, c not taken} else {lane by lane}`` for the first select
        condition ``c``, each version versioned again on the next; ``facts``: what the
        versions around this one hold (``_facts``)."""
        selects = _lane_selects(body, self.v)
        if guard is not None and not _monotone(guard, self.v):
            raise NotVectorizable(f"the guard `{guard}` is not an affine comparison in "
                                  f"the lane {self.v}")
        if len(selects) > MAX_LANE_SELECTS:
            raise NotVectorizable(f"{len(selects)} selects that load depend on the lane "
                                  f"(versions for at most {MAX_LANE_SELECTS})")
        if not selects:
            vec = _vec_stmt(body, self.v, self.ramp, self.memo)
            return vec if guard is None else self.either(guard, lambda: vec, self.scalar)
        c = selects[0]
        out = self.scalar
        for holds, branch in ((_negation(c), False), (c, True)):
            if holds is None:
                continue
            known = facts + tuple(_facts(holds))
            taken = map_exprs(body, lambda e: assuming(e, c, branch, list(known)))
            cond = holds if guard is None else BinOp("and", guard, holds)
            out = self.either(cond, lambda: self.versions(taken, None, known), out)
        return out

    def either(self, cond: Expr, then: Callable[[], Stmt], other: Stmt) -> Stmt:
        """``if (cond at both ends) then() else other``; just one of them where that is
        known here (an unrolled chunk's constant base)."""
        test = self.at_both_ends(cond)
        if isinstance(test, Const):
            return then() if test.value else other
        return IfThenElse(test, then(), other)


def _lane_selects(s: Stmt, v: str) -> list[Expr]:
    """The affine conditions on the lane ``v`` of the selects in ``s``'s stores whose
    branches load memory (a select choosing between values vectorizes as a blend; one
    on loaded data keeps the loop scalar, ``_vec_new`` says why)."""
    out: list[Expr] = []
    for st in walk_stmts(s):
        if not isinstance(st, Store):
            continue
        for x in walk(st.value):
            if isinstance(x, Select) and v in free_vars(x.cond) and x.cond not in out and \
                    _monotone(x.cond, v) and \
                    any(isinstance(y, Load) for b in (x.then, x.other) for y in walk(b)):
                out.append(x.cond)
    return out


NEGATED = {"<": ">=", "<=": ">", ">": "<=", ">=": "<"}


def _negation(cond: Expr) -> Expr | None:
    """``not cond`` as one comparison, or None (a conjunction's is a disjunction)."""
    return Cmp(NEGATED[cond.op], cond.a, cond.b) if isinstance(cond, Cmp) else None


def _facts(cond: Expr) -> list[tuple[dict, int]]:
    """The conjuncts of ``cond`` as linear forms ``(terms, c)`` meaning ``terms + c <= 0``."""
    if isinstance(cond, BinOp) and cond.op == "and":
        return _facts(cond.a) + _facts(cond.b)
    assert isinstance(cond, Cmp)
    a, b = (cond.a, cond.b) if cond.op in ("<", "<=") else (cond.b, cond.a)
    terms, c = linear(BinOp("-", a, b))
    return [(terms, c + (1 if cond.op in ("<", ">") else 0))]


def _implied(e: Expr, facts: list[tuple[dict, int]]) -> bool:
    """``e <= 0`` follows from one of ``facts``: ``e`` is a fact's form plus c <= 0."""
    terms, c = linear(e)
    return any(terms == ft and c <= fc for ft, fc in facts)


def assuming(e: Expr, cond: Expr, value: bool, facts: list[tuple[dict, int]]) -> Expr:
    """``e`` where ``cond`` is ``value`` (``facts``: what that means, ``_facts``): selects
    on it take that branch, and a ``min``/``max`` whose order the facts decide is the
    operand it picks (the clamp ``max(min(c + r - 2, C - 1), 0)`` under
    ``0 <= c + r - 2 < C`` is ``c + r - 2``)."""
    if isinstance(e, Select) and same(e.cond, cond):
        return assuming(e.then if value else e.other, cond, value, facts)
    e = rebuild(e, lambda x: assuming(x, cond, value, facts))
    if isinstance(e, BinOp) and e.op in ("min", "max"):
        if _implied(BinOp("-", e.a, e.b), facts):       # a <= b
            return e.a if e.op == "min" else e.b
        if _implied(BinOp("-", e.b, e.a), facts):       # b <= a
            return e.b if e.op == "min" else e.a
    return e


def _monotone(cond: Expr, v: str) -> bool:
    """True for a conjunction of affine integer comparisons in ``v``."""
    if isinstance(cond, BinOp) and cond.op == "and":
        return _monotone(cond.a, v) and _monotone(cond.b, v)
    if not isinstance(cond, Cmp) or cond.op in ("==", "!="):
        return False
    terms, _ = linear(BinOp("-", cond.a, cond.b))
    for atom in terms:
        if not isinstance(atom, Var) and v in free_vars(atom):
            return False
    return True


def _vec_stmt(s: Stmt, v: str, ramp: Ramp, memo: dict) -> Stmt:
    if isinstance(s, Store):
        idx = _vec(s.indices[0], v, ramp, memo)
        if lanes_of(idx) == 1 or (isinstance(idx, Ramp) and idx.stride == 0):
            raise NotVectorizable(f"every lane stores the same element of {s.buffer.name} "
                                  "(the store does not depend on the lane: a reduction "
                                  "along it)")
        value = _vec(s.value, v, ramp, memo)
        if lanes_of(value) == 1:
            value = Broadcast(value, ramp.lanes)
        return Store(s.buffer, (idx,), value)
    if isinstance(s, Seq):
        return seq(*(_vec_stmt(x, v, ramp, memo) for x in s.stmts))
    if isinstance(s, IfThenElse):
        cond = _vec(s.cond, v, ramp, memo)
        if lanes_of(cond) != 1:
            raise NotVectorizable(f"the condition `{s.cond}` of an if depends on the lane")
        return IfThenElse(cond, _vec_stmt(s.then, v, ramp, memo),
                          None if s.other is None else _vec_stmt(s.other, v, ramp, memo))
    what = f"an inner loop over {s.var.name}" if isinstance(s, For) else \
        f"an allocation of {s.buffer.name}" if hasattr(s, "buffer") else type(s).__name__
    raise NotVectorizable(f"the body holds {what}")


def _bc(e: Expr, lanes: int) -> Expr:
    return e if lanes_of(e) == lanes else Broadcast(e, lanes)


def _vec(e: Expr, v: str, ramp: Ramp, memo: dict) -> Expr:
    """``e`` with the lane variable ``v`` as ``ramp``; ``memo``: the expressions already
    done with this lane variable and ramp (``vectorize``)."""
    if isinstance(e, (Var, Const)):
        return ramp if isinstance(e, Var) and e.name == v else e
    out = memo.get(e)
    if out is None:
        out = memo[e] = _vec_new(e, v, ramp, memo)
    return out


def _vec_new(e: Expr, v: str, ramp: Ramp, memo: dict) -> Expr:
    L = ramp.lanes
    if isinstance(e, Var):
        return ramp if e.name == v else e
    if isinstance(e, Const):
        return e
    if isinstance(e, BinOp):
        a, b = _vec(e.a, v, ramp, memo), _vec(e.b, v, ramp, memo)
        la, lb = lanes_of(a), lanes_of(b)
        if la == lb == 1:
            return BinOp(e.op, a, b)
        if e.dtype in ("int32", "int64"):
            if e.op in VALUE_OPS and not isinstance(a, Ramp) and not isinstance(b, Ramp):
                # integer values, not indices (an int32 sum plus its bias): lane by lane
                return BinOp(e.op, _bc(a, L), _bc(b, L))
            return _ramp_arith(e.op, a, b)
        if e.op in ("and", "or"):
            raise NotVectorizable(f"`{e}` combines lane-dependent conditions")
        return BinOp(e.op, _bc(a, L), _bc(b, L))
    if isinstance(e, Cmp):
        a, b = _vec(e.a, v, ramp, memo), _vec(e.b, v, ramp, memo)
        if lanes_of(a) == lanes_of(b) == 1:
            return Cmp(e.op, a, b)
        return Cmp(e.op, _bc(a, L), _bc(b, L))
    if isinstance(e, Load):
        idx = _vec(e.indices[0], v, ramp, memo)
        if isinstance(idx, Ramp) and idx.stride == 0:
            return Broadcast(Load(e.buffer, (idx.base,)), L)
        return Load(e.buffer, (idx,))
    if isinstance(e, Select):
        c = _vec(e.cond, v, ramp, memo)
        t, o = _vec(e.then, v, ramp, memo), _vec(e.other, v, ramp, memo)
        if lanes_of(c) == lanes_of(t) == lanes_of(o) == 1:
            return Select(c, t, o)
        if lanes_of(c) > 1 and any(isinstance(x, Load) for x in (*walk(e.then), *walk(e.other))):
            loads = sorted({x.buffer.name for x in (*walk(e.then), *walk(e.other))
                            if isinstance(x, Load)})
            raise NotVectorizable(f"a select whose branches load memory ({', '.join(loads)}) "
                                  "depends on the lane: both branches would be loaded for "
                                  "every lane, maybe out of bounds")
        operand = getattr(c, "a", c)   # what the condition compares
        if lanes_of(c) > 1 and operand.dtype not in BUFFER_DTYPES:
            raise NotVectorizable(f"a select on a {operand.dtype} condition depends on the lane")
        return Select(c, _bc(t, L), _bc(o, L))
    if isinstance(e, Not):
        if v in free_vars(e):
            raise NotVectorizable(f"a negated condition `{e}` depends on the lane")
        return e
    if isinstance(e, Call):
        return Call(e.func, _vec(e.arg, v, ramp, memo))
    if isinstance(e, Cast):
        return Cast(e.dtype, _vec(e.value, v, ramp, memo))
    if v in free_vars(e):
        raise NotVectorizable(f"`{e}` ({type(e).__name__}) depends on the lane")
    return e


VALUE_OPS = ("+", "-", "*", "min", "max")   # integer ops C's vector types do lane by lane


def _ramp_arith(op: str, a: Expr, b: Expr) -> Expr:
    """Integer index arithmetic stays affine (a Ramp) or the loop stays scalar."""
    if op == "+" or op == "-":
        sign = 1 if op == "+" else -1
        if isinstance(a, Ramp) and lanes_of(b) == 1:
            return Ramp(simplify(BinOp(op, a.base, b)), a.stride, a.lanes)
        if isinstance(b, Ramp) and lanes_of(a) == 1:
            return Ramp(simplify(BinOp(op, a, b.base)), sign * b.stride, b.lanes)
        if isinstance(a, Ramp) and isinstance(b, Ramp):
            return Ramp(simplify(BinOp(op, a.base, b.base)), a.stride + sign * b.stride, a.lanes)
    if op == "*":
        if isinstance(a, Ramp) and isinstance(b, Const):
            return Ramp(simplify(BinOp("*", a.base, b)), a.stride * int(b.value), a.lanes)
        if isinstance(b, Ramp) and isinstance(a, Const):
            return Ramp(simplify(BinOp("*", a, b.base)), b.stride * int(a.value), b.lanes)
    raise NotVectorizable(f"an index is not affine in the lane ({op} of {a} and {b})")

