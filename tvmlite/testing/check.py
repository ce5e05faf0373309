"""Correctness checks that live in the library: used by tests, the schedule fuzzer and
measurement (a mismatch there is a WRONG_ANSWER record, not a crash).

- ``reference(op_name, inputs, **op_args)``: numpy result of an operator of tvmlite.ops
  (independent implementations in tvmlite.testing.references).
- ``evaluate_te(tensors, inputs)``: numpy interpreter of any te compute DAG
  (tvmlite.testing.interpreter) — the unscheduled reference of user-written computes.
- ``check_module`` / ``check_schedule``: run a kernel on seeded inputs against a numpy
  function; outputs start as NaN so unwritten elements fail.
- ``random_inputs``, ``reduction_length``, ``tolerance``, ``assert_allclose``.
- ``mismatch`` / ``mismatches``, ``seeded_arrays``, ``blank_value``: the comparison and
  inputs measurement uses too, from ``compare.py`` (light: the measuring worker imports
  that module, not this one).
"""
from __future__ import annotations

import inspect
import math
from typing import Any, Callable, Sequence

import numpy as np

from tvmlite import te
from tvmlite.ir.dtypes import (
    INT_DTYPES,
    STORAGE_FLOATS,
    numpy_dtype,
)
from tvmlite.lazy import lazy_getattr
from tvmlite.ops import OPS
from tvmlite.runtime.arrays import full
from tvmlite.runtime.module import build
from tvmlite.testing.compare import (
    INT_SENTINEL,
    blank_value,
    mismatch,
    mismatches,
    seeded_arrays,
)
from tvmlite.testing.references import REFERENCES

__all__ = ["reference", "random_inputs", "seeded_arrays", "check_module",
           "check_schedule", "reduction_length", "tolerance", "assert_allclose",
           "mismatch", "mismatches", "INT_SENTINEL", "blank_value"]

# the interpreter imports scipy, which the tuner (its measuring protocol imports this
# module for the tolerances) need not load: ``evaluate_te`` on first use
__getattr__ = lazy_getattr(__name__, {"evaluate_te": "tvmlite.testing.interpreter"})


def reference(op_name: str, inputs: Sequence[np.ndarray], **op_args: Any) -> np.ndarray:
    """The output of ``tvmlite.ops.OPS[op_name](**op_args)`` on ``inputs``, by numpy.

    ``op_args`` are the op function's arguments by name (sizes, stride, dtype, ...); the
    op is defined with them so that the inputs' count, shapes and dtypes are checked.
    """
    if op_name not in OPS:
        raise ValueError(f"reference: unknown operator {op_name!r}; known: {', '.join(OPS)}")
    sig = inspect.signature(OPS[op_name])
    try:
        bound = sig.bind(**op_args)
    except TypeError as err:
        raise ValueError(f"reference: bad arguments for {op_name}{sig}: {err}") from None
    bound.apply_defaults()
    tensors = OPS[op_name](**bound.arguments)
    holders = [t for t in tensors if isinstance(t.op, te.PlaceholderOp)]
    if len(inputs) != len(holders):
        raise ValueError(f"reference: {op_name} takes {len(holders)} inputs "
                         f"({', '.join(t.name for t in holders)}), got {len(inputs)}")
    arrays = [np.asarray(x) for x in inputs]
    for t, x in zip(holders, arrays):
        if x.shape != t.shape or x.dtype != np.dtype(t.dtype):
            raise ValueError(f"reference: input {t.name} of {op_name} must be {t.dtype} "
                             f"{t.shape}, got {x.dtype} {x.shape}")
    out = tensors[-1]
    with np.errstate(all="ignore"):
        result = REFERENCES[op_name](arrays, bound.arguments)
    return np.asarray(result).astype(out.dtype).reshape(out.shape)


def random_inputs(tensors: Sequence[te.Tensor], seed: int = 0, low: float = -1.0,
                  high: float = 1.0) -> list[np.ndarray]:
    """Seeded random arrays for the placeholders among ``tensors``, in their order:
    floats uniform in [low, high), integers uniform in [-8, 8); 64-byte aligned."""
    return seeded_arrays([(t.shape, t.dtype) for t in tensors
                          if isinstance(t.op, te.PlaceholderOp)], seed, low, high)


