"""The template-free search policy of one task: which candidates to measure next.

Each round (Ansor's ``SketchPolicy``): sample a random population from the sketches, add
the best measured candidates as seeds, evolve it under the cost model, and return the
best-predicted candidates never measured, with an eps-greedy share of purely random
ones so the model also sees programs it would not pick. After measuring, the model is
retrained on every measured program of the task (throughput, 0 for failures).

With ``blocked_first`` (a static task's policy: ``SearchTask.policy``), the first round
also measures the candidates a BLAS would derive from the target (``blocked``:
``blocking.blocked_decisions``, one per sketch with that structure), ahead of the
others, and they seed that round's evolution (and, once measured, the later ones' as
measured bests): the search starts around the blocked kernel instead of having to find
it. ``clock`` adds up the policy's seconds per phase (``result.PHASES``: sampling,
lowering, features, prediction, training) for the tuning's per-round split.
"""
from __future__ import annotations

import random
from typing import Any, Sequence

import numpy as np

from tvmlite.passes.pipeline import loop_nest
from tvmlite.schedule.schedule import Schedule
from tvmlite.schedule.state import ScheduleError
from tvmlite.search.measure.inputs import MeasureInput
from tvmlite.search.model.features import extract, program_scale, schedule_features
from tvmlite.search.records.best import DEFAULT_SEED, SEED
from tvmlite.search.records.record import load_records, target_matches
from tvmlite.search.records.workload import Workload
from tvmlite.search.result import PhaseClock
from tvmlite.search.template_free.blocking import block_rows_axis, blocked_decisions
from tvmlite.search.template_free.evolution import Candidate, EvolutionarySearch
from tvmlite.search.template_free.sketch import RULES, generate_sketches, symbolic_axes
from tvmlite.search.tuning import Proposer
from tvmlite.target.target import Target

INIT_MIN = 64          # random samples seeding each round's evolution, at least ...
INIT_FRACTION = 4      # ... or a quarter of the population (generations fill it by mutation)
SAMPLES_PER_PICK = 4   # ... but no more than this many per candidate the round measures:
                       # each sample is lowered for its features, and a round of 8 spent
                       # two thirds of a small tuning lowering 64 random samples


