"""DaskRunner(compile_on=...): workers whose compiler is the client's compile what they
measure; the others get libraries; a compile error on a worker is an error record; a
worker that dies mid-compile loses nothing. On a real Dask LocalCluster (two worker
processes), with stand-in compilers (shell scripts around the real one) to fake a
mismatching identity or a death inside the compiler."""
from __future__ import annotations

import dataclasses
import os
import warnings

import pytest

distributed = pytest.importorskip("distributed")

from tvmlite.schedule.schedule import Schedule  # noqa: E402
from tvmlite.search.measure.base_runner import RunnerError  # noqa: E402
from tvmlite.search.measure.builder import LocalBuilder  # noqa: E402
from tvmlite.search.measure.dask_cluster import compiler_differs  # noqa: E402
from tvmlite.search.measure.dask_runner import DaskRunner, DaskWorkerWarning  # noqa: E402
from tvmlite.search.measure.dask_worker import compiler_identity  # noqa: E402
from tvmlite.search.measure.inputs import MeasureErrorNo, MeasureInput  # noqa: E402
from tvmlite.search.measure.measurer import Measurer  # noqa: E402
from tvmlite.search.records.record import load_records  # noqa: E402
from tvmlite.search.records.workload import Workload  # noqa: E402
from tvmlite.target.target import Target  # noqa: E402

E = MeasureErrorNo
TINY = {"number": 1, "repeat": 1, "timeout": 20.0}


