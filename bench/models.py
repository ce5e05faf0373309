"""Whole models, untuned: tvmlite's fused default-schedule library against onnxruntime.

    python -m bench models [--models NAME ...] [--repeat N] [--quick] [--out DIR]

For ResNet-50, SqueezeNet, Inception-v1 and DenseNet-121 (the onnx wheel's light zoo
models with seeded random weights, ``tvmlite.frontend.light``), a MobileNet-V2 and a
BERT-base-like encoder layer (both built here with ``onnx.helper``, random weights):
ONNX nodes against fused kernels, build seconds, the arena against the sum of all
intermediates, the max error against onnxruntime, and the median latency of the
exported C library (default schedules, no records) against onnxruntime's with 2
intra-op threads, measured in the same process. Each model runs in a fresh process
(``--one NAME`` is that child). ``--quick`` is a smoke run: the two hand-built models
at toy sizes, three repeats.
"""
from __future__ import annotations

import json
import math
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from bench import args as bench_args
from bench import results

LIGHT = {"resnet50": "resnet50", "squeezenet": "squeezenet", "inception_v1": "inception_v1",
         "densenet121": "densenet121"}
MODELS = (*LIGHT, "mobilenet_v2", "bert_layer")


def _helpers() -> tuple[Any, Any, Any]:
    from onnx import TensorProto, helper, numpy_helper
    return TensorProto, helper, numpy_helper


class _Builder:
    """Nodes and seeded random initializers for a model written with onnx.helper."""

    def __init__(self, seed: int = 0):
        self.rng = np.random.default_rng(seed)
        self.nodes: list = []
        self.inits: list = []
        self.k = 0

    def name(self, base: str) -> str:
        self.k += 1
        return f"{base}{self.k}"

    def weight(self, *shape: int, scale: float | None = None, positive: bool = False) -> str:
        _, _, nh = _helpers()
        if positive:
            v = self.rng.uniform(0.5, 1.5, shape)
        else:
            fan = math.prod(shape[1:]) if len(shape) > 1 else 1
            v = self.rng.standard_normal(shape) * (scale or 1 / math.sqrt(fan))
        n = self.name("w")
        self.inits.append(nh.from_array(v.astype(np.float32), n))
        return n

    def const(self, value: Any, dtype: Any = np.float32) -> str:
        _, _, nh = _helpers()
        n = self.name("c")
        self.inits.append(nh.from_array(np.asarray(value, dtype), n))
        return n

    def op(self, op_type: str, inputs: list[str], **attrs: Any) -> str:
        _, oh, _ = _helpers()
        out = self.name(op_type.lower())
        self.nodes.append(oh.make_node(op_type, inputs, [out], name=out, **attrs))
        return out

    def model(self, name: str, x_shape: tuple[int, ...], out: str) -> Any:
        tp, oh, _ = _helpers()
        g = oh.make_graph(self.nodes, name, [oh.make_tensor_value_info("x", tp.FLOAT, x_shape)],
                          [oh.make_tensor_value_info(out, tp.FLOAT, None)], self.inits)
        m = oh.make_model(g, opset_imports=[oh.make_opsetid("", 17)])
        m.ir_version = 8
        return m


