"""How a graph node's compute indexes its inputs: numpy broadcasting (``read``), a stage
given by its element at each index (``pointwise``), and row-major positions
(``flatten`` / ``unflatten``), which reshapes, gathers and the 2-D softmax and layer
norm read through. ``compute.py`` (elementwise nodes and anchors) and
``injective_compute.py`` (re-indexing nodes) both build on these.
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

from tvmlite import te
from tvmlite.graph.scalar import Operand, Scalar
from tvmlite.ir.symbolic import is_static
from tvmlite.ops.common import named

__all__ = ["axis_names", "read", "pointwise", "flatten", "unflatten"]


def axis_names(rank: int) -> list[str]:
    """The names of an output's axes (``i0``, ``i1``...): what ``te.compute`` calls them."""
    return [f"i{d}" for d in range(rank)]


def read(t: Operand, idx: Sequence[Any], out_shape: Sequence[int]) -> Any:
    """``t`` read at output index ``idx`` under numpy broadcasting."""
    if isinstance(t, Scalar):
        return te.const(t.value, t.dtype)
    shape = tuple(t.shape)
    if not shape:
        return t[()]
    lead = len(out_shape) - len(shape)
    return t[tuple(0 if _broadcast_dim(s, out_shape[lead + d]) else idx[lead + d]
                   for d, s in enumerate(shape))]


def _broadcast_dim(s: Any, out: Any) -> bool:
    """An input dimension of 1 read against a larger output one (a symbolic output
    dimension is never 1: the graph was merged from sizes of 2 and up)."""
    return is_static(s) and s == 1 and not (is_static(out) and out == 1)


def pointwise(shape: tuple[int, ...], name: str, fn: Callable[..., Any]) -> te.Tensor:
    """A stage of ``shape`` whose element at index ``i`` (a tuple) is ``fn(i)``."""
    return te.compute(shape, named(axis_names(len(shape)), lambda *i: fn(i)), name=name)


def flatten(idx: Sequence[Any], shape: Sequence[int]) -> Any:
    """The row-major position of index ``idx`` in ``shape``."""
    flat: Any = 0 if not idx else idx[0]
    for d in range(1, len(idx)):
        flat = flat * shape[d] + idx[d]
    return flat


def unflatten(flat: Any, shape: Sequence[int]) -> tuple:
    """The index of row-major position ``flat`` in ``shape`` (``flatten``'s inverse)."""
    out = []
    for d in reversed(range(len(shape))):
        out.append(flat % shape[d] if d else flat)
        flat = flat // shape[d]
    return tuple(reversed(out))
