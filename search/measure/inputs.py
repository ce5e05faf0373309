"""What one measurement is: its input (a workload and the Steps of a schedule) and its
result (times or a typed error). The vocabulary every other part of measuring speaks:
builders, runners, records and both searches import it, and it imports none of them.
"""
from __future__ import annotations

import enum
import hashlib
import json
import math
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Sequence

if TYPE_CHECKING:  # the records package imports this one
    from tvmlite.search.records.workload import Workload

__all__ = ["MeasureErrorNo", "MeasureInput", "MeasureResult", "state_key",
           "declared_constants"]


class MeasureErrorNo(enum.IntEnum):
    """Why a candidate has no valid time. Stored by name in records."""
    NO_ERROR = 0
    INVALID_SCHEDULE = 1   # a Step does not apply, or lowering rejects the schedule
    COMPILE_ERROR = 2      # the C compiler rejected the source
    RUNTIME_CRASH = 3      # the kernel crashed (signal) or failed at run time
    WRONG_ANSWER = 4       # output differs from the unscheduled build of the same compute
    BUILD_TIMEOUT = 5      # lowering + compiling took longer than the build timeout
    RUN_TIMEOUT = 6        # the kernel ran longer than the run timeout
    UNKNOWN = 7            # anything else; the message says what

    @classmethod
    def parse(cls, name: Any) -> "MeasureErrorNo":
        """From a record's error code (its name); ValueError naming the known codes."""
        if isinstance(name, str) and name in cls.__members__:
            return cls[name]
        raise ValueError(f"unknown error code {str(name)[:40]!r}; known: "
                         f"{', '.join(cls.__members__)}")


def state_key(workload_key: str, steps: Sequence[Any]) -> str:
    """Identity of a candidate: the workload and its exact Step list (canonical JSON).
    Two searches that reach the same schedule share the key, so neither re-measures it."""
    canon = json.dumps([workload_key, [s if isinstance(s, dict) else s.to_json()
                                       for s in steps]], sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canon.encode()).hexdigest()


def declared_constants(decisions: Any, workload: "Workload") -> tuple:
    """The inputs of ``workload`` that the search behind ``decisions`` declared constant
    (``--const B``, a model's weights): their ``constants`` list (both searches write
    it) and the ``prepack:<input>`` decisions of template-free logs older than that list;
    names that are not inputs of the workload are ignored (a log is data)."""
    d = decisions if isinstance(decisions, dict) else {}
    names = list(d.get("constants") or ()) if isinstance(d.get("constants"), list) else []
    inner = d.get("decisions")
    if isinstance(inner, dict):
        names += [k.split(":", 1)[1] for k in inner if isinstance(k, str)
                  and k.startswith("prepack:")]
    inputs = [t.name for t in workload.tensors
              if t.name not in {o.name for o in workload.outputs}]
    return tuple(n for n in dict.fromkeys(names) if n in inputs)


@dataclass(frozen=True, eq=False)
class MeasureInput:
    """A candidate: the workload, the Steps of its schedule, and the search's decisions
    that produced them (a templated config or sampled decisions; plain JSON, never run)."""
    workload: Workload
    steps: tuple
    decisions: Any = None

    @property
    def key(self) -> str:
        return state_key(self.workload.key, self.steps)


@dataclass(frozen=True)
class MeasureResult:
    """Seconds per call, one per repeat (empty on error), and the error with its message."""
    costs: tuple = ()
    error_no: MeasureErrorNo = MeasureErrorNo.NO_ERROR
    error_msg: str = ""
    build_seconds: float = 0.0
    run_seconds: float = 0.0
    timestamp: float = field(default_factory=time.time)
    # where the library was compiled when not by the tuning process's builder: the
    # address of the Dask worker that compiled it ("": by the tuning's own builder)
    compiled_on: str = ""

    @property
    def ok(self) -> bool:
        return self.error_no == MeasureErrorNo.NO_ERROR and bool(self.costs)

    @property
    def mean_cost(self) -> float:
        """Mean seconds per call; +inf for an error, so a failed candidate is never best."""
        return sum(self.costs) / len(self.costs) if self.ok else math.inf

    @property
    def median_cost(self) -> float:
        if not self.ok:
            return math.inf
        c = sorted(self.costs)
        n = len(c)
        return c[n // 2] if n % 2 else (c[n // 2 - 1] + c[n // 2]) / 2
