"""Evolutionary search over sketch decisions, guided by the cost model (Ansor's §5.2).

A candidate is ``(sketch index, decisions)``; its schedule is ``realize.realize`` of them.
A generation scores every member with the cost model, picks parents with probability
proportional to their score, and mutates a child with probability ``mutation_prob``
(else copies it). Mutations follow Ansor's mix: tile sizes (a prime factor moves between
two levels of one split) most of the time, then compute location, auto-unroll step and
parallel granularity. The best-scored candidates seen in any generation are kept, and
the ones never measured become the next batch.
"""
from __future__ import annotations

import heapq
import math
import random
from dataclasses import dataclass, field
from typing import Any, Callable

from tvmlite.schedule.state import ScheduleError
from tvmlite.search.measure.inputs import state_key
from tvmlite.search.records.workload import Workload
from tvmlite.search.result import PhaseClock
from tvmlite.search.template_free.loose import loose_choices
from tvmlite.search.template_free.priors import MAX_INNERMOST, max_innermost, unroll_steps
from tvmlite.search.template_free.realize import UNROLL_STEPS, realize
from tvmlite.target.target import Target

MUTATION_WEIGHTS = {"tile": 0.90, "at": 0.05, "unroll": 0.04, "parallel": 0.01}


@dataclass
class Candidate:
    """One point of the search: a sketch, its decisions, and (once realized) its Steps."""
    sketch: int
    decisions: dict
    steps: tuple = ()
    key: str = ""
    schedule: Any = None
    features: Any = None
    score: float = 0.0   # the cost model's latest prediction (changes as it learns)
    # (stage, axis) pairs whose tiles need not divide them beyond the sketch's own loose
    # axes: a blocked seed's remainder rows (policy.blocked_candidates), kept by its
    # children so that their mutations treat the axis as loose too
    loose: frozenset = frozenset()

    def record_decisions(self, sketch_desc: str) -> dict:
        return {"sketch": self.sketch, "sketch_desc": sketch_desc, "decisions": self.decisions}


def _prime_factors(n: int) -> list[int]:
    out, p = [], 2
    while p * p <= n:
        while n % p == 0:
            out.append(p)
            n //= p
        p += 1
    if n > 1:
        out.append(n)
    return out


