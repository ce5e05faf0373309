"""Scalar expression IR shared by te (compute bodies) and the loop IR (statements).

Every node is a frozen dataclass. As in TVM, ``a == b`` on expressions builds a
comparison node; that node's ``bool()`` is structural equality, so expressions still
work as dict keys and in ``if a == b`` tests. ``same(a, b)`` is the explicit form.

Map: dtype rules · Expr base with operators · leaves (Const, Var) · arithmetic
(BinOp, Cmp, Not, Select, Call, Cast) · tensor access (TensorRead, Reduce, Load) ·
vector nodes (Ramp, Broadcast) · helpers (const, as_expr, walk).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any, Callable, ClassVar, Iterator, TypeVar, cast

if TYPE_CHECKING:   # typing has it from Python 3.11; only the type checker needs it
    from typing_extensions import dataclass_transform
else:
    def dataclass_transform(**_: Any) -> Callable[[Any], Any]:
        return lambda f: f

from tvmlite.ir.dtypes import (  # noqa: F401 (ITEMSIZE re-exported)
    DTYPES,
    FLOAT_DTYPES,
    INT_DTYPES,
    ITEMSIZE,
    bfloat16_numpy,
    value_range,
)

UNARY_FUNCS = ("exp", "log", "sqrt", "tanh", "sigmoid", "abs", "erf")
ARITH_OPS = ("+", "-", "*", "/", "//", "%", "min", "max")
LOGIC_OPS = ("and", "or")
CMP_OPS = ("==", "!=", "<", "<=", ">", ">=")


def check_dtype(dtype: str, what: str = "dtype") -> str:
    if dtype not in DTYPES:
        raise TypeError(f"{what} must be one of {', '.join(DTYPES[:-1])}, got {dtype!r}")
    if dtype == "bfloat16":
        bfloat16_numpy()      # numpy knows "bfloat16" from here on (ir.dtypes: why lazily)
    return dtype


def is_float(dtype: str) -> bool:
    return dtype in FLOAT_DTYPES


# integer dtypes by (signed, bits); bool sits below every one
_INTS = {"bool": (True, 1), "int8": (True, 8), "uint8": (False, 8), "int16": (True, 16),
         "int32": (True, 32), "int64": (True, 64)}


def promote(a: str, b: str) -> str:
    """The dtype of a binary operation, numpy's rules for its arrays: float beats int,
    wider beats narrower; float16 with bfloat16 is float32 (neither holds the other), and
    int8 with uint8 is int16 (the narrowest that holds both)."""
    if a == b:
        return a
    if is_float(a) and is_float(b):
        if "float64" in (a, b):
            return "float64"
        return "float32"      # float32 with a 16-bit float, or float16 with bfloat16
    if is_float(a) or is_float(b):
        return a if is_float(a) else b
    (sa, ba), (sb, bb) = _INTS[a], _INTS[b]
    if sa != sb and a != "bool" and b != "bool":
        signed_bits, unsigned_bits = (ba, bb) if sa else (bb, ba)
        if signed_bits > unsigned_bits:
            return a if sa else b
        return {8: "int16", 16: "int32", 32: "int64"}.get(unsigned_bits, "int64")
    return a if ba >= bb else b


class Expr:
    """Base of every expression node; carries the operator overloads."""

    __slots__ = ()
    dtype: str
    _field_names: ClassVar[tuple[str, ...]]   # set by expr_node

    # -- structural identity -------------------------------------------------
    def _key(self) -> tuple:
        return (type(self),) + tuple(getattr(self, n) for n in self._field_names)

    def __hash__(self) -> int:
        h = self.__dict__.get("_hash")
        if h is None:  # nodes are immutable: hash once (lowering hashes atoms a lot)
            h = hash(self._key())
            object.__setattr__(self, "_hash", h)
        return h

    def __getstate__(self) -> dict:
        """The fields only, not the memos (``_hash``; ``simplify.linear``'s ``_linear``):
        a Var's linear form is a dict keyed by the Var itself, which unpickling (a Dask
        runner ships workloads) or deepcopy would hash before the Var has its fields."""
        return {k: v for k, v in self.__dict__.items() if not k.startswith("_")}

    def __bool__(self) -> bool:
        raise TypeError(
            f"cannot use the expression {self} as a Python bool: use te.if_then_else, "
            "te.all or te.any to build conditions")

    # -- arithmetic ------------------------------------------------------------
    def __add__(self, o): return binop("+", self, o)
    def __radd__(self, o): return binop("+", o, self)
    def __sub__(self, o): return binop("-", self, o)
    def __rsub__(self, o): return binop("-", o, self)
    def __mul__(self, o): return binop("*", self, o)
    def __rmul__(self, o): return binop("*", o, self)
    def __truediv__(self, o): return binop("/", self, o)
    def __rtruediv__(self, o): return binop("/", o, self)
    def __floordiv__(self, o): return binop("//", self, o)
    def __rfloordiv__(self, o): return binop("//", o, self)
    def __mod__(self, o): return binop("%", self, o)
    def __rmod__(self, o): return binop("%", o, self)
    def __neg__(self): return binop("-", Const(0, self.dtype), self)

    # -- comparisons -----------------------------------------------------------
    def __lt__(self, o): return cmp("<", self, o)
    def __le__(self, o): return cmp("<=", self, o)
    def __gt__(self, o): return cmp(">", self, o)
    def __ge__(self, o): return cmp(">=", self, o)
    def __eq__(self, o): return cmp("==", self, o)  # type: ignore[override]
    def __ne__(self, o): return cmp("!=", self, o)  # type: ignore[override]

    def astype(self, dtype: str) -> "Expr":
        return Cast(check_dtype(dtype), self)

    def __str__(self) -> str:
        from tvmlite.ir.printer import expr_str
        return expr_str(self)


_E = TypeVar("_E", bound="Expr")


def same(a: Any, b: Any) -> bool:
    """Structural equality of two expressions (or of plain values)."""
    if isinstance(a, Expr) and isinstance(b, Expr):
        return a is b or a._key() == b._key()
    return a is b or (type(a) is type(b) and a == b)


@dataclass_transform(frozen_default=True, eq_default=False)
def expr_node(cls: type[_E]) -> type[_E]:
    """Frozen dataclass whose equality is our structural one, not the dataclass one: the
    decorator of every expression node (``symbolic.py`` defines more with it)."""
    cls = dataclass(frozen=True, eq=False, repr=False)(cls)
    setattr(cls, "__repr__", Expr.__str__)
    cls._field_names = tuple(f.name for f in fields(cast(Any, cls)))
    return cls


@expr_node
class Const(Expr):
    value: Any
    dtype: str = "int32"

    def __post_init__(self) -> None:
        if self.dtype in FLOAT_DTYPES:
            object.__setattr__(self, "value", float(self.value))
        elif self.dtype == "bool":
            object.__setattr__(self, "value", bool(self.value))
        else:
            object.__setattr__(self, "value", int(self.value))


@expr_node
class Var(Expr):
    """A loop or axis variable, identified by its name."""
    name: str
    dtype: str = "int32"


@expr_node
class BinOp(Expr):
    op: str
    a: Expr
    b: Expr

    @property
    def dtype(self) -> str:  # type: ignore[override]
        return "bool" if self.op in LOGIC_OPS else promote(self.a.dtype, self.b.dtype)


@expr_node
class Cmp(Expr):
    """A comparison. ``bool(Cmp('==', a, b))`` is structural equality (see module doc)."""
    op: str
    a: Expr
    b: Expr
    dtype = "bool"

    def __bool__(self) -> bool:
        if self.op == "==":
            return same(self.a, self.b)
        if self.op == "!=":
            return not same(self.a, self.b)
        return Expr.__bool__(self)


@expr_node
class Not(Expr):
    a: Expr
    dtype = "bool"


@expr_node
class Select(Expr):
    cond: Expr
    then: Expr
    other: Expr

    @property
    def dtype(self) -> str:  # type: ignore[override]
        return self.then.dtype


@expr_node
class Call(Expr):
    """A math function of one argument (exp, log, ...), typed like its argument."""
    func: str
    arg: Expr

    @property
    def dtype(self) -> str:  # type: ignore[override]
        return self.arg.dtype


@expr_node
class Cast(Expr):
    dtype: str
    value: Expr


@expr_node
class TensorRead(Expr):
    """``T[i, j]`` in a compute body; ``tensor`` is a te.Tensor."""
    tensor: Any
    indices: tuple

    @property
    def dtype(self) -> str:  # type: ignore[override]
        return self.tensor.dtype

    def _key(self) -> tuple:
        return (TensorRead, self.tensor.name, tuple(i._key() for i in self.indices))


@expr_node
class Reduce(Expr):
    """A commutative reduction (sum/max/min) of ``source`` over ``axes`` (te.IterVars)."""
    combiner: str
    source: Expr
    axes: tuple
    where: Expr | None = None

    @property
    def dtype(self) -> str:  # type: ignore[override]
        return self.source.dtype


@expr_node
class Load(Expr):
    """A read of a lowered buffer; ``indices`` has one entry after flattening."""
    buffer: Any
    indices: tuple

    @property
    def dtype(self) -> str:  # type: ignore[override]
        return self.buffer.dtype


@expr_node
class Ramp(Expr):
    """The vector ``base + stride * [0, 1, ..., lanes-1]``."""
    base: Expr
    stride: int
    lanes: int

    @property
    def dtype(self) -> str:  # type: ignore[override]
        return self.base.dtype


@expr_node
class Broadcast(Expr):
    value: Expr
    lanes: int

    @property
    def dtype(self) -> str:  # type: ignore[override]
        return self.value.dtype


def lanes_of(e: Expr) -> int:
    """Vector width of an expression (1 for scalars): a Ramp's or Broadcast's own, else
    the widest child's. Cached on the node, as lowering asks it again and again."""
    if isinstance(e, (Const, Var)):
        return 1
    if isinstance(e, (Ramp, Broadcast)):
        return e.lanes
    lanes = e.__dict__.get("_lanes")
    if lanes is None:
        lanes = max((lanes_of(c) for c in children(e)), default=1)
        object.__setattr__(e, "_lanes", lanes)
    return lanes


