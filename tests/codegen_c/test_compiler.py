"""The compiler driver: compile, load, call; the cache; errors; concurrent compiles."""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path

import pytest

from tvmlite.codegen_c import CompileError, compile_shared, link_shared, load_library
from tvmlite.codegen_c.compiler import CompileTimeoutError, default_cache_dir
from tvmlite.target.target import Target

ADD = """
#include <stddef.h>
void add_one(float* restrict out, const float* restrict x, int n) {
    for (int i = 0; i < n; ++i) out[i] = x[i] + 1.0f;
}
int answer(void) { return 42; }
"""
ADD_DECL = "void add_one(float* out, const float* x, int n); int answer(void);"


@pytest.fixture(scope="module")
def target() -> Target:
    return Target.host()


def test_compile_load_call(tmp_path: Path, target: Target) -> None:
    so = compile_shared(ADD, target, cache_dir=tmp_path)
    assert so.suffix == ".so" and so.exists()
    assert so.with_suffix(".c").read_text() == ADD
    assert so.parent.name == so.stem[:2]
    ffi, lib = load_library(so, ADD_DECL)
    assert lib.answer() == 42
    x = ffi.new("float[]", [1.0, 2.0, 3.5])
    out = ffi.new("float[]", 3)
    lib.add_one(out, x, 3)
    assert list(out) == [2.0, 3.0, 4.5]
    assert load_library(so, ADD_DECL)[1] is lib  # opened once per process


def test_second_compile_hits_cache(tmp_path: Path, target: Target, monkeypatch) -> None:
    first = compile_shared(ADD, target, cache_dir=tmp_path)
    mtime = first.stat().st_mtime_ns
    import tvmlite.codegen_c.compiler as compiler_module

    def no_compiler(*args, **kw):
        raise AssertionError("a cache hit must not run the compiler")
    with monkeypatch.context() as m:       # a hit runs no compiler (not: a hit is fast)
        m.setattr(compiler_module, "_run_compiler", no_compiler)
        second = compile_shared(ADD, target, cache_dir=tmp_path)
    assert second == first and second.stat().st_mtime_ns == mtime
    other = compile_shared(ADD, target, cache_dir=tmp_path, extra_flags=("-DX=1",))
    assert other != first  # flags are part of the key


def test_cache_dir_from_the_environment(tmp_path: Path, target: Target, monkeypatch) -> None:
    chosen = tmp_path / "cold" / "kernels"
    monkeypatch.setenv("TVMLITE_CACHE_DIR", str(chosen))
    assert default_cache_dir() == chosen and chosen.is_dir()
    so = compile_shared(ADD, target)
    assert chosen in so.parents
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    monkeypatch.setenv("TVMLITE_CACHE_DIR", str(blocker / "kernels"))
    with pytest.raises(ValueError, match="TVMLITE_CACHE_DIR"):
        default_cache_dir()



def test_a_linkable_library_shares_its_object_with_the_bundle(tmp_path: Path, target: Target,
                                                              monkeypatch) -> None:
    """A model's kernels are built to run here, then exported: built ``linkable``, the
    export's compile of the same source is a cache hit, and only the bundle is linked."""
    import tvmlite.codegen_c.compiler as compiler_module
    monkeypatch.setenv("TVMLITE_CACHE_DIR", str(tmp_path / "cache"))
    so = compile_shared(ADD, target, linkable=True)
    assert so.with_suffix(".o").exists()
    assert load_library(so, ADD_DECL)[1].answer() == 42
    commands: list[list[str]] = []
    real = compiler_module._run_compiler

    def recorded(cmd, *args):
        commands.append(cmd)
        return real(cmd, *args)
    monkeypatch.setattr(compiler_module, "_run_compiler", recorded)
    assert compile_shared(ADD, target, linkable=True) == so
    (tmp_path / "add.c").write_text(ADD)
    bundle = link_shared([tmp_path / "add.c"], target, tmp_path / "libadd.so")
    assert len(commands) == 1 and "-c" not in commands[0]     # the link alone
    ffi, lib = load_library(bundle, ADD_DECL)
    assert lib.answer() == 42

def test_syntax_error_reports_stderr(tmp_path: Path, target: Target) -> None:
    with pytest.raises(CompileError) as info:
        compile_shared("int f(void) { return 1 }\n", target, cache_dir=tmp_path)
    err = info.value
    assert "error" in err.stderr
    assert "expected" in str(err) and str(err.source_path) in str(err)
    assert err.source_path.exists()
    assert not list(tmp_path.rglob("*.so")) and not list(tmp_path.rglob("*.tmp"))


def test_wall_clean_and_werror(tmp_path: Path, target: Target) -> None:
    compile_shared(ADD, target, cache_dir=tmp_path, warnings_as_errors=True)
    noisy = "int g(int x) { int y; return x + y; }\n"  # -Wall: y is used uninitialized
    plain = compile_shared(noisy, target, cache_dir=tmp_path)
    assert plain.with_suffix(".log").read_text()  # warnings are kept beside the library
    with pytest.raises(CompileError):
        compile_shared(noisy, target, cache_dir=tmp_path, warnings_as_errors=True)


def test_timeout(tmp_path: Path, target: Target) -> None:
    with pytest.raises(CompileTimeoutError, match="timeout"):
        compile_shared(ADD + "\n// t\n", target, cache_dir=tmp_path, timeout=1e-4)


def test_concurrent_compiles_of_the_same_source(tmp_path: Path, target: Target) -> None:
    source = ADD + "\nint concurrent(void) { return 7; }\n"
    barrier = threading.Barrier(4)
    results: list[Path] = []
    errors: list[BaseException] = []

    def work() -> None:
        try:
            barrier.wait()
            results.append(compile_shared(source, target, cache_dir=tmp_path))
        except BaseException as e:  # collected and re-raised by the test
            errors.append(e)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and len(set(results)) == 1 and len(results) == 4
    _, lib = load_library(results[0], "int concurrent(void);")
    assert lib.concurrent() == 7
    assert not list(tmp_path.rglob("*.tmp"))


def test_bad_arguments(tmp_path: Path, target: Target) -> None:
    with pytest.raises(TypeError, match="extra_flags"):
        compile_shared(ADD, target, cache_dir=tmp_path, extra_flags="-O2")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="timeout"):
        compile_shared(ADD, target, cache_dir=tmp_path, timeout=0)
    with pytest.raises(OSError, match="missing.so"):
        load_library(tmp_path / "missing.so", "int f(void);")
    with pytest.raises(ValueError, match="cdecl"):
        load_library(tmp_path / "missing.so", "int f(void")


def test_openmp_kernel_process_exits_cleanly(tmp_path: Path, target: Target) -> None:
    """A process that ran a parallel kernel must not crash at exit (libgomp unloaded
    under its own threads when the library is dlclosed)."""
    if not target.openmp:
        pytest.skip("compiler has no OpenMP")
    source = """
    double par_sum(int n) {
        double s = 0.0;
        #pragma omp parallel for reduction(+:s) num_threads(2)
        for (int i = 0; i < n; ++i) s += i;
        return s;
    }
    """
    so = compile_shared(source, target, cache_dir=tmp_path)
    script = (
        "import sys\n"
        "from tvmlite.codegen_c import load_library\n"
        "_, lib = load_library(sys.argv[1], 'double par_sum(int n);')\n"
        "assert lib.par_sum(1000) == 499500.0\n"
    )
    proc = subprocess.run([sys.executable, "-c", script, str(so)], capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
