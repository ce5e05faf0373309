"""The builder: candidates (a workload and its Steps) -> compiled kernel libraries.

A search proposes batches of candidates, many of them broken (a Step that does not apply,
C the compiler rejects) and some identical once lowered. The builder turns every
candidate into a ``BuildResult`` -- a library path or a typed error -- and never raises
for a bad candidate, so one bad schedule cannot stop a tuning run.

Lowering is Python and compiling is a subprocess that releases the GIL, so a batch runs
on ``n_parallel`` threads, each lowering one candidate and then compiling it while
another thread lowers the next (identical sources of one batch compile once, and a
dynamic kernel measured at several sizes -- the same symbolic C for each -- is lowered
once, for this batch and the next ones); ``iter_build`` hands each build over as it ends.
Every kernel gets the same C name, ``KERNEL``: the name is not part of the schedule, and
a fixed name lets equal schedules produce byte-equal sources that share one cache entry.

A runner whose machines have this builder's compiler (a Dask cluster, ``DaskRunner``)
may compile there instead: ``iter_lower`` stops after lowering (a ``lowered`` build:
the source, no library yet) and ``compile_lowered`` finishes one such build, with the
same target, timeout and error messages as a build here, wherever it runs.
"""
from __future__ import annotations

import dataclasses
import threading
import time
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Iterable, Iterator, Sequence

from tvmlite import te
from tvmlite.checks import check_int, check_number
from tvmlite.codegen_c import CompileError, CompileTimeoutError, compile_shared
from tvmlite.ir.symbolic import bind_extent
from tvmlite.runtime.module import generate_c
from tvmlite.schedule.schedule import Schedule
from tvmlite.schedule.state import ScheduleError
from tvmlite.search.measure.inputs import MeasureErrorNo, MeasureInput, state_key
from tvmlite.search.measure.reference import reference_steps, reference_target
from tvmlite.target.target import CompilerNotFoundError, Target

if TYPE_CHECKING:  # the records package imports this one
    from tvmlite.search.records.workload import Workload

__all__ = ["ArgSpec", "BuildResult", "LocalBuilder", "KERNEL"]

KERNEL = "tvmlite_kernel"   # codegen's own names are tvmlite_<short>; this one is free
_STDERR_LINES = 20
_MAX_LOWERINGS = 256


@dataclass(frozen=True)
class ArgSpec:
    """One kernel argument as the runner's worker needs it (plain data, no te objects)."""
    name: str
    shape: tuple
    dtype: str
    is_output: bool

    def to_json(self) -> dict:
        return {"name": self.name, "shape": list(self.shape), "dtype": self.dtype,
                "is_output": self.is_output}


@dataclass(frozen=True)
class BuildResult:
    """A compiled candidate (``lib_path``, its C declarations and kernel name) or the
    reason it has none; ``seconds`` is the wall time of lowering plus compiling."""
    lib_path: str | None
    decl: str
    kernel: str
    source: str
    args: tuple[ArgSpec, ...]
    error_no: MeasureErrorNo
    error_msg: str
    seconds: float
    sizes: tuple = ()   # values of the kernel's leading int64 size arguments, in order
    # pre-packed inputs: {"fn", "input", "packed": ArgSpec JSON}; the worker (and the C
    # harness of the qemu runner) packs once, before the check and the timing, so costs
    # are the kernel's alone
    packs: tuple = ()

    @property
    def ok(self) -> bool:
        return self.error_no == MeasureErrorNo.NO_ERROR and self.lib_path is not None

    @property
    def lowered(self) -> bool:
        """Lowered but not compiled yet (``LocalBuilder.iter_lower``): a source, no
        library and no error; ``LocalBuilder.compile_lowered`` compiles it."""
        return self.error_no == MeasureErrorNo.NO_ERROR and self.lib_path is None \
            and bool(self.source)

    @property
    def library(self) -> str:
        """``lib_path`` of a build that has one: what runners load once ``ok`` is checked."""
        if self.lib_path is None:
            raise ValueError(f"build of {self.kernel} has no library: {self.error_msg}")
        return self.lib_path


