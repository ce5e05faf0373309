"""LocalBuilder: parallel builds, one compile per distinct source, typed errors."""
from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import pytest

from tvmlite import te
from tvmlite.codegen_c import compile_shared, load_library
from tvmlite.ops import OPS
from tvmlite.schedule.steps import ReorderStep, SplitStep
from tvmlite.search.measure import builder as builder_mod
from tvmlite.search.measure.builder import KERNEL, ArgSpec, LocalBuilder
from tvmlite.search.measure.inputs import MeasureErrorNo, MeasureInput
from tvmlite.search.measure.reference import reference_steps
from tvmlite.target.target import CompilerNotFoundError, Target


class StandInWorkload:
    """The attributes of search.workload.Workload the builder and runner use."""

    def __init__(self, n: int = 16):
        self.name = "matmul"
        self.key = f"stand-in-matmul-{n}"
        self.tensors = OPS["matmul"](n, n, n)
        self.outputs = [t for t in self.tensors if not isinstance(t.op, te.PlaceholderOp)]
        self.flops = 2 * n ** 3

    def schedule(self):
        from tvmlite.schedule.schedule import Schedule
        return Schedule.create(self.outputs)


@pytest.fixture(scope="module")
def wl() -> StandInWorkload:
    return StandInWorkload(16)


def split(factor: int) -> tuple:
    return (SplitStep("C", "i", factor), SplitStep("C", "j", factor),
            ReorderStep("C", ("i_outer", "j_outer", "k", "i_inner", "j_inner")))


def counting_compiles(monkeypatch: pytest.MonkeyPatch) -> list:
    sources: list = []

    def wrapped(source, target, **kw):
        sources.append(source)
        return compile_shared(source, target, **kw)
    monkeypatch.setattr(builder_mod, "compile_shared", wrapped)
    return sources


def test_batch_builds_in_order_and_compiles_each_source_once(
        wl, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    sources = counting_compiles(monkeypatch)
    steps = [split(2), split(4), (), split(2), split(8), split(4), split(2)]
    inputs = [MeasureInput(wl, s) for s in steps]
    results = LocalBuilder(n_parallel=2, cache_dir=tmp_path).build(inputs)
    assert [r.ok for r in results] == [True] * len(steps)
    assert len(sources) == len(set(sources)) == 4     # 4 distinct schedules, 4 compiles
    assert results[0].lib_path == results[3].lib_path == results[6].lib_path
    assert len({r.lib_path for r in results}) == 4
    r = results[1]
    assert r.kernel == KERNEL and r.error_no == MeasureErrorNo.NO_ERROR and r.seconds > 0
    assert r.args == (ArgSpec("A", (16, 16), "float32", False),
                      ArgSpec("B", (16, 16), "float32", False),
                      ArgSpec("C", (16, 16), "float32", True))
    _, lib = load_library(r.lib_path, r.decl)      # the declared entry points exist
    assert getattr(lib, f"{KERNEL}_time") and getattr(lib, f"{KERNEL}_set_num_threads")


def test_invalid_step_is_invalid_schedule_and_the_rest_still_build(wl, tmp_path) -> None:
    bad = MeasureInput(wl, (SplitStep("C", "no_such_axis", 4),))
    results = LocalBuilder(cache_dir=tmp_path).build([bad, MeasureInput(wl, split(4))])
    assert results[0].error_no == MeasureErrorNo.INVALID_SCHEDULE
    assert "no_such_axis" in results[0].error_msg and results[0].lib_path is None
    assert not results[0].ok and results[1].ok


def test_slow_compiler_is_build_timeout(wl, tmp_path: Path) -> None:
    slow = tmp_path / "slowcc"
    pid_file = tmp_path / "cc.pid"
    slow.write_text(f"#!/bin/sh\necho $$ > {pid_file}\nexec sleep 20\n")
    slow.chmod(0o755)
    target = dataclasses.replace(Target.host(), compiler=str(slow))
    [r] = LocalBuilder(target, timeout=0.5, cache_dir=tmp_path).build(
        [MeasureInput(wl, split(2))])
    assert r.error_no == MeasureErrorNo.BUILD_TIMEOUT, r.error_msg
    assert "timeout" in r.error_msg
    # the build returned because the compiler was killed, not because it finished
    # (checked on the process, not with a wall-clock bound a loaded machine breaks)
    with pytest.raises(ProcessLookupError):
        os.kill(int(pid_file.read_text()), 0)


def test_compile_error_keeps_the_compiler_message(wl, tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(builder_mod, "generate_c",
                        lambda s, args, target, name: (None, "int broken(void) { return 1 }\n",
                                                       "int broken(void);"))
    [r] = LocalBuilder(cache_dir=tmp_path).build([MeasureInput(wl, ())])
    assert r.error_no == MeasureErrorNo.COMPILE_ERROR
    assert "error" in r.error_msg and len(r.error_msg.splitlines()) <= 23


def test_unexpected_lowering_error_is_unknown_with_its_type(wl, tmp_path, monkeypatch) -> None:
    def explode(*a, **k):
        raise RuntimeError("lowering bug")
    monkeypatch.setattr(builder_mod, "generate_c", explode)
    [r] = LocalBuilder(cache_dir=tmp_path).build([MeasureInput(wl, ())])
    assert r.error_no == MeasureErrorNo.UNKNOWN and r.error_msg == "RuntimeError: lowering bug"


def test_missing_compiler_fails_the_batch_clearly(wl, tmp_path, monkeypatch) -> None:
    gone = dataclasses.replace(Target.host(), compiler="/nonexistent/cc")
    results = LocalBuilder(gone, cache_dir=tmp_path).build([MeasureInput(wl, split(2))] * 2)
    assert all(r.error_no == MeasureErrorNo.COMPILE_ERROR for r in results)
    assert "/nonexistent/cc" in results[0].error_msg

    def no_cc(compiler=None):
        raise CompilerNotFoundError("no cc, gcc or clang on PATH")
    monkeypatch.setattr(builder_mod.Target, "host", staticmethod(no_cc))
    results = LocalBuilder(cache_dir=tmp_path).build([MeasureInput(wl, ())] * 3)
    assert [r.error_no for r in results] == [MeasureErrorNo.COMPILE_ERROR] * 3
    assert "no C compiler" in results[0].error_msg


def test_reference_is_the_reference_steps_build_and_is_cached(wl, tmp_path) -> None:
    b = LocalBuilder(cache_dir=tmp_path)
    ref = b.build_reference(wl)
    assert ref.ok and b.build_reference(wl) is ref
    assert ref.source == b.build([MeasureInput(wl, reference_steps(wl))])[0].source


def test_bad_arguments_raise_naming_the_argument(wl) -> None:
    with pytest.raises(ValueError, match="n_parallel"):
        LocalBuilder(n_parallel=0)
    with pytest.raises(ValueError, match="timeout"):
        LocalBuilder(timeout=-1)
    with pytest.raises(TypeError, match="target"):
        LocalBuilder(target="x86")
    with pytest.raises(TypeError, match="MeasureInput"):
        LocalBuilder().build([wl])
    assert LocalBuilder().build([]) == []
