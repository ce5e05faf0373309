"""Tensor expressions: the algorithm half of tvmlite, written as in TVM's ``te``.

A ``compute`` is a pure function from output coordinates to a value; reductions
(``te.sum``/``te.max``/``te.min``) may appear only at the top of a compute body, so
each stage is either elementwise-like or one reduction. Tensors compare by identity;
names become C identifiers, so they must be valid identifiers.
"""
from __future__ import annotations

import builtins
import inspect
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from tvmlite.checks import is_int
from tvmlite.errors import TvmliteError
from tvmlite.ir.expr import (
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
    as_expr,
    binop,
    check_dtype,
    const,
    is_float,
    rebuild,
    walk,
)
from tvmlite.ir.names import IDENT, RESERVED, RESERVED_PREFIXES, unique_name  # noqa: F401 (IDENT re-exported)
from tvmlite.ir.symbolic import SizeVar, fold, is_size_expr, is_static, size_vars
from tvmlite.te.casts import cast  # noqa: F401 (te.cast, re-exported here as before)

__all__ = ["placeholder", "compute", "reduce_axis", "sum", "max", "min", "if_then_else",
           "all", "any", "const", "exp", "log", "sqrt", "tanh", "sigmoid", "abs", "erf",
           "cast", "floordiv", "floormod", "Tensor", "IterVar",
           "PlaceholderOp", "ComputeOp", "var", "size_var"]

MAX_ELEMENTS = 2**34  # a sane bound on one tensor's size; bigger is surely a mistake


def check_name(name: Any, what: str) -> str:
    if not isinstance(name, str) or not IDENT.match(name):
        raise ValueError(f"{what} must be an identifier ([A-Za-z_][A-Za-z0-9_]*, at most 64 "
                         f"characters), got {name!r}")
    if name in RESERVED or name.startswith(RESERVED_PREFIXES):
        raise ValueError(f"{what} {name!r} is reserved in the generated C (a C keyword, a "
                         f"library function, or a leading '_'/'tvmlite_'); pick another name")
    return name


def check_shape(shape: Any, what: str) -> tuple[int, ...]:
    if isinstance(shape, int):
        shape = (shape,)
    try:
        dims = tuple(shape)
    except TypeError:
        raise TypeError(f"{what}: shape must be a tuple of positive ints, got {shape!r}") from None
    if builtins.any(is_size_expr(d) and not isinstance(d, Const) for d in dims):
        return check_symbolic_shape(dims, what)
    total = 1
    for d in dims:
        if isinstance(d, Const):
            d = d.value
        if not is_int(d, 1):
            raise ValueError(f"{what}: shape must be a tuple of positive ints, got {shape!r}")
        total *= d
    if total > MAX_ELEMENTS:
        raise ValueError(f"{what}: shape {shape} has {total} elements, more than {MAX_ELEMENTS}")
    return tuple(int(d.value) if isinstance(d, Const) else int(d) for d in dims)


def var(name: str = "n", dtype: str = "int32") -> SizeVar:
    """A symbolic size (TVM's ``te.var``): use it as a dimension of a placeholder or a
    compute, as a reduction bound, or in an index; the kernel takes it as an ``int64_t``
    argument and, called from Python, reads it from the shapes of the arrays."""
    check_name(name, "te.var name")
    if dtype not in ("int32", "int64"):
        raise TypeError(f"te.var {name}: a size must be int32 or int64, got {dtype!r}")
    return SizeVar(name, "int32")


size_var = var  # TVM's te.size_var: a var known to be non-negative (ours are >= 1)


def check_symbolic_shape(dims: tuple, what: str) -> tuple:
    """A shape with symbolic dimensions: each an int >= 1 or an expression of te.vars."""
    out = []
    for d in dims:
        if isinstance(d, Const):
            d = int(d.value)
        if is_static(d) and d > 0:
            out.append(d)
        elif is_size_expr(d) and not isinstance(d, Const):
            out.append(d)
        else:
            raise ValueError(f"{what}: each dimension must be a positive int or an expression "
                             f"of te.var sizes, got {d!r} in {dims!r}")
    return tuple(out)