def check_module(mod: Any, tensors: Sequence[te.Tensor], ref_fn: Callable[..., Any], *,
                 rtol: float = 1e-4, atol: float = 1e-5, low: float = -1.0,
                 high: float = 1.0, seed: int = 0) -> Any:
    """Run a built kernel on seeded random inputs and compare every computed argument
    with ``ref_fn(*inputs)`` (one array, or a tuple in argument order).

    Outputs start as NaN (integers: a sentinel), so an element the kernel never writes
    fails the comparison instead of passing by luck. Integers must match exactly.
    """
    inputs = iter(random_inputs(tensors, seed, low, high))
    arrays, ins, outs = [], [], []
    for t in tensors:
        if isinstance(t.op, te.PlaceholderOp):
            a = next(inputs)
            ins.append(a)
        else:
            a = full(t.shape, blank_value(t.dtype), numpy_dtype(t.dtype))
            outs.append(a)
        arrays.append(a)
    mod(*arrays)
    expected = ref_fn(*ins)
    expected = expected if isinstance(expected, tuple) else (expected,)
    if len(expected) != len(outs):
        raise AssertionError(f"ref_fn gave {len(expected)} arrays for {len(outs)} outputs")
    for got, want in zip(outs, expected):
        want = np.asarray(want)
        if got.shape != want.shape:
            raise AssertionError(f"shape mismatch: kernel {got.shape}, reference {want.shape}")
        if got.dtype.kind == "f":
            np.testing.assert_allclose(got, want, rtol=rtol, atol=atol)
        else:
            np.testing.assert_array_equal(got, want.astype(got.dtype))
    return mod


def check_schedule(s: Any, tensors: Sequence[te.Tensor], ref_fn: Callable[..., Any],
                   **kw: Any) -> Any:
    """Build schedule ``s`` for this machine and ``check_module`` it; returns the Module."""
    return check_module(build(s, tensors), tensors, ref_fn, **kw)


def reduction_length(tensors: Sequence[te.Tensor]) -> int:
    """The longest reduction (product of reduce-axis extents) of any stage the last tensor
    depends on: what to pass to ``tolerance`` for a whole operator."""
    stages = te.collect_ops([tensors[-1]])
    return max((math.prod(iv.extent for iv in op.reduce_axis) for op in stages), default=1)


def tolerance(dtype: str, reduction_length: int = 1) -> tuple[float, float]:
    """(rtol, atol) for comparing a kernel with a reference.

    Rounding in a reduction of length L grows like sqrt(L) for random data (a reordered
    summation, as tiling and vectorization cause, changes it by about that much), so both
    tolerances grow with sqrt(L). Integers must match exactly.
    """
    if reduction_length < 1:
        raise ValueError(f"tolerance: reduction_length must be >= 1, got {reduction_length}")
    root = math.sqrt(reduction_length)
    if dtype == "float32":
        return 1e-4 + 1e-5 * root, 1e-4 * root
    if dtype == "float64":
        return 1e-10 + 1e-13 * root, 1e-10 * root
    if dtype in STORAGE_FLOATS:   # one rounding to the type apart, an ulp of 2^-7 or 2^-10
        ulp = 2.0 ** (-7 if dtype == "bfloat16" else -10)
        return ulp * root, ulp * root
    if dtype in INT_DTYPES or dtype == "bool":
        return 0.0, 0.0
    raise ValueError(f"tolerance: unknown dtype {dtype!r}")


def assert_allclose(actual: np.ndarray, desired: np.ndarray, dtype: str | None = None,
                    reduction_length: int = 1) -> None:
    """Raise AssertionError naming the largest error and where it is, if the arrays differ
    by more than ``tolerance(dtype, reduction_length)`` (NaN matches NaN)."""
    actual, desired = np.asarray(actual), np.asarray(desired)
    if actual.shape != desired.shape:
        raise AssertionError(f"shape mismatch: actual {actual.shape}, desired {desired.shape}")
    rtol, atol = tolerance(dtype or str(desired.dtype), reduction_length)
    bad = mismatches(actual, desired, rtol, atol)
    if not bad.any():
        return
    with np.errstate(invalid="ignore", over="ignore"):
        err = np.abs(actual.astype(np.float64) - desired.astype(np.float64))
    where = np.where(bad, np.nan_to_num(err, nan=np.inf), -1.0)
    idx = np.unravel_index(int(np.argmax(where)), where.shape) if where.ndim else ()
    raise AssertionError(
        f"{int(bad.sum())} of {bad.size} elements differ (rtol={rtol:g}, atol={atol:g}); "
        f"max abs error {err[idx]:.6g} at index {tuple(int(i) for i in idx)}: "
        f"actual {actual[idx]!r}, desired {desired[idx]!r}")


