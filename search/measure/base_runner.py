"""The runner seam: *where* candidates are measured, apart from *what* they are compiled
for (the Target).

Every runner (this machine's ``LocalRunner``, an emulated one for another architecture,
one spread over a Dask cluster) takes candidates that a builder has already compiled and
answers with one ``MeasureResult`` each. ``iter_run`` yields them as they finish, in any
order, so the ``Measurer`` can append each record to the log the moment it exists and a
runner with several machines can time several candidates at once. ``check_target`` is
asked before any tuning starts, so a runner that cannot execute the target's code is
refused up front instead of failing every candidate.
"""
from __future__ import annotations

import abc
from typing import Any, Callable, Iterable, Iterator, Sequence

from tvmlite.search.measure.builder import BuildResult
from tvmlite.search.measure.inputs import MeasureInput, MeasureResult
from tvmlite.errors import TvmliteError

__all__ = ["Runner", "RunnerError"]


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

    @abc.abstractmethod
    def check_target(self, target: Any) -> None:
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

    def close(self) -> None:
        """Release workers, processes and temporary files."""

    def __enter__(self) -> "Runner":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
