"""search/template_free/evolution.py: mutations keep decisions legal (a tile mutation moves
a prime factor between levels, so the split still covers its extent exactly), mutated
candidates realize into schedules that compute what numpy computes, and evolution
returns distinct, unmeasured candidates ranked by the score it was given."""
from __future__ import annotations

import math
import random

from tvmlite.search.model.features import schedule_features
from tvmlite.search.records.workload import Workload
from tvmlite.search.template_free.evolution import (
    Candidate,
    EvolutionarySearch,
    mutate,
    mutate_loose_tile,
    mutate_tile,
)
from tvmlite.search.template_free.loose import LOOSE_COVER, loose_choices, loose_options
from tvmlite.search.template_free.priors import MAX_INNERMOST
from tvmlite.search.template_free.realize import UNROLL_STEPS
from tvmlite.search.template_free.sketch import generate_sketches
from tvmlite.target.target import Target
from tvmlite.testing import check_schedule

TARGET = Target.host()
WL = Workload.from_op("matmul", 24, 32, 16)


def _search(seed: int = 0, score=None) -> EvolutionarySearch:
    def by_steps(cands):                       # a deterministic stand-in for the model's
        for c in cands:                        # prediction: the search only ranks by it
            c.score = score(c) if score else float(len(c.steps))
    return EvolutionarySearch(generate_sketches(WL), WL, TARGET, by_steps,
                              lambda s: schedule_features(s, list(WL.tensors), TARGET),
                              random.Random(seed), population=12, generations=2)


def test_a_tile_mutation_moves_one_prime_factor_and_keeps_the_extent():
    rng = random.Random(0)
    for _ in range(300):
        extent = rng.choice([12, 24, 36, 64, 96, 210])
        parts = rng.randint(1, 3)
        inner = [1] * parts
        rest = extent
        for i in range(parts):
            d = rng.choice([d for d in range(1, min(rest, MAX_INNERMOST) + 1) if rest % d == 0])
            inner[i], rest = d, rest // d
        new = mutate_tile(inner, extent, rng)
        if new is None:
            continue
        assert len(new) == parts and extent % math.prod(new) == 0
        assert new[-1] <= MAX_INNERMOST
        before = [extent // math.prod(inner)] + inner
        after = [extent // math.prod(new)] + new
        changed = [(x, y) for x, y in zip(before, after) if x != y]
        assert len(changed) == 2                      # one level gave, one took
        (a0, a1), (b0, b1) = changed
        ratio = a1 / a0 if a1 > a0 else b1 / b0
        assert ratio == int(ratio) and all(ratio % p for p in range(2, int(ratio))), ratio


def test_a_loose_tile_mutation_redraws_one_level_within_its_choices():
    """A symbolic axis's tile: one level changes to another of its ``loose_choices``,
    often a neighbour there (7 rows to 6 or 8); the tile stays below LOOSE_COVER times
    the extent."""
    rng = random.Random(0)
    near = 0
    for _ in range(300):
        extent = rng.choice([3, 7, 21, 53, 141, 1024])
        inner = [rng.choice([d for d in loose_options(32) if d < extent and d <= cap] or [1])
                 for cap in (4096, 4096, 16)]
        while math.prod(inner) >= LOOSE_COVER * extent:
            inner[rng.randrange(3)] = 1
        new = mutate_loose_tile(inner, extent, rng, 32, 16)
        assert new is not None and len(new) == 3 and new[-1] <= 16
        assert math.prod(new) < LOOSE_COVER * extent
        (i, (old, now)), = [(i, xy) for i, xy in enumerate(zip(inner, new)) if xy[0] != xy[1]]
        fit = loose_choices(extent, math.prod(inner) // old, i == 2, 32, 16)
        assert now in fit
        near += old in fit and abs(fit.index(old) - fit.index(now)) == 1
    assert near > 50


def test_a_split_with_nothing_to_move_gives_none():
    assert mutate_tile([1], 1, random.Random(0)) is None


def test_mutate_changes_one_decision_and_keeps_the_others():
    rng = random.Random(1)
    decisions = {"tile:C.i": [2, 3], "tile:C.j": [4], "unroll:C": 16, "fuse:C": 1,
                 "parallel:C": 2, "at:P": 0}
    extents = {"tile:C.i": 24, "tile:C.j": 32}
    for _ in range(200):
        new = mutate(decisions, extents, rng)
        assert new is not None
        diff = {k for k in decisions.keys() | new.keys() if decisions.get(k) != new.get(k)}
        assert len(diff) == 1
        (k,) = diff
        if k.startswith("tile:"):
            assert extents[k] % math.prod(new[k]) == 0
        elif k.startswith("unroll:"):
            assert new[k] in UNROLL_STEPS and new[k] != 16
        elif k.startswith("fuse:"):
            assert new[k] == 2
        else:
            assert k not in new                       # realize samples it afresh
    assert mutate({}, {}, rng) is None


def test_mutated_candidates_realize_into_correct_schedules():
    search = _search(seed=3)
    seeds = search.sample(4)
    assert seeds and len({c.key for c in seeds}) == len(seeds)
    rng = random.Random(5)
    checked = 0
    for parent in seeds:
        for _ in range(6):
            new = search.mutated_decisions(parent, rng)
            if new is None:
                continue
            child = search.realize(Candidate(parent.sketch, new, loose=parent.loose))
            if child is None:
                continue
            # every decision the child kept from its mutation is the one it was given
            assert all(child.decisions[k] == v for k, v in new.items())
            if checked < 4 and child.key != parent.key:
                check_schedule(child.schedule, list(WL.tensors), lambda a, b: a @ b,
                               rtol=1e-4, atol=1e-4)
                checked += 1
    assert checked >= 2


def test_evolve_returns_distinct_unmeasured_candidates_best_first():
    search = _search(seed=4)
    seeds = search.sample(8)
    measured = {seeds[0].key, seeds[1].key}
    out = search.evolve(seeds, measured, n_out=5)
    assert 1 <= len(out) <= 5
    keys = [c.key for c in out]
    assert len(set(keys)) == len(keys) and not set(keys) & measured
    scores = [c.score for c in out]
    assert scores == sorted(scores, reverse=True)
    # nothing unmeasured that evolution saw scored higher than what it returned
    seen = [c for c in search.cache.values() if c is not None and c.key not in measured]
    assert max(c.score for c in seen) == scores[0]


def test_an_illegal_decision_is_redrawn_into_a_legal_one():
    """A decision from an edited log (a factor that does not divide, a bool) is replaced
    by a fresh legal sample instead of reaching the schedule."""
    search = _search()
    cand = search.sample(1)[0]
    tile = next(k for k in cand.decisions if k.startswith("tile:"))
    extent = search._extents(cand)[tile]
    bad = dict(cand.decisions, **{tile: [7] * len(cand.decisions[tile])})
    fixed = search.realize(Candidate(cand.sketch, bad))
    assert fixed is not None
    assert extent % math.prod(fixed.decisions[tile]) == 0
    assert all(isinstance(f, int) and not isinstance(f, bool) for f in fixed.decisions[tile])
    check_schedule(fixed.schedule, list(WL.tensors), lambda a, b: a @ b, rtol=1e-4, atol=1e-4)
