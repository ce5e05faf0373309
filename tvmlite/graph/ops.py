"""The graph's operators: what kind each is, its output type, and its numpy meaning.

Kinds decide fusion: an ``anchor`` (conv, matmul, pool, reduction, softmax, LRN,
layer norm) starts a kernel; ``elementwise`` and ``injective`` nodes join the kernel of
their input; ``shape`` ops (Shape, ConstantOfShape, Range) exist only on constants and
are always folded. ``evaluate`` is the numpy reference of each op: constant folding
runs it, and it is the graph's interpreter in tests. Attributes are already normalized
by the frontend (pads as (top, left, bottom, right), slices per axis, no opset left).
"""
from __future__ import annotations

import math
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from tvmlite.graph.ir import GraphError, Node, TensorType

__all__ = ["KIND", "infer", "evaluate", "flops", "conv_out", "pool_out", "check_window",
           "nchw_weight", "QUANT_ELEMENTWISE", "INTEGER_ANCHORS"]

UNARY: dict[str, Callable[..., np.ndarray]] = {
    "relu": lambda x: np.maximum(x, 0),
    "sigmoid": lambda x: 1 / (1 + np.exp(-x)),
    "tanh": np.tanh, "exp": np.exp, "log": np.log, "sqrt": np.sqrt, "neg": np.negative,
    "abs": np.abs,
}
BINARY: dict[str, Callable[..., np.ndarray]] = {
    "add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide,
    "pow": np.power, "max": np.maximum, "min": np.minimum, "equal": np.equal,
}
# quantize(x, scale, zp; to), dequantize(q, scale, zp), requantize(acc, multiplier, zp;
# to, relu): operands broadcast as numpy's (a per-axis scale is reshaped to broadcast)
QUANT_ELEMENTWISE = {"quantize", "dequantize", "requantize"}
ELEMENTWISE = {*UNARY, *BINARY, "erf", "leaky_relu", "clip", "hard_sigmoid", "hard_swish",
               "gelu", "cast", "where", "batch_norm", "identity", *QUANT_ELEMENTWISE}
INJECTIVE = {"reshape", "transpose", "concat", "slice", "gather", "expand", "pad"}
# conv_integer(x, w, x_zp, w_zp), matmul_integer(a, b, a_zp, b_zp): int32 sums
INTEGER_ANCHORS = {"conv_integer", "matmul_integer"}
ANCHORS = {"conv", "matmul", "max_pool", "avg_pool", "lrn", "softmax", "reduce_mean",
           "reduce_sum", "layer_norm", *INTEGER_ANCHORS}
SHAPE_OPS = {"shape", "constant_of_shape", "range"}
KIND: dict[str, str] = {**{o: "elementwise" for o in ELEMENTWISE},
                        **{o: "injective" for o in INJECTIVE},
                        **{o: "anchor" for o in ANCHORS}, **{o: "shape" for o in SHAPE_OPS}}


def conv_out(n: int, k: int, s: int, p0: int, p1: int, d: int) -> int:
    return (n + p0 + p1 - d * (k - 1) - 1) // s + 1


def check_window(node: Node, sizes: Sequence[int], windows: Sequence[int],
                 pads: Sequence[int]) -> None:
    """A window larger than its padded input has no output: ONNX leaves it undefined and
    onnxruntime returns one element (C's truncating division), so refuse it by name
    instead of computing either."""
    for axis, (n, k) in enumerate(zip(sizes, windows)):
        padded = n + pads[axis] + pads[axis + len(sizes)]
        if k > padded:
            raise GraphError(f"node {node.name or node.op!r} ({node.op}): its window {k} is "
                             f"larger than its padded input {padded} along spatial axis "
                             f"{axis}")


