"""``tvmlite.lower``: the loop IR it prints (readable nests, guards only where needed, no
division for perfect splits, regions of compute_at), its argument checks, and golden
snapshots of three canonical schedules (IR text and C). Every schedule is also run.

Golden files live in tests/tvmlite/passes/golden; ``TVMLITE_UPDATE_GOLDEN=1 pytest ...``
rewrites those that differ and fails for each (review the diff, then rerun). They are generated
with a fixed vector width (32 bytes) so they do not depend on the machine.
"""
from __future__ import annotations

import os
import re
from pathlib import Path

import numpy as np
import pytest

import tvmlite
from tvmlite import ScheduleError, ops, te
from tvmlite.codegen_c import compile_shared
from tvmlite.codegen_c.codegen import generate
from tvmlite.codegen_c.signature import cdecl
from tvmlite.passes.pipeline import loop_nest
from tvmlite.runtime.module import Module
from tvmlite.testing.check import check_module as run
from tvmlite.testing.check import check_schedule as check
from tvmlite.testing.workloads import ODD_MNK, matmul_reference

M, N, K = ODD_MNK
GOLDEN = Path(__file__).parent / "golden"
GOLDEN_VECTOR_BYTES = 32


# -- helpers -------------------------------------------------------------------------

def lowered(s, tensors, **kw) -> str:
    return str(tvmlite.lower(s, tensors, **kw))


def matmul(m=M, n=N, k=K):
    return ops.matmul(m, n, k)


# -- readable loop nests ---------------------------------------------------------------

def test_two_stage_prints_readable_nest():
    A = te.placeholder((3, 4), name="A")
    B = te.compute((3, 4), lambda i, j: A[i, j] * 2, name="B")
    C = te.compute((3, 4), lambda i, j: B[i, j] + 1, name="C")
    s = te.create_schedule(C.op)
    assert lowered(s, [A, C]) == """\
def default_function(A: float32[3, 4], C: float32[3, 4]):
  allocate B[float32 * 3x4]
  for B_i in range(3):
    for B_j in range(4):
      B[B_i * 4 + B_j] = A[B_i * 4 + B_j] * 2.0f
  for i in range(3):
    for j in range(4):
      C[i * 4 + j] = B[i * 4 + j] + 1.0f"""
    check(s, [A, C], lambda a: a * 2 + 1)


def test_kernel_name_and_annotations_are_printed():
    A, B, C = matmul(8, 16, 4)
    s = te.create_schedule(C.op)
    i, j = s[C].op.axis
    (k,) = s[C].op.reduce_axis
    s[C].reorder(i, k, j)
    s[C].parallel(i)
    s[C].unroll(k)
    s[C].pragma(i, "auto_unroll_max_step", 2)
    text = lowered(s, [A, B, C], name="mm8")
    assert text.startswith("def mm8(A: float32[8, 4], B: float32[4, 16], C: float32[8, 16]):")
    assert "parallel for i in range(8):  # auto_unroll_max_step=2" in text
    assert "for k in" not in text                       # unrolled into 4 statements
    assert text.count("A[i * 4 + 3]") == 1
    check(s, [A, B, C], matmul_reference)


def test_auto_unroll_pragma_unrolls_small_nests_only():
    A, B, C = matmul(16, 16, 8)
    s = te.create_schedule(C.op)
    i, j = s[C].op.axis
    (k,) = s[C].op.reduce_axis
    io, jo, ii, ji = s[C].tile(i, j, 4, 4)
    ko, ki = s[C].split(k, factor=2)
    s[C].reorder(ko, io, jo, ii, ki, ji)
    s[C].pragma(io, "auto_unroll_max_step", 8)
    text = lowered(s, [A, B, C])
    assert "for i_outer in range(4):  # auto_unroll_max_step=8" in text
    assert "for j_inner" not in text and "for k_inner" not in text   # 4 and 2x4 steps
    assert "for i_inner in range(4):" in text                         # 4x2x4 > 8 steps
    check(s, [A, B, C], matmul_reference)


def test_debug_prints_every_pass(capsys):
    A, B, C = matmul(4, 4, 4)
    s = te.create_schedule(C.op)
    tvmlite.lower(s, [A, B, C], debug=True)
    err = capsys.readouterr().err
    for name in ("simplify", "auto_unroll", "unroll", "flatten", "vectorize"):
        assert f"# after {name}" in err
    check(s, [A, B, C], matmul_reference)


# -- splits: division, modulo and guards only where needed ------------------------------

def _kernel_c(src: str, name: str = "default_function") -> str:
    start = src.index(f"int32_t {name}(")
    return src[start:src.index("\n}\n", start)]


