"""Why a kernel is not fast: its roofline (flops, bytes per memory level, the bound,
attainable and measured GFLOP/s) and findings (scalar fallbacks, register pressure and
spills, parallel work, unrolling, recomputation), each with what to try.

``explain_schedule(s, tensors, ...)`` explains a schedule; ``Module.explain()`` a built
kernel; ``explain_record(record)`` (``record.py``; also ``search.explain``) a tuning
record; ``tvmlite explain LOG`` the best record of a log. This package is the one home
of that logic: ``search.records.explain`` and ``tvmlite.cli.explain`` only call it.

``record.py`` builds kernels through ``runtime.module``, which imports ``report`` as it
loads, so its names are imported on first use (PEP 562), as ``tvmlite.search``'s are."""
from __future__ import annotations

from tvmlite.explain.report import Explanation, build_warnings, explain_schedule
from tvmlite.lazy import lazy_getattr

_RECORD = ("bound_line", "explain_record", "record_warnings")
__all__ = ["Explanation", "build_warnings", "explain_schedule", *_RECORD]


__getattr__ = lazy_getattr(__name__, {n: ".record" for n in _RECORD})
