"""Zero points out of the integer kernels' inner loop: an integer conv or matmul with a
constant weight and a zero weight zero point becomes a plain dot product plus a constant.

A dot-product instruction (``vpdpbusd``, ``sdot``; ``tvmlite.target.intrinsics``) sums
products of the stored bytes: it has no room for ``x - x_zp`` in its operands. The
identity, exact in int32 (and in wrapping int32 arithmetic too),

    sum_k (x[k] - x_zp) * w[k]  =  sum_k x[k] * w[k]  -  x_zp * sum_k w[k]

moves the activations' zero point into a constant per output channel, ``-x_zp *
colsum(w)``, computed here once from the constant weight (what onnxruntime's MLAS and
TVM's QNN legalization do too). A conv's padding must still be the real value 0, i.e.
``x_zp`` in the stored bytes, so the padding becomes a ``pad`` node filling ``x_zp``
(it joins the kernel as its prologue) and the conv itself pads nothing; padded
positions then contribute ``x_zp * w`` to the dot and the same to the constant, as the
identity needs.

An image's first conv has 3 input channels, which no instruction's group of k (2 or 4
bytes of one output's reduction, contiguous) divides, so its kernel would multiply
element by element in int32: 8-13 ms of a 62 ms quantized ResNet-50 on a Zen 3. Its
input is padded to 4 channels (the pad node above, the extra channel any byte) and its
weight gets a zero channel: a third more multiply-adds, done by the instruction.

Only a weight zero point of 0 (onnxruntime's ``quantize_static`` writes symmetric int8
weights) is taken: a nonzero one would need a per-pixel sum of the activations too, so
such a kernel keeps its centered compute (correct, with a plain vectorized schedule).
Runs after ``fold_qdq`` and before the layout pass, which transposes the new constant
with the bias it sits beside.
"""
from __future__ import annotations

import numpy as np

from tvmlite.graph.ir import Graph, Node, TensorType, attrs_of
from tvmlite.graph.ops import INTEGER_ANCHORS
from tvmlite.graph.passes.edit import GraphEdit

__all__ = ["fold_zero_points", "channel_padding"]


def channel_padding(channels: int, weight_channels: int, group: int = 4) -> int:
    """Zero input channels to add to a conv of ``channels`` (its weight's input-channel
    dimension ``weight_channels``: equal unless grouped) so that they are a multiple of
    ``group``, the dot-product instructions' group of k (4 for the integer ones, module
    doc; 2 for bf16's ``vdpbf16ps``); 0 for a grouped conv, a multiple already, or fewer
    than 3 channels (the padded conv would do twice the work or more)."""
    if channels != weight_channels or channels % group == 0 or channels < 3:
        return 0
    return -channels % group


def _scalar(consts: dict, v: str) -> int | None:
    """The one value of constant ``v`` when every element is the same, else None."""
    c = consts.get(v)
    if c is None or c.size == 0:
        return None
    flat = c.reshape(-1)
    return int(flat[0]) if np.all(flat == flat[0]) else None


class _Split(GraphEdit):
    def rewrite(self, n: Node) -> list[Node] | None:
        x, w, x_zp, w_zp = n.inputs[:4]
        weight = self.consts.get(w)
        za, zb = _scalar(self.consts, x_zp), _scalar(self.consts, w_zp)
        if weight is None or za is None or zb != 0:
            return None
        conv = n.op == "conv_integer"
        if conv and (n.attr("layout", "NCHW") != "NCHW" or weight.ndim != 4):
            return None
        extra = channel_padding(self.types[x].shape[1], weight.shape[1]) if conv else 0
        if not za and self.consts[w_zp].size == 1 and not extra:
            return None      # a dot product already
        zero = self.constant(f"{x}_zp0", np.zeros((), np.int32))
        nodes: list[Node] = []
        attrs = dict(n.attrs)
        if conv:
            colsum = weight.astype(np.int64).sum(axis=(1, 2, 3))
            shape: tuple[int, ...] = (weight.shape[0], 1, 1)
            pt, pl, pb, pr = n.attr("pads")
            if (za and (pt or pl or pb or pr)) or extra:
                t = self.types[x]
                padded = self.fresh(f"{x}_padzp")
                self.types[padded] = TensorType(
                    (t.shape[0], t.shape[1] + extra, t.shape[2] + pt + pb,
                     t.shape[3] + pl + pr), t.dtype)
                nodes.append(Node("pad", (x,), (padded,), attrs_of(
                    {"pads": (0, 0, pt, pl, 0, extra, pb, pr), "value": za}),
                    f"{n.name}_pad"))
                x = padded
                attrs["pads"] = (0, 0, 0, 0)
            if extra:   # the added channels' weights are 0: any byte there adds nothing
                w = self.constant(f"{w}_c{weight.shape[1] + extra}", np.pad(
                    weight, ((0, 0), (0, extra), (0, 0), (0, 0))))
        else:
            if weight.ndim != 2:
                return None
            colsum = weight.astype(np.int64).sum(axis=0)
            shape = (weight.shape[1],)
        out = n.output
        if not za:
            nodes.append(Node(n.op, (x, w, zero, zero), n.outputs, attrs_of(attrs), n.name))
            return nodes
        dot = self.fresh(f"{out}_dot")
        self.types[dot] = self.types[out]
        correction = (-za * colsum).astype(np.int32).reshape(shape)
        nodes.append(Node(n.op, (x, w, zero, zero), (dot,), attrs_of(attrs), n.name))
        nodes.append(Node("add", (dot, self.constant(f"{out}_zpsum", correction)), (out,),
                          (), f"{n.name}_zp"))
        return nodes


def fold_zero_points(g: Graph) -> Graph:
    """``g`` with each conv_integer / matmul_integer of a constant weight, a weight zero
    point of 0 and one activation zero point computed as a plain dot product plus the
    constant ``-x_zp * colsum(w)``, a conv's input channels padded to a multiple of 4
    (module doc)."""
    if not any(n.op in INTEGER_ANCHORS for n in g.nodes):
        return g
    edit = _Split(g)
    nodes: list[Node] = []
    changed = False
    for n in g.nodes:
        new = edit.rewrite(n) if n.op in INTEGER_ANCHORS else None
        if new is None:
            nodes.append(n)
        else:
            nodes.extend(new)
            changed = True
    if not changed:
        return g
    return g.replace(nodes=tuple(nodes), constants=edit.consts, types=edit.types)
