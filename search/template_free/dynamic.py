"""Tuning a dynamic workload (a symbolic size ``M``) once for a range of sizes.

As DietCode: one budget and one cost model for all sizes. The search runs one sketch
policy per representative size, each proposing schedules for the compute *at* that size
(its sketches and tile choices see real extents, and its features are those of the
concrete lowering), all sharing one XGBoost model trained on throughput normalized per
size, so what it learns at M=64 guides M=256. Every candidate is measured as what is
deployed: the symbolic kernel (over M), lowered and compiled once (the builder shares
the lowering and the library across sizes) and called at its own size first, then at
the sizes next to it outward, a direction ending at a size where it runs ``SPREAD``
times slower than the best there (that size cannot use it, and the ones beyond are
unlikely to); every policy learns each measurement at its size. The tiles of the
symbolic axis are shape-independent (``loose.loose_choices``, the policy's
``symbolic=``): drawn from the target's options as well as the divisors of the policy's
size, so the candidates of the policy at 21 are not all perfect fits of 21, each paying
a whole extra tile at 22. The shared model's rows end in the program's scale
(``features.program_scale``), so it can tell a store that does not change with the size
(a packing) at small sizes from the same store at large ones. The budget counts
measurements, so a candidate good over a wide range costs more of it than a specialist.

The first round proposes half the candidates the budget affords at every size, so a
second round learns from it, and before them, at the largest size, the candidate a BLAS
would derive from the target (``blocking.blocked_decisions``: a register block, a
packed panel and rows sized by L2), which a search evolving a tenth of a static
population per size does not find by itself (that module's doc); measured outward like
the others, it also seeds the evolution of the sizes it runs well at. The later rounds
propose what is left, at most ``measures_per_round`` each (so no more rounds than a
static task tuning the same number per size), the measured cost of a candidate so far
telling how many that is; when that leaves fewer than half a round, the last round
takes one candidate per measurement left (its waves may stop at its own size), so the
budget is always spent. The shared model retrains once a round, on all of it. The
search work of a round is one static search's: each size's policy evolves
``population // sizes`` (at least ``MIN_POPULATION``) from as many fewer random samples,
so tuning for eight sizes does not cost eight searches (that, and one compile per
candidate for all its sizes, is where the time goes down against tuning each size
apart). Then:

1. variants (``choose_variants``): greedily, the candidate that most raises the geometric
   mean over sizes of (best time there / time of the fastest variant chosen so far), until
   ``max_variants`` or until one more would buy less than ``MIN_GAIN``: a schedule that
   is 98% of the best at every size beats six specialists in code size and costs nothing;
2. the table: per size the fastest variant, from those measurements (the next size up's
   when it is within ``TIE`` of the fastest: a boundary is not placed by noise). Where two
   neighbouring sizes chose different variants, both are measured at a probe size between
   them (their geometric mean), so the boundary is placed by a measurement too (the
   budget keeps ``2 * (sizes - 1)`` measurements for probes when it holds 8 per size);
   a size is served by the variant of the smallest measured size at or above it
   (``dispatch.ranges_from_choice``: a variant fitted to m covers sizes below m with no
   more tiles). Table and variants go in the log as a dispatch
   record; ``apply_best`` builds the dispatching kernel from it.

Representative sizes of a range ``(lo, hi)``: its ends and up to ``max_sizes - 2`` sizes
evenly spaced in log scale between them (one per octave at most), each rounded to an odd
number. A power of two is a multiple of every power-of-two tile, so a candidate measured
there never pays for a remainder, while most real sizes do: odd interior sizes make the
measurements, and the variants chosen from them, those of a typical size. Explicit sizes
are used as given.
"""
from __future__ import annotations

import json
import math
import time
from dataclasses import replace
from typing import Any, Callable, Sequence

from tvmlite.search.measure.inputs import MeasureInput, MeasureResult
from tvmlite.search.measure.measurer import Measurer
from tvmlite.search.model.cost_model import XGBModel
from tvmlite.search.model.features import N_FEATURES, program_scale
from tvmlite.search.options import TuningOptions
from tvmlite.search.records.dispatch import (
    DispatchTable,
    build_dispatch,
    dispatch_record,
    latest_table,
    ranges_from_choice,
)
from tvmlite.search.records.record import append_record, load_records
from tvmlite.search.records.workload import Workload
from tvmlite.search.result import Trial, TuneResult
from tvmlite.search.template_free.policy import INIT_MIN, SketchPolicy
from tvmlite.search.tuning import Tally

