"""The CPU we compile for: ISA features, vector width, cores, caches and the C compiler.

The target is *detected*, never assumed: the search reads its vector width and core count,
the compiler driver reads its flags, and tuning records store it (``to_json``) so a log
says which machine its timings belong to. Map of this module:

- ``Target``: the frozen description, with ``host()``, JSON round trip and ``key()``.
- ``CompilerNotFoundError``: raised when no usable C compiler exists.
- ``_detect_*`` helpers: /proc/cpuinfo, /sys cache sizes, compiler probing (cached per
  compiler argument, so detection runs once per process).
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import platform
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tvmlite.checks import check_int
from tvmlite.ir.dtypes import BUFFER_DTYPES, ITEMSIZE

__all__ = ["Target", "CompilerNotFoundError"]

_ARCHES = ("x86_64", "aarch64")
DEFAULT_CACHE_LINE_BYTES = 64   # x86's line and the common AArch64 one, when sysfs is silent
_FEATURE_RE = re.compile(r"^[a-z0-9_]+$")
# Flags every kernel is built with. gnu11, not c11: strict ISO mode turns off FMA
# contraction in gcc (-ffp-contract=off), which halves the throughput of a matmul.
# -O2, not -O3: our C is already unrolled and vectorized explicitly, and GCC 12.2's -O3
# loop transformations (loop distribution/splitting, the loop vectorizer) miscompiled
# guarded reductions that the schedule fuzzer produced (tests/codegen_c/test_gcc_bugs.py).
_BASE_CFLAGS = ("-O2", "-std=gnu11", "-fPIC", "-shared", "-fopenmp", "-Wall",
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
_OPENMP_PROBE = ('#include <omp.h>\n#include <stdio.h>\nint main(void) { int n = 0;\n'
                 '#pragma omp parallel reduction(+:n)\nn += 1;\n'
                 'printf("%d\\n", n > 0 && omp_get_max_threads() > 0); return 0; }\n')
_TRIVIAL_PROBE = "int tvmlite_probe(int x) { return x + 1; }\n"


class CompilerNotFoundError(RuntimeError):
    """No usable C compiler: every kernel is compiled C, so nothing can be built."""


@dataclass(frozen=True)
class Target:
    """What a kernel is compiled for and tuned on.

    ``caches`` is a tuple of ``(name, bytes)`` pairs, not a dict, so the target stays
    hashable and can key caches. ``cflags`` are the exact flags every kernel is built with.
    ``cache_line_bytes`` is the L1 data cache's line (sysfs ``coherency_line_size``; 64
    when unknown, and in logs written before it was recorded).
    """

    arch: str
    features: tuple[str, ...]
    vector_bits: int
    cores: int
    caches: tuple[tuple[str, int], ...]
    compiler: str
    compiler_version: str
    cflags: tuple[str, ...]
    openmp: bool = True
    cache_line_bytes: int = DEFAULT_CACHE_LINE_BYTES

    def __post_init__(self) -> None:
        # Validate here, not only in from_json, so no invalid Target can exist.
        if self.arch not in _ARCHES:
            raise ValueError(f"Target.arch={self.arch!r} is not supported: use one of {_ARCHES}")
        feats = self.features if isinstance(self.features, tuple) else (self.features,)
        bad = [f for f in feats if not isinstance(f, str) or not _FEATURE_RE.match(f)]
        if bad:
            raise ValueError(f"Target.features has bad name(s) {bad}: use a tuple of names "
                             f"matching {_FEATURE_RE.pattern}")
        object.__setattr__(self, "features", tuple(sorted(set(self.features))))
        for name in ("vector_bits", "cores"):
            check_int(getattr(self, name), f"Target.{name}", 1)
        check_int(self.cache_line_bytes, "Target.cache_line_bytes", 1)
        if self.cache_line_bytes & (self.cache_line_bytes - 1):
            raise ValueError(f"Target.cache_line_bytes={self.cache_line_bytes} must be a "
                             "power of two")
        if self.vector_bits % 64:
            raise ValueError(f"Target.vector_bits={self.vector_bits} must be a multiple of 64")
        for item in self.caches:
            if (not isinstance(item, tuple) or len(item) != 2 or not isinstance(item[0], str)
                    or not re.match(r"^L[1-4][di]?$", item[0]) or isinstance(item[1], bool)
                    or not isinstance(item[1], int) or item[1] <= 0):
                raise ValueError(f"Target.caches has a bad entry {item!r}: use (name, bytes) "
                                 "pairs like ('L1d', 32768)")
        if not isinstance(self.compiler, str) or not self.compiler \
                or not isinstance(self.compiler_version, str):
            raise ValueError("Target.compiler must be a non-empty path string and "
                             "Target.compiler_version a string")
        for flag in self.cflags:
            # Flags reach a command line; accept only plain single-token options.
            if not isinstance(flag, str) or not re.match(r"^-[A-Za-z0-9_=.,+:/-]+$", flag):
                raise ValueError(f"Target.cflags has a bad flag {flag!r}: flags are single "
                                 "options starting with '-'")
        if not isinstance(self.openmp, bool):
            raise ValueError(f"Target.openmp must be a bool, got {self.openmp!r}")

    # ------------------------------------------------------------------ detection
    @staticmethod
    def host(compiler: str | None = None) -> Target:
        """Detect this machine (once per process and compiler argument).

        ``compiler`` is a name on PATH or a path; None tries cc, gcc, clang in order.
        Raises CompilerNotFoundError when the compiler is missing or does not run.
        """
        return _detect_host(compiler)

    # ------------------------------------------------------------------ queries
    def vector_lanes(self, dtype: str) -> int:
        """Elements of ``dtype`` in one native vector register."""
        if dtype not in BUFFER_DTYPES:
            raise ValueError(f"vector_lanes(dtype={dtype!r}): dtype must be one of "
                             f"{sorted(BUFFER_DTYPES)}")
        return max(1, self.vector_bits // (8 * ITEMSIZE[dtype]))

    @property
    def vector_bytes(self) -> int:
        """Bytes in one native vector register (what lowering cuts vector loops into)."""
        return self.vector_bits // 8

    @property
    def vector_registers(self) -> int:
        """Architectural vector registers: 32 with AVX-512 (zmm0-31) and on AArch64
        (v0-v31), 16 with AVX2/SSE (ymm0-15)."""
        return 32 if "avx512f" in self.features or self.arch == "aarch64" else 16

    def cache_bytes(self, name: str) -> int | None:
        """Size of cache ``name`` ('L1d', 'L2', 'L3'), or None if unknown on this machine."""
        return dict(self.caches).get(name)

    def peak_gflops_estimate(self, dtype: str = "float32") -> float:
        """A *paper* peak: cores * lanes * 2 (FMA) * 2 (FMA units) * GHz.

        An estimate only (it assumes two full-width FMA units and the nominal clock from
        /proc/cpuinfo, 2.5 GHz if unknown); bench/peak.py measures the real number.
        """
        return self.cores * self.vector_lanes(dtype) * 2 * 2 * _cpu_ghz()

    # ------------------------------------------------------------------ serialization
    def to_json(self) -> dict[str, Any]:
        """Named-key dict, stable across versions, as stored in tuning records."""
        return {
            "arch": self.arch,
            "features": list(self.features),
            "vector_bits": self.vector_bits,
            "cores": self.cores,
            "caches": {name: size for name, size in self.caches},
            "compiler": self.compiler,
            "compiler_version": self.compiler_version,
            "cflags": list(self.cflags),
            "openmp": self.openmp,
            "cache_line_bytes": self.cache_line_bytes,
        }

    @staticmethod
    def from_json(d: Any) -> Target:
        """Rebuild a Target from ``to_json`` output; ValueError naming the bad key."""
        if not isinstance(d, dict):
            raise ValueError(f"Target.from_json expects a dict, got {type(d).__name__}")
        expected = {"arch", "features", "vector_bits", "cores", "caches", "compiler",
                    "compiler_version", "cflags", "openmp"}
        optional = {"cache_line_bytes"}          # absent in logs written before it existed
        missing, unknown = expected - d.keys(), d.keys() - expected - optional
        if missing:
            raise ValueError(f"Target.from_json: missing key(s) {sorted(missing)}")
        if unknown:
            raise ValueError(f"Target.from_json: unknown key(s) {sorted(unknown)}")
        # Container types here; values are checked by __post_init__ (errors name the key).
        for key, kind in (("features", list), ("cflags", list), ("caches", dict)):
            if not isinstance(d[key], kind):
                raise ValueError(f"Target.from_json: key {key!r} must be a {kind.__name__}, "
                                 f"got {type(d[key]).__name__}")
        try:
            return Target(
                arch=d["arch"], features=tuple(d["features"]), vector_bits=d["vector_bits"],
                cores=d["cores"], caches=tuple((str(k), v) for k, v in d["caches"].items()),
                compiler=d["compiler"], compiler_version=d["compiler_version"],
                cflags=tuple(d["cflags"]), openmp=d["openmp"],
                cache_line_bytes=d.get("cache_line_bytes", DEFAULT_CACHE_LINE_BYTES))
        except ValueError as e:
            raise ValueError(f"Target.from_json: {e}") from None

    def key(self) -> str:
        """Short stable content key (sha256 of the canonical JSON), for cache keys."""
        canon = json.dumps(self.to_json(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(canon.encode()).hexdigest()[:16]

    def describe(self) -> str:
        """Multi-line human summary, as printed by ``tvmlite target``."""
        caches = ", ".join(f"{n} {_fmt_bytes(b)}" for n, b in self.caches) or "unknown"
        return "\n".join([
            f"arch:      {self.arch}",
            f"features:  {' '.join(self.features) or '(none detected)'}",
            f"vector:    {self.vector_bits} bits ({self.vector_lanes('float32')} x float32)",
            f"cores:     {self.cores}",
            f"caches:    {caches} ({self.cache_line_bytes}-byte lines)",
            f"compiler:  {self.compiler} ({self.compiler_version})",
            f"openmp:    {'yes' if self.openmp else 'no (kernels run single-threaded)'}",
            f"cflags:    {' '.join(self.cflags)}",
        ])


def _fmt_bytes(n: int) -> str:
    for unit, size in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size and n % size == 0:
            return f"{n // size} {unit}"
    return f"{n} B"


# ---------------------------------------------------------------------- CPU detection
def _read(path: str | Path) -> str | None:
    try:
        return Path(path).read_text()
    except OSError:
        return None


def _normalize_arch(machine: str) -> str:
    m = machine.lower()
    if m in ("x86_64", "amd64", "x64"):
        return "x86_64"
    if m in ("aarch64", "arm64", "armv8", "armv8l"):
        return "aarch64"
    raise ValueError(f"unsupported CPU architecture {machine!r}: tvmlite supports "
                     f"{_ARCHES}")


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


def _cores() -> int:
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


def _cpu_ghz() -> float:
    """Nominal clock from /proc/cpuinfo 'cpu MHz' (2.5 GHz when unknown)."""
    m = re.search(r"^cpu MHz\s*:\s*([0-9]+(?:\.[0-9]*)?)", _read("/proc/cpuinfo") or "",
                  re.MULTILINE)
    return float(m.group(1)) / 1000.0 if m and float(m.group(1)) > 0 else 2.5


# ---------------------------------------------------------------------- compiler probing
def _find_compiler(compiler: str | None) -> str:
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


def _compiler_version(compiler: str) -> str:
    proc = _run([compiler, "--version"])
    if proc is None or proc.returncode != 0 or not proc.stdout.strip():
        raise CompilerNotFoundError(
            f"compiler={compiler!r} does not run (`{compiler} --version` failed): check the "
            "installation, or pass another compiler=/path/to/cc")
    return proc.stdout.strip().splitlines()[0].strip()


def _is_gcc(compiler: str) -> bool:
    """True for real GCC (cc is often gcc under another name); False for clang etc."""
    proc = _run([compiler, "-dM", "-E", "-x", "c", os.devnull])
    if proc is None or proc.returncode != 0:
        return False
    return "__GNUC__" in proc.stdout and "__clang__" not in proc.stdout


def _accepts(compiler: str, flags: list[str], source: str, tmp: str, *,
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
    base = [f for f in _BASE_CFLAGS if f not in ("-shared", "-fopenmp")]
    extra: list[str] = []
    gcc = _is_gcc(compiler)
    if arch == "x86_64":
        candidates = [["-march=native"]]
    else:
        candidates = [["-mcpu=native"]] if gcc else [["-mcpu=native"], ["-march=native"]]
    for cand in candidates:
        if _accepts(compiler, base + cand, _TRIVIAL_PROBE, tmp):
            extra = cand
            break
    if gcc and "avx512f" in features and _accepts(
            compiler, base + extra + ["-mprefer-vector-width=512"], _TRIVIAL_PROBE, tmp):
        extra.append("-mprefer-vector-width=512")
    # Our C is vectorized explicitly; the compiler's own loop vectorizer adds nothing.
    no_autovec = "-fno-tree-loop-vectorize" if gcc else "-fno-vectorize"
    if _accepts(compiler, base + extra + [no_autovec], _TRIVIAL_PROBE, tmp):
        extra.append(no_autovec)
    openmp = _accepts(compiler, base + extra + ["-fopenmp"], _OPENMP_PROBE, tmp,
                      link=True, run=True)
    flags = [f for f in _BASE_CFLAGS if openmp or f != "-fopenmp"] + extra
    return tuple(flags), openmp


@functools.lru_cache(maxsize=None)
def _detect_host(compiler: str | None) -> Target:
    arch = _normalize_arch(platform.machine())
    features = _cpuinfo_features(arch, _read("/proc/cpuinfo"))
    path = _find_compiler(compiler)
    version = _compiler_version(path)
    with tempfile.TemporaryDirectory(prefix="tvmlite-probe-") as tmp:
        if not _accepts(path, ["-O1", "-fPIC"], _TRIVIAL_PROBE, tmp):
            raise CompilerNotFoundError(
                f"compiler {path!r} cannot build a trivial shared library: check that it is "
                "a working C compiler, or pass another compiler=/path/to/cc")
        cflags, openmp = _cflags(path, arch, features, tmp)
    return Target(arch=arch, features=features, vector_bits=_vector_bits(features),
                  cores=_cores(), caches=_caches(), compiler=path, compiler_version=version,
                  cflags=cflags, openmp=openmp, cache_line_bytes=_cache_line_bytes())


def describe_cpu() -> dict[str, Any]:
    """What this CPU is, without a compiler (``tvmlite target`` prints it when none is
    found): arch, features, vector width and registers, cores, caches, model name."""
    arch = _normalize_arch(platform.machine())
    cpuinfo = _read("/proc/cpuinfo")
    features = _cpuinfo_features(arch, cpuinfo)
    m = re.search(r"^(model name|CPU part)\s*:\s*(.+)$", cpuinfo or "", re.MULTILINE)
    regs = 32 if "avx512f" in features or arch == "aarch64" else 16
    return {"arch": arch, "model": m.group(2).strip() if m else "unknown",
            "features": list(features), "vector_bits": _vector_bits(features),
            "vector_registers": regs, "cores": _cores(),
            "caches": {name: size for name, size in _caches()}}


def describe_cpu_text(cpu: dict[str, Any]) -> str:
    """``describe_cpu()`` as the lines ``Target.describe`` starts with."""
    caches = ", ".join(f"{n} {_fmt_bytes(b)}" for n, b in cpu["caches"].items()) or "unknown"
    return "\n".join([
        f"arch:      {cpu['arch']} ({cpu['model']})",
        f"features:  {' '.join(cpu['features']) or '(none detected)'}",
        f"vector:    {cpu['vector_bits']} bits ({cpu['vector_bits'] // 32} x float32, "
        f"{cpu['vector_registers']} registers)",
        f"cores:     {cpu['cores']}",
        f"caches:    {caches}",
    ])
