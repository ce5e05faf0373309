"""`tvmlite explain` on a tiny tuning log end to end (tune 4 trials, then explain the best
record, a chosen line, a chosen workload), TVMLITE_LOG=fallbacks, search.explain and
the tuning summary's bound line; a record measured at the peak is said to be, with no
advice."""
import shutil

import pytest

from tvmlite import cli, search
from tvmlite.explain import explain_record
from tvmlite.search.records.explain import bound_line
from tvmlite.search.records.logs import pick_record
from tvmlite.search.records.record import load_records
from tvmlite.target import bandwidth, peak
from tvmlite.target.target import Target


@pytest.fixture(scope="module")
def log(tmp_path_factory, tuned_matmul_log, known_peak_and_bandwidth):
    """A 4-trial template-free tune of matmul 16^3 (a copy of the session's, made under
    the same known numbers), with the peak and bandwidth caches in a temporary folder
    (filled with known numbers: no test measures them)."""
    root = tmp_path_factory.mktemp("explain")
    peak_file, bw_file = known_peak_and_bandwidth(root)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("OMP_NUM_THREADS", "1")
        mp.setattr(peak, "default_cache_file", lambda: peak_file)
        mp.setattr(bandwidth, "default_cache_file", lambda: bw_file)
        path = root / "mm.jsonl"
        shutil.copyfile(tuned_matmul_log, path)
        yield path, mp


def test_tune_summary_says_what_bounds_the_best_kernel(log, capsys):
    path, _ = log
    best = search.best_record(str(path))
    line = bound_line(best)
    assert "-bound" in line and "% of attainable" in line


def test_explain_the_best_record_a_line_and_a_workload(log, capsys, monkeypatch):
    path, mp = log
    monkeypatch.delenv("TVMLITE_LOG", raising=False)
    assert cli.main(["explain", str(path)]) == 0
    out, err = capsys.readouterr()
    for part in ("roofline:", "peak:        300.0 GFLOP/s", "L1d 500 GB/s", "bound:",
                 "measured:", "=> ", "findings", "[parallel]"):
        assert part in out, part
    assert "Traceback" not in out + err and "fallback" not in err
    best_line, best = pick_record(path)
    assert out.startswith(f"# line {best_line} of")
    assert cli.main(["explain", str(path), "--record", "1", "--workload", "matmul"]) == 0
    assert capsys.readouterr().out.startswith("# line 1 of")
    # a line the log lacks is the user's choice: a usage error, as for show --index
    assert cli.main(["explain", str(path), "--record", "99"]) == 2
    assert "line 99" in capsys.readouterr().err
    assert cli.main(["explain", str(path), "--workload", "conv"]) == 2
    assert "matches 0 workloads" in capsys.readouterr().err


def test_tvmlite_log_fallbacks_prints_them_as_the_kernel_is_built(log, capsys, monkeypatch):
    path, _ = log
    monkeypatch.setenv("TVMLITE_LOG", "fallbacks")
    assert cli.main(["explain", str(path)]) == 0
    out, err = capsys.readouterr()
    findings = [x for x in out.splitlines() if x.startswith("! [vector]")]
    printed = [x for x in err.splitlines() if x.startswith("tvmlite: fallback:")]
    assert len(printed) >= len(findings)        # plus a spill warning, if any


def test_search_explain_takes_a_record(log):
    path, _ = log
    rec = load_records(path)[0]
    e = search.explain(rec, check_spills=False)
    assert e.roofline.seconds == rec.mean_cost and e.roofline.flops == rec.workload.flops
    assert e.name == "matmul" and "GFLOP/s measured" in e.source
    with pytest.raises(TypeError, match="search.Record"):
        search.explain("mm.jsonl")
    # the one home of the logic gives the same explanation
    assert explain_record(rec, check_spills=False).one_line() == e.one_line()
    with pytest.raises(TypeError, match="search.Record"):
        explain_record("mm.jsonl")


def test_a_record_at_the_peak_is_said_to_be_and_advised_nothing(log, capsys, monkeypatch):
    """The Quickstart's case: the best record measured at the (injected, cached) peak.
    explain says so first and shows register pressure and spills as facts."""
    path, _ = log
    monkeypatch.delenv("TVMLITE_LOG", raising=False)
    line, best = pick_record(path)
    target = Target.host()
    huge = bandwidth.Bandwidth(tuple((lv, 1, 1e6) for lv in ("L1d", "L2", "L3", "memory")),
                               target.cores, 0.0)
    monkeypatch.setattr(bandwidth, "cached_bandwidth", lambda *a, **k: huge)
    cache = peak.default_cache_file()
    saved = cache.read_text()
    try:
        peak._store(target, peak.Peak(best.gflops / 1.005, target.cores, (best.gflops,), 0.0),
                    cache)
        e = search.explain(best)
        assert e.roofline.bound == "compute" and e.at_bound and not e.faults
        assert "at the peak (" in bound_line(best)
        assert cli.main(["explain", str(path)]) == 0
        out = capsys.readouterr().out
    finally:
        cache.write_text(saved)
    lines = out.splitlines()
    assert lines[3].startswith("=> compute-bound, at the peak (")
    assert "nothing in its schedule needs fixing" in lines[3]
    assert "try:" not in out and not any(x.startswith("! ") for x in lines)
    assert "% of attainable" not in out


def test_compare_report_names_the_bound_of_each_methods_best(log):
    from tvmlite.cli.compare import Run, report_markdown
    from tvmlite.search.result import Trial
    path, _ = log
    rec = search.best_record(str(path))
    trials = (Trial(1, 0.1, rec.gflops, rec.gflops, "NO_ERROR"),)
    runs = [Run(m, 0, path, trials, rec) for m in ("templated", "template-free")]
    md = report_markdown(runs, rec.workload, 1)
    # one "bound: " line per method (the line itself may read "bound: L1-bound: ...")
    assert sum(line.startswith("bound: ") for line in md.splitlines()) == 2
    assert "% of attainable" in md
