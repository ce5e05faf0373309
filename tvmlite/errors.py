"""The root of every exception and warning tvmlite defines.

``except tvmlite.TvmliteError`` catches anything tvmlite raised on purpose: a user's
mistake named with its fix (a bad argument, an illegal schedule, a log that cannot be
read) or a failure it detected (a compiler that is missing or failed, a runner that cannot
measure). Each class also derives from the builtin it stood for before the tree existed
(``ScheduleError`` is still a ``ValueError``, ``CompileError`` a ``RuntimeError``), so
existing ``except ValueError`` clauses keep working. Warnings derive from
``TvmliteWarning``, itself a ``TvmliteError`` and a ``UserWarning``: one ``-W error``
filter or one ``except`` clause covers both kinds.

The classes stay in the modules of the concept they belong to; this module only holds
the two roots, so that it imports nothing and anything can import it.
"""
from __future__ import annotations

__all__ = ["TvmliteError", "TvmliteWarning"]


class TvmliteError(Exception):
    """Anything tvmlite raises on purpose."""


class TvmliteWarning(TvmliteError, UserWarning):
    """Anything tvmlite warns about on purpose."""
