"""float16 and bfloat16 as storage types: computed in float32, rounded to nearest even on
every store, in C written here (the bit operations), not through a compiler type the
target may lack (``_Float16`` and ``__bf16`` need AVX512-FP16 or a recent GCC to be more
than a library call, and ``__bf16`` no arithmetic at all).

``legalize`` rewrites a lowered body so that a storage float appears only as raw bits:
a load of such a buffer is converted to float32 where it is read (``float32(Load)``), a
value stored into one is converted from float32 where it is written (``bfloat16(v)``),
a cast to one from another dtype is a round trip (``float32(bfloat16(x))``: the value
rounded to the type, as numpy's ``astype`` rounds it), and a constant of one is its
rounded float32 value. So an expression of a storage float is rounded where it is stored
or converted, not after each operation (a cast to its own dtype is a no-op, which
lowering drops; a stored value already of the type, a copy's load or a padding's select
of one, is stored as its bits). Every other node then computes in float32, so the C
codegen prints a storage float only as ``uint16_t`` bits and the four conversions below.

``conversion_lines`` writes those conversions (scalar, or on vectors of any lane count with
GCC's vector extensions and bit masks): to float32 is exact (a shift for bfloat16; for
float16 a rebias of the exponent, subnormals through one float subtraction); from float32
rounds to nearest even, NaN stays a quiet NaN, and float16 overflows to infinity from
65520 up, as IEEE rounding does (after Giesen's ``float_to_half_fast3_rtne``).
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from tvmlite.ir.dtypes import C_HELPER, STORAGE_FLOATS, numpy_dtype
from tvmlite.ir.expr import Cast, Const, Expr, Load, Select, rebuild
from tvmlite.ir.stmt import Allocate, For, IfThenElse, Seq, Stmt, Store

__all__ = ["legalize", "round_to", "conversion_lines", "conversion_name"]


def round_to(value: float, dtype: str) -> float:
    """``value`` rounded to the nearest ``dtype`` value (a storage float), as a float."""
    return float(np.asarray(value, np.float32).astype(numpy_dtype(dtype)).astype(np.float64))


def _expr(e: Expr) -> Expr:
    """``e`` with storage floats computed in float32 (module doc); its dtype is float32
    where ``e``'s was a storage float."""
    if isinstance(e, Const) and e.dtype in STORAGE_FLOATS:
        return Const(round_to(e.value, e.dtype), "float32")
    if isinstance(e, Load):
        e = rebuild(e, _expr)
        return Cast("float32", e) if e.dtype in STORAGE_FLOATS else e
    if isinstance(e, Cast):
        v = _expr(e.value)
        if e.dtype in STORAGE_FLOATS:           # round to the type, then compute on
            return Cast("float32", Cast(e.dtype, _to_f32(v)))
        if v.dtype == e.dtype:
            return v
        return Cast(e.dtype, v)
    return rebuild(e, _expr)


def _to_f32(v: Expr) -> Expr:
    return v if v.dtype == "float32" else Cast("float32", v)


def _store_value(dtype: str, value: Expr) -> Expr:
    """The value written into a buffer of ``dtype``: converted from float32 once, at the
    store, for a storage float (``_as_bits``)."""
    v = _expr(value)
    return v if dtype not in STORAGE_FLOATS else _as_bits(v, dtype)


def _as_bits(v: Expr, dtype: str) -> Expr:
    """The float32 expression ``v`` rounded to ``dtype`` (a storage float), converting only
    what needs it: a value that is already ``dtype`` widened (a load of a ``dtype``
    buffer, an inner rounding to it) is stored as its bits, and a select converts its two
    arms, so a copy or a padding of bf16 data moves bits (the padding of a bf16 depthwise
    conv converted each element to float32 and rounded it back)."""
    if isinstance(v, Cast) and v.dtype == "float32" and v.value.dtype == dtype:
        return v.value
    if isinstance(v, Select):
        return Select(v.cond, _as_bits(v.then, dtype), _as_bits(v.other, dtype))
    return Cast(dtype, _to_f32(v))


def legalize(s: Stmt) -> Stmt:
    """The statement tree ``s`` with storage floats as bits (module doc)."""
    if isinstance(s, Store):
        return Store(s.buffer, tuple(_expr(i) for i in s.indices),
                     _store_value(s.buffer.dtype, s.value))
    if isinstance(s, Seq):
        return Seq(tuple(legalize(x) for x in s.stmts))
    if isinstance(s, For):
        return For(s.var, s.extent, s.kind, legalize(s.body), s.unroll_limit)
    if isinstance(s, IfThenElse):
        return IfThenElse(_expr(s.cond), legalize(s.then),
                          None if s.other is None else legalize(s.other))
    if isinstance(s, Allocate):
        return Allocate(s.buffer, legalize(s.body))
    return s


