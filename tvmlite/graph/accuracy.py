"""How far a model built in a lower precision is from its float32 build.

A bf16 build (``passes/precision.py``) rounds every weight and every activation a conv
or matmul reads to 8 bits of mantissa, so its outputs differ from the float32 model's by
a rounding that grows with the depth and the width of the sums. The figure a user needs
to decide whether that is acceptable is measured, not bounded: the same seeded random
inputs through both builds, the largest absolute difference of any output element and
that difference relative to the largest reference magnitude (``max|diff| / max|ref|``,
which stays meaningful where individual reference elements are near zero, unlike an
element-wise relative error).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np

from tvmlite.graph.build import GraphModule, build_graph
from tvmlite.graph.decisions import feeds_for, optimize_in
from tvmlite.graph.ir import Graph, GraphError

__all__ = ["OutputError", "output_error", "error_against_fp32"]


@dataclass(frozen=True)
class OutputError:
    """The largest ``|out - ref|`` over every output element, and it over the largest
    ``|ref|``; ``precision`` names the build measured."""
    max_abs: float
    relative: float
    precision: str = "bf16"

    def line(self) -> str:
        return (f"error:    {self.precision} against the fp32 build on seeded random inputs: "
                f"max abs {self.max_abs:.3g}, relative {self.relative:.3g} "
                f"(max|diff| / max|ref|)")


def output_error(outputs: Sequence[np.ndarray], reference: Sequence[np.ndarray],
                 precision: str = "bf16") -> OutputError:
    """The ``OutputError`` of ``outputs`` against ``reference`` (the same outputs in the
    same order), computed in float64."""
    if len(outputs) != len(reference):
        raise GraphError(f"output_error: {len(outputs)} outputs against {len(reference)} "
                         f"references")
    worst_abs, worst_ref = 0.0, 0.0
    for out, ref in zip(outputs, reference):
        o, r = np.asarray(out, np.float64), np.asarray(ref, np.float64)
        if o.shape != r.shape:
            raise GraphError(f"output_error: an output of shape {o.shape} against a "
                             f"reference of shape {r.shape}")
        if o.size:
            worst_abs = max(worst_abs, float(np.max(np.abs(o - r))))
            worst_ref = max(worst_ref, float(np.max(np.abs(r))))
    return OutputError(worst_abs, worst_abs / worst_ref if worst_ref else worst_abs,
                       precision)


def error_against_fp32(graph: Graph, mod: GraphModule,
                       feeds: Mapping[str, np.ndarray] | None = None) -> OutputError:
    """The error of ``mod`` (``graph``, as imported, built in a lower precision) against
    ``graph`` built in fp32 in ``mod``'s layout for ``mod``'s target (under the current
    dispatch context, so a log's float32 records apply), on ``feeds`` (default:
    ``decisions.feeds_for(graph)``)."""
    if graph.kernels is not None:
        raise GraphError(f"error_against_fp32: pass graph {graph.name!r} as imported "
                         f"(frontend.from_onnx), not optimized")
    reference = build_graph(optimize_in(graph.replace(precision="fp32"), mod.graph.layout),
                            mod.target, quiet=True)
    feeds = feeds_for(graph) if feeds is None else feeds
    return output_error(mod.run(feeds), reference.run(feeds), mod.graph.precision)
