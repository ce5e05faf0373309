"""Precision: a float32 graph computing its convs and matmuls on bfloat16 weights and
activations, with float32 sums (``Graph.precision == "bf16"``; "fp32" leaves it as is).

Why bf16 and where: a conv or matmul of a CNN or a transformer is where the time goes,
and it is bound by the multiply-adds and the bytes of its operands. With its weight and
its input stored as bfloat16 it moves half the bytes, and on a CPU with AVX512-BF16 its
block runs ``vdpbf16ps`` (a pair of bf16 products summed into each float32 lane: twice
the FMA's rate; ``graph.dot_kernel`` picks it); elsewhere the same kernel loads bf16 and
computes in float32 (the C codegen's storage float), so it is still correct, and still
moves half the bytes. What bf16 loses is mantissa (8 bits, a relative rounding of
2**-9 per element), not range, so a model needs no calibration, unlike int8.

The rewrite (after the layout pass, which has put every weight in its final layout, and
before fusion, which then fuses the casts):

- each conv / matmul whose weight is a float32 constant reads that weight rounded to
  bf16 (one copy per weight) and its input through one ``cast(x, bfloat16)`` per value,
  shared by every such anchor reading ``x``; its output is float32: the products are
  summed in float32 (``ops.common.product``, the form ``tensorize`` matches), never
  rounded in between;
- the cast is placed right after the node computing ``x``, so fusion joins it to that
  kernel as the last node of its epilogue (through the nodes that only move elements,
  ``MOVES``: a max pool, a concat, the layout's transposes, which then compute in bf16
  themselves): the bias, batch norm, activation and residual
  add run in float32 on the accumulators, and the kernel stores bf16. A value that
  something else reads in float32 as well (a residual branch, a model output) is stored
  in float32 and cast by a small kernel of its own;
- a CNN's stem of a small window (3x3 over the RGB image: ``STEM_CHANNELS``,
  ``STEM_WINDOW``) stays float32 and stores bf16: it reads the model's input with the
  layout's transpose fused in, where in bf16 a kernel of its own first casts and
  transposes the image;
- a depthwise conv stays float32, input and weight: it has no pairs to sum (each output
  channel reads one input channel: plain float32 FMAs either way), and widening a bf16
  input per tap cost more than the bytes saved (MobileNet-V2 bf16 on Zen 5: 1.8-2.0 ms
  with bf16 depthwise inputs, 1.5-1.6 ms with float32 ones); the kernel before it
  stores float32, and its own output is cast for the conv after it;
- everything else stays float32, since it is cheap and some of it fragile: the model's
  inputs and outputs (the library's C API and ``run`` are unchanged: the first kernel
  reads float32, the last writes it), the biases and the epilogues (added to float32
  sums), pools, softmax, layer norm and reductions (a mean or a variance summed in bf16
  would lose the small terms to the large ones), and a matmul of two run-time values
  (attention's Q @ K^T feeds a softmax, whose exponent turns a rounding of the logits
  into a relative error of the probabilities).
"""
from __future__ import annotations

import numpy as np

from tvmlite.errors import TvmliteError
from tvmlite.graph.ir import Graph, Node, TensorType, attrs_of
from tvmlite.graph.passes.edit import GraphEdit
from tvmlite.graph.passes.zero_points import channel_padding
from tvmlite.ir.dtypes import bfloat16_numpy

__all__ = ["PRECISIONS", "PrecisionError", "check_precision", "lower_precision"]

PRECISIONS = ("fp32", "bf16")
BF16_ANCHORS = ("conv", "matmul")
# the nodes that only move or select their input's elements: computed on the bf16 values
# they give the same bf16 values as a cast of their float32 output (rounding is monotone,
# so a max too), and the kernel before them stores bf16
MOVES = ("reshape", "transpose", "concat", "pad", "slice", "max_pool")
# a conv of at most this many input channels (a CNN's stem, on the RGB image) with a
# window of at most this many taps stays float32: it reads the model's input directly,
# its layout transpose fused into it, where in bf16 a kernel of its own casts and
# transposes the image first (0.07-0.1 ms at 224 x 224 on Zen 5). A 3x3 window reads each
# pixel too few times to win that back (SqueezeNet's stem 0.16 -> 0.12 ms, MobileNet-V2's
# 0.14 -> 0.10 ms in float32); ResNet-50's 7x7 does (0.47 ms in bf16, 0.55 in float32)
STEM_CHANNELS = 4
STEM_WINDOW = 9


class PrecisionError(TvmliteError, ValueError):
    """A precision that is not one of ``PRECISIONS``."""


def check_precision(precision: object) -> str:
    """``precision`` when it is one of ``PRECISIONS``, else a PrecisionError naming them."""
    if not isinstance(precision, str) or precision not in PRECISIONS:
        raise PrecisionError(f"precision must be one of {', '.join(PRECISIONS)}, got "
                             f"{precision!r}")
    return precision


def _takes_bf16(g: Graph, n: Node) -> bool:
    """A conv or matmul of a float32 run-time input and a float32 constant weight, but
    not a depthwise conv nor a small-window conv of an RGB image (``STEM_CHANNELS``)."""
    if n.op not in BF16_ANCHORS or len(n.inputs) < 2:
        return False
    x, w = n.inputs[:2]
    if n.op == "conv" and (_depthwise(g, n) or (_channels(g, n) <= STEM_CHANNELS
                                                  and _taps(g, n) <= STEM_WINDOW)):
        return False
    return (x not in g.constants and w in g.constants and g.types[x].dtype == "float32"
            and g.constants[w].dtype == np.float32)


