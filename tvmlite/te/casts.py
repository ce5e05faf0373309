"""``te.cast``: dtype conversions, plain (as C and numpy's ``astype`` convert) or saturating.

A plain cast wraps an integer that does not fit (``cast(300, "uint8") == 44``, as numpy's
``astype`` does) and leaves a float outside the target integer's range undefined (as C
does). A saturating cast, what quantized kernels need on their way down to int8, first
clips the value to the target's range in the source dtype -- so ``cast(300.0, "int8",
saturate=True) == 127`` -- and maps NaN to 0 when the target is an integer; float to
integer then truncates toward zero, as ``astype`` does (rounding, e.g. the half-to-even of
ONNX's QuantizeLinear, is the caller's: ``cast(round(x), ...)``).
"""
from __future__ import annotations

from typing import Any

import numpy as np

from tvmlite.ir.dtypes import numpy_dtype, value_range
from tvmlite.ir.expr import Cast, Cmp, Const, Expr, Select, as_expr, binop, check_dtype, is_float

__all__ = ["cast", "saturate_bounds"]


def saturate_bounds(src: str, dst: str) -> tuple[Any, Any]:
    """(lo, hi) in ``src`` to clip a ``src`` value to before casting it to ``dst`` (None
    where ``src`` cannot leave ``dst``'s range on that side): ``dst``'s range, moved inward to
    the nearest value ``src`` holds, so that the clipped value converts exactly."""
    s_lo, s_hi = value_range(src)
    d_lo, d_hi = value_range(dst)
    lo = None if s_lo >= d_lo else d_lo
    hi = None if s_hi <= d_hi else d_hi
    if is_float(src) and not is_float(dst):       # the float nearest inside the int range
        t = numpy_dtype(src).type
        if hi is not None:
            h = t(hi)
            hi = float(h if float(h) <= d_hi else np.nextafter(h, t(-np.inf)))
        if lo is not None:
            lo_f = t(lo)
            lo = float(lo_f if float(lo_f) >= d_lo else np.nextafter(lo_f, t(np.inf)))
    return lo, hi


def cast(x: Any, dtype: str, saturate: bool = False) -> Expr:
    """``x`` converted to ``dtype``; with ``saturate``, clipped to ``dtype``'s range first
    (module doc): TVM's ``te.cast`` plus the clip quantized kernels apply."""
    check_dtype(dtype, "te.cast: dtype")
    e = as_expr(x)
    if not saturate or e.dtype == dtype:
        return Cast(dtype, e)
    lo, hi = saturate_bounds(e.dtype, dtype)
    clipped = e
    if hi is not None:
        clipped = binop("min", clipped, Const(hi, e.dtype))
    if lo is not None:
        clipped = binop("max", clipped, Const(lo, e.dtype))
    if is_float(e.dtype) and not is_float(dtype):   # NaN (which min/max keep) becomes 0
        clipped = Select(Cmp("!=", e, e), Const(0, e.dtype), clipped)
    return Cast(dtype, clipped)
