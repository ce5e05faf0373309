"""Config spaces and configs: knob enumeration per policy, fallback rules, indexing,
JSON round trip and validation, and entities emitting Steps."""
from __future__ import annotations

import dataclasses
import math
import random

import numpy as np
import pytest

from tvmlite import te
from tvmlite.ops import OPS
from tvmlite.schedule.schedule import LoopAxis
from tvmlite.schedule.steps import AnnotateStep, ReorderStep, SplitStep
from tvmlite.search.templated.space import (
    AnnotateEntity,
    Config,
    ConfigSpace,
    OtherOptionEntity,
    ReorderEntity,
    SpaceError,
    SplitEntity,
)
from tvmlite.target.target import Target

# Fallback splits prefer the target's float32 lanes: fix them at 16 (512-bit vectors) so
# the expected fallbacks below hold on every machine.
T512 = dataclasses.replace(Target.host(), vector_bits=512)


def sizes(space: ConfigSpace, name: str) -> list[tuple]:
    return [e.size for e in space.knobs[name].entities]


def test_split_factors_are_every_ordered_factorization():
    s = ConfigSpace(T512)
    s.define_split("t", 64, num_outputs=3)
    got = sizes(s, "t")
    assert all(math.prod(z) == 64 for z in got)
    assert len(got) == len(set(got)) == 28            # C(6 + 2, 2) for 2**6 into 3 parts
    assert s["t"] == SplitEntity((2, 2, 16))           # balanced outside, 16 inside


def test_split_max_factor_bounds_the_innermost_factor():
    s = ConfigSpace(T512)
    s.define_split("t", 48, max_factor=8)
    assert sorted(z[-1] for z in sizes(s, "t")) == [1, 2, 3, 4, 6, 8]
    assert s["t"].size == (6, 8)
    with pytest.raises(SpaceError, match="max_factor"):
        ConfigSpace(T512).define_split("p", 7, policy="candidates", candidates=[[1, 7]],
                                   max_factor=4)