@pytest.fixture(scope="module")
def cluster():
    """Two worker processes, one thread and one `measure` each."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")   # Dask's own notes about ports and memory
        cl = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                      resources={"measure": 1}, dashboard_address=None)
    with distributed.Client(cl.scheduler_address, set_as_default=False) as client:
        client.wait_for_workers(2, timeout=60)
    yield cl
    cl.close()


@pytest.fixture(scope="module")
def workload():
    return Workload.from_op("matmul", 8, 8, 8)


def candidates(workload: Workload, factors=(1, 2, 4, 8)) -> list[MeasureInput]:
    """Distinct small schedules: the inner loop split by each factor."""
    out = []
    for f in factors:
        s = Schedule.from_steps(workload.outputs, ())
        s[workload.outputs[0]].split(s[workload.outputs[0]].op.axis[1], factor=f)
        out.append(MeasureInput(workload, tuple(s.steps)))
    return out


def wrapped(tmp_path, name: str, body: str = "true", version: str = "") -> Target:
    """The host target with its compiler behind a shell script that runs ``body`` before
    a real compile (not for --version or -###) and prints ``version`` after the real
    compiler's --version."""
    host = Target.host()
    script = tmp_path / name
    script.write_text(
        f'#!/bin/sh\nif [ "$1" = --version ]; then {host.compiler} --version; '
        f'echo "{version}"; exit 0; fi\n'
        f'case " $* " in *" -### "*) ;; *) {body} ;; esac\nexec {host.compiler} "$@"\n')
    script.chmod(0o755)
    return dataclasses.replace(host, compiler=str(script))


def test_identities_are_stable_and_differences_are_named():
    host = Target.host()
    ours = compiler_identity(host)
    assert not ours["error"] and ours["version"] and len(ours["sha256"]) == 64
    assert ours["commands"] and ours["programs"]
    # computed afresh for an equal target named otherwise: the same identity (the
    # compiler's temp file names in -### are blanked)
    assert compiler_identity(dataclasses.replace(host, name="again")) == ours
    assert compiler_differs(ours, ours) == ""
    newer = dict(ours, version="cc (GCC) 99.1\n")
    assert "`--version` output differs" in compiler_differs(newer, ours)
    assert "99.1" in compiler_differs(newer, ours)
    assert "binary differs" in compiler_differs(dict(ours, sha256="0" * 64), ours)
    assert "resolve to" in compiler_differs(dict(ours, commands=["cc1 -march=znver4"]), ours)
    assert "did not say" in compiler_differs(ValueError("boom"), ours)
    gone = compiler_identity(dataclasses.replace(host, compiler="/nonexistent/cc"))
    assert "is not there" in gone["error"]
    assert "cannot run the compiler" in compiler_differs(gone, ours)


def test_a_lowered_build_compiles_anywhere_to_the_library_a_build_here_gives(
        workload, tmp_path):
    builder = LocalBuilder(cache_dir=tmp_path)
    inputs = candidates(workload, (2, 4))
    lowered = dict(builder.iter_lower(inputs))
    assert all(b.lowered and not b.ok and b.source for b in lowered.values())
    built = builder.build(inputs)
    for i, b in enumerate(built):
        again = builder.compile_lowered(lowered[i])
        assert again.ok and again.lib_path == b.lib_path    # content-addressed: same file
    assert builder.compile_lowered(built[0]) is built[0]   # already compiled: as it is
    with pytest.raises(TypeError, match="must be a BuildResult"):
        builder.compile_lowered("int main;")   # type: ignore[arg-type]


@pytest.mark.parametrize("mode", ["worker", "client"])
def test_both_modes_log_valid_records_saying_where_they_were_compiled(
        cluster, workload, tmp_path, mode):
    log = tmp_path / f"{mode}.jsonl"
    runner = DaskRunner(cluster.scheduler_address, compile_on=mode, **TINY)
    with Measurer(log, LocalBuilder(cache_dir=tmp_path / "cc"), runner) as m:
        results = m.measure(candidates(workload))
        assert runner.compilers == (set(runner.workers) if mode == "worker" else set())
    assert all(r is not None and r.ok for r in results)
    records = load_records(log)                  # read back: compiled_on round-trips
    assert len(records) == 4
    places = {r.result.compiled_on for r in records}
    if mode == "client":   # nothing new in the line: older tvmlites still read it
        assert places == {""} and '"compiled_on"' not in log.read_text()
    else:
        assert places and all(p.startswith("tcp://127.0.0.1:") for p in places)


def test_a_worker_whose_compiler_differs_gets_libraries(
        cluster, workload, tmp_path, monkeypatch):
    """The stand-in compiler's --version says which process runs it: the client's
    differs from the workers' (started before the variable was set)."""
    target = wrapped(tmp_path, "cc-v", version="build $FAKE_CC")
    monkeypatch.setenv("FAKE_CC", "client")
    runner = DaskRunner(cluster.scheduler_address, compile_on="auto", **TINY)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        runner.check_target(target)
    said = [str(w.message) for w in caught if w.category is DaskWorkerWarning]
    assert len(said) == 2 and all("the client compiles for Dask worker" in t
                                  and "`--version` output differs: 'build '" in t
                                  and "(the client's: 'build client')" in t for t in said)
    assert runner.compilers == set() and len(runner.workers) == 2
    builder = LocalBuilder(target, cache_dir=tmp_path / "cc")
    assert not runner.accepts_sources(builder)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DaskWorkerWarning)   # said again: a new tuning
        with Measurer(tmp_path / "auto.jsonl", builder, runner, target) as m:
            results = m.measure(candidates(workload, (2, 4)))
    assert all(r is not None and r.ok for r in results)
    assert {r.result.compiled_on for r in load_records(tmp_path / "auto.jsonl")} == {""}
    strict = DaskRunner(cluster.scheduler_address, compile_on="worker", **TINY)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DaskWorkerWarning)
        with pytest.raises(RunnerError, match=r"no Dask worker .*cannot compile "
                                              r"\(compile_on='worker'\)"):
            strict.check_target(target)
    with pytest.raises(ValueError, match="compile_on='anywhere'.*'auto', 'worker', 'client'"):
        DaskRunner(cluster.scheduler_address, compile_on="anywhere")


