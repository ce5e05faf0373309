"""tvmlite: a TVM-style compute/schedule autotuner for CPUs that generates C."""
from __future__ import annotations

import os as _os

# In a source checkout the subpackages codegen_c/, schedules/ and search/ sit beside this
# folder (pyproject maps them into tvmlite.* on install). When Python imports tvmlite
# from the checkout itself (cwd on sys.path), let it find them there too.
_root = _os.path.dirname(_os.path.dirname(_os.path.abspath(__file__)))
if not _os.path.isdir(_os.path.join(_os.path.dirname(__file__), "codegen_c")) and \
        _os.path.isfile(_os.path.join(_root, "codegen_c", "codegen.py")):
    __path__.append(_root)  # type: ignore[name-defined]

from . import te
from .lower import lower
from .module import Module, TimeResult, build
from .schedule import Schedule, ScheduleError
from .target import CompilerNotFoundError, Target

__all__ = ["te", "lower", "build", "Module", "TimeResult", "Schedule", "ScheduleError", "Target", "CompilerNotFoundError"]
__version__ = "0.1.0"
