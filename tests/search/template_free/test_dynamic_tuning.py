"""Tuning a symbolic M once for several sizes: one budget, variants, a measured dispatch
table in the log, a dispatching kernel from apply_best and from replay (called from C)."""
from __future__ import annotations

import json
import shutil
import subprocess

import numpy as np
import pytest

import tvmlite
from tvmlite import search, te
from tvmlite.search.records.dispatch import (
    DispatchTable,
    build_dispatch,
    export_dispatch,
    ranges_from_choice,
)
from tvmlite.search.records.record import load_records
from tvmlite.search.records.workload import Workload
from tvmlite.search.template_free.blocking import blocked_decisions
from tvmlite.search.template_free.dynamic import (
    MAX_SIZES,
    TIE,
    choose_variants,
    fastest_per_size,
    representative_sizes,
)
from tvmlite.search.template_free.sketch import generate_sketches, symbolic_axes
from tvmlite.target.target import Target

CHECK = (1, 2, 3, 7, 15, 16, 17, 100, 1023, 1025, 3000)


def test_representative_sizes():
    """Ends kept, interior sizes log-spaced and odd (not multiples of a tile), at most
    MAX_SIZES of them and at most one per octave."""
    assert representative_sizes((1, 1024)) == [1, 3, 5, 11, 23, 47, 103, 219, 475, 1024]
    assert representative_sizes((1, 16)) == [1, 3, 5, 9, 16]
    assert representative_sizes((3, 20)) == [3, 9, 20]
    assert representative_sizes((5, 5)) == [5] and representative_sizes((1, 2)) == [1, 2]
    for lo, hi in ((1, 2048), (2, 3000), (7, 100)):
        pts = representative_sizes((lo, hi))
        assert pts[0] == lo and pts[-1] == hi and len(pts) <= MAX_SIZES
        assert all(m % 2 for m in pts[1:-1]) and pts == sorted(set(pts))
    assert representative_sizes([64, 8, 8]) == [8, 64]
    with pytest.raises(ValueError, match="lo <= hi"):
        representative_sizes((10, 2))


def test_ranges_from_choice_serve_a_size_from_the_next_measured_one_up():
    """A size goes to the variant of the smallest measured size at or above it: a
    variant fitted to 64 covers 9..64 with no more tiles than 64, not 65."""
    r = ranges_from_choice({1: 0, 8: 0, 64: 1, 1024: 2})
    assert r == ((1, 8, 0), (9, 64, 1), (65, None, 2))
    t = DispatchTable("M", ((), (), ()), r, {})
    assert [t.variant_for(m) for m in (1, 8, 9, 64, 65, 10**6)] == [0, 0, 1, 1, 2, 2]
    assert ranges_from_choice({5: 1}) == ((1, None, 1),)


def test_shapes_argument_is_checked():
    with pytest.raises(ValueError, match="pass shapes="):
        search.SearchTask(func=tvmlite.ops.matmul, args=(te.var("M"), 8, 8))
    with pytest.raises(ValueError, match="must give the sizes of M"):
        search.SearchTask(func=tvmlite.ops.matmul, args=(te.var("M"), 8, 8), shapes={"N": [1]})
    with pytest.raises(ValueError, match="this one has none"):
        search.SearchTask(func=tvmlite.ops.matmul, args=(8, 8, 8), shapes={"M": [1]})


def _matmul_check(mod, k=64, n=64, sizes=CHECK):
    b = np.random.default_rng(1).uniform(-1, 1, (k, n)).astype("float32")
    for m in sizes:
        a = np.random.default_rng(m).uniform(-1, 1, (m, k)).astype("float32")
        c = np.full((m, n), np.nan, "float32")
        mod(a, b, c)
        np.testing.assert_allclose(c, a.astype("float64") @ b, rtol=2e-5, atol=2e-5,
                                   err_msg=f"M={m}")


