"""The emulated runner: measure candidates for another CPU under ``qemu-<arch>`` user mode.

A candidate built for AArch64 (by the target's cross compiler) cannot run here, but
qemu's user-mode emulation runs it as an ordinary process against the cross sysroot
(``qemu-aarch64 -L /usr/aarch64-linux-gnu``). Each candidate runs in the C measuring
harness (codegen_c/harness.c), compiled for the target like the kernel, so nothing of
Python, cffi or numpy runs inside the emulator: exactly what runs on a board.

Emulated runs are real for correctness and meaningless for speed: ``emulated = True``, so
the Measurer marks their records emulated, they never count as a best against real
timings, and the tuning summary says its figures are emulated. Since no timing means
anything, candidates run ``n_parallel`` at a time and are yielded as they finish.

The correctness reference is the unscheduled build of the same compute, *built for the
same target and run by the same harness under the same emulator* on the same seeded
inputs -- not computed on the host. The target's own numerics (its libm's expf/tanhf,
NEON's rounding) are then on both sides of the comparison (the reference is compiled
without FMA contraction, see reference.py; a candidate's contractions are within the
tolerance), so a tolerance never has to absorb the difference between two machines'
math libraries, and the check needs nothing of the host but the emulator: the same
harness and reference check run unchanged on a board or on a remote runner.

A pre-packed candidate (``BuildResult.packs``) runs as the local worker runs it: the
harness calls each pack function once on the seeded original input, then checks and times
the kernel on the packed buffer, so its costs exclude the packing and the check covers
pack + kernel against the same unscheduled reference.
"""
from __future__ import annotations

import os
import shutil
import tempfile
import threading
from concurrent.futures import ThreadPoolExecutor, as_completed
from typing import TYPE_CHECKING, Any, Callable, Iterator, Sequence

from tvmlite.checks import check_int
from tvmlite.codegen_c import CompileError
from tvmlite.codegen_c.harness import (
    EmulatorNotFoundError,
    HarnessError,
    build_harness,
    emulator_prefix,
    pack_slots,
    read_outputs,
    run_harness,
)
from tvmlite.search.measure.base_runner import KernelRunner, RunnerError, Stopwatch
from tvmlite.search.measure.builder import BuildResult
from tvmlite.search.measure.inputs import MeasureErrorNo, MeasureInput, MeasureResult
from tvmlite.search.measure.protocol import (
    REFERENCE_TIMEOUT_MIN,
    MeasureConfig,
    Verdict,
    check_tolerances,
)
from tvmlite.target.named import CROSS_COMPILERS
from tvmlite.target.target import Target
from tvmlite.testing.check import mismatch

if TYPE_CHECKING:  # the records package imports this one
    from tvmlite.search.records.workload import Workload

# REFERENCE_TIMEOUT_MIN stays importable from here (defined in protocol.py)
__all__ = ["QemuRunner", "qemu_command", "REFERENCE_TIMEOUT_MIN"]


def qemu_command(arch: str, sysroot: str | None = None) -> list[str]:
    """``["qemu-aarch64", "-L", "/usr/aarch64-linux-gnu"]``: the command line prefix that
    runs a dynamically linked ``arch`` program here. RunnerError naming the Debian package
    when the emulator or the cross sysroot is missing."""
    try:
        return emulator_prefix(arch, sysroot, native_ok=False)
    except EmulatorNotFoundError as e:
        raise RunnerError(f"the qemu runner cannot run {arch} code here: {e}") from None


