"""Measurer: one record per new candidate, appended as measured; logged candidates and
duplicates are never measured again."""
from tvmlite.schedule.schedule import Schedule
from tvmlite.search.measure.inputs import MeasureErrorNo, MeasureInput, MeasureResult, state_key
from tvmlite.search.measure.measurer import Measurer
from tvmlite.search.records.record import load_records
from tvmlite.search.records.workload import Workload
from tvmlite.schedule.steps import SplitStep


class CountingRunner:
    def __init__(self):
        self.seen = []

    def run(self, inputs, builds, reference=None):
        self.seen.extend(i.key for i in inputs)
        return [MeasureResult(costs=(1e-3 * (n + 1),)) if b.ok else
                MeasureResult(error_no=b.error_no, error_msg=b.error_msg)
                for n, b in enumerate(builds)]

    def close(self):
        pass


def _inputs(wl, factors):
    out = []
    for f in factors:
        s = Schedule.create(wl.outputs)
        s[wl.outputs[0]].split("i", factor=f)
        out.append(MeasureInput(wl, tuple(s.steps)))
    return out


def test_measurer_logs_each_new_candidate_once(tmp_path):
    wl = Workload.from_op("matmul", 8, 8, 8)
    log = tmp_path / "m.jsonl"
    runner = CountingRunner()
    m = Measurer(log, runner=runner, tuner="test", seed=7)
    first = _inputs(wl, [1, 2, 2, 4])
    res = m.measure(first)
    assert len(runner.seen) == 3 and res[1] == res[2]
    assert [r.tuner for r in load_records(log)] == ["test"] * 3
    # a second Measurer on the same log (a resumed run) measures only the new one
    runner2 = CountingRunner()
    m2 = Measurer(log, runner=runner2)
    res2 = m2.measure(_inputs(wl, [1, 2, 8]))
    assert runner2.seen == [_inputs(wl, [8])[0].key]
    assert res2[0].costs == res[0].costs
    assert len(load_records(log)) == 4


def test_invalid_schedules_are_recorded_as_errors(tmp_path):
    wl = Workload.from_op("matmul", 8, 8, 8)
    log = tmp_path / "m.jsonl"
    bad = MeasureInput(wl, (SplitStep("C", "nope", 2, None),))
    (res,) = Measurer(log, runner=CountingRunner()).measure([bad])
    assert res.error_no == MeasureErrorNo.INVALID_SCHEDULE and "nope" in res.error_msg
    (rec,) = load_records(log)
    assert rec.result.error_no == MeasureErrorNo.INVALID_SCHEDULE


def test_state_key_depends_on_workload_and_steps():
    a, b = Workload.from_op("matmul", 8, 8, 8), Workload.from_op("matmul", 8, 8, 16)
    steps = (SplitStep("C", "i", 2, None),)
    assert state_key(a.key, steps) != state_key(b.key, steps)
    assert state_key(a.key, steps) == state_key(a.key, [steps[0].to_json()])
    assert state_key(a.key, ()) != state_key(a.key, steps)


def test_error_results_have_infinite_cost():
    r = MeasureResult(error_no=MeasureErrorNo.RUN_TIMEOUT)
    assert not r.ok and r.mean_cost == float("inf")
    assert MeasureResult(costs=(1.0, 3.0, 2.0)).median_cost == 2.0
