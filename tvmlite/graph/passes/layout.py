"""Layout: one data layout for the whole graph, NHWC by default.

Why NHWC: a convolution vectorizes over its output channels there (64, 128, 256...:
whole vectors on every target) and reads a contiguous vector of input channels per
pixel, where NCHW rows of 7, 13 or 55 pixels do not fill a vector; the depthwise convs
and pools of a MobileNet vectorize over channels too. So every conv, pool and LRN of
the graph computes in NHWC (its ``layout`` attribute), its weights transposed once here
to (KH, KW, CI/group, CO) -- (KH, KW, C, multiplier) for a depthwise conv -- and the
values between them stay NHWC: elementwise nodes compute in the layout of their input
(a per-channel constant is transposed with it), concat, softmax, reductions, pads and
slices have their axes renumbered, a transpose has its permutation composed, and a
reshape that does not depend on the order (C or H*W of 1, as before a classifier) reads
the NHWC value directly. Anything else -- and every model output -- reads the value in
NCHW, through a transpose inserted once per value; model inputs are transposed to NHWC
once where a conv or pool first needs them. So conversions sit only at the model's
inputs and outputs and at the few ops (a general reshape, a matmul on a 4-D value) that
need the model's own order, and each one is an injective node that fuses into a kernel.

``choose_layout(g, "NCHW")`` keeps the model's own layout (nothing moves). NHWC is a
rule of thumb: ``graph.decisions.decide_layout`` builds both and keeps the faster.
"""
from __future__ import annotations

from typing import Any

from tvmlite.graph.ir import Graph, GraphError, Node, TensorType, attrs_of
from tvmlite.graph.ops import ELEMENTWISE
from tvmlite.graph.passes.edit import GraphEdit

__all__ = ["LAYOUTS", "DEFAULT_LAYOUT", "choose_layout", "TO_NHWC", "TO_NCHW"]

LAYOUTS = ("NHWC", "NCHW")
DEFAULT_LAYOUT = "NHWC"
TO_NHWC = (0, 2, 3, 1)   # NHWC axis d is NCHW axis TO_NHWC[d]
TO_NCHW = (0, 3, 1, 2)   # NCHW axis a sits at NHWC position TO_NCHW[a]
WINDOWED = ("conv", "conv_integer", "max_pool", "avg_pool", "lrn")
# the ops ``_Rewrite.reindexed`` renumbers the axes of
REINDEXED = ("concat", "softmax", "reduce_mean", "reduce_sum", "transpose", "reshape", "pad",
             "slice")


def choose_layout(g: Graph, layout: str = DEFAULT_LAYOUT) -> Graph:
    """``g`` computing its convs, pools and LRNs in ``layout`` (see the module doc)."""
    if layout not in LAYOUTS:
        raise GraphError(f"layout must be one of {LAYOUTS}, got {layout!r}")
    for n in g.nodes:
        if n.op in WINDOWED and len(g.types[n.inputs[0]].shape) != 4:
            raise GraphError(f"node {n.name!r} ({n.op}): input {n.inputs[0]!r} is not 4-D "
                             f"NCHW ({g.types[n.inputs[0]]})")
    if not any(n.op in WINDOWED for n in g.nodes):
        return g         # no op whose layout matters
    if layout == "NCHW":
        return g if g.layout == layout else g.replace(layout=layout)
    return _Rewrite(g).run()


