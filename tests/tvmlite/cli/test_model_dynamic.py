"""--shape NAME=1,1..512: a range makes a dimension symbolic; the symbolic tuning's
helpers (the lengths timed, the feeds at a size, the per-task lines)."""
from __future__ import annotations

import argparse

import pytest

from tvmlite.cli.model import format_shape, parse_shape
from tvmlite.cli.model_dynamic import lengths_to_time


def test_parse_shape_reads_ranges():
    assert parse_shape("input_ids=1,1..512") == ("input_ids", (1, (1, 512)))
    assert parse_shape("x=1,3,224,224") == ("x", (1, 3, 224, 224))
    assert format_shape((1, (1, 512), 768)) == "1,1..512,768"
    for bad in ("x=1,..4", "x=1,2..", "x=1;2", "x="):
        with pytest.raises(argparse.ArgumentTypeError, match="LO..HI"):
            parse_shape(bad)


def test_lengths_to_time_are_the_ends_and_the_middle():
    assert lengths_to_time(1, 512) == [1, 23, 512]
    assert lengths_to_time(5, 5) == [5]


def test_feeds_at_a_size():
    np = pytest.importorskip("numpy")
    from tvmlite import te
    from tvmlite.cli.model_dynamic import feeds_at
    from tvmlite.graph.ir import Graph, Node, TensorType
    L = te.var("L")
    g = Graph((Node("relu", ("x",), ("y",)),), ("x", "ids"), ("y",),
              {"x": TensorType((1, L, 4), "float32"), "ids": TensorType((1, L), "int64"),
               "y": TensorType((1, L, 4), "float32")}, sizes=(("L", 1, 8),))
    f = feeds_at(g, {"L": 3})
    assert f["x"].shape == (1, 3, 4) and f["ids"].dtype == np.int64 and not f["ids"].any()
