"""``from_onnx(model, shapes=None)``: an ONNX model as a ``tvmlite.graph.Graph``.

Reading is the ``onnx`` package's (``pip install 'tvmlite[onnx]'``); nothing here parses
protobuf. Before any conversion the model is checked whole: every op type we do not
support is named in one error (with its count and first node), external data must lie
inside the model's folder (a location outside it is refused and never opened), and every
input dimension must be known (a symbolic one needs ``shapes=``; the error names it):
a size, or a range that makes it symbolic for the whole graph (``graph/symbolic.py``).
Then each node is converted (``converters.py``) and typed in order; a node whose inputs
are all constants is computed at once (``graph.ops.evaluate``), which is how shape
arithmetic (Shape, Gather, Concat, ConstantOfShape...) becomes the constants the
converters of Reshape or Expand need. A value with no elements (an input given a 0
dimension, a slice past the end) is an empty constant: nothing is compiled for it.
"""
from __future__ import annotations

import os
from collections import Counter
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from tvmlite.errors import TvmliteError
from tvmlite.frontend.converters import CONVERTERS, ConversionError
from tvmlite.graph.ir import Graph, GraphError, Node, TensorType
from tvmlite.graph.ops import KIND, evaluate, infer
from tvmlite.graph.passes import optimize
from tvmlite.graph.symbolic import generalize, probe_sizes
from tvmlite.ir.symbolic import SizeVar, is_size_expr

MAX_OPSET = 25   # no op we convert changed its meaning after opset 21

__all__ = ["from_onnx", "OnnxImportError", "UnsupportedOpsError", "ConversionError"]


class OnnxImportError(TvmliteError, ValueError):
    """A model that cannot be read: not ONNX, truncated, bad external data, unknown
    shapes. The message names the file, the tensor or the dimension."""


class UnsupportedOpsError(OnnxImportError):
    """The model uses ops tvmlite does not convert (all of them are named)."""


def _onnx() -> Any:
    try:
        import onnx
    except ImportError as err:   # the optional extra
        raise OnnxImportError("from_onnx needs the onnx package: pip install "
                              "'tvmlite[onnx]'") from err
    return onnx


def load_model(model: Any) -> Any:
    """The ModelProto of ``model`` (a path or a ModelProto), external data loaded from
    the model's own folder only."""
    onnx = _onnx()
    if isinstance(model, onnx.ModelProto):
        _check_proto(model, "the given ModelProto")
        if any(_external(t) for t in _tensors(model)):
            raise OnnxImportError("from_onnx: this ModelProto refers to external data; pass "
                                  "the model's path so the data is read from its folder")
        return model
    if not isinstance(model, (str, os.PathLike)):
        raise TypeError(f"from_onnx(model=...) takes a path or an onnx.ModelProto, got "
                        f"{type(model).__name__}")
    path = Path(model)
    if not path.is_file():
        raise OnnxImportError(f"from_onnx: no model file at {str(path)!r}")
    try:
        proto = onnx.load(str(path), load_external_data=False)
    except Exception as err:   # protobuf's DecodeError and friends: the file is not ONNX
        raise OnnxImportError(f"from_onnx: {str(path)!r} is not a readable ONNX model "
                              f"(truncated or another format): {err}") from err
    _check_proto(proto, repr(str(path)))
    folder = path.resolve().parent
    for t in _tensors(proto):
        if not _external(t):
            continue
        info = {e.key: e.value for e in t.external_data}
        loc = info.get("location", "")
        target = (folder / loc).resolve()
        if os.path.isabs(loc) or not target.is_relative_to(folder):
            raise OnnxImportError(f"from_onnx: tensor {t.name!r} has external data at "
                                  f"{loc!r}, outside the model's folder {str(folder)!r}: "
                                  f"refused (not read)")
        if not target.is_file():
            raise OnnxImportError(f"from_onnx: tensor {t.name!r}: external data file "
                                  f"{str(target)!r} does not exist")
    from onnx.external_data_helper import load_external_data_for_model
    try:
        load_external_data_for_model(proto, str(folder))
    except (OSError, ValueError) as err:
        raise OnnxImportError(f"from_onnx: external data of {str(path)!r}: {err}") from err
    return proto


