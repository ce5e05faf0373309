"""Whole-graph decisions: the layout chosen by measuring (both layouts give onnxruntime's
outputs; the decision logic with injected timers, the noise rule, the given and
unmeasured paths), fused kernels split back by an injected kernel timer, and the
decisions printed as data."""
from __future__ import annotations

import numpy as np
import pytest

from tvmlite.frontend import from_onnx
from tvmlite.graph import GraphError, Node, TensorType
from tvmlite.graph.build import build_graph
from tvmlite.graph.decisions import (
    GraphDecisions,
    SplitMeasure,
    decide_layout,
    decide_splits,
    optimize_in,
    prepacked_weights,
    split_candidates,
)
from tvmlite.graph.ir import Graph
from tvmlite.search.measure.protocol import MeasureConfig


def fixed_timer(seconds, seen=None):
    """A ModelTimer giving ``seconds[layout]``; records each module's outputs in ``seen``."""
    def timer(mods, feeds):
        if seen is not None:
            seen.extend((m.graph.layout, m.run(feeds)) for m in mods)
        return [seconds[m.graph.layout] for m in mods]
    return timer


def test_both_layouts_match_onnxruntime_and_the_faster_is_kept(silu_conv_model, outputs_close):
    m, feeds, ref = silu_conv_model
    g = from_onnx(m)
    seen: list = []
    chosen, d = decide_layout(g, timer=fixed_timer({"NCHW": 1.0e-3, "NHWC": 2.0e-3}, seen),
                              feeds=feeds)
    assert sorted(layout for layout, _ in seen) == ["NCHW", "NHWC"]
    for _, outs in seen:
        assert outputs_close(outs, ref)
    assert chosen.layout == "NCHW" and chosen.kernels is not None
    assert d.layout == "NCHW" and d.layout_how == "measured"
    assert dict(d.layout_seconds) == {"NCHW": 1.0e-3, "NHWC": 2.0e-3}
    assert "layout:   NCHW (measured 2.00x faster than NHWC" in d.layout_line()
    chosen, d = decide_layout(g, timer=fixed_timer({"NCHW": 2.0e-3, "NHWC": 1.0e-3}))
    assert chosen.layout == d.layout == "NHWC"


def test_a_layout_within_the_noise_does_not_replace_nhwc(silu_conv_model):
    g = from_onnx(silu_conv_model[0])
    _, d = decide_layout(g, timer=fixed_timer({"NCHW": 0.99e-3, "NHWC": 1.0e-3}), noise=0.03)
    assert d.layout == "NHWC" and "within the noise" in d.layout_line()


def test_given_unmeasured_and_nothing_to_choose(silu_conv_model):
    g = from_onnx(silu_conv_model[0])
    chosen, d = decide_layout(g, layout="nchw")
    assert chosen.layout == d.layout == "NCHW" and d.layout_how == "given"
    chosen, d = decide_layout(g, measure=False)
    assert chosen.layout == "NHWC" and d.layout_how.startswith("default")
    plain = Graph((Node("relu", ("x",), ("y",)),), ("x",), ("y",),
                  {"x": TensorType((4,), "float32"), "y": TensorType((4,), "float32")})
    _, d = decide_layout(plain, timer=lambda mods, feeds: pytest.fail("timed"))
    assert d.layout_how.startswith("nothing to choose")


def test_bad_layout_and_bad_timer_are_clear_errors(silu_conv_model):
    g = from_onnx(silu_conv_model[0])
    with pytest.raises(GraphError, match="layout must be 'auto' or one of"):
        decide_layout(g, layout="NCHW16c")
    with pytest.raises(GraphError, match="optimized already"):
        decide_layout(optimize_in(g, "NHWC"))
    with pytest.raises(TypeError, match="must return 2 non-negative numbers"):
        decide_layout(g, timer=lambda mods, feeds: [1.0])


def test_the_protocol_timer_runs(silu_conv_model):
    g = from_onnx(silu_conv_model[0])
    cfg = MeasureConfig(number=1, repeat=1, min_repeat_ms=0)
    _, d = decide_layout(g, config=cfg)
    assert d.layout in ("NCHW", "NHWC") and len(d.layout_seconds) == 2


def kernel_timer(slow: set[str]):
    """A KernelTimer: 1 ms per kernel, 10 ms for the kernels of the fused module (the
    first) named in ``slow``."""
    def timer(mods, feeds):
        return [{k.name: 1e-2 if k.name in slow and i == 0 else 1e-3 for k in m.kernels}
                for i, m in enumerate(mods)]
    return timer


