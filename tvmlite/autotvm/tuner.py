"""``autotvm.tuner``: AutoTVM's tuner names, the templated search's tuners
(``tvmlite.search.templated.tuners``, ``xgb_tuner``): ``Tuner(task).tune(n_trial,
log_file, options, callback)``."""
from __future__ import annotations

from tvmlite.search.templated.tuners import GATuner, GridSearchTuner, RandomTuner, Tuner
from tvmlite.search.templated.xgb_tuner import XGBTuner

__all__ = ["Tuner", "XGBTuner", "GATuner", "RandomTuner", "GridSearchTuner"]
