"""Every exception and warning tvmlite defines derives from TvmliteError (issue 27)."""
from __future__ import annotations

import importlib
import inspect
import pkgutil

import pytest

import tvmlite
from tvmlite.errors import TvmliteError, TvmliteWarning


def _modules() -> list[str]:
    """Every module of the installed packages, walked one level at a time (the checkout's
    tvmlite.__path__ also holds the repository root, which walk_packages would recurse
    into)."""
    names, todo = {"tvmlite"}, ["tvmlite.search", "tvmlite.codegen_c", "tvmlite.schedules"]
    todo += [f"tvmlite.{m.name}" for m in pkgutil.iter_modules(tvmlite.__path__[:1]) if m.ispkg]
    while todo:
        pkg = todo.pop()
        if pkg in names:
            continue
        names.add(pkg)
        for m in pkgutil.iter_modules(importlib.import_module(pkg).__path__):
            full = f"{pkg}.{m.name}"
            if m.ispkg:
                todo.append(full)
            elif m.name != "__main__":
                names.add(full)
    return sorted(names)


def _defined_exceptions() -> list[type]:
    found = {}
    for name in _modules():
        mod = importlib.import_module(name)
        for _, obj in inspect.getmembers(mod, inspect.isclass):
            # a KeyboardInterrupt of ours (SIGTERM in the CLI) must stay outside Exception
            if issubclass(obj, Exception) and obj.__module__.startswith("tvmlite"):
                found[f"{obj.__module__}.{obj.__qualname__}"] = obj
    return list(found.values())


def test_every_exception_derives_from_tvmlite_error() -> None:
    classes = _defined_exceptions()
    assert len(classes) > 15
    stray = [c.__qualname__ for c in classes if not issubclass(c, TvmliteError)]
    assert not stray, f"not under TvmliteError: {stray}"
    warnings = [c for c in classes if issubclass(c, Warning)]
    assert warnings and all(issubclass(c, TvmliteWarning) for c in warnings)


def test_the_builtins_they_stood_for_still_catch_them() -> None:
    assert issubclass(tvmlite.ScheduleError, ValueError)
    assert issubclass(tvmlite.CompilerNotFoundError, RuntimeError)
    assert issubclass(TvmliteWarning, UserWarning)


def test_a_user_mistake_is_caught_as_tvmlite_error() -> None:
    s = tvmlite.te.create_schedule(tvmlite.ops.relu(8)[-1].op)
    with pytest.raises(TvmliteError, match="factor"):
        s[s.outputs[0]].split(s[s.outputs[0]].op.axis[0], factor=0)
