"""Host detection: what this machine's CPU and C compiler are, as plain values.

``target.Target.host()`` turns ``detect_host()``'s fields into a Target; ``named.py`` uses
the compiler probes for targets that are not this machine. Nothing here imports Target,
so the three modules have no cycle. Map: constants (base flags, /proc/cpuinfo spellings)
· CPU detection (features, vector width, cores, caches, clock) · compiler probing (find,
version, gcc or not, does a flag set build/run) · ``probe_cpu`` (the CPU, no compiler)
and ``detect_host`` (CPU and compiler: Target fields). Wording them is ``target.py``'s job.
"""
from __future__ import annotations

import functools
import os
import platform
import re
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from tvmlite.errors import TvmliteError

__all__ = ["CompilerNotFoundError", "detect_host", "probe_cpu", "describe_cpu",
           "isa_vector_registers", "fmt_bytes", "BASE_CFLAGS"]

ARCHES = ("x86_64", "aarch64")   # the architectures tvmlite generates code for
DEFAULT_CACHE_LINE_BYTES = 64   # x86's line and the common AArch64 one, when sysfs is silent

# Flags every kernel is built with. gnu11, not c11: strict ISO mode turns off FMA
# contraction in gcc (-ffp-contract=off), which halves the throughput of a matmul.
# -O2, not -O3: our C is already unrolled and vectorized explicitly, and GCC 12.2's -O3
# loop transformations (loop distribution/splitting, the loop vectorizer) miscompiled
# guarded reductions that the schedule fuzzer produced (tests/codegen_c/test_gcc_bugs.py).
BASE_CFLAGS = ("-O2", "-std=gnu11", "-fPIC", "-shared", "-fopenmp", "-Wall",
                "-Wno-unused-variable", "-Wno-unused-function")
# /proc/cpuinfo spellings -> our normalized names (anything not listed is dropped, so
# the feature list stays short and stable across kernel versions).
_X86_FEATURES = {
    "sse": "sse", "sse2": "sse2", "pni": "sse3", "ssse3": "ssse3", "sse4_1": "sse4_1",
    "sse4_2": "sse4_2", "avx": "avx", "avx2": "avx2", "fma": "fma", "f16c": "f16c",
    "avx512f": "avx512f", "avx512bw": "avx512bw", "avx512dq": "avx512dq",
    "avx512vl": "avx512vl", "avx512cd": "avx512cd", "avx512ifma": "avx512ifma",
    "avx512vbmi": "avx512vbmi", "avx512_vnni": "avx512vnni", "avx512_bf16": "avx512bf16",
    "avx512_fp16": "avx512fp16", "avx_vnni": "avxvnni", "amx_tile": "amx_tile",
    "amx_bf16": "amx_bf16", "amx_int8": "amx_int8",
}
_ARM_FEATURES = {
    "asimd": "neon", "fphp": "fp16", "asimdhp": "neon_fp16", "asimddp": "dotprod",
    "i8mm": "i8mm", "bf16": "bf16", "sve": "sve", "sve2": "sve2", "fma": "fma",
}
# C programs the compiler probes build: does OpenMP link and run; does a flag set build
OPENMP_PROBE = ('#include <omp.h>\n#include <stdio.h>\nint main(void) { int n = 0;\n'
                 '#pragma omp parallel reduction(+:n)\nn += 1;\n'
                 'printf("%d\\n", n > 0 && omp_get_max_threads() > 0); return 0; }\n')
TRIVIAL_PROBE = "int tvmlite_probe(int x) { return x + 1; }\n"



class CompilerNotFoundError(TvmliteError, RuntimeError):
    """No usable C compiler: every kernel is compiled C, so nothing can be built."""


# ---------------------------------------------------------------------- CPU detection
def _read(path: str | Path) -> str | None:
    try:
        return Path(path).read_text()
    except OSError:
        return None


