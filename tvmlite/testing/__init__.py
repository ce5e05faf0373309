"""The reference check that tests, the schedule fuzzer and measurement share: numpy
references of the operator library (``references.py``), an interpreter of any compute
(``interpreter.py``), ``check_schedule`` / tolerances (``check.py``), the comparison and
inputs measurement uses (``compare.py``), and the small workloads many tests build alike
(``workloads.py``).

Names are imported on first use (PEP 562): the measuring worker imports
``tvmlite.testing.compare``, which must not load the checks' compiler pipeline, nor the
interpreter's scipy.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from tvmlite.lazy import lazy_getattr

_EXPORTS = {
    "assert_allclose": ".check", "check_module": ".check", "check_schedule": ".check",
    "random_inputs": ".check", "reduction_length": ".check", "reference": ".check",
    "tolerance": ".check", "evaluate_te": ".interpreter", "REFERENCES": ".references",
    "ODD_MNK": ".workloads", "matmul_reference": ".workloads", "tiled_matmul": ".workloads",
    "two_stage": ".workloads",
}

if TYPE_CHECKING:
    from tvmlite.testing.check import (
        assert_allclose,
        check_module,
        check_schedule,
        random_inputs,
        reduction_length,
        reference,
        tolerance,
    )
    from tvmlite.testing.interpreter import evaluate_te
    from tvmlite.testing.references import REFERENCES
    from tvmlite.testing.workloads import ODD_MNK, matmul_reference, tiled_matmul, two_stage


__getattr__ = lazy_getattr(__name__, _EXPORTS)


__all__ = ["assert_allclose", "check_module", "check_schedule", "random_inputs",
           "reduction_length", "reference", "tolerance", "evaluate_te", "REFERENCES",
           "ODD_MNK", "matmul_reference", "tiled_matmul", "two_stage"]   # _EXPORTS' names