# -- construction helpers ------------------------------------------------------------

def const(value: Any, dtype: str | None = None) -> Const:
    if dtype is None:
        if isinstance(value, bool):
            dtype = "bool"
        elif isinstance(value, int):
            dtype = "int32" if -2**31 <= value < 2**31 else "int64"
        elif isinstance(value, float):
            dtype = "float32"
        else:
            raise TypeError(f"const: cannot make a constant of {type(value).__name__} {value!r}")
    check_dtype(dtype)
    if isinstance(value, float) and dtype in INT_DTYPES and not (
            math.isfinite(value) and value == int(value)):
        raise ValueError(f"const: {value} is not a valid {dtype}")
    if dtype in INT_DTYPES and not value_range(dtype)[0] <= int(value) <= value_range(dtype)[1]:
        raise ValueError(f"const: {value} does not fit in {dtype} "
                         f"({value_range(dtype)[0]} to {value_range(dtype)[1]})")
    return Const(value, dtype)


def as_expr(value: Any, like: Expr | None = None) -> Expr:
    """Wrap Python numbers; a bare number takes the dtype of the other operand."""
    if isinstance(value, Expr):
        return value
    if hasattr(value, "var") and isinstance(getattr(value, "var"), Var):  # te.IterVar
        return value.var
    if hasattr(value, "dtype") and hasattr(value, "item") and getattr(value, "ndim", 1) == 0:
        value = value.item()  # numpy scalar
    if isinstance(value, (bool, int, float)):
        if like is not None and not isinstance(value, bool):
            if isinstance(value, float) and not is_float(like.dtype):
                return const(value)
            if like.dtype in INT_DTYPES and not (
                    value_range(like.dtype)[0] <= value <= value_range(like.dtype)[1]):
                return const(value)   # x_int8 + 1000 is int32 arithmetic, not a wrap
            return Const(value, like.dtype if like.dtype != "bool" else "int32")
        return const(value)
    raise TypeError(f"cannot use {type(value).__name__} {value!r} in an expression")