def _check_proto(proto: Any, what: str) -> None:
    if proto.ir_version < 1 or not proto.graph.output:
        raise OnnxImportError(f"from_onnx: {what} is not an ONNX model with outputs "
                              f"(ir_version {proto.ir_version}, "
                              f"{len(proto.graph.output)} outputs)")


def _tensors(proto: Any) -> list:
    out = list(proto.graph.initializer)
    for n in proto.graph.node:
        out += [a.t for a in n.attribute if a.HasField("t")]
    return out


def _external(t: Any) -> bool:
    return t.data_location == 1   # TensorProto.EXTERNAL


def check_supported(proto: Any) -> None:
    """One error naming every op type of the model we do not convert."""
    bad: Counter[str] = Counter()
    first: dict[str, str] = {}
    for n in proto.graph.node:
        if n.op_type != "Constant" and (n.domain not in ("", "ai.onnx")
                                        or n.op_type not in CONVERTERS):
            bad[n.op_type] += 1
            first.setdefault(n.op_type, n.name or f"#{list(proto.graph.node).index(n)}")
    if bad:
        listed = ", ".join(f"{op} (x{c}, first node {first[op]!r})"
                           for op, c in sorted(bad.items()))
        raise UnsupportedOpsError(f"from_onnx: the model uses {len(bad)} unsupported op "
                                  f"type(s): {listed}")


class _Importer:
    """The conversion context the converters see (``converters.Context``)."""

    def __init__(self, proto: Any, opset: int):
        self.opset = opset
        self.constants: dict[str, np.ndarray] = {}
        self.types: dict[str, TensorType] = {}
        self.nodes: list[Node] = []
        self.names: set[str] = set()

    def const(self, name: str) -> np.ndarray | None:
        return self.constants.get(name)

    def type(self, name: str) -> TensorType:
        if name not in self.types:
            raise GraphError(f"from_onnx: value {name!r} is read before any node computes it "
                             f"(the graph has a cycle, or the name is undefined)")
        return self.types[name]

    def fresh(self, base: str) -> str:
        name, k = base, 0
        while name in self.names:
            k += 1
            name = f"{base}_{k}"
        self.names.add(name)
        return name

    def constant(self, value: np.ndarray, base: str = "const") -> str:
        name = self.fresh(base)
        self.set_constant(name, value)
        return name

    def set_constant(self, name: str, value: np.ndarray) -> None:
        value = np.asarray(value, order="C")
        self.constants[name] = value
        self.types[name] = TensorType(tuple(int(d) for d in value.shape), value.dtype.name)
        self.names.add(name)

    def add(self, node: Node) -> None:
        if node.op == "shape_value":
            self.set_constant(node.output, np.array(node.attr("value"), np.int64))
            return
        ins = [i for i in node.inputs if i]
        for i in ins:
            self.type(i)
        # a DequantizeLinear of a constant stays a node, so that the QDQ pass
        # (graph/passes/quantize.py) still sees the integer weight it dequantizes;
        # fold_constants folds it where no integer kernel takes it
        keep = node.op == "dequantize"
        if (all(i in self.constants for i in ins) and not keep) or KIND.get(node.op) == "shape":
            missing = [i for i in ins if i not in self.constants]
            if missing:
                raise ConversionError(f"node {node.name!r} ({node.op}): input {missing[0]!r} "
                                      f"must be a constant")
            self.set_constant(node.output, evaluate(node, [self.constants[i] for i in ins]))
            return
        t = infer(node, self.types)
        if 0 in t.shape:   # an empty value: known without computing anything
            self.set_constant(node.output, np.zeros(t.shape, t.dtype))
            return
        self.types[node.output] = t
        self.names.update(node.outputs)
        self.nodes.append(node)


def _opset(proto: Any) -> int:
    for o in proto.opset_import:
        if o.domain in ("", "ai.onnx"):
            return int(o.version)
    return 1


