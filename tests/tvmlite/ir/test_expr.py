"""Expression nodes pickle and deepcopy without their memos: a Var whose linear form the
simplifier remembered (a dict keyed by the Var itself) comes back whole."""
from __future__ import annotations

import copy
import pickle

from tvmlite.ir.expr import BinOp, Const, Var
from tvmlite.ir.simplify import linear


def test_nodes_with_memos_pickle_and_deepcopy():
    h = Var("h")
    e = BinOp("+", BinOp("*", h, Const(2)), Const(1))
    hash(e)
    assert linear(h) == ({h: 1}, 0) and "_linear" in h.__dict__
    for back in (pickle.loads(pickle.dumps((h, e))), copy.deepcopy((h, e))):
        h2, e2 = back
        assert h2.name == "h" and h2 == h and hash(h2) == hash(h)
        assert e2 == e and "_linear" not in h2.__dict__
        assert linear(e2) == ({h2: 2}, 1)
