"""Schedule search. The folders draw the data path from a candidate to a deployed kernel:

- ``measure/``: what a measurement is, building and timing candidates in an isolated
  process, and the ``Measurer`` that logs each result;
- ``records/``: workloads, records and logs, and ``replay`` (logs -> deployable kernels);
- ``templated/``: AutoTVM-style knobs, config spaces, templates and tuners;
- ``template_free/``: Ansor-style sketches, evolution, ``SearchTask``, the task scheduler;
- ``model/``: loop-nest features and the XGBoost cost model both searches share;
- ``options.py`` (``TuningOptions``) and ``result.py`` (``Trial``, ``TuneResult``);
- ``tuning.py``: the one tuning loop both searches run (``Proposer``, ``tune_loop``):
  resume, budgets, early stopping, accounting and the best record of the log.

The two searches never import each other; both import ``tuning``. Names are imported on
first use (PEP 562), so ``python -m tvmlite.search.measure.worker`` -- the measuring
process, restarted after every crash -- starts without loading xgboost.
"""
from __future__ import annotations

from tvmlite.lazy import lazy_getattr

_EXPORTS = {
    "MeasureInput": ".measure.inputs", "MeasureResult": ".measure.inputs",
    "MeasureErrorNo": ".measure.inputs", "Measurer": ".measure.measurer",
    "LocalBuilder": ".measure.builder", "LocalRunner": ".measure.runner",
    "DaskRunner": ".measure.dask_runner", "MeasureConfig": ".measure.protocol",
    "Workload": ".records.workload", "Record": ".records.record",
    "load_records": ".records.record", "best_record": ".records.best",
    "best_valid": ".records.best", "Proposer": ".tuning", "tune_loop": ".tuning",
    "replay": ".records.deploy", "TuningOptions": ".options", "Trial": ".result",
    "TuneResult": ".result", "SearchTask": ".template_free.task",
    "TaskScheduler": ".template_free.scheduler", "XGBModel": ".model.cost_model",
    "RandomModel": ".model.cost_model", "template": ".templated.task",
    "apply_history_best": ".templated.task", "Tuner": ".templated.tuners",
    "RandomTuner": ".templated.tuners", "GridSearchTuner": ".templated.tuners",
    "GATuner": ".templated.tuners", "XGBTuner": ".templated.xgb_tuner",
    "ConfigSpace": ".templated.space", "explain": ".records.explain",
    "extract_tasks": ".graph_tasks",
}
# sub-packages and the modules users reach as search.<name> (search.sketch.Rule, search.logs)
_MODULES = {"templated": ".templated", "template_free": ".template_free", "measure": ".measure",
            "records": ".records", "model": ".model", "sketch": ".template_free.sketch",
            "logs": ".records.logs", "tuning": ".tuning"}

__all__ = sorted(_EXPORTS)


__getattr__ = lazy_getattr(__name__, _EXPORTS, _MODULES)