class SketchPolicy(Proposer):
    """Proposes batches for one workload and learns from their measurements: a proposer
    of the shared tuning loop (``search.tuning``), its candidates MeasureInputs."""

    def __init__(self, workload: Workload, target: Target, model: Any, options: Any,
                 seed: int = 0, rules: Sequence[Any] | None = None,
                 constants: Sequence[str] = (), init_min: int = INIT_MIN,
                 symbolic: Any = None, blocked_first: bool = False,
                 seed_steps: Sequence[Sequence[Any]] = ()):
        """``symbolic``: for a policy proposing at one size of a dynamic workload, that
        workload (its compute over the symbolic size), whose symbolic axes then get
        shape-independent tiles (``sketch.symbolic_axes``); its features then end in the
        program's scale (``features.program_scale``), which the shared model needs to
        tell sizes apart (``model.add_column``). ``seed_steps``: schedules (their Steps)
        the first round measures before anything else, as they are -- a model kernel's
        default schedule, so a tuned model is never slower than its untuned build."""
        self.workload, self.target, self.model, self.options = workload, target, model, options
        self.seed_steps = [tuple(s) for s in seed_steps]
        self.init_min = init_min
        self.scaled = symbolic is not None
        self.blocked_first = blocked_first
        self.rounds = 0                            # batches proposed so far
        self.clock = PhaseClock()
        self.rng = random.Random(seed)
        self.sketches = generate_sketches(workload, rules if rules is not None else RULES)
        if not self.sketches:
            raise ValueError(f"no sketch for workload {workload.name}: every rule declined")
        self.search = EvolutionarySearch(
            self.sketches, workload, target, self._score, self._featurize, self.rng,
            options.population, options.generations, options.mutation_prob,
            constants=tuple(constants),
            loose=tuple(symbolic_axes(symbolic, sk) for sk in self.sketches) if symbolic else (),
            clock=self.clock)
        self.measured: dict[str, float] = {}      # state key -> throughput (0 = failed)
        self.best_seeds: list[Candidate] = []

    # -- model ---------------------------------------------------------------------------
    def _featurize(self, s: Schedule) -> np.ndarray:
        """``features.schedule_features``, its lowering and its extraction timed apart."""
        with self.clock.timed("lower"):
            func = loop_nest(s, list(self.workload.tensors),
                             vector_bytes=self.target.vector_bytes)
        with self.clock.timed("features"):
            rows = extract(func, self.target)
        if self.scaled:
            return np.hstack([rows, program_scale(rows)[:, None]])
        return rows

    def _score(self, cands: list) -> None:
        if cands:
            with self.clock.timed("predict"):
                predicted = self.model.predict([c.features for c in cands])
            for c, p in zip(cands, predicted):
                c.score = float(p)

    # -- rounds --------------------------------------------------------------------------
    def next_batch(self, n: int) -> list[MeasureInput]:
        """Up to ``n`` candidates never measured (fewer when the space is exhausted); the
        first round's begin with the blocked ones (``blocked_first``)."""
        seeds = self._seeds() if not self.rounds else []
        if seeds and n <= len(seeds):
            self.rounds += 1
            return seeds[:n]
        n -= len(seeds)
        opts = self.options
        measured = set(self.measured) | {inp.key for inp in seeds}
        keep = {c.key for c in self.best_seeds}   # bound memory: realized schedules are big
        self.search.cache = {k: c for k, c in self.search.cache.items() if c is None or k in keep}
        first = [c for c in self.blocked_candidates() if c.key not in measured][:n] \
            if self.blocked_first and not self.rounds else []
        self.rounds += 1
        if not getattr(self.model, "trained", True):
            # as Ansor: a model that has not learnt anything yet cannot guide evolution,
            # so the first rounds measure random samples (and cost little to propose)
            fresh = self.search.sample(2 * n)
            picks = []
        else:
            fresh = self.search.sample(max(min(self.init_min, SAMPLES_PER_PICK * n),
                                           opts.population // INIT_FRACTION))
            n_random = min(n - len(first), max(int(round(n * opts.eps_greedy)), 0))
            taken = measured | {c.key for c in first}
            picks = self.search.evolve(fresh + self.best_seeds + first, taken,
                                       n - len(first) - n_random)
        chosen = {c.key: c for c in first + picks}
        pool = [c for c in fresh if c.key not in measured and c.key not in chosen]
        self.rng.shuffle(pool)
        for c in pool:
            if len(chosen) >= n:
                break
            chosen[c.key] = c
        return seeds + [self._input(c) for c in list(chosen.values())[:n]]

    def _seeds(self) -> list[MeasureInput]:
        """The ``seed_steps`` not measured yet, as inputs (decisions say what they are)."""
        out = []
        for steps in self.seed_steps:
            decisions: dict[str, Any] = {SEED: DEFAULT_SEED}
            if self.search.constants:
                decisions["constants"] = list(self.search.constants)
            inp = MeasureInput(self.workload, steps, decisions)
            if inp.key not in self.measured:
                out.append(inp)
        return out

    def blocked(self) -> list[MeasureInput]:
        """The target-derived blocking of every sketch that has a BLAS's structure
        (``blocking.blocked_decisions``), never measured yet."""
        return [self._input(c) for c in self.blocked_candidates()]

    def blocked_candidates(self) -> list[Candidate]:
        """``blocked`` as the search's candidates (realized, with their features)."""
        out: dict[str, Candidate] = {}
        for i, sk in enumerate(self.sketches):
            rows = block_rows_axis(self.workload, sk)
            # the rows as perfect tiles, and (an axis not loose already) with a remainder
            # block, so the registers' row count is a choice: the round measures both
            ways: list[frozenset] = [frozenset()]
            if rows and rows not in self.search.loose_axes(i):
                ways.append(frozenset({rows}))
            for extra in ways:
                with self.clock.timed("sample"):
                    # a constant operand packed once at load time, as a model's default
                    # build has it (so a model's tuning starts from its untuned kernels)
                    decisions = blocked_decisions(self.workload, sk, self.target,
                                                  self.search.constants,
                                                  self.search.loose_axes(i) | extra,
                                                  prepack=not self.scaled)
                cand = self.search.realize(Candidate(i, decisions, loose=extra)) \
                    if decisions else None
                if cand is not None and cand.key not in self.measured:
                    out.setdefault(cand.key, cand)
        return list(out.values())

    def _input(self, cand: Candidate) -> MeasureInput:
        desc = str(self.sketches[cand.sketch])
        decisions = cand.record_decisions(desc)
        if self.search.constants:   # replay exports a constant input's pack API from this
            decisions["constants"] = list(self.search.constants)
        return MeasureInput(self.workload, cand.steps, decisions)

    def update(self, inputs: Sequence[MeasureInput], results: Sequence[Any],
               train: bool = True) -> tuple[list, list, list]:
        """Learn from measured candidates (this round's or a log's): the model keeps
        every program it was given, so it gets only the new ones. With ``train=False``
        the model is left to the caller, who gets the new (features, GFLOP/s, groups)
        to give it at once with other policies' (one retraining instead of many)."""
        flops = self.workload.flops
        xs, ys = [], []
        for inp, res in zip(inputs, results):
            if inp.key in self.measured:
                continue
            thr = flops / res.mean_cost / 1e9 if res.ok else 0.0   # GFLOP/s
            self.measured[inp.key] = thr
            cand = self.search.cache.get(inp.key) or self._from_steps(inp)
            if cand is None:
                continue
            xs.append(cand.features)
            ys.append(thr)
            if thr > 0 and cand.sketch >= 0:
                self._keep_best(cand, thr)
        groups = [self.workload.key] * len(ys)
        if xs and train:
            with self.clock.timed("train"):
                self.model.update(xs, ys, groups)
        return xs, ys, groups

    def _keep_best(self, cand: Candidate, thr: float) -> None:
        cand.score = thr
        self.best_seeds.append(cand)
        self.best_seeds.sort(key=lambda c: -self.measured.get(c.key, 0.0))
        del self.best_seeds[self.options.seeds_from_best:]

    def _from_steps(self, inp: MeasureInput) -> Candidate | None:
        """A candidate for a logged record: its decisions when they match a sketch of this
        version (so it can seed evolution), else just its Steps (for the model)."""
        d = inp.decisions if isinstance(inp.decisions, dict) else {}
        desc, decisions = d.get("sketch_desc"), d.get("decisions")
        for i, sk in enumerate(self.sketches):
            if str(sk) == desc and isinstance(decisions, dict):
                rows = block_rows_axis(self.workload, sk)   # a blocked seed's, loose
                ways: list[frozenset] = [frozenset()] + ([frozenset({rows})] if rows else [])
                for extra in ways:
                    cand = self.search.realize(Candidate(i, dict(decisions), loose=extra))
                    if cand is not None and cand.key == inp.key:
                        return cand
        try:
            s = Schedule.from_steps(self.workload.outputs, inp.steps)
            return Candidate(-1, {}, tuple(inp.steps), inp.key, s, self._featurize(s))
        except ScheduleError:
            return None

    @property
    def best_throughput(self) -> float:
        return max(self.measured.values(), default=0.0)



def pretrain_from_logs(model: Any, logs: Sequence[Any], target: Target) -> int:
    """Teach ``model`` from existing logs (any workloads: transfer learning), before a
    search starts; returns the number of programs it learnt from. Records whose Steps no
    longer apply are skipped; throughputs are normalized per workload by the model."""
    xs, ys, groups = [], [], []
    for log in logs:
        for rec in load_records(log):
            if not target_matches(rec.target, target):
                continue
            wl = rec.workload
            if wl.is_dynamic:   # features of the concrete lowering at the measured size
                if wl.sizes is None:
                    continue    # a dispatch table, not a measurement
                wl = wl.bound()
            try:
                s = Schedule.from_steps(wl.outputs, rec.steps)
                xs.append(schedule_features(s, list(wl.tensors), target))
            except ScheduleError:
                continue
            ys.append(rec.gflops)
            groups.append(rec.workload.key)
    if xs:
        model.pretrain(xs, ys, groups)
    return len(xs)