def test_perfect_split_has_no_div_mod_or_guard():
    A, B, C = matmul(16, 24, 12)
    s = te.create_schedule(C.op)
    i, j = s[C].op.axis
    (k,) = s[C].op.reduce_axis
    io, jo, ii, ji = s[C].tile(i, j, 4, 8)
    ko, ki = s[C].split(k, nparts=3)
    iio, iii = s[C].split(ii, factor=2)
    s[C].reorder(io, jo, ko, iio, ki, iii, ji)
    text = lowered(s, [A, B, C])
    assert "//" not in text and "%" not in text and "if " not in text, text
    mod = check(s, [A, B, C], matmul_reference)
    body = _kernel_c(mod.get_source())
    assert "/" not in body and "%" not in body and "if (" not in body, body


def test_fuse_of_contiguous_axes_is_a_flat_index():
    A = te.placeholder((16, 8), name="A")
    C = te.compute((16, 8), lambda i, j: A[i, j] + 1, name="C")
    s = te.create_schedule(C.op)
    f = s[C].fuse(*s[C].op.axis)
    s[C].split(f, factor=8)
    text = lowered(s, [A, C])
    assert "//" not in text and "%" not in text and "if " not in text, text
    check(s, [A, C], lambda a: a + 1)


def test_fuse_of_a_subset_divides_only_where_an_axis_is_used_alone():
    A = te.placeholder((4, 6, 5), name="A")
    C = te.compute((4, 6, 5), lambda i, j, k: A[i, j, k] * 2 + i, name="C")
    s = te.create_schedule(C.op)
    i, j, k = s[C].op.axis
    s[C].reorder(k, i, j)
    s[C].fuse(i, j)
    text = lowered(s, [A, C])
    # the addresses recombine (i // 6 * 30 + i % 6 * 5 == i * 5): only the value of i divides
    assert "A[k + i_j_fused * 5]" in text and "i_j_fused // 6" in text and "%" not in text
    check(s, [A, C], lambda a: a * 2 + np.arange(4, dtype=np.float32)[:, None, None])


@pytest.mark.parametrize("factor,nparts,whole,guard", [
    (4, None, 4, "i_inner + 16 < 17"),
    (None, 3, 2, "i_inner + 12 < 17"),
])
def test_imperfect_split_guards_its_peeled_last_tile(factor, nparts, whole, guard):
    """The whole tiles run unguarded; the last, peeled after them, has the guard."""
    A = te.placeholder((M, 8), name="A")
    C = te.compute((M, 8), lambda i, j: A[i, j] - 1, name="C")
    s = te.create_schedule(C.op)
    s[C].split(s[C].op.axis[0], factor=factor, nparts=nparts)
    text = lowered(s, [A, C])
    assert f"for i_outer in range({whole}):" in text, text
    assert f"if {guard}:" in text, text
    assert text.count("if ") == 1
    check(s, [A, C], lambda a: a - 1)


def test_imperfect_reduce_split_guards_update_not_init():
    A, B, C = matmul(4, 4, 19)
    s = te.create_schedule(C.op)
    (k,) = s[C].op.reduce_axis
    s[C].split(k, factor=4)
    text = lowered(s, [A, B, C])
    assert re.search(r"^\s+C\[i \* 4 \+ j\] = 0\.0f$", text, re.M), text
    assert "for k_outer in range(4):" in text and "if k_inner + 16 < 19:" in text
    assert text.count("if ") == 1
    check(s, [A, B, C], matmul_reference)


def test_reduction_init_gets_its_own_nest_when_reduce_is_outer():
    A, B, C = matmul(3, 5, 7)
    s = te.create_schedule(C.op)
    i, j = s[C].op.axis
    (k,) = s[C].op.reduce_axis
    s[C].reorder(k, i, j)
    assert lowered(s, [A, B, C]) == """\
def default_function(A: float32[3, 7], B: float32[7, 5], C: float32[3, 5]):
  for i in range(3):
    for j in range(5):
      C[i * 5 + j] = 0.0f
  for k in range(7):
    for i in range(3):
      for j in range(5):
        C[i * 5 + j] = C[i * 5 + j] + A[i * 7 + k] * B[k * 5 + j]"""
    check(s, [A, B, C], matmul_reference)


# -- vectorize / inline / compute_at in the IR --------------------------------------------

def test_vectorized_loop_becomes_ramps_with_a_scalar_tail():
    A = te.placeholder((3, 20), name="A")
    C = te.compute((3, 20), lambda i, j: A[i, j] * 3, name="C")
    s = te.create_schedule(C.op)
    s[C].vectorize(s[C].op.axis[1])
    text = lowered(s, [A, C], vector_bytes=32)      # 20 = 2 chunks of 8 + a tail of 4
    assert "C[ramp(i * 20, 1, 8)] = A[ramp(i * 20, 1, 8)] * x8(3.0f)" in text
    assert "C[ramp(i * 20 + 8, 1, 8)]" in text
    assert "for j_t in range(4):" in text
    check(s, [A, C], lambda a: a * 3)


