"""The dispatch context ``tvmlite.build(graph)`` asks for each kernel's record.

tvmlite core does not import the search: the search's ``apply_history_best`` installs a
lookup here with ``use_lookup`` (a context manager), and the build calls
``current_lookup()(workload_key, tensors, target)``, which returns the record's
``(schedule, record)`` or None (then the kernel gets its default schedule). Contexts
nest: the innermost lookup is asked first, and it may ask the one it replaced."""
from __future__ import annotations

import contextlib
import contextvars
from typing import Any, Callable, Iterator, Optional

__all__ = ["Lookup", "current_lookup", "use_lookup", "set_lookup", "reset_lookup"]

Lookup = Callable[[str, Any, Any], Optional[tuple]]

_LOOKUP: contextvars.ContextVar[Lookup | None] = contextvars.ContextVar(
    "tvmlite_graph_lookup", default=None)


def current_lookup() -> Lookup | None:
    """The innermost lookup installed, or None."""
    return _LOOKUP.get()


@contextlib.contextmanager
def use_lookup(lookup: Lookup) -> Iterator[Lookup | None]:
    """Install ``lookup`` for the block; yields the lookup it shadows."""
    outer = _LOOKUP.get()
    token = _LOOKUP.set(lookup)
    try:
        yield outer
    finally:
        _LOOKUP.reset(token)


def set_lookup(lookup: Lookup) -> contextvars.Token:
    """Install ``lookup`` until ``reset_lookup(token)`` (for a class-based context such
    as ``apply_history_best``)."""
    return _LOOKUP.set(lookup)


def reset_lookup(token: contextvars.Token) -> None:
    """Restore the lookup ``set_lookup`` replaced."""
    _LOOKUP.reset(token)