def conversion_name(src: str, dst: str, lanes: int) -> str:
    """The C helper converting ``src`` to ``dst`` (one of them float32, the other a
    storage float) on ``lanes`` lanes."""
    short = {"float32": "f32", "float16": "f16", "bfloat16": "bf16"}
    return f"tvmlite_cvt_{short[src]}_{short[dst]}" + (f"x{lanes}" if lanes > 1 else "")


_SCALAR = {
    ("bfloat16", "float32"):
        "{ union { uint32_t u; float f; } v; v.u = (uint32_t)h << 16; return v.f; }",
    ("float32", "bfloat16"):
        "{ union { float f; uint32_t u; } v; v.f = x; if (x != x) return (uint16_t)"
        "((v.u >> 16) | 0x40u); return (uint16_t)((v.u + 0x7FFFu + ((v.u >> 16) & 1u)) >> 16); }",
    ("float16", "float32"):
        "{ union { uint32_t u; float f; } o, m; m.u = 113u << 23; "
        "o.u = (uint32_t)(h & 0x7FFFu) << 13; uint32_t e = o.u & (0x7C00u << 13); "
        "o.u += (127u - 15u) << 23; "
        "if (e == (0x7C00u << 13)) o.u += (128u - 16u) << 23; "
        "else if (e == 0) { o.u += 1u << 23; o.f -= m.f; } "
        "o.u |= (uint32_t)(h & 0x8000u) << 16; return o.f; }",
    ("float32", "float16"):
        "{ union { float f; uint32_t u; } v, d; v.f = x; uint32_t s = v.u & 0x80000000u; "
        "v.u ^= s; uint32_t o; "
        "if (v.u >= 0x47800000u) o = v.u > 0x7F800000u ? 0x7E00u : 0x7C00u; "
        "else if (v.u < 0x38800000u) { d.u = v.u; d.f += 0.5f; o = d.u - 0x3F000000u; } "
        "else o = (v.u + 0xC8000FFFu + ((v.u >> 13) & 1u)) >> 13; "
        "return (uint16_t)(o | (s >> 16)); }",
}


def conversion_lines(src: str, dst: str, lanes: int,
                     vector_type: Callable[[str, int], str]) -> list:
    """The C definition of ``conversion_name(src, dst, lanes)``; ``vector_type`` names (and
    records) the vector types it uses."""
    name = conversion_name(src, dst, lanes)
    if lanes == 1:
        arg, ret = ("uint16_t h", "float") if src != "float32" else ("float x", "uint16_t")
        return [f"{C_HELPER} {ret} {name}({arg}) {_SCALAR[(src, dst)]}"]
    f, u = vector_type("float32", lanes), vector_type("uint32", lanes)
    h = vector_type("uint16", lanes)
    if (src, dst) == ("bfloat16", "float32"):
        body = f"return ({f})(__builtin_convertvector(x, {u}) << 16);"
        return [f"{C_HELPER} {f} {name}({h} x) {{ {body} }}"]
    if (src, dst) == ("float32", "bfloat16"):
        body = (f"{u} v = ({u})x; {u} nan = ({u})(x != x); "
                f"{u} r = (v + 0x7FFFu + ((v >> 16) & 1u)) >> 16; "
                f"r = (r & ~nan) | (((v >> 16) | 0x40u) & nan); "
                f"return __builtin_convertvector(r, {h});")
        return [f"{C_HELPER} {h} {name}({f} x) {{ {body} }}"]
    if (src, dst) == ("float16", "float32"):
        body = (f"{u} w = __builtin_convertvector(x, {u}); {u} o = (w & 0x7FFFu) << 13; "
                f"{u} e = o & (0x7C00u << 13); o += (127u - 15u) << 23; "
                f"{u} big = ({u})(e == (0x7C00u << 13)), zero = ({u})(e == 0); "
                f"o += big & ((128u - 16u) << 23); "
                f"{f} sub = ({f})(o + (1u << 23)) - ({f})(({u}){{0}} + (113u << 23)); "
                f"o = (o & ~zero) | (({u})sub & zero); "
                f"return ({f})(o | ((w & 0x8000u) << 16));")
        return [f"{C_HELPER} {f} {name}({h} x) {{ {body} }}"]
    body = (f"{u} v = ({u})x; {u} s = v & 0x80000000u; v ^= s; "
            f"{u} big = ({u})(v >= 0x47800000u), small = ({u})(v < 0x38800000u); "
            f"{u} special = 0x7C00u | (({u})(v > 0x7F800000u) & 0x0200u); "
            f"{u} sub = ({u})(({f})v + 0.5f) - 0x3F000000u; "
            f"{u} nrm = (v + 0xC8000FFFu + ((v >> 13) & 1u)) >> 13; "
            f"{u} o = (nrm & ~(big | small)) | (sub & small) | (special & big); "
            f"return __builtin_convertvector(o | (s >> 16), {h});")
    return [f"{C_HELPER} {h} {name}({f} x) {{ {body} }}"]
