"""search/tuning.py: the one tuning loop, driven with a fake proposer and a fake measurer
(no compiling): budgets count the log, resume feeds the log first, early stopping,
exhaustion (empty batches, dry rounds), configs without a record, another writer's
records, several jobs under one total; and both searches run this loop."""
from __future__ import annotations

import pytest

from tvmlite.schedule.schedule import Schedule
from tvmlite.schedule.state import ScheduleError
from tvmlite.search import tuning
from tvmlite.search.measure.inputs import MeasureErrorNo, MeasureInput, MeasureResult
from tvmlite.search.options import TuningOptions
from tvmlite.search.records.best import DEFAULT_SEED, RETIMING, SEED, best_valid
from tvmlite.search.records.record import make_record
from tvmlite.search.records.workload import Workload
from tvmlite.search.result import TuneResult
from tvmlite.search.tuning import DRY_ROUNDS, Job, Proposer, Tally, of_workload, tune_loop
from tvmlite.target.target import Target

WL = Workload.from_op("matmul", 8, 8, 8)
WL2 = Workload.from_op("matmul", 8, 8, 16)
OPTS = TuningOptions(measures_per_round=4)


def candidates(wl: Workload, n: int) -> list[MeasureInput]:
    """``n`` distinct candidates of ``wl`` (splits of i and j by different factors)."""
    out = []
    for fi in range(1, 9):
        for fj in range(1, 9):
            s = Schedule.create(wl.outputs)
            out_t = wl.outputs[0]
            s[out_t].split("i", factor=fi)
            s[out_t].split("j", factor=fj)
            out.append(MeasureInput(wl, tuple(s.steps), {"n": len(out)}))
    return out[:n]


def cost(inp: MeasureInput) -> MeasureResult:
    """Candidate n takes 1 + (3 n mod 7) ms: the best of the first seven is n = 0."""
    return MeasureResult(costs=(1e-3 * (1 + 3 * inp.decisions["n"] % 7),))


class Listed(Proposer):
    """Proposes its candidates in order, skipping those it was told about."""

    def __init__(self, cands: list, invalid: frozenset = frozenset()):
        self.cands, self.invalid = cands, invalid
        self.told: list = []          # (candidate, result), in the order told
        self.asked: list[int] = []
        self.left: list = []

    def fresh(self, n: int) -> list:
        told = {c.key for c, _ in self.told}
        return [c for c in self.cands if c.key not in told][:n]

    def next_batch(self, n: int) -> list:
        self.asked.append(n)
        return self.fresh(n)

    def update(self, cands, results) -> None:
        self.told += list(zip(cands, results))

    def measure_input(self, cand: MeasureInput) -> MeasureInput:
        if cand.decisions["n"] in self.invalid:
            raise ScheduleError(f"candidate {cand.decisions['n']} does not build")
        return cand

    def unmeasured(self, cands) -> None:
        self.left += list(cands)


class FakeMeasurer:
    """What the loop needs of a Measurer: the log (``known``, ``logged``), ``refresh``
    (reads ``others``: what another writer appended), and ``measure`` with quotas
    checked before every append, as the real one does."""

    def __init__(self, records=()):
        self.target = Target.host()
        self.known: dict = {}
        self.logged: list = []
        self.others: list = []
        for r in records:
            self._add(r)

    def _add(self, rec) -> None:
        self.logged.append(rec)
        self.known.setdefault(rec.key, rec)

    def refresh(self) -> int:
        n = len(self.others)
        for r in self.others:
            self._add(r)
        self.others.clear()
        return n

    def measure(self, inputs, on_result=None, quotas=()):
        out = []
        for inp in inputs:
            self.refresh()
            if inp.key in self.known:
                out.append(self.known[inp.key].result)
            elif any(q.room(self) <= 0 for q in quotas):
                out.append(None)
            else:
                res = cost(inp)
                rec = make_record(inp, res, self.target, "fake")
                self._add(rec)
                if on_result is not None:
                    on_result(inp, res, rec)
                out.append(res)
        return out

    def __enter__(self) -> FakeMeasurer:
        return self

    def __exit__(self, *exc) -> None:
        pass


