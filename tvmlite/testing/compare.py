"""What a measurement compares, light to import: the measuring worker (a process started
per tuning, and again after every crash) fills its outputs and inputs and checks them with
these, and must not load the compiler pipeline, the operators or scipy to do it.

- ``INT_SENTINEL`` / ``blank_value``: what an output holds before the kernel writes it;
- ``seeded_arrays``: the seeded, 64-byte-aligned inputs of every check;
- ``mismatches`` / ``mismatch``: the output comparison (NaN matches only NaN, an infinity
  only the same infinity) and its WRONG_ANSWER message.

``check.py`` builds the tests' checks on them.
"""
from __future__ import annotations

from typing import Iterable, Sequence

import numpy as np

from tvmlite.ir.dtypes import UNSIGNED_DTYPES, is_float_dtype, numpy_dtype
from tvmlite.runtime.arrays import asaligned

__all__ = ["INT_SENTINEL", "blank_value", "seeded_arrays", "mismatches", "mismatch"]

INT_SENTINEL = -123456   # what an integer output holds before the kernel writes it


def blank_value(dtype: str) -> float | int:
    """What an output of ``dtype`` holds before the kernel writes it: NaN for floats, else
    ``INT_SENTINEL`` wrapped to the dtype (-64 in int8, 192 in uint8), as C's cast wraps it
    in the harness."""
    if is_float_dtype(dtype):
        return float("nan")
    return int(np.array(INT_SENTINEL, np.int64).astype(numpy_dtype(dtype)))


def seeded_arrays(specs: Iterable[tuple[Sequence[int], str]], seed: int = 0,
                  low: float = -1.0, high: float = 1.0) -> list[np.ndarray]:
    """One seeded random array per ``(shape, dtype)``, in order, from one generator:
    floats uniform in [low, high), integers uniform in [-8, 8) (unsigned: [0, 16)); 64-byte
    aligned. The inputs of every check, in the tests and in measurement alike."""
    rng = np.random.default_rng(seed)
    arrays = []
    for shape, dtype in specs:
        shape = tuple(shape)
        if is_float_dtype(dtype):
            arrays.append(asaligned(rng.uniform(low, high, shape), numpy_dtype(dtype)))
        elif dtype in UNSIGNED_DTYPES:
            arrays.append(asaligned(rng.integers(0, 16, shape, dtype=dtype)))
        else:
            arrays.append(asaligned(rng.integers(-8, 8, shape, dtype=dtype)))
    return arrays


def mismatches(actual: np.ndarray, desired: np.ndarray, rtol: float,
               atol: float) -> np.ndarray:
    """Where ``actual`` does not match ``desired`` (a boolean array of their shape):
    ``|actual - desired| > atol + rtol * |desired|``, compared in float64; NaN matches
    only NaN (so a NaN left in an unwritten output fails), an infinity only the same
    infinity. The one comparison of every check."""
    a = np.asarray(actual).astype(np.float64)
    d = np.asarray(desired).astype(np.float64)
    with np.errstate(invalid="ignore", over="ignore"):
        bad = ~(np.abs(a - d) <= atol + rtol * np.abs(d))
    bad &= ~(np.isnan(a) & np.isnan(d))
    # an expected infinity makes the bound infinite: only the same infinity matches it
    bad = np.where(np.isinf(d), a != d, bad)
    return bad


def mismatch(name: str, got: np.ndarray, want: np.ndarray, rtol: float,
             atol: float) -> str | None:
    """None if output ``name`` matches (``mismatches``); else how many elements differ,
    how many are NaN (unwritten) and the largest finite error: a WRONG_ANSWER message."""
    bad = mismatches(got, want, rtol, atol)
    n_bad = int(bad.sum())
    if not n_bad:
        return None
    g, w = np.asarray(got).astype(np.float64), np.asarray(want).astype(np.float64)
    with np.errstate(invalid="ignore", over="ignore"):
        err = np.abs(g - w)
    n_nan = int((np.isnan(g) & ~np.isnan(w)).sum())
    finite = err[bad & np.isfinite(err)]
    worst = f", max abs error {finite.max():.6g}" if finite.size else ""
    nan = f" ({n_nan} NaN/unwritten)" if n_nan else ""
    return (f"output {name}: {n_bad} of {bad.size} elements wrong{nan}{worst} "
            f"(rtol={rtol:g}, atol={atol:g})")
