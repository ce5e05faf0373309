"""Split-back: named fused kernels computed as their unfused parts again.

Fusion (``fusion.py``) puts an anchor and the elementwise or injective nodes around it
into one kernel, which saves a round trip of the anchor's output through memory. That
is a guess: a heavy epilogue (a GELU's erf, a HardSwish chain) can break the blocked
kernel's vectorization or spill its register block, and then the anchor alone plus the
epilogue as its own kernel run faster. Only a measurement tells (``graph.decisions``
measures); this pass does what it decided, and nothing else.

``split_kernels(g, names)`` replaces each named kernel by up to three kernels, in this
order: its prologue (the injective nodes the anchor reads through) named
``<name>_prologue``, the anchor alone keeping ``<name>``, and its epilogue (the nodes
after the anchor) named ``<name>_epilogue``. The nodes do not change, so the outputs
do not either; the values between the parts become kernel outputs. A name that is not a
kernel, or a kernel with no anchor or nothing around it, is a GraphError naming it.
"""
from __future__ import annotations

from collections.abc import Iterable

from tvmlite.graph.ir import Graph, GraphError, Kernel, Node
from tvmlite.graph.ops import KIND
from tvmlite.graph.passes.fusion import make_kernel

__all__ = ["split_kernels", "splittable", "parts_of"]


def parts_of(k: Kernel) -> tuple[list[Node], list[Node], list[Node]] | None:
    """(prologue, [anchor], epilogue) of ``k``, or None when it has no anchor node or
    nothing but its anchor (nothing to split)."""
    at = next((i for i, n in enumerate(k.nodes) if KIND.get(n.op, "anchor") == "anchor"),
              None)
    if at is None or len(k.nodes) == 1:
        return None
    return list(k.nodes[:at]), [k.nodes[at]], list(k.nodes[at + 1:])


def splittable(k: Kernel) -> bool:
    """Whether ``split_kernels`` can split ``k`` (an anchor with nodes around it)."""
    return parts_of(k) is not None


def split_kernels(g: Graph, names: Iterable[str]) -> Graph:
    """``g`` with each kernel in ``names`` replaced by its parts (see the module doc)."""
    if g.kernels is None:
        raise GraphError(f"split_kernels: graph {g.name!r} is not fused yet (run "
                         f"graph.optimize first)")
    wanted = set(names)
    known = {k.name for k in g.kernels}
    unknown = sorted(wanted - known)
    if unknown:
        raise GraphError(f"split_kernels: {unknown[0]!r} is not a kernel of graph "
                         f"{g.name!r} (kernels: {', '.join(sorted(known))})")
    kernels: list[Kernel] = []
    for k in g.kernels:
        if k.name not in wanted:
            kernels.append(k)
            continue
        parts = parts_of(k)
        if parts is None:
            raise GraphError(f"split_kernels: kernel {k.name!r} ("
                             f"{'+'.join(n.op for n in k.nodes)}) has no anchor with nodes "
                             f"fused around it: nothing to split")
        for suffix, nodes in zip(("_prologue", "", "_epilogue"), parts):
            if nodes:
                kernels.append(make_kernel(g, k.name + suffix, nodes))
    taken = [k.name for k in kernels]
    if len(set(taken)) != len(taken):
        clash = next(n for n in taken if taken.count(n) > 1)
        raise GraphError(f"split_kernels: splitting would make two kernels named {clash!r}")
    return g.replace(kernels=tuple(kernels))
