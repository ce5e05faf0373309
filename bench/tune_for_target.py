"""Tune GMM 1024^3 for a named target on this machine, beside numpy in the same run.

    python -m bench tune-for-target --target x86_64-avx2 --trials 200 --minutes 6

The point is an older CPU tuned from a newer host: ``--target x86_64-avx2`` on an AVX-512
machine compiles every candidate with -march=haswell (no 512-bit vectors) and times it
here for real. Stops at ``--trials`` or after ``--minutes`` of tuning, whichever comes
first (the log keeps every trial; a second run resumes it). Then the best record is
rebuilt for the same target and re-timed in a fresh process, numpy's matmul (its native
OpenBLAS kernel, OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE unset for that process only) is
timed in another, and both are printed with the target's measured FMA peak, and
written to ``<out>/results.md`` and ``results.json`` (bench/results.py).
"""
from __future__ import annotations

import time
from pathlib import Path

from bench import args as bench_args
from bench import peers, results
from bench.results import Table

HERE = Path(__file__).resolve().parent


class _OutOfTime(Exception):
    pass


def main(argv: list[str] | None = None) -> int:
    p = bench_args.parser("tune-for-target", __doc__, trials=200,
                          out=HERE / "out" / "tune_for_target")
    p.add_argument("--target", default="x86_64-avx2")
    p.add_argument("--minutes", type=float, default=6.0)
    p.add_argument("--size", type=int, default=1024)
    a = p.parse_args(argv)
    from tvmlite.search.options import TuningOptions
    from tvmlite.search.template_free.task import SearchTask
    from tvmlite.target import Target, peak
    target = Target.from_name(a.target)
    n = a.size
    task = SearchTask(func="matmul", args=(n, n, n), target=target)
    a.out.mkdir(parents=True, exist_ok=True)
    log = a.out / f"gmm{n}_{a.target}.jsonl"
    deadline = time.monotonic() + 60 * a.minutes

    def stop_when_late(trial) -> None:
        if trial.index % 32 == 0:
            print(f"  trial {trial.index}: best {trial.best_gflops:.1f} GFLOP/s", flush=True)
        if time.monotonic() > deadline:
            raise _OutOfTime

    t0 = time.perf_counter()
    try:
        task.tune(a.trials, log, TuningOptions(seed=0), stop_when_late)
    except _OutOfTime:
        pass
    wall = time.perf_counter() - t0
    curve = peers.curve_from_log(str(log), task.workload.key)
    threads = target.cores
    ours = peers.time_best_record(str(log), task.workload.key, threads)
    numpy = peers.time_numpy("matmul", [[n, n], [n, n]], threads)
    flops = task.workload.flops
    target_peak = peak.measure_peak(target, seconds=0.5, runs=3).gflops
    host_peak = peak.measure_peak(Target.host(), seconds=0.5, runs=3).gflops
    g_ours = flops / ours["seconds"] / 1e9 if "seconds" in ours else 0.0
    g_np = flops / numpy["seconds"] / 1e9 if "seconds" in numpy else 0.0
    flags = " ".join(f for f in target.cflags if f.startswith("-m"))
    print(f"\nGMM {n}^3, --target {a.target} ({flags}), {threads} threads")
    print(f"  trials:   {len(curve)} in {wall:.0f} s (budget {a.trials} trials / "
          f"{a.minutes:g} min)")
    print(f"  tvmlite:  {g_ours:.1f} GFLOP/s (best record rebuilt for {a.target}, re-timed in a "
          f"fresh process; logged best {curve[-1][2] if curve else 0:.1f})")
    print(f"  numpy:    {g_np:.1f} GFLOP/s (native OpenBLAS kernel, this host's ISA)"
          + (f"  -> tvmlite/numpy {g_ours / g_np:.2f}x" if g_np else f" {numpy.get('error', '')}"))
    print(f"  peak:     {target_peak:.1f} GFLOP/s fp32 FMA with {a.target}'s flags, "
          f"{host_peak:.1f} with this host's (-march=native); tvmlite at "
          f"{100 * g_ours / target_peak:.0f}% of the target's")
    results.write(a.out / "results.md", f"GMM {n}^3 tuned for --target {a.target} on this host", [
        Table(("contender", "GFLOP/s", "x numpy", "% of the target's peak", "note"), (
            ("tvmlite", g_ours, g_ours / g_np if g_np else None, 100 * g_ours / target_peak,
             f"best record rebuilt for {a.target} ({flags}), re-timed in a fresh process"),
            ("numpy", g_np or None, 1.0 if g_np else None, None,
             "native OpenBLAS kernel, this host's ISA" if g_np else numpy.get("error", "")),
        ))], name="tune-for-target", argv=argv or [],
        notes=[f"{len(curve)} trials in {wall:.0f} s (budget {a.trials} trials / "
               f"{a.minutes:g} min), {threads} threads. FMA peak {target_peak:.1f} GFLOP/s with "
               f"{a.target}'s flags, {host_peak:.1f} with this host's."],
        header={"target_peak_gflops": target_peak, "host_peak_gflops": host_peak,
                "tune_seconds": wall, "trials": len(curve)})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
