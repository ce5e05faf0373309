"""Tuners: ask/tell without repeats on fake measurements (fast), model guidance and
transfer, then real tuning: every tuner beats the template's fallback on a small matmul
and conv2d, an interrupted tune resumes without re-measuring, and apply_history_best
uses the best record of the log."""
from __future__ import annotations

import random
import statistics

import pytest

from tvmlite import te
from tvmlite.ops import OPS
from tvmlite.search.measure.inputs import MeasureErrorNo, MeasureResult
from tvmlite.search.model.features import schedule_features
from tvmlite.search.options import TuningOptions
from tvmlite.search.records.best import best_record
from tvmlite.search.records.record import load_records, make_record
from tvmlite.search.templated import xgb_tuner
from tvmlite.search.templated.task import apply_history_best, create, template
from tvmlite.search.templated.tuners import (
    GATuner,
    GridSearchTuner,
    RandomTuner,
    SmallHistoryWarning,
)
from tvmlite.search.templated.xgb_tuner import XGBTuner
from tvmlite.testing.check import check_schedule, evaluate_te, reduction_length, tolerance

OPTIONS = TuningOptions(number=2, repeat=2, min_repeat_ms=2, measures_per_round=8)
MATMUL = ("test_tuners_matmul", (64, 64, 64))
CONV = ("test_tuners_conv2d", (1, 8, 16, 16, 16, 3, 1, 1))


# Both templates define "vec" first, so it varies fastest in index order (grid search
# sees vectorized configs early); their fallback is scalar code, so there is room to win.
@template("test_tuners_matmul")
def matmul_tmpl(cfg, M, N, K, dtype="float32"):
    A, B, C = OPS["matmul"](M, N, K, dtype)
    s = te.create_schedule(C.op)
    i, j = s[C].op.axis
    (k,) = s[C].op.reduce_axis
    cfg.define_knob("vec", [False, True])
    cfg.define_split("tile_i", i, policy="power2", max_factor=16)
    cfg.define_split("tile_j", j, max_factor=32)
    cfg.define_split("tile_k", k, max_factor=16)
    io, ii = cfg["tile_i"].apply(s, C, i)
    jo, ji = cfg["tile_j"].apply(s, C, j)
    ko, ki = cfg["tile_k"].apply(s, C, k)
    s[C].reorder(io, jo, ko, ii, ki, ji)
    cfg.define_reorder("order", [ko, ii, ki])
    cfg["order"].apply(s, C, [ko, ii, ki])
    cfg.define_annotate("unroll", [ii, ki], policy="unroll")
    cfg["unroll"].apply(s, C, [ii, ki])
    if cfg["vec"].val:
        s[C].vectorize(ji)
    return s, [A, B, C]


@template("test_tuners_conv2d")
def conv_tmpl(cfg, N, CI, H, W, CO, kernel, stride=1, padding=0, dilation=1, groups=1,
              dtype="float32"):
    data, weight, out = OPS["conv2d_nchw"](N, CI, H, W, CO, kernel, stride, padding,
                                           dilation, groups, dtype)
    s = te.create_schedule(out.op)
    n, f, y, x = s[out].op.axis
    rc, ry, rx = s[out].op.reduce_axis
    cfg.define_knob("vec", [False, True])
    cfg.define_split("tile_f", f)
    cfg.define_split("tile_x", x, max_factor=16)
    fo, fi = cfg["tile_f"].apply(s, out, f)
    xo, xi = cfg["tile_x"].apply(s, out, x)
    s[out].reorder(n, fo, y, xo, rc, ry, rx, fi, xi)
    cfg.define_annotate("unroll", [rx, fi], policy="unroll")
    cfg["unroll"].apply(s, out, [rx, fi])
    if cfg["vec"].val:
        s[out].vectorize(xi)
    cfg.define_knob("inline_pad", [False, True])
    if cfg["inline_pad"].val:
        s["pad"].compute_inline()
    return s, [data, weight, out]


