"""The reference check that tests, the schedule fuzzer and measurement share: numpy
references of the operator library (``references.py``), an interpreter of any compute
(``interpreter.py``), ``check_schedule`` / tolerances (``check.py``), and the small
workloads many tests build alike (``workloads.py``)."""
from __future__ import annotations

import importlib
from typing import Any

from tvmlite.testing.check import (
    assert_allclose,
    check_module,
    check_schedule,
    random_inputs,
    reduction_length,
    reference,
    tolerance,
)
from tvmlite.testing.references import REFERENCES
from tvmlite.testing.workloads import ODD_MNK, matmul_reference, tiled_matmul, two_stage


def __getattr__(name: str) -> Any:
    """``evaluate_te`` on first use (PEP 562): the interpreter imports scipy, and the
    measuring worker, which imports ``check.mismatch``, must start without it."""
    if name == "evaluate_te":
        return importlib.import_module("tvmlite.testing.interpreter").evaluate_te
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

__all__ = ["assert_allclose", "check_module", "check_schedule", "random_inputs",
           "reduction_length", "reference", "tolerance", "evaluate_te", "REFERENCES",
           "ODD_MNK", "matmul_reference", "tiled_matmul", "two_stage"]
