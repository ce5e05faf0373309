"""Host detection, the JSON round trip and its validation, vector lanes, missing compiler."""

from __future__ import annotations

import dataclasses
import os
import platform

import pytest

from tvmlite.search.records.deploy import target_label, where_logged
from tvmlite.search.records.record import target_matches
from tvmlite.target.detect import describe_cpu
from tvmlite.target.target import CompilerNotFoundError, Target, describe_cpu_text


@pytest.fixture(scope="module")
def host() -> Target:
    return Target.host()


def test_host_fields_are_sane(host: Target) -> None:
    assert host.arch in ("x86_64", "aarch64")
    assert host.features == tuple(sorted(set(host.features)))
    assert host.vector_bits in (128, 256, 512)
    if "avx512f" in host.features:
        assert host.vector_bits == 512
    assert 1 <= host.cores <= (os.cpu_count() or 1)
    assert os.path.isabs(host.compiler) and os.access(host.compiler, os.X_OK)
    assert host.compiler_version
    assert "-std=gnu11" in host.cflags and "-O2" in host.cflags
    assert ("-fopenmp" in host.cflags) == host.openmp
    for name, size in host.caches:
        assert name.startswith("L") and size > 0
    if platform.system() == "Linux" and host.caches:
        assert host.cache_bytes(host.caches[0][0]) == host.caches[0][1]
    assert host.cache_bytes("L9") is None
    hash(host)  # hashable: usable as a cache key


def test_host_is_cached(host: Target) -> None:
    assert Target.host() is host


def test_json_round_trip(host: Target) -> None:
    d = host.to_json()
    assert set(d) >= {"arch", "features", "vector_bits", "cores", "caches", "compiler",
                      "compiler_version", "cflags", "openmp"}
    again = Target.from_json(d)
    assert again == host
    assert again.key() == host.key() and len(host.key()) == 16


@pytest.mark.parametrize("key, value", [
    ("arch", "riscv64"),
    ("features", ["avx2", "bad;name"]),
    ("cores", -2),
    ("cores", True),
    ("vector_bits", "512"),
    ("cflags", ["-O3", "-fplugin=x; rm -rf /"]),
    ("caches", {"L1d": -1}),
    ("cache_line_bytes", 48),
    ("cache_line_bytes", 0),
])
def test_from_json_rejects_bad_data(host: Target, key: str, value: object) -> None:
    d = host.to_json()
    d[key] = value
    with pytest.raises(ValueError, match=key):
        Target.from_json(d)


def test_from_json_rejects_missing_and_unknown_keys(host: Target) -> None:
    d = host.to_json()
    del d["cores"]
    with pytest.raises(ValueError, match="cores"):
        Target.from_json(d)
    with pytest.raises(ValueError, match="colour"):
        Target.from_json({**host.to_json(), "colour": "red"})
    with pytest.raises(ValueError, match="dict"):
        Target.from_json([1, 2])


def test_cache_line_comes_from_sysfs_and_old_logs_default_to_64(host: Target) -> None:
    path = "/sys/devices/system/cpu/cpu0/cache/index0/coherency_line_size"
    if os.path.exists(path):
        assert host.cache_line_bytes == int(open(path).read())
    assert host.cache_line_bytes & (host.cache_line_bytes - 1) == 0
    old = host.to_json()
    del old["cache_line_bytes"]                  # a record written before the field
    assert Target.from_json(old).cache_line_bytes == 64
    assert Target.from_json({**host.to_json(), "cache_line_bytes": 128}).cache_line_bytes == 128
    assert host.vector_bytes == host.vector_bits // 8


def test_vector_lanes(host: Target) -> None:
    t = Target.from_json({**host.to_json(), "vector_bits": 256})
    assert t.vector_lanes("float32") == 8
    assert t.vector_lanes("float64") == 4
    assert t.vector_lanes("int32") == 8
    assert t.vector_lanes("int64") == 4
    with pytest.raises(ValueError, match="dtype"):
        t.vector_lanes("complex64")


def test_describe_and_estimate(host: Target) -> None:
    text = host.describe()
    for word in ("arch", "features", "vector", "cores", "caches", "compiler", "cflags"):
        assert word in text
    assert host.peak_gflops_estimate() > 0


def test_a_bare_cpu_is_described_in_the_targets_words(host: Target) -> None:
    """Without a compiler there is no Target; the CPU lines read as in describe()."""
    cpu = describe_cpu()
    assert cpu["vector_registers"] == host.vector_registers and cpu["arch"] == host.arch
    text = describe_cpu_text(cpu)
    assert text.startswith(f"arch:      {host.arch} (")
    assert text.splitlines()[1:] == host.describe().splitlines()[2:6]


def test_same_cpu_label_and_which_cpu(host: Target) -> None:
    more_cores = dataclasses.replace(host, cores=host.cores + 3)
    other = dataclasses.replace(host, features=tuple(f for f in host.features if f != "fma"))
    assert host.same_cpu(more_cores) and not host.same_cpu(other)
    assert host.label() != "host" and host.label().startswith(host.arch)
    assert Target.from_name("x86_64-avx2").label() == "x86_64-avx2"
    assert dataclasses.replace(host, name="", features=()).label() == host.arch
    assert host.which_cpu(more_cores) == f"this CPU ({host.label()})"
    if "fma" in host.features:
        assert other.which_cpu(host).endswith("; it lacks fma)")
        assert host.which_cpu(other).endswith("; it has fma)")
    # the old names in records still answer
    assert target_matches(host, more_cores) and target_label(host) == host.label()
    assert where_logged(host, host) == host.which_cpu(host)


def test_missing_compiler_is_a_clear_error() -> None:
    with pytest.raises(CompilerNotFoundError, match="compiler=") as info:
        Target.host(compiler="/nonexistent/cc")
    assert "/nonexistent/cc" in str(info.value)
    assert isinstance(info.value, RuntimeError)


# -- detection logic on other CPUs (parsed from their /proc/cpuinfo text) ------------------

GRAVITON = """processor\t: 0
BogoMIPS\t: 243.75
Features\t: fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics fphp asimdhp cpuid asimdrdm
CPU implementer\t: 0x41
"""
HASWELL = "processor\t: 0\nflags\t\t: fpu sse sse2 ssse3 fma sse4_1 sse4_2 avx avx2 bmi2\n"


def test_aarch64_cpuinfo_gives_neon_and_128_bit_vectors() -> None:
    from tvmlite.target.detect import _cpuinfo_features, _vector_bits, normalize_arch
    assert normalize_arch("arm64") == "aarch64"
    features = _cpuinfo_features("aarch64", GRAVITON)
    assert "neon" in features and not any(f.startswith("avx") for f in features)
    assert _vector_bits(features) == 128


def test_avx2_cpuinfo_gives_256_bit_vectors() -> None:
    from tvmlite.target.detect import _cpuinfo_features, _vector_bits
    features = _cpuinfo_features("x86_64", HASWELL)
    assert {"avx2", "fma", "sse4_2"} <= set(features) and "avx512f" not in features
    assert _vector_bits(features) == 256


def test_vector_registers_follow_the_isa(host: Target) -> None:
    from dataclasses import replace
    avx2 = replace(host, arch="x86_64", features=("avx", "avx2", "fma"), vector_bits=256)
    assert avx2.vector_registers == 16
    assert replace(avx2, features=("avx2", "avx512f"), vector_bits=512).vector_registers == 32
    assert replace(avx2, arch="aarch64", features=("neon",), vector_bits=128).vector_registers == 32