def record(inp: MeasureInput, timestamp: float, seconds: float | None = None):
    res = cost(inp) if seconds is None else MeasureResult(costs=(seconds,))
    res = MeasureResult(costs=res.costs, timestamp=timestamp)
    return make_record(inp, res, Target.host(), "earlier")


def run(proposer, budget, measurer=None, options=OPTS, **kw) -> tuple[TuneResult, FakeMeasurer]:
    measurer = measurer or FakeMeasurer()
    job = Job(proposer, WL, budget, of_workload(WL.key))
    return tune_loop([job], measurer, options, **kw)[0], measurer


def test_the_budget_counts_records_and_each_trial_is_indexed():
    prop = Listed(candidates(WL, 30))
    res, m = run(prop, 10)
    assert res.measured == len(m.logged) == 10 and prop.asked == [4, 4, 2]
    assert [t.index for t in res.trials] == list(range(1, 11))
    assert res.best is best_valid(m.logged) and res.best.decisions["n"] == 0
    assert res.trials[-1].best_gflops == res.best.gflops > 0
    assert res.errors["NO_ERROR"] == 10
    assert res.search_seconds >= 0 and res.measure_seconds >= 0


def test_resume_tells_the_log_first_oldest_first_and_counts_it():
    cands = candidates(WL, 30)
    old = [record(cands[i], timestamp=10.0 - i, seconds=1e-4 if i == 1 else 1.0)
           for i in range(3)]
    prop = Listed(cands)
    res, m = run(prop, 10, FakeMeasurer(old))
    assert [c.key for c, _ in prop.told[:3]] == [cands[2].key, cands[1].key, cands[0].key]
    assert res.measured == 7 and res.trials[0].index == 4 and len(m.logged) == 10
    assert res.best.key == old[1].key                  # the log's record is the best
    done, _ = run(Listed(cands), 10, m)
    assert done.measured == 0 and done.best.key == old[1].key


def test_early_stopping_after_trials_without_a_better_record():
    res, _ = run(Listed(candidates(WL, 30)), 30, options=TuningOptions(measures_per_round=2),
                 early_stopping=3)
    assert res.measured == 4                # candidate 0 is the best; checked per round
    res, _ = run(Listed(candidates(WL, 30)), 30,
                 options=TuningOptions(measures_per_round=2, early_stopping=5))
    assert res.measured == 6


def test_an_exhausted_proposer_ends_its_job():
    prop = Listed(candidates(WL, 5))
    res, m = run(prop, 20)
    assert res.measured == 5 and prop.asked == [4, 4, 4]     # the third batch was empty

    class Repeats(Listed):     # proposes what the log holds, for ever
        def next_batch(self, n):
            self.asked.append(n)
            return self.cands[:2]

    old = [record(c, timestamp=1.0) for c in candidates(WL, 2)]
    prop = Repeats(candidates(WL, 2))
    res, _ = run(prop, 20, FakeMeasurer(old))
    assert res.measured == 0 and len(prop.asked) == DRY_ROUNDS


def test_a_proposer_that_never_repeats_ends_by_has_next():
    class Once(Listed):
        dry_rounds = None

        def next_batch(self, n):      # the log's two, DRY_ROUNDS times; then new ones
            self.asked.append(n)
            return self.cands[:2] if len(self.asked) <= DRY_ROUNDS else self.fresh(n)

        def has_next(self):
            return len(self.asked) < DRY_ROUNDS + 2

    cands = candidates(WL, 8)
    old = [record(c, timestamp=1.0) for c in cands[:2]]
    prop = Once(cands)
    res, _ = run(prop, 20, FakeMeasurer(old))
    assert len(prop.asked) == DRY_ROUNDS + 2 and res.measured == 6   # 4, then the last 2