@dataclass(frozen=True, eq=False)
class IterVar:
    """An axis of a compute: ``var`` ranges over ``[min, min + extent)``."""
    var: Var
    extent: Any  # int, or an expression of te.var sizes (tvmlite.ir.symbolic)
    kind: str  # "spatial" or "reduce"
    min: int = 0

    @property
    def name(self) -> str:
        return self.var.name

    @property
    def dom(self) -> tuple[int, int]:
        return (self.min, self.extent)

    # an IterVar takes part in expressions as its variable
    def __add__(self, o): return self.var + o
    def __radd__(self, o): return o + self.var
    def __sub__(self, o): return self.var - o
    def __rsub__(self, o): return o - self.var
    def __mul__(self, o): return self.var * o
    def __rmul__(self, o): return o * self.var
    def __floordiv__(self, o): return self.var // o
    def __mod__(self, o): return self.var % o
    def __neg__(self): return -self.var
    def __truediv__(self, o): return self.var / o
    def __rfloordiv__(self, o): return o // self.var
    def __rmod__(self, o): return o % self.var
    def __eq__(self, o): return self.var == o  # type: ignore[override]
    def __ne__(self, o): return self.var != o  # type: ignore[override]
    __hash__ = object.__hash__

    def astype(self, dtype: str) -> Expr:
        return self.var.astype(dtype)

    def __lt__(self, o): return self.var < o
    def __le__(self, o): return self.var <= o
    def __gt__(self, o): return self.var > o
    def __ge__(self, o): return self.var >= o

    def __repr__(self) -> str:
        return f"IterVar({self.name}, [{self.min}, {self.min + self.extent}), {self.kind})"


class Tensor:
    """The output of an operation; ``T[i, j]`` reads it inside another compute."""

    def __init__(self, op: "PlaceholderOp | ComputeOp"):
        self.op = op

    name = property(lambda self: self.op.name)
    shape = property(lambda self: self.op.shape)
    dtype = property(lambda self: self.op.dtype)
    ndim = property(lambda self: len(self.op.shape))

    def __getitem__(self, index: Any) -> TensorRead:
        idx = index if isinstance(index, tuple) else (index,)
        if len(idx) != len(self.shape):
            raise IndexError(f"tensor {self.name} has {len(self.shape)} dimensions, "
                             f"indexed with {len(idx)}")
        exprs = tuple(as_expr(i) for i in idx)
        for e in exprs:
            if is_float(e.dtype):
                raise TypeError(f"index of {self.name} must be an integer, got {e} ({e.dtype})")
        return TensorRead(self, exprs)

    def __repr__(self) -> str:
        return f"Tensor({self.name}, shape={self.shape}, dtype={self.dtype})"


class PlaceholderOp:
    """An input tensor."""

    def __init__(self, name: str, shape: tuple[int, ...], dtype: str):
        self.name, self.shape, self.dtype = name, shape, dtype
        self.axis: tuple[IterVar, ...] = ()
        self.reduce_axis: tuple[IterVar, ...] = ()
        self.input_tensors: tuple[Tensor, ...] = ()
        self._out = Tensor(self)

    def output(self, i: int = 0) -> Tensor:
        return self._out

    def __repr__(self) -> str:
        return f"placeholder({self.name}, {self.shape}, {self.dtype})"


class ComputeOp:
    """``out[axis] = body``; ``body`` is a Reduce over ``reduce_axis`` or a plain expr."""

    def __init__(self, name: str, axis: tuple[IterVar, ...], body: Expr, tag: str = "",
                 attrs: dict | None = None):
        self.name, self.axis, self.body, self.tag = name, axis, body, tag
        self.attrs = dict(attrs or {})
        self.shape = tuple(iv.extent for iv in axis)
        self.dtype = body.dtype
        self.reduce_axis: tuple[IterVar, ...] = body.axes if isinstance(body, Reduce) else ()
        seen: dict[int, Tensor] = {}  # by identity: two tensors may share a name
        for node in walk(body):
            if isinstance(node, TensorRead) and id(node.tensor) not in seen:
                seen[id(node.tensor)] = node.tensor
        self.input_tensors = tuple(seen.values())
        self._out = Tensor(self)

    def output(self, i: int = 0) -> Tensor:
        return self._out

    def __repr__(self) -> str:
        return f"compute({self.name}, {self.shape}, {self.dtype})"


def placeholder(shape: Sequence[int], dtype: str = "float32", name: str = "placeholder") -> Tensor:
    """An input of the given shape and dtype."""
    check_name(name, "placeholder name")
    check_dtype(dtype, f"placeholder {name}: dtype")
    if dtype == "bool":
        raise TypeError(f"placeholder {name}: bool tensors are not supported")
    return PlaceholderOp(name, check_shape(shape, f"placeholder {name}"), dtype).output(0)


def reduce_axis(dom: Any, name: str = "rv") -> IterVar:
    """A reduction axis over ``range(lo, hi)`` given as ``(lo, hi)`` (or just ``hi``)."""
    check_name(name, "reduce_axis name")
    lo, hi = (0, dom) if isinstance(dom, (int, Expr)) else tuple(dom)
    if is_static(lo) and is_size_expr(hi) and not isinstance(hi, Const):
        return IterVar(Var(name), hi if lo == 0 else fold(binop("-", hi, lo)), "reduce", lo)
    if not builtins.all(is_int(x) for x in (lo, hi)) or hi <= lo:
        raise ValueError(f"reduce_axis {name}: dom must be (lo, hi) ints with lo < hi, got {dom!r}")
    return IterVar(Var(name), hi - lo, "reduce", lo)