@template("test_tuners_tiny")
def tiny_tmpl(cfg, n):
    A, B, C = OPS["matmul"](n, n, n)
    s = te.create_schedule(C.op)
    i, j = s[C].op.axis
    cfg.define_split("tile_i", i)
    cfg.define_split("tile_j", j)
    cfg.define_knob("unroll", [False, True])
    io, ii = cfg["tile_i"].apply(s, C, i)
    jo, ji = cfg["tile_j"].apply(s, C, j)
    if cfg["unroll"].val:
        s[C].unroll(ii)
    return s, [A, B, C]


def fake_cost(config) -> float:
    """A made-up landscape: vectorized, wide-j, short-k configs are fast."""
    jin, kin = config["tile_j"].size[-1], config["tile_k"].size[-1]
    return 1e-3 / (1 + 4 * config["vec"].val) / jin ** 0.5 * (1 + kin / 64)


def fake_results(configs) -> list[MeasureResult]:
    return [MeasureResult(costs=(fake_cost(c),)) for c in configs]


def make(cls, task, **kw):
    if cls is XGBTuner:
        kw = {"feature_type": "knob", "plan_size": 8, **kw}
    if cls is GATuner:
        kw = {"pop_size": 8, **kw}
    return cls(task, **kw)


ALL = [RandomTuner, GridSearchTuner, GATuner, XGBTuner]


# -- ask/tell on fake measurements ----------------------------------------------------------

@pytest.mark.parametrize("cls", ALL)
def test_no_repeats_until_the_space_is_exhausted(cls):
    task = create("test_tuners_tiny", (8,))          # 4 * 4 * 2 = 32 configs
    tuner = make(cls, task)
    seen = []
    while tuner.has_next():
        batch = tuner.next_batch(5)
        assert batch and len(batch) <= 5
        seen += [c.index for c in batch]
        tuner.update(batch, [MeasureResult(costs=(1e-4 * (1 + c.index % 7),)) for c in batch])
    assert sorted(seen) == list(range(len(task.space)))
    assert tuner.next_batch(5) == []


def test_update_skips_failures_and_known_configs():
    task = create(*MATMUL)
    tuner = RandomTuner(task)
    batch = tuner.next_batch(3)
    failed = MeasureResult(error_no=MeasureErrorNo.RUNTIME_CRASH, error_msg="x")
    tuner.update(batch, [failed] + fake_results(batch[1:]))
    assert tuner.throughput[batch[0].index] == 0.0 and tuner.throughput[batch[1].index] > 0
    tuner.update(batch[:1], fake_results(batch[:1]))       # already known: ignored
    assert tuner.throughput[batch[0].index] == 0.0


def test_a_plan_is_sized_to_the_trials_left(monkeypatch):
    """With loop-nest features every config the walk scores is a lowering: a tuning with
    4 trials left plans 4 and walks a sixteenth of a full plan's walk (it lowered about
    850 configs to pick 4)."""
    lowerings = []
    monkeypatch.setattr(xgb_tuner, "schedule_features",
                        lambda *a: lowerings.append(1) or schedule_features(*a))
    task = create(*MATMUL)
    tuner = XGBTuner(task, plan_size=64, feature_type="itervar", seed=3)
    tuner.budget = 12
    batch = tuner.next_batch(8)          # the model knows nothing yet: random picks
    tuner.update(batch, fake_results(batch))
    before = len(lowerings)
    planned = tuner.next_batch(4)
    assert len(planned) == 4 and len({c.index for c in planned}) == 4
    assert len(lowerings) - before <= 16 * 8     # 16 walkers, 7 steps and their start


def mean_fake_gflops(task, configs) -> float:
    return statistics.mean(task.workload.flops / fake_cost(c) / 1e9 for c in configs)


@pytest.mark.parametrize("feature_type", ["knob", "itervar", "curve"])
def test_xgb_plans_better_than_random(feature_type):
    # a plan of 16 walks a quarter of a full plan's walk with loop-nest features
    task = create(*MATMUL)
    tuner = XGBTuner(task, plan_size=16, feature_type=feature_type, seed=3)
    for _ in range(4):
        batch = tuner.next_batch(16)
        tuner.update(batch, fake_results(batch))
    assert tuner.model.trained
    planned = tuner.next_batch(16)
    rng = random.Random(0)
    randoms = [task.space.random_config(rng) for _ in range(64)]
    assert mean_fake_gflops(task, planned) > 1.5 * mean_fake_gflops(task, randoms)
    assert not {c.index for c in planned} & set(tuner.throughput)