def test_a_candidate_without_a_measure_input_is_a_trial_without_a_record():
    prop = Listed(candidates(WL, 30), invalid={1, 3})
    res, m = run(prop, 6, options=TuningOptions(measures_per_round=6))
    assert res.measured == 6 and len(m.logged) == 4
    assert res.errors[MeasureErrorNo.INVALID_SCHEDULE.name] == 2
    assert [t.index for t in res.trials] == [1, 2, 3, 4, 5, 6]
    assert [t.error for t in res.trials[:2]] == ["INVALID_SCHEDULE"] * 2   # accounted first
    told = {c.decisions["n"]: r for c, r in prop.told}
    assert sorted(told) == [0, 1, 2, 3, 4, 5] and "does not build" in told[1].error_msg


def test_another_writers_records_count_and_candidates_left_over_go_back():
    cands = candidates(WL, 30)
    foreign = [record(c, timestamp=1.0) for c in cands[20:23]]
    m = FakeMeasurer()

    def other_writer(trial):
        if trial.index == 2:
            m.others.extend(foreign)

    prop = Listed(cands)
    res, _ = run(prop, 6, m, TuningOptions(measures_per_round=6), callback=other_writer)
    assert len(m.logged) == 6 and res.measured == 3 and res.trials[-1].index == 6
    assert [c.decisions["n"] for c in prop.left] == [3, 4, 5]


def test_jobs_share_a_total_and_choose_picks_each_round():
    a, b = Listed(candidates(WL, 30)), Listed(candidates(WL2, 30))
    jobs = [Job(a, WL, 10, of_workload(WL.key)), Job(b, WL2, 10, of_workload(WL2.key))]
    seen = []

    def choose(active, results, done):
        seen.append(list(done))
        return 0 if active[0] else None

    m = FakeMeasurer()
    ra, rb = tune_loop(jobs, m, OPTS, choose=choose, total=6)
    assert ra.measured == 6 and rb.measured == 0 and b.asked == []
    assert seen == [[0, 0], [4, 0], [6, 0]]
    a, b = Listed(candidates(WL, 30)), Listed(candidates(WL2, 30))
    jobs = [Job(a, WL, 3, of_workload(WL.key)), Job(b, WL2, 3, of_workload(WL2.key))]
    ra, rb = tune_loop(jobs, FakeMeasurer(), TuningOptions(measures_per_round=2))
    assert (a.asked, b.asked) == ([2, 1], [2, 1])       # round-robin
    assert ra.best.workload.key == WL.key and rb.best.workload.key == WL2.key


def test_tally_keeps_a_best_per_group():
    cands = candidates(WL, 3) + candidates(WL2, 3)
    res = TuneResult(WL)
    trials = []
    tally = Tally(res, 0.0, trials.append)
    tally.seed([record(cands[0], 1.0, seconds=2e-3)])
    recs = [record(c, 2.0, seconds=s) for c, s in zip(cands[1:], (1e-3, 3e-3, 1e-3, 5e-4))]
    for r in recs:
        tally.add(r.result, r)
    assert tally.best == {WL.key: recs[0], WL2.key: recs[3]}
    assert res.best is max(tally.best.values(), key=lambda r: r.gflops)
    assert [t.index for t in trials] == [1, 2, 3, 4] and tally.stale == 0
    tally.add(MeasureResult(error_no=MeasureErrorNo.RUN_TIMEOUT, error_msg="x"), None, 9)
    assert trials[-1].index == 9 and trials[-1].gflops == 0 and tally.stale == 1


@pytest.mark.parametrize("search", ["templated", "template-free"])
def test_both_searches_run_the_shared_loop(search, monkeypatch):
    """Tuner.tune and SearchTask.tune (and so the TaskScheduler) call tune_loop with their
    proposer: a Tuner, a SketchPolicy."""
    from tvmlite.search.template_free import task as tf_task
    from tvmlite.search.template_free.policy import SketchPolicy
    from tvmlite.search.templated import tuners
    from tvmlite.search.templated.task import create
    calls = []

    def spy(jobs, measurer, options, *args, **kw):
        calls.append([j.proposer for j in jobs])
        return [TuneResult(j.workload) for j in jobs]

    monkeypatch.setattr(tuning, "tune_loop", spy)
    monkeypatch.setattr(tuners, "tune_loop", spy)
    monkeypatch.setattr(tf_task, "tune_loop", spy)
    monkeypatch.setattr(TuningOptions, "measurer",
                        lambda self, log, target, tuner: FakeMeasurer())
    opts = TuningOptions(population=16, pretrained=False)
    if search == "templated":
        tuner = tuners.RandomTuner(create("matmul", (8, 8, 8, "float32")))
        tuner.tune(4, None, opts)
        assert calls == [[tuner]]
    else:
        tf_task.SearchTask(func="matmul", args=(8, 8, 8)).tune(4, None, opts)
        assert len(calls) == 1 and isinstance(calls[0][0], SketchPolicy)
    assert isinstance(calls[0][0], Proposer)


