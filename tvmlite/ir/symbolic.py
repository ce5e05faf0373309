"""Symbolic sizes: dimensions known only when the kernel is called (``te.var("M")``).

A loop extent, a buffer dimension or a reduction extent is either a Python ``int`` (the
common, static case: every pass keeps its arithmetic on numbers) or an integer ``Expr``
over ``SizeVar``s (``M``, ``M * 4``, ``(M + 31) // 32``). The helpers here do extent
arithmetic on both, folding to an ``int`` whenever the result is a number, so a static
schedule lowers exactly as before and a symbolic one carries expressions.

A size is at least 1 at run time (the kernel checks its ``int64_t`` arguments), which is
the only fact about it the simplifier is told (``SIZE_RANGE``).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Union

if TYPE_CHECKING:   # typing has it from Python 3.13; only the type checker needs it
    from typing_extensions import TypeIs

from tvmlite.ir.expr import BinOp, Const, Expr, Var, expr_node, same, substitute, walk
from tvmlite.ir.simplify import INF, simplify

SIZE_RANGE = (1, INF)
Extent = Union[int, Expr]


@expr_node
class SizeVar(Var):
    """A symbolic dimension (``te.var("M")``): an ``int64_t`` argument of the kernel,
    read from the array shapes when called from Python."""


def is_static(x: Any) -> TypeIs[int]:
    """Whether an extent is a number (not a bool, not a size expression)."""
    return isinstance(x, int) and not isinstance(x, bool)


def is_size_expr(x: Any) -> bool:
    """An integer expression whose only variables are SizeVars."""
    if not isinstance(x, Expr) or x.dtype not in ("int32", "int64"):
        return False
    return all(not isinstance(n, Var) or isinstance(n, SizeVar) for n in walk(x))


def size_vars(x: Any) -> list:
    """The SizeVars of an extent (or of any expression), in first-seen order."""
    if not isinstance(x, Expr):
        return []
    out: list = []
    for n in walk(x):
        if isinstance(n, SizeVar) and all(n.name != o.name for o in out):
            out.append(n)
    return out


def size_ranges(names: Any) -> dict:
    return {n: SIZE_RANGE for n in names}


def as_extent_expr(x: Extent) -> Expr:
    return Const(x) if is_static(x) else x


def fold(e: Expr) -> Extent:
    """Simplify an extent expression; a number comes back as an int."""
    s = simplify(e, size_ranges(v.name for v in size_vars(e)))
    return int(s.value) if isinstance(s, Const) else s


def ext_mul(a: Extent, b: Extent) -> Extent:
    if is_static(a) and is_static(b):
        return a * b
    return fold(BinOp("*", as_extent_expr(a), as_extent_expr(b)))


def ext_prod(xs: Any) -> Extent:
    out: Extent = 1
    for x in xs:
        out = ext_mul(out, x)
    return out


def ceil_div(a: Extent, b: Extent) -> Extent:
    """``ceil(a / b)`` for positive extents (``b`` a number or an expression)."""
    if is_static(a) and is_static(b):
        return -(-a // b)
    if is_static(b) and b == 1:
        return a
    return fold(BinOp("//", BinOp("+", as_extent_expr(a), BinOp("-", as_extent_expr(b), Const(1))),
                      as_extent_expr(b)))


def hi_of(extent: Extent) -> float:
    """The largest value of a loop variable over ``range(extent)`` as a number (INF when
    the extent is symbolic: only its lower bound, 1, is known)."""
    return extent - 1 if is_static(extent) else INF


def same_extent(a: Extent, b: Extent) -> bool:
    if is_static(a) and is_static(b):
        return a == b
    if is_static(a) or is_static(b):
        return False
    return same(fold(a), fold(b))


def static_or_none(x: Extent) -> int | None:
    return x if is_static(x) else None


def bind_extent(x: Extent, sizes: dict) -> int:
    """The number an extent takes once every SizeVar has a value (``{"M": 64}``)."""
    if is_static(x):
        return x
    v = fold(substitute(x, {k: Const(int(n)) for k, n in sizes.items()}))
    if not is_static(v):
        missing = [s.name for s in size_vars(x) if s.name not in sizes]
        raise ValueError(f"extent {x} needs a value for {', '.join(missing) or 'its sizes'}")
    return v


def numel(shape: tuple) -> Extent:
    return ext_prod(shape) if shape else 1


__all__ = ["SizeVar", "Extent", "SIZE_RANGE", "is_static", "is_size_expr", "size_vars",
           "size_ranges", "as_extent_expr", "fold", "ext_mul", "ext_prod", "ceil_div", "hi_of",
           "same_extent", "static_or_none", "bind_extent", "numel"]