def _permute(shape: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(shape[a] for a in TO_NHWC)


class _Rewrite(GraphEdit):
    """One walk over the nodes; ``nhwc`` maps an NCHW value to its NHWC twin, ``plain``
    holds the values that exist in the model's own order."""

    def __init__(self, g: Graph):
        super().__init__(g)
        self.nodes: list[Node] = []
        self.nhwc: dict[str, str] = {}
        self.plain: set[str] = set(g.inputs) | set(g.constants)

    # -- conversions ---------------------------------------------------------------------

    def to_nhwc(self, v: str) -> str:
        """The NHWC twin of the 4-D value ``v`` (made once)."""
        if v in self.nhwc:
            return self.nhwc[v]
        if v in self.consts:
            twin = self.constant(f"{v}_nhwc", self.consts[v].transpose(TO_NHWC))
        else:
            twin = self.fresh(f"{v}_nhwc")
            self.types[twin] = TensorType(_permute(self.types[v].shape), self.types[v].dtype)
            self.nodes.append(Node("transpose", (v,), (twin,), attrs_of({"perm": TO_NHWC}),
                                   f"{v}_to_nhwc"))
        self.nhwc[v] = twin
        return twin

    def to_plain(self, v: str) -> str:
        """``v`` in the model's own order (a transpose back, made once)."""
        if v in self.plain or not v:
            return v
        self.nodes.append(Node("transpose", (self.nhwc[v],), (v,),
                               attrs_of({"perm": TO_NCHW}), f"{v}_to_nchw"))
        self.plain.add(v)
        return v

    def keep(self, n: Node) -> None:
        """``n`` as it is, reading every input in the model's order."""
        self.nodes.append(Node(n.op, tuple(self.to_plain(i) for i in n.inputs), n.outputs,
                               n.attrs, n.name))
        self.plain.update(n.outputs)

    def emit(self, n: Node, inputs: tuple[str, ...], nhwc_out: bool, **attrs: Any) -> None:
        """``n`` over ``inputs`` with ``attrs`` changed; its output NHWC or plain."""
        merged = dict(n.attrs)
        merged.update(attrs)
        out = n.output
        if nhwc_out:
            out = self.fresh(f"{n.output}_nhwc")
            t = self.types[n.output]
            self.types[out] = TensorType(_permute(t.shape), t.dtype)
            self.nhwc[n.output] = out
        else:
            self.plain.add(out)
        self.nodes.append(Node(n.op, inputs, (out,), attrs_of(merged), n.name))

    # -- the walk ------------------------------------------------------------------------

    def run(self) -> Graph:
        for n in self.g.nodes:
            self.visit(n)
        outputs = tuple(self.to_plain(o) for o in self.g.outputs)
        return self.g.replace(nodes=tuple(self.nodes), types=self.types, constants=self.consts,
                              outputs=outputs, layout="NHWC")

    def is_nhwc(self, v: str) -> bool:
        return bool(v) and v in self.nhwc and v not in self.consts

    def visit(self, n: Node) -> None:
        rank4 = len(self.types[n.output].shape) == 4
        runtime = [i for i in n.inputs if i and i not in self.consts]
        if n.op in WINDOWED:
            self.windowed(n)
        elif n.op in ELEMENTWISE and rank4 and any(self.is_nhwc(i) for i in runtime):
            self.elementwise(n)
        elif runtime and all(self.is_nhwc(i) for i in runtime) and self.reindexed(n):
            return
        else:
            self.keep(n)

    def windowed(self, n: Node) -> None:
        x = self.to_nhwc(n.inputs[0])
        if n.op not in ("conv", "conv_integer"):
            self.emit(n, (x,), True, layout="NHWC")
            return
        w = self.consts.get(n.inputs[1])
        if w is None:    # run-time weights: this conv stays in the model's layout
            self.keep(n)
            return
        co, cig, kh, kw = w.shape
        c_in, group = self.types[n.inputs[0]].shape[1], n.attr("group")
        if n.op == "conv_integer":    # (KH, KW, CI/group, CO) for every group; zero points
            wname = self.constant(f"{n.inputs[1]}_hwio", w.transpose(2, 3, 1, 0))   # as they are
            self.emit(n, (x, wname, *n.inputs[2:]), True, layout="NHWC")
            return
        if group > 1 and group == c_in and cig == 1:     # depthwise: (KH, KW, C, m)
            hw = w.reshape(c_in, co // c_in, kh, kw).transpose(2, 3, 0, 1)
            extra = {"depthwise": 1}
        else:                                           # (KH, KW, CI/group, CO)
            hw = w.transpose(2, 3, 1, 0)
            extra = {}
        wname = self.constant(f"{n.inputs[1]}_hwio", hw)
        self.emit(n, (x, wname), True, layout="NHWC", **extra)

    def elementwise(self, n: Node) -> None:
        ins: list[str] = []
        for i in n.inputs:
            if not i:
                ins.append(i)
            elif i in self.consts:
                c = self.consts[i]
                if c.size == 1 or c.ndim == 0:
                    ins.append(i)
                    continue
                full = c.reshape((1,) * (4 - c.ndim) + c.shape)
                ins.append(self.constant(f"{i}_nhwc", full.transpose(TO_NHWC)))
            elif len(self.types[i].shape) == 4:
                ins.append(self.to_nhwc(i))
            else:        # a lower-rank run-time operand: broadcast in the model's order
                self.keep(n)
                return
        self.emit(n, tuple(ins), True)

    def reindexed(self, n: Node) -> bool:
        """``n`` over NHWC inputs with its axes renumbered, if it has a rule."""
        x = n.inputs[0]
        if len(self.types[x].shape) != 4 or n.op not in REINDEXED:
            return False     # (an op with no rule, e.g. a matmul, reads NCHW)
        pos = TO_NCHW
        twins = tuple(self.to_nhwc(i) if i else i for i in n.inputs)
        if n.op == "concat":
            self.emit(n, twins, True, axis=pos[n.attr("axis")])
        elif n.op == "softmax" and pos[n.attr("axis")] == 3:
            self.emit(n, twins, True, axis=3)
        elif n.op in ("reduce_mean", "reduce_sum"):
            axes = tuple(sorted(pos[a] for a in n.attr("axes")))
            if n.attr("keepdims"):
                self.emit(n, twins, True, axes=axes)
                return True
            left = [a for a in range(4) if a not in n.attr("axes")]
            if [a for a in TO_NHWC if a in left] != left:
                return False     # the kept axes would come out in another order
            self.emit(n, twins, False, axes=axes)
        elif n.op == "transpose":
            self.emit(n, twins, False, perm=tuple(pos[p] for p in n.attr("perm")))
        elif n.op == "reshape":
            _, c, h, w = self.types[x].shape
            if c != 1 and h * w != 1:
                return False     # the flat order differs between the layouts
            self.emit(n, twins, False)
        elif n.op == "pad":
            p = n.attr("pads")
            self.emit(n, twins, True, pads=tuple(p[a] for a in TO_NHWC) +
                      tuple(p[4 + a] for a in TO_NHWC))
        elif n.op == "slice":
            self.emit(n, twins, True, ranges=tuple((pos[ax], b, s, ln) for ax, b, s, ln in
                                                  n.attr("ranges")))
        else:
            return False
        return True
