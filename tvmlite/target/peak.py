"""This CPU's measured peak fp32 FMA throughput (GFLOP/s), and its on-disk cache.

A tuned kernel's GFLOP/s means little until it is read as a share of what the CPU can
do, and a spec-sheet number (``Target.peak_gflops_estimate``) guesses the clock and the
FMA units. So ``codegen_c/peak.c`` is compiled with the target's own compiler and flags
and timed here. It runs in a child process because OMP_PROC_BIND and OMP_NUM_THREADS
are read once, when the OpenMP runtime starts: only a fresh process gets bound threads
without changing how this one runs its kernels.

The loop keeps ``fma_chains(target)`` accumulators: enough independent FMA chains to hide
the latency, fewer than the target's vector registers (as many accumulators as registers spill,
and the loop then reads well below the real peak). Two checks keep the number honest:

- a real GEMM (numpy's BLAS, with the same bound threads) is timed in the same child;
  the peak reported is the larger of the two, and ``fma_below_gemm`` flags a loop that
  reads below it (the loop, not the CPU, is then the limit);
- the CPU time other processes used during the run is measured (/proc/stat): a peak
  measured under load (``under_load``) is marked, printed as such, never replaces a
  cached peak measured on a quiet machine, and is measured again by the next
  ``cached_peak`` of a later process (once per process) that finds the machine quiet, a
  quiet figure replacing it. On a machine that stays busy (a test suite, a build farm)
  a re-measurement would read low again and cost every process seconds of both cores,
  so a busy moment (``busy_cores_now``) keeps the cached figure.

Anything that disturbs a run only slows it, so the peak is the *best* of several short
runs, an upper estimate, not their median; their spread is its noise. A kernel read
against it (``judge_kernel``, ``peak_bound.Verdict``) is "at the peak" within that noise,
and above it the probe read low: the kernel's figure becomes the cached peak
(``raise_peak``) unless it is above the CPU's theoretical peak, which no kernel reaches.

A measurement takes seconds, and a tuning summary wants the number every time, so the
result is cached per ``Target.key()`` (the CPU, compiler and flags) in
``~/.cache/tvmlite/peak.json``; ``tvmlite target --peak`` measures and refreshes it.
"""
from __future__ import annotations

import dataclasses
import json
import os
import resource
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from tvmlite.checks import check_int, check_number
from tvmlite.codegen_c import compile_shared
from tvmlite.target.measured_cache import load_entries, store_entry
from tvmlite.target.peak_bound import Verdict, run_noise, share_of_peak, theoretical_gflops
from tvmlite.target.target import Target

__all__ = ["Peak", "busy_cores_now", "cached_peak", "default_cache_file", "fma_chains",
           "judge_kernel", "measure_peak", "measure_runs", "peak_library", "raise_peak",
           "share_of_peak"]

_CDECL = ("double peak_gflops(int threads, double seconds); int peak_vec_bytes(void); "
          "int peak_chains(void);")
_WARMUP_SECONDS = 0.3
UNDER_LOAD_CORES = 0.25       # other processes' average busy cores that mark a peak
CACHE_VERSION = 2             # entries of the spilling 16-chain loop (v1) are not trusted
GEMM_SIZE = 1024
SECONDS, RUNS = 0.25, 6       # several short runs: one of them catches a quiet moment
_MEASURED: set = set()        # (cache file, target key) measured by this process
QUIET_CHECK_SECONDS = 0.1     # the glance at the machine before re-measuring a loaded peak


