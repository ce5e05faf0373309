"""This CPU's measured peak fp32 FMA throughput (GFLOP/s), and its on-disk cache.

A tuned kernel's GFLOP/s means little until it is read as a share of what the CPU can
do, and a spec-sheet number (``Target.peak_gflops_estimate``) guesses the clock and the
FMA units. So ``codegen_c/peak.c`` is compiled with the target's own compiler and flags
and timed here. It runs in a child process because OMP_PROC_BIND and OMP_NUM_THREADS
are read once, when the OpenMP runtime starts: only a fresh process gets bound threads
without changing how this one runs its kernels.

A measurement takes seconds, and a tuning summary wants the number every time, so the
result is cached per ``Target.key()`` (the CPU, compiler and flags) in
``~/.cache/tvmlite/peak.json``; ``tvmlite target --peak`` measures and refreshes it.
"""
from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tvmlite.checks import check_int, check_number

__all__ = ["Peak", "cached_peak", "default_cache_file", "measure_peak", "measure_runs"]

_CDECL = "double peak_gflops(int threads, double seconds); int peak_vec_bytes(void);"
_WARMUP_SECONDS = 0.3


@dataclass(frozen=True)
class Peak:
    """A measured peak: the median GFLOP/s of ``runs`` with ``threads`` bound threads."""
    gflops: float
    threads: int
    runs: tuple
    measured_at: float          # time.time() of the measurement

    def to_json(self) -> dict:
        return {"gflops": self.gflops, "threads": self.threads, "runs": list(self.runs),
                "measured_at": self.measured_at}


def default_cache_file() -> Path:
    """``~/.cache/tvmlite/peak.json`` (beside the kernel cache)."""
    return Path(os.path.expanduser("~/.cache/tvmlite/peak.json"))


def _source() -> str:
    import tvmlite.codegen_c
    return (Path(tvmlite.codegen_c.__file__).parent / "peak.c").read_text()


def _check(threads: int, seconds: float, runs: int) -> None:
    check_int(threads, "peak: threads (default: the target's cores)", 1)
    check_int(runs, "peak: runs", 1)
    check_number(seconds, "peak: seconds (per run)", 0, lo_open=True)


def measure_runs(target: Any = None, threads: int | None = None, seconds: float = 1.0,
                 runs: int = 5) -> list[float]:
    """GFLOP/s of ``runs`` timed runs of ``seconds`` each (after a short warm-up), all in
    one child process with ``threads`` OpenMP threads bound to cores (default: all the
    target's cores). RuntimeError if the child fails."""
    from tvmlite.codegen_c import compile_shared
    from tvmlite.target.target import Target
    target = target or Target.host()
    threads = target.cores if threads is None else threads
    _check(threads, seconds, runs)
    lib = compile_shared(_source(), target,
                         extra_flags=(f"-DVEC_BYTES={target.vector_bits // 8}",))
    import tvmlite
    root = os.path.dirname(os.path.dirname(os.path.abspath(tvmlite.__file__)))
    env = dict(os.environ, OMP_PROC_BIND="true", OMP_NUM_THREADS=str(threads),
               PYTHONPATH=os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")])))
    cmd = [sys.executable, "-m", "tvmlite.target.peak", str(lib), str(threads), str(seconds), str(runs)]
    try:
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True,
                              timeout=60 + 2 * runs * seconds)
    except subprocess.TimeoutExpired:
        raise RuntimeError(f"peak measurement did not finish in {60 + 2 * runs * seconds:.0f}"
                           "s; is the machine overloaded? try fewer runs") from None
    if proc.returncode != 0:
        raise RuntimeError(f"peak measurement child failed (exit {proc.returncode}):\n"
                           f"{proc.stderr.strip()[-2000:]}")
    return [float(x) for x in json.loads(proc.stdout.strip().splitlines()[-1])]


def measure_peak(target: Any = None, threads: int | None = None, seconds: float = 1.0,
                 runs: int = 5, cache_file: str | os.PathLike | None = None) -> Peak:
    """Measure the peak (median of ``runs``) and, when it used all the target's cores,
    store it in the cache as this target's peak."""
    from tvmlite.target.target import Target
    target = target or Target.host()
    threads = target.cores if threads is None else threads
    values = measure_runs(target, threads, seconds, runs)
    peak = Peak(statistics.median(values), threads, tuple(values), time.time())
    if threads == target.cores:
        _store(target, peak, Path(cache_file) if cache_file else default_cache_file())
    return peak


def cached_peak(target: Any = None, cache_file: str | os.PathLike | None = None
                ) -> Peak | None:
    """The cached peak of ``target`` (default: this machine), or None if it was never
    measured here. A damaged cache file counts as empty: it is only a cache."""
    from tvmlite.target.target import Target
    target = target or Target.host()
    entry = _load(Path(cache_file) if cache_file else default_cache_file()).get(target.key())
    try:
        return Peak(float(entry["gflops"]), int(entry["threads"]),
                    tuple(float(x) for x in entry["runs"]), float(entry["measured_at"]))
    except (TypeError, KeyError, ValueError):
        return None


def _load(path: Path) -> dict:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _store(target: Any, peak: Peak, path: Path) -> None:
    """Replace this target's entry; write a temp file and rename it, so a reader never
    sees half a file and two writers lose at most one entry."""
    data = _load(path)
    data[target.key()] = {**peak.to_json(), "arch": target.arch,
                          "features": list(target.features), "compiler": target.compiler}
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".peak-", suffix=".json")
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(data, f, indent=2)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _child(so_path: str, threads: int, seconds: float, runs: int) -> None:
    """In the bound child: load the library with plain cffi, print the runs as JSON."""
    import cffi
    ffi = cffi.FFI()
    ffi.cdef(_CDECL)
    # RTLD_NODELETE: never unload libgomp under its live threads at exit (see loader.py).
    lib = ffi.dlopen(so_path, ffi.RTLD_NOW | getattr(ffi, "RTLD_NODELETE", 0))
    lib.peak_gflops(threads, min(_WARMUP_SECONDS, seconds))  # clocks ramp, threads start
    print(json.dumps([lib.peak_gflops(threads, seconds) for _ in range(runs)]))


if __name__ == "__main__":
    _child(sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4]))