# sizes a range is tuned at. With 8 (1, 3, 7, 21, 53, ...), no candidate of a GMM tuning
# over M = 1..1024 ran well at M = 9: the variants were fitted to 7 or to 21, well below
# kernels tuned at 9; with 10 (1, 3, 5, 11, 23, 47, ...) the dispatching kernel came
# close to them there, in as much tuning time
MAX_SIZES = 10
MAX_VARIANTS = 4
MIN_GAIN = 0.01     # a variant joins if it raises the geometric mean over sizes by 1%
MIN_POPULATION = 16
PROBES_FROM = 8     # probes are measured when the budget holds this many per size
SPREAD = 2      # a candidate this many times slower than a size's best goes no further
# a size keeps the variant of the next size up when that one is this close to its fastest:
# a tuning's timings (2 repeats of 10 ms) differ by more than that between runs, and a
# GMM table once switched to another variant at M = 151 on a difference within that noise,
# serving M = 117 with a clearly slower kernel than the one kept above
TIE = 0.02
TUNER = "template-free"


def representative_sizes(spec: Any, max_sizes: int = MAX_SIZES) -> list:
    """Sizes to tune at, from a list of sizes or a ``(lo, hi)`` range (see module doc)."""
    if isinstance(spec, tuple) and len(spec) == 2:
        lo, hi = spec
        if any(isinstance(x, bool) or not isinstance(x, int) for x in spec) or not 1 <= lo <= hi:
            raise ValueError(f"a size range must be (lo, hi) ints with 1 <= lo <= hi, got {spec!r}")
        n = min(max_sizes, int(math.log2(hi / lo) + 1e-9) + 1)   # at most one per octave
        inner = (round(lo * (hi / lo) ** (i / (n - 1))) for i in range(1, n - 1))
        return sorted({lo, hi} | {m | 1 for m in inner if lo < m | 1 < hi})
    if isinstance(spec, (list, tuple)) and spec and all(
            isinstance(x, int) and not isinstance(x, bool) and x >= 1 for x in spec):
        return sorted(set(spec))
    raise ValueError(f"sizes must be a list of ints >= 1 or a (lo, hi) range, got {spec!r}")


def all_measured(results: Sequence[MeasureResult | None]) -> list[MeasureResult]:
    """``Measurer.measure``'s results when no quota applies: then every input has one (a
    None would misalign the inputs and their results, so it is an error)."""
    if any(r is None for r in results):
        raise ValueError("measure without quotas left an input unmeasured")
    return [r for r in results if r is not None]


def check_shapes(workload: Workload, shapes: Any) -> tuple[str, list]:
    """(size name, representative sizes) of a dynamic task's ``shapes=`` argument."""
    names = workload.size_names
    if len(names) != 1:
        raise ValueError(f"tuning for a range needs exactly one symbolic size; workload "
                         f"{workload.name} has {list(names)} (bind the others to numbers)")
    if not isinstance(shapes, dict) or set(shapes) != set(names):
        raise ValueError(f"SearchTask(shapes=...) must give the sizes of {names[0]}, e.g. "
                         f"shapes={{'{names[0]}': [1, 8, 64, 256]}} or "
                         f"{{'{names[0]}': (1, 2048)}}; got {shapes!r}")
    return names[0], representative_sizes(shapes[names[0]])


