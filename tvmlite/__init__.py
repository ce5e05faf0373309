"""tvmlite: a TVM-style compute/schedule autotuner for CPUs that generates C."""
from __future__ import annotations

import os as _os
from typing import TYPE_CHECKING

# In a source checkout the subpackages codegen_c/, schedules/ and search/ sit beside this
# folder (pyproject maps them into tvmlite.* on install). When Python imports tvmlite
# from the checkout itself (cwd on sys.path), let it find them there too.
_root = _os.path.dirname(_os.path.dirname(_os.path.abspath(__file__)))
if not _os.path.isdir(_os.path.join(_os.path.dirname(__file__), "codegen_c")) and \
        _os.path.isfile(_os.path.join(_root, "codegen_c", "codegen.py")):
    __path__.append(_root)  # type: ignore[name-defined]

# Names are imported on first use (PEP 562), after the path set-up above: the measuring
# worker -- a process per tuning, started again after every crash -- imports tvmlite for
# its arrays and loader only, and importing the operators, the compiler pipeline and the
# graph layer as well cost it half a second per start.
_SUBPACKAGES = {n: f".{n}" for n in ("ops", "te", "search", "schedules", "nd", "topi",
                                     "autotvm")}
_EXPORTS = {
    "build": ".entry", "TvmliteError": ".errors", "TvmliteWarning": ".errors",
    "lower": ".passes.pipeline", "asaligned": ".runtime.arrays", "empty": ".runtime.arrays",
    "Device": ".runtime.device", "cpu": ".runtime.device", "Module": ".runtime.module",
    "TimeResult": ".runtime.module", "Schedule": ".schedule.schedule",
    "ScheduleError": ".schedule.state", "CompilerNotFoundError": ".target.target",
    "Target": ".target.target",
}

from tvmlite.lazy import lazy_getattr  # noqa: E402 -- after the path set-up

__getattr__ = lazy_getattr(__name__, _EXPORTS, _SUBPACKAGES)

if TYPE_CHECKING:
    from tvmlite import ops, te
    from tvmlite.entry import build
    from tvmlite.errors import TvmliteError, TvmliteWarning
    from tvmlite.passes.pipeline import lower
    from tvmlite.runtime.arrays import asaligned, empty
    from tvmlite.runtime.device import Device, cpu
    from tvmlite.runtime.module import Module, TimeResult
    from tvmlite.schedule.schedule import Schedule
    from tvmlite.schedule.state import ScheduleError
    from tvmlite.target.target import CompilerNotFoundError, Target

__all__ = ["te", "ops", "empty", "asaligned", "lower", "build", "Module", "TimeResult", "Schedule",
           "ScheduleError", "Target", "CompilerNotFoundError", "TvmliteError", "TvmliteWarning",
           "search", "schedules", "cpu", "Device", "nd", "topi", "autotvm"]
__version__ = "0.1.0"
