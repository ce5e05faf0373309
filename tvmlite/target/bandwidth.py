"""This CPU's measured read bandwidth per memory level (GB/s), and its on-disk cache.

A roofline needs, beside the FMA peak (``peak.py``), what each level of the memory
hierarchy delivers. ``codegen_c/stream.c`` sums a per-thread buffer with vector loads
(read bandwidth: kernels read far more than they write); a buffer of half a cache's size
measures that cache, one several times the last cache measures memory. It is compiled
with the target's compiler and flags and run in a child process with bound threads, as
the peak is, and cached per ``Target.key()`` in ``~/.cache/tvmlite/bandwidth.json``.

Buffer sizes come from the target's caches: L1d and L2 (per core) at half their size
per thread; L3 (shared) at half its size split over the threads, at most
``MAX_CACHE_PROBE`` per thread; memory at four times L3 over the threads, at most
``MAX_MEMORY_PROBE`` per thread. When that cap keeps the memory buffer inside L3 (a VM
reporting a huge L3), ``Bandwidth.memory_fits_l3`` says so: the number is then an upper
bound of memory bandwidth.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tvmlite.codegen_c import compile_shared
from tvmlite.target.measured_cache import load_entries, store_entry
from tvmlite.target.target import Target

__all__ = ["Bandwidth", "cached_bandwidth", "default_cache_file", "measure_bandwidth",
           "probe_sizes"]

_CDECL = "double stream_gbps(int threads, long bytes, double seconds);"
MAX_CACHE_PROBE = 16 << 20
MAX_MEMORY_PROBE = 64 << 20
LEVELS = ("L1d", "L2", "L3", "memory")
RUNS = 3    # per level, the best counts: a busy neighbour only ever lowers a run


@dataclass(frozen=True)
class Bandwidth:
    """Measured read GB/s (all ``threads`` together) per level: ``levels`` is a tuple of
    (level name, bytes per thread probed, GB/s), smallest level first."""
    levels: tuple
    threads: int
    measured_at: float
    memory_fits_l3: bool = False

    def gbps(self, level: str) -> float | None:
        return next((g for name, _, g in self.levels if name == level), None)

    def to_json(self) -> dict:
        return {"levels": [list(x) for x in self.levels], "threads": self.threads,
                "measured_at": self.measured_at, "memory_fits_l3": self.memory_fits_l3}

    @staticmethod
    def from_json(d: Any) -> Bandwidth:
        return Bandwidth(tuple((str(n), int(b), float(g)) for n, b, g in d["levels"]),
                         int(d["threads"]), float(d["measured_at"]),
                         bool(d.get("memory_fits_l3", False)))

    def describe(self) -> str:
        parts = [f"{name} {g:.0f} GB/s" for name, _, g in self.levels]
        note = " (memory probe fits in L3: an upper bound)" if self.memory_fits_l3 else ""
        return f"{', '.join(parts)}; {self.threads} bound threads, stream.c{note}"


def default_cache_file() -> Path:
    return Path(os.path.expanduser("~/.cache/tvmlite/bandwidth.json"))


def probe_sizes(target: Target, threads: int) -> tuple[list, bool]:
    """[(level, bytes per thread)] for ``target``'s known caches plus memory, and whether
    the memory buffer still fits in L3 (because of the cap)."""
    caches = dict(target.caches)
    sizes: list[tuple[str, int]] = []
    for name in ("L1d", "L2"):
        if name in caches:
            sizes.append((name, max(4096, caches[name] // 2)))
    l3 = caches.get("L3")
    if l3:
        sizes.append(("L3", min(MAX_CACHE_PROBE, max(4096, l3 // (2 * threads)))))
    last = l3 or caches.get("L2") or caches.get("L1d") or (1 << 20)
    mem = min(MAX_MEMORY_PROBE, 4 * last // threads)
    sizes.append(("memory", mem))
    return sizes, mem * threads <= last


def _source() -> str:
    import tvmlite.codegen_c
    return (Path(tvmlite.codegen_c.__file__).parent / "stream.c").read_text()


def measure_bandwidth(target: Target | None = None, threads: int | None = None,
                      seconds: float = 0.3, cache_file: str | os.PathLike | None = None,
                      sizes: list | None = None) -> Bandwidth:
    """Measure every level (``seconds`` each in ``RUNS`` runs, the best kept, after a
    short warm-up) in one bound child
    process; with all the target's cores and the default sizes the result is cached as
    this target's bandwidth. RuntimeError if the child fails."""
    target = target or Target.host()
    threads = target.cores if threads is None else threads
    if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
        raise ValueError(f"bandwidth: threads={threads!r} must be a positive int")
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or seconds <= 0:
        raise ValueError(f"bandwidth: seconds={seconds!r} must be a positive number")
    default, fits = probe_sizes(target, threads)
    probe = default if sizes is None else [(str(n), int(b)) for n, b in sizes]
    lib = compile_shared(_source(), target,
                         extra_flags=(f"-DVEC_BYTES={target.vector_bits // 8}",))
    import tvmlite
    root = os.path.dirname(os.path.dirname(os.path.abspath(tvmlite.__file__)))
    env = dict(os.environ, OMP_PROC_BIND="true", OMP_NUM_THREADS=str(threads),
               PYTHONPATH=os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")])))
    cmd = [sys.executable, "-m", "tvmlite.target.bandwidth", str(lib), str(threads),
           str(seconds), json.dumps(probe)]
    limit = 60 + 4 * len(probe) * seconds
    try:
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=limit)
    except subprocess.TimeoutExpired:
        raise RuntimeError(f"bandwidth measurement did not finish in {limit:.0f}s; is the "
                           "machine overloaded?") from None
    if proc.returncode != 0:
        raise RuntimeError(f"bandwidth measurement child failed (exit {proc.returncode}):\n"
                           f"{proc.stderr.strip()[-2000:]}")
    values = json.loads(proc.stdout.strip().splitlines()[-1])
    if any(v <= 0 for v in values):
        raise RuntimeError("bandwidth measurement could not allocate its buffers")
    bw = Bandwidth(tuple((n, b, float(g)) for (n, b), g in zip(probe, values)), threads,
                   time.time(), fits if sizes is None else False)
    if threads == target.cores and sizes is None:
        _store(target, bw, Path(cache_file) if cache_file else default_cache_file())
    return bw