def compute(shape: Sequence[int], fcompute: Callable[..., Any], name: str = "compute",
            tag: str = "", attrs: dict | None = None) -> Tensor:
    """A new tensor whose element at the output coordinates is ``fcompute(*coords)``.

    Axis names come from the lambda's argument names, so loops print as ``i``, ``j``;
    one that is the name of a size the compute uses is renamed (``h`` -> ``h_1``), so
    take a compute's axes from ``op.axis`` and ``op.reduce_axis`` to schedule them.
    """
    check_name(name, "compute name")
    shape = check_shape(shape, f"compute {name}")
    params = inspect.signature(fcompute).parameters.values()
    if builtins.any(p.kind == p.VAR_POSITIONAL for p in params):
        names = [f"i{d}" for d in range(len(shape))]
    else:
        names = [p.name for p in params]
    if len(names) != len(shape):
        raise ValueError(f"compute {name}: the function takes {len(names)} arguments but the "
                         f"shape {shape} has {len(shape)} dimensions")
    axis = tuple(IterVar(Var(check_name(n, f"compute {name}: axis name")), d, "spatial")
                 for n, d in zip(names, shape))
    body = as_expr(fcompute(*axis))
    if body.dtype == "bool":
        body = Cast("int32", body)
    axis, body = apart_from_sizes(axis, body)
    check_body(name, axis, body)
    return ComputeOp(name, axis, body, tag, attrs).output(0)


def apart_from_sizes(axis: tuple[IterVar, ...], body: Expr
                     ) -> tuple[tuple[IterVar, ...], Expr]:
    """The axes (and the body's reduce axes) renamed where one has the name of a size the
    compute uses: variables are told apart by name, so a pad over ``(N, h + 2, W, C)``
    whose loop is named ``h`` (an NHWC layout's axis) would read its guard ``h < h + 1``
    as always true, and the lowering's renaming of the loop would rename the size too."""
    reduces = body.axes if isinstance(body, Reduce) else ()
    sizes = {v.name for e in [body, *(iv.extent for iv in (*axis, *reduces))]
             for v in size_vars(e)}
    names = {iv.name for iv in (*axis, *reduces)}
    renamed: dict[str, str] = {}
    for n in sorted(names & sizes):
        renamed[n] = unique_name(n, names | sizes)
        names.add(renamed[n])
    if not renamed:
        return axis, body

    def rename(iv: IterVar) -> IterVar:
        new = renamed.get(iv.name)
        return iv if new is None else IterVar(Var(new, iv.var.dtype), iv.extent, iv.kind, iv.min)

    def go(e: Expr) -> Expr:
        if type(e) is Var and e.name in renamed:   # an axis, not a SizeVar of that name
            return Var(renamed[e.name], e.dtype)
        if isinstance(e, Reduce):
            return Reduce(e.combiner, go(e.source), tuple(rename(iv) for iv in e.axes),
                          None if e.where is None else go(e.where))
        return rebuild(e, go)
    return tuple(rename(iv) for iv in axis), go(body)


class ZeroDivisorError(TvmliteError, ZeroDivisionError, ValueError):
    """An integer ``//`` or ``%`` by a divisor that is always 0 (C leaves it undefined)."""


def check_body(name: str, axis: tuple[IterVar, ...], body: Expr) -> None:
    reduces = [n for n in walk(body) if isinstance(n, Reduce)]
    if reduces and not (isinstance(body, Reduce) and len(reduces) == 1):
        raise ValueError(f"compute {name}: a reduction must be the whole body (write the "
                         "reduction as its own compute and use it in the next one)")
    known = {iv.name for iv in axis}
    if isinstance(body, Reduce):
        for iv in body.axes:
            if iv.name in known:
                raise ValueError(f"compute {name}: axis name {iv.name!r} is used twice")
            known.add(iv.name)
    for node in walk(body):
        if isinstance(node, BinOp) and node.op in ("//", "%") and isinstance(node.b, Const) \
                and node.b.value == 0:
            what = "division" if node.op == "//" else "modulo"
            raise ZeroDivisorError(f"compute {name}: integer {what} "
                                    f"by zero in {node}; C leaves it undefined, so divide by a "
                                    f"non-zero value")
        if isinstance(node, Var) and node.name not in known and not isinstance(node, SizeVar):
            raise ValueError(f"compute {name}: variable {node.name!r} is not an axis of this "
                             "compute (reduce axes must be passed to te.sum/max/min)")


