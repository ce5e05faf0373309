"""``build()`` and the Module it returns: a compiled kernel callable on numpy arrays
(or ``tvmlite.nd`` arrays: TVM's NDArray, unwrapped to the aligned numpy array it holds).

The call checks every argument (count, ndarray, dtype, shape, C-contiguity,
writability of outputs, no output overlapping another argument) before any pointer reaches C,
so a wrong array is a clear ``TypeError``/``ValueError``, never a crash. Timing runs in C
(``<name>_time``).
"""
from __future__ import annotations

import shutil
import statistics
import sys
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from tvmlite.checks import check_int
from tvmlite.codegen_c import compile_shared, load_library
from tvmlite.codegen_c.codegen import generate
from tvmlite.codegen_c.header import header, pack_doc, size_doc  # their old home: re-exported
from tvmlite.codegen_c.intrinsics import AMX_DENIED
from tvmlite.codegen_c.signature import cdecl
from tvmlite.errors import TvmliteError, TvmliteWarning
from tvmlite.explain.report import explain_schedule
from tvmlite.ir.dtypes import BUFFER_DTYPES, CTYPE, numpy_dtype
from tvmlite.ir.symbolic import bind_extent, is_static
from tvmlite.passes.pipeline import LoweredFunc, lower
from tvmlite.passes.tensorize import check_target
from tvmlite.runtime.arrays import ALIGNMENT, empty, is_aligned, unwrap
from tvmlite.runtime.device import check_device
from tvmlite.schedule.schedule import Schedule
from tvmlite.target.target import Target

CPTR = {d: f"{CTYPE[d]} *" for d in BUFFER_DTYPES}


class MisalignedWarning(TvmliteWarning):
    """An array timed by ``time_evaluator`` does not start on a cache line."""


class AmxDeniedError(TvmliteError, RuntimeError):
    """A kernel with AMX tile intrinsics could not get the OS's tile data permission."""


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
        return (f"TimeResult(median={self.median:.6g}s, mean={self.mean:.6g}s, "
                f"n={len(self.results)})")


