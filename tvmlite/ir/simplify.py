"""Index arithmetic: linear forms, interval bounds and the simplifier.

Lowering produces index expressions such as ``(io*32 + ii) // 32``; the simplifier
turns them back into ``io`` whenever the bounds of the loop variables allow it, which
is what makes a perfect split generate no division, no modulo and no dead guard.

Rules (``d > 0`` a constant, ``x = q*d + r`` with every term of ``q`` a multiple of d):
``x // d == q + r // d`` and ``x % d == r % d``; and ``r // d == m`` when the bounds
of ``r`` lie in one block ``[m*d, m*d + d)``. Sums put fused loops back together:
``(x // (a*b)) * b + (x // a) % b == x // a`` and ``(x // b) * b + x % b == x`` (exact
under floor division), so an index through a loop fused from (h, w, c) and split back
into its parts, ``f // 3136 * 100352 + f // 112 % 28 * 3584 + f % 112 * 32``, becomes
``f * 32``.
"""
from __future__ import annotations

import math
from typing import Dict, Tuple

from tvmlite.ir.dtypes import INT_DTYPES, value_range
from tvmlite.ir.expr import BinOp, Cast, Cmp, Const, Expr, Not, Select, Var, is_float, rebuild

Range = Tuple[float, float]  # inclusive (lo, hi); +-inf when unknown
Ranges = Dict[str, Range]
INF = math.inf


# -- linear forms -----------------------------------------------------------------

def linear(e: Expr) -> tuple[dict, int]:
    """``e`` as ``({atom: coeff}, const)``; atoms are Vars or non-linear subterms.

    Nodes are immutable, so each remembers its form (the simplifier asks for the same
    subterms again and again); callers get a fresh dict they may change."""
    if isinstance(e, Const):
        return {}, int(e.value)
    hit = e.__dict__.get("_linear")
    if hit is None:
        hit = _linear(e)
        object.__setattr__(e, "_linear", hit)
    return dict(hit[0]), hit[1]


def _linear(e: Expr) -> tuple[dict, int]:
    if isinstance(e, BinOp) and e.op in ("+", "-"):
        ta, ca = linear(e.a)
        tb, cb = linear(e.b)
        sign = 1 if e.op == "+" else -1
        out = dict(ta)
        for k, v in tb.items():
            out[k] = out.get(k, 0) + sign * v
        return {k: v for k, v in out.items() if v != 0}, ca + sign * cb
    if isinstance(e, BinOp) and e.op == "*":
        if isinstance(e.b, Const):
            t, c = linear(e.a)
            m = int(e.b.value)
            return ({k: v * m for k, v in t.items()} if m else {}), c * m
        if isinstance(e.a, Const):
            t, c = linear(e.b)
            m = int(e.a.value)
            return ({k: v * m for k, v in t.items()} if m else {}), c * m
    return {e: 1}, 0


def from_linear(terms: dict, c: int, dtype: str = "int32") -> Expr:
    """Rebuild ``sum(coeff * atom) + c`` with positive terms first, for readable C."""
    out: Expr | None = None
    pos = [(a, k) for a, k in terms.items() if k > 0]
    neg = [(a, -k) for a, k in terms.items() if k < 0]
    for atom, k in pos:
        term = atom if k == 1 else BinOp("*", atom, Const(k, dtype))
        out = term if out is None else BinOp("+", out, term)
    for atom, k in neg:
        term = atom if k == 1 else BinOp("*", atom, Const(k, dtype))
        out = BinOp("-", Const(0, dtype) if out is None else out, term)
    if out is None:
        return Const(c, dtype)
    if c > 0:
        out = BinOp("+", out, Const(c, dtype))
    elif c < 0:
        out = BinOp("-", out, Const(-c, dtype))
    return out


# -- bounds -----------------------------------------------------------------------

