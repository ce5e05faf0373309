"""search/templated/knobs.py: the entities each knob kind enumerates (split
factorizations, power-of-two splits, permutations, annotations, options), the fallback
each picks (vector-friendly for the knob's target), value <-> entity lookup, numeric
vectors, and entities applied to a schedule give correct programs."""
from __future__ import annotations

import dataclasses
import itertools
import math

import numpy as np
import pytest

from tvmlite import te
from tvmlite.search.templated.knobs import (
    MAX_REORDER,
    AnnotateEntity,
    OtherOptionEntity,
    ReorderEntity,
    SpaceError,
    SplitEntity,
    make_knob,
    vector_friendly,
)
from tvmlite.target.target import Target
from tvmlite.testing import check_schedule

HOST = Target.host()
T512 = dataclasses.replace(HOST, vector_bits=512)
T256 = dataclasses.replace(HOST, vector_bits=256)
FRIENDLY = vector_friendly(T512)


def _split(extent, parts, policy="factors", candidates=None, max_factor=None,
           friendly=FRIENDLY):
    return make_knob("t", "split", ("split", extent, parts, policy, candidates, max_factor),
                      friendly)


def test_vector_friendly_factors_follow_the_targets_float32_lanes():
    assert vector_friendly(T512) == (16, 8, 4, 2, 1)
    assert vector_friendly(T256) == (8, 4, 2, 1)
    assert vector_friendly(dataclasses.replace(HOST, vector_bits=128)) == (4, 2, 1)


def test_factor_splits_are_exactly_the_ordered_factorizations():
    knob = _split(12, 3)
    got = {e.size for e in knob.entities}
    want = {z for z in itertools.product(range(1, 13), repeat=3) if math.prod(z) == 12}
    assert got == want and len(knob) == len(want) == 18
    assert all(isinstance(e, SplitEntity) for e in knob.entities)


def test_the_fallback_innermost_factor_depends_on_the_target():
    assert _split(64, 2).entities[_split(64, 2).fallback].size == (4, 16)
    narrow = _split(64, 2, friendly=vector_friendly(T256))
    assert narrow.entities[narrow.fallback].size == (8, 8)
    odd = _split(9, 2)                              # no power of two but 1 divides 9
    assert odd.entities[odd.fallback].size == (9, 1)


def test_power2_splits_cover_the_extent_with_a_remainder():
    knob = _split(10, 2, policy="power2")
    assert sorted(e.size for e in knob.entities) == [(2, 8), (3, 4), (5, 2), (10, 1)]


def test_max_factor_filters_and_an_empty_choice_is_an_error():
    assert max(e.size[-1] for e in _split(48, 2, max_factor=8).entities) == 8
    with pytest.raises(SpaceError, match="max_factor=1"):
        _split(7, 2, policy="candidates", candidates=((1, 7),), max_factor=1)


def test_too_many_factorizations_ask_for_a_bound():
    with pytest.raises(SpaceError, match="more than 100000 factorizations"):
        _split(2 ** 20 * 3 ** 6, 8)


def test_reorders_are_all_permutations_up_to_six_axes_and_a_fixed_sample_beyond():
    knob = make_knob("r", "reorder", ("reorder", 3, "all", None), FRIENDLY)
    assert sorted(e.perm for e in knob.entities) == sorted(itertools.permutations(range(3)))
    assert knob.entities[knob.fallback].perm == (0, 1, 2)
    big = make_knob("r", "reorder", ("reorder", 7, "all", None), FRIENDLY)
    again = make_knob("r", "reorder", ("reorder", 7, "all", None), FRIENDLY)
    assert len(big) == MAX_REORDER and big.entities[0].perm == tuple(range(7))
    assert big.entities == again.entities                  # the same space in every process
    assert len({e.perm for e in big.entities}) == MAX_REORDER
    assert all(sorted(e.perm) == list(range(7)) for e in big.entities)


def test_annotations_per_policy_and_their_fallbacks():
    both = make_knob("a", "annotate", ("annotate", 2, "try_unroll_vec"), FRIENDLY)
    assert {e.anns for e in both.entities} == {
        (x, y) for x in ("none", "unroll") for y in ("none", "unroll", "vec")}
    assert both.entities[both.fallback].anns == ("none", "vec")
    unroll = make_knob("a", "annotate", ("annotate", 2, "unroll"), FRIENDLY)
    assert len(unroll) == 4 and unroll.entities[unroll.fallback].anns == ("none", "none")
    vec = make_knob("a", "annotate", ("annotate", 3, "vectorize"), FRIENDLY)
    assert {e.anns for e in vec.entities} == {("none", "none", "none"), ("none", "none", "vec")}


def test_values_name_their_entity_and_unknown_values_are_errors():
    opt = make_knob("o", "other", ("other", ('"x"', "3", "true")), FRIENDLY)
    assert [e.val for e in opt.entities] == ["x", 3, True] and opt.fallback == 0
    assert opt.index_of(3) == 1 and opt.index_of(True) == 2
    with pytest.raises(SpaceError, match="is not one of its 3 choices"):
        opt.index_of(4)
    split = _split(12, 2)
    i = split.index_of([3, 4])
    assert split.entities[i] == SplitEntity((3, 4))


def test_numeric_vectors_for_the_cost_model():
    split = _split(12, 2)
    assert split.vector(split.index_of([3, 4])) == [3.0, 4.0]
    ann = make_knob("a", "annotate", ("annotate", 2, "try_unroll_vec"), FRIENDLY)
    assert ann.vector(ann.index_of(["unroll", "vec"])) == [1.0, 2.0]
    opt = make_knob("o", "other", ("other", ('"x"', "2.5")), FRIENDLY)
    assert opt.vector(0) == [0.0] and opt.vector(1) == [2.5]


def test_entities_applied_to_a_schedule_compute_the_same_thing():
    A = te.placeholder((12, 8), name="A")
    B = te.compute((12, 8), lambda i, j: A[i, j] * 2.0, name="B")
    s = te.create_schedule(B.op)
    i, j = s[B].op.axis
    i0, i1, i2 = SplitEntity((3, 2, 2)).apply(s, B, i)
    assert [ax.name for ax in (i0, i1, i2)] == [leaf.name for leaf in s[B].leaf_iter_vars][:3]
    order = ReorderEntity((1, 0, 2, 3)).apply(s, B, [i0, i1, i2, j])
    AnnotateEntity(("none", "unroll", "none", "vec")).apply(s, B, order)
    assert OtherOptionEntity(5).value() == 5
    extents = [it.extent for it in s.state.stage("B").leaves]
    assert extents == [2, 3, 2, 8]
    check_schedule(s, [A, B], lambda a: a * 2.0)
    with pytest.raises(SpaceError, match="needs 4 axes"):
        ReorderEntity((1, 0, 2, 3)).apply(s, B, [i0, i1])


def test_a_split_entity_with_an_imperfect_outer_factor_is_guarded():
    A = te.placeholder((10,), name="A")
    B = te.compute((10,), lambda i: A[i] + 1.0, name="B")
    s = te.create_schedule(B.op)
    SplitEntity((3, 4)).apply(s, B, s[B].op.axis[0])      # 3 * 4 = 12 > 10
    check_schedule(s, [A, B], lambda a: a + 1.0)
    assert np.prod([it.extent for it in s.state.stage("B").leaves]) == 12
