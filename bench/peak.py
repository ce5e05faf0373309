"""Measure this CPU's peak fp32 FMA throughput (GFLOP/s) with bench/peak.c.

Benchmarks report a kernel's speed as a fraction of this number, so it is measured on
the machine, with the same compiler and flags as the kernels (Target.host().cflags),
not estimated from a spec sheet. The kernel runs in a child process so that
OMP_PROC_BIND / OMP_NUM_THREADS (read once, when libgomp starts) apply to it alone.

    python bench/peak.py [--threads N] [--seconds S] [--runs R]

From another bench script (with bench/ on sys.path)::

    from peak import measure_peak_gflops
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

_HERE = Path(__file__).resolve().parent
_CDECL = "double peak_gflops(int threads, double seconds); int peak_vec_bytes(void);"


def _build() -> Path:
    """Compile peak.c as a shared library through the kernel cache."""
    from tvmlite.codegen_c.compiler import compile_shared

    from tvmlite.target import Target

    target = Target.host()
    vec_bytes = target.vector_bits // 8
    return compile_shared((_HERE / "peak.c").read_text(), target,
                          extra_flags=(f"-DVEC_BYTES={vec_bytes}",))


def measure_runs(threads: int | None = None, seconds: float = 1.0, runs: int = 5
                 ) -> list[float]:
    """GFLOP/s of ``runs`` timed runs (after one warm-up), all in one bound child."""
    from tvmlite.target import Target

    if threads is None:
        threads = Target.host().cores
    if threads < 1 or runs < 1 or seconds <= 0:
        raise ValueError(f"threads={threads}, runs={runs}, seconds={seconds}: all must be "
                         "positive")
    so_path = _build()
    env = dict(os.environ, OMP_PROC_BIND="true", OMP_NUM_THREADS=str(threads))
    cmd = [sys.executable, str(Path(__file__).resolve()), "--_worker", str(so_path),
           str(threads), str(seconds), str(runs)]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True,
                          timeout=60 + 2 * runs * seconds)
    if proc.returncode != 0:
        raise RuntimeError(f"peak worker failed (exit {proc.returncode}):\n{proc.stderr}")
    return [float(x) for x in json.loads(proc.stdout.strip().splitlines()[-1])]


def measure_peak_gflops(threads: int | None = None, seconds: float = 1.0,
                        runs: int = 5) -> float:
    """Median peak fp32 FMA GFLOP/s over ``runs`` runs with ``threads`` threads (default:
    all cores of the target)."""
    return statistics.median(measure_runs(threads, seconds, runs))


def _worker(so_path: str, threads: int, seconds: float, runs: int) -> None:
    """Child process: load the library with plain cffi and print the runs as JSON."""
    import cffi

    ffi = cffi.FFI()
    ffi.cdef(_CDECL)
    # RTLD_NODELETE: never unload libgomp under its live threads at exit (see loader.py).
    lib = ffi.dlopen(so_path, ffi.RTLD_NOW | getattr(ffi, "RTLD_NODELETE", 0))
    lib.peak_gflops(threads, min(0.3, seconds))  # warm-up: clocks ramp, threads start
    print(json.dumps([lib.peak_gflops(threads, seconds) for _ in range(runs)]))


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "--_worker":
        _worker(argv[1], int(argv[2]), float(argv[3]), int(argv[4]))
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=None, help="default: all cores")
    parser.add_argument("--seconds", type=float, default=1.0, help="per run")
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args(argv)
    from tvmlite.target import Target

    threads = args.threads or Target.host().cores
    runs = measure_runs(threads, args.seconds, args.runs)
    peak = statistics.median(runs)
    print(f"peak fp32 FMA: {peak:.1f} GFLOP/s ({threads} threads, bound), "
          f"per core {peak / threads:.1f}")
    print(f"  runs: {', '.join(f'{r:.1f}' for r in runs)}; paper estimate "
          f"{Target.host().peak_gflops_estimate():.1f}")


if __name__ == "__main__":
    main()
