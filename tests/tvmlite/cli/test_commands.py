"""The tvmlite command line end to end on tiny shapes: every command in-process
(cli.main) and as `python -m tvmlite`; resume after an interrupted tune; usage errors
exit 2 with a message and no traceback, library errors exit 1."""
import json
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tvmlite import cli
from tvmlite.cli.args import parse_value
from tvmlite.cli.progress import Progress
from tvmlite.search.records.record import load_records
from tvmlite.search.result import Trial
from tvmlite.target import peak
from tvmlite.target.target import Target

ROOT = Path(__file__).resolve().parents[3]
MM = ["matmul", "M=16", "N=16", "K=16"]
QUICK = ["--population", "8"]


@pytest.fixture(autouse=True)
def one_thread(monkeypatch):
    # Other agents share the 2 cores: a 2-thread OpenMP kernel then waits at barriers
    # for milliseconds. The runner's worker inherits this and runs kernels on one thread.
    monkeypatch.setenv("OMP_NUM_THREADS", "1")


def run(capsys, *argv):
    code = cli.main([str(a) for a in argv])
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    return code, out, err


def run_process(*argv, cwd=None):
    return run_processes([argv], cwd=cwd)[0]


def run_processes(argvs, cwd=None):
    """``python -m tvmlite *argv`` for each argv, all started at once (each pays its own
    interpreter start and import, which then overlap), waited for in order; none may print
    a traceback. Returns the CompletedProcess of each."""
    env = dict(os.environ, OMP_NUM_THREADS="1",
               PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    cmds = [[sys.executable, "-m", "tvmlite", *map(str, argv)] for argv in argvs]
    procs = [subprocess.Popen(cmd, env=env, cwd=cwd, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for cmd in cmds]
    done = []
    try:
        for cmd, proc in zip(cmds, procs):
            out, err = proc.communicate(timeout=300)
            done.append(subprocess.CompletedProcess(cmd, proc.returncode, out, err))
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    for proc in done:
        assert "Traceback" not in proc.stdout + proc.stderr, proc.stderr
    return done


@pytest.fixture(scope="module")
def tuned(tmp_path_factory, tuned_matmul_log):
    """One template-free tune of matmul 16x16x16 (4 trials) shared by the log tests: a
    copy of the session's (tests/conftest.py), which this module's tests may append to."""
    log = tmp_path_factory.mktemp("tuned") / "logs" / "mm.jsonl"
    log.parent.mkdir()
    shutil.copyfile(tuned_matmul_log, log)
    return log


# -- parsing ---------------------------------------------------------------------------------

def test_values_parse_as_python_literals():
    assert parse_value("16") == 16 and parse_value("0.5") == 0.5
    assert parse_value("True") is True and parse_value("false") is False
    assert parse_value("None") is None
    assert parse_value("3,3") == (3, 3) and parse_value("2,") == (2,)
    assert parse_value("float32") == "float32"


def test_help_on_every_command(capsys):
    for argv in (["--help"], ["target", "--help"], ["tune", "--help"], ["replay", "--help"],
                 ["compare", "--help"], ["log", "--help"], ["log", "show", "--help"],
                 ["log", "best", "--help"], ["log", "merge", "--help"],
                 ["log", "distill", "--help"], ["show", "--help"]):
        code, out, _ = run(capsys, *argv)
        assert code == 0 and "usage: tvmlite" in out, argv
    proc = run_process("--help")
    assert proc.returncode == 0 and "tune" in proc.stdout and "compare" in proc.stdout


# -- target ----------------------------------------------------------------------------------

def test_target_describes_the_cpu_and_round_trips_as_json(capsys):
    code, out, _ = run(capsys, "target")
    assert code == 0 and "arch:" in out and "vector:" in out and "peak:" in out
    code, out, _ = run(capsys, "target", "--json")
    assert code == 0 and Target.from_json(json.loads(out)) == Target.host()


def test_target_peak_is_measured_and_cached(capsys, monkeypatch, tmp_path):
    cache = tmp_path / "peak.json"
    monkeypatch.setattr(peak, "default_cache_file", lambda: cache)
    code, out, _ = run(capsys, "target", "--peak", "--peak-seconds", "0.05", "--peak-runs", "1")
    assert code == 0 and "(measured" in out
    stored = peak.cached_peak(Target.host())
    assert stored is not None and stored.gflops > 0 and stored.threads == Target.host().cores
    assert Target.host().key() in json.loads(cache.read_text())
    code, out, _ = run(capsys, "target")      # later commands read the cache
    assert f"{stored.gflops:.1f} GFLOP/s fp32 FMA (measured" in out
    cache.write_text("{not json")            # a damaged cache is just empty
    assert peak.cached_peak(Target.host()) is None


def test_target_without_a_compiler_describes_the_cpu_and_says_what_is_missing(tmp_path):
    """PATH pointing nowhere: no cc, gcc or clang. The CPU is still described, exit 0."""
    env = dict(os.environ, PATH=str(tmp_path), OMP_NUM_THREADS="1",
               PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    env.pop("CC", None)
    proc = subprocess.run([sys.executable, "-m", "tvmlite", "target"], env=env, cwd=tmp_path,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stdout + proc.stderr
    for field in ("arch:", "features:", "vector:", "cores:", "caches:"):
        assert field in proc.stdout
    assert "no C compiler found" in proc.stdout and "install" in proc.stdout
    js = subprocess.run([sys.executable, "-m", "tvmlite", "target", "--json"], env=env,
                        cwd=tmp_path, capture_output=True, text=True, timeout=120)
    d = json.loads(js.stdout)
    assert js.returncode == 0 and d["compiler"] is None and "no C compiler" in d["missing"]
    assert d["cores"] >= 1 and d["vector_bits"] in (128, 256, 512)
    pk = subprocess.run([sys.executable, "-m", "tvmlite", "target", "--peak"], env=env,
                        cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert pk.returncode == 1 and "needs a C compiler" in pk.stderr and "arch:" in pk.stdout


# -- tune ------------------------------------------------------------------------------------

def test_tune_prints_a_summary_and_logs_every_trial(tuned, capsys, tmp_path):
    records = load_records(tuned)
    assert len(records) == 4 and all(r.workload.name == "matmul" for r in records)
    log = tmp_path / "again.jsonl"
    code, out, err = run(capsys, "tune", *MM, "--trials", "2", "--log", log, *QUICK,
                         "--seed", "3", "--timeout", "20")
    assert code == 0
    for part in ("best:", "GFLOP/s", "% of this CPU's float32 peak", "x over the unscheduled",
                 f"tvmlite replay {log} --out dist"):
        assert part in out, part
    assert "matmul [2/2]" in err        # plain progress lines: stderr is not a terminal
    assert all(r.seed == 3 for r in load_records(log))


def test_tune_refuses_to_append_to_a_log_of_the_same_workload(tuned, capsys):
    code, _, err = run(capsys, "tune", *MM, "--trials", "4", "--log", tuned, *QUICK)
    assert code == 2 and "--resume" in err and "another --log" in err
    code, out, _ = run(capsys, "tune", *MM, "--trials", "4", "--log", tuned, *QUICK,
                       "--resume", "--quiet")
    assert code == 0 and "nothing new measured" in out
    assert len(load_records(tuned)) == 4


def test_interrupted_tune_resumes_without_measuring_twice(capsys, monkeypatch, tmp_path):
    log = tmp_path / "mm.jsonl"
    seen = []
    original = Progress.__call__

    def interrupt_after_two(self, trial):
        original(self, trial)
        seen.append(trial.index)
        if len(seen) == 2:
            raise KeyboardInterrupt
    monkeypatch.setattr(Progress, "__call__", interrupt_after_two)
    code, _, err = run(capsys, "tune", *MM, "--trials", "4", "--log", log, *QUICK,
                       "--batch", "2")
    assert code == 130 and "Resume with:" in err
    assert len(load_records(log)) == 2
    again = shlex.split(err.strip().splitlines()[-1])
    assert again[0] == "tvmlite" and again[-1] == "--resume"
    monkeypatch.setattr(Progress, "__call__", original)
    code, out, _ = run(capsys, *again[1:])
    assert code == 0 and "4 trial(s) in the log, 2 new" in out
    keys = [r.key for r in load_records(log)]
    assert len(keys) == 4 == len(set(keys))


def test_tune_templated(capsys, tmp_path):
    log = tmp_path / "t.jsonl"
    code, out, _ = run(capsys, "tune", *MM, "--trials", "3", "--log", log,
                       "--search", "templated", "--tuner", "random", "--quiet")
    assert code == 0 and "best:" in out
    records = load_records(log)
    assert records and all(r.tuner == "random" and r.decisions["template"] == "matmul"
                           for r in records)


USER_OPS = '''
from tvmlite import te

def scaled_add(n, alpha=2.0):
    A = te.placeholder((n,), name="A")
    B = te.placeholder((n,), name="B")
    C = te.compute((n,), lambda i: A[i] * alpha + B[i], name="C")
    return [A, B, C]
'''


def test_tune_a_user_workload_from_a_file(capsys, tmp_path):
    path = tmp_path / "my_ops.py"
    path.write_text(USER_OPS)
    log = tmp_path / "user.jsonl"
    code, out, _ = run(capsys, "tune", "--workload", f"{path}:scaled_add", "n=64",
                       "alpha=0.5", "--trials", "2", "--log", log, *QUICK, "--quiet")
    assert code == 0 and "scaled_add(n=64, alpha=0.5)" in out
    assert {r.workload.name for r in load_records(log)} == {"scaled_add"}
    for argv, message in (([f"{path}:nope", "n=4"], "no function 'nope'"),
                          ([f"{tmp_path}/missing.py:f"], "does not exist"),
                          ([str(path)], "FILE.py:FUNCTION"),
                          ([f"{path}:scaled_add", "m=4"], "unknown argument(s) m; missing n")):
        code, _, err = run(capsys, "tune", "--workload", *argv, "--trials", "2", "--log", log)
        assert code == 2 and message in err, (argv, err)
    code, _, err = run(capsys, "tune", "--workload", f"{path}:scaled_add", "n=4", "--trials",
                       "2", "--log", log, "--search", "templated")
    assert code == 2 and "template-free" in err


# -- errors ----------------------------------------------------------------------------------

USAGE_ERRORS = [
    (["tune", "conv9d", "N=1", "--trials", "4", "--log", "x.jsonl"], "unknown operator 'conv9d'"),
    (["tune", "matmul", "M16", "--trials", "4", "--log", "x.jsonl"], "KEY=VALUE"),
    (["tune", "matmul", "M=16", "N=16", "Q=1", "--trials", "4", "--log", "x.jsonl"],
     "unknown argument(s) Q; missing K; the signature is matmul(M, N, K, dtype='float32')"),
    (["tune", *MM, "--trials", "0", "--log", "x.jsonl"], "not a positive integer"),
    (["tune", *MM, "--trials", "many", "--log", "x.jsonl"], "not a positive integer"),
    (["tune", *MM, "--trials", "4"], "--log"),
    (["tune", *MM, "--trials", "4", "--log", "x.jsonl", "--tuner", "ga"], "--search templated"),
    (["tune", "relu", "shape=8", "--trials", "4", "--log", "x.jsonl", "--search", "templated"],
     "has no template"),
    (["tune", "--trials", "4", "--log", "x.jsonl"], "name an operator"),
    (["tune", *MM, "--trials", "4", "--log", "x.jsonl", "--bogus"], "unrecognized"),
    (["replay", "missing.jsonl", "--out", "d"], "log 'missing.jsonl' does not exist"),
    (["show", "missing.jsonl"], "does not exist"),
    (["log", "show", "missing.jsonl"], "does not exist"),
    (["log", "merge", "out.jsonl", "missing.jsonl"], "does not exist"),
    (["log"], "required"),
    (["compare", "relu", "shape=8", "--trials", "2", "--out", "d"], "no template"),
    (["compare", "matmul", "M=1..64", "N=16", "K=16", "--trials", "2", "--out", "d"],
     "a size range (M=1..64) is tuned by `tvmlite tune` with the template-free search"),
    (["tune", "matmul", "M=1..64", "N=16", "K=16", "--trials", "4", "--log", "x.jsonl",
      "--search", "templated"], "a size range (M=1..64)"),
    (["tune", "matmul", "M=9..2", "N=16", "K=16", "--trials", "4", "--log", "x.jsonl"],
     "M=9..2: a size range LO..HI needs 1 <= LO <= HI"),
    ([], "usage: tvmlite"),
]


@pytest.mark.parametrize("argv,message", USAGE_ERRORS, ids=[" ".join(a[:3]) or "none"
                                                             for a, _ in USAGE_ERRORS])
def test_bad_arguments_are_usage_errors(capsys, monkeypatch, tmp_path, argv, message):
    monkeypatch.chdir(tmp_path)
    code, _, err = run(capsys, *argv)
    assert code == 2 and message in err, err


@pytest.mark.parametrize("argv,message", [
    (["tune", "matmul", "M=0", "N=16", "K=16"], "M must be a positive int"),
    (["tune", "matmul", "M=16", "N=16", "K=16", "dtype=complex64"], "dtype"),
    (["compare", "matmul", "M=-1", "N=16", "K=16", "--trials", "2", "--out", "d"],
     "M must be a positive int"),
], ids=["tune-M=0", "tune-dtype", "compare-M=-1"])
def test_bad_values_exit_2_like_unknown_keys(capsys, monkeypatch, tmp_path, argv, message):
    """A bad KEY=VALUE value is a usage error (exit 2), the same as an unknown KEY."""
    monkeypatch.chdir(tmp_path)
    code, _, err = run(capsys, *argv, *(["--trials", "2", "--log", "x.jsonl"]
                                        if argv[0] == "tune" else []))
    assert code == 2 and message in err and "usage: tvmlite" in err, err
    assert not (tmp_path / "x.jsonl").exists()     # refused before any work


def test_a_bad_index_or_workload_is_a_usage_error_and_help_says_the_codes(tuned, capsys):
    code, _, err = run(capsys, "show", tuned, "--index", "99")
    assert code == 2 and "line 99" in err
    code, _, err = run(capsys, "show", tuned, "--workload", "conv9d")
    assert code == 2 and "matches 0 workloads" in err
    code, out, _ = run(capsys, "--help")
    assert "exit status: 0 done; 2 the command line is wrong" in " ".join(out.split())


# -- logs, show, replay ----------------------------------------------------------------------

def test_log_commands(tuned, capsys, tmp_path):
    code, out, _ = run(capsys, "log", "show", tuned)
    assert code == 0 and out.count(" matmul ") == 4
    code, out, _ = run(capsys, "log", "show", tuned, "--limit", "1")
    assert "3 more record(s)" in out
    code, out, _ = run(capsys, "log", "best", tuned)
    assert code == 0 and len(out.strip().splitlines()) == 2 and "matmul" in out
    merged = tmp_path / "merged.jsonl"
    code, out, _ = run(capsys, "log", "merge", merged, tuned, tuned)
    assert code == 0 and "appended 4 new record(s)" in out
    code, out, _ = run(capsys, "log", "merge", merged, tuned)
    assert "appended 0 new record(s)" in out
    best = tmp_path / "best.jsonl"
    code, out, _ = run(capsys, "log", "distill", tuned, "--out", best)
    assert code == 0 and len(load_records(best)) == 1


def test_show_prints_the_loop_nest_or_the_c(tuned, capsys):
    code, out, _ = run(capsys, "show", tuned)
    assert code == 0 and "def matmul(A: float32[16, 16]" in out and "# Workload(matmul" in out
    code, out, _ = run(capsys, "show", tuned, "--index", "2")
    assert code == 0 and "line 2 of" in out
    code, out, _ = run(capsys, "show", tuned, "--c")
    assert code == 0 and "// Workload(matmul" in out and "#include" in out
    key = load_records(tuned)[0].workload.key
    code, out, _ = run(capsys, "show", tuned, "--workload", key[:8])
    assert code == 0 and "def matmul" in out


def test_replay_exports_kernels(tuned, capsys, tmp_path):
    out_dir = tmp_path / "dist"
    code, out, _ = run(capsys, "replay", tuned, "--out", out_dir)
    assert code == 0 and "exported 1 kernel(s)" in out
    manifest = json.loads((out_dir / "manifest.json").read_text())
    assert [k["name"] for k in manifest["kernels"]] == ["matmul"]
    assert (out_dir / "libmatmul.so").is_file() and (out_dir / "matmul.h").is_file()


# -- as a subprocess -------------------------------------------------------------------------

def test_every_command_as_a_subprocess(tmp_path):
    log = tmp_path / "mm.jsonl"
    target, proc = run_processes([("target", "--json"),
                                  ("tune", *MM, "--trials", "2", "--log", log, *QUICK)])
    assert target.returncode == 0 and json.loads(target.stdout)["arch"] == Target.host().arch
    assert proc.returncode == 0 and "tvmlite replay" in proc.stdout
    assert "matmul [2/2]" in proc.stderr
    argvs = (["log", "show", log], ["log", "best", log], ["show", log],
             ["log", "distill", log, "--out", tmp_path / "best.jsonl"],
             ["log", "merge", tmp_path / "all.jsonl", log],
             ["replay", log, "--out", tmp_path / "dist"],
             ["tune", "conv9d", "--trials", "2", "--log", log])
    *reads, bad = run_processes(argvs)      # they only read the log (or refuse): at once
    for argv, proc in zip(argvs, reads):
        assert proc.returncode == 0 and proc.stdout.strip(), argv
    assert bad.returncode == 2 and "unknown operator" in bad.stderr


# -- progress --------------------------------------------------------------------------------

def _trials(n, error_at=()):
    return [Trial(i, 0.5 * i, 1.0 * i, 1.0 * i, "RUN_TIMEOUT" if i in error_at else "NO_ERROR")
            for i in range(1, n + 1)]


def test_progress_lines_quiet_and_bar():
    import io
    stream = io.StringIO()
    p = Progress(10, stream, every=5, label="mm")
    for t in _trials(10, error_at={3}):
        p(t)
    lines = stream.getvalue().splitlines()
    assert len(lines) == 2 and lines[-1].startswith("mm [10/10] best 10.00 GFLOP/s  errors 1")
    quiet = io.StringIO()
    p = Progress(10, quiet, "quiet")
    for t in _trials(3):
        p(t)
    assert quiet.getvalue() == "" and p.measured == 3 and p.eta() == pytest.approx(3.5)
    bar = io.StringIO()
    p = Progress(4, bar, "bar")
    for t in _trials(4)[2:]:      # a resumed run starts at trial 3
        p(t)
    p.close()
    assert "4/4" in bar.getvalue() and "best 4.00 GFLOP/s" in bar.getvalue()
    with pytest.raises(ValueError, match="total"):
        Progress(0)


def test_cold_weights_reach_the_tuning_options():
    from tvmlite.cli.args import tuning_options
    from tvmlite.cli.commands import build_parser
    for flag in ([], ["--cold-weights"]):
        args = build_parser().parse_args(["tune", "model.onnx", "--trials", "2", "--log",
                                          "x.jsonl", *flag])
        options = tuning_options(args)
        assert options.cold_weights == bool(flag) == options.measure_config().cold_weights


def test_tune_const_and_no_pretrained(capsys, tmp_path):
    code, out, err = run(capsys, "tune", *MM, "--trials", "2", "--log", tmp_path / "x.jsonl",
                         *QUICK, "--quiet", "--const", "B,X")
    assert code != 0 and "'X' is not an input of workload matmul" in out + err
    code, out, err = run(capsys, "tune", *MM, "--trials", "8", "--log", tmp_path / "m.jsonl",
                         *QUICK, "--batch", "8", "--quiet", "--const", "B", "--no-pretrained")
    assert code == 0 and "best:" in out
    from tvmlite.search.records.record import load_records
    recs = load_records(tmp_path / "m.jsonl")
    packed = [r for r in recs if any(st.kind == "prepack" for st in r.steps)]
    assert all(r.result.ok for r in packed)
    best = min((r for r in recs if r.result.ok), key=lambda r: r.mean_cost)
    assert ("pre-packed once outside the kernel" in out) == (best in packed)


def test_tune_a_size_range_then_replay_the_dispatching_kernel(capsys, monkeypatch, tmp_path):
    """``tvmlite tune matmul M=1..24 ...`` (the README's dynamic command): M is symbolic,
    the log gets a dispatch table, and replay exports the dispatching kernel, its variants
    and their ranges in manifest.json."""
    monkeypatch.chdir(tmp_path)
    code, out, err = run(capsys, "tune", "matmul", "M=1..24", "N=16", "K=16", "--trials", "6",
                         "--log", "dyn.jsonl", *QUICK, "--quiet")
    assert code == 0, err
    assert "dispatch:" in out and "variant" in out
    tables = [r for r in load_records(tmp_path / "dyn.jsonl") if r.workload.sizes is None]
    assert len(tables) == 1
    code, out, err = run(capsys, "replay", "dyn.jsonl", "--out", "dist")
    assert code == 0, err
    manifest = json.loads((tmp_path / "dist" / "manifest.json").read_text())
    assert "ranges" in json.dumps(manifest) and (tmp_path / "dist" / "matmul.c").exists()