def from_onnx(model: Any, shapes: Mapping[str, Any] | None = None,
              name: str | None = None, ranges: Mapping[str, Any] | None = None) -> Graph:
    """The graph of an ONNX model (a path or an ``onnx.ModelProto``). ``shapes`` maps an
    input name to its full shape, for inputs with symbolic dimensions.

    A dimension of ``shapes`` may be symbolic: a range ``(lo, hi)`` (named after the
    model's ``dim_param`` there, else ``L``) or a ``te.var`` whose range ``ranges`` gives
    (``ranges={"L": (1, 512)}``). The graph then runs at every size in the range: it is
    imported and optimized at a few sizes and merged (``graph/symbolic.py``), so it comes
    back fused, with ``Graph.sizes`` set. Another input's dimension with the same
    ``dim_param`` gets the same size. One symbolic size per model."""
    onnx = _onnx()
    proto = load_model(model)
    check_supported(proto)
    opset = _opset(proto)
    if not 1 <= opset <= MAX_OPSET:
        raise OnnxImportError(f"from_onnx: opset {opset} is not supported (1 to "
                              f"{MAX_OPSET} are; the converters follow 9 to 21)")
    shapes = dict(shapes or {})
    if not isinstance(ranges, (Mapping, type(None))):
        raise TypeError(f"from_onnx(ranges=...) takes a dict of size name to (lo, hi), got "
                        f"{type(ranges).__name__}")
    sym = _symbolic_dims(proto, shapes, dict(ranges or {}))
    if sym is None:
        return _import(onnx, proto, opset, shapes, name)
    size, lo, hi, axes = sym
    var = SizeVar(size, "int32")
    probes = probe_sizes(size, lo, hi)
    graphs = []
    for p in probes:
        concrete = dict(shapes)
        for inp, dims in axes.items():
            concrete[inp] = tuple(p if d is None else d for d in dims)
        graphs.append(optimize(_import(onnx, proto, opset, concrete, name)))
    return generalize(graphs, var, probes, lo, hi)


def _symbolic_dims(proto: Any, shapes: dict, ranges: dict) -> tuple | None:
    """(size name, lo, hi, {input: dims with None where symbolic}) when ``shapes``
    makes a dimension symbolic, else None; bad ranges are errors naming the input."""
    found: dict[str, tuple[int, int]] = {}
    axes: dict[str, list] = {}
    declared = {vi.name: list(vi.type.tensor_type.shape.dim) for vi in proto.graph.input}
    for inp, dims in shapes.items():
        if not isinstance(dims, (tuple, list)):
            continue   # the concrete path reports it
        out = []
        for d, dim in enumerate(dims):
            decl = declared.get(inp, [])
            param = decl[d].dim_param if d < len(decl) else ""
            if isinstance(dim, SizeVar) or is_size_expr(dim):
                if not isinstance(dim, SizeVar):
                    raise OnnxImportError(f"from_onnx: shapes= gives input {inp!r} axis {d} "
                                          f"the expression {dim}; give a te.var or a range")
                if dim.name not in ranges:
                    raise OnnxImportError(f"from_onnx: input {inp!r} axis {d} is the "
                                          f"symbolic size {dim.name} with no range: give "
                                          f"ranges={{{dim.name!r}: (1, 512)}} or the range "
                                          f"itself, shapes={{{inp!r}: (..., (1, 512), ...)}}")
                nm, rng = dim.name, ranges[dim.name]
            elif isinstance(dim, (tuple, list)):
                nm = param if param.isidentifier() else "L"
                rng = dim
            else:
                out.append(dim)
                continue
            lo, hi = _range(rng, f"input {inp!r} axis {d}")
            if nm in found and found[nm] != (lo, hi):
                raise OnnxImportError(f"from_onnx: the symbolic size {nm} has two ranges, "
                                      f"{found[nm]} and {(lo, hi)}")
            found[nm] = (lo, hi)
            if len(found) > 1:
                raise OnnxImportError(f"from_onnx: shapes= gives {len(found)} symbolic sizes "
                                      f"({', '.join(found)}); a model takes one")
            if lo == hi:
                out.append(lo)
                continue
            out.append(None)
        axes[inp] = out
    if not found or all(None not in dims for dims in axes.values()):
        for inp, dims in axes.items():
            shapes[inp] = tuple(dims)
        return None
    (size, (lo, hi)), = found.items()
    params = {d.dim_param for inp in axes for d in declared.get(inp, [])}
    for vi in proto.graph.input:   # other inputs sharing the size's dim_param
        if vi.name in shapes or vi.name in {t.name for t in proto.graph.initializer}:
            continue
        dims = declared[vi.name]
        if any(d.dim_param and d.dim_param in params | {size} for d in dims) and all(
                d.HasField("dim_value") or d.dim_param in params | {size} for d in dims):
            axes[vi.name] = [int(d.dim_value) if d.HasField("dim_value") else None
                             for d in dims]
    for inp in axes:
        shapes.pop(inp, None)
    return size, lo, hi, axes


