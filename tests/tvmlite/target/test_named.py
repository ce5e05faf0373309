"""Named targets: the table's fields, explicit flags, JSON with the name, bad names and a
missing cross compiler, and `target=` by name through build, SearchTask, templated.create."""
from __future__ import annotations

import shutil
import subprocess

import numpy as np
import pytest

import tvmlite
from tvmlite import ops, te
from tvmlite.cli.commands import main
from tvmlite.target import TARGET_NAMES, CompilerNotFoundError, Target
from tvmlite.target.named import NAMED_TARGETS, named_target_fields

EXPECTED = {  # name: (arch, vector bits, vector registers, a flag)
    "x86_64-sse4": ("x86_64", 128, 16, "-march=nehalem"),
    "x86_64-avx2": ("x86_64", 256, 16, "-march=haswell"),
    "x86_64-avx512": ("x86_64", 512, 32, "-march=skylake-avx512"),
    "aarch64-neon": ("aarch64", 128, 32, "-march=armv8-a"),
}
HOST = Target.host()


def _available(name: str) -> bool:
    return NAMED_TARGETS[name].arch == HOST.arch or shutil.which("aarch64-linux-gnu-gcc")


def test_the_table_holds_the_issue_s_targets() -> None:
    assert set(TARGET_NAMES) == {"host", *EXPECTED}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_named_target_fields(name: str) -> None:
    if not _available(name):
        pytest.skip(f"{name}: no compiler for it here")
    t = Target.from_name(name)
    arch, bits, regs, flag = EXPECTED[name]
    assert (t.arch, t.vector_bits, t.vector_registers, t.name) == (arch, bits, regs, name)
    assert flag in t.cflags and not any("native" in f for f in t.cflags)
    assert any(f.startswith("-mtune=") for f in t.cflags)
    assert t.vector_lanes("float32") == bits // 32
    assert Target.from_json(t.to_json()) == t and t.to_json()["name"] == name
    assert Target.from_name(name, cores=3).cores == 3
    if arch != HOST.arch:
        assert t.compiler.endswith("aarch64-linux-gnu-gcc")


def test_host_is_a_name_too() -> None:
    assert Target.from_name("host") is HOST and HOST.name == "host"


def test_old_records_without_a_name_still_load() -> None:
    d = HOST.to_json()
    del d["name"], d["vector_registers"]
    old = Target.from_json(d)
    assert old.name == "" and old.vector_registers == HOST.vector_registers


@pytest.mark.parametrize("bad", ["llvm", "arm", "", 3])
def test_unknown_names_list_the_known_ones(bad) -> None:
    with pytest.raises(ValueError, match="x86_64-avx2.*aarch64-neon"):
        Target.from_name(bad)
    with pytest.raises(ValueError, match="aarch64-neon"):
        tvmlite.search.SearchTask(func="matmul", args=(8, 8, 8), target="llvm")


def test_cli_unknown_target_is_a_usage_error(capsys) -> None:
    assert main(["target", "--target", "llvm"]) == 2
    err = capsys.readouterr().err
    assert "llvm" in err and "aarch64-neon" in err


def test_cli_describes_a_named_target(capsys) -> None:
    assert main(["target", "--target", "x86_64-avx2", "--json"]) == 0
    d = __import__("json").loads(capsys.readouterr().out)
    assert d["name"] == "x86_64-avx2" and d["vector_bits"] == 256
    assert "-march=haswell" in d["cflags"]


def test_missing_cross_compiler_names_the_package(monkeypatch, tmp_path) -> None:
    if HOST.arch != "x86_64":
        pytest.skip("checks the aarch64 cross compiler from an x86_64 machine")
    monkeypatch.setenv("PATH", str(tmp_path))     # no compiler at all on PATH
    named_target_fields.cache_clear()
    try:
        with pytest.raises(CompilerNotFoundError, match="gcc-aarch64-linux-gnu"):
            Target.from_name("aarch64-neon")
    finally:
        named_target_fields.cache_clear()


def test_target_by_name_in_build_and_tasks() -> None:
    from tvmlite.search import templated
    task = templated.create("matmul", (16, 16, 16, "float32"), target="x86_64-avx2")
    assert task.target.name == "x86_64-avx2"
    assert tvmlite.search.SearchTask(func="matmul", args=(8, 8, 8),
                                     target="x86_64-sse4").target.vector_bits == 128
    A = te.placeholder((8, 16), name="A")
    B = te.compute((8, 16), lambda i, j: A[i, j] + 1.0, name="B")
    s = te.create_schedule(B.op)
    s[B].vectorize(s[B].op.axis[1])
    if {"avx2", "fma"} <= set(HOST.features):
        mod = tvmlite.build(s, [A, B], target="x86_64-avx2")
        a, b = tvmlite.asaligned(np.ones((8, 16)), "float32"), tvmlite.empty((8, 16), "float32")
        mod(a, b)
        np.testing.assert_array_equal(b, a + 1)
    if HOST.arch == "x86_64" and _available("aarch64-neon"):
        with pytest.raises(ValueError, match="cannot load code"):
            tvmlite.build(s, [A, B], target="aarch64-neon")


def _objdump(path) -> str:
    return subprocess.run(["objdump", "-d", str(path)], capture_output=True, text=True,
                          check=True).stdout


@pytest.mark.skipif(shutil.which("objdump") is None, reason="objdump (binutils) not installed")
def test_avx2_target_has_no_512_bit_vectors_in_its_object_code() -> None:
    """Even a 16-lane schedule (a 512-bit vector type in the C) becomes ymm code."""
    from tvmlite.codegen_c import compile_shared
    from tvmlite.runtime.module import generate_c
    if HOST.arch != "x86_64":
        pytest.skip("x86 object code")
    tensors = ops.matmul(32, 32, 32)
    C = tensors[-1]
    s = te.create_schedule(C.op)
    i, j = s[C].op.axis
    jo, ji = s[C].split(j, factor=16)
    (k,) = s[C].op.reduce_axis
    s[C].reorder(i, jo, k, ji)
    s[C].vectorize(ji)
    text = {}
    for name in ("x86_64-avx2", "x86_64-avx512"):
        t = Target.from_name(name)
        lib = compile_shared(generate_c(s, tensors, t, "k")[1], t, warnings_as_errors=True)
        text[name] = _objdump(lib)
    assert "zmm" not in text["x86_64-avx2"] and "ymm" in text["x86_64-avx2"]
    assert "zmm" in text["x86_64-avx512"]       # the check can see zmm when it is there


def test_the_qemu_runner_refuses_avx512_code() -> None:
    """qemu's x86 emulation has no AVX-512: refused up front, before any candidate runs."""
    from tvmlite.search.measure.base_runner import RunnerError
    from tvmlite.search.measure.qemu_runner import QemuRunner
    if HOST.arch != "x86_64":
        pytest.skip("x86 targets")
    with pytest.raises(RunnerError, match="AVX-512"):
        QemuRunner().check_target(Target.from_name("x86_64-avx512"))


def test_fma_latency_and_pipes_come_from_the_family_table():
    from tvmlite.target.named import fma_latency_pipes
    from tvmlite.target.target import Target
    assert fma_latency_pipes("x86_64", ("avx2", "fma", "avx512f")) == (4, 2)
    assert fma_latency_pipes("x86_64", ("avx2", "fma")) == (5, 2)
    assert fma_latency_pipes("aarch64", ("neon",)) == (4, 2)
    assert fma_latency_pipes("riscv64", ()) == (4, 2)
    t = Target.host()
    assert t.fma_latency_pipes == fma_latency_pipes(t.arch, tuple(t.features))
