"""``TuningOptions``: every knob of a tuning run in one frozen, validated value.

The defaults are Ansor's (population 2048, 4 generations, mutation probability 0.85,
eps-greedy 0.05, 64 measurements per round). Tests and quick runs shrink the population.
"""
from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

from tvmlite.search.measure.base_runner import Runner


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
    check_correctness: bool = True
    n_threads: int | None = None       # OpenMP threads of measured kernels (default: all)
    # where to measure: a Runner (e.g. search.DaskRunner), used as is (its own measuring
    # arguments apply); None: a LocalRunner from the fields above
    runner: Any = None

    def __post_init__(self) -> None:
        positive_ints = ("measures_per_round", "population", "number", "repeat")
        nonneg_ints = ("generations", "seeds_from_best", "seed")
        for f in fields(self):
            v = getattr(self, f.name)
            if f.name in positive_ints + nonneg_ints:
                lo = 1 if f.name in positive_ints else 0
                if isinstance(v, bool) or not isinstance(v, int) or v < lo:
                    raise ValueError(f"TuningOptions.{f.name} must be an int >= {lo}, got {v!r}")
            elif f.name in ("mutation_prob", "eps_greedy"):
                if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 <= v <= 1:
                    raise ValueError(f"TuningOptions.{f.name} must be in [0, 1], got {v!r}")
            elif f.name in ("build_timeout", "run_timeout"):
                if isinstance(v, bool) or not isinstance(v, (int, float)) or v <= 0:
                    raise ValueError(f"TuningOptions.{f.name} must be a positive number of "
                                     f"seconds, got {v!r}")
            elif f.name == "min_repeat_ms":
                if isinstance(v, bool) or not isinstance(v, (int, float)) or v < 0:
                    raise ValueError(f"TuningOptions.min_repeat_ms must be >= 0, got {v!r}")
            elif f.name in ("early_stopping", "n_parallel", "n_threads"):
                if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < 1):
                    raise ValueError(f"TuningOptions.{f.name} must be None or an int >= 1, "
                                     f"got {v!r}")
            elif f.name == "runner" and v is not None and not isinstance(v, Runner):
                raise ValueError(f"TuningOptions.runner must be None or a Runner (LocalRunner, "
                                 f"DaskRunner, ...), got {type(v).__name__}")
            elif f.name in ("flush_cache", "check_correctness") and not isinstance(v, bool):
                raise ValueError(f"TuningOptions.{f.name} must be True or False, got {v!r}")

    def measurer(self, log_file: Any, target: Any, tuner: str) -> Any:
        """The Measurer these options describe (builder + isolated runner + log)."""
        from tvmlite.search.measure.builder import LocalBuilder
        from tvmlite.search.measure.measurer import Measurer
        from tvmlite.search.measure.runner import LocalRunner
        builder = LocalBuilder(target, n_parallel=self.n_parallel, timeout=self.build_timeout)
        runner = self.runner or LocalRunner(
            number=self.number, repeat=self.repeat, min_repeat_ms=self.min_repeat_ms,
            timeout=self.run_timeout, flush_cache=self.flush_cache,
            check_correctness=self.check_correctness, n_threads=self.n_threads,
            seed=self.seed)
        return Measurer(log_file, builder, runner, target, tuner=tuner, seed=self.seed)
