"""The measuring protocol: one MeasureConfig, validated once, taken by every runner (and
built from their old keyword arguments); one reference cache and one verdict."""
from __future__ import annotations

import dataclasses

import pytest

from tvmlite import search, te
from tvmlite.search.measure import runner as runner_mod
from tvmlite.search.measure.base_runner import KernelRunner
from tvmlite.search.measure.builder import BuildResult, arg_specs
from tvmlite.search.measure.inputs import MeasureErrorNo
from tvmlite.search.measure.protocol import (
    REFERENCE_TIMEOUT_MIN,
    MeasureConfig,
    ReferenceCache,
    Verdict,
    check_tolerances,
)
from tvmlite.search.measure.qemu_runner import QemuRunner
from tvmlite.search.measure.runner import LocalRunner
from tvmlite.search.records.workload import Workload
from tvmlite.testing.check import tolerance

BAD = [({"number": 0}, r"number=\.\.\.\) must be a positive int, got 0"),
       ({"repeat": -1}, r"repeat=\.\.\.\) must be a positive int"),
       ({"timeout": 0}, r"timeout=\.\.\.\) in seconds must be a positive number"),
       ({"min_repeat_ms": -1}, r"min_repeat_ms=\.\.\.\) must be a non-negative number"),
       ({"n_threads": 0}, r"n_threads=\.\.\.\) \(None: OpenMP's default"),
       ({"seed": 1.5}, r"seed=\.\.\.\) must be a non-negative int"),
       ({"check_correctness": "yes"}, r"check_correctness=\.\.\.\) must be True or False")]


def _runners():
    """Every runner class and how to make one with keyword arguments."""
    made = [("LocalRunner", lambda **kw: LocalRunner(**kw)),
            ("QemuRunner", lambda **kw: QemuRunner(**kw))]
    try:
        from tvmlite.search.measure.dask_runner import DaskRunner
    except ImportError:   # pragma: no cover -- the dask extra is not installed
        return made
    return made + [("DaskRunner", lambda **kw: DaskRunner("dask://127.0.0.1:1", **kw))]


@pytest.mark.parametrize("kw,msg", BAD, ids=[next(iter(k)) for k, _ in BAD])
def test_validation_names_the_argument_and_what_to_use(kw: dict, msg: str) -> None:
    with pytest.raises(ValueError, match=r"MeasureConfig\(" + msg):
        MeasureConfig(**kw)
    for name, make in _runners():
        with pytest.raises(ValueError, match=name + r"\(" + msg):
            make(**kw)


def test_cold_weights_is_a_flag_of_the_protocol_and_of_the_options() -> None:
    from tvmlite.search.options import TuningOptions
    for make in (MeasureConfig, LocalRunner, TuningOptions):
        with pytest.raises(ValueError, match=r"cold_weights=\.\.\.\) must be True or False"):
            make(cold_weights="yes")
    assert TuningOptions(cold_weights=True).measure_config().cold_weights
    assert LocalRunner(config=MeasureConfig(cold_weights=True)).cold_weights


def test_the_config_is_frozen_normalized_and_exported() -> None:
    c = MeasureConfig(timeout=5, min_repeat_ms=2)
    assert c.timeout == 5.0 and isinstance(c.timeout, float) and c.min_repeat_ms == 2.0
    with pytest.raises(dataclasses.FrozenInstanceError):
        c.number = 2  # type: ignore[misc]
    assert search.MeasureConfig is MeasureConfig
    assert c.slow_seconds == 5.0 / 4 and c.reference_timeout == REFERENCE_TIMEOUT_MIN
    assert MeasureConfig(timeout=100).reference_timeout == 1000.0
    with pytest.raises(TypeError, match=r"LocalRunner\(config=\.\.\.\) must be a search"):
        LocalRunner(config={"number": 1})  # type: ignore[arg-type]