class QemuRunner(KernelRunner):
    """Runs candidates in the C harness under qemu user mode; see the module docstring.

    ``config`` (a ``MeasureConfig``) is the protocol, as LocalRunner's (default: one call,
    one repeat, a 60 s timeout: emulated times say nothing of speed, so ``flush_cache``
    is ignored); the old keyword arguments build it or replace its fields. ``timeout``
    bounds each candidate's emulated check and timing; ``n_parallel`` candidates run at
    once (default: this machine's CPUs); ``sysroot`` overrides ``/usr/<triplet>``."""

    emulated = True
    DEFAULTS = MeasureConfig(number=1, repeat=1, timeout=60.0)

    def __init__(self, number: int | None = None, repeat: int | None = None,
                 min_repeat_ms: float | None = None, timeout: float | None = None,
                 check_correctness: bool | None = None, n_threads: int | None = None,
                 seed: int | None = None, n_parallel: int | None = None,
                 sysroot: str | None = None, *, config: MeasureConfig | None = None):
        given = {"number": number, "repeat": repeat, "min_repeat_ms": min_repeat_ms,
                 "timeout": timeout, "check_correctness": check_correctness,
                 "n_threads": n_threads, "seed": seed}
        super().__init__(config, {k: v for k, v in given.items() if v is not None})
        check_int(n_parallel, "QemuRunner(n_parallel=...) (None: one per CPU)", 1,
                  allow_none=True)
        self.sysroot = sysroot
        self.n_parallel = n_parallel or max(1, len(os.sched_getaffinity(0))
                                            if hasattr(os, "sched_getaffinity") else 1)
        self.name = "qemu"
        self._target: Target | None = None
        self._prefix: list[str] = []
        self._tmp: tempfile.TemporaryDirectory | None = None
        self._harnesses: dict[tuple, str] = {}
        self._lock = threading.Lock()

    # -- the seam ----------------------------------------------------------------------
    def check_target(self, target: Target) -> None:
        """qemu runs any architecture it has an emulator for; the emulator, the sysroot
        and the target's compiler (which builds the harness) must be here."""
        if target.arch not in CROSS_COMPILERS:
            raise RunnerError(f"the qemu runner cannot run target {target.arch}: it knows "
                              f"{', '.join(CROSS_COMPILERS)}")
        if target.arch == "x86_64" and any(f.startswith("avx512") for f in target.features):
            raise RunnerError(f"the qemu runner cannot run target {target.name or target.arch}"
                              f": qemu's x86 emulation has no AVX-512. Use --runner local on "
                              f"an AVX-512 machine, or --target x86_64-avx2")
        self._prefix = qemu_command(target.arch, self.sysroot)
        self._target = target
        self.name = f"qemu-{target.arch}"
        self.references.where = f"under {self._prefix[0]}"

    def iter_run(self, inputs: Sequence[MeasureInput], builds: Sequence[BuildResult],
                 reference: Callable[[Any], BuildResult] | None = None
                 ) -> Iterator[tuple[int, MeasureResult]]:
        """Every reference first (once per workload), then the candidates ``n_parallel``
        at a time, each yielded as it finishes."""
        self._checked_target()
        inputs, builds = self.checked_batch(inputs, builds, reference)
        if self.check_correctness:
            for inp, b in zip(inputs, builds):
                if b.ok:
                    try:
                        self.references.get(
                            inp.workload, reference)  # type: ignore[arg-type]  # checked_batch: not None
                    except Verdict:
                        pass     # each candidate of the workload gets the message
        with ThreadPoolExecutor(self.n_parallel) as pool:
            futures = {pool.submit(self.measure_candidate, inp, b, reference): i
                       for i, (inp, b) in enumerate(zip(inputs, builds))}
            for fut in as_completed(futures):
                yield futures[fut], fut.result()

    def close(self) -> None:
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None
        super().close()

    # -- pieces ------------------------------------------------------------------------
    def _dir(self) -> str:
        with self._lock:
            if self._tmp is None:
                self._tmp = tempfile.TemporaryDirectory(prefix="tvmlite-qemu-")
            return tempfile.mkdtemp(dir=self._tmp.name)

    def _checked_target(self) -> Target:
        """The target ``check_target`` set; RunnerError before it ran."""
        if self._target is None:
            raise RunnerError("QemuRunner.run: call check_target(target) first: the runner "
                              "builds its harness for the target the candidates were built for")
        return self._target

    def _harness(self, build: BuildResult) -> str:
        packs = tuple(build.packs)
        sig = (tuple((a.dtype, a.is_output) for a in build.args),
               tuple((s.arg, s.dtype) for s in pack_slots(build.args, packs)),
               len(build.sizes))
        with self._lock:
            hit = self._harnesses.get(sig)
        if hit is None:
            hit = str(build_harness(build.args, self._checked_target(), packs=packs,
                                    nsizes=len(build.sizes)))
            with self._lock:
                self._harnesses[sig] = hit
        return hit

    def _harness_run(self, build: BuildResult, outputs_dir: str | None, repeat: int,
                     timeout: float) -> Any:
        return run_harness(self._harness(build), build.library, build.kernel, build.args,
                           prefix=self._prefix, seed=self.seed, outputs_dir=outputs_dir,
                           number=self.number, repeat=repeat,
                           min_repeat_ms=self.min_repeat_ms, threads=self.n_threads,
                           slow_seconds=self.config.slow_seconds, timeout=timeout,
                           packs=tuple(build.packs), sizes=tuple(build.sizes))

    def prepare_reference(self, workload: Workload, ref: BuildResult) -> tuple:
        """(expected outputs, tolerances), computed under the emulator; Verdict if the
        reference kernel fails there."""
        out = self._dir()
        try:
            self._harness_run(ref, out, 0, self.config.reference_timeout)
            expected = read_outputs(out, ref.args)
        except (HarnessError, CompileError, OSError, ValueError) as e:
            raise Verdict(MeasureErrorNo.UNKNOWN, str(e)) from None
        return expected, check_tolerances(workload, ref)

    def run_kernel(self, inp: MeasureInput, build: BuildResult, prepared: tuple | None,
                   clock: Stopwatch) -> tuple[float, ...]:
        """Check against ``prepared`` and time one candidate in the harness."""
        try:
            out = self._dir()
            res = self._harness_run(build, out if prepared else None, self.repeat,
                                    self.timeout)
            if prepared:
                got = read_outputs(out, build.args)
                names = [a.name for a in build.args if a.is_output]
                for name, g, w, (rtol, atol) in zip(names, got, *prepared):
                    bad = mismatch(name, g, w, rtol, atol)
                    if bad:
                        raise Verdict(MeasureErrorNo.WRONG_ANSWER, bad)
                shutil.rmtree(out, ignore_errors=True)
        except HarnessError as e:
            error_no = {"timeout": MeasureErrorNo.RUN_TIMEOUT,
                        "crash": MeasureErrorNo.RUNTIME_CRASH}.get(e.kind,
                                                                    MeasureErrorNo.RUNTIME_CRASH)
            raise Verdict(error_no, f"under {self._prefix[0]}: {e}") from None
        except (CompileError, OSError, ValueError) as e:
            raise Verdict(MeasureErrorNo.UNKNOWN, f"the harness could not run: {e}") from None
        return tuple(res.costs)
