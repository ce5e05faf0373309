"""Cache-line-aligned numpy arrays: the memory our kernels are fastest on.

numpy aligns its data to 16 bytes only, so a 512-bit vector load from a numpy array
straddles two cache lines unless the address happens to be a multiple of 64. A small
matmul then runs markedly slower on misaligned arrays (every vector load touches two
lines), and which one a run gets depends on where malloc put the array, so
measurements on plain numpy arrays drift between processes. TVM and PyTorch allocate
64-byte-aligned tensors; these functions give numpy arrays the same start, and the
runner, the tests and the benchmarks allocate through them.

``NDArray`` is TVM's array type under its name (``tvmlite.nd.array(a, dev)``,
``.numpy()``): an aligned numpy array and the device it is on. Modules take it wherever
they take a numpy array (``unwrap``), outputs written in place.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from tvmlite.ir.dtypes import ALIGNMENT, as_numpy_dtype  # ALIGNMENT: a cache line, a 512-bit vector
from tvmlite.runtime.device import Device, check_device

__all__ = ["ALIGNMENT", "empty", "full", "asaligned", "is_aligned", "NDArray", "nd_array",
           "nd_empty", "unwrap"]


def empty(shape: int | Sequence[int], dtype: Any = "float32") -> np.ndarray:
    """An uninitialized C-contiguous array whose data starts on a 64-byte boundary."""
    dtype = as_numpy_dtype(dtype)
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
    a = np.asarray(a, dtype=None if dtype is None else as_numpy_dtype(dtype))
    if a.flags.c_contiguous and is_aligned(a):
        return a
    out = empty(a.shape, a.dtype)
    out[...] = a
    return out


@dataclass(frozen=True, eq=False)
class NDArray:
    """TVM's ``tvm.nd.NDArray``: a 64-byte-aligned, C-contiguous numpy array (``data``,
    which kernels read and write in place) on ``device``. ``numpy()`` returns a copy, as
    TVM's does, so a result read out is not changed by a later call."""
    data: np.ndarray
    device: Device

    @property
    def shape(self) -> tuple:
        return tuple(self.data.shape)

    @property
    def dtype(self) -> str:
        return str(self.data.dtype)

    def numpy(self) -> np.ndarray:
        return self.data.copy()

    def asnumpy(self) -> np.ndarray:
        """The name of ``numpy()`` in TVM before 0.8."""
        return self.numpy()

    def copyfrom(self, source: Any) -> "NDArray":
        """Copy ``source`` (an array of this shape) into this array; returns self."""
        src = unwrap(source)
        if np.shape(src) != self.data.shape:
            raise ValueError(f"NDArray.copyfrom: source shape {np.shape(src)} differs from "
                             f"{self.data.shape}")
        self.data[...] = src
        return self

    def __repr__(self) -> str:
        return f"<tvmlite.nd.NDArray shape={self.shape}, {self.device!r}>\n{self.data!r}"


def nd_array(a: Any, dev: Any = None) -> NDArray:
    """``a`` (an array or nested lists) copied into an aligned NDArray on ``dev``
    (None: ``cpu(0)``): TVM's ``tvm.nd.array``."""
    dev = check_device(dev, "nd.array")
    src = unwrap(a)
    out = empty(np.shape(src), np.asarray(src).dtype)
    out[...] = src
    return NDArray(out, dev)


def nd_empty(shape: int | Sequence[int], dtype: Any = "float32", dev: Any = None) -> NDArray:
    """An uninitialized aligned NDArray (TVM's ``tvm.nd.empty``)."""
    return NDArray(empty(shape, dtype), check_device(dev, "nd.empty"))


def unwrap(a: Any) -> Any:
    """The numpy array behind an NDArray; anything else unchanged (the callers check it)."""
    return a.data if isinstance(a, NDArray) else a