class Module:
    """A built kernel: call it like a function on numpy arrays (outputs written in place)."""

    def __init__(self, func: LoweredFunc, source: str, decl: str, lib_path: Path,
                 target: Target, outputs: Sequence[str], schedule: Schedule | None = None,
                 tensors: Sequence[Any] = ()):
        self.func, self.source, self.decl = func, source, decl
        self.lib_path, self.target = Path(lib_path), target
        self.outputs = tuple(outputs)
        self.schedule, self.tensors = schedule, tuple(tensors)   # for explain()
        self.name = func.name
        self.entry_name = func.name   # TVM's name for the function a call runs
        self.ffi, self.lib = load_library(lib_path, decl)
        self._kernel = getattr(self.lib, self.name)
        self._timer = getattr(self.lib, f"{self.name}_time")
        # pre-packed constant inputs (tvmlite.schedule.prepack): the kernel reads each
        # packed buffer in place of its input; the call takes the original arrays
        self.packs = tuple(getattr(func, "packs", ()))
        self._pack_fns = {p.input: getattr(self.lib, p.func.name) for p in self.packs}
        by_packed = {p.packed: p.func.args[0] for p in self.packs}
        self.arg_buffers = tuple(by_packed.get(b.name, b) for b in func.args)

    # -- pre-packed inputs -----------------------------------------------------------
    def pack(self, name: str, array: Any) -> np.ndarray:
        """The packed layout of constant input ``name`` (what the kernel reads in its
        place), computed by the generated ``<kernel>_pack_<name>``: do it once at load
        time and call ``run_packed`` with the result."""
        fn = self._pack_fns.get(name) if isinstance(name, str) else None
        if fn is None:
            raise ValueError(f"pack: kernel {self.name} packs "
                             f"{[p.input for p in self.packs] or 'no input'}, not {name!r}")
        p = next(p for p in self.packs if p.input == name)
        src, dst = p.func.args
        array = unwrap(array)
        _check_array(array, src, {}, set())
        out = empty(tuple(dst.shape), dst.dtype)
        if fn(self.ffi.cast(CPTR[src.dtype], array.ctypes.data),
              self.ffi.cast(CPTR[dst.dtype], out.ctypes.data)) != 0:
            raise MemoryError(f"{p.func.name} could not allocate its buffers")
        return out

    def _packed_arrays(self, arrays: Sequence[Any]) -> list:
        """The original arguments with each packed input replaced by its packing."""
        if not self.packs:
            return list(arrays)
        if len(arrays) != len(self.arg_buffers):
            names = ", ".join(b.name for b in self.arg_buffers)
            raise TypeError(f"kernel {self.name} takes {len(self.arg_buffers)} arrays "
                            f"({names}), got {len(arrays)}")
        by_input = {p.input: p.packed for p in self.packs}
        return [self.pack(b.name, a) if b.name in by_input else a
                for a, b in zip(arrays, self.arg_buffers)]

    def run_packed(self, *arrays: Any) -> None:
        """Call the kernel itself: packed inputs already packed (``pack``), in the order
        of ``func.args``."""
        self.bind(*arrays)()

    def bind(self, *arrays: Any) -> Callable[[], None]:
        """``run_packed`` on ``arrays`` as a function of no arguments, the arrays checked
        and their pointers taken once (the function keeps them alive). A model's run loop
        calls every kernel on the same buffers each time, and the checks cost more than a
        small kernel: 8 ms a run over the 65 kernels of a quantized MobileNet-V2, whose
        kernels took 9."""
        kept = tuple(unwrap(a) for a in arrays)
        ptrs = self._pointers(kept)

        def call(_kept: tuple = kept) -> None:
            self._run(ptrs)
        return call

    # -- arguments ---------------------------------------------------------------
    def _pointers(self, arrays: Sequence[Any]) -> list:
        args = self.func.args
        if len(arrays) != len(args):
            names = ", ".join(b.name for b in args)
            raise TypeError(f"kernel {self.name} takes {len(args)} arrays ({names}), "
                            f"got {len(arrays)}")
        sizes = self.bind_sizes(arrays)
        ptrs = [sizes.get(n, 0) for n in self.sizes]
        for a, buf in zip(arrays, args):
            _check_array(a, buf, sizes, self.outputs)
            ptrs.append(self.ffi.cast(CPTR[buf.dtype], a.ctypes.data))
        check_no_overlap(arrays, args, self.outputs)
        return ptrs

    @property
    def sizes(self) -> tuple:
        """Names of the symbolic sizes (``te.var``), the kernel's leading int64 arguments."""
        return tuple(getattr(self.func, "sizes", ()))

    def bind_sizes(self, arrays: Sequence[Any]) -> dict:
        """The value of every symbolic size, read from the arrays' shapes; two arrays that
        disagree on a size are a ValueError naming both."""
        out: dict = {}
        seen: dict = {}
        for a, buf in zip(arrays, self.func.args):
            shape = getattr(a, "shape", None)
            if not isinstance(shape, tuple) or len(shape) != len(buf.shape):
                continue  # the per-argument checks report it
            for d, (want, got) in enumerate(zip(buf.shape, shape)):
                name = getattr(want, "name", None)
                if is_static(want) or name not in self.sizes:
                    continue
                if name in out and out[name] != got:
                    first, fd = seen[name]
                    raise ValueError(f"arguments {first} and {buf.name} disagree on the size "
                                     f"{name}: {first}.shape[{fd}] = {out[name]} but "
                                     f"{buf.name}.shape[{d}] = {got}")
                out.setdefault(name, int(got))
                seen.setdefault(name, (buf.name, d))
        for name, v in out.items():
            if v < 1:
                raise ValueError(f"size {name} = {v} (from {seen[name][0]}.shape"
                                 f"[{seen[name][1]}]): symbolic sizes must be at least 1")
        return out

    def __call__(self, *arrays: Any) -> None:
        """Run on the original arrays; a pre-packed input is packed first (each call:
        for a deployment, ``pack`` once and ``run_packed``)."""
        arrays = tuple(self._packed_arrays([unwrap(a) for a in arrays]))   # alive for the call
        self._run(self._pointers(arrays))

    def _run(self, ptrs: list) -> None:
        rc = self._kernel(*ptrs)
        if rc == -2:
            raise ValueError(f"kernel {self.name}: a symbolic size is < 1")
        if rc == AMX_DENIED:
            raise AmxDeniedError(f"kernel {self.name} uses AMX tiles, and the OS refused this "
                                 f"process the tile data permission (Linux arch_prctl "
                                 f"ARCH_REQ_XCOMP_PERM, kernel 5.16+): build it without a "
                                 f"tile intrinsic (a target without amx_tile)")
        if rc != 0:
            raise MemoryError(f"kernel {self.name} could not allocate its buffers")

    # -- introspection -------------------------------------------------------------
    def get_source(self) -> str:
        return self.source

    def set_num_threads(self, n: int) -> None:
        """OpenMP threads used by this kernel's parallel loops (default: all cores)."""
        check_int(n, "set_num_threads: n", 1)
        getattr(self.lib, f"{self.name}_set_num_threads")(n)

    def time_evaluator(self, func_name: str | None = None, dev: Any = None, number: int = 10,
                       repeat: int | None = None, min_repeat_ms: float = 0,
                       cooldown_interval_ms: float = 0,
                       repeats_to_cooldown: int = 1) -> Callable[..., TimeResult]:
        """A function timing ``number`` calls per repeat in C; ``min_repeat_ms`` raises
        ``number`` until one repeat lasts at least that long. It takes the original
        arrays; pre-packed inputs are packed once before timing, so the time is the
        kernel's alone (the packing runs once at load time).

        Both spellings work: ours, ``time_evaluator(number=10, repeat=3)``, and TVM's,
        ``time_evaluator(mod.entry_name, dev, number=10, repeat=1, min_repeat_ms=0,
        cooldown_interval_ms=0, repeats_to_cooldown=1)`` (``func_name`` must name this
        kernel, ``dev`` a ``tvmlite.cpu()``; the sleep of ``cooldown_interval_ms`` after
        every ``repeats_to_cooldown`` repeats lets a hot CPU cool down). ``repeat``
        defaults to 3, or to TVM's 1 when ``func_name`` is given."""
        if func_name is not None and func_name != self.entry_name:
            raise ValueError(f"time_evaluator: this module runs {self.entry_name!r} (its "
                             f"entry_name), not {func_name!r}")
        check_device(dev, "time_evaluator")
        if repeat is None:
            repeat = 3 if func_name is None else 1
        for val, what in ((number, "number"), (repeat, "repeat"),
                          (repeats_to_cooldown, "repeats_to_cooldown")):
            check_int(val, f"time_evaluator: {what}", 1)
        if isinstance(cooldown_interval_ms, bool) or not isinstance(
                cooldown_interval_ms, (int, float)) or not 0 <= cooldown_interval_ms <= 60e3:
            raise ValueError(f"time_evaluator: cooldown_interval_ms must be milliseconds in "
                             f"[0, 60000], got {cooldown_interval_ms!r}")

        def evaluate(*arrays: Any) -> TimeResult:
            arrays = tuple(self._packed_arrays([unwrap(a) for a in arrays]))
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
            for r in range(repeat):
                t = self._timer(*ptrs, n)
                if t < 0:
                    raise MemoryError(f"kernel {self.name} could not allocate its buffers")
                out.append(t)
                if cooldown_interval_ms > 0 and (r + 1) % repeats_to_cooldown == 0 \
                        and r + 1 < repeat:
                    time.sleep(cooldown_interval_ms / 1e3)
            return TimeResult(tuple(out))
        return evaluate

    def explain(self, seconds: float | None = None, **kwargs: Any) -> Any:
        """What bounds this kernel and what to change (``tvmlite.explain``): the roofline
        and the findings. ``seconds`` is a measured time of one call; by default the
        kernel is timed now on random aligned inputs. Keywords go to
        ``tvmlite.explain.explain_schedule`` (peak=, bandwidth=, measure=)."""
        if self.schedule is None:
            raise ValueError(f"Module {self.name} was not made by tvmlite.build(s, args): "
                             "it has no schedule to explain")
        if seconds is None:
            rng = np.random.default_rng(0)
            arrays = []
            for b in self.arg_buffers:
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
        path.with_suffix(".h").write_text(header(self.name, size_doc(self.func)
                                                 + pack_doc(self.func) + self.decl))
        return path

    def __repr__(self) -> str:
        return f"Module({self.name}, args={[b.name for b in self.func.args]})"


