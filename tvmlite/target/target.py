"""The CPU we compile for: ISA features, vector width and registers, cores, caches, and
the C compiler (a cross compiler for another architecture) with its exact flags.

The target is what the code is *for*; where it is measured is the runner's business
(search/measure/base_runner.py). ``Target.host()`` detects this machine (detect.py);
``Target.from_name("aarch64-neon")`` is a CPU fixed by a name (named.py): every heuristic
of the search reads vector lanes, registers, caches and cores from the Target it is given,
so tuning for a board reads the board's numbers. Tuning records store the target
(``to_json``, with its name) so a log says which CPU its timings belong to.

Map: ``Target`` (fields and validation, ``host``/``from_name``/``resolve``, queries, JSON,
comparing: ``same_cpu``/``label``/``which_cpu``, ``describe``); ``describe_cpu_text`` (a
CPU without a compiler, in the same words); ``CompilerNotFoundError`` (no usable
compiler: the message names the fix).
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, replace
from typing import Any

from tvmlite.checks import check_int
from tvmlite.ir.dtypes import BUFFER_DTYPES, ITEMSIZE, compute_dtype
from tvmlite.target.detect import (
    ARCHES,
    DEFAULT_CACHE_LINE_BYTES,
    CompilerNotFoundError,
    cpu_ghz,
    detect_host,
    fmt_bytes,
    isa_vector_registers,
)
from tvmlite.target.intrinsics import available as available_intrinsics
from tvmlite.target.named import (
    NAMED_TARGETS,
    TARGET_NAMES,
    fma_latency_pipes,
    named_target_fields,
    unknown_name_message,
)

__all__ = ["Target", "CompilerNotFoundError", "TARGET_NAMES", "describe_cpu_text"]

_FEATURE_RE = re.compile(r"^[a-z0-9_]+$")
_NAME_RE = re.compile(r"^[A-Za-z0-9_.+-]{0,64}$")
# keys a record written before named targets lacks (they take their defaults)
_OPTIONAL_KEYS = {"name", "vector_registers", "cache_line_bytes"}


@dataclass(frozen=True)
class Target:
    """What a kernel is compiled for and tuned on.

    ``caches`` is a tuple of ``(name, bytes)`` pairs, not a dict, so the target stays
    hashable and can key caches. ``cflags`` are the exact flags every kernel is built with.
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
    name: str = ""                    # "host", a named target, or "" (built by hand)
    vector_register_count: int = 0    # 0: by the ISA (see vector_registers)
    cache_line_bytes: int = DEFAULT_CACHE_LINE_BYTES

    def __post_init__(self) -> None:
        # Validate here, not only in from_json, so no invalid Target can exist.
        if self.arch not in ARCHES:
            raise ValueError(f"Target.arch={self.arch!r} is not supported: use one of {ARCHES}")
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
        if not isinstance(self.name, str) or not _NAME_RE.match(self.name):
            raise ValueError(f"Target.name must be a short name (letters, digits, '_.+-'), "
                             f"got {self.name!r}")
        check_int(self.vector_register_count, "Target.vector_registers (0: by the ISA)",
                  0, 256)

    # ------------------------------------------------------------------ detection
    @staticmethod
    def host(compiler: str | None = None) -> Target:
        """Detect this machine (once per process and compiler argument).

        ``compiler`` is a name on PATH or a path; None tries cc, gcc, clang in order.
        Raises CompilerNotFoundError when the compiler is missing or does not run.
        """
        return _host(compiler)

    @staticmethod
    def from_name(name: str, compiler: str | None = None, cores: int | None = None) -> Target:
        """A named CPU: ``host`` (this machine, detected) or one of ``x86_64-sse4``,
        ``x86_64-avx2``, ``x86_64-avx512``, ``aarch64-neon`` (fixed ISA, vector width and
        registers, explicit -march/-mtune, compiler of its architecture).

        ``compiler`` overrides the compiler (a cross compiler for another arch); ``cores``
        the thread count the search plans for (default: this machine's CPUs). An unknown
        name is a ValueError listing the known ones; a missing cross compiler is a
        CompilerNotFoundError naming the Debian package."""
        if not isinstance(name, str) or name not in TARGET_NAMES:
            raise ValueError(f"Target.from_name: {unknown_name_message(name)}")
        if cores is not None and (isinstance(cores, bool) or not isinstance(cores, int)
                                  or cores < 1):
            raise ValueError(f"Target.from_name(cores={cores!r}): use a positive int, or "
                             "None for this machine's CPU count")
        if name == "host":
            host = _host(compiler)
            return host if cores is None else _replace(host, cores=cores)
        return Target(**named_target_fields(name, compiler, cores))

    @staticmethod
    def resolve(target: Target | str | None, what: str = "target") -> Target:
        """``target`` as a Target: a Target stays, a name goes through ``from_name``, None
        is this machine. Anything else is a TypeError naming ``what``."""
        if target is None:
            return Target.host()
        if isinstance(target, Target):
            return target
        if isinstance(target, str):
            if target not in TARGET_NAMES:
                raise ValueError(f"{what}={target!r}: {unknown_name_message(target)}")
            return Target.from_name(target)
        raise TypeError(f"{what} must be a tvmlite.Target or a target name "
                        f"({', '.join(TARGET_NAMES)}), got {type(target).__name__}")

    # ------------------------------------------------------------------ queries
    def vector_lanes(self, dtype: str) -> int:
        """Elements of ``dtype`` in one native vector register."""
        if dtype not in BUFFER_DTYPES:
            raise ValueError(f"vector_lanes(dtype={dtype!r}): dtype must be one of "
                             f"{sorted(BUFFER_DTYPES)}")
        return max(1, self.vector_bits // (8 * ITEMSIZE[dtype]))

    def compute_lanes(self, dtype: str) -> int:
        """Elements of ``dtype`` in one vector of what it is computed in: float32's lanes
        for a storage float (bfloat16, float16: computed in float32, rounded on store),
        else ``vector_lanes``. A stage over 32 bf16 lanes on AVX-512 computes on 32
        float32 lanes, two registers, which GCC lowers in part to scalars (a NaN test
        was 32 ``vucomiss``)."""
        return self.vector_lanes(compute_dtype(dtype))

    @property
    def vector_bytes(self) -> int:
        """Bytes in one native vector register (what lowering cuts vector loops into)."""
        return self.vector_bits // 8

    @property
    def intrinsics(self) -> tuple[str, ...]:
        """The dot-product intrinsics ``tensorize`` may use on this CPU, faster first
        (``tvmlite.target.intrinsics``): read from the features, so a target without
        VNNI or dotprod lists only the fallbacks."""
        return available_intrinsics(self.arch, self.features)

    @property
    def vector_registers(self) -> int:
        """Architectural vector registers: fixed by a named target, else by the ISA: 32
        with AVX-512 (zmm0-31) and on AArch64 (v0-v31), 16 with AVX2/SSE (ymm0-15)."""
        if self.vector_register_count:
            return self.vector_register_count
        return isa_vector_registers(self.arch, self.features)

    @property
    def fma_latency_pipes(self) -> tuple[int, int]:
        """(FMA latency in cycles, FMA pipes) of this CPU's family (``named.FMA_FAMILIES``):
        latency x pipes independent accumulators keep every FMA unit busy."""
        return fma_latency_pipes(self.arch, tuple(self.features))

    def cache_bytes(self, name: str) -> int | None:
        """Size of cache ``name`` ('L1d', 'L2', 'L3'), or None if unknown on this machine."""
        return dict(self.caches).get(name)

    def peak_gflops_estimate(self, dtype: str = "float32") -> float:
        """A *paper* peak: cores * FMA pipes * lanes * 2 (an FMA is two flops) * GHz.

        An estimate only, for when nothing was measured: the pipes of the target's family
        (``fma_latency_pipes``) and the nominal clock from /proc/cpuinfo (2.5 GHz if
        unknown). ``peak_bound.theoretical_gflops`` is the same product at the highest
        clock the CPU reports, used as an upper bound; ``tvmlite target --peak`` measures.
        """
        _, pipes = self.fma_latency_pipes
        return self.cores * pipes * self.vector_lanes(dtype) * 2 * cpu_ghz()

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
            "name": self.name,
            "vector_registers": self.vector_register_count,
            "cache_line_bytes": self.cache_line_bytes,
        }

    @staticmethod
    def from_json(d: Any) -> Target:
        """Rebuild a Target from ``to_json`` output; ValueError naming the bad key."""
        if not isinstance(d, dict):
            raise ValueError(f"Target.from_json expects a dict, got {type(d).__name__}")
        expected = {"arch", "features", "vector_bits", "cores", "caches", "compiler",
                    "compiler_version", "cflags", "openmp"}
        missing, unknown = expected - d.keys(), d.keys() - expected - _OPTIONAL_KEYS
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
                cflags=tuple(d["cflags"]), openmp=d["openmp"], name=d.get("name", ""),
                vector_register_count=d.get("vector_registers", 0),
                cache_line_bytes=d.get("cache_line_bytes", DEFAULT_CACHE_LINE_BYTES))
        except ValueError as e:
            raise ValueError(f"Target.from_json: {e}") from None

    def key(self) -> str:
        """Short stable content key (sha256 of the canonical JSON), for cache keys."""
        canon = json.dumps(self.to_json(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(canon.encode()).hexdigest()[:16]

    # ------------------------------------------------------------------ comparing
    def same_cpu(self, other: Target) -> bool:
        """Timings carry over between two targets of the same arch and CPU features."""
        return self.arch == other.arch and self.features == other.features

    def label(self) -> str:
        """A short name for tables: the target's name if it has one (not "host", which
        says nothing of another machine), else arch and widest ISA."""
        if self.name and self.name != "host":
            return self.name
        for isa in ("avx512f", "avx2", "avx", "sse4_2", "sve", "neon", "asimd"):
            if isa in self.features:
                return f"{self.arch} {isa}"
        return self.arch

    def which_cpu(self, here: Target) -> str:
        """Where this (logged) target is, seen from ``here``: ``"this CPU (x86_64
        avx512f)"`` or ``"another CPU (x86_64 avx512f; it lacks amx_tile, has ...)"``:
        two CPUs of one ISA family differ in their features."""
        if self.same_cpu(here):
            return f"this CPU ({self.label()})"
        diff = []
        for word, names in (("lacks", sorted(set(here.features) - set(self.features))),
                            ("has", sorted(set(self.features) - set(here.features)))):
            if names:
                diff.append(f"{word} {', '.join(names[:4])}{', ...' if len(names) > 4 else ''}")
        return f"another CPU ({self.label()}{'; it ' + ', '.join(diff) if diff else ''})"

    # ------------------------------------------------------------------ describing
    def describe(self) -> str:
        """Multi-line human summary, as printed by ``tvmlite target``."""
        named = NAMED_TARGETS.get(self.name)
        return "\n".join([
            f"target:    {self.name or '(unnamed)'}"
            + (f" -- {named.about}" if named else " -- this machine, detected"
               if self.name == "host" else ""),
            *_cpu_lines(self.arch, self.features, self.vector_bits, self.vector_registers,
                        self.cores, self.caches, self.cache_line_bytes),
            f"compiler:  {self.compiler} ({self.compiler_version})",
            f"openmp:    {'yes' if self.openmp else 'no (kernels run single-threaded)'}",
            f"cflags:    {' '.join(self.cflags)}",
        ])


def _cpu_lines(arch: str, features: Any, vector_bits: int, registers: int, cores: int,
               caches: Any, line_bytes: int | None, model: str = "") -> list:
    """The CPU part of a description, one wording for a Target and a bare CPU."""
    sizes = ", ".join(f"{n} {fmt_bytes(b)}" for n, b in caches) or "unknown"
    return [f"arch:      {arch}" + (f" ({model})" if model else ""),
            f"features:  {' '.join(features) or '(none detected)'}",
            f"vector:    {vector_bits} bits ({vector_bits // 32} x float32), {registers} registers",
            f"cores:     {cores}",
            f"caches:    {sizes}" + (f" ({line_bytes}-byte lines)" if line_bytes else "")]


def describe_cpu_text(cpu: dict[str, Any]) -> str:
    """``detect.describe_cpu()``'s facts worded as ``Target.describe`` words them (what
    ``tvmlite target`` prints when no compiler is found, so there is no Target)."""
    return "\n".join(_cpu_lines(cpu["arch"], cpu["features"], cpu["vector_bits"],
                                cpu["vector_registers"], cpu["cores"],
                                tuple(cpu["caches"].items()), cpu.get("cache_line_bytes"),
                                cpu.get("model", "")))


def _replace(t: Target, **changes: Any) -> Target:
    return replace(t, **changes)


_HOSTS: dict = {}


def _host(compiler: str | None) -> Target:
    """This machine's Target, built once per compiler argument (detection is cached)."""
    if compiler not in _HOSTS:
        _HOSTS[compiler] = Target(**detect_host(compiler), name="host")
    return _HOSTS[compiler]
