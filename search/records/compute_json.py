"""The canonical JSON form of a te compute DAG: a stable writer and a validating reader.

Canonical compute JSON: ``{"ops": [...], "tensors": [indices]}``. ``ops`` lists the
operations in topological order (``te.collect_ops`` of the outputs), each a placeholder
``{"op", "name", "shape", "dtype"}`` or a compute ``{"op", "name", "axis": [[name,
extent]...], "body", "tag"}``; ``tensors`` are the kernel arguments as positions in
``ops``. Expressions are dicts with a ``"node"`` field. A read names its tensor by
position, because two tensors of one DAG may share a name.

The reader is an attack surface (logs come from elsewhere): it validates every field
before a te object is built, within the limits below, and re-uses the te constructors'
own checks for what they cover.

Map: limits and WorkloadError · validation helpers · writer (``compute_json``) ·
reader (``read_compute``, ``_expr``).
"""
from __future__ import annotations

import json
import math
import re
from contextlib import contextmanager
from typing import Any, Iterator, Sequence

from tvmlite import te
from tvmlite.checks import check_int, is_int
from tvmlite.errors import TvmliteError
from tvmlite.ir.dtypes import value_range
from tvmlite.ir.expr import (
    ARITH_OPS,
    CMP_OPS,
    DTYPES,
    FLOAT_DTYPES,
    INT_DTYPES,
    LOGIC_OPS,
    UNARY_FUNCS,
    BinOp,
    Call,
    Cast,
    Cmp,
    Const,
    Expr,
    Not,
    Reduce,
    Select,
    TensorRead,
    Var,
    binop,
    children,
    cmp,
)
from tvmlite.ir.symbolic import SizeVar, is_size_expr, is_static
from tvmlite.te.tensor import check_body

MAX_OPS = 256
MAX_NODES = 100_000        # expression nodes in one workload, all ops together
MAX_DEPTH = 200            # nesting of one expression
MAX_NDIM = 32
MAX_ARGS = 64
MAX_STR = 256
COMBINERS = ("sum", "max", "min")
_NONFINITE = ("nan", "inf", "-inf")
_INT_RANGE = {d: value_range(d) for d in INT_DTYPES}
HEX64 = re.compile(r"^[0-9a-f]{64}$")   # a workload key: a sha256 in hex
_TAG = re.compile(r"^[A-Za-z0-9_.]{0,64}$")
# The fields of each expression node kind, and which of them are sub-expressions.
_FIELDS = {"const": ("dtype", "value"), "var": ("name",), "size": ("name",),
           "binop": ("op", "a", "b"), "cmp": ("op", "a", "b"), "not": ("a",),
           "select": ("cond", "then", "else"),
           "call": ("func", "arg"), "cast": ("dtype", "value"), "read": ("tensor", "indices"),
           "reduce": ("combiner", "source", "axes", "where")}
_CHILDREN = {"binop": ("a", "b"), "cmp": ("a", "b"), "not": ("a",),
             "select": ("cond", "then", "else"), "call": ("arg",), "cast": ("value",),
             "reduce": ("source", "where")}



class WorkloadError(TvmliteError, ValueError):
    """A workload that cannot be built, serialized or trusted; says what and where."""



# -- validation helpers -------------------------------------------------------------------

def short_repr(v: Any) -> str:
    """``repr(v)`` cut to 40 characters: a value from an untrusted log, quoted in an error."""
    text = repr(v)
    return text if len(text) <= 40 else text[:37] + "..."


@contextmanager
def errors_at(where: str) -> Iterator[None]:
    """Turn the te constructors' ValueError/TypeError/IndexError into a WorkloadError
    that says where in the workload it happened."""
    try:
        yield
    except WorkloadError:
        raise
    except (ValueError, TypeError, IndexError) as err:
        raise WorkloadError(f"{where}: {err}") from None


def check_keys(d: dict, expected: Sequence[str], where: str) -> None:
    """A WorkloadError at ``where`` unless ``d`` has exactly the ``expected`` keys."""
    missing = [k for k in expected if k not in d]
    extra = sorted(str(k)[:40] for k in d if k not in expected)
    if missing or extra:
        raise WorkloadError(f"{where}: expected keys {list(expected)}; missing {missing}, "
                            f"unknown {extra[:5]}")



def _dtype(v: Any, where: str, allow_bool: bool) -> str:
    allowed = DTYPES if allow_bool else DTYPES[:-1]   # bool is last
    if v not in allowed:
        raise WorkloadError(f"{where}: dtype must be one of {', '.join(allowed)}, "
                            f"got {short_repr(v)}")
    return v


def _int(v: Any, where: str, lo: int, hi: int) -> int:
    return check_int(v, where, lo, hi, error=WorkloadError)