def binop(op: str, a: Any, b: Any) -> Expr:
    if not isinstance(a, Expr) and not hasattr(a, "var"):
        b = as_expr(b)
        a = as_expr(a, b)
    else:
        a = as_expr(a)
        b = as_expr(b, a)
    if op == "/" and not (is_float(a.dtype) or is_float(b.dtype)):
        raise TypeError(f"'/' on integers ({a} / {b}): use // for floor division")
    if op in ("//", "%") and (is_float(a.dtype) or is_float(b.dtype)):
        raise TypeError(f"'{op}' needs integer operands, got {a.dtype} and {b.dtype}")
    a, b = _unify(a, b)
    return BinOp(op, a, b)


def cmp(op: str, a: Any, b: Any) -> Cmp:
    if not isinstance(a, Expr) and not hasattr(a, "var"):
        b = as_expr(b)
        a = as_expr(a, b)
    else:
        a = as_expr(a)
        b = as_expr(b, a)
    a, b = _unify(a, b)
    return Cmp(op, a, b)


def _unify(a: Expr, b: Expr) -> tuple[Expr, Expr]:
    """Cast constants (and narrower ints) so both operands share one dtype."""
    if a.dtype == b.dtype or "bool" in (a.dtype, b.dtype):
        return a, b
    dt = promote(a.dtype, b.dtype)
    if a.dtype != dt:
        a = Const(a.value, dt) if isinstance(a, Const) else Cast(dt, a)
    if b.dtype != dt:
        b = Const(b.value, dt) if isinstance(b, Const) else Cast(dt, b)
    return a, b


