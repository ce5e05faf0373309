"""The bandwidth probe (codegen_c/stream.c) runs in a bound child, and its cache works
like the peak's: per target key, a damaged file counts as empty."""
import json

from tvmlite.target import bandwidth
from tvmlite.target.target import Target


def test_probe_sizes_follow_the_targets_caches():
    t = Target.host()
    sizes, _ = bandwidth.probe_sizes(t, 2)
    names = [n for n, _ in sizes]
    assert names[-1] == "memory" and names == [n for n in bandwidth.LEVELS if n in names]
    caches = dict(t.caches)
    if "L1d" in caches:
        assert dict(sizes)["L1d"] == caches["L1d"] // 2


def test_measure_and_cache(tmp_path):
    t = Target.host()
    cache = tmp_path / "bw.json"
    small = [("L1d", 16 << 10), ("memory", 4 << 20)]
    bw = bandwidth.measure_bandwidth(t, seconds=0.02, sizes=small, cache_file=cache)
    assert [n for n, _, _ in bw.levels] == ["L1d", "memory"]
    assert all(g > 0 for _, _, g in bw.levels) and "stream.c" in bw.describe()
    assert not cache.exists()               # custom sizes are not this target's numbers
    bandwidth._store(t, bw, cache)
    assert bandwidth.cached_bandwidth(t, cache) == bw
    assert t.key() in json.loads(cache.read_text())
    cache.write_text("{broken")
    assert bandwidth.cached_bandwidth(t, cache) is None
