"""lazy_getattr: a package's names and modules imported on first use, an unknown name
an AttributeError naming the package."""
import types

import pytest

from tvmlite.lazy import lazy_getattr


def test_names_and_modules_load_on_first_use_and_unknown_names_are_errors():
    get = lazy_getattr("tvmlite.graph", {"read": ".indexing", "sqrt": "math"},
                       {"passes": ".passes"})
    from tvmlite.graph.indexing import read
    assert get("read") is read and get("sqrt")(4.0) == 2.0
    assert isinstance(get("passes"), types.ModuleType) and get("passes").__name__ == \
        "tvmlite.graph.passes"
    with pytest.raises(AttributeError, match="module 'tvmlite.graph' has no attribute 'nope'"):
        get("nope")
