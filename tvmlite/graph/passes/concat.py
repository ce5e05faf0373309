"""Channel concats dissolved into their readers, so no kernel copies them.

A Fire module (SqueezeNet) or an Inception block ends in ``concat(a, b, ...)`` over the
channels, and the next block reads it with a conv. As a kernel of its own the concat is a
copy: every channel read and written once more, a tenth of SqueezeNet's run
(docs/benchmarks.md has the figures). Its readers do not need it: a conv (one group) over
the channels of ``concat(a, b)`` is ``conv(a, W[:, :Ca]) + conv(b, W[:, Ca:])``, the sum
folded into the second conv's epilogue; a pool works per channel, so ``pool(concat(a, b))`` is
``concat(pool(a), pool(b))``, a concat that the pool's readers dissolve in turn.

A concat goes only when every reader can take it apart (else its copy stays anyway), it
is not a graph output, its parts are run-time values of static shapes, and the
partial sums cost less than the copy: a conv over k parts writes and reads k - 1 partial
outputs, a copy writes and reads the concat once. SqueezeNet's classifier (1000 channels
out of a 512-channel concat) keeps its copy: split, it ran slower than the copy took.
Runs before the layout pass, on the imported NCHW graph: the channels are axis 1.
"""
from __future__ import annotations

import math

import numpy as np

from tvmlite.graph.ir import Graph, Node, TensorType
from tvmlite.graph.passes.edit import GraphEdit

__all__ = ["dissolve_concats", "CHANNELWISE"]

CHANNELWISE = ("max_pool", "avg_pool")   # readers that commute with a channel concat


def dissolve_concats(g: Graph) -> Graph:
    """``g`` with every channel concat whose readers all take it apart gone (see the
    module docstring); the rewritten readers keep their output names."""
    edit = GraphEdit(g)
    nodes = list(g.nodes)
    changed = False
    while True:
        pos = next((k for k, n in enumerate(nodes) if _dissolvable(n, nodes, g, edit)), None)
        if pos is None:
            break
        changed = True
        concat = nodes[pos]
        readers = [m for m in nodes if concat.output in m.inputs]
        out: list[Node] = []
        for m in nodes[:pos] + nodes[pos + 1:]:
            out += _taken_apart(m, concat, edit) if m in readers else [m]
        nodes = out
    if not changed:
        return g
    return g.replace(nodes=tuple(nodes), constants=edit.consts, types=edit.types)


def _channels(concat: Node, edit: GraphEdit) -> list[int] | None:
    """The channel count of each part of a channel concat, or None if it is not one."""
    if concat.op != "concat":
        return None
    shape = edit.types[concat.output].shape
    if len(shape) < 3 or concat.attr("axis") % len(shape) != 1:
        return None
    counts = [edit.types[i].shape[1] for i in concat.inputs]
    return counts if all(isinstance(c, int) for c in counts) else None


def _dissolvable(n: Node, nodes: list[Node], g: Graph, edit: GraphEdit) -> bool:
    if _channels(n, edit) is None or n.output in g.outputs:
        return False
    if len(n.inputs) < 2 or any(i in edit.consts for i in n.inputs):
        return False
    readers = [m for m in nodes if n.output in m.inputs]
    if not readers or not all(_takes_apart(m, n.output, edit) for m in readers):
        return False
    if not all(isinstance(d, int) for m in (n, *readers) for d in edit.types[m.output].shape):
        return False    # a symbolic size: no one traffic to weigh (the copy stays)
    partial_sums = sum((len(n.inputs) - 1) * _elements(m.output, edit)
                       for m in readers if m.op == "conv")
    return partial_sums < _elements(n.output, edit)


def _elements(value: str, edit: GraphEdit) -> int:
    return math.prod(edit.types[value].shape)


def _takes_apart(m: Node, value: str, edit: GraphEdit) -> bool:
    if m.op in CHANNELWISE:
        return True
    return (m.op == "conv" and len(m.inputs) == 2 and m.inputs[0] == value
            and m.inputs[1] in edit.consts and m.attr("group", 1) == 1
            and np.issubdtype(edit.consts[m.inputs[1]].dtype, np.floating))


def _taken_apart(m: Node, concat: Node, edit: GraphEdit) -> list[Node]:
    """Reader ``m`` of ``concat`` over its parts: a pool of each part and their concat,
    or a conv of each part (the weight's input channels sliced) summed up."""
    counts = _channels(concat, edit)
    assert counts is not None
    if m.op in CHANNELWISE:
        pooled = []
        for part in concat.inputs:
            shape = edit.types[m.output].shape
            name = edit.fresh(f"{m.output}_{part}")
            edit.types[name] = TensorType((shape[0], edit.types[part].shape[1]) + shape[2:],
                                          edit.types[m.output].dtype)
            pooled.append(Node(m.op, (part,), (name,), m.attrs, m.name))
        return pooled + [Node("concat", tuple(p.output for p in pooled), m.outputs,
                              concat.attrs, concat.name)]
    weight = edit.consts[m.inputs[1]]
    out: list[Node] = []
    total: str | None = None
    start = 0
    for k, (part, c) in enumerate(zip(concat.inputs, counts)):
        w = edit.constant(f"{m.inputs[1]}_in{start}", weight[:, start:start + c])
        start += c
        last = k == len(counts) - 1
        conv_out = edit.fresh(f"{m.output}_part{k}")
        edit.types[conv_out] = edit.types[m.output]
        out.append(Node("conv", (part, w), (conv_out,), m.attrs, m.name))
        if total is None:
            total = conv_out
            continue
        summed = m.output if last else edit.fresh(f"{m.output}_sum{k}")
        edit.types[summed] = edit.types[m.output]
        out.append(Node("add", (conv_out, total), (summed,), (), m.name))
        total = summed
    return out