def test_a_bad_compile_on_a_worker_is_an_error_record_like_a_local_one(
        cluster, workload, tmp_path):
    builder = LocalBuilder(cache_dir=tmp_path / "cc")
    good, bad = (b for _, b in sorted(builder.iter_lower(candidates(workload, (2, 4)))))
    bad = dataclasses.replace(bad, source=bad.source + "\nthis is not C;\n")
    local = builder.compile_lowered(bad)
    inputs = candidates(workload, (2, 4))
    with DaskRunner(cluster.scheduler_address, compile_on="worker", **TINY) as runner:
        runner.check_target(builder.target)
        assert runner.accepts_sources(builder)
        got = dict(runner.iter_stream(zip(inputs, [good, bad]), builder.build_reference))
    assert got[0].ok and got[0].compiled_on.startswith("tcp://127.0.0.1:")
    assert got[1].error_no == local.error_no == E.COMPILE_ERROR
    assert got[1].error_msg.startswith("C compiler failed on ")
    assert "this is not C" in got[1].error_msg and "this is not C" in local.error_msg


def test_a_worker_that_dies_mid_compile_loses_nothing(cluster, workload, tmp_path):
    """The stand-in compiler kills the worker that runs it (its parent), once; the
    candidate is compiled and measured on another worker, every one comes back once."""
    mark = tmp_path / "killed"
    target = wrapped(tmp_path, "cc-kill",
                     f'if mkdir "{mark}" 2>/dev/null; then kill -9 $PPID; sleep 5; fi')
    runner = DaskRunner(cluster.scheduler_address, compile_on="worker",
                        check_correctness=False, **TINY)
    builder = LocalBuilder(target, cache_dir=tmp_path / "cc")
    log = tmp_path / "kill.jsonl"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with Measurer(log, builder, runner, target) as m:
            results = m.measure(candidates(workload))
    assert mark.exists()                         # a worker did die in its compiler
    assert all(r is not None and r.ok for r in results)
    assert len(load_records(log)) == 4
    assert any("left the cluster" in str(w.message) for w in caught
               if w.category is DaskWorkerWarning)


def test_a_mixed_cluster_compiles_on_the_workers_that_can_and_here_for_the_others(
        cluster, workload, tmp_path):
    """One worker's stand-in compiler reports another build (an environment variable set
    in that worker only): auto gives it libraries compiled here, a share in proportion
    (1 of 2), and the other worker compiles."""
    target = wrapped(tmp_path, "cc-mixed", version="build $FAKE_CC")
    with distributed.Client(cluster.scheduler_address, set_as_default=False) as client:
        client.wait_for_workers(2, timeout=60)
        odd = sorted(client.scheduler_info(n_workers=-1)["workers"])[0]
        client.run(os.putenv, "FAKE_CC", "other", workers=[odd])
        try:
            runner = DaskRunner(cluster.scheduler_address, compile_on="auto", **TINY)
            log = tmp_path / "mixed.jsonl"
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                with Measurer(log, LocalBuilder(target, cache_dir=tmp_path / "cc"), runner,
                              target) as m:
                    assert set(runner.workers) - runner.compilers == {odd}
                    results = m.measure(candidates(workload))
        finally:
            client.run(os.unsetenv, "FAKE_CC", workers=[odd])
    assert all(r is not None and r.ok for r in results)
    assert any(f"the client compiles for Dask worker {odd}" in str(w.message) for w in caught)
    places = [r.result.compiled_on for r in load_records(log)]
    assert len(places) == 4 and places.count("") == 2      # fed 2 and 4 of 1..4
    assert odd not in places


def test_cli_compile_on_reaches_the_runner(cluster):
    from tvmlite.cli.args import tuning_options
    from tvmlite.cli.commands import build_parser
    url = "dask://" + cluster.scheduler_address.split("://")[1]
    for flag, mode in ((["--compile-on", "worker"], "worker"), ([], "client")):
        args = build_parser().parse_args(["tune", "matmul", "M=8", "--trials", "2", "--log",
                                          "x.jsonl", "--runner", url, *flag])
        assert tuning_options(args).runner.compile_on == mode
    with pytest.raises(SystemExit):
        build_parser().parse_args(["tune", "matmul", "--trials", "2", "--log", "x", "--compile-on",
                                  "cloud"])
