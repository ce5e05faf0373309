"""Cache-line-aligned numpy arrays: the memory our kernels are fastest on.

numpy aligns its data to 16 bytes only, so a 512-bit vector load from a numpy array
straddles two cache lines unless the address happens to be a multiple of 64. A small
matmul then runs markedly slower on misaligned arrays (every vector load touches two
lines), and which one a run gets depends on where malloc put the array, so
measurements on plain numpy arrays drift between processes. TVM and PyTorch allocate
64-byte-aligned tensors; these functions give numpy arrays the same start, and the
runner, the tests and the benchmarks allocate through them.
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from tvmlite.ir.dtypes import ALIGNMENT   # bytes: a cache line, and one 512-bit vector

__all__ = ["ALIGNMENT", "empty", "full", "asaligned", "is_aligned"]


def empty(shape: int | Sequence[int], dtype: Any = "float32") -> np.ndarray:
    """An uninitialized C-contiguous array whose data starts on a 64-byte boundary."""
    dtype = np.dtype(dtype)
    shape = (shape,) if isinstance(shape, (int, np.integer)) else tuple(shape)
    nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    raw = np.empty(nbytes + ALIGNMENT, dtype=np.uint8)
    start = -raw.ctypes.data % ALIGNMENT
    return raw[start:start + nbytes].view(dtype).reshape(shape)


def full(shape: int | Sequence[int], value: Any, dtype: Any = "float32") -> np.ndarray:
    out = empty(shape, dtype)
    out.fill(value)
    return out


def is_aligned(a: np.ndarray) -> bool:
    return a.ctypes.data % ALIGNMENT == 0


def asaligned(a: Any, dtype: Any = None) -> np.ndarray:
    """``a`` itself if it is a C-contiguous, 64-byte-aligned array of ``dtype``, else an
    aligned copy."""
    a = np.asarray(a, dtype=dtype)
    if a.flags.c_contiguous and is_aligned(a):
        return a
    out = empty(a.shape, a.dtype)
    out[...] = a
    return out
