"""A numpy interpreter of te compute DAGs: the unscheduled reference of any compute.

Every stage is evaluated over its whole index grid at once: each axis variable is an
``arange`` laid along its own dimension, reduce axes are extra trailing dimensions that
are reduced at the end, and numpy broadcasting does the rest. No C and no schedule is
involved, so this is what a scheduled build of the same compute must reproduce.

Out-of-range reads: padding stages read out of bounds in the branch that if_then_else does
not select. The interpreter tracks which grid points each sub-expression actually
contributes to (the "live" mask: narrowed by Select conditions, by the left side of
and/or, and by a reduction's ``where``), clips indices so the gather cannot crash, and
raises IndexError only for an out-of-range read at a live point — a real bug in the
compute that C would turn into a silent wild read.

Map: evaluate_te · per-stage blocking (memory bound) · expression evaluation.
"""
from __future__ import annotations

import itertools
import math
from typing import Any, Iterator, Sequence, cast

import numpy as np
from scipy import special

from tvmlite import te
from tvmlite.ir.dtypes import STORAGE_FLOATS, compute_dtype, numpy_dtype
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
)

DEFAULT_MAX_ELEMENTS = 1 << 22  # grid points per evaluated block (a few 32 MB temporaries)

_CMP = {"==": np.equal, "!=": np.not_equal, "<": np.less, "<=": np.less_equal,
        ">": np.greater, ">=": np.greater_equal}
_ARITH = {"+": np.add, "-": np.subtract, "*": np.multiply, "/": np.true_divide,
          "//": np.floor_divide, "%": np.mod, "min": np.minimum, "max": np.maximum}
_FUNCS = {"exp": np.exp, "log": np.log, "sqrt": np.sqrt, "tanh": np.tanh,
          "sigmoid": special.expit, "abs": np.abs, "erf": special.erf}


def evaluate_te(tensors: Sequence[te.Tensor], inputs: Sequence[np.ndarray],
                max_elements: int = DEFAULT_MAX_ELEMENTS) -> np.ndarray:
    """The value of the last compute tensor in ``tensors`` (a build argument list).

    ``inputs`` are arrays for the placeholders among ``tensors``, in their order; every
    placeholder the outputs read must be among them. Grids larger than ``max_elements``
    are evaluated in blocks (over the leading output axes, then the first reduce axis).
    """
    holders = [t for t in tensors if isinstance(t.op, te.PlaceholderOp)]
    outputs = [t for t in tensors if isinstance(t.op, te.ComputeOp)]
    if not outputs:
        raise ValueError("evaluate_te: tensors has no compute tensor to evaluate")
    if len(inputs) != len(holders):
        raise ValueError(f"evaluate_te: {len(holders)} placeholders "
                         f"({', '.join(t.name for t in holders)}) but {len(inputs)} inputs")
    values: dict[Any, np.ndarray] = {}
    for t, arr in zip(holders, inputs):
        arr = np.asarray(arr)
        if arr.shape != t.shape or arr.dtype != numpy_dtype(t.dtype):
            raise ValueError(f"evaluate_te: input for {t.name} must be {t.dtype} {t.shape}, "
                             f"got {arr.dtype} {arr.shape}")
        values[t.op] = arr
    for op in te.collect_ops(outputs):
        if isinstance(op, te.PlaceholderOp):
            if op not in values:
                raise ValueError(f"evaluate_te: placeholder {op.name} is read by the computes "
                                 "but is not in tensors; add it to the argument list")
        else:
            values[op] = _evaluate_stage(op, values, max_elements)
    return values[outputs[-1].op]


# -- one stage, in blocks ----------------------------------------------------------------

