"""tvmlite: a TVM-style compute/schedule autotuner for CPUs that generates C."""
from __future__ import annotations

from . import te
from .lower import lower
from .module import Module, TimeResult, build
from .schedule import Schedule, ScheduleError
from .target import CompilerNotFoundError, Target

__all__ = ["te", "lower", "build", "Module", "TimeResult", "Schedule", "ScheduleError", "Target", "CompilerNotFoundError"]
__version__ = "0.1.0"
