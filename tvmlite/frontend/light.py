"""The ONNX model zoo's classic CNNs that the onnx wheel ships (``light_*.onnx``), with
seeded random weights.

Their weights are ConstantOfShape nodes, so every output is the same softmax of equal
logits and hides any error. ``light_model`` replaces each ConstantOfShape weight with a
seeded random initializer of its shape (normal, scaled by 1/sqrt(fan-in) so activations
stay near 1; batch-norm variances positive), sets ``ir_version`` 8 so initializers need
not be graph inputs, and returns the model; ``LIGHT_MODELS`` lists the names."""
from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["LIGHT_MODELS", "light_path", "light_model"]

LIGHT_MODELS = ("resnet50", "densenet121", "inception_v1", "inception_v2", "shufflenet",
                "squeezenet", "vgg19", "bvlc_alexnet", "zfnet512")


def light_path(name: str) -> Path:
    """The ``light_<name>.onnx`` file of the installed onnx wheel."""
    import onnx
    if name not in LIGHT_MODELS:
        raise ValueError(f"light_path: {name!r} is not one of {LIGHT_MODELS}")
    return Path(onnx.__file__).parent / "backend" / "test" / "data" / "light" / f"light_{name}.onnx"


def light_model(name: str, seed: int = 0) -> Any:
    """The light model ``name`` with seeded random weights (a ModelProto)."""
    import onnx
    from onnx import numpy_helper
    model = onnx.load(str(light_path(name)))
    rng = np.random.default_rng(seed)
    g = model.graph
    readers: dict[str, list] = {}
    for n in g.node:
        for pos, i in enumerate(n.input):
            readers.setdefault(i, []).append((n, pos))
    keep, inits = [], []
    for n in g.node:
        if n.op_type != "ConstantOfShape" or not n.input:
            keep.append(n)
            continue
        shape_src = next((m for m in g.node if n.input[0] in m.output), None)
        shape = None
        if shape_src is not None and shape_src.op_type == "Constant":
            shape = tuple(int(d) for d in numpy_helper.to_array(shape_src.attribute[0].t))
        for t in g.initializer:
            if t.name == n.input[0]:
                shape = tuple(int(d) for d in numpy_helper.to_array(t))
        if shape is None:
            keep.append(n)
            continue
        users = readers.get(n.output[0], [])
        is_var = any(u.op_type == "BatchNormalization" and pos == 4 for u, pos in users)
        is_scale = any(u.op_type == "BatchNormalization" and pos == 1 for u, pos in users)
        if is_var or is_scale:
            value = rng.uniform(0.5, 1.5, shape)
        elif len(shape) >= 2:
            value = rng.standard_normal(shape) / math.sqrt(math.prod(shape[1:]))
        else:
            value = rng.standard_normal(shape) * 0.1
        inits.append(numpy_helper.from_array(value.astype(np.float32), n.output[0]))
    del g.node[:]
    g.node.extend(keep)
    g.initializer.extend(inits)
    model.ir_version = max(model.ir_version, 8)
    return model
