"""The model files of ``bench/models.py``, written once into its cache folder: every
contender reads the same ``.onnx`` file, so all of them run the same weights.

* ResNet-50, SqueezeNet, Inception-v1, DenseNet-121: the onnx wheel's light zoo models
  with seeded random weights (``tvmlite.frontend.light``), their final Softmax dropped so
  the logits are compared, not a saturated softmax.
* MobileNet-V2 and the BERT encoder (2 layers, hidden 256, 4 heads, sequence 128; the
  goal's "2-layer BERT encoder"): exported from the PyTorch modules of
  ``bench/torch_models.py`` with ``torch.onnx.export`` when a torch venv is given, so
  PyTorch eager and ``torch.compile`` run the very weights the others read; without
  torch, the same architectures written here with ``onnx.helper`` (the ``source``
  says which, and PyTorch is then not compared).
* ``bert_layer``: one BERT-base encoder layer (hidden 768, 12 heads, sequence 128),
  ``onnx.helper`` only (the untuned benchmark's model).

``--quick`` sizes: MobileNet-V2 at 32x32 and width 0.5, a 1-layer encoder of hidden 64
over 8 tokens.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from bench import model_worker, peers

LIGHT = ("resnet50", "squeezenet", "inception_v1", "densenet121")
TORCH = ("mobilenet_v2", "bert_encoder")
MODELS = (*LIGHT, *TORCH, "bert_layer")


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


def _encoder_layer(b: _Builder, x: str, seq: int, hidden: int, heads: int) -> str:
    """One post-LayerNorm BERT encoder layer on hidden states (1, seq, hidden):
    self-attention, residual + LayerNorm, the GELU (Erf) feed-forward, residual +
    LayerNorm."""
    d = hidden // heads

    def dense(x: str, cin: int, cout: int) -> str:
        return b.op("Add", [b.op("MatMul", [x, b.weight(cin, cout)]), b.weight(cout, scale=0.1)])

    def split_heads(x: str, perm: list[int]) -> str:
        r = b.op("Reshape", [x, b.const([1, seq, heads, d], np.int64)])
        return b.op("Transpose", [r], perm=perm)
    q = split_heads(dense(x, hidden, hidden), [0, 2, 1, 3])
    k = split_heads(dense(x, hidden, hidden), [0, 2, 3, 1])
    v = split_heads(dense(x, hidden, hidden), [0, 2, 1, 3])
    att = b.op("Div", [b.op("MatMul", [q, k]), b.const(math.sqrt(d))])
    ctx = b.op("MatMul", [b.op("Softmax", [att], axis=-1), v])
    ctx = b.op("Reshape", [b.op("Transpose", [ctx], perm=[0, 2, 1, 3]),
                           b.const([1, seq, hidden], np.int64)])
    x1 = b.op("LayerNormalization", [b.op("Add", [dense(ctx, hidden, hidden), x]),
                                     b.weight(hidden, positive=True), b.weight(hidden, scale=0.1)],
              axis=-1)
    h = dense(x1, hidden, 4 * hidden)
    gelu = b.op("Mul", [b.op("Mul", [h, b.op("Add", [b.op("Erf", [b.op("Div", [
        h, b.const(math.sqrt(2.0))])]), b.const(1.0)])]), b.const(0.5)])
    return b.op("LayerNormalization", [b.op("Add", [dense(gelu, 4 * hidden, hidden), x1]),
                                       b.weight(hidden, positive=True),
                                       b.weight(hidden, scale=0.1)], axis=-1)


def bert_encoder(layers: int = 2, seq: int = 128, hidden: int = 256, heads: int = 4) -> Any:
    """``layers`` BERT encoder layers on hidden states (1, seq, hidden)."""
    b = _Builder(1)
    x = "x"
    for _ in range(layers):
        x = _encoder_layer(b, x, seq, hidden, heads)
    return b.model("bert_encoder", (1, seq, hidden), x)


def helper_model(name: str, quick: bool) -> Any:
    """Model ``name`` as a ModelProto, without torch (light zoo or ``onnx.helper``)."""
    if name in LIGHT:
        from tvmlite.frontend.light import light_model
        m = light_model(name, seed=0)
        last = m.graph.node[-1]
        if last.op_type == "Softmax":   # compare logits, not a saturated softmax
            m.graph.output[0].name = last.input[0]
            del m.graph.node[-1]
        return m
    if name == "mobilenet_v2":
        return mobilenet_v2(32, 0.5) if quick else mobilenet_v2()
    if name == "bert_encoder":
        return bert_encoder(1, 8, 64, 4) if quick else bert_encoder()
    if name == "bert_layer":
        return bert_encoder(1, 8, 64, 4) if quick else bert_encoder(1, 128, 768, 12)
    raise ValueError(f"no model {name!r}; one of {MODELS}")


@dataclass(frozen=True)
class ModelFile:
    """A model written to the cache: its path, its (single) input's name and shape, where
    it came from (``torch.onnx.export``, ``light zoo``, ``onnx.helper``), and why torch
    did not write it when it could have (``note``)."""
    name: str
    path: Path
    input_name: str
    shape: tuple[int, ...]
    source: str
    note: str = ""

    @property
    def from_torch(self) -> bool:
        return self.source == "torch.onnx.export"


def model_file(name: str, quick: bool, folder: Path, torch_python: str | None) -> ModelFile:
    """The model's ``.onnx`` in ``folder`` (written on first use; the run's later steps
    and a resumed run read it again). MobileNet-V2 and the BERT encoder come from torch
    when ``torch_python`` can export them, else from ``onnx.helper``."""
    import onnx
    folder.mkdir(parents=True, exist_ok=True)
    note = ""
    if name in TORCH and torch_python:
        path = folder / "model-torch.onnx"
        if not path.is_file():
            part = path.with_suffix(".part.onnx")
            answer = peers.run_answering(
                [torch_python, "-m", "bench.torch_models", "export",
                 json.dumps({"model": name, "quick": quick, "path": str(part)})],
                peers.base_env(), model_worker.RESULT)
            if "error" not in answer:
                part.replace(path)
            else:
                note = f"torch export failed ({answer['error'][-200:]}): onnx.helper model"
        if path.is_file():
            return _described(name, path, "torch.onnx.export")
    path = folder / "model.onnx"
    if not path.is_file():
        onnx.save(helper_model(name, quick), str(path))
    return _described(name, path, "light zoo" if name in LIGHT else "onnx.helper", note)


def _described(name: str, path: Path, source: str, note: str = "") -> ModelFile:
    import onnx
    graph = onnx.load(str(path), load_external_data=False).graph
    inits = {t.name for t in graph.initializer}
    inputs = [i for i in graph.input if i.name not in inits]
    if len(inputs) != 1:
        raise ValueError(f"{path}: the benchmark feeds one input; the model has "
                         f"{[i.name for i in inputs]}")
    dims = tuple(d.dim_value for d in inputs[0].type.tensor_type.shape.dim)
    return ModelFile(name, path, inputs[0].name, dims, source, note)


def input_file(model: ModelFile) -> Path:
    """The seeded standard-normal input every contender runs (``x.npy`` beside it)."""
    path = model.path.parent / "x.npy"
    if not path.is_file():
        x = np.random.default_rng(1).standard_normal(model.shape).astype(np.float32)
        np.save(path, x)
    return path