def _list(v: Any, where: str, lo: int, hi: int) -> list:
    if not isinstance(v, list) or not lo <= len(v) <= hi:
        raise WorkloadError(f"{where} must be a list of {lo} to {hi} entries, got {short_repr(v)}")
    return v


class _Budget:
    """The expression nodes a workload may still use, shared by all its ops."""

    def __init__(self) -> None:
        self.left = MAX_NODES

    def take(self, where: str) -> None:
        self.left -= 1
        if self.left < 0:
            raise WorkloadError(f"{where}: the workload has more than {MAX_NODES} "
                                "expression nodes")


# -- writing ------------------------------------------------------------------------------

def canonical(compute: dict) -> str:
    """Stable across processes and Python versions: sorted keys, no spaces, floats as
    repr, non-finite floats as strings."""
    return json.dumps(compute, sort_keys=True, separators=(",", ":"), allow_nan=False)


def compute_json(tensors: Sequence[te.Tensor]) -> dict:
    ops = te.collect_ops([t for t in tensors if isinstance(t.op, te.ComputeOp)])
    index = {id(op): i for i, op in enumerate(ops)}
    budget = _Budget()
    out: list[dict[str, Any]] = []
    for op in ops:
        if isinstance(op, te.PlaceholderOp):
            out.append({"op": "placeholder", "name": op.name,
                        "shape": [_dim_out(d, op.name) for d in op.shape], "dtype": op.dtype})
            continue
        where = f"compute {op.name}"
        stack = [(op.body, 1)]
        while stack:  # check size and depth without recursion before writing
            node, depth = stack.pop()
            budget.take(where)
            if depth > MAX_DEPTH:
                raise WorkloadError(f"{where}: expression nesting deeper than {MAX_DEPTH}")
            stack.extend((c, depth + 1) for c in children(node))
        if not _TAG.match(op.tag):
            raise WorkloadError(f"{where}: tag {short_repr(op.tag)} must match {_TAG.pattern}")
        out.append({"op": "compute", "name": op.name,
                    "axis": [[iv.name, _dim_out(iv.extent, where)] for iv in op.axis],
                    "body": _expr_json(op.body, index, where), "tag": op.tag})
    return {"ops": out, "tensors": [index[id(t.op)] for t in tensors]}


def _expr_json(e: Expr, index: dict, where: str) -> dict:
    def sub(x: Expr) -> dict:
        return _expr_json(x, index, where)
    match e:
        case Const(value=v, dtype=dt):
            return {"node": "const", "dtype": dt, "value": _const_out(v, dt, where)}
        case SizeVar(name=name):
            return {"node": "size", "name": name}
        case Var(name=name, dtype="int32"):
            return {"node": "var", "name": name}
        case BinOp(op=op, a=a, b=b):
            return {"node": "binop", "op": op, "a": sub(a), "b": sub(b)}
        case Cmp(op=op, a=a, b=b):
            return {"node": "cmp", "op": op, "a": sub(a), "b": sub(b)}
        case Not(a=a):
            return {"node": "not", "a": sub(a)}
        case Select(cond=c, then=t, other=o):
            return {"node": "select", "cond": sub(c), "then": sub(t), "else": sub(o)}
        case Call(func=f, arg=a):
            return {"node": "call", "func": f, "arg": sub(a)}
        case Cast(dtype=dt, value=v):
            return {"node": "cast", "dtype": dt, "value": sub(v)}
        case TensorRead(tensor=t, indices=idx):
            return {"node": "read", "tensor": index[id(t.op)], "indices": [sub(i) for i in idx]}
        case Reduce(combiner=c, source=s, axes=axes, where=cond):
            return {"node": "reduce", "combiner": c, "source": sub(s),
                    "axes": [[iv.name, iv.min, _dim_out(iv.extent, where)] for iv in axes],
                    "where": None if cond is None else sub(cond)}
    raise WorkloadError(f"{where}: {type(e).__name__} {short_repr(e)} cannot appear in a compute")


def _dim_out(d: Any, where: str) -> Any:
    """A dimension: an int, or (symbolic, ``te.var``) the JSON of its size expression."""
    return d if is_static(d) else _expr_json(d, {}, where)


def _dim_in(v: Any, where: str, budget: _Budget) -> Any:
    """The reader's side of ``_dim_out``: ints pass through (the te checks judge them); an
    object must be an integer expression of sizes only."""
    if not isinstance(v, dict):
        return v
    _check_tree(v, where, budget)
    e = _expr(v, [], where)
    if not is_size_expr(e) or isinstance(e, Const):
        raise WorkloadError(f"{where}: a symbolic dimension must be an integer expression of "
                            f"sizes (te.var), got {short_repr(e)}")
    return e


