"""Measurer: one record per new candidate, appended as measured (before the next one is
timed); compiling in chunks that never overlap timing; logged candidates, duplicates and
other writers' records are never measured again; quotas count the log; a bad log path is
refused up front."""
import os
import sys

import pytest

from tvmlite.schedule.schedule import Schedule
from tvmlite.schedule.steps import SplitStep
from tvmlite.search.measure.base_runner import Runner
from tvmlite.search.measure.builder import LocalBuilder
from tvmlite.search.measure.inputs import MeasureErrorNo, MeasureInput, MeasureResult, state_key
from tvmlite.search.measure.measurer import BUILDS_PER_JOB, Measurer, Quota, check_log_path
from tvmlite.search.records.record import append_record, load_records, make_record
from tvmlite.search.records.workload import Workload


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


# -- streaming: each record logged as soon as it is measured ---------------------------------

class StreamingRunner(Runner):
    """Times candidates one by one (as LocalRunner); before each, notes how many lines
    the log holds, and what the builder had built by then."""

    def __init__(self, log, events, before_each=None):
        self.log, self.events, self.before_each = log, events, before_each
        self.logged_before = []

    def check_target(self, target):
        pass

    def iter_run(self, inputs, builds, reference=None):
        for i, (inp, b) in enumerate(zip(inputs, builds)):
            if self.before_each is not None:
                self.before_each(len(self.logged_before))
            self.logged_before.append(_lines(self.log))
            self.events.append(("time", inp.key))
            yield i, MeasureResult(costs=(1e-3,)) if b.ok else \
                MeasureResult(error_no=b.error_no, error_msg=b.error_msg)


class RecordingBuilder(LocalBuilder):
    def __init__(self, events):
        super().__init__(n_parallel=2)
        self.events = events

    def build(self, inputs):
        self.events.append(("build", len(inputs)))
        return super().build(inputs)


def _lines(log):
    return len(log.read_text().splitlines()) if log.exists() else 0


def test_each_record_is_in_the_log_before_the_next_candidate_is_timed(tmp_path):
    chunk = BUILDS_PER_JOB * 2                         # two compile jobs
    wl = Workload.from_op("matmul", 2 * chunk, 8, 8)
    log = tmp_path / "m.jsonl"
    events = []
    runner = StreamingRunner(log, events)
    seen = []
    m = Measurer(log, RecordingBuilder(events), runner)
    n = 2 * chunk
    m.measure(_inputs(wl, range(1, n + 1)),
              on_result=lambda inp, res, rec: seen.append((inp.key, _lines(log))))
    assert runner.logged_before == list(range(n))     # a kill loses at most one candidate
    assert [n for _, n in seen] == list(range(1, n + 1))  # on_result sees its record logged
    # compiling happens in chunks (BUILDS_PER_JOB per compile job), each compiled before
    # it is timed and never while timing; the first timing does not wait for the batch
    assert events[0] == ("build", chunk) and events[1][0] == "time"
    kinds = "".join("b" if e[0] == "build" else "t" for e in events)
    assert kinds == ("b" + "t" * chunk) * 2


class ElsewhereRunner(StreamingRunner):
    """Times on other cores: the Measurer hands it candidates one by one (``iter_stream``,
    the seam's default here), compiling the next ones while it times."""
    times_elsewhere = True


class StreamRecordingBuilder(RecordingBuilder):
    def iter_build(self, inputs):
        for i, build in super().iter_build(inputs):
            self.events.append(("build", 1))
            yield i, build


class BatchOnlyBuilder:
    """A builder of whole batches (no ``iter_build``)."""

    def __init__(self, events):
        self.inner, self.events = LocalBuilder(n_parallel=2), events
        self.n_parallel, self.build_reference = 2, self.inner.build_reference

    def build(self, inputs):
        self.events.append(("build", len(inputs)))
        return self.inner.build(inputs)


def test_a_runner_that_times_elsewhere_gets_each_candidate_as_it_is_compiled(tmp_path):
    wl = Workload.from_op("matmul", 8, 8, 8)
    for builder_kind, expected in ((StreamRecordingBuilder, "bt" * 6), (BatchOnlyBuilder,
                                                                         "bttttbtt")):
        log = tmp_path / f"{builder_kind.__name__}.jsonl"
        events = []
        runner = ElsewhereRunner(log, events)
        res = Measurer(log, builder_kind(events), runner, chunk=4).measure(
            _inputs(wl, [1, 2, 4, 8, 3, 5, 2]))
        assert all(r is not None and r.ok for r in res) and res[1] == res[6]
        assert runner.logged_before == list(range(6))      # one record per candidate
        # handed over as each build ends (a batch-only builder: a chunk at a time), the
        # first timed before the last is compiled; nothing compiled twice
        kinds = "".join("b" if e[0] == "build" else "t" for e in events)
        assert kinds == expected, builder_kind


