"""The runner seam: *where* candidates are measured, apart from *what* they are compiled
for (the Target).

Every runner (this machine's ``LocalRunner``, an emulated one for another architecture,
one spread over a Dask cluster) takes candidates that a builder has already compiled and
answers with one ``MeasureResult`` each. ``iter_run`` yields them as they finish, in any
order, so the ``Measurer`` can append each record to the log the moment it exists and a
runner with several machines can time several candidates at once. ``check_target`` is
asked before any tuning starts, so a runner that cannot execute the target's code is
refused up front instead of failing every candidate.

How a candidate is measured -- the protocol -- is one ``MeasureConfig`` (protocol.py),
the runner's ``config``, whichever runner it is. ``KernelRunner`` is the shared part of a
runner that runs built kernels itself, one candidate at a time or several: a failed build
keeps its error, the workload's reference is prepared once (``ReferenceCache``), a
failure is a ``Verdict`` that becomes the candidate's error record. A new runner of that
kind says only how to run a built kernel there; see its docstring.
"""
from __future__ import annotations

import abc
import time
from typing import TYPE_CHECKING, Any, Callable, ClassVar, Iterable, Iterator, Mapping, Sequence

from tvmlite.errors import TvmliteError
from tvmlite.search.measure.builder import BuildResult
from tvmlite.search.measure.inputs import MeasureInput, MeasureResult
from tvmlite.search.measure.protocol import MeasureConfig, ReferenceCache, Verdict
from tvmlite.target.target import Target

if TYPE_CHECKING:  # the records package imports this one
    from tvmlite.search.records.workload import Workload

__all__ = ["Runner", "RunnerError", "KernelRunner", "Stopwatch"]


class RunnerError(TvmliteError, ValueError):
    """This runner cannot measure what it was given (wrong target, unreachable cluster)."""


class Runner(abc.ABC):
    """Measures built candidates. Subclasses set ``name`` (stored in records, e.g.
    ``"local"``, ``"qemu-aarch64"``, ``"dask://host:8786"``), ``emulated`` (True when
    timings say nothing about speed: such records never count as a best) and
    ``times_elsewhere``."""

    name: str = "local"
    emulated: bool = False
    # True when candidates are timed on cores other than this process's (a cluster's
    # workers): the Measurer then compiles while they time and streams the candidates
    # (``iter_stream``). False (here): compiling would disturb the timing, so the two
    # take turns, a chunk at a time.
    times_elsewhere: bool = False
    # the protocol when the constructor is given neither a config nor measuring arguments
    DEFAULTS: ClassVar[MeasureConfig] = MeasureConfig()
    config: MeasureConfig

    def configure(self, config: MeasureConfig | None, measuring: Mapping[str, Any]) -> None:
        """Set ``config``: ``config`` (else ``DEFAULTS``) with the old keyword arguments
        in ``measuring`` replacing its fields, validated, errors naming this class."""
        self.config = MeasureConfig.of(type(self).__name__, config, self.DEFAULTS, measuring)

    # the protocol's fields, read as the runner's attributes (as before the config)
    number = property(lambda self: self.config.number)
    repeat = property(lambda self: self.config.repeat)
    min_repeat_ms = property(lambda self: self.config.min_repeat_ms)
    timeout = property(lambda self: self.config.timeout)
    flush_cache = property(lambda self: self.config.flush_cache)
    cold_weights = property(lambda self: self.config.cold_weights)
    check_correctness = property(lambda self: self.config.check_correctness)
    n_threads = property(lambda self: self.config.n_threads)
    seed = property(lambda self: self.config.seed)

    @abc.abstractmethod
    def check_target(self, target: Target) -> None:
        """Raise RunnerError, naming the target and what would run it, if this runner
        cannot execute code compiled for ``target``."""

    @abc.abstractmethod
    def iter_run(self, inputs: Sequence[MeasureInput], builds: Sequence[BuildResult],
                 reference: Callable[[Any], BuildResult] | None = None
                 ) -> Iterator[tuple[int, MeasureResult]]:
        """Yield ``(index into inputs, result)`` as each candidate finishes, every index
        exactly once, in any order. Failed builds keep their error; the rest are checked
        against ``reference(workload)`` when the runner checks correctness, then timed."""

    def checked_batch(self, inputs: Sequence[MeasureInput], builds: Sequence[BuildResult],
                      reference: Callable[[Any], BuildResult] | None
                      ) -> tuple[list[MeasureInput], list[BuildResult]]:
        """The batch as lists, after the checks every runner makes: one build per input,
        and a reference when the runner checks correctness."""
        kind = type(self).__name__
        inputs, builds = list(inputs), list(builds)
        if len(inputs) != len(builds):
            raise ValueError(f"{kind}.run: got {len(inputs)} inputs but {len(builds)} "
                             f"builds; pass the list LocalBuilder.build(inputs) returned")
        if getattr(self, "check_correctness", False) and reference is None:
            raise ValueError(f"{kind}.run(reference=...) is needed to check correctness: "
                             f"pass builder.build_reference, or {kind}(check_correctness="
                             f"False)")
        return inputs, builds

    def iter_stream(self, pairs: Iterable[tuple[MeasureInput, BuildResult]],
                    reference: Callable[[Any], BuildResult] | None = None
                    ) -> Iterator[tuple[int, MeasureResult]]:
        """Yield ``(position in pairs, result)`` for candidates that arrive one by one
        while others are measured (the Measurer compiles them meanwhile), every position
        exactly once. This default measures each as it arrives; a runner with several
        machines overrides it to keep them all busy, with no pause between chunks."""
        for j, (inp, build) in enumerate(pairs):
            for _, res in self.iter_run([inp], [build], reference):
                yield j, res

    def run(self, inputs: Sequence[MeasureInput], builds: Sequence[BuildResult],
            reference: Callable[[Any], BuildResult] | None = None) -> list[MeasureResult]:
        """One MeasureResult per input, in input order."""
        results: list[MeasureResult | None] = [None] * len(inputs)
        for i, res in self.iter_run(inputs, builds, reference):
            results[i] = res
        return results  # type: ignore[return-value]

    def note_cost(self, workload_key: str, cost: float) -> None:
        """Learn that a candidate of the workload ``workload_key`` ran in ``cost`` seconds
        per call (a logged record's mean), for the protocol's ``cutoff_ratio``. A runner
        that does not cut (this one) ignores it."""

    def close(self) -> None:
        """Release workers, processes and temporary files."""

    def __enter__(self) -> "Runner":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


