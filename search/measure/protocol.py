"""The measuring protocol: what one measurement of a candidate is, for every runner.

``MeasureConfig`` holds the settings (TVM's ``EvaluatorConfig`` is the model), validated
once, when it is made; every runner (``LocalRunner``, ``QemuRunner``, ``DaskRunner``) takes
one as ``config=`` and builds one from its old keyword arguments. The pieces every runner
shares sit beside it: the per-workload reference cache (``ReferenceCache``), the verdict a
failed candidate becomes (``Verdict``) and the tolerances of the check
(``check_tolerances``). The comparison itself is ``tvmlite.testing.check.mismatch``, the
one the tests use.

Map: MeasureConfig (the protocol, in its docstring) · Verdict · ReferenceCache ·
check_tolerances.
"""
from __future__ import annotations

import dataclasses
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Generic, Mapping, TypeVar

from tvmlite.checks import check_int, check_number
from tvmlite.errors import TvmliteError
from tvmlite.search.measure.builder import BuildResult
from tvmlite.search.measure.inputs import MeasureErrorNo
from tvmlite.testing.check import reduction_length, tolerance

if TYPE_CHECKING:  # the records package imports this one
    from tvmlite.search.records.workload import Workload

__all__ = ["MeasureConfig", "Verdict", "ReferenceCache", "check_tolerances", "check_fields",
           "REFERENCE_TIMEOUT_FACTOR", "REFERENCE_TIMEOUT_MIN", "SLOW_FRACTION"]

REFERENCE_TIMEOUT_FACTOR = 10    # the reference may run this many candidate timeouts
REFERENCE_TIMEOUT_MIN = 300.0    # seconds, at least
SLOW_FRACTION = 4                # a first call longer than timeout / 4 is timed once only

T = TypeVar("T")