def mobilenet_v2(size: int = 224, width: float = 1.0) -> Any:
    """MobileNet-V2 (inverted residuals, ReLU6 as Clip, batch norms) at ``size``^2."""
    b = _Builder(0)

    def conv_bn(x: str, cin: int, cout: int, k: int, stride: int, group: int = 1,
                relu6: bool = True) -> str:
        w = b.weight(cout, cin // group, k, k)
        y = b.op("Conv", [x, w], pads=[k // 2] * 4, strides=[stride, stride], group=group)
        y = b.op("BatchNormalization", [y, b.weight(cout, positive=True),
                                        b.weight(cout, scale=0.1), b.weight(cout, scale=0.1),
                                        b.weight(cout, positive=True)])
        return b.op("Clip", [y, b.const(0.0), b.const(6.0)]) if relu6 else y

    def ch(c: int) -> int:
        return max(8, int(c * width) // 8 * 8)
    x, cin = conv_bn("x", 3, ch(32), 3, 2), ch(32)
    for t, c, n, s in ((1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2),
                       (6, 96, 3, 1), (6, 160, 3, 2), (6, 320, 1, 1)):
        for i in range(n):
            stride, cout, hidden = (s if i == 0 else 1), ch(c), cin * t
            y = conv_bn(x, cin, hidden, 1, 1) if t != 1 else x
            y = conv_bn(y, hidden, hidden, 3, stride, group=hidden)
            y = conv_bn(y, hidden, cout, 1, 1, relu6=False)
            x = b.op("Add", [y, x]) if stride == 1 and cin == cout else y
            cin = cout
    x = conv_bn(x, cin, 1280, 1, 1)
    x = b.op("Flatten", [b.op("GlobalAveragePool", [x])])
    out = b.op("Gemm", [x, b.weight(1000, 1280), b.weight(1000, scale=0.1)], transB=1)
    return b.model("mobilenet_v2", (1, 3, size, size), out)


def bert_layer(seq: int = 128, hidden: int = 768, heads: int = 12) -> Any:
    """One BERT-base encoder layer on hidden states (1, seq, hidden): self-attention,
    residual + LayerNorm, the GELU (Erf) feed-forward, residual + LayerNorm."""
    b = _Builder(1)
    d = hidden // heads

    def dense(x: str, cin: int, cout: int) -> str:
        return b.op("Add", [b.op("MatMul", [x, b.weight(cin, cout)]), b.weight(cout, scale=0.1)])

    def split_heads(x: str, perm: list[int]) -> str:
        r = b.op("Reshape", [x, b.const([1, seq, heads, d], np.int64)])
        return b.op("Transpose", [r], perm=perm)
    q = split_heads(dense("x", hidden, hidden), [0, 2, 1, 3])
    k = split_heads(dense("x", hidden, hidden), [0, 2, 3, 1])
    v = split_heads(dense("x", hidden, hidden), [0, 2, 1, 3])
    att = b.op("Div", [b.op("MatMul", [q, k]), b.const(math.sqrt(d))])
    ctx = b.op("MatMul", [b.op("Softmax", [att], axis=-1), v])
    ctx = b.op("Reshape", [b.op("Transpose", [ctx], perm=[0, 2, 1, 3]),
                           b.const([1, seq, hidden], np.int64)])
    x1 = b.op("LayerNormalization", [b.op("Add", [dense(ctx, hidden, hidden), "x"]),
                                     b.weight(hidden, positive=True), b.weight(hidden, scale=0.1)],
              axis=-1)
    h = dense(x1, hidden, 4 * hidden)
    gelu = b.op("Mul", [b.op("Mul", [h, b.op("Add", [b.op("Erf", [b.op("Div", [
        h, b.const(math.sqrt(2.0))])]), b.const(1.0)])]), b.const(0.5)])
    out = b.op("LayerNormalization", [b.op("Add", [dense(gelu, 4 * hidden, hidden), x1]),
                                      b.weight(hidden, positive=True),
                                      b.weight(hidden, scale=0.1)], axis=-1)
    return b.model("bert_layer", (1, seq, hidden), out)


def load(name: str, quick: bool) -> Any:
    if name in LIGHT:
        from tvmlite.frontend.light import light_model
        m = light_model(LIGHT[name], seed=0)
        last = m.graph.node[-1]
        if last.op_type == "Softmax":   # compare logits, not a saturated softmax
            m.graph.output[0].name = last.input[0]
            del m.graph.node[-1]
        return m
    if name == "mobilenet_v2":
        return mobilenet_v2(32, 0.5) if quick else mobilenet_v2()
    return bert_layer(8, 64, 4) if quick else bert_layer()


def measure_one(name: str, repeat: int, quick: bool) -> dict[str, Any]:
    """The row of model ``name`` (run in the child process)."""
    import onnxruntime as ort

    from tvmlite.frontend import from_onnx
    from tvmlite.graph.build import build_graph
    from tvmlite.graph.library import ModelLibrary
    m = load(name, quick)
    graph = from_onnx(m)
    t0 = time.perf_counter()
    mod = build_graph(graph, quiet=True)
    with tempfile.TemporaryDirectory() as tmp:
        mod.export_library(Path(tmp), name="model")
        build_s = time.perf_counter() - t0
        manifest = json.loads((Path(tmp) / "manifest.json").read_text())
        lib = ModelLibrary(tmp)
        lib.set_num_threads(2)
        inp = graph.inputs[0]
        x = np.random.default_rng(1).standard_normal(graph.types[inp].shape).astype(np.float32)
        ours = lib.run({inp: x})[0]
        ours_s = float(np.median(lib.time_run({inp: x}, repeat)))
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 2
    sess = ort.InferenceSession(m.SerializeToString(), opts, providers=["CPUExecutionProvider"])
    ref = sess.run(None, {inp: x})[0]
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        sess.run(None, {inp: x})
        times.append(time.perf_counter() - t)
    ort_s = float(np.median(times))
    return {"model": name, "onnx_nodes": len(m.graph.node), "kernels": len(mod.kernels),
            "distinct": len({k.key for k in mod.kernels}), "build_s": round(build_s, 2),
            "arena_mb": manifest["arena"]["bytes"] / 2**20,
            "intermediates_mb": manifest["arena"]["intermediates_bytes"] / 2**20,
            "max_err_rel": float(np.abs(ours - ref).max() / max(np.abs(ref).max(), 1e-30)),
            "tvmlite_ms": ours_s * 1e3, "ort_ms": ort_s * 1e3,
            "ratio": ours_s / ort_s}


def main(argv: list[str] | None = None) -> int:
    p = bench_args.parser("models", __doc__, out=Path("bench/results"),
                          quick="smoke run: MobileNet-V2 and the BERT layer at toy sizes")
    p.add_argument("--models", nargs="+", choices=MODELS, default=None)
    p.add_argument("--repeat", type=int, default=10, help="timed runs per model (median)")
    p.add_argument("--one", choices=MODELS, help=argparse_hidden())
    a = p.parse_args(argv)
    if a.one:
        print(json.dumps(measure_one(a.one, a.repeat, a.quick)))
        return 0
    names = a.models or (["mobilenet_v2", "bert_layer"] if a.quick else list(MODELS))
    repeat = 3 if a.quick else a.repeat
    rows = []
    for name in names:
        cmd = [sys.executable, "-m", "bench", "models", "--one", name, "--repeat", str(repeat)]
        proc = subprocess.run(cmd + (["--quick"] if a.quick else []), capture_output=True,
                              text=True, cwd=results.ROOT)
        if proc.returncode != 0:
            print(f"{name}: failed\n{proc.stderr[-2000:]}", file=sys.stderr)
            rows.append({"model": name, "error": proc.stderr.strip().splitlines()[-1:]})
            continue
        row = json.loads(proc.stdout.strip().splitlines()[-1])
        rows.append(row)
        print(f"{name}: {row['onnx_nodes']} nodes -> {row['kernels']} kernels, "
              f"build {row['build_s']} s, arena {row['arena_mb']:.1f} of "
              f"{row['intermediates_mb']:.1f} MB, err {row['max_err_rel']:.1e}, "
              f"{row['tvmlite_ms']:.2f} ms vs onnxruntime {row['ort_ms']:.2f} ms "
              f"({row['ratio']:.2f}x)")
    cols = ("model", "onnx_nodes", "kernels", "distinct", "build_s", "arena_mb",
            "intermediates_mb", "max_err_rel", "tvmlite_ms", "ort_ms", "ratio")
    table = results.Table(cols, tuple(tuple(r.get(c) for c in cols) for r in rows),
                          "untuned default schedules against onnxruntime (2 intra-op threads)")
    name = "models-quick" if a.quick else "models"
    md, _ = results.write(a.out / name, "Whole models, untuned", [table], name="models",
                          argv=argv or sys.argv[1:])
    print(f"wrote {md}")
    return 0


def argparse_hidden() -> str:
    import argparse
    return argparse.SUPPRESS


if __name__ == "__main__":
    raise SystemExit(main())