def _check_array(a: Any, buf: Any, sizes: dict, outputs: Any) -> None:
    """A clear TypeError/ValueError unless ``a`` fits argument ``buf``."""
    if not isinstance(a, np.ndarray):
        raise TypeError(f"argument {buf.name} must be a numpy.ndarray or a "
                        f"tvmlite.nd.NDArray, got {type(a).__name__}")
    if a.dtype != numpy_dtype(buf.dtype):
        raise TypeError(f"argument {buf.name} must have dtype {buf.dtype}, got {a.dtype} "
                        f"(use .astype('{buf.dtype}'))")
    want = tuple(bind_extent(d, sizes) for d in buf.shape)
    if a.shape != want:
        raise ValueError(f"argument {buf.name} must have shape {want}"
                         f"{_symbolic_note(buf.shape, sizes)}, got {a.shape}")
    if not a.flags.c_contiguous:
        raise ValueError(f"argument {buf.name} must be C-contiguous "
                         f"(use numpy.ascontiguousarray)")
    if buf.name in outputs and not a.flags.writeable:
        raise ValueError(f"argument {buf.name} is an output and must be writeable")


def _byte_range(a: np.ndarray) -> tuple[int, int]:
    """[start, end) of the bytes a C-contiguous array occupies."""
    start = a.__array_interface__["data"][0]
    return start, start + a.nbytes


