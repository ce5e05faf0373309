"""MobileNet-V2 and a BERT encoder as small PyTorch modules: the models that exist on both
sides, so ``bench/models.py`` can time PyTorch eager and ``torch.compile`` on the very
weights every other contender reads from the ONNX file exported here.

This file runs BY the python of a virtual environment where torch is installed (its own
venv under /work/peers/, never a dependency of tvmlite); it imports neither tvmlite nor
onnxruntime. ``bench/models.py`` starts it in a fresh process:

    python -m bench.torch_models export '{"model": "mobilenet_v2", "quick": false,
                                          "path": ".../model.onnx"}'
    python -m bench.torch_models time '{"torch_model": "bert_encoder", "quick": false,
        "mode": "eager" | "compile", "threads": 2, "repeat": 25, "input": "x.npy",
        "output": "y.npy"}'

The weights are a function of the seed alone (``torch.manual_seed``, then seeded random
batch-norm statistics), so the export and each timing process build the same module.
torchvision is not used: it does not load with torch 2.13 here (/work/shared/PEERS.md).
CNN inputs and activations are channels-last in memory for both modes (PyTorch's fast
path on CPU: NCHW depthwise convs run ~10x slower); the answer says so.
"""
from __future__ import annotations

import json
import sys
import time

import numpy as np
import torch
from torch import nn

from bench.model_worker import RESULT, median_time

SEED = 0


# -- the models -------------------------------------------------------------------------------

def _conv_bn(cin: int, cout: int, k: int, stride: int, groups: int = 1,
             relu6: bool = True) -> nn.Sequential:
    layers: list[nn.Module] = [nn.Conv2d(cin, cout, k, stride, k // 2, groups=groups,
                                         bias=False), nn.BatchNorm2d(cout)]
    if relu6:
        layers.append(nn.ReLU6())
    return nn.Sequential(*layers)


class InvertedResidual(nn.Module):
    """MobileNet-V2's block: 1x1 expand, 3x3 depthwise, 1x1 project, residual if it fits."""

    def __init__(self, cin: int, cout: int, stride: int, expand: int):
        super().__init__()
        hidden = cin * expand
        layers = [_conv_bn(cin, hidden, 1, 1)] if expand != 1 else []
        layers += [_conv_bn(hidden, hidden, 3, stride, groups=hidden),
                   _conv_bn(hidden, cout, 1, 1, relu6=False)]
        self.body = nn.Sequential(*layers)
        self.residual = stride == 1 and cin == cout

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.body(x)
        return x + y if self.residual else y