class RetimingMeasurer(FakeMeasurer):
    """A FakeMeasurer that re-times too: candidate n re-times in ``retimed_ms[n]`` ms (its
    first measurement's figure when absent), logged as a re-timing record."""

    def __init__(self, records=(), retimed_ms=None):
        super().__init__(records)
        self.retimed_ms = retimed_ms or {}
        self.asked: list[list[int]] = []

    def retime(self, inputs, rounds):
        self.asked.append([inp.decisions["n"] for inp in inputs])
        out = []
        for inp in inputs:
            ms = self.retimed_ms.get(inp.decisions["n"], cost(inp).costs[0] * 1e3)
            decisions = {**inp.decisions, RETIMING: {"session": 1e9, "rounds": rounds}}
            rec = make_record(MeasureInput(inp.workload, inp.steps, decisions),
                              MeasureResult(costs=(ms * 1e-3,) * rounds, timestamp=1e9 + 1),
                              self.target, "fake")
            self._add(rec)
            out.append(rec)
        return out


def seeded_log(n: int, seed: int) -> list:
    """``n`` measured candidates of WL, candidate ``seed`` tagged as the task's default
    schedule (as a model task's first round measures it)."""
    recs = []
    for k, inp in enumerate(candidates(WL, n)):
        if k == seed:
            inp = MeasureInput(inp.workload, inp.steps, {**inp.decisions, SEED: DEFAULT_SEED})
        recs.append(record(inp, timestamp=1000.0 + k))
    return recs


def retime(measurer, options) -> TuneResult:
    result = TuneResult(WL)
    tuning.retime_job(Job(Listed([]), WL, 0, of_workload(WL.key)), result, measurer, options)
    return result


def test_the_end_retimes_the_few_best_and_the_best_is_the_fastest_retimed():
    # measured: n=0 1 ms, n=5 2 ms, n=3 3 ms; re-timed, n=5 is the fastest
    measurer = RetimingMeasurer(seeded_log(7, seed=-1), retimed_ms={0: 2.5, 5: 1.5, 3: 4.0})
    result = retime(measurer, TuningOptions(retime_best=3, retime_min_trials=4))
    assert measurer.asked == [[0, 5, 3]]
    assert [r.record.decisions["n"] for r in result.retimed] == [5, 0, 3]
    assert best_valid(measurer.logged).decisions["n"] == 5     # supersedes the 1 ms


def test_a_model_task_s_default_schedule_is_retimed_beside_its_best_and_kept_if_faster():
    # the default (n=6, measured 3 ms) is not among the 2 best, yet is re-timed: it wins
    measurer = RetimingMeasurer(seeded_log(7, seed=6), retimed_ms={0: 2.0, 5: 2.2, 6: 1.0})
    retime(measurer, TuningOptions(retime_best=2, retime_min_trials=4))
    assert measurer.asked == [[0, 5, 6]]
    assert best_valid(measurer.logged).decisions["n"] == 6


def test_with_few_trials_only_the_best_is_retimed_against_the_default():
    few = TuningOptions(retime_best=3, retime_min_trials=32)
    measurer = RetimingMeasurer(seeded_log(7, seed=6), retimed_ms={0: 5.0, 6: 3.5})
    retime(measurer, few)
    assert measurer.asked == [[0, 6]]                 # a lucky best loses to the default
    assert best_valid(measurer.logged).decisions["n"] == 6
    # the default already the best, or no default: nothing to re-time with few trials
    for seed in (0, -1):
        measurer = RetimingMeasurer(seeded_log(7, seed=seed))
        retime(measurer, few)
        assert measurer.asked == []
