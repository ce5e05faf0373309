"""QDQ folding: DequantizeLinear -> Conv/MatMul/Gemm [-> bias add] [-> Relu] ->
QuantizeLinear becomes one integer kernel with its requantize epilogue.

A model quantized in the QDQ format (what ``onnxruntime.quantization.quantize_static``
writes) keeps its float ops and wraps them: every activation is quantized and at once
dequantized, every weight is an integer constant dequantized. Computed as written, each
conv runs in float32 between elementwise (de)quantize kernels: correct, and no faster
than the float model. onnxruntime fuses the pattern into QLinearConv / QLinearMatMul, and
so do we, into the nodes the QOperator converters make:

    conv(dequantize(xq, xs, xzp), dequantize(wq, ws, wzp)) [+ dequantize(bq, xs*ws, 0)]
        [relu] -> quantize(ys, yzp)
  = requantize(conv_integer(xq, wq, xzp, wzp) [+ bq], xs*ws/ys, yzp; relu)

which is the same integers QLinearConv computes (the multiplier in float32, in
onnxruntime's order). The weight may be per tensor or per output channel (axis 0 of a
conv weight, the last axis of a matmul's), the activations per tensor. A Gemm's
transposed weight (a transpose of the dequantized constant) is transposed as integers. A
bias that is a dequantized int32 constant at scale ``xs*ws`` is added as those integers;
any other constant bias is rounded to that scale. Whatever does not match stays as it
is: dequantize and quantize are elementwise float kernels, correct and slower.

Runs before constant folding: the importer keeps a DequantizeLinear of a constant as a
node so that the integer weight is still there to take (``fold_constants`` folds what
this pass leaves).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from tvmlite.graph.ir import Graph, Node, TensorType, attrs_of
from tvmlite.graph.ops import evaluate
from tvmlite.graph.passes.edit import GraphEdit

__all__ = ["fold_qdq"]


@dataclass(frozen=True)
class _Weight:
    q: np.ndarray          # the integer weight, in the float op's layout
    scale: np.ndarray      # (C,) or ()
    zp: np.ndarray         # (C,) or (), int32


class _Fold(GraphEdit):
    def __init__(self, g: Graph):
        super().__init__(g)
        self.prod = g.producers()
        self.cons = g.consumers()

    def single_use(self, v: str) -> bool:
        return len(self.cons.get(v, [])) == 1 and v not in self.g.outputs

    def value(self, v: str) -> np.ndarray | None:
        """``v``'s value when it is a constant or computed from constants only."""
        if v in self.consts:
            return self.consts[v]
        n = self.prod.get(v)
        if n is None:
            return None
        args = [self.value(i) for i in n.inputs if i]
        if any(a is None for a in args):
            return None
        return evaluate(n, args)  # type: ignore[arg-type]

    def dequantized(self, v: str) -> tuple[str, np.ndarray, np.ndarray] | None:
        """(integer value, scale, zero point) when ``v`` is a dequantize node's output
        with constant scale and zero point."""
        n = self.prod.get(v)
        if n is None or n.op != "dequantize":
            return None
        s, z = self.consts.get(n.inputs[1]), self.consts.get(n.inputs[2])
        if s is None or z is None:
            return None
        return n.inputs[0], s, z

    def weight(self, v: str, anchor: str, rank_out: int) -> _Weight | None:
        """The integer weight behind ``v``: a dequantized constant, or for a matmul its
        (1, 0) transpose (a Gemm's transB), with per-tensor or per-output-channel
        parameters."""
        perm = None
        n = self.prod.get(v)
        if anchor == "matmul" and n is not None and n.op == "transpose":
            perm = n.attr("perm")
            v = n.inputs[0]
        d = self.dequantized(v)
        if d is None or d[0] not in self.consts:
            return None
        q, s, z = self.consts[d[0]], d[1], d[2]
        if perm is not None:
            if perm != (1, 0) or q.ndim != 2:
                return None
            q = q.transpose(perm)
            s = s.transpose(perm) if s.ndim == 2 else s
            z = z.transpose(perm) if z.ndim == 2 else z
        if q.dtype.name not in ("uint8", "int8"):
            return None
        axis = 0 if anchor == "conv" else q.ndim - 1
        if anchor == "matmul" and q.ndim != 2:
            return None
        scale, zp = (self._per_channel(p, q.shape, axis) for p in (s, z))
        if scale is None or zp is None:
            return None
        return _Weight(q, scale.astype(np.float32), zp.astype(np.int32))

    @staticmethod
    def _per_channel(p: np.ndarray, shape: tuple, axis: int) -> np.ndarray | None:
        if p.size == 1:
            return p.reshape(())
        full = p.reshape((1,) * (len(shape) - p.ndim) + p.shape)
        if full.shape[axis] != p.size:
            return None
        return full.reshape(-1)

    def bias(self, v: str, acc_scale: np.ndarray, channels: int, axis: int,
             rank: int) -> np.ndarray | None:
        """The constant bias ``v`` as (C,) int32 at scale ``acc_scale`` (xs * ws)."""
        chain = v
        while chain in self.prod and self.prod[chain].op == "reshape":
            chain = self.prod[chain].inputs[0]
        d = self.dequantized(chain)
        value = self.value(v)
        if value is None:
            return None
        dims: tuple[int, ...] = (1,) * (rank - value.ndim) + tuple(value.shape)
        full = value.reshape(dims)
        if any(size != 1 for ax, size in enumerate(dims) if ax != axis % rank):
            return None
        b = np.broadcast_to(full.reshape(-1), (channels,))
        if d is not None and d[0] in self.consts and self.consts[d[0]].dtype == np.int32:
            q = self.consts[d[0]].reshape(-1)
            if (q.size == channels and not np.any(d[2]) and np.allclose(
                    d[1].astype(np.float32).reshape(-1), acc_scale, rtol=1e-6, atol=0)):
                return q.astype(np.int32)
        with np.errstate(all="ignore"):
            ints = np.rint(b.astype(np.float64) / acc_scale.astype(np.float64))
        if not np.all(np.isfinite(ints)) or np.abs(ints).max(initial=0) >= 2 ** 31:
            return None
        return ints.astype(np.int32)

    def match(self, q: Node) -> tuple[list[Node], set[int]] | None:
        """The nodes replacing ``q`` and the ids of the nodes they make dead."""
        ys, yzp = self.consts.get(q.inputs[1]), self.consts.get(q.inputs[2])
        if ys is None or yzp is None or ys.size != 1 or yzp.size != 1:
            return None
        dead: list[Node] = []
        v = q.inputs[0]
        n = self.prod.get(v)
        relu = False
        if n is not None and n.op == "relu" and self.single_use(v):
            relu, dead, v = True, [n], n.inputs[0]
            n = self.prod.get(v)
        bias_v = None
        if n is not None and n.op == "add" and self.single_use(v):
            a, b = n.inputs
            pa = self.prod.get(a)
            anchor_side = a if pa is not None and pa.op in ("conv", "matmul") else b
            bias_v = b if anchor_side == a else a
            dead.append(n)
            v = anchor_side
            n = self.prod.get(v)
        if n is None or n.op not in ("conv", "matmul") or not self.single_use(v):
            return None
        dead.append(n)
        x = self.dequantized(n.inputs[0])
        if x is None or x[0] in self.consts or x[1].size != 1 or x[2].size != 1:
            return None
        xq, xs, xzp = x
        out_t = self.types[n.output]
        rank = len(out_t.shape)
        if n.op == "matmul" and len(self.types[n.inputs[0]].shape) < 2:
            return None
        w = self.weight(n.inputs[1], n.op, rank)
        if w is None:
            return None
        axis = 1 if n.op == "conv" else rank - 1
        channels = out_t.shape[axis]
        acc_scale = (np.float32(xs.reshape(-1)[0]) * w.scale.reshape(-1)).astype(np.float32)
        acc_scale = np.broadcast_to(acc_scale, (channels,))
        return self.replacement(q, n, xq, xzp, w, bias_v, relu, ys, yzp, acc_scale, axis,
                                rank, channels, dead)

    def replacement(self, q: Node, n: Node, xq: str, xzp: np.ndarray, w: _Weight,
                    bias_v: str | None, relu: bool, ys: np.ndarray, yzp: np.ndarray,
                    acc_scale: np.ndarray, axis: int, rank: int, channels: int,
                    dead: list[Node]) -> tuple[list[Node], set[int]] | None:
        bias = None
        if bias_v is not None:
            bias = self.bias(bias_v, acc_scale, channels, axis, rank)
            if bias is None:
                return None
        integer_op = "conv_integer" if n.op == "conv" else "matmul_integer"
        wz = w.zp.reshape(-1)
        ins = (xq, self.constant(f"{n.inputs[1]}_q", w.q),
               self.constant(f"{xq}_zp", xzp.astype(np.int32).reshape(())),
               self.constant(f"{n.inputs[1]}_zp", wz[:1] if np.all(wz == wz[0]) else wz))
        acc = self.fresh(f"{q.output}_acc")
        self.types[acc] = TensorType(self.types[n.output].shape, "int32")
        nodes = [Node(integer_op, ins, (acc,), n.attrs, n.name)]
        shape = [1] * (rank - axis)
        shape[0] = channels
        if bias is not None:
            biased = self.fresh(f"{q.output}_bias")
            self.types[biased] = self.types[acc]
            nodes.append(Node("add", (acc, self.constant(f"{q.output}_b", bias.reshape(shape))),
                              (biased,), (), n.name))
            acc = biased
        mult = (acc_scale / np.float32(ys.reshape(-1)[0])).astype(np.float32)
        mult_c = mult[:1].reshape(()) if np.all(mult == mult[0]) else mult.reshape(shape)
        attrs: dict[str, Any] = {"to": q.attr("to"), "relu": int(relu)}
        nodes.append(Node("requantize", (acc, self.constant(f"{q.output}_mult", mult_c),
                                         self.constant(f"{q.output}_zp",
                                                       yzp.astype(np.int32).reshape(()))),
                          q.outputs, attrs_of(attrs), q.name))
        return nodes, {id(m) for m in dead}


def fold_qdq(g: Graph) -> Graph:
    """``g`` with every DequantizeLinear -> Conv/MatMul -> QuantizeLinear pattern (module
    doc) replaced by conv_integer / matmul_integer, the int32 bias and requantize."""
    if not any(n.op == "quantize" for n in g.nodes):
        return g
    f = _Fold(g)
    new: dict[int, list[Node]] = {}
    dead: set[int] = set()
    for q in g.nodes:
        if q.op != "quantize":
            continue
        found = f.match(q)
        if found is not None:
            new[id(q)], gone = found
            dead |= gone
    if not new:
        return g
    nodes: list[Node] = []
    for n in g.nodes:
        if id(n) in new:
            nodes.extend(new[id(n)])
        elif id(n) not in dead:
            nodes.append(n)
    return g.replace(nodes=tuple(nodes), constants=f.consts, types=f.types)