def _reduce(combiner: str, expr: Any, axis: Any, where: Any) -> Reduce:
    axes = tuple(axis) if isinstance(axis, (list, tuple)) else (axis,)
    for a in axes:
        if not isinstance(a, IterVar) or a.kind != "reduce":
            raise TypeError(f"te.{combiner}: axis must be te.reduce_axis(...) values, got {a!r}")
    if not axes:
        raise ValueError(f"te.{combiner}: needs at least one reduce axis")
    cond = None if where is None else as_expr(where)
    return Reduce(combiner, as_expr(expr), axes, cond)


def sum(expr: Any, axis: Any, where: Any = None) -> Reduce:  # noqa: A001 - TVM's name
    """Sum of ``expr`` over the reduce axis (or axes)."""
    return _reduce("sum", expr, axis, where)


def max(a: Any, b: Any = None, axis: Any = None, where: Any = None) -> Expr:  # noqa: A001
    """``te.max(x, axis=k)`` reduces; ``te.max(a, b)`` is the larger of two values."""
    if axis is None and isinstance(b, IterVar) and b.kind == "reduce":
        axis, b = b, None  # te.max(x, k): TVM's positional reduction
    if axis is not None:
        return _reduce("max", a, axis, where)
    if b is None:
        raise TypeError("te.max: give two values, or one value and axis=")
    return binop("max", a, b)


def min(a: Any, b: Any = None, axis: Any = None, where: Any = None) -> Expr:  # noqa: A001
    """``te.min(x, axis=k)`` reduces; ``te.min(a, b)`` is the smaller of two values."""
    if axis is None and isinstance(b, IterVar) and b.kind == "reduce":
        axis, b = b, None
    if axis is not None:
        return _reduce("min", a, axis, where)
    if b is None:
        raise TypeError("te.min: give two values, or one value and axis=")
    return binop("min", a, b)


def if_then_else(cond: Any, then: Any, other: Any) -> Select:
    c = as_expr(cond)
    if c.dtype != "bool":
        raise TypeError(f"if_then_else: condition must be a comparison, got {c} ({c.dtype})")
    if isinstance(then, Expr) or not isinstance(other, Expr):
        t = as_expr(then)
        o = as_expr(other, t)
    else:
        o = as_expr(other)
        t = as_expr(then, o)
    if t.dtype != o.dtype:
        raise TypeError(f"if_then_else: branches have dtypes {t.dtype} and {o.dtype}; cast one")
    return Select(c, t, o)


def all(*conds: Any) -> Expr:  # noqa: A001 - TVM's name
    """Logical and of conditions."""
    return _fold("and", conds)


def any(*conds: Any) -> Expr:  # noqa: A001 - TVM's name
    """Logical or of conditions."""
    return _fold("or", conds)


def _fold(op: str, conds: tuple) -> Expr:
    if len(conds) == 1 and isinstance(conds[0], (list, tuple)):
        conds = tuple(conds[0])
    if not conds:
        raise ValueError(f"te.{'all' if op == 'and' else 'any'}: needs at least one condition")
    out = as_expr(conds[0])
    for c in conds[1:]:
        out = BinOp(op, out, as_expr(c))
    return out


def _unary(func: str) -> Callable[[Any], Expr]:
    def fn(x: Any) -> Expr:
        e = as_expr(x)
        if func == "abs" and not is_float(e.dtype):
            return Select(Cmp("<", e, Const(0, e.dtype)), binop("-", 0, e), e)
        if not is_float(e.dtype):
            raise TypeError(f"te.{func}: needs a float argument, got {e.dtype}; cast it first")
        return Call(func, e)
    fn.__name__ = func
    fn.__doc__ = f"Elementwise {func} of a float expression."
    return fn


exp, log, sqrt, tanh, sigmoid, erf = (_unary(f) for f in ("exp", "log", "sqrt", "tanh",
                                                           "sigmoid", "erf"))
abs = _unary("abs")  # noqa: A001 - TVM's name


def floordiv(a: Any, b: Any) -> Expr:
    return binop("//", a, b)


def floormod(a: Any, b: Any) -> Expr:
    return binop("%", a, b)


def logical_not(a: Any) -> Expr:
    return Not(as_expr(a))


def collect_ops(outputs: Sequence[Tensor]) -> list:
    """All operations that the outputs depend on, in topological order (inputs first)."""
    order: list = []
    state: dict[int, int] = {}

    def visit(t: Tensor) -> None:
        op = t.op
        mark = state.get(id(op))
        if mark == 2:
            return
        if mark == 1:
            raise ValueError(f"the compute graph has a cycle through {op.name}")
        state[id(op)] = 1
        for inp in op.input_tensors:
            visit(inp)
        state[id(op)] = 2
        order.append(op)

    for t in outputs:
        visit(t)
    return order