def arg_specs(workload: Workload) -> tuple[ArgSpec, ...]:
    """The kernel's arguments in call order: placeholders are inputs, the rest outputs.
    A dynamic workload measured at sizes (``Workload.at``) has its shapes at those sizes."""
    sizes = getattr(workload, "sizes", None)
    if sizes:
        return tuple(ArgSpec(t.name, tuple(bind_extent(d, sizes) for d in t.shape), t.dtype,
                             not isinstance(t.op, te.PlaceholderOp)) for t in workload.tensors)
    return tuple(ArgSpec(t.name, tuple(int(d) for d in t.shape), t.dtype,
                         not isinstance(t.op, te.PlaceholderOp)) for t in workload.tensors)


@dataclass(frozen=True)
class _Lowered:
    """A candidate lowered to C, waiting for its compile."""
    source: str
    decl: str
    args: tuple
    seconds: float
    sizes: tuple = ()
    packs: tuple = ()
    size_names: tuple = ()   # the SizeVar names of ``sizes``, in order


def pack_specs(func: Any) -> tuple:
    """What the worker needs to run a kernel's pack functions (plain JSON data)."""
    return tuple({"fn": p.func.name, "input": p.input,
                  "packed": ArgSpec(p.packed, tuple(int(d) for d in p.func.args[1].shape),
                                    p.func.args[1].dtype, False).to_json()}
                 for p in getattr(func, "packs", ()))


