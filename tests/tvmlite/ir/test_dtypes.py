"""tvmlite/ir/dtypes.py and tvmlite/ir/names.py: one table of dtypes and one of the names
the generated C owns, and the modules that read them agree with them."""
from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

import tvmlite
from tvmlite import te
from tvmlite.codegen_c.codegen import CTYPE as CODEGEN_CTYPE
from tvmlite.ir import dtypes
from tvmlite.ir.expr import ITEMSIZE as EXPR_ITEMSIZE
from tvmlite.ir.names import RESERVED
from tvmlite.runtime import arrays
from tvmlite.runtime.module import CPTR


def test_item_sizes_agree_with_numpy_and_bool_is_stored_as_int32():
    for name in dtypes.BUFFER_DTYPES:
        info = dtypes.DTYPE_INFO[name]
        assert info.itemsize == dtypes.numpy_dtype(name).itemsize
        assert dtypes.numpy_dtype(name) == np.dtype(name)
        assert CPTR[name] == f"{info.ctype} *"
    assert dtypes.ITEMSIZE["bool"] == 4 and dtypes.CTYPE["bool"] == "int32_t"
    assert EXPR_ITEMSIZE is dtypes.ITEMSIZE and CODEGEN_CTYPE is dtypes.CTYPE


def test_ml_dtypes_is_imported_only_when_a_bfloat16_is_named():
    # its import costs ~0.6 s per process (ir.dtypes): a CLI command or a worker that never
    # meets a bfloat16 does not pay it; naming one in a placeholder registers it with numpy
    code = ("import sys, numpy as np, tvmlite\n"
            "assert 'ml_dtypes' not in sys.modules\n"
            "assert tvmlite.empty((2,), 'bfloat16').dtype.itemsize == 2\n"
            "a = tvmlite.te.placeholder((4,), 'bfloat16', name='a')\n"
            "assert 'ml_dtypes' in sys.modules and np.dtype('bfloat16').itemsize == 2\n")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)


def test_every_buffer_starts_on_the_one_alignment():
    assert arrays.ALIGNMENT == dtypes.ALIGNMENT
    assert arrays.is_aligned(tvmlite.empty((3, 5), "float64"))
    assert dtypes.round_up_to_alignment(1) == dtypes.ALIGNMENT
    assert dtypes.round_up_to_alignment(2 * dtypes.ALIGNMENT) == 2 * dtypes.ALIGNMENT
    A = te.placeholder((40000,), name="A")          # a 160 KB intermediate: heap-allocated
    B = te.compute((40000,), lambda i: A[i] + 1.0, name="B")
    C = te.compute((40000,), lambda i: B[i] * 2.0, name="C")
    s = te.create_schedule(C.op)
    src = tvmlite.build(s, [A, C]).get_source()
    assert f"aligned_alloc({dtypes.ALIGNMENT}, 160000)" in src


@pytest.mark.parametrize("name", ["int", "_Bool", "restrict", "free", "int64_t", "main",
                                  "tvmlite_x", "__y"])
def test_reserved_c_names_are_refused_as_tensor_names(name):
    assert name in RESERVED or name.startswith(("tvmlite_", "__"))
    with pytest.raises(ValueError, match="reserved in the generated C"):
        te.placeholder((4,), name=name)


# -- low precision: int8, uint8, int16, float16, bfloat16 ------------------------------------

LOW = ("int8", "uint8", "int16", "float16", "bfloat16")


@pytest.mark.parametrize("name", LOW)
def test_every_low_precision_dtype_round_trips_through_numpy_and_nd_array(name):
    """bfloat16 is ml_dtypes'; every dtype's numpy array goes into an NDArray, through the
    runtime's aligned allocation, and back bit for bit."""
    import ml_dtypes
    assert name in dtypes.BUFFER_DTYPES and name in dtypes.DTYPES
    np_dt = dtypes.numpy_dtype(name)
    assert np_dt == (np.dtype(ml_dtypes.bfloat16) if name == "bfloat16" else np.dtype(name))
    assert np_dt.itemsize == dtypes.ITEMSIZE[name]
    lo, hi = dtypes.value_range(name)
    x = np.array([lo, hi, 0, 1, -1 if lo < 0 else 2, 3], dtype=np_dt)
    a = tvmlite.nd.array(x)
    assert a.dtype == name and arrays.is_aligned(a.data)
    assert a.numpy().tobytes() == x.tobytes()
    e = tvmlite.nd.empty((3, 5), name)
    assert e.dtype == name and e.shape == (3, 5) and arrays.is_aligned(e.data)
    assert arrays.asaligned(x).tobytes() == x.tobytes()


def test_the_storage_floats_are_sixteen_bits_in_c_and_computed_in_float32():
    for name in dtypes.STORAGE_FLOATS:
        assert dtypes.CTYPE[name] == "uint16_t" and dtypes.compute_dtype(name) == "float32"
    assert dtypes.compute_dtype("int8") == "int8"
    assert dtypes.value_range("float16") == (-65504.0, 65504.0)
    assert dtypes.value_range("uint8") == (0, 255) and dtypes.value_range("int16")[0] == -2**15


@pytest.mark.parametrize("a,b,want", [
    ("int8", "int8", "int8"), ("int8", "uint8", "int16"), ("uint8", "int16", "int16"),
    ("int8", "int32", "int32"), ("uint8", "int64", "int64"), ("bool", "uint8", "uint8"),
    ("float16", "bfloat16", "float32"), ("bfloat16", "float32", "float32"),
    ("float16", "float64", "float64"), ("int8", "bfloat16", "bfloat16"),
    ("int32", "float16", "float16"), ("float32", "float64", "float64")])
def test_promotion_of_the_narrow_dtypes(a, b, want):
    """numpy's rules among integers and among floats (int8 with uint8 is int16; float16 with
    bfloat16, neither holding the other, float32); a float beats any integer, as before."""
    from tvmlite.ir.expr import promote
    assert promote(a, b) == want and promote(b, a) == want


def test_constants_must_fit_their_integer_dtype_and_python_ints_widen_to_fit():
    with pytest.raises(ValueError, match="300 does not fit in int8"):
        te.const(300, "int8")
    assert te.const(-128, "int8").value == -128 and te.const(255, "uint8").value == 255
    A = te.placeholder((4,), "int8", name="A")
    assert (A[0] + 1).dtype == "int8"            # a weak Python int takes the array's dtype
    assert (A[0] + 1000).dtype == "int32"        # unless it does not fit: then int32 math
    assert (A[0] * 0.5).dtype == "float32"
