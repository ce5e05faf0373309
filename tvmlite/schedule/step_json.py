"""Steps from JSON: the validating reader of a tuning record's Step list.

Records come from elsewhere, so every field is checked (kind whitelist, no unknown keys,
identifiers, integer ranges, enumerated annotations/scopes/pragmas) before a Step is
built; anything odd is a ScheduleError naming the step kind and the field."""
from __future__ import annotations

from dataclasses import fields
from typing import Any

from tvmlite.schedule.prepack import ConstantStep, PrepackStep
from tvmlite.schedule.stage_steps import CacheReadStep, CacheWriteStep, RfactorStep
from tvmlite.schedule.state import ANNOTATIONS, ScheduleError
from tvmlite.schedule.steps import (
    PRAGMAS,
    AnnotateStep,
    ComputeAtStep,
    ComputeInlineStep,
    ComputeRootStep,
    FuseStep,
    PragmaStep,
    ReorderStep,
    SplitStep,
    check_ident,
    check_step_int,
)
from tvmlite.schedule.tensorize import TensorizeStep

STEP_KINDS = {cls.kind: cls for cls in (
    SplitStep, FuseStep, ReorderStep, AnnotateStep, PragmaStep, ComputeAtStep,
    ComputeInlineStep, ComputeRootStep, CacheWriteStep, CacheReadStep, RfactorStep,
    PrepackStep, ConstantStep, TensorizeStep)}

_NAME_FIELDS = {"stage", "iter", "target", "tensor", "intrinsic"}
_NAME_LIST_FIELDS = {"iters", "order", "readers"}


def step_from_json(d: Any):
    """Validate and build a Step from its JSON dict; raises ScheduleError on anything odd."""
    if not isinstance(d, dict):
        raise ScheduleError(f"a step must be a JSON object, got {type(d).__name__}")
    kind = d.get("kind")
    cls = STEP_KINDS.get(kind) if isinstance(kind, str) else None
    if cls is None:
        raise ScheduleError(f"unknown step kind {str(kind)[:40]!r}; known: {sorted(STEP_KINDS)}")
    names = {f.name for f in fields(cls)}
    extra = set(d) - names - {"kind"}
    if extra:
        raise ScheduleError(f"step {kind}: unknown keys {sorted(map(str, extra))[:5]}")
    args: dict = {}
    for f in fields(cls):
        if f.name not in d:
            if f.default is not f.default_factory:  # has a default
                continue
            raise ScheduleError(f"step {kind}: missing key {f.name!r}")
        v = d[f.name]
        if f.name in _NAME_FIELDS:
            v = check_ident(v, f"step {kind}: {f.name}")
        elif f.name in _NAME_LIST_FIELDS:
            if not isinstance(v, list) or len(v) > 64:
                raise ScheduleError(f"step {kind}: {f.name} must be a list of names")
            v = tuple(check_ident(x, f"step {kind}: {f.name}") for x in v)
        elif f.name in ("factor", "nparts"):
            v = None if v is None and kind != "prepack" else \
                check_step_int(v, f"step {kind}: {f.name}")
        elif f.name == "value":
            v = check_step_int(v, f"step {kind}: value", 0, 1 << 16)
        elif f.name == "group":
            v = check_step_int(v, f"step {kind}: group", 1, 64)
        elif f.name in ("dim", "group_dim"):
            v = check_step_int(v, f"step {kind}: {f.name}", 0, 64)
        elif f.name == "factor_axis":
            v = check_step_int(v, f"step {kind}: factor_axis", 0, 64)
        elif f.name in ("annotation", "scope", "key"):
            allowed = {"annotation": ANNOTATIONS, "scope": ("local", "global"),
                       "key": PRAGMAS}[f.name]
            if v not in allowed:
                raise ScheduleError(f"step {kind}: {f.name} must be one of {allowed}, "
                                    f"got {str(v)[:40]!r}")
        args[f.name] = v
    return cls(**args)
