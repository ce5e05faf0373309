"""Named targets: CPUs we compile for that need not be this machine.

Each entry fixes everything a kernel's code depends on -- the architecture, the ISA
features, the vector width and register count, cache sizes typical of the level's
reference CPU, and explicit ``-march``/``-mtune`` flags (never ``-march=native``, which
means "whatever builds this", not "what runs this") -- so the same name gives the same
code on any build machine. The compiler is this machine's C compiler when the
architectures agree, else the GNU cross compiler of the target's triplet
(``aarch64-linux-gnu-gcc``); a missing one is a CompilerNotFoundError naming the Debian
package that installs it. ``named_target_fields`` returns plain Target fields: target.py
builds the Target, so this module does not import it.
"""
from __future__ import annotations

import functools
import os
import platform
import shutil
import tempfile
from dataclasses import dataclass
from typing import Any

from tvmlite.target.detect import (
    BASE_CFLAGS,
    OPENMP_PROBE,
    TRIVIAL_PROBE,
    CompilerNotFoundError,
    available_cores,
    compiler_accepts,
    find_compiler,
    is_gcc,
    normalize_arch,
    probe_compiler_version,
)

__all__ = ["NAMED_TARGETS", "TARGET_NAMES", "CROSS_COMPILERS", "FMA_FAMILIES",
           "fma_latency_pipes", "named_target_fields"]

_KIB, _MIB = 1 << 10, 1 << 20
_SSE4 = ("sse", "sse2", "sse3", "ssse3", "sse4_1", "sse4_2")
_AVX2 = _SSE4 + ("avx", "avx2", "fma", "f16c")
_AVX512 = _AVX2 + ("avx512f", "avx512bw", "avx512dq", "avx512vl", "avx512cd")


@dataclass(frozen=True)
class NamedTarget:
    """One row of the table: what code for this CPU may assume."""
    arch: str
    features: tuple[str, ...]
    vector_bits: int
    vector_registers: int
    flags: tuple[str, ...]
    caches: tuple[tuple[str, int], ...]
    about: str


NAMED_TARGETS: dict[str, NamedTarget] = {
    "x86_64-sse4": NamedTarget(
        "x86_64", _SSE4, 128, 16, ("-march=nehalem", "-mtune=generic"),
        (("L1d", 32 * _KIB), ("L2", 256 * _KIB), ("L3", 8 * _MIB)),
        "Nehalem level: SSE4.2, 128-bit vectors, 16 xmm registers"),
    "x86_64-avx2": NamedTarget(
        "x86_64", _AVX2, 256, 16, ("-march=haswell", "-mtune=haswell"),
        (("L1d", 32 * _KIB), ("L2", 256 * _KIB), ("L3", 8 * _MIB)),
        "Haswell level: AVX2 + FMA, 256-bit vectors, 16 ymm registers"),
    "x86_64-avx512": NamedTarget(
        "x86_64", _AVX512, 512, 32,
        ("-march=skylake-avx512", "-mtune=skylake-avx512", "-mprefer-vector-width=512"),
        (("L1d", 32 * _KIB), ("L2", 1 * _MIB), ("L3", 16 * _MIB)),
        "Skylake-X level: AVX-512 F/BW/DQ/VL/CD, 512-bit vectors, 32 zmm registers"),
    "aarch64-neon": NamedTarget(
        "aarch64", ("fma", "neon"), 128, 32, ("-march=armv8-a", "-mtune=generic"),
        (("L1d", 32 * _KIB), ("L2", 1 * _MIB)),
        "ARMv8-A: NEON (Advanced SIMD), 128-bit vectors, 32 v registers"),
}
TARGET_NAMES: tuple[str, ...] = ("host", *NAMED_TARGETS)

