"""The dispatcher's C: golden snapshots (the exported text must not change by accident),
its timer is codegen's timer, and the declarations records build for the header."""
from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from tvmlite import te
from tvmlite.codegen_c.dispatch import dispatcher_c, variant_name
from tvmlite.codegen_c.signature import timer_lines
from tvmlite.runtime.module import generate_c
from tvmlite.schedule.schedule import Schedule
from tvmlite.search.records.dispatch import DispatchTable, dispatcher_source
from tvmlite.search.records.workload import Workload
from tvmlite.target.target import Target

GOLDEN = Path(__file__).parent / "golden"


def _func(wl: Workload, name: str):
    s = Schedule.from_steps(wl.outputs, ())
    func, _, _ = generate_c(s, list(wl.tensors), Target.host(), variant_name(name, 0))
    return replace(func, name=name), [t.name for t in wl.outputs]


def test_dispatcher_of_two_variants_matches_its_golden_file():
    wl = Workload.from_op("matmul", te.var("M"), 64, 64)
    func, outputs = _func(wl, "mm")
    src = dispatcher_c("mm", func, outputs, "M", ((1, 40, 0), (41, None, 1)), 2)
    assert src == (GOLDEN / "dispatch_mm.c").read_text()
    table = DispatchTable("M", ((), ()), ((1, 40, 0), (41, None, 1)), {})
    assert dispatcher_source("mm", func, table, outputs) == src


def test_dispatcher_whose_output_is_named_like_the_kernel_matches_its_golden_file():
    wl = Workload.from_op("conv2d_nhwc", te.var("N"), 6, 6, 8, 16, 3, 1, 1)
    func, outputs = _func(wl, "conv2d_nhwc")
    src = dispatcher_c("conv2d_nhwc", func, outputs, "N", ((1, None, 0),), 1)
    assert src == (GOLDEN / "dispatch_conv2d_nhwc.c").read_text()


def test_dispatcher_times_itself_with_the_kernels_timer():
    wl = Workload.from_op("matmul", te.var("M"), 64, 64)
    func, outputs = _func(wl, "mm")
    src = dispatcher_c("mm", func, outputs, "M", ((1, None, 0),), 1)
    names = ["M", "tvmlite_a0", "tvmlite_a1", "tvmlite_a2"]
    timer = timer_lines("mm", "int64_t M, const float* tvmlite_a0, const float* tvmlite_a1, "
                        "float* tvmlite_a2", names)
    assert "\n".join(timer) in src
