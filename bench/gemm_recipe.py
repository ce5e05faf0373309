"""The classic CPU GEMM recipe, written with tvmlite's public API, against numpy and peak.

Measures, for C = A @ B with A, B, C float32 of size N x N (default 1024):

* GFLOP/s of the tvmlite kernel for each register-block height MB (``--mb 4 6 8 12``):
  B packed into 2-vector-wide panels (packedB), C written through a local cache
  (cache_write) holding an MB x 2-vector block in registers, k split by 4 and unrolled,
  the column panels run in parallel;
* GFLOP/s of numpy's ``a @ b`` (OpenBLAS), and which OpenBLAS core kernel it ran;
* this CPU's peak fp32 FMA GFLOP/s, measured by bench/peak.py (threads bound);
* the time tvmlite takes to lower the schedule and generate C (not to compile it).

Every number is a median: the kernels over ``--repeat`` samples of 5 calls, lower + codegen
over 20 runs.

Why each contender runs in its own fresh subprocess (see /work/shared/PEERS.md):
OpenBLAS's threads keep spinning on the cores for a while after each call, so a kernel
timed in a process that has just run a numpy matmul is many times slower; OMP_PROC_BIND
and OMP_NUM_THREADS are read once, when libgomp starts, so they must be set in the
environment of a process that has not started it yet; and numpy is only fair to compare
against when OpenBLAS runs its native kernel, i.e. with OPENBLAS_CORETYPE and
OPENBLAS_L2_SIZE removed from its environment (which we do in its process only).
The correctness check runs in the kernel's process before timing, with its float64
reference computed by single-threaded OpenBLAS (OPENBLAS_NUM_THREADS=1: no spinning pool).

    python -m bench gemm-recipe [--size 1024] [--mb 4 6 8 12] [--repeat 25] [--threads 2]
        [--out bench/out/gemm_recipe]

The figures go to ``<out>/results.md`` and ``results.json`` (bench/results.py).
"""
from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from bench import args as bench_args
from bench import results
from bench.peak import measure_peak_gflops
from bench.results import Table

_HERE = Path(__file__).resolve().parent
NUMBER = 5       # calls per timing sample, for both contenders
LOWER_RUNS = 20  # lower + codegen repetitions
RTOL = 1e-3      # max |C - ref| / max |ref|


def _kernel_worker(n: int, mb: int, repeat: int) -> dict:
    """In its own process: time lower + codegen, build, check against numpy, time."""
    import numpy as np

    import tvmlite
    from tvmlite.runtime.module import generate_c

    target = tvmlite.Target.host()
    bn = 2 * target.vector_lanes("float32")
    if n % bn:
        return {"ok": False, "why": f"size {n} is not a multiple of the panel width {bn}"}
    from tvmlite.schedules.recipes import gemm_packed
    s, args = gemm_packed(n, n, n, block_cols=bn, block_rows=mb)

    # Lowering + C generation exactly as build() does them, without the compiler.
    lower_ms = []
    for _ in range(LOWER_RUNS + 1):  # the first run (imports, caches) is a warm-up
        t0 = time.perf_counter()
        generate_c(s, args, target)
        lower_ms.append((time.perf_counter() - t0) * 1e3)

    mod = tvmlite.build(s, args, target)  # compile is cached on disk
    rng = np.random.default_rng(0)
    a = tvmlite.asaligned(rng.standard_normal((n, n), dtype=np.float32))
    b = tvmlite.asaligned(rng.standard_normal((n, n), dtype=np.float32))
    c = tvmlite.empty((n, n), np.float32)
    mod(a, b, c)
    ref = a.astype(np.float64) @ b.astype(np.float64)
    err = float(np.max(np.abs(c - ref)) / np.max(np.abs(ref)))
    if not err <= RTOL:
        return {"ok": False, "why": f"WRONG RESULT, max rel. error {err:.2e} > {RTOL:g}"}
    t = mod.time_evaluator(number=NUMBER, repeat=repeat)(a, b, c)
    return {"ok": True, "err": err, "seconds": t.median,
            "lower_ms": statistics.median(lower_ms[1:])}


def _openblas_core() -> str:
    """Name of the OpenBLAS core kernel numpy runs: threadpoolctl, else ask the library."""
    try:
        import threadpoolctl
        for info in threadpoolctl.threadpool_info():
            if info.get("internal_api") == "openblas":
                return str(info.get("architecture"))
    except ImportError:
        pass
    import ctypes
    with open("/proc/self/maps") as maps:
        libs = {line.split()[-1] for line in maps if "openblas" in line.lower()}
    for lib in libs:
        dll = ctypes.CDLL(lib)
        for sym in ("scipy_openblas_get_corename64_", "openblas_get_corename64_",
                    "openblas_get_corename"):
            if hasattr(dll, sym):
                fn = getattr(dll, sym)
                fn.restype = ctypes.c_char_p
                return fn().decode()
    return "unknown"


def _numpy_worker(n: int, repeat: int) -> dict:
    """In its own process: time numpy's a @ b (OpenBLAS), samples of NUMBER calls."""
    import numpy as np

    rng = np.random.default_rng(0)
    a = rng.standard_normal((n, n), dtype=np.float32)
    b = rng.standard_normal((n, n), dtype=np.float32)
    for _ in range(10):  # warm-up: thread pool, clocks, allocator
        a @ b
    samples = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        for _ in range(NUMBER):
            a @ b
        samples.append((time.perf_counter() - t0) / NUMBER)
    return {"seconds": statistics.median(samples), "core": _openblas_core()}