def pool_out(n: int, k: int, s: int, p0: int, p1: int, ceil: bool) -> int:
    """A pool's output size; with ``ceil`` (ceil_mode) a last window that would start in
    the end padding is dropped, as ONNX (and PyTorch) define it."""
    num = n + p0 + p1 - k
    out = (-(-num // s) if ceil else num // s) + 1
    if ceil and (out - 1) * s >= n + p0:
        out -= 1
    return out


def _erf(x: np.ndarray) -> np.ndarray:
    return np.vectorize(math.erf, otypes=[x.dtype])(x) if x.size else x


def _broadcast(shapes: Sequence[tuple[int, ...]], node: Node) -> tuple[int, ...]:
    try:
        return tuple(int(d) for d in np.broadcast_shapes(*shapes))
    except ValueError as err:
        raise GraphError(f"node {node.name or node.op!r} ({node.op}): shapes "
                         f"{list(shapes)} do not broadcast") from err


def nchw_weight(node: Node, w: Any) -> Any:
    """The (CO, CI/group, KH, KW) form of an NHWC conv's weight array ``w``: the layout
    pass stores it as (KH, KW, CI/group, CO), a depthwise conv's as (KH, KW, C, m)."""
    if node.attr("depthwise"):
        kh, kw, c, m = w.shape
        return w.transpose(2, 3, 0, 1).reshape(c * m, 1, kh, kw)
    return w.transpose(3, 2, 0, 1)


def _nhwc(node: Node) -> bool:
    return node.attr("layout") == "NHWC"


def _as_nchw(t: TensorType) -> TensorType:
    return TensorType(tuple(t.shape[a] for a in (0, 3, 1, 2)), t.dtype)


def _as_nhwc(t: TensorType) -> TensorType:
    return TensorType(tuple(t.shape[a] for a in (0, 2, 3, 1)), t.dtype)


def infer(node: Node, types: Mapping[str, TensorType]) -> TensorType:
    """The type of ``node``'s output from its inputs' types (shape ops are folded before
    this is asked, so none is inferred here). An NHWC windowed op (``layout`` attribute,
    set by the layout pass) is the NCHW one with its axes permuted."""
    ins = [types[i] for i in node.inputs if i]
    a, op = ins[0], node.op
    if op in QUANT_ELEMENTWISE or op in INTEGER_ANCHORS:
        return _quant_type(node, types)
    if _nhwc(node):
        nchw = {node.inputs[0]: _as_nchw(a)}
        if op == "conv":
            kh, kw, c, m = ins[1].shape
            wshape = (c * m, 1, kh, kw) if node.attr("depthwise") else (m, c, kh, kw)
            nchw[node.inputs[1]] = TensorType(wshape, ins[1].dtype)
        plain = Node(op, node.inputs, node.outputs,
                     tuple((k, v) for k, v in node.attrs if k not in ("layout", "depthwise")))
        return _as_nhwc(infer(plain, nchw))
    if op in BINARY or op == "where":
        shape = _broadcast([t.shape for t in ins], node)
        dtype = "bool" if op == "equal" else ins[-1].dtype
        return TensorType(shape, dtype)
    if op == "cast":
        return TensorType(a.shape, node.attr("to"))
    if op in ELEMENTWISE:
        return a
    if op == "conv":
        (n, _, h, w), (co, _, kh, kw) = a.shape, ins[1].shape
        (sh, sw), (pt, pl, pb, pr), (dh, dw) = (node.attr("strides"), node.attr("pads"),
                                                node.attr("dilations"))
        check_window(node, (h, w), (dh * (kh - 1) + 1, dw * (kw - 1) + 1), (pt, pl, pb, pr))
        return TensorType((n, co, conv_out(h, kh, sh, pt, pb, dh),
                           conv_out(w, kw, sw, pl, pr, dw)), a.dtype)
    if op in ("max_pool", "avg_pool"):
        n, c, h, w = a.shape
        (kh, kw), (sh, sw), (pt, pl, pb, pr) = (node.attr("kernel"), node.attr("strides"),
                                                node.attr("pads"))
        ceil = bool(node.attr("ceil_mode", 0))
        check_window(node, (h, w), (kh, kw), (pt, pl, pb, pr))
        return TensorType((n, c, pool_out(h, kh, sh, pt, pb, ceil),
                           pool_out(w, kw, sw, pl, pr, ceil)), a.dtype)
    if op == "matmul":
        sa, sb = a.shape, ins[1].shape
        sa2, sb2 = (sa if len(sa) > 1 else (1,) + sa), (sb if len(sb) > 1 else sb + (1,))
        if sa2[-1] != sb2[-2]:
            raise GraphError(f"node {node.name or op!r} (MatMul): inner sizes differ, "
                             f"{sa} @ {sb}")
        batch = _broadcast([sa2[:-2], sb2[:-2]], node)
        shape = batch + (sa2[-2], sb2[-1])
        if len(sa) == 1:
            shape = shape[:-2] + shape[-1:]
        if len(sb) == 1:
            shape = shape[:-1]
        return TensorType(shape, a.dtype)
    if op in ("reduce_mean", "reduce_sum"):
        axes = node.attr("axes")
        keep = node.attr("keepdims")
        shape = tuple(1 if d in axes else s for d, s in enumerate(a.shape) if keep or d not in axes)
        return TensorType(shape, a.dtype)
    if op in ("lrn", "softmax", "layer_norm"):
        return a
    if op == "reshape":
        return TensorType(node.attr("shape"), a.dtype)
    if op == "transpose":
        return TensorType(tuple(a.shape[p] for p in node.attr("perm")), a.dtype)
    if op == "concat":
        ax = node.attr("axis")
        dims = list(a.shape)
        dims[ax] = sum(t.shape[ax] for t in ins)
        return TensorType(tuple(dims), a.dtype)
    if op == "slice":
        dims = list(a.shape)
        for ax, _, _, length in node.attr("ranges"):
            dims[ax] = length
        return TensorType(tuple(dims), a.dtype)
    if op == "gather":
        ax = node.attr("axis")
        ishape = node.attr("indices_shape") if len(ins) == 1 else ins[1].shape
        return TensorType(a.shape[:ax] + tuple(ishape) + a.shape[ax + 1:], a.dtype)
    if op == "expand":
        return TensorType(_broadcast([a.shape, node.attr("shape")], node), a.dtype)
    if op == "pad":
        pads = node.attr("pads")
        r = len(a.shape)
        return TensorType(tuple(s + pads[d] + pads[d + r] for d, s in enumerate(a.shape)),
                          a.dtype)
    raise GraphError(f"node {node.name or op!r}: no type rule for op {op!r}")


def _pool_ref(node: Node, x: np.ndarray) -> np.ndarray:
    (kh, kw), (sh, sw), (pt, pl, pb, pr) = (node.attr("kernel"), node.attr("strides"),
                                            node.attr("pads"))
    n, c, h, w = x.shape
    oh = pool_out(h, kh, sh, pt, pb, bool(node.attr("ceil_mode", 0)))
    ow = pool_out(w, kw, sw, pl, pr, bool(node.attr("ceil_mode", 0)))
    big = max(0, (oh - 1) * sh + kh - h - pt), max(0, (ow - 1) * sw + kw - w - pl)
    fill = -np.inf if node.op == "max_pool" else 0.0
    xp = np.pad(x, ((0, 0), (0, 0), (pt, big[0]), (pl, big[1])), constant_values=fill)
    ones = np.pad(np.ones((h, w), x.dtype), ((pt, big[0]), (pl, big[1])))
    if node.attr("count_include_pad", 0):
        ones = np.pad(np.ones((h + pt + pb, w + pl + pr), x.dtype),
                      ((0, big[0] + pt - pb), (0, big[1] + pl - pr)))
    out = np.empty((n, c, oh, ow), x.dtype)
    for i in range(oh):
        for j in range(ow):
            win = xp[:, :, i * sh:i * sh + kh, j * sw:j * sw + kw]
            if node.op == "max_pool":
                out[:, :, i, j] = win.max(axis=(2, 3))
            else:
                out[:, :, i, j] = win.sum(axis=(2, 3)) / ones[i * sh:i * sh + kh,
                                                              j * sw:j * sw + kw].sum()
    return out


def _conv_ref(node: Node, x: np.ndarray, w: np.ndarray) -> np.ndarray:
    (sh, sw), (pt, pl, pb, pr), (dh, dw) = (node.attr("strides"), node.attr("pads"),
                                            node.attr("dilations"))
    g = node.attr("group")
    xp = np.pad(x, ((0, 0), (0, 0), (pt, pb), (pl, pr)))
    n, ci = x.shape[:2]
    co, cig, kh, kw = w.shape
    oh = conv_out(x.shape[2], kh, sh, pt, pb, dh)
    ow = conv_out(x.shape[3], kw, sw, pl, pr, dw)
    out = np.zeros((n, co, oh, ow), np.float64)
    cog = co // g
    for gi in range(g):
        xs = xp[:, gi * cig:(gi + 1) * cig]
        ws = w[gi * cog:(gi + 1) * cog].astype(np.float64)
        for r in range(kh):
            for s in range(kw):
                patch = xs[:, :, r * dh:r * dh + (oh - 1) * sh + 1:sh,
                           s * dw:s * dw + (ow - 1) * sw + 1:sw]
                out[:, gi * cog:(gi + 1) * cog] += np.einsum("nchw,fc->nfhw", patch,
                                                             ws[:, :, r, s])
    return out.astype(x.dtype)


def evaluate(node: Node, args: Sequence[np.ndarray]) -> np.ndarray:
    """``node`` computed by numpy on ``args`` (its inputs, in order)."""
    op = node.op
    a: Any = args[0] if args else None
    if _nhwc(node):   # the NCHW reference, between transposes
        nchw = [a.transpose(0, 3, 1, 2)] + ([nchw_weight(node, args[1])] if op == "conv" else [])
        plain = Node(op, node.inputs, node.outputs,
                     tuple((k, v) for k, v in node.attrs if k not in ("layout", "depthwise")))
        return np.ascontiguousarray(evaluate(plain, nchw).transpose(0, 2, 3, 1))
    if op in QUANT_ELEMENTWISE or op in INTEGER_ANCHORS:
        return _quant_ref(node, args)
    if op in UNARY:
        return UNARY[op](a).astype(a.dtype)
    if op in BINARY:
        out = BINARY[op](a, args[1])
        return out if op == "equal" else out.astype(np.result_type(a, args[1]))
    table: dict[str, Callable[[], Any]] = {
        "erf": lambda: _erf(a),
        "identity": lambda: a,
        "leaky_relu": lambda: np.where(a > 0, a, a * node.attr("alpha")).astype(a.dtype),
        "clip": lambda: np.clip(a, node.attr("min"), node.attr("max")).astype(a.dtype),
        "hard_sigmoid": lambda: np.clip(a * node.attr("alpha") + node.attr("beta"), 0, 1
                                        ).astype(a.dtype),
        "hard_swish": lambda: (a * np.clip(a / 6 + 0.5, 0, 1)).astype(a.dtype),
        "gelu": lambda: (0.5 * a * (1 + _erf(a / np.sqrt(2).astype(a.dtype)))).astype(a.dtype),
        "cast": lambda: a.astype(node.attr("to")),
        "where": lambda: np.where(a, args[1], args[2]),
        "batch_norm": lambda: _batch_norm(node, *args),
        "conv": lambda: _conv_ref(node, a, args[1]),
        "matmul": lambda: np.matmul(a, args[1]),
        "max_pool": lambda: _pool_ref(node, a),
        "avg_pool": lambda: _pool_ref(node, a),
        "softmax": lambda: _softmax(a, node.attr("axis")),
        "reduce_mean": lambda: a.mean(axis=node.attr("axes"), keepdims=bool(node.attr("keepdims"))),
        "reduce_sum": lambda: a.sum(axis=node.attr("axes"), keepdims=bool(node.attr("keepdims"))),
        "layer_norm": lambda: _layer_norm(node, *args),
        "lrn": lambda: _lrn(node, a),
        "reshape": lambda: a.reshape(node.attr("shape")),
        "transpose": lambda: a.transpose(node.attr("perm")),
        "concat": lambda: np.concatenate(args, axis=node.attr("axis")),
        "slice": lambda: a[_slices(node, a.ndim)],
        "gather": lambda: np.take(a, _indices(node, args), axis=node.attr("axis")),
        "expand": lambda: a * np.ones(node.attr("shape"), a.dtype),
        "pad": lambda: np.pad(a, [(p, q) for p, q in zip(node.attr("pads")[:a.ndim],
                                                           node.attr("pads")[a.ndim:])],
                              constant_values=node.attr("value", 0)),
        "shape": lambda: np.array(a.shape, np.int64),
        "constant_of_shape": lambda: np.full(tuple(int(d) for d in a), node.attr("value"),
                                             node.attr("dtype")),
        "range": lambda: np.arange(a.item(), args[1].item(), args[2].item()).astype(a.dtype),
    }
    if op not in table:
        raise GraphError(f"node {node.name or op!r}: no numpy meaning for op {op!r}")
    return np.asarray(table[op]())


def _indices(node: Node, args: Sequence[np.ndarray]) -> np.ndarray:
    if len(args) > 1:
        return args[1].astype(np.int64)
    return np.array(node.attr("indices"), np.int64).reshape(node.attr("indices_shape"))


def _slices(node: Node, rank: int) -> tuple:
    out = [slice(None)] * rank
    for ax, begin, step, length in node.attr("ranges"):
        out[ax] = slice(begin, begin + step * length if begin + step * length >= 0 else None,
                        step)
    return tuple(out)


def _softmax(x: np.ndarray, axis: int) -> np.ndarray:
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return (e / e.sum(axis=axis, keepdims=True)).astype(x.dtype)


def _batch_norm(node: Node, x: np.ndarray, scale: np.ndarray, bias: np.ndarray,
                mean: np.ndarray, var: np.ndarray) -> np.ndarray:
    shape = (1, -1) + (1,) * (x.ndim - 2)
    k = scale / np.sqrt(var + node.attr("epsilon"))
    return (x * k.reshape(shape) + (bias - mean * k).reshape(shape)).astype(x.dtype)


def _layer_norm(node: Node, x: np.ndarray, scale: np.ndarray, *bias: np.ndarray) -> np.ndarray:
    axes = tuple(range(node.attr("axis"), x.ndim))
    mu = x.mean(axis=axes, keepdims=True)
    var = ((x - mu) ** 2).mean(axis=axes, keepdims=True)
    y = (x - mu) / np.sqrt(var + node.attr("epsilon")) * scale
    return (y + bias[0] if bias else y).astype(x.dtype)


def _lrn(node: Node, x: np.ndarray) -> np.ndarray:
    size = node.attr("size")
    sq = np.pad(x * x, ((0, 0), ((size - 1) // 2, size // 2), (0, 0), (0, 0)))
    acc = sum(sq[:, i:i + x.shape[1]] for i in range(size))
    return (x / (node.attr("bias") + node.attr("alpha") / size * acc) ** node.attr("beta")
            ).astype(x.dtype)


def flops(node: Node, types: Mapping[str, TensorType]) -> int:
    """Floating-point operations of one run of ``node`` (a multiply-add counts 2)."""
    out = types[node.output]
    n_out = math.prod(out.shape)
    if node.op in ("conv", "conv_integer"):
        w = types[node.inputs[1]].shape
        if _nhwc(node):
            kh, kw, cig = w[0], w[1], (1 if node.attr("depthwise") else w[2])
        else:
            cig, kh, kw = w[1:]
        return 2 * n_out * cig * kh * kw
    if node.op in ("matmul", "matmul_integer"):
        k = types[node.inputs[0]].shape[-1]
        return 2 * n_out * k
    if node.op in ("max_pool", "avg_pool"):
        kh, kw = node.attr("kernel")
        return n_out * kh * kw
    if node.op in ("reduce_mean", "reduce_sum"):
        return math.prod(types[node.inputs[0]].shape)
    if node.op in ("softmax", "layer_norm", "lrn"):
        return 5 * n_out
    if KIND.get(node.op) == "elementwise":
        return n_out
    return 0


# -- the quantized ops -------------------------------------------------------------------

def _float_twin(node: Node) -> Node:
    """conv_integer / matmul_integer as the float op over its first two inputs."""
    return Node(node.op.removesuffix("_integer"), node.inputs[:2], node.outputs, node.attrs,
                node.name)


def _quant_type(node: Node, types: Mapping[str, TensorType]) -> TensorType:
    if node.op in INTEGER_ANCHORS:
        return TensorType(infer(_float_twin(node), types).shape, "int32")
    shape = _broadcast([types[i].shape for i in node.inputs], node)
    return TensorType(shape, "float32" if node.op == "dequantize" else node.attr("to"))


def _to_int(node: Node, f: np.ndarray, zp: np.ndarray, relu: bool = False) -> np.ndarray:
    """ONNX's saturating, half-to-even rounding of ``f`` (float32) around ``zp``."""
    info = np.iinfo(node.attr("to"))
    q = np.rint(f).astype(np.int64) + zp.astype(np.int64)
    lo = np.maximum(info.min, zp.astype(np.int64)) if relu else info.min
    return np.clip(q, lo, info.max).astype(node.attr("to"))


def _quant_ref(node: Node, args: Sequence[np.ndarray]) -> np.ndarray:
    """The numpy meaning of the quantized ops, in ONNX's (and onnxruntime's) arithmetic:
    float32 scales, int64 sums of zero-point-centered values."""
    x, s, zp = args[0], args[1], args[2]
    with np.errstate(invalid="ignore", over="ignore"):
        if node.op == "quantize":
            f = x.astype(np.float32) / s.astype(np.float32)
            return _to_int(node, np.nan_to_num(f, nan=0.0, posinf=2e9, neginf=-2e9), zp)
        if node.op == "dequantize":
            return ((x.astype(np.int64) - zp.astype(np.int64)).astype(np.float32)
                    * s.astype(np.float32))
        if node.op == "requantize":
            return _to_int(node, x.astype(np.float32) * s.astype(np.float32), zp,
                           bool(node.attr("relu", 0)))
    a = x.astype(np.int64) - args[2].astype(np.int64)      # matmul_integer / conv_integer
    w, w_zp = args[1].astype(np.int64), args[3].astype(np.int64)
    if node.op == "matmul_integer":
        return np.matmul(a, w - w_zp).astype(np.int32)
    if _nhwc(node):     # (N, H, W, C) and (KH, KW, CI/group, CO): computed in NCHW
        w = w - (w_zp.reshape(1, 1, 1, -1) if w_zp.size > 1 else w_zp)
        twin = Node("conv", node.inputs[:2], node.outputs,
                    tuple((k, v) for k, v in node.attrs if k != "layout"), node.name)
        out = _conv_ref(twin, a.transpose(0, 3, 1, 2), w.transpose(3, 2, 0, 1))
        return out.transpose(0, 2, 3, 1).astype(np.int32)
    w = w - (w_zp.reshape(-1, 1, 1, 1) if w_zp.size > 1 else w_zp)
    return _conv_ref(_float_twin(node), a, w).astype(np.int32)
