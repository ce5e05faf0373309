"""Tuning a dynamic workload (a symbolic size ``M``) once for a range of sizes.

As DietCode: one budget and one cost model for all sizes. The search runs one sketch
policy per representative size, each proposing schedules for the compute *at* that size
(its sketches and tile choices see real extents, and its features are those of the
concrete lowering), all sharing one XGBoost model trained on throughput normalized per
size, so what it learns at M=64 guides M=256. Every candidate is measured as what is
deployed: the symbolic kernel (over M), lowered and compiled once and called at *every*
representative size (a candidate costs one compile and a run per
size: compiling is most of a candidate's cost, so the budget of ``trials`` measurements
buys about ``trials // sizes`` candidates, each seen at all sizes), and every policy
learns from it at its size. Each round the policies take turns proposing; the round is
measured size by size, smallest first, and a candidate ``HOPELESS`` times slower than
the best at one size (or failing) is not measured at the bigger ones, which leaves its
measurements to other candidates. Then:

1. variants: the fastest schedule at each size, at most ``max_variants`` of them
   (those fastest at the most sizes, then the fastest);
2. the table: per size the fastest variant, from those measurements; between two tuned
   sizes the nearer one in log scale serves (``dispatch.ranges_from_choice``). Table and
   variants go in the log as a dispatch record; ``apply_best`` builds the dispatching
   kernel from it.

Representative sizes of a range ``(lo, hi)``: its ends and the powers of two inside, and
if that is more than ``max_sizes``, that many of them evenly spaced in log scale (ends
kept). Explicit sizes are used as given.
"""
from __future__ import annotations

import json
import math
import time
from typing import Any, Callable, Sequence

from tvmlite.search.measure.inputs import MeasureInput
from tvmlite.search.options import TuningOptions
from tvmlite.search.records.dispatch import (DispatchTable, build_dispatch, dispatch_record,
                                             latest_table, ranges_from_choice)
from tvmlite.search.records.record import append_record, load_records
from tvmlite.search.result import Trial, TuneResult
from tvmlite.search.template_free.policy import SketchPolicy
from tvmlite.search.model.cost_model import XGBModel

MAX_SIZES = 6
MAX_VARIANTS = 4
HOPELESS = 16   # a candidate this many times slower than a size's best skips bigger sizes
TUNER = "template-free"


def representative_sizes(spec: Any, max_sizes: int = MAX_SIZES) -> list:
    """Sizes to tune at, from a list of sizes or a ``(lo, hi)`` range (see module doc)."""
    if isinstance(spec, tuple) and len(spec) == 2:
        lo, hi = spec
        if any(isinstance(x, bool) or not isinstance(x, int) for x in spec) or not 1 <= lo <= hi:
            raise ValueError(f"a size range must be (lo, hi) ints with 1 <= lo <= hi, got {spec!r}")
        pts = sorted({lo, hi} | {1 << k for k in range(hi.bit_length()) if lo <= 1 << k <= hi})
        if len(pts) > max_sizes:
            logs = [math.log(p) for p in pts]
            want = [logs[0] + (logs[-1] - logs[0]) * i / (max_sizes - 1) for i in range(max_sizes)]
            pts = sorted({min(pts, key=lambda p: abs(math.log(p) - w)) for w in want})
        return pts
    if isinstance(spec, (list, tuple)) and spec and all(
            isinstance(x, int) and not isinstance(x, bool) and x >= 1 for x in spec):
        return sorted(set(spec))
    raise ValueError(f"sizes must be a list of ints >= 1 or a (lo, hi) range, got {spec!r}")