@dataclass(frozen=True)
class MeasureConfig:
    """How a candidate is measured, by whichever runner measures it.

    - **One timing** is ``number`` back-to-back calls of the kernel on the same seeded
      inputs, timed in C around the whole loop; its cost is the elapsed time divided by
      ``number`` (seconds per call). A candidate's result has ``repeat`` such costs.
    - **min_repeat_ms** (> 0) raises ``number`` (doubling, or straight to the estimate)
      until one timing lasts at least that many milliseconds; the probe that first lasts
      long enough counts as the first repeat. 0 keeps ``number`` as given.
    - **flush_cache** writes through a buffer of twice the last-level cache before each
      timing, so each starts cold (a runner whose timings mean nothing, an emulated one,
      ignores it).
    - **cold_weights** times a candidate as a model's run calls it: before each timing
      the caches are flushed as above and the kernel's other arrays (activations and
      outputs, which the kernels before it just wrote) are read back, so only the inputs
      its search declared constant (a model's weights: the decisions' ``constants``)
      come from memory; each timing is one call (``number`` and ``min_repeat_ms`` do not
      apply: a second call would find the weights in cache; an emulated runner ignores
      it). Timed hot, ResNet-50's 14 x 14 3x3 convs, each streaming 2.4 MB of weights,
      ran 0.97 ms where the model's run gave them 1.15 (Zen 4): hot timings favour
      schedules for data that a model's kernel never finds in cache.
    - **timeout** (seconds) bounds one candidate's whole visit to the kernel: loading,
      the check call and every timing; past it the candidate is RUN_TIMEOUT and whatever
      ran it is killed. A candidate whose check call alone takes longer than
      ``slow_seconds`` (``timeout / SLOW_FRACTION``) is timed by that one call. The
      workload's reference runs once and may take ``reference_timeout``.
    - **check_correctness**: before timing, the candidate runs once on inputs seeded by
      ``seed`` (floats uniform in [-1, 1), integers in [-8, 8)) into outputs prefilled
      with NaN (integers: a sentinel); every output is compared with the reference's
      outputs on the same inputs (``tvmlite.testing.check.mismatch``) within
      ``tolerance(dtype, reduction length)`` -- integers exactly, NaN matches only NaN,
      an infinity only the same infinity. A mismatch is WRONG_ANSWER; a workload whose
      reference fails makes its candidates UNKNOWN.
    - **n_threads**: the kernel's OpenMP threads (None: OpenMP's default, or one per
      core the runner pins the measuring process to).
    - **cutoff_ratio** (0, or at least 1): a candidate whose first timing is more than
      ``cutoff_ratio`` times the best mean cost the runner knows for its workload (its
      own results, and the log's, told by the Measurer: ``Runner.note_cost``) gets no
      more timings: its result has that one cost. More repeats would only say more
      precisely how slow it is, which neither the best record nor the cost model (it
      learns throughputs normalized by the best) needs. 0 times every candidate
      ``repeat`` times. A runner whose timings mean nothing (emulated) ignores it.
    """

    number: int = 3
    repeat: int = 3
    min_repeat_ms: float = 0.0
    timeout: float = 10.0
    flush_cache: bool = False
    cold_weights: bool = False
    check_correctness: bool = True
    n_threads: int | None = None
    seed: int = 0
    cutoff_ratio: float = 2.0

    def __post_init__(self) -> None:
        check_fields({f.name: getattr(self, f.name) for f in dataclasses.fields(self)},
                     "MeasureConfig")
        object.__setattr__(self, "min_repeat_ms", float(self.min_repeat_ms))
        object.__setattr__(self, "timeout", float(self.timeout))
        object.__setattr__(self, "cutoff_ratio", float(self.cutoff_ratio))

    def cutoff(self, best_cost: float | None) -> float:
        """Seconds per call above which a first timing ends a candidate's timing, given
        the best mean cost known for its workload (None: none yet); 0 for no cutoff."""
        if not self.cutoff_ratio or best_cost is None:
            return 0.0
        return self.cutoff_ratio * best_cost

    @classmethod
    def of(cls, owner: str, config: "MeasureConfig | None", defaults: "MeasureConfig",
           measuring: Mapping[str, Any]) -> "MeasureConfig":
        """The config a runner's constructor was given: ``config`` (else ``defaults``)
        with the keyword arguments in ``measuring`` (the old spelling) replacing its
        fields. Errors name the argument as ``owner`` was called, e.g.
        ``LocalRunner(number=...)``."""
        if config is not None and not isinstance(config, MeasureConfig):
            raise TypeError(f"{owner}(config=...) must be a search.MeasureConfig, got "
                            f"{type(config).__name__}")
        base = defaults if config is None else config
        unknown = sorted(set(measuring) - {f.name for f in dataclasses.fields(cls)})
        if unknown:
            raise TypeError(f"{owner}() got unknown measuring argument(s) "
                            f"{', '.join(unknown)}; MeasureConfig has "
                            f"{', '.join(f.name for f in dataclasses.fields(cls))}")
        if not measuring:
            return base
        check_fields({**base.to_json(), **measuring}, owner)
        return dataclasses.replace(base, **measuring)

    @property
    def slow_seconds(self) -> float:
        """A check call longer than this is the candidate's only timing."""
        return self.timeout / SLOW_FRACTION

    @property
    def reference_timeout(self) -> float:
        """What the workload's reference (run once, maybe unscheduled-slow) may take."""
        return max(REFERENCE_TIMEOUT_FACTOR * self.timeout, REFERENCE_TIMEOUT_MIN)

    def to_json(self) -> dict:
        return dataclasses.asdict(self)