def normalize_arch(machine: str) -> str:
    """``platform.machine()``'s spelling as one of ``ARCHES`` (ValueError otherwise)."""
    m = machine.lower()
    if m in ("x86_64", "amd64", "x64"):
        return "x86_64"
    if m in ("aarch64", "arm64", "armv8", "armv8l"):
        return "aarch64"
    raise ValueError(f"unsupported CPU architecture {machine!r}: tvmlite supports "
                     f"{ARCHES}")


def _cpuinfo_features(arch: str, cpuinfo: str | None) -> tuple[str, ...]:
    """Feature names from /proc/cpuinfo ('flags' on x86, 'Features' on aarch64)."""
    table = _X86_FEATURES if arch == "x86_64" else _ARM_FEATURES
    field = "flags" if arch == "x86_64" else "Features"
    m = re.search(rf"^{field}\s*:(.*)$", cpuinfo or "", re.MULTILINE)
    raw = set(m.group(1).split()) if m else set()
    if not raw:
        raw = _fallback_raw_features(arch)
    return tuple(sorted({table[r] for r in raw if r in table}))


def _fallback_raw_features(arch: str) -> set[str]:
    """No /proc/cpuinfo (macOS, containers): ask sysctl, else assume the ISA baseline."""
    if arch == "aarch64":
        return {"asimd", "fma"}  # NEON and FMA are mandatory in ARMv8-A.
    proc = _run(["sysctl", "-n", "machdep.cpu.features", "machdep.cpu.leaf7_features"]) \
        if platform.system() == "Darwin" else None
    out = proc.stdout.lower() if proc is not None else ""
    spell = {"sse4.1": "sse4_1", "sse4.2": "sse4_2", "sse3": "pni", "avx1.0": "avx"}
    raw = {spell.get(tok, tok) for tok in out.split()}
    return raw | {"sse", "sse2"}  # x86-64 baseline


def _vector_bits(features: tuple[str, ...]) -> int:
    avx = "avx2" in features or "avx" in features
    return 512 if "avx512f" in features else 256 if avx else 128


def available_cores() -> int:
    """CPUs this process may run on (a container's or taskset's limit, not the machine's)."""
    n = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return max(1, n or 1)


def _parse_size(text: str) -> int | None:
    m = re.match(r"^\s*(\d+)\s*([KMG]?)", text)
    units = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    return int(m.group(1)) * units[m.group(2)] if m else None


def _caches() -> tuple[tuple[str, int], ...]:
    """Data/unified cache sizes of cpu0, from sysfs (else sysconf), smallest level first."""
    found: dict[str, int] = {}
    for index in sorted(Path("/sys/devices/system/cpu/cpu0/cache").glob("index*")):
        level, kind, size = (_read(index / f) for f in ("level", "type", "size"))
        if not (level and kind and size) or kind.strip() not in ("Data", "Unified"):
            continue
        name = f"L{level.strip()}" + ("d" if kind.strip() == "Data" else "")
        nbytes = _parse_size(size)
        if nbytes:
            found[name] = nbytes
    if not found and hasattr(os, "sysconf"):
        for name, key in (("L1d", "SC_LEVEL1_DCACHE_SIZE"), ("L2", "SC_LEVEL2_CACHE_SIZE"),
                          ("L3", "SC_LEVEL3_CACHE_SIZE")):
            try:
                v = os.sysconf(key)
            except (ValueError, OSError):
                continue
            if v > 0:
                found[name] = v
    return tuple(sorted(found.items(), key=lambda kv: (kv[0][1], kv[0])))


def _cache_line_bytes() -> int:
    """The L1 data cache's line size from sysfs (64, the x86 and common AArch64 line,
    when sysfs does not say)."""
    for index in sorted(Path("/sys/devices/system/cpu/cpu0/cache").glob("index*")):
        kind, line = _read(index / "type"), _read(index / "coherency_line_size")
        if kind and line and kind.strip() in ("Data", "Unified") and line.strip().isdigit():
            size = int(line.strip())
            if size > 0 and size & (size - 1) == 0:
                return size
    return DEFAULT_CACHE_LINE_BYTES