def test_xgb_diversity_filter_spreads_knob_values():
    task = create(*MATMUL)
    tuner = XGBTuner(task, plan_size=16, feature_type="knob", diversity_filter_ratio=4)
    for _ in range(3):
        batch = tuner.next_batch(16)
        tuner.update(batch, fake_results(batch))
    planned = tuner.next_batch(16)
    assert len(planned) == 16 and len({c["tile_i"].size for c in planned}) >= 3


def test_ga_generations_improve():
    task = create(*MATMUL)
    tuner = GATuner(task, pop_size=16, elite_num=2, mutation_prob=0.1, seed=1)
    means = []
    for _ in range(5):
        batch = tuner.next_batch(16)
        tuner.update(batch, fake_results(batch))
        means.append(mean_fake_gflops(task, batch))
    assert means[-1] > 1.3 * means[0]


def history(task, n) -> list:
    rng = random.Random(5)
    configs = [task.space.random_config(rng) for _ in range(n)]
    return [make_record(task.measure_input(c), r, task.target, "random")
            for c, r in zip(configs, fake_results(configs))]


def test_load_history_small_history_is_used_with_a_warning():
    other = create("test_tuners_matmul", (32, 64, 64))      # another workload, same template
    task = create(*MATMUL)
    records = history(other, 6)
    itervar = XGBTuner(task, feature_type="itervar")
    with pytest.warns(SmallHistoryWarning, match="6 usable record.*min_records=64"):
        assert itervar.load_history(records) == 6
    assert itervar.model.num_programs == 6
    knob = XGBTuner(task, feature_type="knob")              # other spaces do not fit
    with pytest.warns(SmallHistoryWarning, match="0 usable"):
        assert knob.load_history(records) == 0
    same = history(task, 20)
    ga = GATuner(task)
    assert ga.load_history(same, min_records=10) == 20     # enough: no warning
    with pytest.warns(SmallHistoryWarning, match="does not learn"):
        RandomTuner(task).load_history(same)


def test_pretrained_xgb_plans_at_once():
    task = create(*MATMUL)
    tuner = XGBTuner(task, feature_type="knob", plan_size=16)
    tuner.load_history(history(task, 40), min_records=16)
    assert tuner.model.trained
    planned = tuner.next_batch(16)
    rng = random.Random(1)
    randoms = [task.space.random_config(rng) for _ in range(64)]
    assert mean_fake_gflops(task, planned) > 1.5 * mean_fake_gflops(task, randoms)


def test_argument_errors():
    task = create("test_tuners_tiny", (8,))
    for call, match in ((lambda: RandomTuner("task"), "TemplatedTask"),
                        (lambda: RandomTuner(task, seed=-1), "seed"),
                        (lambda: XGBTuner(task, feature_type="x"), "feature_type"),
                        (lambda: XGBTuner(task, loss_type="mse"), "loss_type"),
                        (lambda: XGBTuner(task, optimizer="ga"), "optimizer"),
                        (lambda: XGBTuner(task, diversity_filter_ratio=0.5), "diversity"),
                        (lambda: GATuner(task, elite_num=0), "elite_num"),
                        (lambda: GATuner(task, mutation_prob=2), "mutation_prob"),
                        (lambda: RandomTuner(task).next_batch(0), "next_batch"),
                        (lambda: RandomTuner(task).tune(0), "n_trial"),
                        (lambda: RandomTuner(task).tune(4, options={}), "TuningOptions"),
                        (lambda: RandomTuner(task).load_history(3), "log path")):
        with pytest.raises((TypeError, ValueError), match=match):
            call()


# -- real measurements ----------------------------------------------------------------------