def cached_bandwidth(target: Target | None = None, cache_file: str | os.PathLike | None = None
                     ) -> Bandwidth | None:
    """The cached bandwidth of ``target`` (default: this machine), or None."""
    target = target or Target.host()
    entry = _load(Path(cache_file) if cache_file else default_cache_file()).get(target.key())
    try:
        return Bandwidth.from_json(entry)
    except (TypeError, KeyError, ValueError):
        return None


def _load(path: Path) -> dict:
    return load_entries(path)


def _store(target: Target, bw: Bandwidth, path: Path) -> None:
    """Replace this target's entry (see measured_cache.store_entry)."""
    store_entry(path, target.key(), {**bw.to_json(), "arch": target.arch})


def _child(so_path: str, threads: int, seconds: float, probe: list) -> None:
    """In the bound child: load the library with plain cffi, print GB/s per level."""
    import cffi
    ffi = cffi.FFI()
    ffi.cdef(_CDECL)
    lib = ffi.dlopen(so_path, ffi.RTLD_NOW | getattr(ffi, "RTLD_NODELETE", 0))
    out = []
    for _, nbytes in probe:
        lib.stream_gbps(threads, nbytes, min(0.05, seconds))   # pages in, clocks up
        out.append(max(lib.stream_gbps(threads, nbytes, seconds / RUNS) for _ in range(RUNS)))
    print(json.dumps(out))


if __name__ == "__main__":
    _child(sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), json.loads(sys.argv[4]))