def cpuinfo_mhz(cpuinfo: str | Path = "/proc/cpuinfo") -> list[float]:
    """Every positive 'cpu MHz' of ``cpuinfo``, in core order ([] when it has none)."""
    found = re.findall(r"^cpu MHz\s*:\s*([0-9]+(?:\.[0-9]*)?)", _read(cpuinfo) or "",
                       re.MULTILINE)
    return [float(x) for x in found if float(x) > 0]


def cpu_ghz() -> float:
    """Nominal clock from /proc/cpuinfo 'cpu MHz' (2.5 GHz when unknown)."""
    mhz = cpuinfo_mhz()
    return mhz[0] / 1000.0 if mhz else 2.5


# ---------------------------------------------------------------------- compiler probing
def find_compiler(compiler: str | None) -> str:
    """The absolute path of ``compiler`` (None: the first of cc, gcc, clang on PATH)."""
    if compiler is None:
        for name in ("cc", "gcc", "clang"):
            path = shutil.which(name)
            if path:
                return os.path.abspath(path)
        raise CompilerNotFoundError(
            "no C compiler found (looked for cc, gcc, clang on PATH): install one, e.g. "
            "`apt-get install gcc`, or pass compiler=/path/to/cc")
    path = shutil.which(compiler)
    if path is None:
        raise CompilerNotFoundError(
            f"compiler={compiler!r} was not found or is not executable: pass the path of an "
            "installed C compiler (e.g. compiler='/usr/bin/gcc'), or compiler=None to search "
            "PATH for cc, gcc, clang")
    return os.path.abspath(path)


def _run(cmd: list[str], cwd: str | None = None, timeout: float = 60.0
         ) -> subprocess.CompletedProcess[str] | None:
    try:
        return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.SubprocessError):
        return None


def probe_compiler_version(compiler: str) -> str:
    """The first line of ``compiler --version`` (CompilerNotFoundError if it does not run)."""
    proc = _run([compiler, "--version"])
    if proc is None or proc.returncode != 0 or not proc.stdout.strip():
        raise CompilerNotFoundError(
            f"compiler={compiler!r} does not run (`{compiler} --version` failed): check the "
            "installation, or pass another compiler=/path/to/cc")
    return proc.stdout.strip().splitlines()[0].strip()


def is_gcc(compiler: str) -> bool:
    """True for real GCC (cc is often gcc under another name); False for clang etc."""
    proc = _run([compiler, "-dM", "-E", "-x", "c", os.devnull])
    if proc is None or proc.returncode != 0:
        return False
    return "__GNUC__" in proc.stdout and "__clang__" not in proc.stdout


def compiler_accepts(compiler: str, flags: list[str], source: str, tmp: str, *,
                     link: bool = False, run: bool = False) -> bool:
    """Does ``compiler`` build ``source`` with ``flags`` (and, if asked, run it)?"""
    src = os.path.join(tmp, "probe.c")
    out = os.path.join(tmp, "probe.out" if link else "probe.so")
    Path(src).write_text(source)
    cmd = [compiler, *flags, src, "-o", out]
    if not link:
        cmd.insert(1, "-shared")
    proc = _run(cmd, cwd=tmp)
    if proc is None or proc.returncode != 0:
        return False
    if run:
        proc = _run([out], cwd=tmp, timeout=30.0)
        return proc is not None and proc.returncode == 0 and proc.stdout.strip() == "1"
    return True