def check_no_overlap(arrays: Sequence[np.ndarray], args: Sequence[Any],
                     outputs: Sequence[str]) -> None:
    """Refuse an output whose bytes overlap any other argument's (the same array passed
    twice, a view, a slice): every pointer is ``restrict`` and the kernel writes an
    output while it still reads its inputs, so ``mod(a, b, a)`` would silently read
    numbers it had already overwritten. Two *inputs* may share memory (``mod(a, a, c)``
    for ``A @ A``): the kernel never writes them, and C's ``restrict`` only forbids
    aliasing of an object that is modified. Arrays are C-contiguous (checked before), so
    the byte range is exact."""
    ranges = [_byte_range(a) for a in arrays]
    for i, (a_buf, (lo, hi)) in enumerate(zip(args, ranges)):
        if a_buf.name not in outputs or hi == lo:
            continue
        for j, (b_buf, (blo, bhi)) in enumerate(zip(args, ranges)):
            if j != i and bhi > blo and lo < bhi and blo < hi:
                kind = "output" if b_buf.name in outputs else "input"
                same = " (the same memory)" if (lo, hi) == (blo, bhi) else ""
                raise ValueError(f"output {a_buf.name} overlaps {kind} {b_buf.name}{same}: "
                                 f"the kernel writes {a_buf.name} while it reads "
                                 f"{b_buf.name}, so the result would be wrong; pass a "
                                 f"separate array for {a_buf.name} (e.g. numpy.empty_like)")


def _symbolic_note(shape: tuple, sizes: dict) -> str:
    if all(is_static(d) for d in shape):
        return ""
    bound = ", ".join(f"{k}={v}" for k, v in sizes.items())
    return f" (shape {tuple(str(d) for d in shape)} with {bound})"


def generate_c(s: Schedule, args: Sequence[Any], target: Target | None = None,
               name: str = "default_function") -> tuple[LoweredFunc, str, str]:
    """Lower and generate C without compiling: (loop IR, C source, C declarations).
    This is the per-candidate cost of a search, so it is what benchmarks time."""
    target = Target.resolve(target)   # a Target, a target name, or None: this machine
    func = lower(s, args, name=name, vector_bytes=target.vector_bits // 8)
    check_target(func.body, target.arch, target.features, target.name)
    outputs = kernel_outputs(s)
    return func, generate(func, outputs, openmp=target.openmp), cdecl(func, outputs)


def build(s: Schedule, args: Sequence[Any] | None = None, target: Target | None = None,
          name: str = "default_function", explain: bool = False, *,
          linkable: bool = False) -> Any:
    """Lower, generate C, compile (cached by content) and load the kernel. ``target`` is
    a Target or its name; a target this machine cannot run is refused before compiling
    (build it with ``generate_c`` + ``compile_shared``, or replay a log, instead).
    ``explain=True`` prints each scalar fallback and a spill warning to stderr as the
    kernel is built (what ``TVMLITE_LOG=fallbacks`` turns on at the command line).
    ``linkable``: through the object a bundle links (``compile_shared(linkable=True)``).
    A whole model is built by ``tvmlite.build`` (``tvmlite/entry.py``)."""
    if args is None:
        raise TypeError("build(s, args): the schedule's tensors (args) are required")
    target = Target.resolve(target)   # a Target, a target name, or None: this machine
    host = Target.host()
    if target.arch != host.arch or not set(target.features) <= set(host.features):
        raise ValueError(f"build(target={target.name or target.arch!r}): this machine "
                         f"({host.arch}) cannot load code for it; build for it with "
                         f"tvmlite.runtime.module.generate_c + codegen_c.compile_shared, "
                         f"or tune and replay with --target and --runner qemu")
    func, source, decl = generate_c(s, args, target, name)
    path = compile_shared(source, target, linkable=linkable)
    if explain:
        from tvmlite.explain.report import build_warnings
        for line in build_warnings(func, source, path, target):
            print(f"tvmlite: fallback: {line}", file=sys.stderr)
    return Module(func, source, decl, path, target, kernel_outputs(s), s, list(args))


def kernel_outputs(s: Schedule) -> list:
    """Names the kernel may write: every stage but the pack stages (run outside it)."""
    return [st.name for st in s.state.stages if st.scope != "pack"]


