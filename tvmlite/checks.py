"""The one check of "an int that is not a bool, in range" and of "a number in range".

Arguments reach tvmlite from users, from edited logs and from the command line, so the
same two questions are asked everywhere: is this a Python ``int`` (``True`` is an int to
Python, never a loop count to us) within bounds, and is this a real number (not a bool,
not NaN) within bounds. ``is_int`` / ``is_number`` answer them; ``check_int`` /
``check_number`` raise an error naming ``what`` and the accepted range, as the exception
type the caller chooses (ValueError, ScheduleError, SpaceError, ...).
"""
from __future__ import annotations

import math
from typing import Any

__all__ = ["is_int", "is_number", "check_int", "check_number", "describe_range"]


def is_int(value: Any, lo: int | None = None, hi: int | None = None) -> bool:
    """Is ``value`` an int, not a bool, with ``lo <= value <= hi`` (each bound optional)?"""
    return (isinstance(value, int) and not isinstance(value, bool)
            and (lo is None or value >= lo) and (hi is None or value <= hi))


def is_number(value: Any, lo: float | None = None, hi: float | None = None, *,
              lo_open: bool = False) -> bool:
    """Is ``value`` an int or float, not a bool and not NaN, within [lo, hi] (or (lo, hi]
    with ``lo_open``)? Infinity passes when no bound excludes it."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value):
        return False
    if lo is not None and not (value > lo if lo_open else value >= lo):
        return False
    return hi is None or value <= hi


def describe_range(kind: str, lo: float | None, hi: float | None, lo_open: bool = False) -> str:
    """``"an int >= 2"``, ``"a number in [0, 1]"``, ``"a positive int"`` (>= 1),
    ``"a positive number"`` (> 0), ``"a non-negative ..."`` (>= 0): what a check accepts."""
    article = "an" if kind[0] in "aeiou" else "a"
    if hi is None and lo == 0:
        return f"a {'positive' if lo_open else 'non-negative'} {kind}"
    if hi is None and lo == 1 and kind == "int":
        return "a positive int"
    if lo is not None and hi is not None:
        return f"{article} {kind} in {'(' if lo_open else '['}{lo}, {hi}]"
    if lo is not None:
        return f"{article} {kind} {'>' if lo_open else '>='} {lo}"
    if hi is not None:
        return f"{article} {kind} <= {hi}"
    return f"{article} {kind}"


def check_int(value: Any, what: str, lo: int | None = None, hi: int | None = None, *,
              error: type[Exception] = ValueError, allow_none: bool = False) -> Any:
    """``value`` if ``is_int(value, lo, hi)`` (or it is None and ``allow_none``); else
    ``error("{what} must be an int in [lo, hi], got {value!r}")``."""
    if (allow_none and value is None) or is_int(value, lo, hi):
        return value
    accepted = describe_range("int", lo, hi)
    raise error(f"{what} must be {'None or ' if allow_none else ''}{accepted}, got {value!r}")


def check_number(value: Any, what: str, lo: float | None = None, hi: float | None = None, *,
                 lo_open: bool = False, error: type[Exception] = ValueError,
                 allow_none: bool = False) -> Any:
    """``value`` if ``is_number(value, lo, hi, lo_open=lo_open)`` (or None with
    ``allow_none``); else ``error("{what} must be a number > 0, got {value!r}")``."""
    if (allow_none and value is None) or is_number(value, lo, hi, lo_open=lo_open):
        return value
    accepted = describe_range("number", lo, hi, lo_open)
    raise error(f"{what} must be {'None or ' if allow_none else ''}{accepted}, got {value!r}")
