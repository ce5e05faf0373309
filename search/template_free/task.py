"""``SearchTask``: tune one workload with the template-free search, and use the result.

```python
task = search.SearchTask(func=tvmlite.ops.matmul, args=(512, 512, 512, "float32"))
task.tune(trials=200, log_file="matmul.jsonl")
s, args = task.apply_best("matmul.jsonl")
```

``trials`` is the budget of measurements of this workload *in the log*: records already
there (an interrupted run, an earlier call, another process tuning into the same log)
count, so running the same call again after a crash or Ctrl-C finishes the budget
without measuring anything twice. Each record is logged as soon as it is measured.
"""
from __future__ import annotations

import inspect
from typing import Any, Callable, Sequence

from tvmlite.ops import OPS
from tvmlite.schedule.prepack import declare_constants
from tvmlite.schedule.schedule import Schedule
from tvmlite.search.measure.measurer import Measurer
from tvmlite.search.model.cost_model import XGBModel
from tvmlite.search.model.pretrained import load_pretrained
from tvmlite.search.options import TuningOptions
from tvmlite.search.records.best import best_record
from tvmlite.search.records.workload import Workload
from tvmlite.search.result import Trial, TuneResult
from tvmlite.search.template_free.policy import SketchPolicy
from tvmlite.search.tuning import DRY_ROUNDS, Job, of_workload, tune_loop
from tvmlite.target.target import Target

TUNER = "template-free"

__all__ = ["SearchTask", "make_workload", "check_constants", "run_tuning", "TUNER",
           "DRY_ROUNDS"]


def make_workload(func: Any = None, args: Sequence[Any] = (), kwargs: dict | None = None,
                  workload: Workload | None = None, name: str | None = None) -> Workload:
    """A Workload from an operator of the library, a user function returning tensors
    (inputs first, output last), an op name, or a ready Workload."""
    if workload is not None:
        if not isinstance(workload, Workload):
            raise TypeError(f"workload must be a search.Workload, got {type(workload).__name__}")
        return workload
    kwargs = dict(kwargs or {})
    if isinstance(func, str):
        return Workload.from_op(func, *args, **kwargs)
    if not callable(func):
        raise TypeError("SearchTask needs func= (an operator such as tvmlite.ops.matmul, or a "
                        "function returning [inputs..., output]) or workload=")
    for op_name, fn in OPS.items():
        if fn is func:
            return Workload.from_op(op_name, *args, **kwargs)
    tensors = func(*args, **kwargs)
    try:
        bound = inspect.signature(func).bind(*args, **kwargs)
        bound.apply_defaults()
        named = {k: v for k, v in bound.arguments.items()
                 if isinstance(v, (int, float, str, bool)) or v is None}
    except (TypeError, ValueError):
        named = {}
    return Workload.from_tensors(tensors, name=name or func.__name__, args=named)


def check_constants(workload: Workload, constants: Any) -> tuple:
    """The names of the inputs a task declares constant (weights, known at load time):
    the search may then pre-pack them once, outside the kernel (``schedule.prepack``).
    Each must be one of the workload's inputs."""
    if isinstance(constants, str):
        constants = [c for c in constants.split(",") if c]
    if not isinstance(constants, (list, tuple)):
        raise TypeError(f"SearchTask(constants=...) must be a list of input names, e.g. "
                        f"['B'], got {type(constants).__name__}")
    inputs = [t.name for t in workload.tensors if t.op.__class__.__name__ == "PlaceholderOp"]
    for c in constants:
        if c not in inputs:
            raise ValueError(f"SearchTask(constants=...): {c!r} is not an input of workload "
                             f"{workload.name}; its inputs are {inputs} (an output or an "
                             f"intermediate cannot be constant)")
    return tuple(dict.fromkeys(constants))