class LocalBuilder:
    """Builds batches of MeasureInputs on this machine, in parallel, with a timeout per
    candidate covering lowering and compiling."""

    def __init__(self, target: Target | None = None, n_parallel: int | None = None,
                 timeout: float = 30.0, cache_dir: Any = None):
        if target is not None and not isinstance(target, Target):
            raise TypeError(f"LocalBuilder(target=...) must be a tvmlite.target.Target or "
                            f"None for this machine, got {type(target).__name__}")
        check_int(n_parallel, "LocalBuilder(n_parallel=...) (None: one build per core)", 1,
                  allow_none=True)
        check_number(timeout, "LocalBuilder(timeout=...) in seconds", 0, lo_open=True)
        self._target, self._n_parallel = target, n_parallel
        self.timeout, self.cache_dir = float(timeout), cache_dir
        self._references: dict[str, BuildResult] = {}
        self._lowerings: dict[str, Future] = {}   # a dynamic kernel's, for its other sizes
        self._lock = threading.Lock()

    @property
    def target(self) -> Target:
        """The target, detected on first use (CompilerNotFoundError if there is no cc)."""
        if self._target is None:
            self._target = Target.host()
        return self._target

    @property
    def n_parallel(self) -> int:
        return self._n_parallel or self.target.cores

    def build(self, inputs: Sequence[MeasureInput]) -> list[BuildResult]:
        """One BuildResult per input, in the same order; never raises for a bad candidate."""
        return self._build_list(inputs, contract=True)

    def _build_list(self, inputs: Sequence[MeasureInput], contract: bool
                    ) -> list[BuildResult]:
        inputs = list(inputs)
        for i, inp in enumerate(inputs):
            _check_input(inp, i)
        results: list[BuildResult | None] = [None] * len(inputs)
        for i, res in self._iter_build(inputs, contract):
            results[i] = res
        return results  # type: ignore[return-value]

    def iter_build(self, inputs: Iterable[MeasureInput]) -> Iterator[tuple[int, BuildResult]]:
        """``(position in inputs, BuildResult)`` as each build ends, in any order. Inputs
        are pulled one at a time as a slot frees (``n_parallel`` in flight, each lowered
        and then compiled: lowering holds the GIL, the compiler does not), so a slow
        compile holds up only its own slot, and a caller streaming candidates to other
        machines gets each one the moment it is compiled. Identical sources compile once."""
        return self._iter_build(inputs, contract=True)

    def iter_lower(self, inputs: Iterable[MeasureInput]) -> Iterator[tuple[int, BuildResult]]:
        """``iter_build`` without the compile: each candidate's C, as a ``lowered``
        BuildResult (or its lowering error), for a runner whose machines compile it
        (``compile_lowered`` there) with this builder's compiler and flags."""
        return self._iter_build(inputs, contract=True, compile_c=False)

    def compile_lowered(self, build: BuildResult) -> BuildResult:
        """A ``lowered`` build compiled here for this builder's target, within what is
        left of its timeout after lowering; any other build is returned as it is. A
        compile error is the build's error, in the same words as ``build``'s."""
        if not isinstance(build, BuildResult):
            raise TypeError(f"LocalBuilder.compile_lowered(build=...) must be a BuildResult "
                            f"(from iter_lower), got {type(build).__name__}")
        if not build.lowered:
            return build
        try:
            target = self.target
        except CompilerNotFoundError as e:
            return dataclasses.replace(build, error_no=MeasureErrorNo.COMPILE_ERROR, error_msg=(
                f"no C compiler on this machine, nothing can be built: {e}"))
        path, error_no, msg, cc_seconds = self._compile(build.source, target,
                                                        self.timeout - build.seconds)
        return dataclasses.replace(build, lib_path=path, error_no=error_no, error_msg=msg,
                                   seconds=build.seconds + cc_seconds)

    def _iter_build(self, inputs: Iterable[MeasureInput], contract: bool,
                    compile_c: bool = True) -> Iterator[tuple[int, BuildResult]]:
        """``iter_build``; ``contract=False`` compiles for ``reference_target(target)``
        (no fused multiply-adds the source does not write, see reference.py);
        ``compile_c=False`` only lowers (``iter_lower``)."""
        it = iter(inputs)
        try:
            target = self.target if contract else reference_target(self.target)
        except CompilerNotFoundError as e:
            msg = f"no C compiler on this machine, nothing can be built: {e}"
            for i, inp in enumerate(it):
                yield i, _failed(_check_input(inp, i), MeasureErrorNo.COMPILE_ERROR, msg, 0.0)
            return
        compiles: dict[str, Future] = {}
        with self._lock:
            if len(self._lowerings) > _MAX_LOWERINGS:   # bound memory: C sources are big
                self._lowerings.clear()
        lowerings = self._lowerings
        pending: dict[Future, int] = {}
        pulled = 0
        with ThreadPoolExecutor(self.n_parallel) as pool:
            def pull() -> None:
                nonlocal pulled
                inp = next(it, None)
                if inp is not None:
                    pending[pool.submit(self._build_one, _check_input(inp, pulled), target,
                                        compiles, lowerings, compile_c)] = pulled
                    pulled += 1

            for _ in range(self.n_parallel):
                pull()
            while pending:
                done, _ = wait(pending, return_when=FIRST_COMPLETED)
                for fut in done:
                    yield pending.pop(fut), fut.result()
                    pull()

    def _build_one(self, inp: MeasureInput, target: Target, compiles: dict[str, Future],
                   lowerings: dict[str, Future] | None = None,
                   compile_c: bool = True) -> BuildResult:
        """Lower, then compile unless another slot compiles the same source (then wait
        for it: it is already running, so this cannot deadlock), or unless ``compile_c``
        is False (a ``lowered`` build)."""
        low = self._lower_once(inp, target, {} if lowerings is None else lowerings)
        if isinstance(low, BuildResult):
            return low
        if not compile_c:
            return BuildResult(None, low.decl, KERNEL, low.source, low.args,
                               MeasureErrorNo.NO_ERROR, "", low.seconds, low.sizes, low.packs)
        with self._lock:
            fut = compiles.get(low.source)
            mine = fut is None
            if fut is None:
                fut = compiles[low.source] = Future()
        if mine:
            fut.set_result(self._compile(low.source, target, self.timeout - low.seconds))
        path, error_no, msg, cc_seconds = fut.result()
        return BuildResult(path, low.decl, KERNEL, low.source, low.args, error_no, msg,
                           low.seconds + cc_seconds, low.sizes, low.packs)

    def build_reference(self, workload: Workload) -> BuildResult:
        """The build candidates of ``workload`` are checked against: its
        ``reference_steps`` schedule, bit-identical to the unscheduled nest (no Steps) but
        reordered for contiguous inner loops and parallel, so a big reduction's reference
        runs in a fraction of the time; the unscheduled build if that one fails. Both are
        compiled without floating-point contraction (``reference_target``), which is what
        makes them bit-identical on every CPU. Cached per ``workload.key`` once it
        succeeds."""
        with self._lock:
            hit = self._references.get(workload.key)
        if hit is not None:
            return hit
        try:
            steps = reference_steps(workload)
        except ScheduleError:
            steps = ()
        result = self._build_list([MeasureInput(workload, steps)], contract=False)[0]
        if steps and not result.ok:
            result = self._build_list([MeasureInput(workload, ())], contract=False)[0]
        if result.ok:
            with self._lock:
                self._references[workload.key] = result
        return result

    # -- one candidate ---------------------------------------------------------------
    def _lower_once(self, inp: MeasureInput, target: Target,
                    lowerings: dict[str, Future]) -> _Lowered | BuildResult:
        """``_lower``, shared by the sizes of one dynamic kernel: a workload at sizes
        (``Workload.at``) lowers to the same symbolic C at every size, so only its
        arguments' shapes and size values differ (and a reuse costs no lowering time)."""
        wl = inp.workload
        if not getattr(wl, "sizes", None):
            return self._lower(inp, target)
        key = state_key(wl.base_key, inp.steps)   # the candidate, whatever its sizes
        with self._lock:
            fut = lowerings.get(key)
            mine = fut is None
            if fut is None:
                fut = lowerings[key] = Future()
        if mine:
            low = self._lower(inp, target)
            fut.set_result(low)
            return low
        low = fut.result()
        if isinstance(low, BuildResult):
            return self._lower(inp, target)   # its own error message, with its own args
        return _Lowered(low.source, low.decl, arg_specs(wl), 0.0,
                        tuple(wl.sizes[n] for n in low.size_names), low.packs, low.size_names)

    def _lower(self, inp: MeasureInput, target: Target) -> _Lowered | BuildResult:
        """Steps -> C source; a Step that does not apply is INVALID_SCHEDULE."""
        start = time.perf_counter()
        wl = inp.workload
        try:
            args = arg_specs(wl)
            s = Schedule.from_steps(wl.outputs, inp.steps)
            func, source, decl = generate_c(s, wl.tensors, target, name=KERNEL)
            names = getattr(func, "sizes", ())
            sizes = tuple(wl.sizes[n] for n in names) if names else ()
        except ScheduleError as e:
            return _failed(inp, MeasureErrorNo.INVALID_SCHEDULE, str(e),
                           time.perf_counter() - start)
        except Exception as e:  # noqa: BLE001 -- any other lowering bug is one bad candidate
            return _failed(inp, MeasureErrorNo.UNKNOWN, f"{type(e).__name__}: {e}",
                           time.perf_counter() - start)
        seconds = time.perf_counter() - start
        if seconds >= self.timeout:
            return _failed(inp, MeasureErrorNo.BUILD_TIMEOUT,
                           f"lowering alone took {seconds:.2f}s, longer than the build "
                           f"timeout={self.timeout}s", seconds)
        return _Lowered(source, decl, args, seconds, sizes, pack_specs(func), tuple(names))

    def _compile(self, source: str, target: Target,
                 timeout: float) -> tuple[str | None, MeasureErrorNo, str, float]:
        """(library path or None, error, message, seconds) for one distinct source."""
        start = time.perf_counter()
        try:
            path = compile_shared(source, target, timeout=timeout, cache_dir=self.cache_dir)
            return str(path), MeasureErrorNo.NO_ERROR, "", time.perf_counter() - start
        except CompileTimeoutError as e:
            error_no, msg = MeasureErrorNo.BUILD_TIMEOUT, str(e).splitlines()[0]
        except CompileError as e:
            lines = e.stderr.rstrip().splitlines()
            more = f"\n... ({len(lines) - _STDERR_LINES} more lines)" \
                if len(lines) > _STDERR_LINES else ""
            error_no = MeasureErrorNo.COMPILE_ERROR
            msg = f"C compiler failed on {e.source_path}:\n" \
                  + "\n".join(lines[:_STDERR_LINES]) + more
        except FileNotFoundError as e:
            error_no = MeasureErrorNo.COMPILE_ERROR
            msg = f"the C compiler {target.compiler!r} is missing ({e}): install it or " \
                  f"pass LocalBuilder(target=Target.host(compiler=...))"
        except Exception as e:  # noqa: BLE001 -- never let one source stop the batch
            error_no, msg = MeasureErrorNo.UNKNOWN, f"{type(e).__name__}: {e}"
        return None, error_no, msg, time.perf_counter() - start


def _check_input(inp: Any, i: int) -> MeasureInput:
    if not isinstance(inp, MeasureInput):
        raise TypeError(f"LocalBuilder.build(inputs=...): item {i} is a "
                        f"{type(inp).__name__}, expected a MeasureInput")
    return inp


def _failed(inp: MeasureInput, error_no: MeasureErrorNo, msg: str,
            seconds: float) -> BuildResult:
    try:
        args = arg_specs(inp.workload)
    except Exception:  # noqa: BLE001 -- a broken workload still gets its error result
        args = ()
    return BuildResult(None, "", KERNEL, "", args, error_no, msg, seconds)