def _cflags(compiler: str, arch: str, features: tuple[str, ...], tmp: str
            ) -> tuple[tuple[str, ...], bool]:
    """The kernel flags this compiler accepts, and whether OpenMP works."""
    base = [f for f in BASE_CFLAGS if f not in ("-shared", "-fopenmp")]
    extra: list[str] = []
    gcc = is_gcc(compiler)
    if arch == "x86_64":
        candidates = [["-march=native"]]
    else:
        candidates = [["-mcpu=native"]] if gcc else [["-mcpu=native"], ["-march=native"]]
    for cand in candidates:
        if compiler_accepts(compiler, base + cand, TRIVIAL_PROBE, tmp):
            extra = cand
            break
    if gcc and "avx512f" in features and compiler_accepts(
            compiler, base + extra + ["-mprefer-vector-width=512"], TRIVIAL_PROBE, tmp):
        extra.append("-mprefer-vector-width=512")
    # Our C is vectorized explicitly; the compiler's own loop vectorizer adds nothing.
    no_autovec = "-fno-tree-loop-vectorize" if gcc else "-fno-vectorize"
    if compiler_accepts(compiler, base + extra + [no_autovec], TRIVIAL_PROBE, tmp):
        extra.append(no_autovec)
    openmp = compiler_accepts(compiler, base + extra + ["-fopenmp"], OPENMP_PROBE, tmp,
                              link=True, run=True)
    flags = [f for f in BASE_CFLAGS if openmp or f != "-fopenmp"] + extra
    return tuple(flags), openmp



def isa_vector_registers(arch: str, features: tuple[str, ...] | list[str]) -> int:
    """Architectural vector registers of an ISA: 32 with AVX-512 (zmm0-31) and on AArch64
    (v0-v31), 16 with AVX2/SSE (ymm0-15)."""
    return 32 if "avx512f" in features or arch == "aarch64" else 16


def probe_cpu() -> dict[str, Any]:
    """This CPU's facts, no compiler needed: arch, model name ("unknown" if not said),
    features, vector width, cores, caches (``(name, bytes)`` pairs) and line size."""
    arch = normalize_arch(platform.machine())
    cpuinfo = _read("/proc/cpuinfo")
    features = _cpuinfo_features(arch, cpuinfo)
    m = re.search(r"^(model name|CPU part)\s*:\s*(.+)$", cpuinfo or "", re.MULTILINE)
    return dict(arch=arch, model=m.group(2).strip() if m else "unknown", features=features,
                vector_bits=_vector_bits(features), cores=available_cores(),
                caches=_caches(), cache_line_bytes=_cache_line_bytes())


@functools.lru_cache(maxsize=None)
def detect_host(compiler: str | None) -> dict[str, Any]:
    """This machine as Target fields (once per process and compiler argument): the CPU's
    facts (``probe_cpu``) and the compiler's."""
    cpu = probe_cpu()
    cpu.pop("model")
    path = find_compiler(compiler)
    version = probe_compiler_version(path)
    with tempfile.TemporaryDirectory(prefix="tvmlite-probe-") as tmp:
        if not compiler_accepts(path, ["-O1", "-fPIC"], TRIVIAL_PROBE, tmp):
            raise CompilerNotFoundError(
                f"compiler {path!r} cannot build a trivial shared library: check that it is "
                "a working C compiler, or pass another compiler=/path/to/cc")
        cflags, openmp = _cflags(path, cpu["arch"], cpu["features"], tmp)
    return dict(cpu, compiler=path, compiler_version=version, cflags=cflags, openmp=openmp)


def fmt_bytes(n: int) -> str:
    """A byte count as people write cache sizes: ``32 KiB``, ``2 MiB``, else ``n B``."""
    for unit, size in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size and n % size == 0:
            return f"{n // size} {unit}"
    return f"{n} B"


def describe_cpu() -> dict[str, Any]:
    """``probe_cpu()`` as JSON values, with the ISA's vector registers (``tvmlite target
    --json`` prints it when no compiler is found; ``target.describe_cpu_text`` words it)."""
    cpu = probe_cpu()
    return {"arch": cpu["arch"], "model": cpu["model"], "features": list(cpu["features"]),
            "vector_bits": cpu["vector_bits"],
            "vector_registers": isa_vector_registers(cpu["arch"], cpu["features"]),
            "cores": cpu["cores"], "caches": dict(cpu["caches"]),
            "cache_line_bytes": cpu["cache_line_bytes"]}