def bound(e: Expr, R: Ranges) -> Range:
    """Inclusive interval of an integer expression given variable ranges."""
    if isinstance(e, Const):
        return (e.value, e.value)
    if isinstance(e, Var):
        return R.get(e.name, (-INF, INF))
    if isinstance(e, BinOp):
        op = e.op
        if op in ("+", "-", "*", "min", "max"):
            a, b = bound(e.a, R), bound(e.b, R)
            if op == "+":
                return (a[0] + b[0], a[1] + b[1])
            if op == "-":
                return (a[0] - b[1], a[1] - b[0])
            if op == "min":
                return (min(a[0], b[0]), min(a[1], b[1]))
            if op == "max":
                return (max(a[0], b[0]), max(a[1], b[1]))
            prods = [_mul(x, y) for x in a for y in b]
            return (min(prods), max(prods))
        if op in ("//", "%") and isinstance(e.b, Const) and e.b.value > 0:
            d = e.b.value
            lo, hi = bound(e.a, R)
            if op == "//":
                return (_fdiv(lo, d), _fdiv(hi, d))
            if lo != -INF and hi != INF and lo // d == hi // d:
                return (lo % d, hi % d)
            return (0, d - 1)
        if op in ("//", "%"):
            return _symbolic_divmod_bound(op, bound(e.a, R), bound(e.b, R))
    if isinstance(e, Select):
        a, b = bound(e.then, R), bound(e.other, R)
        return (min(a[0], b[0]), max(a[1], b[1]))
    if isinstance(e, Cast):
        return bound(e.value, R)
    if isinstance(e, (Cmp, Not)) or (isinstance(e, BinOp) and e.op in ("and", "or")):
        return (0, 1)
    return (-INF, INF)


def _symbolic_divmod_bound(op: str, a: Range, b: Range) -> Range:
    """Floor division and modulo by a divisor known only by its range (a tile count of a
    symbolic size, ``(L + 7) // 8``): where the divisor is at least 1, ``a % b`` is in
    ``[0, b - 1]`` (and within ``a``'s own range when ``a >= 0``), and ``a // b`` is
    monotone in each operand, so its extremes are at the ranges' corners. Without these,
    a symbolic kernel keeps guards such as ``i % ((L + 7) // 8) * 8 >= 0`` that hold
    always, and its C grows by the branches it cannot drop."""
    if b[0] < 1:
        return (-INF, INF)
    if op == "%":
        hi = b[1] - 1
        return (0, min(hi, a[1]) if a[0] >= 0 else hi)
    corners = [_fdiv_any(x, y) for x in a for y in b]
    return (min(corners), max(corners))


def _fdiv_any(x: float, y: float) -> float:
    """``x // y`` for ``y >= 1`` where either may be infinite."""
    if x in (INF, -INF):
        return x
    if y == INF:
        return 0 if x >= 0 else -1
    return x // y


def _mul(x: float, y: float) -> float:
    if x == 0 or y == 0:
        return 0
    return x * y


def _fdiv(x: float, d: int) -> float:
    return x if x in (INF, -INF) else x // d


# -- the simplifier ---------------------------------------------------------------

def simplify(e: Expr, R: Ranges | None = None) -> Expr:
    """Constant folding, canonical linear indices and bound-based div/mod/compare rules."""
    return _simp(e, R or {})


def _simp(e: Expr, R: Ranges) -> Expr:
    if isinstance(e, (Const, Var)):
        return e
    if isinstance(e, BinOp):
        return _simp_binop(e.op, _simp(e.a, R), _simp(e.b, R), R)
    if isinstance(e, Cmp):
        return _simp_cmp(e.op, _simp(e.a, R), _simp(e.b, R), R)
    if isinstance(e, Not):
        a = _simp(e.a, R)
        return Const(not a.value, "bool") if isinstance(a, Const) else Not(a)
    if isinstance(e, Select):
        c = _simp(e.cond, R)
        if isinstance(c, Const):
            return _simp(e.then if c.value else e.other, R)
        t, o = _simp(e.then, R), _simp(e.other, R)
        return Select(c, t, o)
    if isinstance(e, Cast):
        v = _simp(e.value, R)
        if isinstance(v, Cast) and (_round_trip(e.dtype, v, R)
                                    or _whole_float_round_trip(e.dtype, v, R)):
            v = v.value
        if v.dtype == e.dtype:
            return v
        if isinstance(v, Const):
            return Const(v.value, e.dtype)
        return Cast(e.dtype, v)
    return rebuild(e, lambda x: _simp(x, R))


