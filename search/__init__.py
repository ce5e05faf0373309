"""Schedule search: measurement, records, tuners, sketches, evolutionary search and the
cost model.

Names are imported on first use (PEP 562), so ``python -m tvmlite.search.worker`` -- the
measuring process, restarted after every crash -- starts without loading xgboost.

Map: measure.py (MeasureInput/Result, Measurer) · builder.py, runner.py, worker.py ·
workload.py · record.py, logs.py, replay.py · template-free: dag.py, sketch.py,
evolution.py, policy.py, task.py, scheduler.py · templated: space.py, templated.py,
tuners.py · shared: features.py, cost_model.py, options.py
"""
from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "MeasureInput": "measure", "MeasureResult": "measure", "MeasureErrorNo": "measure",
    "Measurer": "measure", "LocalBuilder": "builder", "LocalRunner": "runner",
    "Workload": "workload", "Record": "record", "load_records": "record",
    "best_record": "record", "replay": "replay", "TuningOptions": "options",
    "SearchTask": "task", "TaskScheduler": "scheduler", "XGBModel": "cost_model",
    "RandomModel": "cost_model", "template": "templated", "apply_history_best": "templated",
    "create": "templated", "Tuner": "tuners", "RandomTuner": "tuners",
    "GridSearchTuner": "tuners", "GATuner": "tuners", "XGBTuner": "xgb_tuner",
    "ConfigSpace": "space",
}
_MODULES = ("templated", "logs", "sketch", "features", "cost_model", "space", "tuners")

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(f".{_EXPORTS[name]}", __name__), name)
    if name in _MODULES:
        return importlib.import_module(f".{name}", __name__)
    raise AttributeError(f"module 'tvmlite.search' has no attribute {name!r}")
