"""Whole vectors of output channels: an NHWC conv whose output channels are no multiple of
``VECTOR_CHANNELS`` computes zero channels up to the next one and a slice drops them.

Why: a blocked conv vectorizes its output channels, and its register block must divide
them. 1000 channels (SqueezeNet's classifier conv, 13 x 13 x 512 -> 1000) are no whole
16-lane vectors, so on AVX-512 the block ran on 8-lane ones, at half the FMA rate: 0.85
of the model's 2.3 ms on Zen 5. With 1008 channels it takes full vectors; the slice is a
copy of the output, fused with the bias and activation after it (``fusion``: only
elementwise nodes follow a conv in its kernel, so the slice starts the next one).
16 is the widest float32 vector of the targets (AVX-512); the narrower ones divide it, so
the padded conv has whole vectors on every target. Padded only where the extra channels
are at most ``MAX_WASTE`` of the work. The choice reads the channels alone, never the
spatial sizes: a model over a symbolic size is optimized at several sizes and merged
(``graph/symbolic.py``), and its graphs must agree.
"""
from __future__ import annotations

import numpy as np

from tvmlite.graph.ir import Graph, Node, TensorType, attrs_of
from tvmlite.graph.passes.edit import GraphEdit

__all__ = ["VECTOR_CHANNELS", "whole_vector_channels"]

VECTOR_CHANNELS = 16
MAX_WASTE = 1 / 32     # padded channels over the conv's own, at most


def _extra(g: Graph, n: Node) -> int:
    """Zero output channels to add to conv ``n`` (0: none)."""
    if (n.op != "conv" or n.attr("layout", "NCHW") != "NHWC" or n.attr("group", 1) != 1
            or len(n.inputs) != 2 or n.inputs[1] not in g.constants):
        return 0
    w = g.constants[n.inputs[1]]
    out = g.types[n.output]
    if w.ndim != 4 or w.dtype != np.float32 or out.dtype != "float32":
        return 0
    extra = -w.shape[3] % VECTOR_CHANNELS
    return extra if extra <= MAX_WASTE * w.shape[3] else 0


def whole_vector_channels(g: Graph) -> Graph:
    """``g`` with each conv of ``_extra`` channels computing them and slicing them off."""
    edit = GraphEdit(g)
    nodes: list[Node] = []
    for n in g.nodes:
        extra = _extra(g, n)
        if not extra:
            nodes.append(n)
            continue
        x, w = n.inputs
        weight = g.constants[w]
        wide = edit.constant(f"{w}_c{weight.shape[3] + extra}",
                             np.pad(weight, ((0, 0), (0, 0), (0, 0), (0, extra))))
        t = g.types[n.output]
        y = edit.fresh(f"{n.output}_c{t.shape[3] + extra}")
        edit.types[y] = TensorType((*t.shape[:3], t.shape[3] + extra), t.dtype)
        nodes.append(Node(n.op, (x, wide), (y,), n.attrs, n.name))
        nodes.append(Node("slice", (y,), n.outputs,
                          attrs_of({"ranges": ((3, 0, 1, t.shape[3]),)}), f"{n.name}_slice"))
    if len(nodes) == len(g.nodes):
        return g
    used = {i for m in nodes for i in m.inputs}
    consts = {k: v for k, v in edit.consts.items() if k in used}
    types = {k: t for k, t in edit.types.items() if k not in edit.consts or k in consts}
    return g.replace(nodes=tuple(nodes), constants=consts, types=types)
