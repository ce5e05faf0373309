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

Low precision: ``int8``, ``uint8`` and ``int16`` are C's own integer types, with numpy's
wrapping arithmetic. ``float16`` and ``bfloat16`` are *storage* types: a buffer holds their
16 bits (``uint16_t`` in the C), and the generated code computes on them in float32 and
rounds to nearest even on every store (``codegen_c.lowp``), because most of our targets
have no arithmetic for them (Zen 4 and 5 have avx512_bf16 for conversions and dot products
only). numpy holds ``float16`` natively and ``bfloat16`` as ``ml_dtypes.bfloat16``. Importing
ml_dtypes costs about 0.6 s (it registers a dozen numpy types; numpy itself takes 0.05 s),
which every tvmlite process would pay -- each CLI command and each measuring worker -- so
it is imported the first time a bfloat16 is named: ``numpy_dtype("bfloat16")``, which
``ir.expr.check_dtype`` calls for every placeholder, cast and constant of that dtype.
After that ``np.dtype("bfloat16")`` resolves everywhere in the process (an array
unpickled in another process imports ml_dtypes itself).
"""
from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["DType", "DTYPE_INFO", "DTYPES", "FLOAT_DTYPES", "INT_DTYPES", "BUFFER_DTYPES",
           "STORAGE_FLOATS", "UNSIGNED_DTYPES", "ITEMSIZE", "CTYPE", "C_HELPER", "ALIGNMENT",
           "round_up_to_alignment", "numpy_dtype", "as_numpy_dtype", "bfloat16_numpy",
           "bfloat16_finfo",
           "value_range", "is_float_dtype",
           "compute_dtype"]

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
    DType("float16", 2, "uint16_t", "u16", "int16", "float16"),
    DType("bfloat16", 2, "uint16_t", "u16", "int16", "bfloat16"),
    DType("int8", 1, "int8_t", "i8", "int8", "int8"),
    DType("uint8", 1, "uint8_t", "u8", "int8", "uint8"),
    DType("int16", 2, "int16_t", "i16", "int16", "int16"),
    DType("uint16", 2, "uint16_t", "u16", "int16", "uint16"),
    DType("uint32", 4, "uint32_t", "u32", "int32", "uint32"),
    DType("bool", 4, "int32_t", "i32", "int32", "int32"),
)}

DTYPES = tuple(d for d in DTYPE_INFO if d not in ("uint16", "uint32"))  # IR's; bool last
FLOAT_DTYPES = ("float32", "float64", "float16", "bfloat16")
INT_DTYPES = ("int32", "int64", "int8", "uint8", "int16")
BUFFER_DTYPES = FLOAT_DTYPES + INT_DTYPES                   # what a tensor can hold
# stored as 16 bits, computed in float32 (module doc); their bits are C's uint16_t, which
# is why DTYPE_INFO has "uint16" (and "uint32", what the conversions compute on): the
# codegen's names for bits, not IR dtypes
STORAGE_FLOATS = ("float16", "bfloat16")
UNSIGNED_DTYPES = ("uint8",)
ITEMSIZE = {name: d.itemsize for name, d in DTYPE_INFO.items()}
CTYPE = {name: d.ctype for name, d in DTYPE_INFO.items()}
# how the C codegen declares every helper it writes: GCC declines to inline a helper on
# vectors wider than the target's registers (bf16 computed as 32 float32 lanes on
# AVX-512), and then passes them through memory (a depthwise conv's conversion to bf16,
# out of line, was 38% of its time on Zen 4)
C_HELPER = "static inline __attribute__((always_inline))"


def round_up_to_alignment(nbytes: int) -> int:
    """``nbytes`` rounded up to a multiple of ``ALIGNMENT`` (what aligned_alloc needs)."""
    return -(-nbytes // ALIGNMENT) * ALIGNMENT


def numpy_dtype(name: str) -> np.dtype:
    """The numpy dtype that holds IR dtype ``name`` (``bool`` as its int32 storage)."""
    return bfloat16_numpy() if name == "bfloat16" else np.dtype(DTYPE_INFO[name].numpy)


def as_numpy_dtype(dtype: Any) -> np.dtype:
    """``np.dtype(dtype)`` for anything numpy takes, and the name "bfloat16" too (which
    numpy knows only once ml_dtypes is imported)."""
    return bfloat16_numpy() if isinstance(dtype, str) and dtype == "bfloat16" else \
        np.dtype(dtype)


@functools.cache
def bfloat16_finfo() -> Any:
    """bfloat16's limits (numpy has no finfo of it; ml_dtypes has)."""
    import ml_dtypes
    return ml_dtypes.finfo(bfloat16_numpy())


@functools.cache
def bfloat16_numpy() -> np.dtype:
    """``ml_dtypes.bfloat16``, imported on first use (module doc: its import cost)."""
    import ml_dtypes
    return np.dtype(ml_dtypes.bfloat16)


def is_float_dtype(name: str) -> bool:
    return name in FLOAT_DTYPES


def compute_dtype(name: str) -> str:
    """The dtype arithmetic on ``name`` happens in: float32 for the storage floats."""
    return "float32" if name in STORAGE_FLOATS else name


def value_range(name: str) -> tuple:
    """(lowest, highest) finite value of a buffer dtype: what a saturating cast clips to and
    what a max/min reduction of integers starts from."""
    if name == "bool":
        return (0, 1)
    if name in FLOAT_DTYPES:
        info: Any = np.finfo(numpy_dtype(name)) if name != "bfloat16" else bfloat16_finfo()
        return (float(info.min), float(info.max))
    ints = np.iinfo(numpy_dtype(name))
    return (int(ints.min), int(ints.max))
