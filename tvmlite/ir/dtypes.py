"""The one table of dtypes: what each is in the IR, in the generated C and in numpy.

Every module that needs an item size, a C type or a numpy dtype reads it here, so the
IR's byte counts (features, vector widths, unroll steps), the C code's storage and the
runtime's argument checks cannot disagree. ``bool`` exists in expressions only (a
comparison, a mask): no buffer holds it (``te.compute`` casts a bool body to int32,
placeholders refuse it), and where C materializes one (a vector mask, a select) it is an
``int32_t``; so it takes 4 bytes here, as it does in the C.

``ALIGNMENT`` is the byte boundary every buffer starts on: the arrays the runtime
allocates (``tvmlite.runtime.arrays``) and the buffers a kernel allocates itself
(``codegen_c``). 64 is a cache line on every CPU we target and one 512-bit vector, and a
stronger alignment than any narrower vector needs, so it is a fact of our memory layout,
not of one CPU.
"""
from __future__ import annotations

from dataclasses import dataclass

__all__ = ["DType", "DTYPE_INFO", "DTYPES", "FLOAT_DTYPES", "INT_DTYPES", "BUFFER_DTYPES",
           "ITEMSIZE", "CTYPE", "ALIGNMENT", "round_up_to_alignment"]

ALIGNMENT = 64


@dataclass(frozen=True)
class DType:
    """One dtype: its name in the IR, bytes per element as stored, the C type that stores
    it, the short tag of its vector types (``tvmlite_f32x16``), the integer dtype of its
    lane masks, and its numpy dtype name."""
    name: str
    itemsize: int
    ctype: str
    short: str
    mask: str
    numpy: str


DTYPE_INFO: dict[str, DType] = {d.name: d for d in (
    DType("float32", 4, "float", "f32", "int32", "float32"),
    DType("float64", 8, "double", "f64", "int64", "float64"),
    DType("int32", 4, "int32_t", "i32", "int32", "int32"),
    DType("int64", 8, "int64_t", "i64", "int64", "int64"),
    DType("bool", 4, "int32_t", "i32", "int32", "int32"),
)}

DTYPES = tuple(DTYPE_INFO)                                  # every IR dtype, bool last
FLOAT_DTYPES = ("float32", "float64")
INT_DTYPES = ("int32", "int64")
BUFFER_DTYPES = FLOAT_DTYPES + INT_DTYPES                   # what a tensor can hold
ITEMSIZE = {name: d.itemsize for name, d in DTYPE_INFO.items()}
CTYPE = {name: d.ctype for name, d in DTYPE_INFO.items()}


def round_up_to_alignment(nbytes: int) -> int:
    """``nbytes`` rounded up to a multiple of ``ALIGNMENT`` (what aligned_alloc needs)."""
    return -(-nbytes // ALIGNMENT) * ALIGNMENT