class SearchTask:
    """A workload on a target, tuned by sketches + evolutionary search + cost model."""

    def __init__(self, func: Any = None, args: Sequence[Any] = (),
                 target: Target | str | None = None, workload: Workload | None = None,
                 kwargs: dict | None = None, name: str | None = None,
                 rules: Sequence[Any] | None = None, shapes: dict | None = None,
                 constants: Sequence[str] = ()):
        if not isinstance(args, (tuple, list)):
            raise TypeError(f"SearchTask(args=...) must be a tuple of the operator's "
                            f"arguments, got {type(args).__name__}")
        self.workload = make_workload(func, args, kwargs, workload, name)
        self.target = Target.resolve(target, "SearchTask(target=...)")  # a Target or a name
        self.rules = rules
        self.shapes = shapes
        self.constants = check_constants(self.workload, constants)
        # a model's task (search.extract_tasks): how many of its kernels this task serves,
        # and their names; the task scheduler weighs the task's latency by it
        self.weight: int = 1
        self.kernel_names: list[str] = []
        self.seed_steps: list = []            # Steps measured first (extract_tasks)
        if self.workload.is_dynamic:  # symbolic sizes: tuned for a range (dynamic.py)
            from tvmlite.search.template_free.dynamic import check_shapes
            if shapes is None:
                raise ValueError(f"workload {self.workload.name} has symbolic sizes "
                                 f"{list(self.workload.size_names)}: pass shapes={{name: [sizes]}} "
                                 f"or a range, e.g. shapes={{'M': (1, 2048)}}")
            self.size_name, self.sizes = check_shapes(self.workload, shapes)
        elif shapes is not None:
            raise ValueError("SearchTask(shapes=...) is for workloads with a symbolic size "
                             "(te.var); this one has none")

    @property
    def dynamic(self) -> bool:
        """Whether the task is over a symbolic size (tuned for its range by the
        dynamic-shape search, not by the TaskScheduler)."""
        return self.workload.is_dynamic

    @classmethod
    def from_tensors(cls, tensors: Sequence[Any], name: str = "custom",
                     target: Target | str | None = None) -> "SearchTask":
        return cls(workload=Workload.from_tensors(tensors, name=name), target=target)

    def __repr__(self) -> str:
        return f"SearchTask({self.workload.name}, key={self.workload.key[:8]})"

    def new_model(self, options: TuningOptions) -> XGBModel:
        """The cost model a tuning of this task starts from: the shipped pretrained one
        as a prior (``options.pretrained``; cold when it does not fit), else a cold one.
        The task scheduler makes one per family of alike tasks (``families``)."""
        model = load_pretrained("pack-sum") if options.pretrained else None  # None: warned
        return model or XGBModel(seed=options.seed)

    def policy(self, options: TuningOptions, model: Any = None) -> Any:
        # the first round measures the target's blocked candidates (policy.py's doc)
        return SketchPolicy(self.workload, self.target, model or self.new_model(options),
                            options, seed=options.seed, rules=self.rules,
                            constants=self.constants, blocked_first=True,
                            seed_steps=self.seed_steps)

    def tune(self, trials: int, log_file: Any = None, options: TuningOptions | None = None,
             callback: Callable[[Trial], None] | None = None, model: Any = None) -> TuneResult:
        """Measure until the log holds ``trials`` measurements of this workload (or the
        search runs out of new candidates, or early stopping triggers)."""
        if isinstance(trials, bool) or not isinstance(trials, int) or trials < 1:
            raise ValueError(f"tune(trials=...) must be a positive int, got {trials!r}")
        options = options or TuningOptions()
        if not isinstance(options, TuningOptions):
            raise TypeError("tune(options=...) must be a search.TuningOptions")
        if self.workload.is_dynamic:
            from tvmlite.search.template_free.dynamic import tune_dynamic
            return tune_dynamic(self, trials, log_file, options, callback, model)
        with options.measurer(log_file, self.target, TUNER) as measurer:
            return run_tuning([self], [trials], measurer, options, callback,
                              models=[model] if model else None)[0]

    def apply_best(self, log_file: Any) -> tuple[Schedule, list]:
        """(schedule, kernel arguments) of the best valid record in ``log_file``, every
        input of ``constants`` read through its pack function (``declare_constants``);
        for a dynamic workload, the dispatching Module of its tuned variants instead."""
        if self.workload.is_dynamic:
            from tvmlite.search.template_free.dynamic import apply_best_dynamic
            return apply_best_dynamic(self, log_file)
        rec = best_record(log_file, self.workload, self.target)
        if rec is None:
            raise LookupError(f"no valid record of {self.workload.name} "
                              f"(key {self.workload.key[:8]}) in {log_file}; tune it first")
        s = Schedule.from_steps(self.workload.outputs, rec.steps)
        # a constant input's API is fixed: the Module takes its packing whatever the record
        return declare_constants(s, self.constants), list(self.workload.tensors)


def run_tuning(tasks: Sequence[SearchTask], budgets: Sequence[int], measurer: Measurer,
               options: TuningOptions, callback: Callable[[Trial], None] | None = None,
               models: Sequence[Any] | None = None, choose: Callable | None = None,
               total: int | None = None) -> list[TuneResult]:
    """Tune ``tasks`` (one SketchPolicy each) in the shared loop (``search.tuning.
    tune_loop``): round after round, ``choose(active, results, done)`` picks a task (None
    stops; default: round-robin over tasks with budget left), its policy proposes a
    batch, the batch is measured and fed back.

    Budgets count records *in the log*, re-read before every round and checked again
    before every append (the measurer's quotas): the log's earlier records of each
    workload train its model first and count (resume), and so do records another
    process appends to the same log meanwhile. ``total`` caps the records of all tasks
    together. ``callback`` gets one Trial per measured candidate, as soon as it is
    logged; ``Trial.index`` is the number of records of its workload then in the log.
    A task whose policy proposes nothing new, or only what the log holds for
    ``DRY_ROUNDS`` rounds, is exhausted."""
    policies = [t.policy(options, m) for t, m in
                zip(tasks, models or [None] * len(tasks))]
    jobs = [Job(p, t.workload, b, of_workload(t.workload.key))
            for t, p, b in zip(tasks, policies, budgets)]
    return tune_loop(jobs, measurer, options, callback, choose=choose, total=total)
