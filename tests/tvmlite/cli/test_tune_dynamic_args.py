"""``tvmlite tune OP M=LO..HI``: a size range makes that argument a te.var."""
from __future__ import annotations

import pytest

from tvmlite.cli.args import UsageError
from tvmlite.cli.tune import dynamic_params
from tvmlite.ir.symbolic import SizeVar


def test_range_becomes_a_symbolic_size():
    kwargs, shapes = dynamic_params({"M": "1..2048", "N": 1024, "K": 1024})
    assert isinstance(kwargs["M"], SizeVar) and kwargs["M"].name == "M"
    assert kwargs["N"] == 1024 and shapes == {"M": (1, 2048)}
    assert dynamic_params({"M": 64, "dtype": "float32"}) == ({"M": 64, "dtype": "float32"}, None)


def test_bad_range_is_a_usage_error():
    with pytest.raises(UsageError, match="1 <= LO <= HI"):
        dynamic_params({"M": "10..2"})