def _round_trip(dtype: str, v: Cast, R: Ranges) -> bool:
    """``dtype(v)`` with ``v = narrow(w)`` is ``dtype(w)``: integers all, ``narrow``'s
    values all in ``dtype``, and ``w`` in ``narrow``'s range, so neither cast changes the
    value. A quantized model's QuantizeLinear -> DequantizeLinear pair, fused into one
    epilogue, stores nothing between the two: its uint8 in the middle then costs two
    packs and a widening per vector, and the zero point added and taken off again."""
    if not (dtype in INT_DTYPES and v.dtype in INT_DTYPES and v.value.dtype in INT_DTYPES):
        return False
    lo, hi = value_range(v.dtype)
    outer, inner = value_range(dtype), bound(v.value, R)
    return outer[0] <= lo and hi <= outer[1] and lo <= inner[0] and inner[1] <= hi


ROUNDING_MAGIC = 12582912.0   # 1.5 * 2**23: (g + M) - M rounds g (quantized.round_half_even)


def _whole_float_round_trip(dtype: str, v: Cast, R: Ranges) -> bool:
    """``float32(int32(f))`` is ``f`` for ``f = (g + M) - M`` with ``|g| <= 2**22``: such
    an ``f`` is a whole number (IEEE rounding put ``g + M`` where float32's spacing is 1)
    that int32 and float32 both hold exactly. A requantize followed by a dequantize
    converts its rounded value to int32 and straight back."""
    if not (dtype == "float32" and v.dtype == "int32"):
        return False
    f = v.value
    if not (isinstance(f, BinOp) and f.op == "-" and f.dtype == "float32"
            and isinstance(f.b, Const) and f.b.value == ROUNDING_MAGIC
            and isinstance(f.a, BinOp) and f.a.op == "+" and isinstance(f.a.b, Const)
            and f.a.b.value == ROUNDING_MAGIC):
        return False
    lo, hi = bound(f.a.a, R)
    return -2.0 ** 22 <= lo and hi <= 2.0 ** 22


def _fold(op: str, x, y):
    if op == "+":
        return x + y
    if op == "-":
        return x - y
    if op == "*":
        return x * y
    if op == "/":
        return x / y if y != 0 else None
    if op == "//":
        return x // y if y != 0 else None
    if op == "%":
        return x % y if y != 0 else None
    if op == "min":
        return min(x, y)
    if op == "max":
        return max(x, y)
    if op == "and":
        return bool(x and y)
    if op == "or":
        return bool(x or y)
    return None


def _simp_binop(op: str, a: Expr, b: Expr, R: Ranges) -> Expr:
    dtype = "bool" if op in ("and", "or") else (a.dtype if a.dtype == b.dtype else b.dtype)
    if isinstance(a, Const) and isinstance(b, Const):
        v = _fold(op, a.value, b.value)
        if v is not None:
            return Const(v, dtype)
    if op == "and":
        if isinstance(a, Const):
            return b if a.value else a
        if isinstance(b, Const):
            return a if b.value else b
        return BinOp(op, a, b)
    if op == "or":
        if isinstance(a, Const):
            return a if a.value else b
        if isinstance(b, Const):
            return b if b.value else a
        return BinOp(op, a, b)
    if is_float(dtype):
        if op == "*" and isinstance(b, Const) and b.value == 1.0:
            return a
        if op == "*" and isinstance(a, Const) and a.value == 1.0:
            return b
        if op in ("+", "-") and isinstance(b, Const) and b.value == 0.0:
            return a
        return BinOp(op, a, b)
    if op in ("+", "-", "*"):
        terms, c = linear(BinOp(op, a, b))
        if op != "*":
            terms, c = _merge_divmod(terms, c)
        return from_linear(terms, c, dtype)
    if op in ("//", "%") and isinstance(b, Const) and b.value > 0:
        return _simp_divmod(op, a, b.value, dtype, R)
    if op in ("min", "max"):
        ba, bb = bound(a, R), bound(b, R)
        if op == "min":
            if ba[1] <= bb[0]:
                return a
            if bb[1] <= ba[0]:
                return b
        else:
            if ba[0] >= bb[1]:
                return a
            if bb[0] >= ba[1]:
                return b
    return BinOp(op, a, b)