def check_fields(values: Mapping[str, Any], owner: str,
                 spelled: Mapping[str, str] | None = None) -> None:
    """Raise ValueError naming ``owner(field=...)`` and what to use, for a bad value
    among a MeasureConfig's ``values``; ``spelled`` renames a field as the owner spells
    it (TuningOptions calls the timeout ``run_timeout``)."""
    def arg(name: str) -> str:
        return f"{owner}({(spelled or {}).get(name, name)}=...)"
    for name, low in (("number", 1), ("repeat", 1), ("seed", 0)):
        check_int(values[name], arg(name), low)
    check_int(values["n_threads"], f"{arg('n_threads')} (None: OpenMP's default, all "
                                   f"cores)", 1, allow_none=True)
    check_number(values["min_repeat_ms"], arg("min_repeat_ms"), 0)
    ratio = values.get("cutoff_ratio", 0.0)
    check_number(ratio, f"{arg('cutoff_ratio')} (0: time every candidate repeat times)", 0)
    if 0 < ratio < 1:
        raise ValueError(f"{arg('cutoff_ratio')} must be 0 (off) or at least 1 (a candidate "
                         f"that many times slower than the best gets one timing), got {ratio!r}")
    check_number(values["timeout"], f"{arg('timeout')} in seconds", 0, lo_open=True)
    for name in ("flush_cache", "cold_weights", "check_correctness"):
        if not isinstance(values[name], bool):
            raise ValueError(f"{arg(name)} must be True or False, got {values[name]!r}")


class Verdict(TvmliteError):
    """A candidate's error while it is measured: its MeasureErrorNo and message (a runner
    turns it into the candidate's error record)."""

    def __init__(self, error_no: MeasureErrorNo, msg: str):
        super().__init__(msg)
        self.error_no = error_no


class ReferenceCache(Generic[T]):
    """A runner's references: per workload key (a dynamic workload at sizes has one key
    per size) what the runner prepared from the reference build -- its outputs, or what
    its measuring process needs to compute them -- or why there is none. Thread-safe;
    each workload's reference is prepared once."""

    def __init__(self, prepare: Callable[[Any, BuildResult], T], where: str = "") -> None:
        self._prepare, self.where = prepare, where
        self._entries: dict[str, T | _Unavailable] = {}
        self._lock = threading.Lock()

    def get(self, workload: Workload, reference: Callable[[Any], BuildResult]) -> T:
        """The prepared reference of ``workload``; Verdict UNKNOWN when its reference
        build (``reference(workload)``) or preparing it failed, now or before."""
        with self._lock:
            entry = self._entries.get(workload.key)
            if entry is None:
                ref = reference(workload)
                if not isinstance(ref, BuildResult) or not ref.ok:
                    why = ref.error_msg if isinstance(ref, BuildResult) else f"got {ref!r}"
                    entry = _Unavailable(
                        f"the reference (unscheduled) build of workload {workload.key} "
                        f"failed, so no candidate of it can be checked: {why}")
                else:
                    try:
                        entry = self._prepare(workload, ref)
                    except Verdict as v:
                        entry = _Unavailable(self._failed(workload, str(v)))
                self._entries[workload.key] = entry
        if isinstance(entry, _Unavailable):
            raise Verdict(MeasureErrorNo.UNKNOWN, entry.msg)
        return entry

    def fail(self, workload: Workload, why: str) -> Verdict:
        """Mark ``workload`` uncheckable because its reference kernel failed (``why``);
        returns the Verdict its candidates get."""
        msg = self._failed(workload, why)
        with self._lock:
            self._entries[workload.key] = _Unavailable(msg)
        return Verdict(MeasureErrorNo.UNKNOWN, msg)

    def _failed(self, workload: Workload, why: str) -> str:
        where = f" {self.where}" if self.where else ""
        return (f"the reference (unscheduled) kernel of workload {workload.key} failed"
                f"{where}, so no candidate of it can be checked: {why}")

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()


@dataclass(frozen=True)
class _Unavailable:
    msg: str


def check_tolerances(workload: Workload, build: BuildResult) -> list[tuple[float, float]]:
    """(rtol, atol) for each output of ``build``, from its dtype and the workload's
    longest reduction (at its sizes, for a dynamic workload)."""
    tensors = workload.bound().tensors if getattr(workload, "sizes", None) \
        else workload.tensors
    length = reduction_length(tensors)
    return [tolerance(a.dtype, length) for a in build.args if a.is_output]