class MobileNetV2(nn.Module):
    """MobileNet-V2 (Sandler et al. 2018) with width multiplier ``width``, 1000 classes."""

    def __init__(self, width: float = 1.0):
        super().__init__()

        def ch(c: int) -> int:
            return max(8, int(c * width) // 8 * 8)
        layers: list[nn.Module] = [_conv_bn(3, ch(32), 3, 2)]
        cin = ch(32)
        for t, c, n, s in ((1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2),
                           (6, 96, 3, 1), (6, 160, 3, 2), (6, 320, 1, 1)):
            for i in range(n):
                layers.append(InvertedResidual(cin, ch(c), s if i == 0 else 1, t))
                cin = ch(c)
        layers.append(_conv_bn(cin, 1280, 1, 1))
        self.features = nn.Sequential(*layers)
        self.classifier = nn.Linear(1280, 1000)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(torch.flatten(nn.functional.adaptive_avg_pool2d(
            self.features(x), 1), 1))


class EncoderLayer(nn.Module):
    """One post-LayerNorm BERT encoder layer: self-attention written out (MatMul, Softmax:
    the ops every ONNX importer knows), residual + LayerNorm, the erf-GELU feed-forward,
    residual + LayerNorm."""

    def __init__(self, hidden: int, heads: int):
        super().__init__()
        self.heads, self.d = heads, hidden // heads
        self.q, self.k, self.v, self.o = (nn.Linear(hidden, hidden) for _ in range(4))
        self.ln1, self.ln2 = nn.LayerNorm(hidden), nn.LayerNorm(hidden)
        self.up, self.down = nn.Linear(hidden, 4 * hidden), nn.Linear(4 * hidden, hidden)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, s, h = x.shape

        def split(t: torch.Tensor) -> torch.Tensor:
            return t.reshape(b, s, self.heads, self.d).transpose(1, 2)
        q, k, v = split(self.q(x)), split(self.k(x)), split(self.v(x))
        att = torch.softmax(q @ k.transpose(-1, -2) / self.d ** 0.5, dim=-1)
        ctx = (att @ v).transpose(1, 2).reshape(b, s, h)
        x = self.ln1(x + self.o(ctx))
        return self.ln2(x + self.down(nn.functional.gelu(self.up(x))))


class BertEncoder(nn.Module):
    """``layers`` BERT encoder layers on hidden states (1, seq, hidden): no embeddings, so
    the input is a float tensor every contender takes as it is."""

    def __init__(self, layers: int = 2, hidden: int = 256, heads: int = 4):
        super().__init__()
        self.layers = nn.Sequential(*(EncoderLayer(hidden, heads) for _ in range(layers)))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.layers(x)


# name: (full size, --quick toy size); each (constructor kwargs, input shape)
MODELS: dict[str, tuple[tuple[dict, tuple[int, ...]], tuple[dict, tuple[int, ...]]]] = {
    "mobilenet_v2": (({"width": 1.0}, (1, 3, 224, 224)), ({"width": 0.5}, (1, 3, 32, 32))),
    "bert_encoder": (({"layers": 2, "hidden": 256, "heads": 4}, (1, 128, 256)),
                     ({"layers": 1, "hidden": 64, "heads": 4}, (1, 8, 64))),
}


def build(name: str, quick: bool) -> tuple[nn.Module, tuple[int, ...]]:
    """The seeded module ``name`` in eval mode and its input shape."""
    if name not in MODELS:
        raise SystemExit(f"torch_models: no model {name!r}; one of {sorted(MODELS)}")
    kwargs, shape = MODELS[name][1 if quick else 0]
    torch.manual_seed(SEED)
    model = (MobileNetV2 if name == "mobilenet_v2" else BertEncoder)(**kwargs)
    g = torch.Generator().manual_seed(SEED + 1)
    for m in model.modules():   # batch norms with non-trivial statistics, variances > 0
        if isinstance(m, nn.BatchNorm2d):
            n = m.num_features
            m.running_mean.copy_(torch.randn(n, generator=g) * 0.1)
            m.running_var.copy_(torch.rand(n, generator=g) + 0.5)
            m.weight.data.copy_(torch.rand(n, generator=g) + 0.5)
            m.bias.data.copy_(torch.randn(n, generator=g) * 0.1)
    return model.eval(), shape


def export(p: dict) -> dict:
    """Write the model as ONNX (opset 17, the TorchScript exporter: plain MatMul /
    LayerNormalization / Erf nodes, constants folded) to ``p["path"]``."""
    model, shape = build(p["model"], p.get("quick", False))
    x = torch.zeros(shape)
    with torch.no_grad():
        torch.onnx.export(model, (x,), p["path"], input_names=["x"], output_names=["y"],
                          opset_version=17, do_constant_folding=True, dynamo=False)
    return {"path": p["path"], "input": "x", "shape": list(shape),
            "version": torch.__version__}


def time_model(p: dict) -> dict:
    """Median seconds of one forward pass, eager or under ``torch.compile`` (whose first
    calls compile: that time is returned as ``compile_seconds``), on ``p["input"]``."""
    torch.set_num_threads(p["threads"])
    model, shape = build(p["torch_model"], p.get("quick", False))
    x = torch.from_numpy(np.load(p["input"]))
    layout = "contiguous"
    if x.dim() == 4:
        model = model.to(memory_format=torch.channels_last)
        x, layout = x.contiguous(memory_format=torch.channels_last), "channels_last"
    fn = torch.compile(model) if p["mode"] == "compile" else model
    with torch.no_grad():
        t0 = time.perf_counter()
        y = fn(x)
        first = time.perf_counter() - t0
        seconds = median_time(lambda: fn(x), p["repeat"])
    np.save(p["output"], y.contiguous().numpy())
    return {"seconds": seconds, "compile_seconds": first if p["mode"] == "compile" else 0.0,
            "layout": layout, "version": torch.__version__}


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 2 or argv[0] not in ("export", "time"):
        print("usage: python -m bench.torch_models export|time JSON", file=sys.stderr)
        return 2
    payload = json.loads(argv[1])
    answer = export(payload) if argv[0] == "export" else time_model(payload)
    print(RESULT + json.dumps(answer), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