def test_every_runner_takes_the_same_config_and_keywords_replace_its_fields() -> None:
    c = MeasureConfig(number=2, repeat=4, min_repeat_ms=1.0, timeout=7.0, seed=3,
                      check_correctness=False, n_threads=1)
    for name, make in _runners():
        r = make(config=c)
        assert r.config == c, name
        assert (r.number, r.repeat, r.timeout, r.seed, r.check_correctness) == \
            (2, 4, 7.0, 3, False)            # read as attributes, as before the config
        assert make(config=c, repeat=9).config == dataclasses.replace(c, repeat=9), name
        r.close()
    # the old keywords alone build the config over each runner's defaults
    assert LocalRunner(number=5).config == MeasureConfig(number=5)
    assert QemuRunner().config == MeasureConfig(number=1, repeat=1, timeout=60.0)
    assert QemuRunner(timeout=30).config == MeasureConfig(number=1, repeat=1, timeout=30.0)


def test_the_dask_runner_builds_no_local_runner_or_core_lock(monkeypatch) -> None:
    dask_runner = pytest.importorskip("tvmlite.search.measure.dask_runner")

    def refused(*args, **kwargs):
        raise AssertionError("DaskRunner made a core lock (or a LocalRunner) to validate")
    monkeypatch.setattr(runner_mod, "CoreLock", refused)
    r = dask_runner.DaskRunner("dask://127.0.0.1:1", number=2, worker_timeout=5)
    assert r.config == MeasureConfig(number=2) and r.worker_timeout == 5.0
    assert r.params == MeasureConfig(number=2).to_json()
    twin = r.replace(repeat=7)
    assert twin.config == MeasureConfig(number=2, repeat=7) and twin.worker_timeout == 5.0
    with pytest.raises(ValueError, match=r"DaskRunner\(worker_timeout=\.\.\.\)"):
        dask_runner.DaskRunner("dask://127.0.0.1:1", worker_timeout=-1)


def _build(ok: bool = True, msg: str = "") -> BuildResult:
    return BuildResult("/x.so" if ok else None, "", "k", "", (),
                       MeasureErrorNo.NO_ERROR if ok else MeasureErrorNo.COMPILE_ERROR,
                       msg, 0.0)


def test_the_reference_cache_prepares_once_and_keeps_each_failure() -> None:
    good, bad = Workload.from_op("matmul", 4, 4, 4), Workload.from_op("matmul", 4, 4, 5)
    prepared, built = [], []

    def reference(workload):
        built.append(workload.key)
        return _build(workload is good, "cc said no")

    cache: ReferenceCache[str] = ReferenceCache(lambda w, ref: prepared.append(w) or "ready",
                                                where="under qemu-aarch64")
    assert cache.get(good, reference) == cache.get(good, reference) == "ready"
    assert prepared == [good] and built == [good.key]
    for _ in range(2):
        with pytest.raises(Verdict, match=r"reference \(unscheduled\) build of workload "
                                          r".* failed, so no candidate .*: cc said no") as e:
            cache.get(bad, reference)
        assert e.value.error_no == MeasureErrorNo.UNKNOWN
    assert built == [good.key, bad.key]
    v = cache.fail(good, "RUNTIME_CRASH: it died")
    assert "kernel of workload" in str(v) and "under qemu-aarch64" in str(v)
    with pytest.raises(Verdict, match="it died"):
        cache.get(good, reference)
    cache.clear()
    assert cache.get(good, reference) == "ready"


def test_a_failing_prepare_is_the_workloads_verdict_and_tolerances_follow_sizes() -> None:
    def prepare(workload, ref):
        raise Verdict(MeasureErrorNo.RUN_TIMEOUT, "too slow")
    wl = Workload.from_op("matmul", 4, 4, 4)
    cache: ReferenceCache[None] = ReferenceCache(prepare)
    with pytest.raises(Verdict, match=r"kernel of workload .* failed, so no .*: too slow"):
        cache.get(wl, lambda w: _build())
    at3 = Workload.from_op("matmul", te.var("M"), 8, 16).at({"M": 3})
    ref = BuildResult("/x.so", "", "k", "", arg_specs(at3), MeasureErrorNo.NO_ERROR, "", 0.0)
    assert check_tolerances(at3, ref) == [tolerance("float32", 16)]   # K = 16, one output


def test_local_and_qemu_runners_share_the_kernel_runner_skeleton() -> None:
    assert issubclass(LocalRunner, KernelRunner) and issubclass(QemuRunner, KernelRunner)
    for cls in (LocalRunner, QemuRunner):
        assert {"prepare_reference", "run_kernel"} <= set(vars(cls))