def tune_dynamic(task: Any, trials: int, log_file: Any, options: TuningOptions,
                 callback: Callable[[Trial], None] | None = None, model: Any = None,
                 max_variants: int = MAX_VARIANTS) -> TuneResult:
    """Tune ``task`` (a dynamic SearchTask) under one budget of ``trials`` measurements."""
    wl, target = task.workload, task.target
    name, sizes = task.size_name, task.sizes
    n_var = min(max_variants, len(sizes))
    if trials < len(sizes):
        raise ValueError(f"tune(trials={trials}) is too small for {len(sizes)} sizes: give at "
                         f"least {len(sizes)} (one measurement per size)")
    if model is None and options.pretrained:
        from tvmlite.search.model.pretrained import load_pretrained
        model = load_pretrained("pack-sum")   # None (warned) if it does not fit
        if model is not None and model.prior_until is not None:
            # a candidate measured at several sizes is that many programs but one schedule's
            # evidence: keep the prior until as many candidates as a static task's
            model.prior_until *= len(sizes)
    model = model or XGBModel(seed=options.seed)
    if model.n_features == N_FEATURES:      # a prior's programs, without the sizes' scale
        model.add_column(program_scale)
    at = {m: wl.at({name: m}) for m in sizes}
    share = replace(options, population=max(MIN_POPULATION, options.population // len(sizes)))
    policies = {m: SketchPolicy(at[m].bound(), target, model, share, seed=(options.seed or 0) + i,
                                rules=task.rules, constants=task.constants,
                                init_min=max(MIN_POPULATION // 2, INIT_MIN // len(sizes)),
                                symbolic=wl)
                for i, m in enumerate(sizes)}
    probes = 2 * (len(sizes) - 1) if trials >= PROBES_FROM * len(sizes) else 0
    result = TuneResult(wl)
    # the shared accounting, with one best per size (the tally's best: size -> Record);
    # Trial.index is the count of this run's measurements: the budget spans all sizes
    tally = Tally(result, time.perf_counter(), callback, group=lambda r: r.workload.sizes[name])
    best = tally.best
    with options.measurer(log_file, target, TUNER) as measurer:
        seen: set = set()    # Steps (as _key) of every candidate measured, from the log too
        keys = {w.key for w in at.values()}
        for m in sizes:
            _seed_from_log(policies[m], measurer, at[m], tally, seen)
        spent = sum(1 for r in measurer.known.values() if r.workload.key in keys)
        # the first round: half the candidates the budget affords at every size, so a
        # second learns from it (module doc)
        affordable = max(0, trials - probes - spent) // len(sizes)
        per_round = max(2, min(options.measures_per_round, -(-affordable // 2)))
        turn, proposed, cost = 0, 0, 0   # cost: measurements the proposed ones took
        while spent + 1 <= trials - probes:
            each = cost / proposed if proposed else len(sizes)   # measurements a candidate
            # the first round half the budget (at every size), the next ones the rest; at
            # least one candidate while a measurement is left (a resumed run whose log
            # holds the blocked candidates has no other source: none proposed would end
            # the search with its budget unspent, as if the space were exhausted)
            left = trials - probes - spent
            want = max(1, min(per_round if not turn else options.measures_per_round,
                              int(left / max(1.0, each))))
            if turn and want < max(2, per_round // 2):
                # a handful of candidates is not worth a round's search of its own: the
                # last round takes one per measurement left, so the budget is spent even
                # where its waves stop early (a slow or failed candidate)
                want = left
            t0 = time.perf_counter()
            batch = _propose(policies, sizes, want, turn, seen)
            if not turn:    # the blocked candidates, at the largest size (module doc)
                batch = _unseen([(len(sizes) - 1, inp)
                                 for inp in policies[sizes[-1]].blocked()], seen) + batch
            turn += 1
            result.search_seconds += time.perf_counter() - t0
            if not batch:
                break          # every policy's space is exhausted
            t1 = time.perf_counter()
            used = _measure_outward(batch, sizes, at, policies, model, measurer,
                                    trials - probes - spent,
                                    lambda res, rec, m: tally.add(res, rec), best)
            result.measure_seconds += time.perf_counter() - t1
            spent, proposed, cost = spent + used, proposed + len(batch), cost + used
        table = _choose(wl, name, sizes, at, measurer, n_var, tally, probes > 0)
        if table is not None:
            rec = dispatch_record(wl, target, table)
            if log_file is not None:
                append_record(log_file, rec)
            result.dispatch = table          # type: ignore[attr-defined]
    return result     # best: the tally's size best of highest throughput


def _measure_outward(batch: list, sizes: list, at: dict, policies: dict, model: Any,
                     measurer: Measurer, room: int, account: Callable, best: dict) -> int:
    """Measure each ``(size index, candidate)`` of ``batch`` at its own size, then wave by
    wave at the sizes next to the last ones outward, a direction ending where it failed or
    ran ``SPREAD`` times slower than the best there (which cannot be served by it, and the
    sizes beyond are unlikely to be); each policy learns every measurement at its size.
    At most ``room`` measurements; returns how many were made. The shared model
    (``model``, the policies') retrains once, on all of them."""
    own = {id(inp): i for i, inp in batch}
    wave = [(inp, i) for i, inp in batch]
    used = 0
    learnt: tuple = ([], [], [])    # the model retrains once, on all of the round
    while wave and used < room:
        wave = wave[:room - used]
        real = [MeasureInput(at[sizes[i]], inp.steps, inp.decisions) for inp, i in wave]
        measured = all_measured(measurer.measure(real))
        for i in sorted({i for _, i in wave}):
            mine = [(inp, res) for (inp, j), res in zip(wave, measured) if j == i]
            policy = policies[sizes[i]]
            for part, new in zip(learnt, policy.update(
                    [MeasureInput(policy.workload, inp.steps, inp.decisions) for inp, _ in mine],
                    [res for _, res in mine], train=False)):
                part.extend(new)
        for (inp, i), r, res in zip(wave, real, measured):
            account(res, measurer.known.get(r.key), sizes[i])
        used += len(wave)
        nxt = []
        for (inp, i), res in zip(wave, measured):
            top = best.get(sizes[i])
            if not res.ok or (top is not None and res.mean_cost > SPREAD * top.mean_cost):
                continue
            steps = (-1, 1) if i == own[id(inp)] else ((1,) if i > own[id(inp)] else (-1,))
            nxt += [(inp, i + d) for d in steps if 0 <= i + d < len(sizes)]
        wave = nxt
    if learnt[0]:
        model.update(*learnt)
    return used


def _propose(policies: dict, sizes: list, want: int, turn: int, seen: set) -> list:
    """Up to ``want`` new ``(size index, candidate)``, the policies taking turns (starting
    at ``turn``) so every size's sketches and tile choices get proposed; ``seen`` gains
    their Steps."""
    order = [(turn + i) % len(sizes) for i in range(len(sizes))]
    share = -(-want // len(sizes))
    out: list = []
    for i in order:
        if len(out) >= want:
            break
        out += _unseen([(i, inp) for inp in policies[sizes[i]].next_batch(
            min(share, want - len(out)))], seen)
    return out


def _unseen(batch: list, seen: set) -> list:
    """The ``(size index, candidate)`` of ``batch`` whose Steps are not in ``seen``
    (which gains them)."""
    out = []
    for i, inp in batch:
        k = _key(inp.steps)
        if k not in seen:
            seen.add(k)
            out.append((i, inp))
    return out


def _seed_from_log(policy: Any, measurer: Measurer, wl_at: Workload, tally: Tally,
                   seen: set) -> None:
    """Resume: the log's records at this size train the model, count toward the budget
    and give the size's best so far."""
    old = sorted((r for r in measurer.known.values() if r.workload.key == wl_at.key),
                 key=lambda r: r.result.timestamp)
    seen.update(_key(r.steps) for r in old)
    if not old:
        return
    bound = policy.workload
    policy.update([MeasureInput(bound, r.steps, r.decisions) for r in old],
                  [r.result for r in old])
    tally.seed(old)


def _key(steps: Sequence[Any]) -> str:
    return json.dumps([s.to_json() for s in steps], sort_keys=True)


def _choose(wl: Workload, name: str, sizes: list, at: dict, measurer: Measurer, n_var: int,
            tally: Tally, probe: bool) -> DispatchTable | None:
    """Variants and table from every measurement at the tuned sizes (the log's too; a
    variant competes at the sizes it was measured at); the probes between sizes that
    chose different variants are measured here, as part of the budget."""
    times, steps_of = _times(measurer, at)
    variants = choose_variants(times, sizes, n_var)
    if not variants:
        return None

    def measure(inputs: list) -> list:
        new = [inp.key not in measurer.known for inp in inputs]
        out = all_measured(measurer.measure(inputs))
        for inp, res, fresh in zip(inputs, out, new):
            if fresh:
                tally.add(res, measurer.known.get(inp.key))
        return [res.mean_cost if res.ok else math.inf for res in out]

    tuned = fastest_per_size(times, variants, sizes)
    if not tuned:
        return None
    if probe:
        tuned.update(_probes(wl, name, tuned, variants, steps_of, measure))
    used = sorted({vi for vi, _ in tuned.values()})          # drop variants no size chose
    renum = {old: new for new, old in enumerate(used)}
    tuned = {m: (renum[vi], t) for m, (vi, t) in tuned.items()}
    return DispatchTable(name, tuple(tuple(steps_of[variants[v]]) for v in used),
                         ranges_from_choice({m: vi for m, (vi, _) in tuned.items()}), tuned)


def fastest_per_size(times: dict, variants: Sequence, sizes: Sequence[int]) -> dict:
    """{size: (variant index, seconds)}: at each size the fastest of ``variants`` (keys of
    ``times``, {candidate: {size: seconds}}), or the next size up's variant when it is
    within ``TIE`` of the fastest (sizes no variant ran at are left out)."""
    tuned: dict = {}
    above = None      # the variant chosen at the next size up
    for m in sorted(sizes, reverse=True):
        row = [(times[k].get(m, math.inf), vi) for vi, k in enumerate(variants)]
        t, vi = min(row)
        if t == math.inf:
            continue
        if above is not None and row[above][0] <= t * (1 + TIE):
            t, vi = row[above]     # a boundary a tie would place is placed by noise
        tuned[m] = (vi, t)
        above = vi
    return tuned


def _times(measurer: Measurer, at: dict) -> tuple[dict, dict]:
    """{candidate: {size: seconds}} of every successful measurement at the tuned sizes,
    and each candidate's Steps (a candidate is its Steps, whatever the size)."""
    size_of = {w.key: m for m, w in at.items()}
    times: dict = {}
    steps_of: dict = {}
    for rec in measurer.known.values():
        m = size_of.get(rec.workload.key)
        if m is not None and rec.result.ok:
            k = _key(rec.steps)
            steps_of[k] = rec.steps
            times.setdefault(k, {})[m] = rec.mean_cost
    return times, steps_of


def choose_variants(times: dict, sizes: Sequence[int], n_var: int,
                    min_gain: float = MIN_GAIN) -> list:
    """Up to ``n_var`` candidates of ``times`` ({candidate: {size: seconds}}), greedily:
    each next one is the one that most raises the geometric mean over sizes of (best time
    at the size / time of the fastest chosen candidate there); a size no chosen candidate
    ran at counts first. One stops joining when it would buy less than ``min_gain``."""
    best = {m: min(t[m] for t in times.values() if m in t)
            for m in sizes if any(m in t for t in times.values())}

    def value(cover: dict) -> tuple:
        return (len(cover), sum(math.log(best[m] / t) for m, t in cover.items()) / len(best))

    chosen: list = []
    cover: dict = {}          # size -> time of the fastest chosen candidate there
    while len(chosen) < n_var and len(chosen) < len(times):
        options = []
        for k in sorted(times):
            if k in chosen:
                continue
            new = dict(cover)
            for m, t in times[k].items():
                if m in best and t < new.get(m, math.inf):
                    new[m] = t
            options.append((value(new), k, new))
        (covered, score), k, new = max(options, key=lambda o: o[0])
        if chosen and covered == len(cover) and score - value(cover)[1] < math.log1p(min_gain):
            break
        chosen.append(k)
        cover = new
    return chosen


def _probes(wl: Workload, name: str, tuned: dict, variants: list, steps_of: dict,
            measure: Callable[[list], list]) -> dict:
    """{probe size: (variant, seconds)}: where neighbouring tuned sizes chose different
    variants, both measured at the size between them (the geometric mean, odd)."""
    pts = sorted(tuned)
    pairs = []
    for a, b in zip(pts, pts[1:]):
        mid = round(math.sqrt(a * b)) | 1
        if tuned[a][0] != tuned[b][0] and a < mid < b:
            pairs += [(mid, tuned[a][0]), (mid, tuned[b][0])]
    inputs = [MeasureInput(wl.at({name: mid}), steps_of[variants[vi]]) for mid, vi in pairs]
    out: dict = {}
    for (mid, vi), t in zip(pairs, measure(inputs)):
        if t < out.get(mid, (0, math.inf))[1]:
            out[mid] = (vi, t)
    return out


def apply_best_dynamic(task: Any, log_file: Any, name: str | None = None) -> Any:
    """The dispatching Module of the newest dispatch table of ``task`` in ``log_file``."""
    found = latest_table(load_records(log_file), task.workload)
    if found is None:
        raise LookupError(f"no dispatch table of {task.workload.name} (key "
                          f"{task.workload.key[:8]}) in {log_file}; tune it for a range first")
    return build_dispatch(task.workload, found[1], task.target, name or task.workload.name)