def _taps(g: Graph, n: Node) -> int:
    """A conv's window size: its weight is HWIO in NHWC, OIHW in NCHW."""
    shape = g.types[n.inputs[1]].shape
    return shape[0] * shape[1] if n.attr("layout", "NCHW") == "NHWC" else shape[2] * shape[3]


def _channels(g: Graph, n: Node) -> int:
    shape = g.types[n.inputs[0]].shape
    return shape[-1] if n.attr("layout", "NCHW") == "NHWC" else shape[1]


def _depthwise(g: Graph, n: Node) -> bool:
    """A conv whose every group is one input channel (MobileNet's 3x3 depthwise convs)."""
    group = n.attr("group", 1)
    return n.op == "conv" and group > 1 and group == _channels(g, n)


def _pair_padding(g: Graph, n: Node) -> int:
    """Zero input channels that make an NHWC conv's (weight HWIO) a whole number of
    ``vdpbf16ps`` pairs: a first conv's 3 RGB channels take the pair instruction as 4,
    where 3 left it plain vectors (ResNet-50's 7x7 conv on Zen 4: 1.5 ms, fp32's 1.0)."""
    w = g.constants[n.inputs[1]]
    if n.op != "conv" or n.attr("layout", "NCHW") != "NHWC" or w.ndim != 4:
        return 0
    return channel_padding(g.types[n.inputs[0]].shape[-1], w.shape[2], group=2)


class _Lower(GraphEdit):
    """The bf16 value of each float32 value an anchor reads (``bf16_of``) and where the
    nodes computing them go (``after``: a cast after the producer; ``instead``: an
    injective node moved to bf16 in place of its float32 self)."""

    def __init__(self, g: Graph):
        super().__init__(g)
        self.prod = g.producers()
        self.cons = g.consumers()
        self.memo: dict[str, str] = {}
        self.after: dict[str, Node] = {}
        self.instead: dict[int, Node] = {}
        self.before: dict[int, Node] = {}    # an anchor's channel padding

    def bf16_of(self, v: str) -> str:
        """The name of ``v`` in bf16: ``v``'s producer itself computing in bf16 when it
        only moves or selects elements (``MOVES``: the same values rounded once, exactly)
        and ``v`` has no other reader, else a cast of ``v`` placed after its producer."""
        if v in self.memo:
            return self.memo[v]
        vb = self.fresh(f"{v}_bf16")
        self.types[vb] = TensorType(self.types[v].shape, "bfloat16")
        self.memo[v] = vb
        p = self.prod.get(v)
        movable = (p is not None and p.op in MOVES and len(self.cons.get(v, [])) == 1
                   and v not in self.g.outputs
                   and all(i and i not in self.consts for i in p.inputs))
        if p is not None and movable:
            ins = tuple(self.bf16_of(i) for i in p.inputs)
            self.instead[id(p)] = Node(p.op, ins, (vb,), p.attrs, p.name)
        else:
            self.after[v] = Node("cast", (v,), (vb,), attrs_of({"to": "bfloat16"}),
                                 f"{v}_cast")
        return vb


def lower_precision(g: Graph) -> Graph:
    """``g`` with its convs and matmuls on bf16 weights and activations when
    ``g.precision`` is "bf16" (module doc); ``g`` itself for "fp32"."""
    if check_precision(g.precision) == "fp32":
        return g
    anchors = [n for n in g.nodes if _takes_bf16(g, n)]
    if not anchors:
        return g
    edit = _Lower(g)
    bf16 = bfloat16_numpy()
    weights: dict[tuple[str, int], str] = {}   # (float32 weight, padding) -> bf16 copy
    for n in anchors:
        x, w = n.inputs[:2]
        xb, extra = edit.bf16_of(x), _pair_padding(g, n)
        if extra:   # 3 input channels padded to 4 with zeros (their weights are 0 too)
            t = edit.types[xb]
            xb_padded = edit.fresh(f"{xb}_c{t.shape[-1] + extra}")
            edit.types[xb_padded] = TensorType((*t.shape[:-1], t.shape[-1] + extra), t.dtype)
            edit.before[id(n)] = Node("pad", (xb,), (xb_padded,), attrs_of(
                {"pads": (0, 0, 0, 0, 0, 0, 0, extra), "value": 0.0}), f"{n.name}_pad")
            xb = xb_padded
        key = (w, extra)
        if key not in weights:
            wb = g.constants[w].astype(bf16)
            if extra:
                wb = np.pad(wb, ((0, 0), (0, 0), (0, extra), (0, 0)))
            weights[key] = edit.constant(f"{w}_bf16" + (f"_c{wb.shape[2]}" if extra else ""),
                                         wb)
        edit.instead[id(n)] = Node(n.op, (xb, weights[key]) + n.inputs[2:], n.outputs,
                                   n.attrs, n.name)
    nodes = [edit.after[v] for v in g.inputs if v in edit.after]
    for n in g.nodes:
        if id(n) in edit.before:
            nodes.append(edit.before[id(n)])
        nodes.append(edit.instead.get(id(n), n))
        nodes.extend(edit.after[o] for o in n.outputs if o in edit.after)
    used = {i for m in nodes for i in m.inputs}
    consts = {k: v for k, v in edit.consts.items() if k in used or k not in g.constants}
    types = {k: t for k, t in edit.types.items() if k not in g.constants or k in consts}
    return g.replace(nodes=tuple(nodes), constants=consts, types=types)
