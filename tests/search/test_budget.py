"""search.budget.split_budget: a model's budget over static and dynamic tasks, by
weight times the measurements a candidate costs (one per size of a dynamic task)."""
from __future__ import annotations

from types import SimpleNamespace

import pytest

from tvmlite.search.budget import split_budget


def task(weight: int, sizes: int = 0) -> SimpleNamespace:
    return SimpleNamespace(weight=weight, dynamic=bool(sizes), sizes=list(range(sizes)))


def test_shares_follow_weight_times_sizes_and_sum_to_the_budget():
    tasks = [task(2), task(1), task(1, sizes=5)]     # raw 2 : 1 : 5
    shares = split_budget(tasks, 80)
    assert sum(shares) == 80
    assert shares[:2] == [20, 10] and shares[2] == 50


def test_a_dynamic_task_gets_one_measurement_per_size_at_least():
    tasks = [task(50), task(1, sizes=8)]
    shares = split_budget(tasks, 20)
    assert sum(shares) == 20 and shares[1] >= 8 and shares[0] >= 1


def test_a_budget_below_the_floors_says_how_much_is_needed():
    with pytest.raises(ValueError, match="need at least 9"):
        split_budget([task(1), task(1, sizes=8)], 5)
    with pytest.raises(ValueError, match="positive int"):
        split_budget([task(1)], 0)
    assert split_budget([], 10) == []
