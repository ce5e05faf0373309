"""No public function or class a package exports shares its name with a submodule of
that package: importing the submodule (``import tvmlite.search.replay`` once did) sets
the package attribute to the module, and the exported function stops being callable."""
from __future__ import annotations

import importlib
import inspect
import pkgutil

import tvmlite

ROOTS = ("tvmlite", "tvmlite.search", "tvmlite.schedules", "tvmlite.codegen_c")


# in a source checkout tvmlite.__path__ also holds the checkout root (for codegen_c/,
# schedules/, search/), where these folders are not part of the package
NOT_PACKAGES = {"tvmlite", "tests", "bench", "examples", "tuning_logs"}


def _packages() -> list:
    """Every package under the roots, walked one level at a time."""
    seen: dict = {}
    todo = list(ROOTS)
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        pkg = seen[name] = importlib.import_module(name)
        todo += [f"{name}.{m.name}" for m in pkgutil.iter_modules(pkg.__path__)
                 if m.ispkg and m.name not in NOT_PACKAGES]
    return list(seen.values())


def _submodules(pkg) -> set:
    return {m.name for m in pkgutil.iter_modules(pkg.__path__)
            if m.name not in NOT_PACKAGES and m.name != "__main__"}


def _exported(pkg) -> set:
    names = set(getattr(pkg, "__all__", ()))
    names |= set(getattr(pkg, "_EXPORTS", {}))  # lazily exported names (PEP 562)
    return {n for n in names if not n.startswith("_")}


def test_no_exported_name_is_also_a_submodule():
    clashes = []
    packages = _packages()
    assert {p.__name__ for p in packages} >= {"tvmlite.search", "tvmlite.search.records",
                                              "tvmlite.search.templated", "tvmlite.te"}
    for pkg in packages:
        subs = _submodules(pkg)
        for name in _exported(pkg) & subs:
            importlib.import_module(f"{pkg.__name__}.{name}")  # the import that broke it
            lazy = name in getattr(pkg, "_EXPORTS", {})
            if lazy or not inspect.ismodule(getattr(pkg, name)):
                clashes.append(f"{pkg.__name__}.{name}")
    assert not clashes, f"exported names that are also submodules: {clashes}"


def test_every_exported_name_resolves_to_a_function_class_or_module():
    for pkg in _packages():
        for name in _exported(pkg):
            assert getattr(pkg, name) is not None, f"{pkg.__name__}.{name}"


def test_search_replay_stays_the_function_after_importing_every_submodule():
    search = tvmlite.search
    for pkg in _packages():
        for sub in _submodules(pkg):
            importlib.import_module(f"{pkg.__name__}.{sub}")
    assert inspect.isfunction(search.replay) and search.replay.__name__ == "replay"
    assert inspect.isclass(search.SearchTask) and inspect.isclass(search.XGBTuner)