def fma_chains(target: Target) -> int:
    """Accumulator chains of the peak loop for ``target``: three quarters of its vector
    registers (12 of 16 on AVX2/SSE, 24 of 32 on AVX-512 and AArch64), never fewer than
    latency x pipes (``Target.fma_latency_pipes``, per family) and always leaving two
    registers for the loop's a and b."""
    regs = target.vector_registers
    latency, pipes = target.fma_latency_pipes
    return max(1, min(regs - 2, max(latency * pipes, regs * 3 // 4)))


@dataclass(frozen=True)
class Peak:
    """A measured peak: ``gflops`` is the larger of the FMA loop's best run (``fma_gflops``
    of ``runs``, ``chains`` accumulators) and a GEMM's (``gemm_gflops``, None if not
    timed), with ``threads`` bound threads. ``load`` is how many cores other processes
    kept busy on average during the measurement (None: unknown). ``raised_from`` is the
    probe's figure when a kernel that ran faster raised ``gflops`` to its own."""
    gflops: float
    threads: int
    runs: tuple
    measured_at: float          # time.time() of the measurement
    fma_gflops: float = 0.0
    gemm_gflops: float | None = None
    chains: int = 0
    load: float | None = None
    raised_from: float | None = None

    @property
    def noise(self) -> float:
        """The probe's relative spread (``peak_bound.run_noise`` of its runs)."""
        return run_noise(self.runs)

    @property
    def under_load(self) -> bool:
        return self.load is not None and self.load > UNDER_LOAD_CORES

    @property
    def fma_below_gemm(self) -> bool:
        return self.gemm_gflops is not None and self.fma_gflops < self.gemm_gflops

    def notes(self) -> list[str]:
        """What a reader of this number must know (empty when nothing is wrong)."""
        out = []
        if self.fma_below_gemm:
            out.append(f"the FMA loop ({self.fma_gflops:.1f} GFLOP/s, {self.chains} chains) "
                       f"read below a real GEMM ({self.gemm_gflops:.1f}): the loop, not the "
                       f"CPU, was the limit, so the GEMM's figure is reported")
        if self.under_load:
            out.append(f"measured under load: other processes kept ~{self.load:.1f} core(s) "
                       f"busy, so the peak reads low; re-run `tvmlite target --peak` on a "
                       f"quiet machine")
        if self.raised_from is not None:
            out.append(f"raised from the probe's {self.raised_from:.1f} GFLOP/s by a kernel "
                       f"that ran at {self.gflops:.1f}: the probe read low")
        return out

    def to_json(self) -> dict:
        return {"gflops": self.gflops, "threads": self.threads, "runs": list(self.runs),
                "measured_at": self.measured_at, "fma_gflops": self.fma_gflops,
                "gemm_gflops": self.gemm_gflops, "chains": self.chains, "load": self.load,
                "under_load": self.under_load, "raised_from": self.raised_from,
                "version": CACHE_VERSION}


def default_cache_file() -> Path:
    """``~/.cache/tvmlite/peak.json`` (beside the kernel cache)."""
    return Path(os.path.expanduser("~/.cache/tvmlite/peak.json"))


def _source() -> str:
    import tvmlite.codegen_c
    return (Path(tvmlite.codegen_c.__file__).parent / "peak.c").read_text()


def peak_flags(target: Target) -> tuple[str, ...]:
    """The -D flags that size the loop for ``target`` (vector width, chains)."""
    return (f"-DVEC_BYTES={target.vector_bits // 8}", f"-DNACC={fma_chains(target)}")


def peak_library(target: Target) -> Path:
    """peak.c compiled (cached) for ``target``, sized by ``peak_flags``."""
    return compile_shared(_source(), target, extra_flags=peak_flags(target))


def _check(threads: int, seconds: float, runs: int) -> None:
    check_int(threads, "peak: threads (default: the target's cores)", 1)
    check_int(runs, "peak: runs", 1)
    check_number(seconds, "peak: seconds (per run)", 0, lo_open=True)


def _cpu_busy_seconds() -> float | None:
    """Busy CPU seconds of the whole machine so far (all cores), from /proc/stat."""
    try:
        with open("/proc/stat") as f:
            fields = [float(x) for x in f.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    if len(fields) < 4:
        return None
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0.0)  # idle + iowait
    busy = sum(fields[:8]) - idle                                 # guest is in user
    return busy / os.sysconf("SC_CLK_TCK")


def busy_cores_now(seconds: float = QUIET_CHECK_SECONDS) -> float | None:
    """Other processes' average busy cores over the next ``seconds`` (this one sleeps),
    or None where /proc/stat cannot be read."""
    busy0, t0 = _cpu_busy_seconds(), time.monotonic()
    time.sleep(seconds)
    busy1, t1 = _cpu_busy_seconds(), time.monotonic()
    if busy0 is None or busy1 is None or t1 <= t0:
        return None
    return max(0.0, busy1 - busy0) / (t1 - t0)


def _children_cpu_seconds() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def _run_child(target: Target, threads: int, seconds: float, runs: int, gemm: bool) -> tuple:
    """(FMA runs, GEMM runs, other processes' busy cores) from one bound child."""
    _check(threads, seconds, runs)
    lib = peak_library(target)
    import tvmlite
    root = os.path.dirname(os.path.dirname(os.path.abspath(tvmlite.__file__)))
    env = dict(os.environ, OMP_PROC_BIND="true", OMP_NUM_THREADS=str(threads),
               PYTHONPATH=os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")])))
    cmd = [sys.executable, "-m", "tvmlite.target.peak", str(lib), str(threads), str(seconds),
           str(runs), "gemm" if gemm else "fma"]
    limit = 60 + (4 if gemm else 2) * runs * seconds
    busy0, own0, t0 = _cpu_busy_seconds(), _children_cpu_seconds(), time.monotonic()
    try:
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=limit)
    except subprocess.TimeoutExpired:
        raise RuntimeError(f"peak measurement did not finish in {limit:.0f}s; is the "
                           "machine overloaded? try fewer runs") from None
    busy1, own1, t1 = _cpu_busy_seconds(), _children_cpu_seconds(), time.monotonic()
    if proc.returncode != 0:
        raise RuntimeError(f"peak measurement child failed (exit {proc.returncode}):\n"
                           f"{proc.stderr.strip()[-2000:]}")
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    load = None
    if busy0 is not None and busy1 is not None and t1 > t0:
        load = max(0.0, (busy1 - busy0) - (own1 - own0)) / (t1 - t0)
    return [float(x) for x in out["fma"]], [float(x) for x in out.get("gemm", [])], load


def measure_runs(target: Target | None = None, threads: int | None = None, seconds: float = 1.0,
                 runs: int = 5) -> list[float]:
    """GFLOP/s of ``runs`` timed runs of the FMA loop, ``seconds`` each (after a short
    warm-up), all in one child process with ``threads`` OpenMP threads bound to cores
    (default: all the target's cores). RuntimeError if the child fails."""
    target = target or Target.host()
    threads = target.cores if threads is None else threads
    return _run_child(target, threads, seconds, runs, gemm=False)[0]


def measure_peak(target: Target | None = None, threads: int | None = None, seconds: float = SECONDS,
                 runs: int = RUNS, cache_file: str | os.PathLike | None = None) -> Peak:
    """Measure the peak: the FMA loop's best of ``runs`` short runs and, on this
    machine's own target, a numpy GEMM's best in the same child; the larger is the peak.
    When it used all the target's cores it is cached as this target's peak -- unless it
    was measured under load and the cache holds one that was not, or one measured under
    load too that read higher."""
    target = target or Target.host()
    threads = target.cores if threads is None else threads
    host = Target.host()
    gemm = target.arch == host.arch and set(target.features) <= set(host.features)
    fma, gemm_runs, load = _run_child(target, threads, seconds, runs, gemm)
    fma_best = max(fma)
    gemm_best = max(gemm_runs) if gemm_runs else None
    peak = Peak(max(fma_best, gemm_best or 0.0), threads, tuple(fma), time.time(), fma_best,
                gemm_best, fma_chains(target), load)
    if threads == target.cores:
        path = Path(cache_file) if cache_file else default_cache_file()
        _MEASURED.add((str(path), target.key()))
        old = cached_peak(target, path, remeasure=False)
        keep_old = old is not None and peak.under_load and (
            not old.under_load or old.gflops > peak.gflops)
        if not keep_old:
            _store(target, peak, path)
    return peak


def cached_peak(target: Target | None = None, cache_file: str | os.PathLike | None = None,
                remeasure: bool = True) -> Peak | None:
    """The cached peak of ``target`` (default: this machine), or None if it was never
    measured here (or only by the old, spilling loop). A damaged cache file counts as
    empty: it is only a cache. A peak measured under load is measured again first
    (``remeasure``, once per process and cache file: a process that measured it already
    does not; and only if the machine is quiet at that moment), and the figure
    ``measure_peak`` keeps is returned."""
    target = target or Target.host()
    path = Path(cache_file) if cache_file else default_cache_file()
    peak = _parse(_load(path).get(target.key()))
    key = (str(path), target.key())
    if peak is None or not peak.under_load or not remeasure or key in _MEASURED:
        return peak
    _MEASURED.add(key)
    busy = busy_cores_now()
    if busy is not None and busy >= UNDER_LOAD_CORES:
        return peak       # still busy: a figure measured now would read low too
    try:
        measure_peak(target, cache_file=path)
    except (OSError, RuntimeError, ValueError):
        return peak
    return _parse(_load(path).get(target.key()))


def _parse(entry: Any) -> Peak | None:
    try:
        if entry.get("version") != CACHE_VERSION:
            return None
        gemm, load, raised = (entry.get(k) for k in ("gemm_gflops", "load", "raised_from"))
        return Peak(float(entry["gflops"]), int(entry["threads"]),
                    tuple(float(x) for x in entry["runs"]), float(entry["measured_at"]),
                    float(entry["fma_gflops"]), None if gemm is None else float(gemm),
                    int(entry["chains"]), None if load is None else float(load),
                    None if raised is None else float(raised))
    except (TypeError, KeyError, ValueError, AttributeError):
        return None


def raise_peak(target: Target, gflops: float, cache_file: str | os.PathLike | None = None
               ) -> Peak | None:
    """Cache ``gflops`` (fp32) as ``target``'s peak: a kernel ran at it, so the probe's
    lower figure read low. Nothing happens without a cached peak or below it; returns the
    peak now cached."""
    path = Path(cache_file) if cache_file else default_cache_file()
    old = cached_peak(target, path, remeasure=False)
    if old is None or gflops <= old.gflops:
        return old
    new = dataclasses.replace(old, gflops=float(gflops), raised_from=(
        old.raised_from if old.raised_from is not None else old.gflops))
    _store(target, new, path)
    return new


def judge_kernel(gflops: float, target: Target | None = None, dtype: str = "float32",
                 cache_file: str | os.PathLike | None = None, measure: bool = True,
                 theoretical: float | Literal["detect"] | None = "detect") -> Verdict:
    """What a kernel's ``gflops`` (in ``dtype``) means on ``target``: read against the
    cached peak (measured now when missing and ``measure``; else the spec-sheet
    estimate), its noise and the theoretical peak (``peak_bound.theoretical_gflops``
    unless given). A figure the verdict finds the probe read low on (``peak_low``)
    becomes the cached peak (``raise_peak``)."""
    target = target or Target.host()
    scale = 0.5 if dtype == "float64" else 1.0
    measured = cached_peak(target, cache_file)
    if measured is None and measure:   # once per machine (cached): a guess misleads
        try:
            measured = measure_peak(target, cache_file=cache_file)
        except (OSError, RuntimeError, ValueError):
            measured = None
    theo = theoretical_gflops(target, dtype) if isinstance(theoretical, str) else theoretical
    if measured is None:
        return Verdict(gflops, target.peak_gflops_estimate(dtype), theoretical=theo,
                       how="estimated; `tvmlite target --peak` measures it")
    how = "measured under load" if measured.under_load else "measured"
    verdict = Verdict(gflops, measured.gflops * scale, measured.noise, theo, how)
    if verdict.kind == "peak_low":
        raise_peak(target, gflops / scale, cache_file)
    return verdict


def _load(path: Path) -> dict:
    return load_entries(path)


def _store(target: Target, peak: Peak, path: Path) -> None:
    """Replace this target's entry (see measured_cache.store_entry)."""
    store_entry(path, target.key(), {**peak.to_json(), "arch": target.arch,
                          "features": list(target.features), "compiler": target.compiler})


def _gemm_runs(threads: int, seconds: float, runs: int) -> list[float]:
    """GFLOP/s of ``runs`` runs of numpy's GEMM (its BLAS, OMP_NUM_THREADS threads)."""
    import numpy as np
    n = GEMM_SIZE
    rng = np.random.default_rng(0)
    a, b = (rng.random((n, n), dtype=np.float32) for _ in range(2))
    c = np.empty((n, n), np.float32)
    np.matmul(a, b, out=c)  # warm-up: BLAS threads start, pages fault in
    out = []
    for _ in range(runs):
        calls, t0 = 0, time.perf_counter()
        while True:
            np.matmul(a, b, out=c)
            calls += 1
            t = time.perf_counter() - t0
            if t >= seconds:
                break
        out.append(2.0 * n ** 3 * calls / t * 1e-9)
    return out


def _child(so_path: str, threads: int, seconds: float, runs: int, what: str) -> None:
    """In the bound child: load the library with plain cffi, print the runs as JSON
    (FMA runs and GEMM runs interleaved, so load hits both alike)."""
    import cffi
    ffi = cffi.FFI()
    ffi.cdef(_CDECL)
    # RTLD_NODELETE: never unload libgomp under its live threads at exit (see loader.py).
    lib = ffi.dlopen(so_path, ffi.RTLD_NOW | getattr(ffi, "RTLD_NODELETE", 0))
    lib.peak_gflops(threads, min(_WARMUP_SECONDS, seconds))  # clocks ramp, threads start
    fma, gemm = [], []
    for _ in range(runs):
        fma.append(lib.peak_gflops(threads, seconds))
        if what == "gemm":
            gemm += _gemm_runs(threads, seconds, 1)
    print(json.dumps({"fma": fma, "gemm": gemm}))


if __name__ == "__main__":
    _child(sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4]),
           sys.argv[5] if len(sys.argv) > 5 else "fma")
