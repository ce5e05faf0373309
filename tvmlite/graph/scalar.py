"""A one-element constant of a graph, read by the kernels' computes as a literal.

A constant of one element (a bias of 0.5, an exponent of 2, a zero point) needs no buffer
argument: the compute writes its value into the expression, so ``x * 0.5`` is one
multiply and ``x ** 2`` becomes ``x * x``.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["Scalar", "Operand"]


@dataclass(frozen=True)
class Scalar:
    """A one-element constant, read as a literal of ``dtype``."""
    value: float
    dtype: str
    shape: tuple[int, ...] = ()


Operand = Any   # te.Tensor or Scalar
