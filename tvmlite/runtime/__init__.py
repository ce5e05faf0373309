"""What runs a kernel from Python: ``build`` and ``Module`` (``module.py``: C through the
compiler, loaded with cffi, argument checks, timing, export) and 64-byte-aligned arrays
(``arrays.py``)."""
from __future__ import annotations

from tvmlite.runtime.arrays import asaligned, empty
from tvmlite.runtime.module import Module, TimeResult, build

__all__ = ["build", "Module", "TimeResult", "empty", "asaligned"]