class Stopwatch:
    """A candidate's run time; ``restart`` leaves out what was not its own (waiting for
    the cores, computing the workload's reference)."""

    def __init__(self) -> None:
        self.start = time.monotonic()

    def restart(self) -> None:
        self.start = time.monotonic()

    @property
    def seconds(self) -> float:
        return time.monotonic() - self.start


class KernelRunner(Runner):
    """The shared part of a runner that runs built kernels itself (this machine's
    isolated worker, an emulator).

    A subclass calls ``super().__init__(config, measuring)`` and implements:

    - ``check_target(target)``: RunnerError if it cannot run the target's code;
    - ``prepare_reference(workload, ref)``: from the workload's reference build, what
      ``run_kernel`` needs to check a candidate (the expected outputs, or what its
      measuring process needs to compute and keep them); raise Verdict if the reference
      kernel fails (the workload's candidates then become UNKNOWN, with one message);
    - ``run_kernel(inp, build, prepared, clock)``: check the built candidate against
      ``prepared`` (None when ``config.check_correctness`` is off) and time it as
      ``config`` says; return the costs, or raise Verdict with its error. ``clock``
      measures the candidate's run time (``clock.restart()`` to leave time out).

    Candidates run one at a time, in order (``iter_run``); a runner that may run several
    at once (timings that mean nothing) overrides ``iter_run`` around
    ``measure_candidate``.
    """

    def __init__(self, config: MeasureConfig | None, measuring: Mapping[str, Any],
                 where: str = "") -> None:
        self.configure(config, measuring)
        self.references: ReferenceCache[Any] = ReferenceCache(self.prepare_reference, where)
        self.best_costs: dict[str, float] = {}   # workload key -> best mean cost known

    def note_cost(self, workload_key: str, cost: float) -> None:
        if cost > 0 and cost < self.best_costs.get(workload_key, float("inf")):
            self.best_costs[workload_key] = cost

    def cutoff(self, inp: MeasureInput) -> float:
        """Seconds per call above which ``inp``'s first timing is its only one (the
        protocol's ``cutoff_ratio`` times the best known for its workload; 0: none)."""
        return self.config.cutoff(self.best_costs.get(inp.workload.key))

    @abc.abstractmethod
    def prepare_reference(self, workload: Workload, ref: BuildResult) -> Any:
        """What ``run_kernel`` checks a candidate of ``workload`` against."""

    @abc.abstractmethod
    def run_kernel(self, inp: MeasureInput, build: BuildResult, prepared: Any,
                   clock: Stopwatch) -> tuple[float, ...]:
        """One candidate's costs (seconds per call, one per repeat), or Verdict."""

    def iter_run(self, inputs: Sequence[MeasureInput], builds: Sequence[BuildResult],
                 reference: Callable[[Any], BuildResult] | None = None
                 ) -> Iterator[tuple[int, MeasureResult]]:
        """Candidates one by one, in order. Failed builds keep their error; the rest are
        checked against ``reference(workload)`` (if check_correctness) and timed."""
        inputs, builds = self.checked_batch(inputs, builds, reference)
        for i, (inp, b) in enumerate(zip(inputs, builds)):
            yield i, self.measure_candidate(inp, b, reference)

    def measure_candidate(self, inp: MeasureInput, build: BuildResult,
                          reference: Callable[[Any], BuildResult] | None) -> MeasureResult:
        """The result of one candidate: its build error, its Verdict, or its costs."""
        if not build.ok:
            return MeasureResult(error_no=build.error_no, error_msg=build.error_msg,
                                 build_seconds=build.seconds)
        clock = Stopwatch()
        try:
            prepared = self.references.get(
                inp.workload, reference) if self.check_correctness else None  # type: ignore[arg-type]  # checked_batch: not None
            clock.restart()        # the reference build is not this candidate's time
            result = MeasureResult(costs=tuple(self.run_kernel(inp, build, prepared, clock)))
        except Verdict as v:
            result = MeasureResult(error_no=v.error_no, error_msg=str(v))
        if result.ok:
            self.note_cost(inp.workload.key, result.mean_cost)
        return MeasureResult(result.costs, result.error_no, result.error_msg,
                             build_seconds=build.seconds, run_seconds=clock.seconds)

    def close(self) -> None:
        """Forget the references (a subclass also releases its processes and files)."""
        self.references.clear()
