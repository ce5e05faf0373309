"""Argument checks and the padding stage shared by the operator definitions.

Every operator validates its arguments here so that a bad size from the CLI or a search
task fails at definition time with a ValueError that names the operator and the argument,
not later as an odd shape error inside lowering.
"""
from __future__ import annotations

import inspect
from typing import Any, Callable, Sequence

from tvmlite import te
from tvmlite.checks import check_int, is_int
from tvmlite.ir.dtypes import BUFFER_DTYPES, FLOAT_DTYPES
from tvmlite.ir.expr import Expr
from tvmlite.ir.symbolic import SizeVar

OP_DTYPES = BUFFER_DTYPES


def positive(op: str, name: str, value: Any) -> int:
    """``value`` as a positive int, or a ValueError naming ``op`` and ``name``."""
    return check_int(value, f"{op}: {name}", 1)


def size_arg(op: str, name: str, value: Any) -> Any:
    """A positive int, or a symbolic size (``te.var("M")``) for a dimension the operator
    allows to vary at run time; else a ValueError naming ``op`` and ``name``."""
    if isinstance(value, SizeVar):
        return value
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ValueError(f"{op}: {name} must be a positive int or a te.var, got {value!r}")
    return value


def non_negative(op: str, name: str, value: Any) -> int:
    """``value`` as a non-negative int, or a ValueError naming ``op`` and ``name``."""
    return check_int(value, f"{op}: {name}", 0)


def tuple_arg(op: str, name: str, value: Any, n: int, allow_zero: bool = False) -> tuple[int, ...]:
    """An int or an ``n``-tuple of ints (one per spatial dimension) as an ``n``-tuple."""
    vals = (value,) * n if is_int(value) else value
    if not isinstance(vals, (tuple, list)) or len(vals) != n:
        raise ValueError(f"{op}: {name} must be an int or a tuple of {n} ints, got {value!r}")
    check = non_negative if allow_zero else positive
    return tuple(check(op, name, v) for v in vals)


def dtype_arg(op: str, dtype: Any, floats_only: bool = False) -> str:
    allowed = FLOAT_DTYPES if floats_only else OP_DTYPES
    if dtype not in allowed:
        raise ValueError(f"{op}: dtype must be one of {', '.join(allowed)}, got {dtype!r}")
    return dtype


def shape_arg(op: str, shape: Any) -> tuple[int, ...]:
    if is_int(shape):
        shape = (shape,)
    if not isinstance(shape, (tuple, list)) or not shape:
        raise ValueError(f"{op}: shape must be a non-empty tuple of positive ints, got {shape!r}")
    return tuple(positive(op, "shape", d) for d in shape)


def divisible(op: str, name: str, value: int, by_name: str, by: int) -> None:
    if value % by:
        raise ValueError(f"{op}: {name}={value} must be divisible by {by_name}={by}")


def out_size(op: str, dim: str, size: int, kernel: int, stride: int, pad: int,
             dilation: int = 1) -> int:
    """Output extent of a sliding window:
    ``(size + 2*pad - dilation*(kernel-1) - 1) // stride + 1``, which must be positive."""
    span = dilation * (kernel - 1) + 1
    out = (size + 2 * pad - span) // stride + 1
    if out <= 0:
        raise ValueError(f"{op}: the window along {dim} (kernel {kernel}, dilation {dilation}, "
                         f"span {span}) is larger than the padded input {size} + 2*{pad}: "
                         "output size would be <= 0; use a smaller kernel or more padding")
    return out


def named(names: Sequence[str], fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn`` with a signature of the given argument names.

    te.compute names the axes after the lambda's arguments; this lets layout-generic code
    (padding, elementwise ops of any rank) still produce loops named ``n, c, h, w``.
    """
    def wrapper(*idx: Any) -> Any:
        return fn(*idx)
    wrapper.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
        [inspect.Parameter(n, inspect.Parameter.POSITIONAL_ONLY) for n in names])
    return wrapper


def axis_names(layout: str) -> list[str]:
    """Loop names of a layout string: ``"NCHW"`` -> ``["n", "c", "h", "w"]``."""
    return [ch.lower() for ch in layout]


def pad(data: te.Tensor, pads: Sequence[int], layout: str, name: str = "pad",
        value: Any = 0) -> te.Tensor:
    """``data`` with ``pads[d]`` elements of ``value`` on both sides of each dimension.

    A separate stage so that schedules can inline it or compute it at the consumer, as in
    TVM. Returns ``data`` itself when nothing is padded. The read in the "then" branch is
    out of range where the condition is false, so the backend must not evaluate it there.
    """
    if not any(pads):
        return data
    fill = te.const(value, data.dtype)

    def body(*idx: Any) -> Expr:
        conds = []
        for i, p, n in zip(idx, pads, data.shape):
            if p:
                conds += [i >= p, i < n + p]
        src = data[tuple(i - p if p else i for i, p in zip(idx, pads))]
        return te.if_then_else(te.all(*conds), src, fill)

    shape = tuple(n + 2 * p for n, p in zip(data.shape, pads))
    return te.compute(shape, named(axis_names(layout), body), name=name)


def product(a: Any, b: Any, acc: str | None = None) -> Any:
    """``a * b`` of a dot product's two operands; with ``acc`` both are cast to it first,
    so a bfloat16 conv or matmul multiplies and sums in float32 (``acc(A) * acc(B)``: the
    form ``tensorize`` matches against ``vdpbf16ps``) while its tensors stay bfloat16."""
    if acc is None:
        return a * b
    return te.cast(a, acc) * te.cast(b, acc)
