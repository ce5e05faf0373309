"""Names a package imports on first use (PEP 562).

Several packages keep their imports lazy for one reason: a process that needs a little
of tvmlite must not load the rest. The measuring worker, started once per tuning and
again after every crash, needs the arrays and the loader, not the operators or the
compiler pipeline. ``tvmlite.search`` should not load xgboost until a search runs, and
the interpreter should not load scipy until it is used. Lazy imports also break import
cycles, for instance te → schedule → te. Each such package sets
``__getattr__ = lazy_getattr(__name__, {...})``.
"""
from __future__ import annotations

import importlib
from typing import Any, Callable, Mapping

__all__ = ["lazy_getattr"]


def lazy_getattr(package: str, names: Mapping[str, str],
                 modules: Mapping[str, str] | None = None) -> Callable[[str], Any]:
    """A module ``__getattr__`` for ``package``. ``names`` maps each name to the module
    that defines it, and ``modules`` maps a name to a module returned whole (a
    sub-package or an alias). A module path starting with "." is relative to
    ``package``."""
    modules = dict(modules or {})

    def load(path: str) -> Any:
        return importlib.import_module(path, package if path.startswith(".") else None)

    def __getattr__(name: str) -> Any:
        if name in names:
            return getattr(load(names[name]), name)
        if name in modules:
            return load(modules[name])
        raise AttributeError(f"module {package!r} has no attribute {name!r}")
    return __getattr__
