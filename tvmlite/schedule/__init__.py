"""Schedules: the frozen loop ``State`` (``state.py``), the Steps that transform it
(``steps.py``, read back from JSON by ``step_json.py``), and the TVM-style API that
records them (``schedule.py``: ``s[C].split(...)``)."""
from __future__ import annotations

from tvmlite.schedule.schedule import LoopAxis, Schedule, StageHandle, create_schedule
from tvmlite.schedule.state import ScheduleError, Stage, State

__all__ = ["Schedule", "ScheduleError", "StageHandle", "LoopAxis", "State", "Stage",
           "create_schedule"]
