"""Fusion: the nodes of one kernel are an anchor and the elementwise, broadcast and
injective nodes around it.

Walking the nodes in order, a node joins the kernel that computes its first run-time
input when that value is read by nobody else and is not a model output: then the
kernel's intermediate never reaches memory. An elementwise or injective node joins
before or after the anchor; an anchor joins only a kernel without one (an injective
prologue such as a transpose or a pad, which the anchor indexes through), and only
when its other inputs are computed by earlier kernels (so kernels run in their order of
creation). Anything else
starts a kernel. So conv + bias + relu + the residual add is one kernel, and a chain
of reshapes and activations with no anchor is one kernel too. Every kernel has one
output, the last node's."""
from __future__ import annotations

from tvmlite.graph.ir import Graph, Kernel, Node
from tvmlite.graph.ops import KIND, flops


def fuse(g: Graph) -> Graph:
    """``g`` with ``kernels`` set (nodes unchanged)."""
    consumers = g.consumers()
    groups: list[list[Node]] = []
    anchors: list[str | None] = []
    group_of: dict[str, int] = {}
    for n in g.nodes:
        kind = KIND.get(n.op, "anchor")
        runtime = [i for i in n.inputs if i and i not in g.constants]
        target = None
        if runtime:
            first = runtime[0]
            k = group_of.get(first)
            if k is not None and groups[k][-1].output == first and \
                    len(consumers.get(first, [])) == 1 and first not in g.outputs and \
                    (kind != "anchor" or anchors[k] is None) and \
                    all(group_of.get(i, -1) < k for i in runtime[1:] if i != first):
                target = k
        if target is None:
            groups.append([n])
            anchors.append(n.op if kind == "anchor" else None)
            target = len(groups) - 1
        else:
            groups[target].append(n)
            if kind == "anchor":
                anchors[target] = n.op
        group_of[n.output] = target
    kernels = []
    for k, (nodes, anchor) in enumerate(zip(groups, anchors)):
        inner = {n.output for n in nodes}
        inputs: list[str] = []
        for n in nodes:
            for i in n.inputs:
                if i and i not in inner and i not in inputs:
                    inputs.append(i)
        label = anchor or nodes[0].op
        kernels.append(Kernel(f"k{k}_{label}", tuple(nodes), tuple(inputs), nodes[-1].output,
                              anchor, sum(flops(n, g.types) for n in nodes)))
    return g.replace(kernels=tuple(kernels))
