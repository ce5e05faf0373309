"""Inference rewrites: Identity and Dropout (already Identity after import) are removed,
their readers reading the input instead."""
from __future__ import annotations

from tvmlite.graph.ir import Graph, Node


def remove_identity(g: Graph) -> Graph:
    """``g`` without identity nodes, except one that copies a model input straight to a
    model output (there is nothing else to compute that output)."""
    rename: dict[str, str] = {}
    kept: list[Node] = []
    outputs = list(g.outputs)
    for n in g.nodes:
        src = rename.get(n.inputs[0], n.inputs[0]) if n.inputs else ""
        if n.op == "identity":
            if n.output in g.outputs:
                if src in g.inputs or src in g.outputs or src in g.constants:
                    kept.append(Node(n.op, (src,), n.outputs, n.attrs, n.name))
                    continue
                # the producer of src writes the model output's name directly
                rename[src] = n.output
                kept = [_rename_out(k, src, n.output) for k in kept]
                continue
            rename[n.output] = src
            continue
        kept.append(Node(n.op, tuple(rename.get(i, i) for i in n.inputs), n.outputs,
                         n.attrs, n.name))
    kept = [Node(n.op, tuple(rename.get(i, i) for i in n.inputs), n.outputs, n.attrs, n.name)
            for n in kept]
    if len(kept) == len(g.nodes):
        return g
    return g.replace(nodes=tuple(kept), outputs=tuple(outputs))


def _rename_out(n: Node, old: str, new: str) -> Node:
    if old not in n.outputs:
        return n
    return Node(n.op, n.inputs, tuple(new if o == old else o for o in n.outputs), n.attrs,
                n.name)
