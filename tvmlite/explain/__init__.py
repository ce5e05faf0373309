"""Why a kernel is not fast: its roofline (flops, bytes per memory level, the bound,
attainable and measured GFLOP/s) and findings (scalar fallbacks, register pressure and
spills, parallel work, unrolling, recomputation), each with what to try.

``explain_schedule(s, tensors, ...)`` explains a schedule; ``Module.explain()`` a built
kernel; ``search.explain(record)`` a tuning record; ``tvmlite explain LOG`` the best
record of a log."""
from __future__ import annotations

from tvmlite.explain.report import Explanation, build_warnings, explain_schedule

__all__ = ["Explanation", "build_warnings", "explain_schedule"]
