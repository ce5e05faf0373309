"""Which Dask workers measure a target and on which cores (no cluster needed)."""
from __future__ import annotations

import pytest

from tvmlite.search.measure.dask_cluster import MEASURE, parse_address, share_cores, unusable
from tvmlite.target.target import CompilerNotFoundError, Target

try:
    HOST = Target.host()
except CompilerNotFoundError:  # pragma: no cover - every CI image has a C compiler
    pytest.skip("no C compiler", allow_module_level=True)


def test_a_worker_needs_the_resource_a_target_and_the_same_target() -> None:
    desc = {"target": HOST.to_json(), "host": "a", "cpus": [0, 1]}
    assert unusable(desc, {MEASURE: 1}, HOST) == ""
    assert "no 'measure' resource" in unusable(desc, {}, HOST)
    assert unusable({"target": None, "error": "no cc"}, {MEASURE: 1}, HOST) == "no cc"
    other = dict(HOST.to_json(), cores=HOST.cores + 1)
    why = unusable({"target": other}, {MEASURE: 1}, HOST)
    assert why.startswith("its target differs: cores ") and f"(the task's: {HOST.cores})" in why


def test_workers_sharing_a_host_split_its_cpus_and_extras_are_left_out() -> None:
    workers = {"tcp://a:2": {"host": "a", "cpus": [0, 1, 2, 3]},
               "tcp://a:1": {"host": "a", "cpus": [0, 1, 2, 3]},
               "tcp://b:1": {"host": "b", "cpus": [0, 1]}}
    cores, dropped = share_cores(workers)
    assert cores == {"tcp://a:1": (0, 1), "tcp://a:2": (2, 3)} and dropped == {}
    three = {f"tcp://c:{i}": {"host": "c", "cpus": [0, 1]} for i in range(3)}
    cores, dropped = share_cores(three)
    assert cores == {"tcp://c:0": (0,), "tcp://c:1": (1,)}
    assert list(dropped) == ["tcp://c:2"] and "one per CPU measures" in dropped["tcp://c:2"]


def test_addresses() -> None:
    assert parse_address("dask://h:1") == parse_address("tcp://h:1") == "tcp://h:1"
    with pytest.raises(ValueError, match="dask://HOST:PORT"):
        parse_address("h")
    with pytest.raises(TypeError, match="address string or a distributed.Client"):
        parse_address(8786)  # type: ignore[arg-type]