def mutate_tile(factors: list[int], extent: int, rng: random.Random,
                limit: int = MAX_INNERMOST) -> list[int] | None:
    """Move one prime factor between two levels of a split (the outermost level is
    ``extent / prod(factors)``); None if no legal move was found."""
    levels = [extent // math.prod(factors)] + list(factors)
    for _ in range(8):
        src = rng.randrange(len(levels))
        if levels[src] <= 1:
            continue
        p = rng.choice(_prime_factors(levels[src]))
        dst = rng.randrange(len(levels) - 1)
        dst = dst + 1 if dst >= src else dst
        new = list(levels)
        new[src] //= p
        new[dst] *= p
        if new[-1] <= limit:
            return new[1:]
    return None


def mutate_loose_tile(factors: list[int], extent: int, rng: random.Random, registers: int,
                      limit: int = MAX_INNERMOST) -> list[int] | None:
    """One level of a symbolic axis's tile redrawn from ``loose.loose_choices`` (half
    the time a neighbour of its value there, so 7 rows may become 6 or 8); None if no
    other value fits."""
    for _ in range(8):
        i = rng.randrange(len(factors))
        fit = loose_choices(extent, math.prod(factors) // factors[i], i == len(factors) - 1,
                            registers, limit)
        if len(fit) < 2:
            continue
        if rng.random() < 0.5:
            at = min(range(len(fit)), key=lambda j: abs(fit[j] - factors[i]))
            near = [fit[j] for j in (at - 1, at + 1) if 0 <= j < len(fit)]
            pick = rng.choice([d for d in near if d != factors[i]] or fit)
        else:
            pick = rng.choice([d for d in fit if d != factors[i]])
        return factors[:i] + [pick] + factors[i + 1:]
    return None


def mutate(decisions: dict, extents: dict, rng: random.Random, limit: int = MAX_INNERMOST,
           steps: tuple = UNROLL_STEPS, loose: frozenset = frozenset(),
           registers: int = 32) -> dict | None:
    """A copy of ``decisions`` with one decision changed; None if nothing could change.
    ``extents`` maps each tile key to the extent of the axis it splits; ``limit`` (the
    target's ``max_innermost``) bounds an innermost tile, ``steps`` are its unroll
    choices (``unroll_steps``); tile keys in ``loose`` split a symbolic axis
    (``mutate_loose_tile``, with the target's ``registers``)."""
    kinds: dict[str, list[str]] = {"tile": [], "at": [], "unroll": [], "parallel": []}
    for k in decisions:
        kind = k.split(":", 1)[0]
        if kind in ("tile", "rfactor", "rfvec", "rfser"):
            kinds["tile"].append(k)
        elif kind in ("at", "fuse", "panels", "prepack"):
            kinds["at"].append(k)
        elif kind in kinds:
            kinds[kind].append(k)
    present = [k for k in MUTATION_WEIGHTS if kinds[k]]
    if not present:
        return None
    kind = rng.choices(present, [MUTATION_WEIGHTS[k] for k in present])[0]
    key = rng.choice(kinds[kind])
    new = dict(decisions)
    if key.startswith("tile:") and key in extents:
        moved = (mutate_loose_tile(decisions[key], extents[key], rng, registers, limit)
                 if key in loose else mutate_tile(decisions[key], extents[key], rng, limit))
        if moved is None:
            return None
        new[key] = moved
    elif key.startswith("unroll:"):
        new[key] = rng.choice([u for u in steps if u != decisions[key]] or list(steps))
    elif key.startswith("fuse:"):
        new[key] = 3 - decisions[key]
    elif key.startswith("panels:"):
        new[key] = 1 - decisions[key]
    else:
        del new[key]          # at / parallel / rfactor: realize samples a fresh value
    return new


@dataclass
class EvolutionarySearch:
    """Runs the generations for one task. Candidates are realized once per state key
    (illegal ones cached as None), with their features, so re-scoring after the model
    learns costs one prediction."""
    sketches: list
    workload: Workload
    target: Target
    score: Callable[[list], None]       # fills .score of a list of realized candidates
    featurize: Callable[[Any], Any]     # features of a realized schedule; ScheduleError if
    rng: random.Random                  # lowering rejects it
    population: int = 2048
    generations: int = 4
    mutation_prob: float = 0.85
    cache: dict = field(default_factory=dict)   # key -> realized Candidate, or None
    constants: tuple = ()   # inputs the workload declares constant: may be pre-packed
    loose: tuple = ()       # per sketch, its (stage, axis) symbolic in the deployed kernel
    clock: PhaseClock = field(default_factory=PhaseClock)   # realizing is "sample"

    def loose_axes(self, sketch: int) -> frozenset:
        return self.loose[sketch] if self.loose else frozenset()

    def realize(self, cand: Candidate) -> Candidate | None:
        """Fill steps/key (and reuse a cached realization); None if illegal."""
        try:
            with self.clock.timed("sample"):
                s, used = realize(self.workload, self.sketches[cand.sketch], cand.decisions,
                                  self.rng, self.target, self.constants,
                                  self.loose_axes(cand.sketch) | cand.loose)
        except ScheduleError:
            return None
        key = state_key(self.workload.key, s.steps)
        if key in self.cache:
            return self.cache[key]
        try:    # lowering checks what steps cannot (e.g. a compute location's coverage)
            feats = self.featurize(s)
        except ScheduleError:
            self.cache[key] = None
            return None
        cand = Candidate(cand.sketch, used, tuple(s.steps), key, s, feats, loose=cand.loose)
        self.cache[key] = cand
        return cand

    def sample(self, n: int) -> list[Candidate]:
        """Up to ``n`` distinct random legal candidates (a bounded number of attempts)."""
        out: dict[str, Candidate] = {}
        for _ in range(4 * n + 16):
            if len(out) >= n:
                break
            c = self.realize(Candidate(self.rng.randrange(len(self.sketches)), {}))
            if c is not None and c.key not in out:
                out[c.key] = c
        return list(out.values())

    def _extents(self, cand: Candidate) -> dict:
        s = cand.schedule
        out = {}
        for k in cand.decisions:
            if k.startswith("tile:"):
                stage, axis = k[5:].split(".", 1)
                for st in s.state.stages:
                    if st.name == stage:
                        out[k] = next(it.extent for it in st.roots if it.name == axis)
        return out

    def evolve(self, seeds: list[Candidate], measured: set, n_out: int) -> list[Candidate]:
        """The ``n_out`` best-scored unmeasured candidates found by evolving ``seeds``."""
        if n_out <= 0:
            return []
        pop = [c for c in seeds if c is not None]
        best: list = []       # heap of (score, tiebreak, key) over unmeasured candidates
        seen: set = set()
        counter = 0
        for gen in range(self.generations + 1):
            self.score(pop)
            for c in pop:
                if c.key not in measured and c.key not in seen:
                    seen.add(c.key)
                    counter += 1
                    item = (c.score, -counter, c.key)
                    if len(best) < n_out:
                        heapq.heappush(best, item)
                    elif item > best[0]:
                        heapq.heapreplace(best, item)
            if gen == self.generations or not pop:
                break
            pop = self._next_generation(pop)
        ranked = sorted(best, reverse=True)
        return [self.cache[k] for _, _, k in ranked]

    def mutated_decisions(self, parent: Candidate, rng: random.Random) -> dict | None:
        """``parent``'s decisions with one changed (``mutate``) within this target's
        limits: its innermost tile, unroll steps and register file."""
        regs = self.target.vector_registers
        loose = frozenset(f"tile:{st}.{ax}"
                          for st, ax in self.loose_axes(parent.sketch) | parent.loose)
        return mutate(parent.decisions, self._extents(parent), rng,
                      max_innermost(self.target.vector_lanes("float32"), regs),
                      unroll_steps(regs), loose, regs)

    def _next_generation(self, pop: list[Candidate]) -> list[Candidate]:
        scores = [max(c.score, 0.0) for c in pop]
        low = min(scores)
        weights = [s - low + 1e-9 for s in scores]
        children: dict[str, Candidate] = {}
        for _ in range(2 * self.population):
            if len(children) >= self.population:
                break
            parent = self.rng.choices(pop, weights)[0]
            child = parent
            if self.rng.random() < self.mutation_prob:
                new = self.mutated_decisions(parent, self.rng)
                if new is not None:
                    child = self.realize(Candidate(parent.sketch, new,
                                                   loose=parent.loose)) or parent
            children.setdefault(child.key, child)
        return list(children.values())
