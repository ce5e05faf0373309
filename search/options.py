"""``TuningOptions``: every knob of a tuning run in one frozen, validated value.

The defaults are Ansor's (population 2048, 4 generations, mutation probability 0.85,
eps-greedy 0.05, 64 measurements per round). Tests and quick runs shrink the population.

At the end of a tuning the ``retime_best`` best distinct candidates are re-timed
``retime_rounds`` times, interleaved, through the same runner and protocol, and the one
best on re-timing is the best (``search.records.best``: why and how); 0 turns it off.
A job holding fewer than ``retime_min_trials`` records is not re-timed: among few
timings the luck of the fastest is small, and the re-timing would be a large share of
the tuning. ``cutoff_ratio`` is the protocol's (``MeasureConfig``): a candidate whose
first timing is that many times slower than the best gets no more repeats.
"""
from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

from tvmlite.checks import check_int, check_number
from tvmlite.search.measure.base_runner import Runner
from tvmlite.search.measure.builder import LocalBuilder
from tvmlite.search.measure.measurer import Measurer
from tvmlite.search.measure.protocol import MeasureConfig, check_fields
from tvmlite.search.measure.qemu_runner import QemuRunner
from tvmlite.search.measure.runner import LocalRunner
from tvmlite.target.target import Target

RUNNERS = ("local", "qemu")


@dataclass(frozen=True)
class TuningOptions:
    measures_per_round: int = 64
    population: int = 2048
    generations: int = 4
    mutation_prob: float = 0.85
    eps_greedy: float = 0.05
    seeds_from_best: int = 16          # measured bests put into each round's population
    seed: int = 0
    early_stopping: int | None = None  # stop after this many trials without improvement
    # builder
    n_parallel: int | None = None      # compile jobs (default: one per core)
    build_timeout: float = 30.0
    # runner
    number: int = 1
    repeat: int = 3
    min_repeat_ms: float = 50.0
    run_timeout: float = 10.0
    flush_cache: bool = False
    # time each candidate as a model's run calls it, its weights cold (MeasureConfig)
    cold_weights: bool = False
    check_correctness: bool = True
    n_threads: int | None = None       # OpenMP threads of measured kernels (default: all)
    # where candidates run, chosen apart from the target: "local" (this machine), "qemu"
    # (the C harness under qemu user mode: correct, emulated timings), or a Runner (e.g.
    # search.DaskRunner), used as is (its own measuring arguments apply); None is "local"
    runner: str | Runner | None = "local"
    # start the cost model from the shipped pretrained one (search/model/pretrained.py);
    # False: cold, random scores until MIN_TRAINING_PROGRAMS programs ran
    pretrained: bool = True
    # the end of a tuning: re-time this many best candidates (0: off), this many rounds
    # each, interleaved, when the job holds at least retime_min_trials records
    retime_best: int = 3
    retime_rounds: int = 3
    retime_min_trials: int = 32
    # the protocol's: one timing only for a candidate this many times slower than the best
    cutoff_ratio: float = 2.0

    def __post_init__(self) -> None:
        # the measuring fields are the protocol's: checked by its one rule
        measuring = {f.name: getattr(self, f.name) for f in fields(MeasureConfig)
                     if f.name != "timeout"}
        check_fields({**measuring, "timeout": self.run_timeout}, "TuningOptions",
                     spelled={"timeout": "run_timeout"})
        positive_ints = ("measures_per_round", "population", "retime_rounds")
        nonneg_ints = ("generations", "seeds_from_best", "retime_best", "retime_min_trials")
        for f in fields(self):
            v = getattr(self, f.name)
            if f.name in positive_ints + nonneg_ints:
                lo = 1 if f.name in positive_ints else 0
                check_int(v, f"TuningOptions.{f.name}", lo)
            elif f.name in ("mutation_prob", "eps_greedy"):
                check_number(v, f"TuningOptions.{f.name}", 0, 1)
            elif f.name == "build_timeout":
                check_number(v, f"TuningOptions.{f.name} (seconds)", 0, lo_open=True)
            elif f.name in ("early_stopping", "n_parallel"):
                check_int(v, f"TuningOptions.{f.name}", 1, allow_none=True)
            elif f.name == "runner" and v is not None and not isinstance(v, Runner) \
                    and v not in RUNNERS:
                raise ValueError(f"TuningOptions.runner must be one of {', '.join(RUNNERS)} or "
                                 f"a Runner (LocalRunner, DaskRunner, ...), got {v!r}")
            elif f.name == "pretrained" and not isinstance(v, bool):
                raise ValueError(f"TuningOptions.{f.name} must be True or False, got {v!r}")

    def measurer(self, log_file: Any, target: Target, tuner: str) -> Measurer:
        """The Measurer these options describe (builder + runner + log). The runner is
        checked against ``target`` here, before any tuning starts."""
        builder = LocalBuilder(target, n_parallel=self.n_parallel, timeout=self.build_timeout)
        return Measurer(log_file, builder, self.make_runner(), target, tuner=tuner,
                        seed=self.seed)

    def make_runner(self) -> Any:
        """The runner ``self.runner`` is or names, with these options' timing settings (the
        emulated one times one call once: its figures say nothing of speed)."""
        if isinstance(self.runner, Runner):
            return self.runner
        if self.runner == "qemu":
            return QemuRunner(config=MeasureConfig(
                number=1, repeat=1, timeout=max(self.run_timeout, 30.0),
                check_correctness=self.check_correctness, n_threads=self.n_threads,
                seed=self.seed))
        return LocalRunner(config=self.measure_config())

    def measure_config(self) -> MeasureConfig:
        """The measuring protocol these options describe: what ``make_runner`` gives the
        local runner (the emulated one times one call once)."""
        return MeasureConfig(number=self.number, repeat=self.repeat,
                             min_repeat_ms=self.min_repeat_ms, timeout=self.run_timeout,
                             flush_cache=self.flush_cache, cold_weights=self.cold_weights,
                             check_correctness=self.check_correctness,
                             n_threads=self.n_threads, seed=self.seed,
                             cutoff_ratio=self.cutoff_ratio)
