"""Schedule templates (AutoTVM-style): registering them, choosing their config, and the
task a tuner searches.

```python
@search.template("matmul")
def matmul(cfg, M, N, K, dtype="float32"):
    A, B, C = tvmlite.ops.matmul(M, N, K, dtype)
    s = te.create_schedule(C.op)
    i, j = s[C].op.axis
    cfg.define_split("tile_i", i, num_outputs=2)
    io, ii = cfg["tile_i"].apply(s, C, i)
    ...
    return s, [A, B, C]

s, tensors = matmul(64, 64, 64)          # config from the dispatch context (below)
```

The decorated template, called without ``cfg``, chooses its config in one place: inside
``with apply_history_best(log):`` (a context variable, so threads and asyncio tasks do
not see each other's), the fastest valid record of this template and this workload for
this target; otherwise the space's fallback config, with a ``FallbackConfigWarning`` that
says how to tune it. Knobs may change only the schedule, never the compute: a config
whose compute hashes differently from the fallback's is a TemplateError, because its
records could never be found again.

Map: errors and warnings · TemplateFunction, template, TEMPLATES · TemplatedTask,
create · apply_history_best (the dispatch context).
"""
from __future__ import annotations

import contextvars
import functools
import inspect
import os
import warnings
from collections.abc import Iterable
from typing import Any, Callable

from tvmlite import te
from tvmlite.errors import TvmliteError, TvmliteWarning
from tvmlite.graph.dispatch import current_lookup, reset_lookup, set_lookup
from tvmlite.ir.symbolic import SizeVar
from tvmlite.schedule.schedule import Schedule
from tvmlite.search.measure.inputs import MeasureInput
from tvmlite.search.records.best import best_first
from tvmlite.search.records.graph_lookup import GraphLookup
from tvmlite.search.records.record import Record, RecordWarning, TargetMismatchWarning, load_records
from tvmlite.search.records.workload import Workload, workload_key
from tvmlite.search.templated.space import Config, ConfigSpace, SpaceError
from tvmlite.target.target import Target

__all__ = ["TEMPLATES", "TemplateError", "FallbackConfigWarning", "TemplateFunction",
           "template", "TemplatedTask", "create", "apply_history_best"]


class TemplateError(TvmliteError, ValueError):
    """A template that cannot be registered, called or trusted; the message says why."""


class FallbackConfigWarning(TvmliteWarning):
    """A template ran with its fallback config because no tuning record was found."""


class TemplateFunction:
    """A registered template. ``fn(cfg, *args) -> (s, tensors)`` is the function written;
    calling this object as ``f(*args)`` picks the config from the dispatch context."""

    def __init__(self, name: str, fn: Callable[..., Any]):
        params = list(inspect.signature(fn).parameters.values())
        if not params or params[0].kind not in (inspect.Parameter.POSITIONAL_ONLY,
                                                inspect.Parameter.POSITIONAL_OR_KEYWORD):
            raise TemplateError(f"template {name!r}: {fn.__qualname__} must take the config "
                                "as its first positional parameter: fn(cfg, *args)")
        self.name, self.fn = name, fn
        self.signature = inspect.signature(fn).replace(parameters=params[1:])
        functools.update_wrapper(self, fn)

    def bind(self, args: Any = (), kwargs: dict | None = None) -> inspect.BoundArguments:
        """The template's arguments (without cfg), defaults filled in."""
        try:
            bound = self.signature.bind(*args, **(kwargs or {}))
        except TypeError as err:
            raise TemplateError(f"template {self.name}{self.signature}: {err}") from None
        bound.apply_defaults()
        return bound

    def run(self, cfg: ConfigSpace | Config, bound: inspect.BoundArguments
            ) -> tuple[Schedule, list]:
        """Call the template with ``cfg``; check it returned (schedule, tensors)."""
        out = self.fn(cfg, *bound.args, **bound.kwargs)
        if not (isinstance(out, tuple) and len(out) == 2 and isinstance(out[0], Schedule)
                and isinstance(out[1], (list, tuple))
                and all(isinstance(t, te.Tensor) for t in out[1])):
            raise TemplateError(f"template {self.name!r} must return (schedule, [tensors...]) "
                                f"with the inputs first and the outputs last; got "
                                f"{type(out).__name__}")
        return out[0], list(out[1])

    def __call__(self, *args: Any, **kwargs: Any) -> tuple[Schedule, list]:
        task = TemplatedTask(self.name, self.bind(args, kwargs).arguments)
        ctx = _DISPATCH.get()
        found = ctx.lookup(task) if ctx is not None else None
        if found is None:
            where = "in the apply_history_best context" if ctx is not None else \
                "(no apply_history_best context)"
            warnings.warn(
                f"template {self.name!r} has no tuning record for {task.workload!r} on this "
                f"target {where}; using its fallback config, usually far from the best. Tune "
                f"it with task = search.templated.create({self.name!r}, args=...) and "
                f"search.XGBTuner(task).tune(n_trial=200, log_file=LOG), then call it inside "
                f"`with search.apply_history_best(LOG):`", FallbackConfigWarning, stacklevel=2)
            return task.instantiate(task.space.fallback())
        config, record = found
        s, tensors = task.instantiate(config)
        if tuple(s.steps) != record.steps:   # the template changed since it was tuned
            warnings.warn(f"template {self.name!r} now makes other Steps for config "
                          f"#{config.index} than its record measured; using the record's "
                          "Steps (re-tune to use the new template)", RecordWarning, stacklevel=2)
            s = Schedule.from_steps([t for t in tensors if isinstance(t.op, te.ComputeOp)],
                                    record.steps)
        return s, tensors

    def __repr__(self) -> str:
        return f"<template {self.name}{self.signature}>"