def _const_out(v: Any, dtype: str, where: str) -> Any:
    if dtype in FLOAT_DTYPES:
        return v if math.isfinite(v) else ("nan" if math.isnan(v) else "inf" if v > 0 else "-inf")
    if dtype in _INT_RANGE and not _INT_RANGE[dtype][0] <= v <= _INT_RANGE[dtype][1]:
        raise WorkloadError(f"{where}: constant {v} does not fit in {dtype}")
    return v




def read_compute(d: Any) -> tuple:
    """The kernel arguments of a compute JSON, each op validated before it is built."""
    if not isinstance(d, dict):
        raise WorkloadError(f"workload compute must be a JSON object, got {type(d).__name__}")
    check_keys(d, ("ops", "tensors"), "compute")
    built: list[te.Tensor] = []
    budget = _Budget()
    for i, od in enumerate(_list(d["ops"], "compute: ops", 1, MAX_OPS)):
        t = _read_op(od, i, built, budget)
        if any(b.name == t.name for b in built):
            raise WorkloadError(f"compute op {i}: name {t.name!r} is used by an earlier op")
        built.append(t)
    idx = _list(d["tensors"], "compute: tensors", 1, MAX_OPS)
    for j in idx:
        _int(j, "compute: tensors entry", 0, len(built) - 1)
    if len(set(idx)) != len(idx):
        raise WorkloadError("compute: tensors lists an op twice")
    tensors = tuple(built[j] for j in idx)
    outputs = [t for t in tensors if isinstance(t.op, te.ComputeOp)]
    if len(te.collect_ops(outputs)) != len(built):
        raise WorkloadError("compute: some ops are not needed by any output in tensors")
    return tensors


def _read_op(od: Any, i: int, built: list, budget: _Budget) -> te.Tensor:
    kind = od.get("op") if isinstance(od, dict) else None
    if kind == "placeholder":
        where = f"compute op {i} (placeholder)"
        check_keys(od, ("op", "name", "shape", "dtype"), where)
        shape = _list(od["shape"], f"{where}: shape", 1, MAX_NDIM)
        dtype = _dtype(od["dtype"], where, allow_bool=False)
        shape = [_dim_in(x, f"{where}: shape", budget) for x in shape]
        with errors_at(where):
            return te.placeholder(te.check_shape(shape, "shape"), dtype, od["name"])
    if kind != "compute":
        raise WorkloadError(f"compute op {i}: must be an object with \"op\" placeholder or "
                            f"compute, got {short_repr(od)}")
    where = f"compute op {i} (compute)"
    check_keys(od, ("op", "name", "axis", "body", "tag"), where)
    with errors_at(where):
        name = te.check_name(od["name"], "name")
    where = f"compute op {i} ({name})"
    names, raw_extents = [], []
    for ax in _list(od["axis"], f"{where}: axis", 1, MAX_NDIM):
        ax = _list(ax, f"{where}: axis entry", 2, 2)
        with errors_at(where):
            names.append(te.check_name(ax[0], "axis name"))
        raw_extents.append(_dim_in(ax[1], f"{where}: axis extent", budget))
    with errors_at(where):
        extents = te.check_shape(raw_extents, "axis extents")
    if len(set(names)) != len(names):
        raise WorkloadError(f"{where}: axis names repeat: {names}")
    if not isinstance(od["tag"], str) or not _TAG.match(od["tag"]):
        raise WorkloadError(f"{where}: tag must match {_TAG.pattern}, got {short_repr(od['tag'])}")
    _check_tree(od["body"], where, budget)
    with errors_at(where):
        body = _expr(od["body"], built, where)
        if body.dtype == "bool":
            raise WorkloadError(f"{where}: a compute body cannot be bool; cast it to int32")
        axis = tuple(te.IterVar(Var(n), e, "spatial") for n, e in zip(names, extents))
        check_body(name, axis, body)
        return te.ComputeOp(name, axis, body, od["tag"]).output(0)


def _check_tree(body: Any, where: str, budget: _Budget) -> None:
    """Node kinds, key sets, node count and depth, iteratively: a 10^5-deep nesting is a
    clean error here, so building afterwards can recurse safely."""
    stack = [(body, 1)]
    while stack:
        node, depth = stack.pop()
        budget.take(where)
        if depth > MAX_DEPTH:
            raise WorkloadError(f"{where}: expression nesting deeper than {MAX_DEPTH}")
        kind = node.get("node") if isinstance(node, dict) else None
        if not isinstance(kind, str) or kind not in _FIELDS:
            what = f"kind {short_repr(kind)}" if isinstance(node, dict) else short_repr(node)
            raise WorkloadError(f"{where}: unknown expression node {what}; node kinds are "
                                f"{', '.join(_FIELDS)}")
        check_keys(node, ("node",) + _FIELDS[kind], f"{where}: {kind} node")
        kids = [node[k] for k in _CHILDREN.get(kind, ())]
        if kind == "reduce" and node["where"] is None:
            kids.pop()
        if kind == "read":
            kids = _list(node["indices"], f"{where}: read indices", 1, MAX_NDIM)
        stack.extend((k, depth + 1) for k in kids)


