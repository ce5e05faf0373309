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
    substitute,
    walk,
)
from tvmlite.ir.simplify import linear, simplify
from tvmlite.ir.stmt import For, IfThenElse, Seq, Stmt, Store, map_exprs, map_stmt, seq, walk_stmts

MAX_UNROLLED_CHUNKS = 8


class NotVectorizable(TvmliteError):
    """Internal: this loop body stays scalar; the message says why."""


@dataclass(frozen=True)
class VectorDecision:
    """What the pass did with one ``vectorize`` loop. ``lanes`` is 0 when the whole loop
    stayed scalar (``reason`` says why); ``scalar_tail`` elements after the last chunk run
    as scalars; ``guarded`` chunks fall back to scalar lanes where an imperfect split's
    guard fails; ``gathers``/``scatters`` are (buffer, stride) vector accesses that are not
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

    @property
    def fell_back(self) -> bool:
        """Some lane of this loop runs as scalar code (or as a lane-by-lane access)."""
        return bool(self.reason or self.scalar_tail or self.guarded or self.gathers
                    or self.scatters)


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
    try:
        if chunks <= MAX_UNROLLED_CHUNKS:
            body = seq(*(_chunk(loop.body, v, Const(c * L), L, memo) for c in range(chunks)))
        else:
            vo = Var(f"{v.name}_v")
            body = For(vo, chunks, "serial",
                       _chunk(loop.body, v, BinOp("*", vo, Const(L)), L, memo))
    except NotVectorizable as why:
        return stays_scalar(str(why))
    decision = VectorDecision(v.name, stages, E, L, chunks, tail, "",
                              *_vector_accesses(body, v.name))
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


def _chunk(body: Stmt, v: Var, base: Expr, L: int, memo: dict) -> Stmt:
    """One chunk of L lanes starting at ``base``; guards on ``v`` checked at both ends."""
    ramp = Ramp(simplify(base), 1, L)
    lane_memo = memo.setdefault((v.name, ramp), {})
    if isinstance(body, IfThenElse) and body.other is None and v.name in free_vars(body.cond):
        if not _monotone(body.cond, v.name):
            raise NotVectorizable(f"the guard `{body.cond}` is not an affine comparison in "
                                  f"the lane {v.name}")
        first = substitute(body.cond, {v.name: base})
        last = substitute(body.cond, {v.name: BinOp("+", base, Const(L - 1))})
        lanes = Var(f"{v.name}_l")
        scalar = For(lanes, L, "serial", map_exprs(body, lambda e: substitute(
            e, {v.name: BinOp("+", base, lanes)})))
        vec = _vec_stmt(body.then, v.name, ramp, lane_memo)
        return IfThenElse(simplify(BinOp("and", first, last)), vec, scalar)
    return _vec_stmt(body, v.name, ramp, lane_memo)


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

