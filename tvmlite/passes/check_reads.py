"""Reads inside their tensors, divisors not zero: checked on the compute definitions,
before any loop is built.

A stage's compute body is evaluated at every point of its axes' box (whatever the
schedule: splits, tiles and compute_at change the order and the region, never the
points, and imperfect splits are guarded). So ``te.compute((8,), lambda i: A[i + 4])``
on an 8-element ``A`` reads ``A[8..11]`` however it is scheduled: an error, named here.

Guards are understood: a read in the chosen branch of ``if_then_else`` (or under a
reduction's ``where``, or to the right of ``and``/``or``) is only made where the
condition holds, as padding computes rely on. The check is conservative: it raises only
with a witness, a point of the box where every guard on the path is provably true and
the index provably outside the tensor. Guards first narrow the variables' ranges
(interval propagation over linear conditions); an index whose interval then lies inside
the tensor is accepted at once; otherwise the corners of the narrowed box are tried as
witnesses (where a linear index takes its extremes). A guard that reads a tensor is never
provably true, so a data-dependent guard never raises.

A divisor that simplifies to the constant 0 (``//`` or ``%``) is an error too: C leaves
integer division by zero undefined (GCC then emits a trap, the process dies of SIGILL).
A divisor that is zero only at run time is defined by the generated C (see codegen_c).
"""
from __future__ import annotations

import itertools
import math

from tvmlite.errors import TvmliteError
from tvmlite.ir.expr import (
    BinOp,
    Cmp,
    Const,
    Expr,
    Not,
    Reduce,
    Select,
    TensorRead,
    Var,
    children,
    substitute,
    walk,
)
from tvmlite.ir.simplify import INF, Ranges, bound, linear, simplify
from tvmlite.te.tensor import ZeroDivisorError

MAX_CORNERS = 1024            # witnesses tried per read (2**10 variables)
_FLIP = {"<": ">=", "<=": ">", ">": "<=", ">=": "<", "==": "!=", "!=": "=="}
_CHECKED = "_tvmlite_reads_checked"


class OutOfBoundsError(TvmliteError, IndexError, ValueError):
    """A compute reads a tensor outside its shape at some point no guard excludes."""


def check_reads(state) -> None:
    """Raise OutOfBoundsError / ZeroDivisorError (both ValueErrors) for the first bad
    read or divisor of any stage. Each op is checked once (the result depends on the op alone)."""
    for st in state.stages:
        op = st.op
        if op.__dict__.get(_CHECKED):
            continue
        body = op.body
        axes = tuple(op.axis) + (tuple(body.axes) if isinstance(body, Reduce) else ())
        # a loop over a symbolic size (te.var) has no known range: reads indexed by it are
        # not checked here (every size from 1 up is valid, so no point is out of bounds
        # for all of them); the kernel's own guards keep them inside
        unknown = frozenset(iv.name for iv in axes
                            if not (isinstance(iv.min, int) and isinstance(iv.extent, int)))
        ranges: Ranges = {iv.name: (iv.min, iv.min + iv.extent - 1) for iv in axes
                          if iv.name not in unknown}
        if isinstance(body, Reduce):
            guards = [] if body.where is None else [body.where]
            if body.where is not None:
                _visit(op.name, body.where, ranges, [], unknown)
            _visit(op.name, body.source, ranges, guards, unknown)
        else:
            _visit(op.name, body, ranges, [], unknown)
        op.__dict__[_CHECKED] = True


def _visit(stage: str, e: Expr, ranges: Ranges, guards: list,
           unknown: frozenset = frozenset()) -> None:
    if isinstance(e, Select):
        _visit(stage, e.cond, ranges, guards, unknown)
        _visit(stage, e.then, ranges, guards + [e.cond], unknown)
        _visit(stage, e.other, ranges, guards + [Not(e.cond)], unknown)
        return
    if isinstance(e, BinOp) and e.op in ("and", "or"):  # C's && and || short-circuit
        _visit(stage, e.a, ranges, guards, unknown)
        _visit(stage, e.b, ranges, guards + [e.a if e.op == "and" else Not(e.a)], unknown)
        return
    if isinstance(e, BinOp) and e.op in ("//", "%"):
        d = simplify(e.b, ranges)
        if isinstance(d, Const) and d.value == 0:
            what = "division" if e.op == "//" else "modulo"
            why = "" if isinstance(e.b, Const) else f" (the divisor {e.b} is always 0)"
            raise ZeroDivisorError(f"compute {stage}: integer {what} by zero in {e}{why}; "
                                    f"C leaves it undefined, so divide by a non-zero value")
    if isinstance(e, TensorRead) and not (set(_vars(e)) & unknown):
        _check_read(stage, e, ranges, guards)
    for c in children(e):
        _visit(stage, c, ranges, guards, unknown)