def children(e: Expr) -> tuple:
    """Direct sub-expressions, in a fixed order."""
    if isinstance(e, (Const, Var)):
        return ()
    if isinstance(e, (BinOp, Cmp)):
        return (e.a, e.b)
    if isinstance(e, Not):
        return (e.a,)
    if isinstance(e, Select):
        return (e.cond, e.then, e.other)
    if isinstance(e, Call):
        return (e.arg,)
    if isinstance(e, Cast):
        return (e.value,)
    if isinstance(e, (TensorRead, Load)):
        return tuple(e.indices)
    if isinstance(e, Reduce):
        return (e.source,) if e.where is None else (e.source, e.where)
    if isinstance(e, Ramp):
        return (e.base,)
    if isinstance(e, Broadcast):
        return (e.value,)
    raise TypeError(f"not an expression: {e!r}")


def walk(e: Expr) -> Iterator[Expr]:
    """Pre-order traversal of an expression tree."""
    stack = [e]
    while stack:
        node = stack.pop()
        yield node
        stack.extend(reversed(children(node)))


def rebuild(e: Expr, fn: Callable[[Expr], Expr]) -> Expr:
    """Apply ``fn`` to each direct child; returns ``e`` itself if nothing changed."""
    if isinstance(e, (Const, Var)):
        return e
    if isinstance(e, BinOp):
        a, b = fn(e.a), fn(e.b)
        return e if a is e.a and b is e.b else BinOp(e.op, a, b)
    if isinstance(e, Cmp):
        a, b = fn(e.a), fn(e.b)
        return e if a is e.a and b is e.b else Cmp(e.op, a, b)
    if isinstance(e, Not):
        a = fn(e.a)
        return e if a is e.a else Not(a)
    if isinstance(e, Select):
        c, t, o = fn(e.cond), fn(e.then), fn(e.other)
        return e if c is e.cond and t is e.then and o is e.other else Select(c, t, o)
    if isinstance(e, Call):
        a = fn(e.arg)
        return e if a is e.arg else Call(e.func, a)
    if isinstance(e, Cast):
        v = fn(e.value)
        return e if v is e.value else Cast(e.dtype, v)
    if isinstance(e, TensorRead):
        idx = tuple(fn(i) for i in e.indices)
        return e if all(x is y for x, y in zip(idx, e.indices)) else TensorRead(e.tensor, idx)
    if isinstance(e, Load):
        idx = tuple(fn(i) for i in e.indices)
        return e if all(x is y for x, y in zip(idx, e.indices)) else Load(e.buffer, idx)
    if isinstance(e, Reduce):
        src = fn(e.source)
        where = None if e.where is None else fn(e.where)
        return e if src is e.source and where is e.where else Reduce(e.combiner, src, e.axes, where)
    if isinstance(e, Ramp):
        b = fn(e.base)
        return e if b is e.base else Ramp(b, e.stride, e.lanes)
    if isinstance(e, Broadcast):
        v = fn(e.value)
        return e if v is e.value else Broadcast(v, e.lanes)
    raise TypeError(f"not an expression: {e!r}")


def substitute(e: Expr, mapping: dict) -> Expr:
    """Replace variables (keys: Var or name) by expressions."""
    if not mapping:
        return e
    by_name = {(k.name if isinstance(k, Var) else k): v for k, v in mapping.items()}

    def go(x: Expr) -> Expr:
        if isinstance(x, Var):
            return by_name.get(x.name, x)
        return rebuild(x, go)
    return go(e)


def free_vars(e: Expr) -> set[str]:
    return {x.name for x in walk(e) if isinstance(x, Var)}
