"""``build()`` and the Module it returns: a compiled kernel callable on numpy arrays.

The call checks every argument (count, ndarray, dtype, shape, C-contiguity,
writability of outputs) before any pointer reaches C, so a wrong array is a clear
``TypeError``/``ValueError``, never a crash. Timing runs in C (``<name>_time``).
"""
from __future__ import annotations

import shutil
import statistics
import sys
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from tvmlite.runtime.arrays import ALIGNMENT, is_aligned
from tvmlite.passes.pipeline import LoweredFunc, lower
from tvmlite.schedule.schedule import Schedule
from tvmlite.target.target import Target

NP_DTYPE = {"float32": np.float32, "float64": np.float64, "int32": np.int32, "int64": np.int64}
CPTR = {"float32": "float *", "float64": "double *", "int32": "int32_t *", "int64": "int64_t *"}


class MisalignedWarning(UserWarning):
    """An array timed by ``time_evaluator`` does not start on a cache line."""


@dataclass(frozen=True)
class TimeResult:
    """Seconds per call: one entry per repeat."""
    results: tuple

    @property
    def mean(self) -> float:
        return statistics.fmean(self.results)

    @property
    def median(self) -> float:
        return statistics.median(self.results)

    @property
    def min(self) -> float:
        return min(self.results)

    def __repr__(self) -> str:
        return f"TimeResult(median={self.median:.6g}s, mean={self.mean:.6g}s, n={len(self.results)})"


class Module:
    """A built kernel: call it like a function on numpy arrays (outputs written in place)."""

    def __init__(self, func: LoweredFunc, source: str, decl: str, lib_path: Path,
                 target: Target, outputs: Sequence[str], schedule: Schedule | None = None,
                 tensors: Sequence[Any] = ()):
        from tvmlite.codegen_c import load_library
        self.func, self.source, self.decl = func, source, decl
        self.lib_path, self.target = Path(lib_path), target
        self.outputs = tuple(outputs)
        self.schedule, self.tensors = schedule, tuple(tensors)   # for explain()
        self.name = func.name
        self.ffi, self.lib = load_library(lib_path, decl)
        self._kernel = getattr(self.lib, self.name)
        self._timer = getattr(self.lib, f"{self.name}_time")

    # -- arguments ---------------------------------------------------------------
    def _pointers(self, arrays: Sequence[Any]) -> list:
        args = self.func.args
        if len(arrays) != len(args):
            names = ", ".join(b.name for b in args)
            raise TypeError(f"kernel {self.name} takes {len(args)} arrays ({names}), "
                            f"got {len(arrays)}")
        ptrs = []
        for a, buf in zip(arrays, args):
            if not isinstance(a, np.ndarray):
                raise TypeError(f"argument {buf.name} must be a numpy.ndarray, "
                                f"got {type(a).__name__}")
            if a.dtype != NP_DTYPE[buf.dtype]:
                raise TypeError(f"argument {buf.name} must have dtype {buf.dtype}, got {a.dtype} "
                                f"(use .astype('{buf.dtype}'))")
            if a.shape != tuple(buf.shape):
                raise ValueError(f"argument {buf.name} must have shape {tuple(buf.shape)}, "
                                 f"got {a.shape}")
            if not a.flags.c_contiguous:
                raise ValueError(f"argument {buf.name} must be C-contiguous "
                                 f"(use numpy.ascontiguousarray)")
            if buf.name in self.outputs and not a.flags.writeable:
                raise ValueError(f"argument {buf.name} is an output and must be writeable")
            ptrs.append(self.ffi.cast(CPTR[buf.dtype], a.ctypes.data))
        for a, buf in zip(arrays, args):
            if buf.name in self.outputs and any(
                    b is not a and np.may_share_memory(a, b) for b in arrays):
                raise ValueError(f"output {buf.name} overlaps another argument; the kernel "
                                 f"assumes distinct arrays (pass a separate output array)")
        return ptrs

    def __call__(self, *arrays: Any) -> None:
        rc = self._kernel(*self._pointers(arrays))
        if rc != 0:
            raise MemoryError(f"kernel {self.name} could not allocate its buffers")

    # -- introspection -------------------------------------------------------------
    def get_source(self) -> str:
        return self.source

    def set_num_threads(self, n: int) -> None:
        """OpenMP threads used by this kernel's parallel loops (default: all cores)."""
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise ValueError(f"set_num_threads: n must be a positive int, got {n!r}")
        getattr(self.lib, f"{self.name}_set_num_threads")(n)

    def time_evaluator(self, number: int = 10, repeat: int = 3,
                       min_repeat_ms: float = 0) -> Callable[..., TimeResult]:
        """A function timing ``number`` calls per repeat in C; ``min_repeat_ms`` raises
        ``number`` until one repeat lasts at least that long."""
        for val, what in ((number, "number"), (repeat, "repeat")):
            if isinstance(val, bool) or not isinstance(val, int) or val < 1:
                raise ValueError(f"time_evaluator: {what} must be a positive int, got {val!r}")

        def evaluate(*arrays: Any) -> TimeResult:
            ptrs = self._pointers(arrays)
            loose = [b.name for a, b in zip(arrays, self.func.args) if not is_aligned(a)]
            if loose:
                warnings.warn(f"time_evaluator: {', '.join(loose)} not {ALIGNMENT}-byte "
                              f"aligned: vector accesses straddle cache lines and the time "
                              f"depends on where numpy put the data (allocate with "
                              f"tvmlite.empty or copy with tvmlite.asaligned)",
                              MisalignedWarning, stacklevel=2)
            n = number
            self._kernel(*ptrs)  # warm-up: page faults, thread pool start
            if min_repeat_ms > 0:
                while True:
                    t = self._timer(*ptrs, n)
                    if t < 0 or t * n * 1e3 >= min_repeat_ms or n >= 1 << 24:
                        break
                    n = min(n * 2 if t <= 0 else max(n * 2, int(min_repeat_ms / (t * 1e3)) + 1),
                            1 << 24)
            out = []
            for _ in range(repeat):
                t = self._timer(*ptrs, n)
                if t < 0:
                    raise MemoryError(f"kernel {self.name} could not allocate its buffers")
                out.append(t)
            return TimeResult(tuple(out))
        return evaluate

    def explain(self, seconds: float | None = None, **kwargs: Any) -> Any:
        """What bounds this kernel and what to change (``tvmlite.explain``): the roofline
        and the findings. ``seconds`` is a measured time of one call; by default the
        kernel is timed now on random aligned inputs. Keywords go to
        ``tvmlite.explain.explain_schedule`` (peak=, bandwidth=, measure=)."""
        from tvmlite.explain.report import explain_schedule
        from tvmlite.runtime.arrays import empty
        if self.schedule is None:
            raise ValueError(f"Module {self.name} was not made by tvmlite.build(s, args): "
                             "it has no schedule to explain")
        if seconds is None:
            rng = np.random.default_rng(0)
            arrays = []
            for b in self.func.args:
                a = empty(tuple(b.shape), b.dtype)
                a[...] = rng.random(a.shape) if b.dtype.startswith("float") else \
                    rng.integers(0, 8, a.shape)
                arrays.append(a)
            seconds = self.time_evaluator(number=3, repeat=3, min_repeat_ms=20)(*arrays).median
        return explain_schedule(self.schedule, self.tensors, self.target, seconds,
                                name=self.name, source="module", **kwargs)

    def export_library(self, path: str | Path) -> Path:
        """Write ``path`` (the .so), plus the .h declaring the kernel and the .c source."""
        path = Path(path)
        if path.suffix != ".so":
            raise ValueError(f"export_library: path must end in .so, got {str(path)!r}")
        path.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(self.lib_path, path)
        path.with_suffix(".c").write_text(self.source)
        path.with_suffix(".h").write_text(header(self.name, self.decl))
        return path

    def __repr__(self) -> str:
        return f"Module({self.name}, args={[b.name for b in self.func.args]})"