def test_a_fused_kernel_slower_than_its_parts_is_split_back(silu_conv_model, outputs_close):
    m, feeds, ref = silu_conv_model
    fused = optimize_in(from_onnx(m), "NHWC")
    groups = split_candidates(fused)
    assert groups and all(name.endswith("_conv") for grp in groups for name in grp)
    name = groups[0][0]
    split, d = decide_splits(fused, timer=kernel_timer({name}), feeds=feeds)
    # NHWC: the input's transpose, the conv, its bias + SiLU: three kernels of 1 ms
    assert d.split == (name,) and d.split_measures == (
        SplitMeasure((name,), 1e-2, 3e-3, True),)
    assert len(split.kernels) == len(fused.kernels) + 2
    assert {f"{name}_prologue", name, f"{name}_epilogue"} <= {k.name for k in split.kernels}
    assert "1 of 1 heavy fused kernel(s) split back" in d.split_line()
    mod = build_graph(split, quiet=True)
    assert outputs_close(mod.run(feeds), ref)
    with_packs = prepacked_weights(mod, d)
    assert with_packs.prepacked is not None and len(with_packs.prepacked) == len(split.kernels)
    assert with_packs.lines()[-1].startswith("weights:  pre-packed at load time in ")
    # the parts as slow as the fusion: kept fused
    kept, d = decide_splits(fused, timer=kernel_timer(set()))
    assert kept is fused and d.split == () and not d.split_measures[0].split


def test_a_split_needs_both_timings_to_agree(silu_conv_model):
    """A burst of other work during one timing does not split a kernel."""
    fused = optimize_in(from_onnx(silu_conv_model[0]), "NHWC")
    name = split_candidates(fused)[0][0]
    timers = iter([kernel_timer({name}), kernel_timer(set())])
    kept, d = decide_splits(fused, timer=lambda mods, feeds: next(timers)(mods, feeds))
    assert kept is fused and d.split == ()
    assert d.split_measures == (SplitMeasure((name,), 5.5e-3, 3e-3, False),)


def log_of_kernels(graph, names, path):
    """A log holding a record (the default schedule, 1 ms) of each kernel in ``names``:
    what a tuning of those kernels' tasks leaves."""
    from tvmlite.graph.kernel import default_schedule, kernel_compute
    from tvmlite.search.measure.inputs import MeasureInput, MeasureResult
    from tvmlite.search.records.record import append_record, make_record
    from tvmlite.search.records.workload import Workload
    from tvmlite.target.target import Target
    target = Target.host()
    for k in graph.kernels:
        if k.name in names:
            kc = kernel_compute(graph, k)
            wl = Workload.from_tensors(list(kc.tensors), name="graph_kernel")
            inp = MeasureInput(wl, default_schedule(kc, target).steps)
            append_record(path, make_record(inp, MeasureResult(costs=(1e-3,)), target))
    return path


def test_a_log_that_tuned_one_side_decides_the_split(silu_conv_model, tmp_path):
    """A tuning with --split auto tuned the parts (or the fused kernel): its compile under
    the log builds that side, whatever a new timing says, and says so."""
    from tvmlite import search
    fused = optimize_in(from_onnx(silu_conv_model[0]), "NHWC")
    name = split_candidates(fused)[0][0]
    split = decide_splits(fused, timer=kernel_timer({name}))[0]
    parts = [k.name for k in split.kernels if k.name.startswith(name)]
    with search.apply_history_best(str(log_of_kernels(split, parts, tmp_path / "p.jsonl"))):
        out, d = decide_splits(fused, timer=kernel_timer(set()))   # equal: would keep
    assert d.split == (name,) and d.split_measures[0].as_tuned
    assert "1 as the log tuned them" in d.split_line()
    assert {k.name for k in out.kernels} == {k.name for k in split.kernels}
    with search.apply_history_best(str(log_of_kernels(fused, [name], tmp_path / "f.jsonl"))):
        out, d = decide_splits(fused, timer=kernel_timer({name}))   # would split
    assert out is fused and d.split == () and d.split_measures[0].as_tuned


def test_splits_without_measuring_or_candidates(silu_conv_model):
    fused = optimize_in(from_onnx(silu_conv_model[0]), "NHWC")
    kept, d = decide_splits(fused, measure=False)
    assert kept is fused and d.split == () and "not measured" in d.split_line()
    # a sigmoid makes an epilogue heavy whatever its length
    assert split_candidates(fused, min_nodes=99) == split_candidates(fused)
    with pytest.raises(GraphError, match="not fused yet"):
        decide_splits(from_onnx(silu_conv_model[0]))
    with pytest.raises(TypeError, match="no time for kernel"):
        decide_splits(fused, timer=lambda mods, feeds: [{}, {}])


def test_decisions_are_frozen_data():
    d = GraphDecisions("NHWC", "measured", (("NCHW", 2e-3), ("NHWC", 1e-3)))
    with pytest.raises(AttributeError):
        d.layout = "NCHW"  # type: ignore[misc]
    assert d.lines() == ["layout:   NHWC (measured 2.00x faster than NCHW: 1 ms against 2 ms "
                         "per run, default kernels unless a log's records)",
                         "split:    not measured (every fusion kept)"]
    assert np.isclose(dict(d.layout_seconds)["NHWC"], 1e-3)
