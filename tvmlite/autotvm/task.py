"""``autotvm.task``: AutoTVM's names for templated tasks (``tvmlite.search.templated``).

``create(name, args, target)`` is ``search.templated.create``: a registered template and
its arguments as a task (``target`` a Target or a name such as "host"; ``constants``
names inputs that are constant in deployment)."""
from __future__ import annotations

from tvmlite.search.templated.space import ConfigSpace
from tvmlite.search.templated.task import TemplatedTask as Task
from tvmlite.search.templated.task import create, template

__all__ = ["create", "template", "Task", "ConfigSpace"]
