"""What we compile for: the ``Target`` (ISA, vector width and registers, caches, cores,
compiler and flags; ``target.py``) and its measured FMA peak (``peak.py``)."""
from __future__ import annotations

from tvmlite.target.target import TARGET_NAMES, CompilerNotFoundError, Target

__all__ = ["Target", "CompilerNotFoundError", "TARGET_NAMES"]