def _divmod_parts(e: Expr, op: str) -> tuple[Expr, int] | None:
    """(x, d) when ``e`` is ``x // d`` or ``x % d`` (``op``) with a constant d > 1."""
    if isinstance(e, BinOp) and e.op == op and isinstance(e.b, Const) and e.b.value > 1:
        return e.a, int(e.b.value)
    return None


def _merge_divmod(terms: dict, c: int) -> tuple[dict, int]:
    """Replace ``k*b * (x // (a*b)) + k * ((x // a) % b)`` by ``k * (x // a)`` (a = 1:
    by ``k * x``) until no pair is left; see the module docstring."""
    if not any(isinstance(t, BinOp) and t.op == "%" for t in terms):
        return terms, c
    changed = True
    while changed:
        changed = False
        for atom, k in list(terms.items()):
            mod = _divmod_parts(atom, "%")
            if mod is None or terms.get(atom) != k:
                continue
            inner, b = mod                        # atom = inner % b, inner = x // a or x
            div = _divmod_parts(inner, "//")
            x, a = div if div is not None else (inner, 1)
            high = BinOp("//", x, Const(a * b, inner.dtype))
            if terms.get(high) != k * b:
                continue
            del terms[atom], terms[high]
            if div is not None:
                terms[inner] = terms.get(inner, 0) + k
            else:                                 # the whole of x comes back: add its form
                xt, xc = linear(x)
                for t, v in xt.items():
                    terms[t] = terms.get(t, 0) + k * v
                c += k * xc
            terms = {t: v for t, v in terms.items() if v != 0}
            changed = True
            break
    return terms, c


def _simp_divmod(op: str, a: Expr, d: int, dtype: str, R: Ranges) -> Expr:
    if d == 1:
        return a if op == "//" else Const(0, dtype)
    terms, c = linear(a)
    q = {k: v // d for k, v in terms.items() if v % d == 0}
    r_terms = {k: v for k, v in terms.items() if v % d != 0}
    r = from_linear(r_terms, c, dtype)
    lo, hi = bound(r, R)
    same_block = lo != -INF and hi != INF and lo // d == hi // d
    if op == "//":
        if same_block:
            return from_linear(q, int(lo // d), dtype)
        if not q:
            return BinOp("//", r, Const(d, dtype))
        qe = from_linear(q, 0, dtype)
        return BinOp("+", qe, BinOp("//", r, Const(d, dtype)))
    if same_block:
        m = int(lo // d)
        return r if m == 0 else from_linear(r_terms, c - m * d, dtype)
    return BinOp("%", r, Const(d, dtype))


def _simp_cmp(op: str, a: Expr, b: Expr, R: Ranges) -> Expr:
    if isinstance(a, Const) and isinstance(b, Const):
        x, y = a.value, b.value
        return Const({"==": x == y, "!=": x != y, "<": x < y, "<=": x <= y,
                      ">": x > y, ">=": x >= y}[op], "bool")
    if is_float(a.dtype) or is_float(b.dtype):
        return Cmp(op, a, b)
    terms, c = linear(BinOp("-", a, b))
    lo, hi = bound(from_linear(terms, c, a.dtype), R) if terms else (c, c)
    verdict = None
    if op == "<":
        verdict = True if hi < 0 else False if lo >= 0 else None
    elif op == "<=":
        verdict = True if hi <= 0 else False if lo > 0 else None
    elif op == ">":
        verdict = True if lo > 0 else False if hi <= 0 else None
    elif op == ">=":
        verdict = True if lo >= 0 else False if hi < 0 else None
    elif op == "==":
        verdict = True if lo == hi == 0 else False if lo > 0 or hi < 0 else None
    elif op == "!=":
        verdict = False if lo == hi == 0 else True if lo > 0 or hi < 0 else None
    if verdict is not None:
        return Const(verdict, "bool")
    return Cmp(op, a, b)


def const_value(e: Expr) -> int | None:
    """The integer value of ``e`` if it is a constant after simplification."""
    s = simplify(e)
    return int(s.value) if isinstance(s, Const) else None
