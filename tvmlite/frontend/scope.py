"""What tvmlite's ONNX import claims to convert, and why a model falls outside it.

The claim is issue 29's: the ops of ``LISTED_OPS`` (the classic CNNs, MobileNet-style
and transformer-encoder ops), as opsets 9 to 21 define them, over the dtypes tvmlite's
graph and C codegen have (``DTYPES``). ``from_onnx`` converts a few ops beyond the list
(``converters.CONVERTERS``) and accepts later opsets whose listed ops did not change;
this module is the narrower promise, which onnx's backend node tests are held to
(``bench/onnx_node_tests.py`` and tests/tvmlite/frontend/test_onnx_node_tests.py):
``out_of_scope(model)`` names the first reason a model is outside it, or None.
"""
from __future__ import annotations

from typing import Any

__all__ = ["LISTED_OPS", "OPSETS", "DTYPES", "model_ops", "model_opset", "uses_only_listed",
           "out_of_scope"]

LISTED_OPS = frozenset({
    # the classic CNNs of the model zoo
    "Conv", "BatchNormalization", "Relu", "LeakyRelu", "Sigmoid", "MaxPool", "AveragePool",
    "GlobalAveragePool", "LRN", "Concat", "Sum", "Add", "Sub", "Mul", "Div", "Reshape",
    "Flatten", "Transpose", "Gemm", "MatMul", "Dropout", "Identity", "Softmax",
    "ConstantOfShape", "Constant", "Unsqueeze", "Squeeze",
    # MobileNet-style
    "Clip", "HardSigmoid", "HardSwish",
    # transformer encoders, and the shape arithmetic around them
    "Pow", "Sqrt", "Erf", "Tanh", "Gelu", "LayerNormalization", "ReduceMean", "ReduceSum",
    "Gather", "Cast", "Where", "Equal", "Shape", "Slice", "Expand", "Range",
})
OPSETS = (9, 21)   # first and last opset the converters follow
DTYPES = ("float32", "float64", "int32", "int64", "bool")


def _graph_ops(graph: Any) -> set[str]:
    out: set[str] = set()
    for n in graph.node:
        out.add(n.op_type if n.domain in ("", "ai.onnx") else f"{n.domain}:{n.op_type}")
        for at in n.attribute:
            if at.HasField("g"):
                out |= _graph_ops(at.g)
            for g in at.graphs:
                out |= _graph_ops(g)
    return out


def model_ops(model: Any) -> set[str]:
    """The op types of ``model`` (an ``onnx.ModelProto``), subgraphs included; an op of
    another domain is named ``domain:op``."""
    return _graph_ops(model.graph)


def model_opset(model: Any) -> int:
    """The model's opset of the default ONNX domain."""
    return max((int(o.version) for o in model.opset_import if o.domain in ("", "ai.onnx")),
               default=1)


def uses_only_listed(model: Any) -> bool:
    """Whether every op of ``model`` is in ``LISTED_OPS``."""
    return model_ops(model) <= LISTED_OPS


def _dtype_name(elem_type: int) -> str:
    import numpy as np
    from onnx import TensorProto, helper
    try:
        return np.dtype(helper.tensor_dtype_to_np_dtype(elem_type)).name
    except (KeyError, TypeError, ValueError):
        return TensorProto.DataType.Name(elem_type).lower()


def _value_dtypes(model: Any) -> list[tuple[str, str]]:
    """(what, dtype) of the graph's inputs, outputs, initializers and every dtype a
    node names (Cast's ``to``, a Constant's or ConstantOfShape's value)."""
    g = model.graph
    out = [(f"initializer {t.name!r}", _dtype_name(t.data_type)) for t in g.initializer]
    for vi in list(g.input) + list(g.output):
        if vi.type.HasField("tensor_type"):
            out.append((f"value {vi.name!r}", _dtype_name(vi.type.tensor_type.elem_type)))
    for n in g.node:
        for at in n.attribute:
            if at.name == "to" and n.op_type == "Cast":
                out.append((f"Cast {n.name or n.output[0]!r}", _dtype_name(at.i)))
            elif at.HasField("t"):
                out.append((f"{n.op_type} {n.name or n.output[0]!r}",
                            _dtype_name(at.t.data_type)))
    return out


def out_of_scope(model: Any) -> str | None:
    """Why ``model`` is outside what tvmlite claims to convert (an op off the list, an
    opset outside 9-21, a value that is not a tensor, a dtype tvmlite does not have),
    in a few words; None when it is inside."""
    extra = sorted(model_ops(model) - LISTED_OPS)
    if extra:
        return f"op {', '.join(extra)} is not in the list"
    opset = model_opset(model)
    if not OPSETS[0] <= opset <= OPSETS[1]:
        return f"opset {opset} (the converters follow {OPSETS[0]} to {OPSETS[1]})"
    g = model.graph
    for vi in list(g.input) + list(g.output):
        kind = vi.type.WhichOneof("value")
        if kind != "tensor_type":
            return f"{kind.replace('_type', '')} value {vi.name!r} (tvmlite has tensors only)"
    for what, dtype in _value_dtypes(model):
        if dtype not in DTYPES:
            return f"dtype {dtype} ({what}; tvmlite has {', '.join(DTYPES)})"
    return None