def _cpu_seconds() -> tuple[float, float]:
    """(busy CPU seconds of the whole machine incl. steal, CPU seconds of our children)."""
    import resource

    with open("/proc/stat") as f:
        fields = [int(v) for v in f.readline().split()[1:9]]
    busy = (sum(fields) - fields[3] - fields[4]) / os.sysconf("SC_CLK_TCK")  # - idle, iowait
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return busy, ru.ru_utime + ru.ru_stime


def contended(fn, *args):
    """(fn(*args), note): the note flags a figure measured while other processes took
    > 5% of the CPUs (the machine is shared: that figure is too low, its ratios wrong)."""
    (busy0, ours0), t0 = _cpu_seconds(), time.perf_counter()
    out = fn(*args)
    (busy1, ours1), wall = _cpu_seconds(), time.perf_counter() - t0
    other = max(0.0, (busy1 - busy0) - (ours1 - ours0)) / (wall * (os.cpu_count() or 1))
    return out, (f"  [UNRELIABLE: other processes used {100 * other:.0f}% of the CPUs]"
                 if other > 0.05 else "")


def _run_worker(kind: str, extra: list[str], env: dict[str, str]) -> dict:
    cmd = [sys.executable, "-m", "bench.gemm_recipe", "--_worker", kind, *extra]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900,
                          cwd=_HERE.parent)
    if proc.returncode != 0:
        raise SystemExit(f"{kind} worker failed (exit {proc.returncode}):\n{proc.stderr}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "--_worker":
        kind, vals = argv[1], [int(v) for v in argv[2:]]
        out = _kernel_worker(*vals) if kind == "kernel" else _numpy_worker(*vals)
        print(json.dumps(out))
        return 0

    parser = bench_args.parser("gemm-recipe", __doc__, out=_HERE / "out" / "gemm_recipe")
    parser.add_argument("--size", type=int, default=1024, help="M = N = K (default 1024)")
    parser.add_argument("--mb", type=int, nargs="+", default=[8],
                        help="register block rows, one or more (default 8)")
    parser.add_argument("--repeat", type=int, default=25, help="timing samples (default 25)")
    parser.add_argument("--threads", type=int, default=None, help="default: all cores")
    args = parser.parse_args(argv)
    if args.size < 1 or args.repeat < 1 or min(args.mb) < 1:
        parser.error("--size, --repeat and --mb must be positive")

    from tvmlite import Target

    threads = args.threads or Target.host().cores
    n = args.size
    gflop = 2.0 * n ** 3 / 1e9
    base = {k: v for k, v in os.environ.items() if not k.startswith(("OMP_", "GOMP_"))}

    print(f"GEMM {n}^3 float32, {threads} threads (bound)", flush=True)
    peak, note = contended(measure_peak_gflops, threads)
    print(f"peak fp32 FMA (measured): {peak:.1f} GFLOP/s{note}", flush=True)

    np_env = {k: v for k, v in base.items()
              if k not in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")}
    np_env["OPENBLAS_NUM_THREADS"] = str(threads)
    ref, note = contended(_run_worker, "numpy", [str(n), str(max(25, args.repeat))], np_env)
    np_gflops = gflop / ref["seconds"]
    print(f"numpy (OpenBLAS native kernel: {ref['core']}): {np_gflops:.1f} GFLOP/s{note}",
          flush=True)

    kern_env = dict(base, OMP_PROC_BIND="true", OMP_NUM_THREADS=str(threads),
                    OPENBLAS_NUM_THREADS="1")
    lower_lines, failed, rows = [], False, []
    for mb in args.mb:
        res, note = contended(_run_worker, "kernel", [str(n), str(mb), str(args.repeat)],
                              kern_env)
        if not res["ok"]:
            print(f"tvmlite MB={mb}: {res['why']}{note}", flush=True)
            failed = True
            continue
        g = gflop / res["seconds"]
        print(f"tvmlite MB={mb}: {g:.1f} GFLOP/s  {g / np_gflops:.2f}x numpy  "
              f"{100 * g / peak:.1f}% of peak{note}", flush=True)
        lower_lines.append((mb, res["lower_ms"]))
        rows.append((f"tvmlite MB={mb}", g, g / np_gflops, 100 * g / peak, res["lower_ms"],
                     note.strip()))
    for mb, ms in lower_lines:
        label = "lower + codegen" if len(args.mb) == 1 else f"lower + codegen MB={mb}"
        print(f"{label}: {ms:.1f} ms (median of {LOWER_RUNS})")
    rows.append((f"numpy ({ref['core']})", np_gflops, 1.0, 100 * np_gflops / peak, None, ""))
    results.write(args.out / "results.md", f"The GEMM recipe, {n}^3 float32", [
        Table(("contender", "GFLOP/s", "x numpy", "% peak", "lower + codegen ms", "note"),
              tuple(rows))], name="gemm-recipe", argv=argv,
        notes=[f"{threads} threads (bound); measured fp32 FMA peak {peak:.1f} GFLOP/s. "
               f"Medians of {args.repeat} samples of {NUMBER} calls, each contender in "
               "its own fresh process."], header={"peak_gflops": peak})
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
