"""Tiles of a symbolic axis (search/template_free/loose.py): from the target's options and
the tuned size's divisors, never only the latter, and bounded by LOOSE_COVER."""
import random

import numpy as np
import pytest

from tvmlite.search.template_free.loose import (
    LOOSE_COVER,
    loose_choices,
    loose_options,
    sample_loose_factors,
)


def test_loose_options_read_the_register_file():
    assert loose_options(32)[:17] == list(range(1, 17)) + [24]
    assert loose_options(16)[:10] == list(range(1, 9)) + [12, 16]
    assert 4096 in loose_options(16) and 8192 not in loose_options(16)
    assert loose_options(32, innermost=False)[:7] == [1, 2, 3, 4, 6, 8, 12]


@pytest.mark.parametrize("extent,parts", [(1, 4), (3, 4), (7, 4), (21, 4), (53, 4), (1024, 2)])
def test_loose_factors_do_not_follow_the_extent(extent, parts):
    """A symbolic axis's tiles come from the target's options (with the perfect tiles of
    the size tuned at, not only those: at 53, a prime, they would be 1 and 53): the whole
    tile below LOOSE_COVER times the extent, the innermost at most the limit."""
    rng = random.Random(0)
    upper = set(loose_options(32, innermost=False))
    innermost = set()
    for _ in range(300):
        f = sample_loose_factors(extent, parts, rng, 32, 16, multiple_of=1)
        assert len(f) == parts - 1
        for i, d in enumerate(f):
            assert d in (upper if i < len(f) - 1 else set(loose_options(32))) or extent % d == 0
        assert int(np.prod(f)) < LOOSE_COVER * extent and f[-1] <= 16
        innermost.add(f[-1])
    if extent > 16:
        assert innermost == set(range(1, 17))
    assert sample_loose_factors(9, 2, rng, 32, 64, multiple_of=16) == [16]
    assert loose_choices(7, 1, False, 32) == [1, 2, 3, 4, 6, 7, 8, 12]
    assert loose_choices(53, 1, True, 32, limit=64)[-3:] == [48, 53, 64]
