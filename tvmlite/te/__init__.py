"""The tensor expression language, under TVM's names: ``te.placeholder``, ``te.compute``,
``te.reduce_axis``, the reductions and math functions, and ``te.create_schedule``.

Operators are declared here as pure compute expressions (``tensor.py``); how they run is
the schedule's business (``tvmlite.schedule``), so ``create_schedule`` is imported on
first use (PEP 562): the schedule package imports the tensors of this one."""
from __future__ import annotations

from typing import TYPE_CHECKING

from tvmlite.ir.expr import const
from tvmlite.lazy import lazy_getattr
from tvmlite.te.tensor import (
                               IDENT,
                               MAX_ELEMENTS,
                               ComputeOp,
                               IterVar,
                               PlaceholderOp,
                               Tensor,
                               abs,
                               all,
                               any,
                               cast,
                               check_name,
                               check_shape,
                               collect_ops,
                               compute,
                               erf,
                               exp,
                               floordiv,
                               floormod,
                               if_then_else,
                               log,
                               logical_not,
                               max,
                               min,
                               placeholder,
                               reduce_axis,
                               sigmoid,
                               size_var,
                               sqrt,
                               sum,
                               tanh,
                               var,
)

if TYPE_CHECKING:
    from tvmlite.schedule.schedule import create_schedule


__getattr__ = lazy_getattr(__name__, {"create_schedule": "tvmlite.schedule.schedule"})


__all__ = ["placeholder", "compute", "reduce_axis", "sum", "max", "min", "if_then_else",
           "all", "any", "const", "exp", "log", "sqrt", "tanh", "sigmoid", "abs", "erf",
           "cast", "floordiv", "floormod", "logical_not", "create_schedule", "Tensor",
           "ComputeOp", "PlaceholderOp", "IterVar", "collect_ops", "check_name", "check_shape",
           "IDENT", "MAX_ELEMENTS", "var", "size_var"]
