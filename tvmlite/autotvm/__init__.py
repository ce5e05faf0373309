"""``tvmlite.autotvm``: the templated search under AutoTVM's names, for code written for
TVM. Every name is an alias of ``tvmlite.search`` (``search.templated``) objects; nothing
here is a second implementation.

    from tvmlite import autotvm
    task = autotvm.task.create("matmul", args=(512, 512, 512, "float32"), target="host")
    tuner = autotvm.tuner.XGBTuner(task)
    tuner.tune(n_trial=200, log_file="matmul.log",
               options=autotvm.measure_option(builder=autotvm.LocalBuilder(),
                                              runner=autotvm.LocalRunner(number=5)))
    with autotvm.apply_history_best("matmul.log"):
        s, args = tvmlite.schedules.matmul(512, 512, 512, "float32")

Where tvmlite differs from AutoTVM, on purpose (DESIGN.md): a template takes its config
as its first argument, ``@autotvm.template("name") def f(cfg, *args)``, since there is
no implicit global context (``autotvm.get_config()``); the target is a CPU ("host",
"x86_64-avx2", ...), not TVM's "llvm"; ``tune`` logs to ``log_file`` and takes
``options=`` (what ``measure_option`` returns) and one ``callback`` per trial, not
``measure_option=`` and ``callbacks=[autotvm.callback.log_to_file(...)]``.

This package is imported only when ``tvmlite.autotvm`` is first used (``tvmlite``'s
PEP 562 ``__getattr__``), so the measuring worker does not load the searches.

Map: ``task`` (create, template, Task, ConfigSpace) · ``tuner`` (XGBTuner, GATuner,
RandomTuner, GridSearchTuner) · ``measure`` (measure_option, LocalBuilder, LocalRunner)
· here: template, apply_history_best and the measure names.
"""
from __future__ import annotations

from tvmlite.autotvm import measure, task, tuner
from tvmlite.autotvm.measure import LocalBuilder, LocalRunner, measure_option
from tvmlite.search.templated.task import apply_history_best, template

__all__ = ["task", "tuner", "measure", "template", "apply_history_best", "measure_option",
           "LocalBuilder", "LocalRunner"]
