"""The shipped tuning logs load cleanly, replay, and the exported libraries, called
through their C ABI, compute what numpy computes. (Replay's own re-check against the
unscheduled build is tested in tests/search/records/test_deploy.py: here it would compile
each tuned kernel, whose unrolled C takes gcc seconds, once more for the same answer.)"""
import json
import pathlib
import warnings

import numpy as np
import pytest

import tvmlite
from tvmlite import testing
from tvmlite.codegen_c.loader import load_library
from tvmlite.search.records.deploy import replay
from tvmlite.search.records.record import load_records

LOGS = sorted((pathlib.Path(__file__).resolve().parents[1] / "tuning_logs").glob("*.jsonl"))


def test_there_are_shipped_logs():
    assert LOGS, "tuning_logs/ ships no log"


def _runs_here(records) -> bool:
    """A log's kernels use the ISA it was tuned for (-march=native there): they run on a
    CPU that has every feature of that target."""
    host = set(tvmlite.Target.host().features)
    return all(set(r.target.features) <= host for r in records)


def _call_exported(out_dir: pathlib.Path, entry: dict, inputs: list) -> np.ndarray:
    """Run one exported kernel from its own library and header (not through tvmlite)."""
    header = (out_dir / entry["header"]).read_text().splitlines()
    decl = "".join(line + "\n" for line in header if line.startswith("int32_t "))
    ffi, lib = load_library(out_dir / entry["library"], decl)
    out_arg = [a for a in entry["args"] if a["role"] == "output"][-1]
    out = tvmlite.empty(out_arg["shape"], out_arg["dtype"])
    out.fill(np.nan)
    ptrs = [ffi.cast("void *", a.ctypes.data) for a in [*inputs, out]]
    assert getattr(lib, entry["functions"]["kernel"])(*ptrs) == 0
    return out


@pytest.mark.parametrize("log", LOGS, ids=[p.name for p in LOGS])
def test_shipped_log_replays_and_matches_numpy(log, tmp_path):
    with warnings.catch_warnings():
        warnings.simplefilter("error", category=UserWarning)   # no skipped line
        records = load_records(log)
    assert records and all(r.result.ok for r in records)
    if not _runs_here(records):
        pytest.skip(f"{log.name} was tuned for features this CPU lacks")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")          # another CPU's log warns and still builds
        report = replay(log, tmp_path, check=False)
    assert report.skipped == [], report.skipped
    assert len(report.kernels) == len({r.workload.key for r in records})
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    assert [k["name"] for k in manifest["kernels"]] == [k["name"] for k in report.kernels]
    by_key = {r.workload.key: r.workload for r in records}
    for entry in manifest["kernels"]:
        wl = by_key[entry["workload"]["key"]]
        tensors = list(wl.tensors)
        inputs = testing.random_inputs(tensors, seed=3)
        got = _call_exported(tmp_path, entry, inputs)
        want = testing.reference(wl.name, inputs, **wl.args)
        testing.assert_allclose(got, want, wl.outputs[-1].dtype,
                                testing.reduction_length(tensors))