def test_a_streamed_tuning_stops_at_its_quota_counting_what_is_in_flight(tmp_path):
    """Candidates being compiled or timed count against a quota: never more pulled than
    it has room for, and the log holds exactly the budget."""
    wl = Workload.from_op("matmul", 8, 8, 8)
    log = tmp_path / "q.jsonl"
    builder = StreamRecordingBuilder([])
    m = Measurer(log, builder, ElsewhereRunner(log, []))
    quota = Quota(lambda r: r.workload.key == wl.key, 3)
    res = m.measure(_inputs(wl, [1, 2, 4, 8, 3, 5]), quotas=[quota])
    assert len(load_records(log)) == 3 == quota.count(m)
    assert [r is not None for r in res] == [True, True, True, False, False, False]
    assert len(builder.events) == 3                    # nothing compiled past the budget


def test_a_quota_counts_other_writers_and_the_log_stops_at_it(tmp_path):
    wl = Workload.from_op("matmul", 8, 8, 8)
    log = tmp_path / "m.jsonl"
    other = _inputs(wl, [16, 32, 64])        # what another process measures meanwhile
    target = Measurer(None, runner=CountingRunner()).target

    def other_writer(k):
        if k == 1:                           # after our first record, it appends three
            for inp in other:
                append_record(log, make_record(inp, MeasureResult(costs=(2e-3,)), target))
    m = Measurer(log, RecordingBuilder([]), StreamingRunner(log, [], other_writer),
                 chunk=8)
    quota = Quota(lambda r: r.workload.key == wl.key, 5)
    res = m.measure(_inputs(wl, [1, 2, 4, 8, 3, 5]), quotas=[quota])
    recs = load_records(log)
    assert len(recs) == 5 == quota.count(m)           # exactly the budget, theirs counted
    assert [r is not None for r in res] == [True, True, False, False, False, False]
    assert {inp.key for inp in other} <= set(m.known)  # their records are known now


def test_records_other_writers_append_are_not_measured_again(tmp_path):
    wl = Workload.from_op("matmul", 8, 8, 8)
    log = tmp_path / "m.jsonl"
    runner = CountingRunner()
    m = Measurer(log, runner=runner)
    theirs = _inputs(wl, [2])[0]
    append_record(log, make_record(theirs, MeasureResult(costs=(5e-3,)), m.target))
    (res,) = m.measure([theirs])
    assert runner.seen == [] and res.costs == (5e-3,)


def test_a_bad_log_path_is_refused_before_any_work(tmp_path):
    (tmp_path / "file.txt").write_text("x")
    builds = []
    for bad, why in ((tmp_path / "file.txt" / "log.jsonl", "is a file, not a folder"),
                     (tmp_path, "is a directory")):
        with pytest.raises(ValueError, match=why) as err:
            Measurer(bad, RecordingBuilder(builds), CountingRunner())
        assert str(bad) in str(err.value) and "Errno" not in str(err.value)
        with pytest.raises(ValueError, match=why):
            check_log_path(bad)
    assert builds == []
    check_log_path(tmp_path / "new" / "log.jsonl")    # creatable: fine, and nothing left
    assert not (tmp_path / "new" / "log.jsonl").exists()


def test_checking_a_new_log_never_creates_it(tmp_path):
    """Two tunings starting on one new log: if the check created the log and removed it
    again, the other tuning's first records could land in the file being removed (or its
    own check could find it gone). So the check opens the log only when it exists, and
    never with O_CREAT; an audit hook sees every open."""
    log = tmp_path / "shared.jsonl"
    opened = []

    watching = [True]

    def hook(event, args):     # stays for the process: must never raise, and is cheap
        if watching[0] and event == "open" and isinstance(args[0], (str, os.PathLike)) \
                and os.fspath(args[0]) == str(log):
            opened.append(args[2])

    sys.addaudithook(hook)
    check_log_path(log)
    assert not log.exists() and not any(flags & os.O_CREAT for flags in opened), opened
    log.write_text("kept\n")
    del opened[:]
    check_log_path(log)
    watching[0] = False
    assert len(opened) == 1 and not opened[0] & os.O_CREAT
    assert log.read_text() == "kept\n"