TEMPLATES: dict[str, TemplateFunction] = {}


def template(name: str) -> Callable[[Callable[..., Any]], TemplateFunction]:
    """Register ``fn(cfg, *args) -> (s, tensors)`` as the template ``name`` (the operator's
    name in tvmlite.ops.OPS for the library's templates). Registering the same function
    again (a module reload) replaces it; another function under a taken name is an error."""
    try:
        te.check_name(name, "template name")
    except ValueError as err:
        raise TemplateError(str(err)) from None

    def register(fn: Callable[..., Any]) -> TemplateFunction:
        if not callable(fn):
            raise TemplateError(f"@template({name!r}) decorates a function, got "
                                f"{type(fn).__name__}")
        old = TEMPLATES.get(name)
        if old is not None and (old.fn.__module__, old.fn.__qualname__) != \
                (fn.__module__, fn.__qualname__):
            raise TemplateError(f"template name {name!r} is taken by {old.fn.__module__}."
                                f"{old.fn.__qualname__}; pick another name")
        TEMPLATES[name] = TemplateFunction(name, fn)
        return TEMPLATES[name]
    return register


class TemplatedTask:
    """A template at fixed arguments on a target: its space, its workload, and how a
    config becomes a schedule and a measurement."""

    def __init__(self, name: str, args: Any = (), target: Any = None, constants: Any = ()):
        if isinstance(name, str) and name not in TEMPLATES:
            import tvmlite.schedules  # noqa: F401  (registers the library's templates)
        template = TEMPLATES.get(name) if isinstance(name, str) else None
        if template is None:
            raise TemplateError(f"unknown template {name!r}; registered: "
                                f"{', '.join(sorted(TEMPLATES)) or 'none'} (import the module "
                                "that defines it, e.g. tvmlite.schedules)")
        self.template: TemplateFunction = template
        if isinstance(args, dict):
            bound = self.template.bind((), args)
        elif isinstance(args, (tuple, list)):
            bound = self.template.bind(tuple(args))
        else:
            raise TemplateError(f"args of template {name!r} must be a tuple of its arguments "
                                f"{self.template.signature} or a dict of them, got "
                                f"{type(args).__name__}")
        if target is not None and not isinstance(target, (Target, str)):
            raise TemplateError(f"target must be a tvmlite.target.Target or a target name "
                                f"(e.g. 'x86_64-avx2'), got {type(target).__name__}")
        self.name, self.args, self._bound = name, args, bound
        try:
            self.target = Target.resolve(target, "target")
        except ValueError as e:
            raise TemplateError(f"target must be a tvmlite.Target or a target name: {e}") from None
        if isinstance(constants, str):
            constants = [c for c in constants.split(",") if c]
        if not isinstance(constants, (list, tuple)) or \
                not all(isinstance(c, str) for c in constants):
            raise TemplateError(f"constants of template {name!r} must be a list of input "
                                f"names, e.g. ['B'], got {constants!r}")
        self.space = ConfigSpace(self.target, tuple(dict.fromkeys(constants)))
        _, tensors = self.template.run(self.space, bound)
        self.workload = Workload.from_tensors(tensors, name, dict(bound.arguments))
        inputs = [t.name for t in tensors if isinstance(t.op, te.PlaceholderOp)]
        for c in self.space.constants:
            if c not in inputs:
                raise TemplateError(f"constants of template {name!r}: {c!r} is not an input "
                                    f"of its compute; its inputs are {inputs}")

    def instantiate(self, config: Config) -> tuple[Schedule, list]:
        """(schedule, tensors) of the template at ``config`` (a config of ``self.space``)."""
        if not isinstance(config, Config) or config.space is not self.space:
            raise SpaceError(f"instantiate(config=...) needs a Config of this task's space "
                             f"(task.space.get(i), .random_config(rng), .fallback()), got "
                             f"{type(config).__name__}")
        s, tensors = self.template.run(config, self._bound)
        if workload_key(tensors) != self.workload.key:
            raise TemplateError(f"template {self.name!r} built another compute for config "
                                f"#{config.index} than for its fallback: knobs may change the "
                                "schedule only (pack with cache_read, not a new compute)")
        return s, tensors

    def measure_input(self, config: Config) -> MeasureInput:
        """The candidate to measure: its Steps, and the config beside them in the record."""
        s, _ = self.instantiate(config)
        decisions = {"template": self.name, "config": config.to_json()}
        if self.space.constants:    # replay exports a constant input's pack API from this
            decisions["constants"] = list(self.space.constants)
        return MeasureInput(self.workload, tuple(s.steps), decisions)

    def config_of(self, record: Record) -> Config | None:
        """The config of a record of this task (same workload and template), or None."""
        d = record.decisions
        if record.workload.key != self.workload.key or not isinstance(d, dict) \
                or d.get("template") != self.name:
            return None
        return Config.from_json(self.space, d.get("config"))

    def __repr__(self) -> str:
        return f"TemplatedTask({self.name}, {self.workload!r}, {len(self.space)} configs)"


