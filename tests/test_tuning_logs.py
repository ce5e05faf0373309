"""The shipped tuning logs load cleanly and replay into kernels on a fresh install."""
import pathlib
import warnings

import pytest

from tvmlite.search.records.record import load_records
from tvmlite.search.records.deploy import replay

LOGS = sorted((pathlib.Path(__file__).resolve().parents[1] / "tuning_logs").glob("*.jsonl"))


def test_there_are_shipped_logs():
    assert LOGS, "tuning_logs/ ships no log"


@pytest.mark.parametrize("log", LOGS, ids=[p.name for p in LOGS])
def test_shipped_log_loads_and_replays(log, tmp_path):
    with warnings.catch_warnings():
        warnings.simplefilter("error", category=UserWarning)   # no skipped line
        records = load_records(log)
    assert records and all(r.result.ok for r in records)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")          # another CPU's log warns and still builds
        report = replay(log, tmp_path, check=False)
    assert len(report.kernels) == len({r.workload.key for r in records})
    for k in report.kernels:
        assert (tmp_path / f"lib{k['name']}.so").is_file()
