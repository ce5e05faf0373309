"""``autotvm.measure_option`` and the builder and runner it takes, mapped to ours.

AutoTVM configures measurement with ``measure_option(builder=LocalBuilder(...),
runner=LocalRunner(number=..., repeat=..., min_repeat_ms=..., timeout=...))``. Here
``LocalBuilder`` and ``LocalRunner`` are the search's own (``tvmlite.search.measure``),
and ``measure_option`` returns the ``TuningOptions`` a tuner's ``tune(options=...)``
takes: the builder's timeout and parallelism, and the runner itself (it times with its
own settings)."""
from __future__ import annotations

from dataclasses import replace

from tvmlite.search.measure.base_runner import Runner
from tvmlite.search.measure.builder import LocalBuilder
from tvmlite.search.measure.runner import LocalRunner
from tvmlite.search.options import TuningOptions

__all__ = ["measure_option", "LocalBuilder", "LocalRunner"]


def measure_option(builder: LocalBuilder | None = None,
                   runner: Runner | str | None = None,
                   options: TuningOptions | None = None) -> TuningOptions:
    """``options`` (default ``TuningOptions()``) measuring with ``builder``'s timeout and
    parallelism and with ``runner`` (a Runner, or a runner name: "local", "qemu")."""
    out = TuningOptions() if options is None else options
    if not isinstance(out, TuningOptions):
        raise TypeError(f"measure_option(options=...) must be a search.TuningOptions, got "
                        f"{type(out).__name__}")
    if builder is not None:
        if not isinstance(builder, LocalBuilder):
            raise TypeError(f"measure_option(builder=...) must be an autotvm.LocalBuilder, "
                            f"got {type(builder).__name__}")
        out = replace(out, build_timeout=builder.timeout, n_parallel=builder.n_parallel)
    if runner is not None:
        if not isinstance(runner, (Runner, str)):
            raise TypeError(f"measure_option(runner=...) must be an autotvm.LocalRunner (or "
                            f"another Runner, or 'local'/'qemu'), got {type(runner).__name__}")
        out = replace(out, runner=runner)
    return out
