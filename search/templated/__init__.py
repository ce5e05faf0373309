"""The templated search (as AutoTVM): knobs and their entities (``knobs.py``), config
spaces (``space.py``), templates and their tasks (``task.py``: ``template``, ``create``,
``apply_history_best``), and the tuners (``tuners.py``, ``xgb_tuner.py``)."""
from __future__ import annotations

from tvmlite.search.templated.task import (
                                           TEMPLATES,
                                           FallbackConfigWarning,
                                           TemplatedTask,
                                           TemplateError,
                                           TemplateFunction,
                                           apply_history_best,
                                           create,
                                           template,
)

__all__ = ["TEMPLATES", "FallbackConfigWarning", "TemplatedTask", "TemplateError",
           "TemplateFunction", "apply_history_best", "create", "template"]
