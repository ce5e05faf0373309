"""The vector types and helper functions a kernel's C calls (codegen_c/preamble.py)."""
from tvmlite.codegen_c.preamble import helper_lines, typedef_lines
from tvmlite.ir.dtypes import C_HELPER


def test_every_vector_type_has_an_unaligned_twin():
    lines = typedef_lines({("float32", 16), ("int64", 8)})
    assert "typedef float tvmlite_f32x16 __attribute__((vector_size(64)));" in lines
    assert any(line.startswith("typedef float tvmlite_f32x16_u ") and "aligned(4)" in line
               and "may_alias" in line for line in lines)
    assert len(lines) == 4


def test_a_vector_helper_asks_for_its_mask_type():
    asked = []

    def vt(dtype: str, lanes: int) -> str:
        asked.append((dtype, lanes))
        return f"v_{dtype}_{lanes}"

    (line,) = helper_lines({("vsel", "float32", 8)}, vt)
    assert line.startswith(f"{C_HELPER} v_float32_8 tvmlite_vsel_f32x8(v_int32_8 m, ")
    assert ("int32", 8) in asked


def test_floor_division_is_defined_for_every_divisor():
    (div,) = helper_lines({("floordiv", "int32", 1)}, lambda d, n: "")
    assert "if (b == 0) return 0;" in div and "if (b == -1)" in div