@pytest.mark.parametrize("workload", [MATMUL, CONV], ids=["matmul", "conv2d"])
@pytest.mark.parametrize("cls", ALL)
def test_tuner_measures_distinct_valid_configs_and_keeps_the_best(cls, workload, tmp_path):
    """Whatever the machine's load: 12 distinct configs of the space measured, the best
    is the fastest valid record, and it rebuilds (inside apply_history_best, through the
    template itself) into a kernel that matches numpy. Speed against the fallback is a
    benchmark's question (bench/tune_templated.py), not a unit test's."""
    task = create(*workload)
    log = tmp_path / "log.jsonl"
    res = make(cls, task).tune(12, log, OPTIONS)
    assert res.measured == len(res.trials) == 12 and res.best is not None
    assert [t.index for t in res.trials] == list(range(1, 13))
    recs = load_records(log)
    configs = [task.config_of(r) for r in recs]
    assert len(recs) == 12 and None not in configs
    assert len({c.index for c in configs}) == 12                  # distinct configs
    assert not any(r.result.error_no == MeasureErrorNo.WRONG_ANSWER for r in recs)
    valid = [r for r in recs if r.result.ok]
    assert res.best.key == min(valid, key=lambda r: r.mean_cost).key
    assert res.trials[-1].best_gflops == res.best.gflops
    fn = {MATMUL[0]: matmul_tmpl, CONV[0]: conv_tmpl}[workload[0]]
    with apply_history_best(log):
        s, tensors = fn(*workload[1])
    assert tuple(s.steps) == res.best.steps
    rtol, atol = tolerance("float32", reduction_length(tensors))
    check_schedule(s, tensors, lambda *ins: evaluate_te(tensors, ins), rtol=rtol, atol=atol)


def test_interrupted_tune_resumes_without_remeasuring(tmp_path):
    log = tmp_path / "log.jsonl"
    task = create("test_tuners_tiny", (16,))

    def interrupt(trial):
        if trial.index == 3:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        XGBTuner(task, feature_type="knob").tune(12, log, OPTIONS, callback=interrupt)
    first = load_records(log)
    assert len(first) == 3      # each record is logged before the callback sees it
    res = XGBTuner(task, feature_type="knob").tune(12, log, OPTIONS)
    assert res.measured == 9 and res.trials[0].index == 4
    records = load_records(log)
    assert len(records) == 12 and len({r.key for r in records}) == 12
    assert {r.tuner for r in records} == {"xgb"}
    assert res.best is not None and res.best.key == best_record(log, task.workload).key
    assert XGBTuner(task).tune(12, log, OPTIONS).measured == 0
    # the best record is what templates get inside apply_history_best
    with apply_history_best(log):
        s, _ = tiny_tmpl(16)
    assert tuple(s.steps) == res.best.steps


class FakeMeasurer:
    """What tune() needs of a Measurer, with every candidate taking the same time."""

    def __init__(self, target):
        self.target, self.known, self.logged = target, {}, []

    def refresh(self):
        return 0

    def measure(self, inputs, on_result=None, quotas=()):
        res = MeasureResult(costs=(1e-4,))
        for inp in inputs:
            rec = make_record(inp, res, self.target, "fake")
            self.known[inp.key] = rec
            self.logged.append(rec)
            if on_result is not None:
                on_result(inp, res, rec)
        return [res] * len(inputs)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        pass


def test_early_stopping_ends_a_tune_that_stopped_improving(monkeypatch):
    monkeypatch.setattr(TuningOptions, "measurer", lambda self, log, target, tuner:
                        FakeMeasurer(target))
    task = create("test_tuners_tiny", (16,))
    res = RandomTuner(task).tune(32, None, OPTIONS, early_stopping=3)
    assert res.measured == 8              # checked after each batch of 8
    assert res.trials[-1].best_gflops == res.best_gflops > 0
    opts = TuningOptions(measures_per_round=2, early_stopping=4)
    assert RandomTuner(task).tune(32, options=opts).measured == 6


@pytest.mark.parametrize("module", ["tvmlite.search.templated.xgb_tuner",
                                    "tvmlite.search.templated.tuners", "tvmlite.search.templated",
                                    "tvmlite.search.template_free.policy"])
def test_each_search_module_imports_first_in_a_fresh_process(module):
    import subprocess
    import sys
    out = subprocess.run([sys.executable, "-c", f"import {module}; "
                          "from tvmlite.search.templated.xgb_tuner import XGBTuner; print('ok')"],
                         capture_output=True, text=True, timeout=120)
    assert out.stdout.strip() == "ok", out.stderr[-2000:]
