"""``python -m bench suite`` starts, and its case table states valid tvmlite workloads (no
tuning)."""
from __future__ import annotations

import importlib
import importlib.util
import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from tvmlite import te
from tvmlite.search.records.workload import Workload

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "bench"


def _bench_module(name: str):
    """``bench.<name>``, with the ``bench`` package registered from the checkout (pytest
    runs in importlib mode: the repository root is not on sys.path)."""
    if "bench" not in sys.modules:
        spec = importlib.util.spec_from_file_location(
            "bench", BENCH / "__init__.py", submodule_search_locations=[str(BENCH)])
        pkg = importlib.util.module_from_spec(spec)
        sys.modules["bench"] = pkg
        spec.loader.exec_module(pkg)
    return importlib.import_module(f"bench.{name}")


def _bench(*argv: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "bench", *argv], cwd=ROOT,
                          capture_output=True, text=True, timeout=120, check=False)


suite = _bench_module("suite")
ALL = suite.select_cases(list(suite.CASES), quick=False)


def test_help_runs():
    proc = _bench("suite", "--help")
    assert proc.returncode == 0, proc.stderr
    assert "--quick" in proc.stdout and "--tvm-python" in proc.stdout
    assert proc.stdout.startswith("usage: python -m bench suite")


def test_the_entry_point_lists_every_benchmark_and_each_has_a_main():
    proc = _bench()
    assert proc.returncode == 0, proc.stderr
    listing = _bench_module("__main__").BENCHMARKS
    for name, (module, _) in listing.items():
        assert f"  {name} " in proc.stdout
        assert callable(_bench_module(module).main), module
    bad = _bench("no-such-bench")
    assert bad.returncode == 2 and "unknown benchmark 'no-such-bench'" in bad.stderr


def test_no_benchmark_edits_sys_path():
    for path in BENCH.glob("*.py"):
        assert "sys.path" not in path.read_text(), path.name


def test_case_table_has_the_suites_cases_per_operator():
    counts = {op: len(shapes) for op, (_, _, _, shapes) in suite.CASES.items()}
    assert counts == {"gmm": 4, "gmmc": 2, "c1d": 4, "c2d": 4, "c3d": 3, "dep": 4, "nrm": 4}
    assert len({suite.case_name(op, shape) for op, shape, _ in ALL}) == len(ALL)


@pytest.mark.parametrize("op,shape,f", ALL, ids=[suite.case_name(o, s) for o, s, _ in ALL])
def test_case_is_a_valid_workload(op, shape, f):
    wl = Workload.from_op(f.op, **f.kwargs)
    assert wl.args["dtype"] == "float32"
    assert wl.args.get("N", 1) == 1 or op in ("gmm", "gmmc", "nrm")       # batch 1
    # the conventional flop count (2 per multiply-add) of the reducing stages
    macs = sum(math.prod(o.shape) * math.prod(iv.extent for iv in o.reduce_axis)
               for o in te.collect_ops(wl.outputs)
               if isinstance(o, te.ComputeOp) and o.reduce_axis)
    assert f.flops == 2 * macs
    # the peers read the same data: same element counts as our inputs
    ours = sorted(math.prod(t.shape) for t in wl.tensors[:-1])
    for peer in (f.numpy, f.torch):
        if peer is not None:
            assert sorted(math.prod(s) for s in peer[1]) == ours


def test_quick_takes_the_smallest_case_per_operator():
    quick = suite.select_cases(list(suite.CASES), quick=True)
    assert [op for op, _, _ in quick] == list(suite.CASES)
    for op, _, f in quick:
        assert f.flops == min(g.flops for o, _, g in ALL if o == op)


