"""tvmlite/checks.py: the one int/number range check, and the messages it gives."""
from __future__ import annotations

import math

import pytest

from tvmlite.checks import check_int, check_number, describe_range, is_int, is_number
from tvmlite.schedule.state import ScheduleError


def test_is_int_refuses_bools_floats_and_out_of_range():
    assert is_int(3) and is_int(0, 0) and is_int(5, 1, 5) and is_int(-2**70)
    for bad in (True, False, 3.0, "3", None):
        assert not is_int(bad)
    assert not is_int(0, 1) and not is_int(6, 1, 5)


def test_is_number_refuses_bools_and_nan_and_honours_open_bounds():
    assert is_number(0.5, 0, 1) and is_number(2) and is_number(math.inf, 0)
    assert not is_number(True) and not is_number(math.nan) and not is_number("1")
    assert is_number(0, 0) and not is_number(0, 0, lo_open=True)
    assert not is_number(1.5, 0, 1) and not is_number(math.inf, 0, 10)


@pytest.mark.parametrize("kind,lo,hi,lo_open,text", [
    ("int", 1, None, False, "a positive int"),
    ("int", 0, None, False, "a non-negative int"),
    ("int", 2, None, False, "an int >= 2"),
    ("int", 0, 7, False, "an int in [0, 7]"),
    ("int", None, 3, False, "an int <= 3"),
    ("number", 0, None, True, "a positive number"),
    ("number", 0, 1, False, "a number in [0, 1]"),
    ("number", 1, None, False, "a number >= 1"),
])
def test_the_range_is_said_in_words(kind, lo, hi, lo_open, text):
    assert describe_range(kind, lo, hi, lo_open) == text


def test_check_int_returns_the_value_or_raises_naming_what_and_the_range():
    assert check_int(4, "n", 1) == 4
    with pytest.raises(ValueError, match=r"^LocalRunner\(repeat=\.\.\.\) must be a positive "
                                         r"int, got True$"):
        check_int(True, "LocalRunner(repeat=...)", 1)
    with pytest.raises(ScheduleError, match=r"factor must be an int in \[1, 8\], got 9"):
        check_int(9, "factor", 1, 8, error=ScheduleError)
    assert check_int(None, "n_threads", 1, allow_none=True) is None
    with pytest.raises(ValueError, match="must be None or a positive int"):
        check_int(0, "n_threads", 1, allow_none=True)


def test_check_number_returns_the_value_or_raises():
    assert check_number(0.25, "p", 0, 1) == 0.25
    with pytest.raises(ValueError, match=r"timeout must be a positive number, got 0"):
        check_number(0, "timeout", 0, lo_open=True)
    with pytest.raises(ValueError, match="nan"):
        check_number(math.nan, "p", 0, 1)


def test_call_sites_keep_their_exception_types():
    """A few of the places that used to check by hand, through their public API."""
    from tvmlite import ops
    from tvmlite.search.measure.runner import LocalRunner
    from tvmlite.search.options import TuningOptions
    from tvmlite.search.templated.space import ConfigSpace, SpaceError
    with pytest.raises(ValueError, match="matmul: M must be a positive int or a te.var, got True"):
        ops.matmul(True, 4, 4)
    with pytest.raises(ValueError, match=r"LocalRunner\(timeout=\.\.\.\)"):
        LocalRunner(timeout=0)
    with pytest.raises(ValueError, match=r"TuningOptions.eps_greedy must be a number in"):
        TuningOptions(eps_greedy=1.5)
    with pytest.raises(SpaceError, match="num_outputs must be an int in"):
        ConfigSpace().define_split("t", 8, num_outputs=True)
