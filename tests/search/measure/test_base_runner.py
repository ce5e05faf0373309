"""KernelRunner: a new runner says only how to run a built kernel; the protocol, the
failed builds, the reference cache and the verdicts come from the base."""
from __future__ import annotations

import pytest

from tvmlite.search.measure.base_runner import KernelRunner, Stopwatch
from tvmlite.search.measure.builder import BuildResult
from tvmlite.search.measure.inputs import MeasureErrorNo, MeasureInput
from tvmlite.search.measure.protocol import MeasureConfig, Verdict
from tvmlite.search.records.workload import Workload

E = MeasureErrorNo


class EchoRunner(KernelRunner):
    """Runs nothing: 'ref' is its reference, a build named 'wrong' is a wrong answer."""
    DEFAULTS = MeasureConfig(repeat=2)

    def __init__(self, **measuring):
        super().__init__(measuring.pop("config", None), measuring)
        self.prepared: list = []

    def check_target(self, target):
        pass

    def prepare_reference(self, workload, ref):
        self.prepared.append(workload.key)
        if ref.kernel == "broken":
            raise Verdict(E.RUNTIME_CRASH, "it crashed")
        return "ref"

    def run_kernel(self, inp, build, prepared, clock):
        assert isinstance(clock, Stopwatch) and prepared in ("ref", None)
        if build.kernel == "wrong":
            raise Verdict(E.WRONG_ANSWER, "output C: 1 of 4 elements wrong")
        return (1e-3,) * self.repeat


def _build(kernel: str = "k", ok: bool = True) -> BuildResult:
    return BuildResult("/x.so" if ok else None, "", kernel, "", (),
                       E.NO_ERROR if ok else E.COMPILE_ERROR, "" if ok else "cc: no", 0.5)


def test_a_runner_implementing_only_the_kernel_gets_the_whole_protocol() -> None:
    wl = Workload.from_op("matmul", 4, 4, 4)
    runner = EchoRunner(number=2)
    assert runner.config == MeasureConfig(number=2, repeat=2)
    inputs = [MeasureInput(wl, (), decisions=i) for i in range(3)]
    builds = [_build(), _build("wrong"), _build(ok=False)]
    ok, wrong, failed = runner.run(inputs, builds, lambda w: _build())
    assert ok.ok and ok.costs == (1e-3, 1e-3) and ok.build_seconds == 0.5
    assert wrong.error_no == E.WRONG_ANSWER and "elements wrong" in wrong.error_msg
    assert failed.error_no == E.COMPILE_ERROR and failed.error_msg == "cc: no"
    assert runner.prepared == [wl.key]                    # once per workload
    with pytest.raises(ValueError, match=r"EchoRunner\(check_correctness=False\)"):
        runner.run(inputs[:1], builds[:1])                # a check needs a reference


def test_a_failing_reference_makes_every_candidate_of_its_workload_unknown() -> None:
    wl = Workload.from_op("matmul", 4, 4, 4)
    runner = EchoRunner()
    results = runner.run([MeasureInput(wl, (), decisions=i) for i in range(2)],
                         [_build(), _build()], lambda w: _build("broken"))
    assert [r.error_no for r in results] == [E.UNKNOWN, E.UNKNOWN]
    assert all("reference (unscheduled) kernel" in r.error_msg and "it crashed" in r.error_msg
               for r in results)
    assert runner.prepared == [wl.key]
    unchecked = EchoRunner(check_correctness=False)
    assert unchecked.run([MeasureInput(wl, ())], [_build()])[0].ok
    assert unchecked.prepared == []