def header(guard_name: str, decl: str) -> str:
    guard = f"TVMLITE_{guard_name.upper()}_H"
    return (f"// generated by tvmlite\n#ifndef {guard}\n#define {guard}\n#include <stdint.h>\n"
            f"#ifdef __cplusplus\nextern \"C\" {{\n#endif\n{decl}#ifdef __cplusplus\n}}\n#endif\n"
            f"#endif\n")


def generate_c(s: Schedule, args: Sequence[Any], target: Target | None = None,
               name: str = "default_function") -> tuple[LoweredFunc, str, str]:
    """Lower and generate C without compiling: (loop IR, C source, C declarations).
    This is the per-candidate cost of a search, so it is what benchmarks time."""
    from tvmlite.codegen_c.codegen import cdecl, generate
    target = target or Target.host()
    func = lower(s, args, name=name, vector_bytes=target.vector_bits // 8)
    outputs = [st.name for st in s.state.stages]
    return func, generate(func, outputs, openmp=target.openmp), cdecl(func, outputs)


def build(s: Schedule, args: Sequence[Any], target: Target | None = None,
          name: str = "default_function", explain: bool = False) -> Module:
    """Lower, generate C, compile (cached by content) and load the kernel.
    ``explain=True`` prints each scalar fallback and a spill warning to stderr as the
    kernel is built (what ``TVMLITE_LOG=fallbacks`` turns on at the command line)."""
    from tvmlite.codegen_c import compile_shared
    target = target or Target.host()
    func, source, decl = generate_c(s, args, target, name)
    path = compile_shared(source, target)
    if explain:
        from tvmlite.explain.report import build_warnings
        for line in build_warnings(func, source, path, target):
            print(f"tvmlite: fallback: {line}", file=sys.stderr)
    return Module(func, source, decl, path, target, [st.name for st in s.state.stages],
                  s, list(args))