def create(name: str, args: Any, target: Any = None, constants: Any = ()) -> TemplatedTask:
    """The task of template ``name`` at ``args`` (a tuple, or a dict by name) for
    ``target`` (a Target, a target name such as "aarch64-neon", or None: this machine).
    ``constants`` names inputs that are constant in deployment (weights): a template
    that packs such an input (matmul's B) then offers, in its packing knob, to pre-pack
    it once outside the kernel (``s.prepack``)."""
    values = args.values() if isinstance(args, dict) else \
        args if isinstance(args, (tuple, list)) else ()
    symbolic = [v.name for v in values if isinstance(v, SizeVar)]
    if symbolic:
        raise ValueError(f"templated.create({name!r}): {', '.join(symbolic)} is a symbolic size "
                         f"(te.var); templates tune fixed sizes. Tune a range with the "
                         f"template-free SearchTask(..., shapes={{'{symbolic[0]}': (lo, hi)}})")
    return TemplatedTask(name, args, target, constants)


# -- the dispatch context ---------------------------------------------------------------

_DISPATCH: contextvars.ContextVar[Any] = contextvars.ContextVar("tvmlite_template_dispatch",
                                                                 default=None)


class apply_history_best:
    """``with apply_history_best(log):`` makes templates called inside use the best
    record of the log (a path or a list of Records), and ``tvmlite.build(graph)`` the
    best template-free record of each fused kernel, found by its workload key
    (``records.graph_lookup``). Contexts nest: a template or kernel not found in the
    inner log is looked up in the outer one."""

    def __init__(self, records: str | os.PathLike | Iterable[Record]):
        if isinstance(records, (str, os.PathLike)):
            records = load_records(records)
        elif isinstance(records, Iterable):
            records = list(records)
        else:
            raise TypeError(f"apply_history_best(records=...) takes a log path or a list of "
                            f"Records, got {type(records).__name__}")
        if not all(isinstance(r, Record) for r in records):
            raise TypeError("apply_history_best(records=...): every item must be a "
                            "search.record.Record (load_records(path) gives them)")
        self._by_key: dict[str, list[Record]] = {}
        for r in records:
            d = r.decisions
            if r.result.ok and isinstance(d, dict) and isinstance(d.get("template"), str):
                self._by_key.setdefault(r.workload.key, []).append(r)
        self._tokens: list = []
        self._records = records   # template-free ones serve tvmlite.build(graph)
        self._graph_tokens: list = []

    def lookup(self, task: TemplatedTask) -> tuple[Config, Record] | None:
        """(config, record) of the best usable record of ``task`` (``best_first``: real
        timings before emulated ones, then the fastest): tuned on a target like the
        task's, else (with a TargetMismatchWarning) on any; then outer contexts."""
        mine = best_first(r for r in self._by_key.get(task.workload.key, ())
                          if r.decisions["template"] == task.name)   # ties: the earliest
        here = [r for r in mine if r.target.same_cpu(task.target)]
        elsewhere = [r for r in mine if not r.target.same_cpu(task.target)]
        for group, warn in ((here, False), (elsewhere, True)):
            stale = []
            for r in group:
                try:
                    config = task.config_of(r)
                except SpaceError as err:
                    stale.append(str(err))
                    continue
                if config is None:      # not a record of this template and workload
                    continue
                if stale:
                    warnings.warn(f"template {task.name!r}: skipped {len(stale)} faster "
                                  f"record(s) whose config no longer fits its space ("
                                  f"{stale[0]})", RecordWarning, stacklevel=3)
                if warn:
                    warnings.warn(f"template {task.name!r}: no record of {task.workload!r} "
                                  f"was tuned for this target ({task.target.arch}); using one "
                                  f"tuned on {r.target.arch} with features "
                                  f"{' '.join(r.target.features) or '(none)'}",
                                  TargetMismatchWarning, stacklevel=3)
                return config, r
        parent = self._parents[-1] if self._parents else None
        return parent.lookup(task) if parent is not None else None

    @property
    def _parents(self) -> list:
        return [t.old_value if t.old_value is not contextvars.Token.MISSING else None
                for t in self._tokens]

    def __enter__(self) -> "apply_history_best":
        self._tokens.append(_DISPATCH.set(self))
        self._graph_tokens.append(set_lookup(GraphLookup(self._records, current_lookup())))
        return self

    def __exit__(self, *exc: Any) -> None:
        reset_lookup(self._graph_tokens.pop())
        _DISPATCH.reset(self._tokens.pop())