def _range(rng: Any, where: str) -> tuple[int, int]:
    ok = isinstance(rng, (tuple, list)) and len(rng) == 2 and all(
        isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in rng)
    if not ok or not 1 <= rng[0] <= rng[1]:
        raise OnnxImportError(f"from_onnx: {where}: a symbolic size's range is (lo, hi) with "
                              f"1 <= lo <= hi, got {rng!r}")
    return int(rng[0]), int(rng[1])


def _import(onnx: Any, proto: Any, opset: int, shapes: dict, name: str | None) -> Graph:
    """The graph of ``proto`` with every input's shape concrete."""
    from onnx import numpy_helper
    shapes = dict(shapes)
    imp = _Importer(proto, opset)
    for t in proto.graph.initializer:
        imp.set_constant(t.name, numpy_helper.to_array(t))
    runtime = [vi.name for vi in proto.graph.input if vi.name not in imp.constants]
    if set(shapes) - set(runtime):
        raise OnnxImportError(f"from_onnx: shapes= names {sorted(set(shapes) - set(runtime))}, "
                              f"which are not inputs of the model (inputs: {runtime})")
    inputs = []
    for vi in proto.graph.input:
        if vi.name in imp.constants:
            continue
        tt = vi.type.tensor_type
        dtype = np.dtype(onnx.helper.tensor_dtype_to_np_dtype(tt.elem_type)).name
        dims: list[int] = []
        if vi.name in shapes:
            dims = [int(d) for d in shapes.pop(vi.name)]
            declared = list(tt.shape.dim) if tt.HasField("shape") else []
            if declared and len(declared) != len(dims):
                raise OnnxImportError(f"from_onnx: shapes= gives input {vi.name!r} {len(dims)} "
                                      f"dimensions {tuple(dims)}; the model declares "
                                      f"{len(declared)}")
            wrong = [(d, dim.dim_value) for d, dim in enumerate(declared)
                     if dim.HasField("dim_value") and 0 < dim.dim_value != dims[d]]
            if wrong:
                d, v = wrong[0]
                raise OnnxImportError(f"from_onnx: shapes= gives input {vi.name!r} size "
                                      f"{dims[d]} on axis {d}, which the model fixes at {v}")
        else:
            for d, dim in enumerate(tt.shape.dim):
                if not dim.HasField("dim_value") or dim.dim_value < 1:
                    sym = dim.dim_param or "?"
                    raise OnnxImportError(f"from_onnx: input {vi.name!r} has a symbolic "
                                          f"dimension {sym!r} (axis {d}); give its shape, "
                                          f"e.g. shapes={{{vi.name!r}: (1, ...)}} or --shape "
                                          f"{vi.name}=1,...")
                dims.append(int(dim.dim_value))
        imp.types[vi.name] = TensorType(tuple(dims), dtype)
        imp.names.add(vi.name)
        inputs.append(vi.name)
        if 0 in dims:   # an empty input (shapes= may give one): its value is known
            imp.constants[vi.name] = np.zeros(dims, dtype)
    for n in proto.graph.node:
        if n.op_type == "Constant":
            _constant(imp, n)
            continue
        for out in CONVERTERS[n.op_type](n, imp):
            imp.add(out)
    outputs = tuple(o.name for o in proto.graph.output)
    if not outputs:
        raise GraphError("from_onnx: the model has no outputs")
    for o in outputs:
        imp.type(o)
    return Graph(tuple(imp.nodes), tuple(inputs), outputs, dict(imp.types),
                 dict(imp.constants), name=name or (proto.graph.name or "model"))


def _constant(imp: _Importer, n: Any) -> None:
    from onnx import helper, numpy_helper
    for at in n.attribute:
        v = helper.get_attribute_value(at)
        if at.name == "value":
            imp.set_constant(n.output[0], numpy_helper.to_array(v))
        elif at.name in ("value_float", "value_int"):
            imp.set_constant(n.output[0], np.array(v, np.float32 if "float" in at.name
                                                   else np.int64))
        elif at.name in ("value_floats", "value_ints"):
            imp.set_constant(n.output[0], np.array(v, np.float32 if "float" in at.name
                                                   else np.int64))
        else:
            raise ConversionError(f"node {n.name!r} (Constant): attribute {at.name!r} is not "
                                  f"supported")
        return
