"""tvmlite/ir/dtypes.py and tvmlite/ir/names.py: one table of dtypes and one of the names
the generated C owns, and the modules that read them agree with them."""
from __future__ import annotations

import numpy as np
import pytest

import tvmlite
from tvmlite import te
from tvmlite.codegen_c.codegen import CTYPE as CODEGEN_CTYPE
from tvmlite.ir import dtypes
from tvmlite.ir.expr import ITEMSIZE as EXPR_ITEMSIZE
from tvmlite.ir.names import RESERVED
from tvmlite.runtime import arrays
from tvmlite.runtime.module import CPTR, NP_DTYPE


def test_item_sizes_agree_with_numpy_and_bool_is_stored_as_int32():
    for name in dtypes.BUFFER_DTYPES:
        info = dtypes.DTYPE_INFO[name]
        assert info.itemsize == np.dtype(info.numpy).itemsize
        assert NP_DTYPE[name] == np.dtype(name)
        assert CPTR[name] == f"{info.ctype} *"
    assert dtypes.ITEMSIZE["bool"] == 4 and dtypes.CTYPE["bool"] == "int32_t"
    assert EXPR_ITEMSIZE is dtypes.ITEMSIZE and CODEGEN_CTYPE is dtypes.CTYPE


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