def test_tune_for_sizes_then_apply_best_and_replay(tmp_path):
    task = search.SearchTask(func=tvmlite.ops.matmul, args=(te.var("M"), 64, 64),
                             shapes={"M": [4, 32, 200]})
    log = tmp_path / "dyn.jsonl"
    quick = search.TuningOptions(seed=0, measures_per_round=2, population=24, generations=1,
                                 number=1, repeat=1, min_repeat_ms=0)
    res = task.tune(trials=12, log_file=log, options=quick)
    assert res.measured <= 12 and res.dispatch is not None
    recs = load_records(log)
    sized = [r for r in recs if r.workload.sizes]
    assert {r.workload.sizes["M"] for r in sized} == {4, 32, 200}
    (table_rec,) = [r for r in recs if r.tuner == "dispatch"]
    assert table_rec.workload.key == task.workload.key
    assert set(res.dispatch.tuned) == {4, 32, 200}
    mod = task.apply_best(log)
    assert mod.sizes == ("M",)
    _matmul_check(mod)
    from tvmlite.search.model.cost_model import XGBModel
    from tvmlite.search.template_free.policy import pretrain_from_logs
    assert pretrain_from_logs(XGBModel(), [log], Target.host()) == len(sized)
    out = tmp_path / "dist"
    report = tvmlite.search.replay(log, out)
    assert not report.skipped and len(report.kernels) == 1
    (k,) = json.loads((out / "manifest.json").read_text())["kernels"]
    assert k["dispatch"]["size"] == "M" and k["dispatch"]["ranges"][0]["lo"] == 1
    assert k["dispatch"]["ranges"][-1]["hi"] is None
    assert k["variants"] == [f"matmul_v{i}" for i in range(len(res.dispatch.variants))]


def _two_variants(wl):
    """Two different schedules over symbolic M (a small tile, and a big parallel one)."""
    out = []
    for fi, fj, par in ((1, 16, False), (32, 64, True)):
        s = wl.schedule()
        st = s[wl.outputs[-1]]
        i, j = st.op.axis
        io, ii = st.split(i, factor=fi)
        jo, ji = st.split(j, factor=fj)
        st.reorder(io, jo, st.op.reduce_axis[0], ii, ji)
        jio, jii = st.split(ji, factor=16)
        st.vectorize(jii)
        if par:
            st.parallel(io)
        out.append(tuple(s.steps))
    return tuple(out)


MAIN_C = r"""
#include <stdio.h>
#include <stdlib.h>
#include <math.h>
#include "tvmlite_dyn.h"
static int check(int64_t M, int v) {
  float *A = malloc(sizeof(float) * M * 64), *B = malloc(sizeof(float) * 64 * 64),
        *C = malloc(sizeof(float) * M * 64);
  for (int64_t i = 0; i < M * 64; ++i) A[i] = (float)((i * 5) % 11) / 11.0f - 0.5f;
  for (int i = 0; i < 64 * 64; ++i) B[i] = (float)((i * 7) % 13) / 13.0f - 0.5f;
  int rc = v < 0 ? mm(M, A, B, C) : v == 0 ? mm_v0(M, A, B, C) : mm_v1(M, A, B, C);
  if (rc != 0) return 1;
  for (int64_t i = 0; i < M; ++i)
    for (int j = 0; j < 64; ++j) {
      double want = 0;
      for (int k = 0; k < 64; ++k) want += (double)A[i * 64 + k] * B[k * 64 + j];
      if (fabs(want - C[i * 64 + j]) > 1e-4) return 1;
    }
  free(A); free(B); free(C);
  return 0;
}
int main(void) {
  const int64_t sizes[] = {1, 3, 17, 40, 41, 100, 1025};
  for (int s = 0; s < 7; ++s)
    for (int v = -1; v < 2; ++v)
      if (check(sizes[s], v)) {
        printf("wrong at M=%ld variant %d\n", (long)sizes[s], v);
        return 1;
      }
  float x[64];
  if (mm(0, x, x, x) != -2) { printf("M=0 accepted\n"); return 1; }
  printf("ok\n");
  return 0;
}
"""