# FMA latency (cycles) x pipes per microarchitecture family, first match wins: what a
# register block must hold as independent accumulator chains to keep the FMA units busy.
# Within a family the slower member's latency is taken (more chains than needed cost a
# little register pressure; fewer leave a pipe idle every cycle).
#   (family, arch, feature the family has, latency, pipes)
FMA_FAMILIES: tuple = (
    ("AVX-512 (Skylake-SP to Sapphire Rapids, Zen 4)", "x86_64", "avx512f", 4, 2),
    ("AVX2 + FMA (Haswell/Broadwell 5 cycles; Skylake, Zen 2/3 4-5)", "x86_64", "fma", 5, 2),
    ("SSE (no FMA: a multiply then an add)", "x86_64", "sse", 4, 2),
    ("AArch64 NEON (Cortex-A76/Neoverse N1: 2 pipes of 128 bits)", "aarch64", "", 4, 2),
)


def fma_latency_pipes(arch: str, features: tuple) -> tuple[int, int]:
    """(FMA latency in cycles, FMA pipes) of the first ``FMA_FAMILIES`` row matching
    ``arch`` and ``features``; (4, 2) for an architecture the table does not know."""
    for _, row_arch, feature, latency, pipes in FMA_FAMILIES:
        if row_arch == arch and (not feature or feature in features):
            return latency, pipes
    return 4, 2

# arch -> (GNU triplet compiler, the Debian package that installs it)
CROSS_COMPILERS = {
    "aarch64": ("aarch64-linux-gnu-gcc", "gcc-aarch64-linux-gnu"),
    "x86_64": ("x86_64-linux-gnu-gcc", "gcc-x86-64-linux-gnu"),
}


def unknown_name_message(name: Any) -> str:
    names = ", ".join(TARGET_NAMES)
    hint = " ('llvm' is TVM's code generator, not a CPU: tvmlite generates C)" \
        if name == "llvm" else ""
    return f"unknown target {name!r}{hint}: use one of {names}"


def _target_compiler(name: str, arch: str, compiler: str | None) -> str:
    """The compiler for ``arch``: ``compiler`` if given, this machine's when the arches
    agree, else the cross compiler of the triplet."""
    host_arch = normalize_arch(platform.machine())
    if compiler is not None or arch == host_arch:
        return find_compiler(compiler)
    cross, package = CROSS_COMPILERS[arch]
    path = shutil.which(cross)
    if path is None:
        raise CompilerNotFoundError(
            f"target {name!r} is {arch} and this machine is {host_arch}: it needs the cross "
            f"compiler {cross}, which is not on PATH. Install the Debian package {package} "
            f"(`apt-get install {package}`, and libgomp1-arm64-cross for OpenMP), or pass "
            f"compiler=/path/to/{cross}")
    return os.path.abspath(path)


@functools.lru_cache(maxsize=None)
def named_target_fields(name: str, compiler: str | None, cores: int | None) -> dict[str, Any]:
    """Target fields of the named target ``name`` (not "host"), its compiler probed once."""
    spec = NAMED_TARGETS[name]
    path = _target_compiler(name, spec.arch, compiler)
    version = probe_compiler_version(path)
    gcc = is_gcc(path)
    base = [f for f in BASE_CFLAGS if f not in ("-shared", "-fopenmp")]
    extra = list(spec.flags)
    with tempfile.TemporaryDirectory(prefix="tvmlite-probe-") as tmp:
        if not compiler_accepts(path, base + extra, TRIVIAL_PROBE, tmp):
            raise CompilerNotFoundError(
                f"compiler {path!r} cannot build for target {name!r} with "
                f"{' '.join(spec.flags)}: use a GCC or Clang that knows these flags, e.g. "
                f"compiler={CROSS_COMPILERS[spec.arch][0]!r}")
        no_autovec = "-fno-tree-loop-vectorize" if gcc else "-fno-vectorize"
        if compiler_accepts(path, base + extra + [no_autovec], TRIVIAL_PROBE, tmp):
            extra.append(no_autovec)
        # linked, not run: this machine may not execute the target's code
        openmp = compiler_accepts(path, base + extra + ["-fopenmp"], OPENMP_PROBE, tmp,
                                  link=True)
    flags = [f for f in BASE_CFLAGS if openmp or f != "-fopenmp"] + extra
    return dict(arch=spec.arch, features=spec.features, vector_bits=spec.vector_bits,
                vector_register_count=spec.vector_registers,
                cores=cores if cores is not None else available_cores(), caches=spec.caches,
                compiler=path, compiler_version=version, cflags=tuple(flags),
                openmp=openmp, name=name)
