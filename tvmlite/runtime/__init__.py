"""What runs a kernel from Python: ``build`` and ``Module`` (``module.py``: C through the
compiler, loaded with cffi, argument checks, timing, export) and 64-byte-aligned arrays
(``arrays.py``). Names are imported on first use (PEP 562): the measuring worker uses
``arrays.py`` alone and must not load the compiler pipeline ``module.py`` brings."""
from __future__ import annotations

from typing import TYPE_CHECKING

from tvmlite.lazy import lazy_getattr

_EXPORTS = {"build": ".module", "Module": ".module", "TimeResult": ".module",
            "empty": ".arrays", "asaligned": ".arrays"}

if TYPE_CHECKING:
    from tvmlite.runtime.arrays import asaligned, empty
    from tvmlite.runtime.module import Module, TimeResult, build


__getattr__ = lazy_getattr(__name__, _EXPORTS)


__all__ = ["build", "Module", "TimeResult", "empty", "asaligned"]   # _EXPORTS' names