def test_dispatch_with_two_variants_python_and_c(tmp_path):
    wl = Workload.from_op("matmul", te.var("M"), 64, 64)
    table = DispatchTable("M", _two_variants(wl), ranges_from_choice({40: 0, 200: 1}),
                          {40: (0, 1e-6), 200: (1, 1e-5)})
    assert table.ranges == ((1, 40, 0), (41, None, 1))
    mod = build_dispatch(wl, table, name="mm")
    _matmul_check(mod)
    assert "if (M <= 40) return mm_v0(M, A, B, C);" in mod.get_source()
    out = tmp_path / "dist"
    out.mkdir()
    files, decl = export_dispatch(wl, table, Target.host(), "mm", out)
    (out / "tvmlite_dyn.h").write_text((out / "mm.h").read_text())
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler")
    (tmp_path / "main.c").write_text(MAIN_C)
    exe = tmp_path / "main"
    subprocess.run([cc, str(tmp_path / "main.c"), f"-I{out}", f"-L{out}", "-lmm",
                    f"-Wl,-rpath,{out}", "-lm", "-o", str(exe)], check=True)
    run = subprocess.run([str(exe)], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0 and run.stdout.strip() == "ok", run.stdout + run.stderr


def test_dispatch_of_a_kernel_whose_output_has_its_name():
    """conv2d_nhwc's output tensor is called conv2d_nhwc, like the entry point."""
    wl = Workload.from_op("conv2d_nhwc", te.var("N"), 6, 6, 8, 16, 3, 1, 1)
    table = DispatchTable("N", ((),), ((1, None, 0),), {2: (0, 1e-5)})
    mod = build_dispatch(wl, table, name="conv2d_nhwc")
    from tvmlite.testing import reference
    for n in (1, 3):
        x = np.random.default_rng(n).uniform(-1, 1, (n, 6, 6, 8)).astype("float32")
        w = np.random.default_rng(0).uniform(-1, 1, (3, 3, 8, 16)).astype("float32")
        out = np.full((n, 6, 6, 16), np.nan, "float32")
        mod(x, w, out)
        want = reference("conv2d_nhwc", [x, w], N=n, H=6, W=6, CI=8, CO=16, kernel=3,
                         stride=1, padding=1)
        np.testing.assert_allclose(out, want, rtol=1e-4, atol=1e-4)
    xa, wa, oa = (tvmlite.asaligned(v) for v in (x, w, out))
    assert mod.time_evaluator(number=1, repeat=1)(xa, wa, oa).median > 0


def test_static_only_searches_refuse_a_symbolic_size():
    import tvmlite.schedules  # noqa: F401 -- registers the templates
    with pytest.raises(ValueError, match="templates tune fixed sizes"):
        search.templated.create("matmul", args=(te.var("M"), 8, 8, "float32"))
    task = search.SearchTask(func=tvmlite.ops.matmul, args=(te.var("M"), 8, 8), shapes={"M": [1]})
    with pytest.raises(ValueError, match="tune it on its own"):
        search.TaskScheduler([task])


def test_candidates_are_measured_outward_from_their_size(tmp_path):
    """A candidate is compiled once and measured at its own size, then outward: the sizes
    it ran at are neighbours in the size list; the budget counts measurements; the table
    serves each size with its fastest variant measured there."""
    sizes = [3, 20, 40]
    task = search.SearchTask(func=tvmlite.ops.matmul, args=(te.var("M"), 32, 32),
                             shapes={"M": sizes})
    log = tmp_path / "dyn.jsonl"
    quick = search.TuningOptions(seed=1, measures_per_round=4, population=16, generations=1,
                                 number=1, repeat=1, min_repeat_ms=0)
    from tvmlite.search.model.features import N_FEATURES
    from tvmlite.search.model.pretrained import load_pretrained
    prior = load_pretrained("pack-sum")
    assert prior is not None and prior.n_features == N_FEATURES
    res = task.tune(trials=14, log_file=log, options=quick, model=prior)
    # the shared model's rows end in the program's scale, the prior's programs too
    assert prior.n_features == N_FEATURES + 1
    sized = [r for r in load_records(log) if r.workload.sizes]
    by_steps: dict = {}
    for r in sized:
        key = json.dumps([s.to_json() for s in r.steps], sort_keys=True)
        by_steps.setdefault(key, {})[sizes.index(r.workload.sizes["M"])] = r
    assert len(by_steps) >= 3
    # the first candidate measured is the target's blocking, at the largest size
    bound = task.workload.at({"M": 40}).bound()
    blocked = [d for sk in generate_sketches(bound) for d in [blocked_decisions(
        bound, sk, task.target, loose=symbolic_axes(task.workload, sk))] if d]
    # (B packed first, then neither, A and B, A)
    assert len(blocked) == 4 and sized[0].workload.sizes == {"M": 40}
    assert sized[0].decisions["decisions"] == blocked[0]
    for at in by_steps.values():
        idx = sorted(at)
        assert idx == list(range(idx[0], idx[-1] + 1)), "a candidate skipped a size"
    assert res.measured == len(sized) <= 14 and res.dispatch is not None
    steps = {json.dumps([s.to_json() for s in v], sort_keys=True): i
             for i, v in enumerate(res.dispatch.variants)}
    for m, (v, t) in res.dispatch.tuned.items():
        served = [(r.mean_cost, steps[k]) for k, at in by_steps.items() if k in steps
                  for r in [at.get(sizes.index(m))] if r is not None and r.result.ok]
        assert (t, v) == min(served)
    _matmul_check(task.apply_best(log), k=32, n=32, sizes=(1, 2, 3, 19, 20, 39, 40, 41, 129))


def test_the_budget_is_spent_where_the_waves_stop_early(tmp_path, monkeypatch):
    """Every candidate stops at its own size (as one slower than SPREAD times the best
    there, or failed, does): the rounds still spend the whole budget -- the last takes a
    candidate per measurement left, where it used to end a measurement or two short."""
    from tvmlite.search.template_free import dynamic
    monkeypatch.setattr(dynamic, "SPREAD", 0.0)
    task = search.SearchTask(func=tvmlite.ops.matmul, args=(te.var("M"), 32, 32),
                             shapes={"M": [3, 20, 40]})
    quick = search.TuningOptions(seed=0, measures_per_round=4, population=16, generations=1,
                                 number=1, repeat=1, min_repeat_ms=0, pretrained=False)
    log = tmp_path / "dyn.jsonl"
    res = task.tune(trials=7, log_file=log, options=quick)
    sized = [r for r in load_records(log) if r.workload.sizes]
    assert res.measured == len(sized) == 7
    assert len({json.dumps([s.to_json() for s in r.steps]) for r in sized}) == 7


def test_builder_lowers_a_dynamic_kernel_once_for_all_its_sizes():
    from tvmlite.search.measure.builder import LocalBuilder
    from tvmlite.search.measure.inputs import MeasureInput
    wl = Workload.from_op("matmul", te.var("M"), 32, 32)
    (steps, _) = _two_variants(wl)
    builds = LocalBuilder(n_parallel=2).build(
        [MeasureInput(wl.at({"M": m}), steps) for m in (1, 5, 64)])
    assert all(b.ok for b in builds)
    assert len({b.source for b in builds}) == 1 and len({b.lib_path for b in builds}) == 1
    assert [b.sizes for b in builds] == [(1,), (5,), (64,)]
    assert [b.args[0].shape for b in builds] == [(1, 32), (5, 32), (64, 32)]


def test_choose_variants_prefers_one_schedule_good_everywhere():
    """Greedy over {candidate: {size: seconds}}: a candidate within 1% of the best at every
    size is the only variant; a specialist joins when it buys more than MIN_GAIN."""
    times = {"all": {1: 1.01, 8: 8.05, 64: 64.3},
             "small": {1: 1.0, 8: 9.0, 64: 200.0},
             "big": {1: 5.0, 8: 8.0, 64: 64.0}}
    assert choose_variants(times, [1, 8, 64], 4) == ["all"]
    times["huge"] = {1: 9.0, 8: 20.0, 64: 40.0}          # 1.6x faster at 64
    assert choose_variants(times, [1, 8, 64], 4) == ["all", "huge"]
    assert choose_variants(times, [1, 8, 64], 1) == ["all"]
    # a size only one candidate ran at is covered before anything is made faster
    times["lone"] = {512: 3.0}
    assert "lone" in choose_variants(times, [1, 8, 64, 512], 2)
    assert choose_variants({}, [1, 8], 4) == []


def test_probes_place_a_boundary_by_measurement(tmp_path):
    """With 8 measurements per size in the budget, sizes that chose different variants
    get a probe between them, measured for both variants and in the table."""
    task = search.SearchTask(func=tvmlite.ops.matmul, args=(te.var("M"), 32, 32),
                             shapes={"M": [1, 200]})
    log = tmp_path / "dyn.jsonl"
    quick = search.TuningOptions(seed=3, measures_per_round=8, population=16, generations=1,
                                 number=1, repeat=1, min_repeat_ms=0)
    res = task.tune(trials=16, log_file=log, options=quick)
    table = res.dispatch
    assert res.measured <= 16 and set(table.tuned) >= {1, 200}
    recs = [r for r in load_records(log) if r.workload.sizes]
    probed = {r.workload.sizes["M"] for r in recs} - {1, 200}
    if len({v for v, _ in table.tuned.values()}) > 1 or probed:
        assert probed == {15} and 15 in table.tuned
        assert len([r for r in recs if r.workload.sizes["M"] == 15]) == 2
    _matmul_check(task.apply_best(log), k=32, n=32, sizes=(1, 2, 14, 15, 16, 199, 200, 333))


def test_probe_sizes_lie_between_sizes_that_chose_different_variants():
    from tvmlite.search.template_free.dynamic import _probes
    wl = Workload.from_op("matmul", te.var("M"), 8, 8)
    asked = []

    def measure(inputs):          # variant 1 is faster wherever it is measured
        asked.extend((inp.workload.sizes["M"], inp.steps) for inp in inputs)
        return [1.0 if inp.steps == ("b",) else 2.0 for inp in inputs]

    tuned = {1: (0, 1.0), 8: (0, 1.0), 100: (1, 1.0), 1000: (1, 1.0)}
    out = _probes(wl, "M", tuned, ["ka", "kb"], {"ka": ("a",), "kb": ("b",)}, measure)
    assert out == {29: (1, 1.0)}            # sqrt(8 * 100) = 28.3 -> 29 (odd)
    assert sorted(asked) == [(29, ("a",)), (29, ("b",))]


def test_measuring_outward_stops_where_a_candidate_is_spread_times_slower():
    from types import SimpleNamespace

    from tvmlite.search.measure.inputs import MeasureInput, MeasureResult
    from tvmlite.search.template_free.dynamic import SPREAD, _measure_outward
    sizes = [1, 2, 3, 4, 5]
    wl = Workload.from_op("matmul", te.var("M"), 8, 8)
    at = {m: wl.at({"M": m}) for m in sizes}
    slow_at = {1: SPREAD + 1.0}             # candidate "x": too slow at size 2 (index 1)
    asked = []

    class Measurer:
        known: dict = {}

        def measure(self, inputs):
            asked.extend(inp.workload.sizes["M"] for inp in inputs)
            return [MeasureResult(costs=(slow_at.get(sizes.index(inp.workload.sizes["M"]),
                                                     1.0),)) for inp in inputs]

    best = {m: SimpleNamespace(mean_cost=1.0) for m in sizes}
    policies = {m: SimpleNamespace(workload=at[m], update=lambda *a, **k: ([], [], []))
                for m in sizes}
    x = MeasureInput(at[3], ())
    used = _measure_outward([(2, x)], sizes, at, policies, None, Measurer(), 100,
                            lambda *a: None, best)
    assert asked == [3, 2, 4, 5] and used == 4      # not past size 2, on to the end above
    asked.clear()
    assert _measure_outward([(2, x)], sizes, at, policies, None, Measurer(), 2,
                            lambda *a: None, best) == 2 and asked == [3, 2]


def test_a_size_keeps_the_next_size_ups_variant_on_a_tie():
    """At 151 "a" is 0.4% faster than "b", which wins above: a tie, so 151 keeps "b" (a
    switch there moved M = 117 of a GMM to a variant 21% slower at 117); at 103 "a" is 15%
    faster: it is chosen; at the largest size there is nothing above to keep."""
    times = {"a": {103: 0.85, 151: 0.996, 219: 1.2, 475: 0.99},
             "b": {103: 1.0, 151: 1.0, 219: 1.0, 475: 1.0}}
    assert 0.004 < TIE < 0.15
    got = fastest_per_size(times, ["a", "b"], [103, 151, 219, 475])
    assert {m: vi for m, (vi, _) in got.items()} == {475: 0, 219: 1, 151: 1, 103: 0}
    assert got[151] == (1, 1.0) and got[103] == (0, 0.85)
    assert fastest_per_size({"a": {8: 1.0}}, ["a"], [1, 8]) == {8: (0, 1.0)}