def test_results_name_the_measured_commit_and_check_the_goal(tmp_path):
    row = {"op": "gmm", "case": "gmm_128x128x128", "shape": (128, 128, 128), "flops": 4194304,
           "trials": 200, "tune_s": 150.0, "tvm_tune_s": 300.0, "pct_peak": 90.0,
           "note": "parallel", "gflops": {"ours": 210.0, "numpy": 150.0, "torch": 140.0,
                                          "tvm": 200.0},
           "ratios": {"numpy": 1.4, "torch": 1.5, "tvm": 1.05, "best": 1.05}}
    header = {"quick": False, "date": "2026-11-30T08:00", "threads": 2, "argv": ["--ops", "gmm"],
              "peak": 231.0, "trials": 200, "population": 2048, "seed": 0, "rounds": 2,
              "load": 0.1, "commit": suite.git_commit(), "versions": {"numpy": "2"}}
    assert header["commit"]                         # "unknown" outside a git checkout
    suite.write_results(tmp_path / "R.md", [row], header)
    text = (tmp_path / "R.md").read_text()
    assert f"at commit {header['commit']}" in text
    assert "`python -m bench suite --ops gmm`" in text
    for line in ("| gmm_128x128x128: >= 1.0x the best peer | 1.05x | yes |",
                 "| GMM: geomean >= 1.1x MetaSchedule | 1.05x | no |",
                 "| gmm_128x128x128: >= 0.9x MetaSchedule | 1.05x | yes |",
                 "| gmm_128x128x128: tuning faster than MetaSchedule's | 150 s vs 300 s | yes |"):
        assert line in text, line
    data = json.loads((tmp_path / "R.json").read_text())
    assert data["commit"] == header["commit"] and data["rows"][0]["case"] == "gmm_128x128x128"
    goal = next(t for t in data["tables"] if t["title"] == "Goal check")
    assert ["gmm_128x128x128: >= 1.0x the best peer", "1.05x", "yes"] in goal["rows"]


def test_padding_share_counts_the_taps_in_the_zero_padding():
    # 4 outputs x 3 taps, padding 1: the first output's first tap and the last's last
    assert suite.padding_share((4,), 3, 1, 1) == pytest.approx(2 / 12)
    assert suite.padding_share((4, 4), 3, 1, 1) == pytest.approx(1 - (10 / 12) ** 2)
    assert suite.padding_share((8,), 3, 2, 1) == pytest.approx(1 / 12)   # stride 2: one
    assert suite.padding_share((56, 56), 1, 1, 0) == 0.0
    assert suite.c3d(16, 7, 7, 512, 512, 3, 1, 1).padding_share == pytest.approx(
        1 - (46 / 48) * (19 / 21) ** 2)


def test_a_share_above_100_percent_of_the_peak_is_flagged_not_printed(tmp_path):
    row = {"op": "gmm", "case": "gmm_128x128x128", "shape": (128, 128, 128), "flops": 4194304,
           "trials": 200, "tune_s": 150.0, "tvm_tune_s": 300.0, "pct_peak": 128.0,
           "note": "", "gflops": {"ours": 146.0, "numpy": 150.0}, "ratios": {"numpy": 0.97,
                                                                          "best": 0.97}}
    header = {"quick": False, "date": "2026-11-30T08:00", "threads": 2, "argv": ["--ops", "gmm"],
              "peak": 114.0, "trials": 200, "population": 2048, "seed": 0, "rounds": 2,
              "load": 0.1, "commit": suite.git_commit(), "versions": {"numpy": "2"}}
    suite.write_results(tmp_path / "R.md", [row], header)
    text = (tmp_path / "R.md").read_text()
    assert "n/a (>100%: peak measured low)" in text and "128" not in text.replace(
        "128x128x128", "").replace("128, 128, 128", "")
    data = json.loads((tmp_path / "R.json").read_text())
    assert data["rows"][0]["pct_peak"] == "n/a (>100%: peak measured low)"
    assert all("128" not in str(cell) for t in data["tables"] for r in t["rows"]
               for cell in r[1:])


def test_cases_can_be_picked_by_name_and_a_constant_gmm_prepacks_b_only():
    picked = suite.select_cases(list(suite.CASES), quick=False,
                                only=["gmm_1024x1024x1024", "gmmc_1024x1024x1024"])
    assert [suite.case_name(op, shape) for op, shape, _ in picked] == [
        "gmm_1024x1024x1024", "gmmc_1024x1024x1024"]
    plain, const = (f for _, _, f in picked)
    assert const.constants == ("B",) and plain.constants == ()
    assert (const.op, const.kwargs, const.flops, const.numpy) == (
        plain.op, plain.kwargs, plain.flops, plain.numpy)     # same work, same peers
    proc = _bench("suite", "--cases", "gmm_7")
    assert proc.returncode == 2 and "unknown --cases ['gmm_7']" in proc.stderr
