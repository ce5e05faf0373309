"""Fusion: the nodes of one kernel are an anchor and the elementwise, broadcast and
injective nodes around it.

Walking the nodes in order, a node joins the latest kernel that computes one of its
run-time inputs when every other run-time input comes from that kernel or an earlier
one (so kernels run in their order of creation). An elementwise node joins
after the anchor -- the bias, batch norm, activation, residual add, a whole GELU or
HardSwish chain whose branches meet again -- and an injective node joins before it,
when the anchor reads through it (a transpose, reshape or pad), or after a pool or a
reduction. After a conv or a matmul (float or integer), a reshape or transpose starts the
next kernel: the blocked kernel stores its register block at its own coordinates,
through elementwise nodes only, and a separate copy costs far less than the unblocked
product would. An anchor joins only such an injective prologue, never arithmetic: a
conv or matmul reads each input element many times, so a fused prologue would be
recomputed at every read.
Anything else starts a kernel.

A kernel has one output, its last node's. So a value computed inside a kernel must be
read only inside it: when one is read outside (or is a model output), the kernel is
cut after the node computing it, and the rest becomes the next kernel. So conv + bias
+ relu + the residual add is one kernel, and a chain of reshapes and activations with
no anchor is one kernel too.
"""
from __future__ import annotations

from tvmlite.graph.ir import Graph, Kernel, Node
from tvmlite.graph.ops import INTEGER_ANCHORS, KIND, flops

__all__ = ["fuse", "make_kernel"]


def fuse(g: Graph) -> Graph:
    """``g`` with ``kernels`` set (nodes unchanged)."""
    groups: list[list[Node]] = []
    group_of: dict[str, int] = {}
    for n in g.nodes:
        runtime = [i for i in n.inputs if i and i not in g.constants]
        k = max((group_of.get(i, -1) for i in runtime), default=-1)
        if k < 0 or not _joins(n, groups[k], runtime):
            groups.append([])
            k = len(groups) - 1
        groups[k].append(n)
        group_of[n.output] = k
    kernels: list[Kernel] = []
    for nodes in _cut_escapes(g, groups):
        kernels.append(make_kernel(g, f"k{len(kernels)}_{_label(nodes)}", nodes))
    return g.replace(kernels=tuple(kernels))


def _is_anchor(n: Node) -> bool:
    return KIND.get(n.op, "anchor") == "anchor"


BLAS = ("conv", "matmul", *INTEGER_ANCHORS)


def _joins(n: Node, group: list[Node], runtime: list[str]) -> bool:
    """Whether ``n`` may join ``group``, the latest kernel it reads from: it must read
    the group's last value (continuing the chain, or closing a diamond), a concat of
    several run-time values is a copy of its own, only elementwise nodes follow a conv
    or matmul (its register block is stored through them), and an anchor joins only a
    prologue that re-indexes one value (read through a concat's selects, a window
    would branch at every load)."""
    if group[-1].output not in n.inputs:
        return False
    if n.op == "concat" and len(runtime) > 1:
        return False
    if not _is_anchor(n):
        blas = any(m.op in BLAS for m in group)
        return not blas or KIND.get(n.op) == "elementwise"
    return all(KIND.get(m.op) == "injective" and m.op != "concat" for m in group)


def _cut_escapes(g: Graph, groups: list[list[Node]]) -> list[list[Node]]:
    """Every group cut (``_split``) until no value but its last leaves it."""
    consumers = g.consumers()
    outputs = set(g.outputs)

    def split(nodes: list[Node]) -> list[list[Node]]:
        inside = {m.output for m in nodes}
        for pos, m in enumerate(nodes[:-1]):
            if m.output in outputs or any(r.output not in inside
                                          for r in consumers.get(m.output, [])):
                # cutting here may make earlier values escape the first part: split it too
                return split(nodes[:pos + 1]) + split(nodes[pos + 1:])
        return [nodes]
    return [part for nodes in groups for part in split(nodes)]


def _label(nodes: list[Node]) -> str:
    return next((n.op for n in nodes if _is_anchor(n)), nodes[0].op)


def make_kernel(g: Graph, name: str, nodes: list[Node]) -> Kernel:
    """The kernel ``name`` computing ``nodes`` (topological, one output: the last
    node's): its inputs are the values the nodes read from outside, in order of first
    read; its flops those of its nodes (the split pass makes kernels with it too)."""
    inner = {n.output for n in nodes}
    inputs: list[str] = []
    for n in nodes:
        for i in n.inputs:
            if i and i not in inner and i not in inputs:
                inputs.append(i)
    anchor = next((n.op for n in nodes if _is_anchor(n)), None)
    return Kernel(name, tuple(nodes), tuple(inputs), nodes[-1].output, anchor,
                  sum(flops(n, g.types) for n in nodes))