def check_shapes(workload: Any, shapes: Any) -> tuple[str, list]:
    """(size name, representative sizes) of a dynamic task's ``shapes=`` argument."""
    names = workload.size_names
    if len(names) != 1:
        raise ValueError(f"tuning for a range needs exactly one symbolic size; workload "
                         f"{workload.name} has {list(names)} (bind the others to numbers)")
    if not isinstance(shapes, dict) or set(shapes) != set(names):
        raise ValueError(f"SearchTask(shapes=...) must give the sizes of {names[0]}, e.g. "
                         f"shapes={{'{names[0]}': [1, 8, 64, 256]}} or {{'{names[0]}': (1, 2048)}}; "
                         f"got {shapes!r}")
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
                         f"least {len(sizes)} (each candidate is measured at every size)")
    if model is None and options.pretrained:
        from tvmlite.search.model.pretrained import load_pretrained
        model = load_pretrained("pack-sum")   # None (warned) if it does not fit
    model = model or XGBModel(seed=options.seed)
    at = {m: wl.at({name: m}) for m in sizes}
    policies = {m: SketchPolicy(at[m].bound(), target, model, options, seed=(options.seed or 0) + i,
                                rules=task.rules, constants=task.constants)
                for i, m in enumerate(sizes)}
    result = TuneResult(wl)
    best: dict = {}     # size -> Record
    start = time.perf_counter()
    with options.measurer(log_file, target, TUNER) as measurer:
        seen: set = set()    # Steps (as _key) of every candidate measured, from the log too
        keys = {w.key for w in at.values()}
        for m in sizes:
            _seed_from_log(policies[m], measurer, at[m], best, m, seen)
        spent = sum(1 for r in measurer.known.values() if r.workload.key in keys)
        per_round = max(1, options.measures_per_round // len(sizes))
        turn = 0
        while spent + len(sizes) <= trials:
            want = min(per_round, (trials - spent) // len(sizes))
            t0 = time.perf_counter()
            batch = _propose(policies, sizes, want, turn, seen)
            turn += 1
            result.search_seconds += time.perf_counter() - t0
            if not batch:
                break          # every policy's space is exhausted
            alive = list(batch)
            for m in sizes:    # ascending: the cheap sizes first, the hopeless dropped
                t1 = time.perf_counter()
                real = [MeasureInput(at[m], inp.steps, inp.decisions) for inp in alive]
                measured = measurer.measure(real)
                result.measure_seconds += time.perf_counter() - t1
                policies[m].update([MeasureInput(policies[m].workload, inp.steps, inp.decisions)
                                    for inp in alive], measured)
                for inp, res in zip(real, measured):
                    _account(result, measurer.known.get(inp.key), res, best, m, start, callback)
                spent += len(real)
                alive = _hopeful(alive, measured, best.get(m), at[m])
        table = _choose(wl, name, sizes, at, best, measurer, n_var, result, start, callback)
        if table is not None:
            rec = dispatch_record(wl, target, table)
            if log_file is not None:
                append_record(log_file, rec)
            result.dispatch = table          # type: ignore[attr-defined]
    result.best = max(best.values(), key=lambda r: r.gflops, default=None)
    return result


def _hopeful(inputs: list, results: list, best: Any, wl_at: Any) -> list:
    """The candidates worth measuring at the next, bigger size: those that ran within
    ``HOPELESS`` times the best time at this size. One far slower (a naive nest at a
    few GFLOP/s, against the best at hundreds) cannot be a variant anywhere, and at
    M=1024 its run alone would take seconds: most of a round's time, for nothing."""
    if best is None:
        return [inp for inp, res in zip(inputs, results) if res.ok]
    return [inp for inp, res in zip(inputs, results)
            if res.ok and res.mean_cost <= HOPELESS * best.mean_cost]


def _propose(policies: dict, sizes: list, want: int, turn: int, seen: set) -> list:
    """Up to ``want`` new candidates, the policies taking turns (starting at ``turn``) so
    every size's sketches and tile choices get proposed; ``seen`` gains their Steps."""
    order = [sizes[(turn + i) % len(sizes)] for i in range(len(sizes))]
    share = -(-want // len(sizes))
    out: list = []
    for m in order:
        if len(out) >= want:
            break
        for inp in policies[m].next_batch(min(share, want - len(out))):
            k = _key(inp.steps)
            if k not in seen:
                seen.add(k)
                out.append(inp)
    return out


def _seed_from_log(policy: Any, measurer: Any, wl_at: Any, best: dict, m: int,
                   seen: set) -> None:
    """Resume: the log's records at this size train the model and count toward the budget."""
    old = sorted((r for r in measurer.known.values() if r.workload.key == wl_at.key),
                 key=lambda r: r.result.timestamp)
    seen.update(_key(r.steps) for r in old)
    if not old:
        return
    bound = policy.workload
    policy.update([MeasureInput(bound, r.steps, r.decisions) for r in old],
                  [r.result for r in old])
    ok = [r for r in old if r.result.ok]
    if ok:
        best[m] = min(ok, key=lambda r: r.mean_cost)


def _account(result: TuneResult, rec: Any, res: Any, best: dict, m: int, start: float,
             callback: Any) -> None:
    result.measured += 1
    result.errors[res.error_no.name] += 1
    if rec is not None and res.ok and (m not in best or rec.mean_cost < best[m].mean_cost):
        best[m] = rec
    top = max((r.gflops for r in best.values()), default=0.0)
    trial = Trial(result.measured, time.perf_counter() - start,
                  rec.gflops if rec is not None and res.ok else 0.0, top, res.error_no.name)
    result.trials.append(trial)
    if callback is not None:
        callback(trial)


def _key(steps: Sequence[Any]) -> str:
    return json.dumps([s.to_json() for s in steps], sort_keys=True)


def _choose(wl: Any, name: str, sizes: list, at: dict, best: dict, measurer: Any,
            n_var: int, result: TuneResult, start: float, callback: Any) -> DispatchTable | None:
    """Variants from the per-size bests and the table from their times at every size
    (the search measured every candidate at every size already; a log of an interrupted
    run may lack some, measured here as part of the budget)."""
    if not best:
        return None
    unique: dict = {}
    for m in sizes:
        if m in best:
            unique.setdefault(_key(best[m].steps), (best[m].steps, []))[1].append(m)
    ranked = sorted(unique.values(), key=lambda v: (-len(v[1]), -max(best[m].gflops for m in v[1])))
    variants = [steps for steps, _ in ranked[:n_var]]
    times: dict = {}
    for vi, steps in enumerate(variants):
        inputs = [MeasureInput(at[m], steps) for m in sizes]
        new = [inp for inp in inputs if inp.key not in measurer.known]
        for m, inp, res in zip(sizes, inputs, measurer.measure(inputs)):
            if res.ok:
                times[(vi, m)] = res.mean_cost
            if inp in new:   # a cross-measurement: part of the budget, in the log
                _account(result, measurer.known.get(inp.key), res, best, m, start, callback)
    choice, tuned = {}, {}
    for m in sizes:
        cands = [(times[(vi, m)], vi) for vi in range(len(variants)) if (vi, m) in times]
        if cands:
            t, vi = min(cands)
            choice[m], tuned[m] = vi, (vi, t)
    if not choice:
        return None
    used = sorted(set(choice.values()))          # drop variants no size chose
    renum = {old: new for new, old in enumerate(used)}
    choice = {m: renum[v] for m, v in choice.items()}
    tuned = {m: (renum[v], t) for m, (v, t) in tuned.items()}
    return DispatchTable(name, tuple(tuple(variants[v]) for v in used),
                         ranges_from_choice(choice), tuned)


def apply_best_dynamic(task: Any, log_file: Any, name: str | None = None) -> Any:
    """The dispatching Module of the newest dispatch table of ``task`` in ``log_file``."""
    found = latest_table(load_records(log_file), task.workload)
    if found is None:
        raise LookupError(f"no dispatch table of {task.workload.name} (key "
                          f"{task.workload.key[:8]}) in {log_file}; tune it for a range first")
    return build_dispatch(task.workload, found[1], task.target, name or task.workload.name)