def test_vectors_default_to_the_hosts_width_and_auto_unroll_counts_in_them():
    A = te.placeholder((4, 64), name="A")
    C = te.compute((4, 64), lambda i, j: A[i, j] * 3, name="C")
    s = te.create_schedule(C.op)
    i, j = s[C].op.axis
    s[C].vectorize(j)
    s[C].pragma(i, "auto_unroll_max_step", 16)
    host = tvmlite.Target.host().vector_bytes
    assert str(tvmlite.lower(s, [A, C])) == str(tvmlite.lower(s, [A, C], vector_bytes=host))
    # the i nest is 4 rows x 64 float32: 16 steps of 64-byte vectors, 64 of 16-byte ones
    assert "unroll for i" in str(loop_nest(s, [A, C], vector_bytes=64))
    assert "unroll for i" not in str(loop_nest(s, [A, C], vector_bytes=16))
    with pytest.raises(ValueError, match="vector_bytes"):
        tvmlite.lower(s, [A, C], vector_bytes=0)
    check(s, [A, C], lambda a: a * 3)


def test_vectorized_guard_checks_both_ends_of_the_chunk():
    A = te.placeholder((2, N), name="A")
    C = te.compute((2, N), lambda i, j: A[i, j] + 2, name="C")
    s = te.create_schedule(C.op)
    jo, ji = s[C].split(s[C].op.axis[1], factor=8)
    s[C].vectorize(ji)
    s[C].parallel(jo)    # a parallel loop keeps its last tile (a serial one is peeled)
    text = lowered(s, [A, C], vector_bytes=32)
    assert "j_outer * 8 + 7 < 23" in text and "else:" in text
    check(s, [A, C], lambda a: a + 2)


def test_inlined_stage_has_no_buffer():
    A = te.placeholder((5, 6), name="A")
    B = te.compute((5, 6), lambda i, j: te.exp(A[i, j]), name="B")
    C = te.compute((5, 6), lambda i, j: B[i, j] * B[i, j], name="C")
    s = te.create_schedule(C.op)
    s[B].compute_inline()
    text = lowered(s, [A, C])
    assert "allocate" not in text and "B[" not in text
    assert "exp(A[i * 6 + j]) * exp(A[i * 6 + j])" in text
    check(s, [A, C], lambda a: np.exp(a) ** 2)


def test_compute_at_allocates_the_region_inside_the_loop():
    n = 37
    A = te.placeholder((n + 2,), name="A")
    B = te.compute((n + 2,), lambda i: A[i] * 2, name="B")
    C = te.compute((n,), lambda i: B[i] + B[i + 1] + B[i + 2], name="C")
    s = te.create_schedule(C.op)
    xo, xi = s[C].split(s[C].op.axis[0], factor=8)
    s[B].compute_at(s[C], xo)
    lines = lowered(s, [A, C]).splitlines()
    assert lines[1] == "  for i_outer in range(4):"     # the whole tiles, then the last
    assert lines[2] == "    allocate B[float32 * 10]"
    assert lines[3] == "    for i in range(10):"        # C has no loop named i any more
    assert "  allocate B[float32 * 10]" in lines[6:]
    assert "    if i + 32 < 39:" in lines                # the last tile is clipped to B
    check(s, [A, C], lambda a: a[:-2] * 2 + a[1:-1] * 2 + a[2:] * 2)


@pytest.mark.parametrize("loop,region", [("i_outer", "4x23"), ("j_outer", "4x8"),
                                         ("i_inner", "1x8"), ("j_inner", "1x1")])
def test_compute_at_region_per_loop(loop, region):
    A = te.placeholder((M, N), name="A")
    B = te.compute((M, N), lambda i, j: A[i, j] * 2, name="B")
    C = te.compute((M, N), lambda i, j: B[i, j] + 1, name="C")
    s = te.create_schedule(C.op)
    s[C].tile(*s[C].op.axis, 4, 8)
    s[B].compute_at(s[C], loop)
    assert f"allocate B[float32 * {region}]" in lowered(s, [A, C])
    check(s, [A, C], lambda a: a * 2 + 1)


# -- argument checks ---------------------------------------------------------------------

def test_lower_argument_errors():
    A, B, C = matmul(4, 4, 4)
    s = te.create_schedule(C.op)
    with pytest.raises(TypeError, match="Schedule"):
        tvmlite.lower("s", [A, B, C])
    with pytest.raises(TypeError, match="args"):
        tvmlite.lower(s, [])
    with pytest.raises(TypeError, match=r"args\[1\]"):
        tvmlite.lower(s, [A, "B", C])
    with pytest.raises(ValueError, match="'B'"):
        tvmlite.lower(s, [A, C])
    with pytest.raises(ValueError, match="'C'"):
        tvmlite.lower(s, [A, B])
    with pytest.raises(ValueError, match="twice"):
        tvmlite.lower(s, [A, B, C, A])
    with pytest.raises(ValueError, match="identifier"):
        tvmlite.lower(s, [A, B, C], name="f(); int x")
    check(s, [A, B, C], matmul_reference)


