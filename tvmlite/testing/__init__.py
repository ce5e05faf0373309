"""The reference check that tests, the schedule fuzzer and measurement share: numpy
references of the operator library (``references.py``), an interpreter of any compute
(``interpreter.py``), and ``check_schedule`` / tolerances (``check.py``)."""
from __future__ import annotations

from tvmlite.testing.check import (assert_allclose, check_module, check_schedule, random_inputs,
                                   reduction_length, reference, tolerance)
from tvmlite.testing.interpreter import evaluate_te
from tvmlite.testing.references import REFERENCES

__all__ = ["assert_allclose", "check_module", "check_schedule", "random_inputs",
           "reduction_length", "reference", "tolerance", "evaluate_te", "REFERENCES"]