def test_split_power2_covers_the_extent_with_the_outermost():
    s = ConfigSpace(T512)
    s.define_split("t", 100, num_outputs=3, policy="power2")
    for z in sizes(s, "t"):
        inner = math.prod(z[1:])
        assert all(f & (f - 1) == 0 for f in z[1:]) and inner <= 100
        assert z[0] == -(-100 // inner)
    assert s["t"].size[-1] == 16


def test_split_candidates_accept_minus_one_and_reject_bad_lists():
    s = ConfigSpace(T512)
    s.define_split("t", 30, policy="candidates", candidates=[[-1, 4], [15, 2]])
    assert sizes(s, "t") == [(8, 4), (15, 2)]
    for bad, match in (([[3, 4]], "must be 8"), ([[-1, 4], [8, 4]], "repeat"),
                       ([[2, 3, 5]], "2 factors"), ([[-1, 0]], "factor")):
        with pytest.raises(SpaceError, match=match):
            ConfigSpace(T512).define_split("t", 30, policy="candidates", candidates=bad)
    with pytest.raises(SpaceError, match="candidates= exactly"):
        ConfigSpace(T512).define_split("t", 30, candidates=[[-1, 2]])


def test_split_axis_kinds():
    A, B, C = OPS["matmul"](8, 12, 16)
    sch = te.create_schedule(C.op)
    i, _ = sch[C].op.axis
    s = ConfigSpace(T512)
    s.define_split("i", i)                                    # an IterVar
    io, ii = s["i"].apply(sch, C, i)
    s.define_split("ii", ii, schedule=sch)                    # a LoopAxis of the schedule
    s.define_split("j", "j", schedule=sch)                    # a loop name
    assert [len(s.knobs[n]) for n in ("i", "ii", "j")] == [4, 4, 6]   # ii: 8 = 1 x 8
    with pytest.raises(SpaceError, match="schedule=s"):
        ConfigSpace(T512).define_split("x", ii)
    with pytest.raises(SpaceError, match="no loop named"):
        ConfigSpace(T512).define_split("x", "nope", schedule=sch)
    with pytest.raises(SpaceError, match="IterVar, a LoopAxis"):
        ConfigSpace(T512).define_split("x", 2.5)


def test_reorder_permutations_and_cap():
    s = ConfigSpace(T512)
    s.define_reorder("r", ["a", "b", "c"])
    assert len(s.knobs["r"]) == 6 and s["r"] == ReorderEntity((0, 1, 2))
    s.define_reorder("long", list(range(8)))
    perms = [e.perm for e in s.knobs["long"].entities]
    assert len(perms) == len(set(perms)) == 720 and perms[0] == tuple(range(8))
    again = ConfigSpace(T512)
    again.define_reorder("long", list(range(8)))                # the same sample every time
    assert [e.perm for e in again.knobs["long"].entities] == perms
    s.define_reorder("c", [1, 2, 3], policy="candidates", candidates=[[2, 1, 0], [0, 1, 2]])
    assert s["c"].perm == (0, 1, 2)                             # identity when offered
    with pytest.raises(SpaceError, match="permutation of 0..2"):
        ConfigSpace(T512).define_reorder("c", [1, 2, 3], "candidates", [[0, 0, 1]])
    with pytest.raises(SpaceError, match="policy='all'"):
        ConfigSpace(T512).define_reorder("c", [1, 2], policy="some")


def test_annotate_policies():
    s = ConfigSpace(T512)
    s.define_annotate("u", [1, 2, 3], "unroll")
    s.define_annotate("v", [1, 2, 3], "vectorize")
    s.define_annotate("uv", [1, 2, 3], "try_unroll_vec")
    assert [len(s.knobs[n]) for n in ("u", "v", "uv")] == [8, 2, 12]
    assert s["u"].anns == ("none",) * 3
    assert s["v"].anns == s["uv"].anns == ("none", "none", "vec")
    assert all(e.anns[:2] == ("none", "none") for e in s.knobs["v"].entities)
    with pytest.raises(SpaceError, match="policy must be one of"):
        s.define_annotate("w", [1], "parallel")


def test_knob_values():
    s = ConfigSpace(T512)
    s.define_knob("k", [4, "auto", None, [1, 2]])
    assert s["k"] == OtherOptionEntity(4)
    assert [e.val for e in s.knobs["k"].entities] == [4, "auto", None, [1, 2]]
    with pytest.raises(SpaceError, match="plain JSON"):
        s.define_knob("bad", [object()])
    with pytest.raises(SpaceError, match="repeat"):
        s.define_knob("dup", [1, 1])
    with pytest.raises(SpaceError, match="non-empty list"):
        s.define_knob("empty", [])


def test_redefinition_same_is_a_no_op_different_is_an_error():
    s = ConfigSpace(T512)
    s.define_split("t", 16)
    s.define_split("t", 16)
    assert len(s) == 5
    with pytest.raises(SpaceError, match="defined twice"):
        s.define_split("t", 32)
    with pytest.raises(SpaceError, match="no knob named 'x'"):
        s["x"]


def small_space() -> ConfigSpace:
    s = ConfigSpace(T512)
    s.define_split("t", 12, num_outputs=3)
    s.define_reorder("r", [0, 1, 2])
    s.define_annotate("a", [0, 1], "try_unroll_vec")
    s.define_knob("k", [1, 2.5, "x"])
    return s


def test_index_order_round_trip_and_len():
    s = small_space()
    assert len(s) == 18 * 6 * 6 * 3
    for i in (0, 1, 17, 18, 1000, len(s) - 1):
        c = s.get(i)
        assert c.index == i and s.from_choices(c.choices) == c
    assert s.get(1).choices == (1, 0, 0, 0)                     # first knob fastest
    for bad in (-1, len(s), 1.0, True):
        with pytest.raises(SpaceError, match="index"):
            s.get(bad)
    with pytest.raises(SpaceError, match="one entity index per knob"):
        s.from_choices([0, 0, 0, 3])


def test_random_configs_take_either_generator_and_cover_the_space():
    s = small_space()
    seen = {s.random_config(random.Random(i)).index for i in range(300)}
    seen |= {s.random_config(np.random.default_rng(i)).index for i in range(300)}
    assert len(seen) > 300 and all(0 <= i < len(s) for i in seen)
    with pytest.raises(SpaceError, match="random.Random"):
        s.random_config(42)


def test_fallback_config():
    s = small_space()
    f = s.fallback()
    assert f.is_fallback and not s.get(f.index).is_fallback and s.get(f.index) == f
    assert f["t"].size == (3, 1, 4) and f["r"].perm == (0, 1, 2)
    assert f["a"].anns == ("none", "vec") and f["k"].val == 1


def test_json_round_trip_and_validation():
    s = small_space()
    c = s.get(777)
    d = c.to_json()
    assert d["index"] == 777 and set(d["knobs"]) == {"t", "r", "a", "k"}
    assert Config.from_json(s, d) == c
    bad_value = {"index": 777, "knobs": {**d["knobs"], "t": [5, 5, 5]}}
    bad_index = {"index": 778, "knobs": d["knobs"]}
    missing = {"index": 777, "knobs": {k: v for k, v in d["knobs"].items() if k != "k"}}
    for bad, match in ((bad_value, "knob 't'"), (bad_index, "does not match"),
                       (missing, "differ"), ([1, 2], "index")):
        with pytest.raises(SpaceError, match=match):
            Config.from_json(s, bad)


def test_to_vector_is_numeric_and_fixed_length():
    s = small_space()
    vs = [s.get(i).to_vector() for i in range(0, len(s), 97)]
    assert len({len(v) for v in vs}) == 1 and len(vs[0]) == 3 + 3 + 2 + 1
    assert all(isinstance(x, float) for v in vs for x in v)


def test_config_checks_template_definitions():
    s = small_space()
    c = s.get(5)
    c.define_split("t", 12, num_outputs=3)                      # same: fine
    with pytest.raises(SpaceError, match="defined as"):
        c.define_split("t", 24, num_outputs=3)
    with pytest.raises(SpaceError, match="no knob named"):
        c.define_knob("new", [1])


def test_entities_emit_steps():
    A, B, C = OPS["matmul"](8, 8, 12)
    sch = te.create_schedule(C.op)
    i, j = sch[C].op.axis
    (k,) = sch[C].op.reduce_axis
    loops = SplitEntity([3, 2, 2]).apply(sch, C, k)
    assert [lp.name for lp in loops] == ["k_outer_outer", "k_outer_inner", "k_inner"]
    assert all(isinstance(lp, LoopAxis) for lp in loops)
    order = ReorderEntity((1, 0)).apply(sch, C, [i, j])
    AnnotateEntity(("unroll", "vec")).apply(sch, C, [loops[2], j])
    assert [x.name for x in order] == ["j", "i"]
    assert sch.steps == [SplitStep("C", "k", factor=2), SplitStep("C", "k_outer", factor=2),
                         ReorderStep("C", ("j", "i")), AnnotateStep("C", "k_inner", "unroll"),
                         AnnotateStep("C", "j", "vectorize")]
    with pytest.raises(SpaceError, match="needs 2 axes"):
        ReorderEntity((1, 0)).apply(sch, C, [i])


def test_huge_split_space_is_refused():
    with pytest.raises(SpaceError, match="more than"):
        ConfigSpace(T512).define_split("t", 2 ** 30, num_outputs=8)