def _check_read(stage: str, read: TensorRead, ranges: Ranges, guards: list) -> None:
    shape = read.tensor.shape
    narrowed = narrow(ranges, guards)
    if narrowed is None:          # the guards are never all true: the read never happens
        return
    for dim, (idx, extent) in enumerate(zip(read.indices, shape)):
        if not isinstance(extent, int):
            continue
        lo, hi = bound(simplify(idx, narrowed), narrowed)
        if lo >= 0 and hi <= extent - 1:
            continue
        point = _witness(idx, extent, narrowed, guards)
        if point is None:
            continue
        at, value = point
        where = ", ".join(f"{v} in [{int(narrowed[v][0])}, {int(narrowed[v][1])}]"
                          for v in sorted(_vars(idx)) if v in narrowed)
        shown = "?" if lo == -INF else int(lo), "?" if hi == INF else int(hi)
        names = ", ".join(f"{k}={v}" for k, v in sorted(at.items()))
        guarded = " where the guards hold" if guards else ""
        raise OutOfBoundsError(
            f"compute {stage} reads {read.tensor.name}[{', '.join(map(str, read.indices))}] "
            f"outside the tensor: index {dim} ({idx}) ranges over [{shown[0]}, {shown[1]}]"
            f"{' for ' + where if where else ''}{guarded}, but {read.tensor.name} has "
            f"{extent} elements in dimension {dim} (allowed [0, {extent - 1}]); e.g. at "
            f"{names or 'every point'} it reads index {value}. Fix the index, shrink the "
            f"compute's shape, or guard the read with te.if_then_else (as padding does)")


def narrow(ranges: Ranges, guards: list) -> Ranges | None:
    """The box ``ranges`` narrowed by every linear conjunct of the guards (None: empty)."""
    facts = [c for g in guards for c in _conjuncts(g)]
    if not facts:
        return ranges
    r = dict(ranges)
    for _ in range(3):  # propagate a few rounds: x <= y and y < 4 tightens x too
        for op, terms, c in facts:
            for var, k in terms.items():
                rest_lo = rest_hi = float(c)
                for other, k2 in terms.items():
                    if other is var:
                        continue
                    lo, hi = r.get(other.name, (-INF, INF))
                    a, b = k2 * lo, k2 * hi
                    rest_lo, rest_hi = rest_lo + min(a, b), rest_hi + max(a, b)
                r[var.name] = _tighten(r.get(var.name, (-INF, INF)), op, k, rest_lo, rest_hi)
                if r[var.name][0] > r[var.name][1]:
                    return None
    return r


def _conjuncts(g: Expr) -> list:
    """Linear facts ``sum(k * var) + c  op  0`` implied by guard ``g``."""
    if isinstance(g, BinOp) and g.op == "and":
        return _conjuncts(g.a) + _conjuncts(g.b)
    if isinstance(g, Not) and isinstance(g.a, BinOp) and g.a.op == "or":
        return _conjuncts(Not(g.a.a)) + _conjuncts(Not(g.a.b))
    if isinstance(g, Not) and isinstance(g.a, Cmp):
        g = Cmp(_FLIP[g.a.op], g.a.a, g.a.b)
    if not isinstance(g, Cmp) or g.op == "!=" or "float" in g.a.dtype or "float" in g.b.dtype:
        return []
    terms, c = linear(BinOp("-", g.a, g.b))
    if not terms or not all(isinstance(v, Var) for v in terms):
        return []
    if g.op == "==":
        return [("<=", terms, c), (">=", terms, c)]
    return [(g.op, terms, c)]


def _tighten(r: tuple, op: str, k: int, rest_lo: float, rest_hi: float) -> tuple:
    """Narrow x's range by ``k*x + rest op 0`` for some rest in [rest_lo, rest_hi]."""
    lo, hi = r
    if op in ("<", "<="):        # k*x <= -rest - (1 if <) <= -rest_lo - s
        bound_ = -rest_lo - (1 if op == "<" else 0)
        if bound_ != INF and bound_ != -INF:
            if k > 0:
                hi = min(hi, math.floor(bound_ / k))
            else:
                lo = max(lo, math.ceil(bound_ / k))
    else:                        # k*x >= -rest + (1 if >) >= -rest_hi + s
        bound_ = -rest_hi + (1 if op == ">" else 0)
        if bound_ != INF and bound_ != -INF:
            if k > 0:
                lo = max(lo, math.ceil(bound_ / k))
            else:
                hi = min(hi, math.floor(bound_ / k))
    return lo, hi


def _vars(e: Expr) -> dict:
    """name -> dtype of every variable in ``e``."""
    return {n.name: n.dtype for n in walk(e) if isinstance(n, Var)}


def _witness(idx: Expr, extent: int, ranges: Ranges, guards: list) -> tuple | None:
    """A corner of the box where every guard is provably true and ``idx`` is outside
    ``[0, extent)``, as ({var: value}, index value); None if no corner is one."""
    dtypes = _vars(idx)
    for g in guards:
        dtypes.update(_vars(g))
    names = sorted(dtypes)
    if any(n not in ranges or INF in ranges[n] or -INF in ranges[n] for n in names):
        return None
    corners = [sorted({int(ranges[n][0]), int(ranges[n][1])}) for n in names]
    for values in itertools.islice(itertools.product(*corners), MAX_CORNERS):
        env = {n: Const(v, dtypes[n]) for n, v in zip(names, values)}
        value = simplify(substitute(idx, env))
        if not isinstance(value, Const) or 0 <= value.value < extent:
            continue
        if all(_true(substitute(g, env)) for g in guards):
            return dict(zip(names, values)), int(value.value)
    return None


def _true(cond: Expr) -> bool:
    c = simplify(cond)
    return isinstance(c, Const) and bool(c.value)