def test_schedule_error_at_lowering_names_the_loops():
    A, B, C = matmul(4, 4, 4)
    s = te.create_schedule(C.op)
    i, j = s[C].op.axis
    s[C].parallel(i)
    s[C].parallel(j)
    with pytest.raises(ScheduleError, match=r"\bj\b"):
        tvmlite.lower(s, [A, B, C])


# -- golden snapshots --------------------------------------------------------------------

def golden_naive_matmul():
    A, B, C = matmul(8, 8, 8)
    return te.create_schedule(C.op), [A, B, C], matmul_reference


def golden_tiled_matmul():
    A, B, C = matmul(64, 64, 64)
    s = te.create_schedule(C.op)
    i, j = s[C].op.axis
    (k,) = s[C].op.reduce_axis
    io, jo, ii, ji = s[C].tile(i, j, 8, 16)
    ko, ki = s[C].split(k, factor=4)
    s[C].reorder(io, jo, ko, ii, ki, ji)
    s[C].vectorize(ji)
    s[C].unroll(ki)
    s[C].parallel(io)
    return s, [A, B, C], matmul_reference


def golden_stencil_compute_at():
    n = 30
    A = te.placeholder((n + 2,), name="A")
    B = te.compute((n + 2,), lambda i: te.sqrt(A[i] * A[i] + 1), name="B")
    C = te.compute((n,), lambda i: B[i] + B[i + 1] * 2 + B[i + 2], name="C")
    s = te.create_schedule(C.op)
    xo, xi = s[C].split(s[C].op.axis[0], factor=8)
    s[B].compute_at(s[C], xo)
    s[C].vectorize(xi)

    def ref(a):
        b = np.sqrt(a.astype(np.float64) ** 2 + 1)
        return (b[:-2] + b[1:-1] * 2 + b[2:]).astype(np.float32)
    return s, [A, C], ref


GOLDEN_CASES = {"matmul_naive_8": golden_naive_matmul,
                "matmul_tiled_64": golden_tiled_matmul,
                "stencil_compute_at": golden_stencil_compute_at}


def _compare_golden(path: Path, text: str) -> None:
    """Compare ``text`` with the snapshot. With TVMLITE_UPDATE_GOLDEN=1 a differing or
    missing snapshot is rewritten and the test still fails (a run that changed a
    snapshot never passes); the next run, with or without the variable, compares."""
    if os.environ.get("TVMLITE_UPDATE_GOLDEN") == "1" and (
            not path.exists() or path.read_text() != text):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        pytest.fail(f"rewrote the golden snapshot {path.name}: review `git diff {path}`, "
                    "then rerun (the comparison passes once the snapshot is current)")
    if not path.exists():
        pytest.fail(f"golden file {path} is missing: run with TVMLITE_UPDATE_GOLDEN=1")
    want = path.read_text()
    assert text == want, (f"{path.name} differs from the golden snapshot (if the change is "
                          f"intended, rerun with TVMLITE_UPDATE_GOLDEN=1)")


@pytest.mark.parametrize("name", sorted(GOLDEN_CASES))
def test_golden_snapshot(name):
    s, tensors, ref = GOLDEN_CASES[name]()
    func = tvmlite.lower(s, tensors, vector_bytes=GOLDEN_VECTOR_BYTES)
    outputs = [st.name for st in s.state.stages]
    source = generate(func, outputs)
    _compare_golden(GOLDEN / f"{name}.txt", str(func) + "\n")
    _compare_golden(GOLDEN / f"{name}.c", source)
    # the snapshot C itself must compute the right thing
    target = tvmlite.Target.host()
    mod = Module(func, source, cdecl(func, outputs), compile_shared(source, target), target,
                 outputs)
    run(mod, tensors, ref, atol=1e-4)


def test_golden_update_rewrites_and_still_fails(tmp_path, monkeypatch):
    path = tmp_path / "snap.txt"
    path.write_text("old\n")
    monkeypatch.setenv("TVMLITE_UPDATE_GOLDEN", "1")
    with pytest.raises(pytest.fail.Exception, match="rewrote the golden snapshot"):
        _compare_golden(path, "new\n")
    assert path.read_text() == "new\n"
    _compare_golden(path, "new\n")              # current now: the comparison passes
    monkeypatch.delenv("TVMLITE_UPDATE_GOLDEN")
    with pytest.raises(AssertionError, match="differs from the golden snapshot"):
        _compare_golden(path, "other\n")