def _expr(n: dict, built: list, where: str) -> Expr:
    """Build one checked node (shape already validated by ``_check_tree``) with the te
    constructors, which check dtypes the way user code is checked."""
    kind = n["node"]

    def sub(key: str) -> Expr:
        return _expr(n[key], built, where)

    def name(key: str, allowed: Sequence[str]) -> str:
        v = n[key]
        if not isinstance(v, str) or v not in allowed:
            raise WorkloadError(f"{where}: unknown {kind} {key} {short_repr(v)}; known: "
                                f"{', '.join(allowed)}")
        return v

    def boolean(e: Expr, what: str) -> Expr:
        if e.dtype != "bool":
            raise WorkloadError(f"{where}: {kind} {what} must be a bool condition, got {e.dtype}")
        return e

    if kind == "const":
        dtype = _dtype(n["dtype"], f"{where}: const", allow_bool=True)
        return Const(_const_in(n["value"], dtype, where), dtype)
    if kind == "var":
        if not isinstance(n["name"], str) or not te.IDENT.match(n["name"]):
            raise WorkloadError(f"{where}: variable name {short_repr(n['name'])} is not an "
                                "identifier")
        return Var(n["name"])
    if kind == "size":
        with errors_at(where):
            return te.var(n["name"])
    if kind == "binop":
        op = name("op", ARITH_OPS + LOGIC_OPS)
        if op in ARITH_OPS:
            return binop(op, sub("a"), sub("b"))
        return BinOp(op, boolean(sub("a"), "a"), boolean(sub("b"), "b"))
    if kind == "cmp":
        return cmp(name("op", CMP_OPS), sub("a"), sub("b"))
    if kind == "not":
        return Not(boolean(sub("a"), "a"))
    if kind == "select":
        return te.if_then_else(sub("cond"), sub("then"), sub("else"))
    if kind == "call":
        return getattr(te, name("func", UNARY_FUNCS))(sub("arg"))
    if kind == "cast":
        return te.cast(sub("value"), _dtype(n["dtype"], f"{where}: cast", allow_bool=True))
    if kind == "read":
        t = n["tensor"]
        if not is_int(t, 0, len(built) - 1):
            raise WorkloadError(f"{where}: read of op {short_repr(t)}: a read must name an earlier "
                                f"op (0 to {len(built) - 1})")
        indices = tuple(_expr(x, built, where) for x in n["indices"])
        for x in indices:
            if x.dtype not in INT_DTYPES:
                raise WorkloadError(f"{where}: index of {built[t].name} must be an integer, "
                                    f"got {x.dtype}")
        return built[t][indices]
    # reduce
    combiner = name("combiner", COMBINERS)
    axes = []
    for ax in _list(n["axes"], f"{where}: reduce axes", 1, MAX_NDIM):
        rname, lo, ext = _list(ax, f"{where}: reduce axis", 3, 3)
        lo = _int(lo, f"{where}: reduce axis min", -te.MAX_ELEMENTS, te.MAX_ELEMENTS)
        if isinstance(ext, dict):  # a symbolic extent; its tree was checked with the body
            ext = _dim_in(ext, f"{where}: reduce axis extent", _Budget())
            with errors_at(where):
                axes.append(te.reduce_axis((lo, ext if lo == 0 else binop("+", ext, lo)), rname))
            continue
        ext = _int(ext, f"{where}: reduce axis extent", 1, te.MAX_ELEMENTS)
        axes.append(te.reduce_axis((lo, lo + ext), rname))
    cond = None if n["where"] is None else boolean(sub("where"), "where")
    return Reduce(combiner, sub("source"), tuple(axes), cond)


def _const_in(v: Any, dtype: str, where: str) -> Any:
    if dtype in FLOAT_DTYPES:
        if isinstance(v, str) and v in _NONFINITE:
            return float(v)
        if isinstance(v, float) and math.isfinite(v):
            return v
        if is_int(v, -2**53, 2**53):
            return float(v)
    elif dtype == "bool":
        if isinstance(v, bool):
            return v
    elif is_int(v, *_INT_RANGE[dtype]):
        return v
    raise WorkloadError(f"{where}: {short_repr(v)} is not a valid {dtype} constant (floats: a "
                        f"finite number or one of {_NONFINITE})")
