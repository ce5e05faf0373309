"""What every ONNX converter uses: the conversion context, its error, and the helpers
that read an ONNX node (attributes, constant inputs) and make graph nodes.

``converters.py`` (one function per op) and ``decompositions.py`` (ops converted as
several graph nodes) both build on these.
"""
from __future__ import annotations

from typing import Any, Callable, Protocol

import numpy as np

from tvmlite.errors import TvmliteError
from tvmlite.graph.ir import Node, TensorType, attrs_of

__all__ = ["ConversionError", "Context", "attr", "need_const", "opt_const", "node", "simple",
           "scalar", "window", "window_pads"]


class ConversionError(TvmliteError, ValueError):
    """An ONNX node whose attributes or non-constant inputs tvmlite cannot compile."""


class Context(Protocol):
    opset: int

    def const(self, name: str) -> np.ndarray | None: ...
    def type(self, name: str) -> TensorType: ...
    def fresh(self, base: str) -> str: ...
    def constant(self, value: np.ndarray, base: str = "const") -> str: ...
    def set_constant(self, name: str, value: np.ndarray) -> None: ...
    def add(self, node: Node) -> None: ...


def attr(onnx_node: Any, key: str, default: Any = None) -> Any:
    """Attribute ``key`` of an ONNX node (strings decoded), or ``default``."""
    import onnx.helper as oh  # the frontend's one dependency, imported by the caller
    for at in onnx_node.attribute:
        if at.name == key:
            v = oh.get_attribute_value(at)
            return v.decode() if isinstance(v, bytes) else v
    return default


def need_const(ctx: Context, n: Any, i: int, what: str) -> np.ndarray:
    """Input ``i`` of ``n``, which must be a constant by now (``what`` names it in the
    error)."""
    if len(n.input) <= i or not n.input[i]:
        raise ConversionError(f"node {n.name!r} ({n.op_type}): input {i} ({what}) is missing")
    v = ctx.const(n.input[i])
    if v is None:
        raise ConversionError(f"node {n.name!r} ({n.op_type}): {what} ({n.input[i]!r}) must "
                              f"be a constant (or computed from shapes), not a run-time value")
    return v


def opt_const(ctx: Context, n: Any, i: int) -> np.ndarray | None:
    """The value of optional input ``i`` when it is given and constant, else None."""
    return ctx.const(n.input[i]) if len(n.input) > i and n.input[i] else None


def node(op: str, n: Any, inputs: list[str], outputs: list[str] | None = None,
         **attrs: Any) -> Node:
    """A graph node made from ONNX node ``n`` (its first output unless ``outputs``)."""
    return Node(op, tuple(inputs), tuple(outputs or [n.output[0]]), attrs_of(attrs), n.name)


def simple(op: str) -> Callable[[Any, Context], list[Node]]:
    """The converter of an op that is one graph op over the same inputs."""
    return lambda n, ctx: [node(op, n, list(n.input))]


def scalar(ctx: Context, value: float, dtype: str = "float32") -> str:
    """A new one-element constant (read as a literal by the kernels)."""
    return ctx.constant(np.array(value, dtype))


def window_pads(n: Any, ctx: Context, x: TensorType, kernel: tuple, strides: tuple,
                dilations: tuple) -> tuple[int, int, int, int]:
    """A 2-D window's (top, left, bottom, right) pads: ``pads``, or ``auto_pad``'s."""
    auto = attr(n, "auto_pad", "NOTSET")
    if auto in ("NOTSET", "VALID"):
        p = tuple(attr(n, "pads", [0, 0, 0, 0])) if auto == "NOTSET" else (0, 0, 0, 0)
        if len(p) != 4:
            raise ConversionError(f"node {n.name!r} ({n.op_type}): only 2-D windows are "
                                  f"supported, got pads {list(p)}")
        return p[0], p[1], p[2], p[3]
    out = []
    for d in range(2):
        size = x.shape[2 + d]
        o = -(-size // strides[d])
        total = max(0, (o - 1) * strides[d] + (kernel[d] - 1) * dilations[d] + 1 - size)
        small, big = total // 2, total - total // 2
        out.append((small, big) if auto == "SAME_UPPER" else (big, small))
    return out[0][0], out[1][0], out[0][1], out[1][1]


def window(n: Any, ctx: Context, kernel: tuple) -> dict[str, Any]:
    """A 2-D conv or pool's strides, pads (``auto_pad`` resolved) and dilations."""
    if len(kernel) != 2:
        raise ConversionError(f"node {n.name!r} ({n.op_type}): only 2-D windows are "
                              f"supported, got kernel {list(kernel)}")
    strides = tuple(attr(n, "strides", [1, 1]))
    dil = tuple(attr(n, "dilations", [1, 1]))
    return {"strides": strides, "pads": window_pads(n, ctx, ctx.type(n.input[0]), kernel, strides,
                                              dil), "dilations": dil}