def _evaluate_stage(op: te.ComputeOp, values: dict, max_elements: int) -> np.ndarray:
    out = np.empty(op.shape, dtype=numpy_dtype(op.dtype))
    body = op.body
    raxes = body.axes if isinstance(body, Reduce) else ()
    rsize = math.prod(iv.extent for iv in raxes)
    for block in _blocks(op.shape, rsize, max_elements):
        slices = tuple(slice(lo, hi) for lo, hi in block)
        grid = [(iv, lo, hi) for iv, (lo, hi) in zip(op.axis, block)]
        if not raxes:
            out[slices] = _Eval(op, values, grid).run(body)
            continue
        # split the first reduce axis so that one block's full grid fits the budget
        first = raxes[0]
        step = max(1, max_elements // max(1, math.prod(hi - lo for lo, hi in block)
                                          * (rsize // first.extent)))
        acc = None
        for lo in range(first.min, first.min + first.extent, step):
            hi = min(lo + step, first.min + first.extent)
            rgrid = [(first, lo, hi)] + [(iv, iv.min, iv.min + iv.extent) for iv in raxes[1:]]
            part = _Eval(op, values, grid + rgrid).reduce(cast(Reduce, body))
            acc = part if acc is None else _combine(cast(Reduce, body).combiner, acc, part)
        out[slices] = acc
    return out


def _blocks(shape: tuple[int, ...], inner: int, limit: int) -> Iterator[list[tuple[int, int]]]:
    """Ranges per output axis covering ``shape`` with blocks of at most ``limit`` grid points
    (each output point costs ``inner`` reduce points), down to single output points; the
    caller splits the reduction when one point alone is over the limit."""
    n = len(shape)
    if n == 0:
        yield []
        return
    d = n - 1
    for axis in range(n):
        if math.prod(shape[axis + 1:]) * inner <= limit:
            d = axis
            break
    step = max(1, limit // (math.prod(shape[d + 1:]) * inner))
    for lead in itertools.product(*(range(e) for e in shape[:d])):
        for lo in range(0, shape[d], step):
            yield ([(i, i + 1) for i in lead] + [(lo, min(lo + step, shape[d]))]
                   + [(0, e) for e in shape[d + 1:]])


def _combine(combiner: str, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return {"sum": np.add, "max": np.maximum, "min": np.minimum}[combiner](a, b)


# -- expressions ---------------------------------------------------------------------------

class _Eval:
    """Evaluates expressions of one stage over a grid of (IterVar, lo, hi) ranges."""

    def __init__(self, op: te.ComputeOp, values: dict, grid: list[tuple[Any, int, int]]):
        self.op, self.values = op, values
        self.shape = tuple(hi - lo for _, lo, hi in grid)
        self.env: dict[str, np.ndarray] = {}
        for d, (iv, lo, hi) in enumerate(grid):
            dims = [1] * len(grid)
            dims[d] = hi - lo
            self.env[iv.name] = np.arange(lo, hi, dtype=np.int64).reshape(dims)

    def run(self, e: Expr) -> np.ndarray:
        with np.errstate(all="ignore"):
            return np.broadcast_to(self.eval(e, None), self.shape)

    def reduce(self, r: Reduce) -> np.ndarray:
        """The reduction of ``r`` over the trailing (reduce) dimensions of the grid."""
        nred = len(r.axes)
        axes = tuple(range(len(self.shape) - nred, len(self.shape)))
        with np.errstate(all="ignore"):
            where = None if r.where is None else np.broadcast_to(self.eval(r.where, None),
                                                                 self.shape)
            src = np.broadcast_to(self.eval(r.source, where), self.shape)
            if r.combiner == "sum":
                acc = np.float64 if src.dtype.kind == "f" else np.int64
                return np.asarray(np.sum(src, axis=axes, dtype=acc,
                                         where=True if where is None else where))
            # the identity that lowering initializes with: -inf/+inf, or the integer limits
            if src.dtype.kind == "f":
                low, high = -np.inf, np.inf
            else:
                low, high = np.iinfo(src.dtype).min, np.iinfo(src.dtype).max
            fn, init = (np.max, low) if r.combiner == "max" else (np.min, high)
            return fn(src, axis=axes, initial=init, where=True if where is None else where)

    def eval(self, e: Expr, live: np.ndarray | None) -> Any:
        """Value of ``e``; ``live`` marks the grid points whose value is used (None: all)."""
        if isinstance(e, Const):
            return np.dtype(e.dtype).type(e.value)
        if isinstance(e, Var):
            if e.name not in self.env:
                raise ValueError(f"evaluate_te: compute {self.op.name}: unknown variable {e.name}")
            return self.env[e.name]
        if isinstance(e, BinOp):
            a = self.eval(e.a, live)
            if e.op in ("and", "or"):  # C's && and || do not evaluate b when a decides
                guard = a if e.op == "and" else np.logical_not(a)
                b = self.eval(e.b, guard if live is None else live & guard)
                return (np.logical_and if e.op == "and" else np.logical_or)(a, b)
            return self._typed(_ARITH[e.op](a, self.eval(e.b, live)), e.dtype)
        if isinstance(e, Cmp):
            return _CMP[e.op](self.eval(e.a, live), self.eval(e.b, live))
        if isinstance(e, Not):
            return np.logical_not(self.eval(e.a, live))
        if isinstance(e, Select):
            c = self.eval(e.cond, live)
            nc = np.logical_not(c)
            then = self.eval(e.then, c if live is None else live & c)
            other = self.eval(e.other, nc if live is None else live & nc)
            return self._typed(np.where(c, then, other), e.dtype)
        if isinstance(e, Call):
            return self._typed(_FUNCS[e.func](self.eval(e.arg, live)), e.dtype)
        if isinstance(e, Cast):
            if e.value.dtype == e.dtype:       # a no-op, as lowering drops it
                return self.eval(e.value, live)
            v = np.asarray(self.eval(e.value, live)).astype(numpy_dtype(e.dtype))
            return self._typed(v, e.dtype)     # a storage float: rounded, then float32
        if isinstance(e, TensorRead):
            return self._read(e, live)
        if isinstance(e, Reduce):
            raise ValueError(f"evaluate_te: compute {self.op.name}: a reduction inside "
                             "an expression (it must be the whole body)")
        raise TypeError(f"evaluate_te: cannot evaluate {type(e).__name__} in a compute body")

    @staticmethod
    def _typed(v: Any, dtype: str) -> Any:
        """Keep float results in the expression's dtype, float16/bfloat16 in float32 (as the
        kernels compute them: rounded only where stored or cast), and narrow integers
        wrapped to theirs, as the kernels wrap them (wider integers stay int64 for
        indexing)."""
        v = np.asarray(v)
        dtype = compute_dtype(dtype)
        if dtype in ("float32", "float64", "bool", "int8", "uint8", "int16") \
                and v.dtype != np.dtype(dtype):
            return v.astype(dtype)
        return v

    def _read(self, e: TensorRead, live: np.ndarray | None) -> Any:
        t = e.tensor
        arr = self.values[t.op]
        idx = []
        for d, (ix, n) in enumerate(zip(e.indices, t.shape)):
            ix = np.asarray(self.eval(ix, live))
            bad = (ix < 0) | (ix >= n)
            if bad.any():
                if live is not None:
                    bad = bad & live
                if bad.any():
                    at = np.argwhere(np.broadcast_to(bad, np.broadcast_shapes(bad.shape,
                                                                              self.shape)))[0]
                    names = [a.name for a in self.op.axis] + [a.name for a in self.op.reduce_axis]
                    where = ", ".join(f"{nm}={int(self.env[nm].flat[i])}"
                                      for nm, i in zip(names, at) if nm in self.env)
                    raise IndexError(f"evaluate_te: compute {self.op.name} reads {t.name} out "
                                     f"of bounds in dimension {d} (size {n}) at {where}")
                ix = np.clip(ix, 0, n - 1)
            idx.append(ix)
        out = arr[tuple(idx)]
        return out.astype(np.float32) if t.dtype in STORAGE_FLOATS else out
