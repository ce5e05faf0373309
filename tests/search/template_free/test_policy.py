"""search/template_free/policy.py (SketchPolicy): each round proposes distinct candidates
that were never measured, builds correct programs, learns from what was measured (the
real XGBoost model), keeps the best measured as seeds, and can learn from a log's
records made by another run."""
from __future__ import annotations

import dataclasses
import hashlib

from tvmlite.schedule.schedule import Schedule
from tvmlite.search.measure.inputs import MeasureErrorNo, MeasureResult
from tvmlite.search.model.cost_model import XGBModel
from tvmlite.search.options import TuningOptions
from tvmlite.search.template_free.policy import INIT_FRACTION, SAMPLES_PER_PICK
from tvmlite.search.template_free.task import SearchTask
from tvmlite.testing import check_schedule

OPTIONS = TuningOptions(population=16, generations=1, measures_per_round=8,
                        seeds_from_best=3, eps_greedy=0.25, seed=0)


def _policy(seed: int = 0):
    task = SearchTask(func="matmul", args=(24, 32, 16))
    return task.policy(dataclasses.replace(OPTIONS, seed=seed), XGBModel(seed=seed, n_threads=1))


def _results(inputs):
    """Deterministic made-up timings per program (the policy only ranks by them), and
    one failure, as a measurement would report it."""
    out = []
    for n, inp in enumerate(inputs):
        h = int(hashlib.sha256(inp.key.encode()).hexdigest()[:8], 16)
        out.append(MeasureResult(costs=(1e-4 * (1 + h % 97),)) if n != 1 else
                   MeasureResult(error_no=MeasureErrorNo.RUNTIME_CRASH, error_msg="boom"))
    return out


def test_rounds_propose_distinct_never_measured_candidates():
    policy = _policy()
    seen: set = set()
    for _ in range(3):
        batch = policy.next_batch(8)
        keys = [inp.key for inp in batch]
        assert 1 <= len(batch) <= 8
        assert len(set(keys)) == len(keys)           # distinct within the round
        assert not set(keys) & seen                  # never measured before
        seen |= set(keys)
        policy.update(batch, _results(batch))
        assert set(policy.measured) == seen
    assert policy.model.trained
    assert policy.best_throughput > 0


def test_proposed_programs_compute_a_matrix_product():
    policy = _policy(seed=1)
    batch = policy.next_batch(3)
    for inp in batch:
        s = Schedule.from_steps(policy.workload.outputs, inp.steps)
        check_schedule(s, list(policy.workload.tensors), lambda a, b: a @ b,
                       rtol=1e-4, atol=1e-4)
        d = inp.decisions
        assert set(d) == {"sketch", "sketch_desc", "decisions"}
        assert d["sketch_desc"] == str(policy.sketches[d["sketch"]])


def test_failures_count_as_zero_and_the_best_are_kept_as_seeds():
    policy = _policy(seed=2)
    batch = policy.next_batch(8)
    results = _results(batch)
    policy.update(batch, results)
    assert policy.measured[batch[1].key] == 0.0
    assert len(policy.best_seeds) == min(OPTIONS.seeds_from_best,
                                         sum(r.ok for r in results))
    thr = [policy.measured[c.key] for c in policy.best_seeds]
    assert thr == sorted(thr, reverse=True) and thr[0] == policy.best_throughput
    # measuring the same programs again teaches the model nothing new
    before = dict(policy.measured)
    policy.update(batch, [MeasureResult(costs=(1.0,))] * len(batch))
    assert policy.measured == before


def test_records_of_another_run_are_learnt_and_not_proposed_again():
    other = _policy(seed=3)
    logged = other.next_batch(6)
    policy = _policy(seed=4)
    policy.update(logged, _results(logged))        # as a resumed tune replays its log
    assert set(policy.measured) == {inp.key for inp in logged}
    assert any(c.sketch >= 0 for c in policy.best_seeds)   # decisions matched a sketch
    for _ in range(2):
        batch = policy.next_batch(8)
        assert not {inp.key for inp in batch} & set(policy.measured)
        policy.update(batch, _results(batch))


def test_a_small_round_lowers_few_random_samples():
    """Each random sample is lowered for its features: a round measuring 2 draws 4 per
    candidate (SAMPLES_PER_PICK), not INIT_MIN's 64, besides evolving the population (a
    round of 2 lowered 79 programs with 64 samples, 23 with 8, on Sapphire Rapids)."""
    policy = _policy(seed=2)
    while not policy.model.trained:              # the first rounds measure random picks
        batch = policy.next_batch(8)
        policy.update(batch, _results(batch))
    asked = []
    sample = policy.search.sample
    policy.search.sample = lambda n: asked.append(n) or sample(n)
    assert len(policy.next_batch(2)) == 2
    assert asked == [max(SAMPLES_PER_PICK * 2, OPTIONS.population // INIT_FRACTION)]
