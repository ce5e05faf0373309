"""The annotation step of realizing a sketch: where the stages no rule placed are
computed, then parallel, vectorize and auto-unroll for every stage (Ansor's
"InitParallel / InitVectorization / InitUnroll" and compute-location sampling).

Decision keys: ``at:<stage>`` (index into ``location_candidates``), ``parallel:<stage>``
(outer loops fused into the parallel loop), ``unroll:<stage>`` (auto_unroll_max_step).
"""
from __future__ import annotations

import math
import random

from tvmlite.checks import is_int  # decisions come from logs a user may edit
from tvmlite.schedule.schedule import Schedule
from tvmlite.schedule.state import State
from tvmlite.search.template_free import dag
from tvmlite.search.template_free.priors import decide, unroll_steps
from tvmlite.target.target import Target

__all__ = ["annotate", "location_candidates", "SERIAL_PROB"]

SERIAL_PROB = 0.1          # share of sampled stages left serial (no parallel loop)


def location_candidates(state: State, stage: str) -> list:
    """Where a stage no rule placed may be computed: 0 = root, then ``"inline"`` if the
    stage can be inlined, then inside a loop of a consumer, or of any stage that consumer
    is computed in (up to its attach loop), outermost first."""
    out: list = [None] + (["inline"] if dag.inlinable(state, stage) else [])
    for c in dag.consumers(state, stage):
        chain = []
        cs = state.stage(c)
        leaves = cs.leaves[:-1] if len(cs.leaves) > 1 else cs.leaves
        chain.append([(c, it.name) for it in leaves])
        while isinstance(cs.attach, tuple):
            host, loop = cs.attach
            cs = state.stage(host)
            upto = [it.name for it in cs.leaves]
            chain.append([(host, n) for n in upto[:upto.index(loop) + 1]])
        for level in reversed(chain):
            out.extend(x for x in level if x not in out)
    return out


def _sample_location(cands: list, rng: random.Random) -> int:
    """An index into ``cands``. A stage that may be inlined (padding) goes to the root or
    inline a third of the time each, else to a loop: drawn uniformly, most of a conv's
    dozens of loops sit inside the reduction, where a padded copy is made again for every
    step of it, and the random rounds would measure mostly those."""
    if len(cands) > 1 and cands[1] == "inline":
        u = rng.random()
        if u < 2 / 3 or len(cands) == 2:
            return 0 if u < 1 / 3 else 1
        return rng.randrange(2, len(cands))
    return rng.randrange(len(cands))


def annotate(s: Schedule, decisions: dict, rng: random.Random, target: Target,
              placed: set) -> None:
    """Compute locations, then parallel, vectorize and auto-unroll for every stage."""
    for st in reversed(s.state.stages):
        if st.name in placed or st.attach is not None or st.name in s.state.outputs:
            continue
        cands = location_candidates(s.state, st.name)
        # decide calls both at once, so they may read this iteration's cands directly
        idx = decide(decisions, f"at:{st.name}",
                     lambda v: is_int(v, 0, len(cands) - 1),
                     lambda: _sample_location(cands, rng))
        if cands[idx] == "inline":
            s[st.name].compute_inline()
        elif idx:
            c, loop = cands[idx]
            s[st.name].compute_at(s[c], loop)
    for st in s.state.stages:
        if st.attach == "inline":
            continue
        st = s.state.stage(st.name)
        if st.attach is None:
            _parallelize(s, st.name, decisions, rng, target)
        st = s.state.stage(st.name)
        last = st.leaves[-1]
        if last.kind == "spatial" and last.extent > 1 and last.annotation == "none":
            s[st.name].vectorize(last.name)
        steps = unroll_steps(target.vector_registers)
        step = decide(decisions, f"unroll:{st.name}", lambda v: v in steps,
                      lambda: rng.choice(steps))
        st = s.state.stage(st.name)
        if step and st.leaves[0].annotation in ("none", "parallel"):
            s[st.name].pragma(st.leaves[0].name, "auto_unroll_max_step", step)


def _parallelize(s: Schedule, stage: str, decisions: dict, rng: random.Random,
                 target: Target) -> None:
    """Fuse the outermost spatial loops (up to the first reduce or vectorized loop, never
    the innermost) and run the fused loop in parallel."""
    st = s.state.stage(stage)
    outer = []
    for it in st.leaves[:-1]:
        if it.kind != "spatial" or it.annotation != "none":
            break
        outer.append(it)
    if not outer or math.prod(it.extent for it in outer) < 2:
        return

    def sample() -> int:
        # the fewest loops giving every core work, or one more, as Ansor's InitParallel;
        # now and then none at all, which wins for kernels shorter than a thread wake-up
        if rng.random() < SERIAL_PROB:
            return 0
        need = next((k for k in range(1, len(outer) + 1)
                     if math.prod(it.extent for it in outer[:k]) >= 4 * target.cores), len(outer))
        return rng.choice(sorted({need, min(need + 1, len(outer))}))

    k = decide(decisions, f"parallel:{stage}",
               lambda v: is_int(v, 0, len(outer)),
               sample)
    if k == 0:
        return
    loops = [it.name for it in outer[:k]]
    fused = s[stage].fuse(*loops) if len(loops) > 1 else s[stage].leaf_iter_vars[0]
    s[stage].parallel(fused)
