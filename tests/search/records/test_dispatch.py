"""A dispatch table's C parts: the dispatcher and the declarations of it and its variants
(the header replay exports) stay byte-identical to the golden files."""
from __future__ import annotations

from pathlib import Path

from tvmlite import te
from tvmlite.search.records.dispatch import DispatchTable, _parts
from tvmlite.search.records.workload import Workload
from tvmlite.target.target import Target

GOLDEN = Path(__file__).parents[2] / "codegen_c" / "golden"


def test_records_declare_the_dispatcher_and_every_variant():
    wl = Workload.from_op("matmul", te.var("M"), 64, 64)
    table = DispatchTable("M", ((), ()), ((1, 40, 0), (41, None, 1)), {})
    variants, _, src, decl, _ = _parts(wl, table, Target.host(), "mm")
    assert [v[0] for v in variants] == ["mm_v0", "mm_v1"]
    assert src == (GOLDEN / "dispatch_mm.c").read_text()
    assert decl == (GOLDEN / "dispatch_mm.h").read_text()
