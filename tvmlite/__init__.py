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

# After the path set-up above: tvmlite.runtime imports tvmlite.codegen_c, found through it.
from tvmlite import ops, te  # noqa: E402
from tvmlite.entry import build  # noqa: E402
from tvmlite.errors import TvmliteError, TvmliteWarning  # noqa: E402
from tvmlite.passes.pipeline import lower  # noqa: E402
from tvmlite.runtime.arrays import asaligned, empty  # noqa: E402
from tvmlite.runtime.device import Device, cpu  # noqa: E402
from tvmlite.runtime.module import Module, TimeResult  # noqa: E402
from tvmlite.schedule.schedule import Schedule  # noqa: E402
from tvmlite.schedule.state import ScheduleError  # noqa: E402
from tvmlite.target.target import CompilerNotFoundError, Target  # noqa: E402

__all__ = ["te", "ops", "empty", "asaligned", "lower", "build", "Module", "TimeResult", "Schedule",
           "ScheduleError", "Target", "CompilerNotFoundError", "TvmliteError", "TvmliteWarning",
           "search", "schedules", "cpu", "Device", "nd", "topi", "autotvm"]
__version__ = "0.1.0"


def __getattr__(name: str):
    """``tvmlite.search``, ``tvmlite.schedules`` and the TVM-named modules (``nd``,
    ``topi``, ``autotvm``: aliases of ours) on first use (PEP 562): the measuring worker
    imports tvmlite and should not pay for the searches."""
    if name in ("search", "schedules", "nd", "topi", "autotvm"):
        import importlib
        return importlib.import_module(f".{name}", __name__)
    raise AttributeError(f"module 'tvmlite' has no attribute {name!r}")
