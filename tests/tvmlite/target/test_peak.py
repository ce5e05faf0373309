"""The measured peak: the FMA loop fits the target's register file (no spill in its object
code on AVX2 or AVX-512), is checked against a GEMM timed in the same run, a peak
measured under load is marked, never replaces a quiet one and is measured again by the
next process; the peak is the best of its runs, an upper estimate held against the
theoretical peak: a kernel within its noise is at the peak, above it the probe read low
(the cache is raised), and only a figure above the theoretical peak is a measurement
problem. Apart from the tests that compile or time the loop itself, the runs and the
clock are injected: no test here times anything to judge it."""
from __future__ import annotations

import dataclasses
import json
import re
import shutil
import statistics
import subprocess
import sys
import time

import cffi
import numpy as np
import pytest

import tvmlite
from tvmlite.schedules.recipes import gemm_packed
from tvmlite.target import peak as peaks
from tvmlite.target.peak_bound import (
    MAX_NOISE,
    MIN_NOISE,
    NOMINAL_HEADROOM,
    Clock,
    Verdict,
    max_clock,
    run_noise,
    theoretical_gflops,
)
from tvmlite.target.target import Target

HOST = Target.host()
X86 = HOST.arch == "x86_64"


def isa_target(isa: str) -> Target:
    """This machine's compiler, with the ISA flags of an AVX2 (16 ymm registers) or an
    AVX-512 (32 zmm) x86-64 CPU instead of -march=native."""
    keep = tuple(f for f in HOST.cflags if f not in ("-march=native",
                                                     "-mprefer-vector-width=512"))
    if isa == "avx2":
        feats = ("sse", "sse2", "sse3", "ssse3", "sse4_1", "sse4_2", "avx", "avx2", "fma")
        return dataclasses.replace(HOST, arch="x86_64", features=feats, vector_bits=256,
                                   cflags=keep + ("-mavx2", "-mfma"))
    feats = ("sse", "sse2", "avx", "avx2", "fma", "avx512f")
    return dataclasses.replace(HOST, arch="x86_64", features=feats, vector_bits=512,
                               cflags=keep + ("-mavx512f", "-mfma"))


def test_chains_fit_the_register_file_and_hide_the_latency():
    for isa, regs, chains in (("avx2", 16, 12), ("avx512", 32, 24)):
        t = isa_target(isa)
        assert t.vector_registers == regs and peaks.fma_chains(t) == chains
        latency, pipes = t.fma_latency_pipes           # the family's, from named.py
        assert latency * pipes <= chains <= regs - 2
        assert f"-DNACC={chains}" in peaks.peak_flags(t)


def _hot_loop_stack_accesses(obj: str) -> tuple[int, list]:
    """(FMAs in the innermost FMA loop, its instructions touching the stack)."""
    asm = subprocess.run(["objdump", "-d", "--no-show-raw-insn", obj], capture_output=True,
                         text=True, check=True).stdout
    lines = [(int(m.group(1), 16), m.group(2)) for m in
             re.finditer(r"^\s*([0-9a-f]+):\s+(.*)$", asm, re.MULTILINE)]
    best: list = []
    for addr, text in lines:
        jump = re.match(r"j\w+\s+([0-9a-f]+)\s", text)
        if not jump or int(jump.group(1), 16) >= addr:
            continue                                   # not a backward branch
        body = [t for a, t in lines if int(jump.group(1), 16) <= a <= addr]
        fmas = sum("vfmadd" in t and "ps" in t for t in body)
        if fmas and (not best or len(body) < len(best)):
            best = body                                # the innermost loop with FMAs
    assert best, "no loop with vector FMAs found in the peak object code"
    return (sum("vfmadd" in t for t in best),
            [t for t in best if re.search(r"\((%rsp|%rbp)", t)])


def _compile_object(target: Target, tmp_path, extra=()) -> str:
    obj = str(tmp_path / "peak.o")
    flags = [f for f in target.cflags if f not in ("-shared", "-fopenmp")]
    src = tmp_path / "peak.c"
    src.write_text(peaks._source())
    subprocess.run([target.compiler, *flags, *peaks.peak_flags(target), *extra, "-c",
                    str(src), "-o", obj], check=True, capture_output=True, text=True)
    return obj


@pytest.mark.skipif(not X86 or not shutil.which("objdump"), reason="x86-64 objdump needed")
@pytest.mark.parametrize("isa", ["avx2", "avx512"])
def test_the_peak_loop_does_not_spill(isa, tmp_path):
    t = isa_target(isa)
    fmas, stack = _hot_loop_stack_accesses(_compile_object(t, tmp_path))
    assert fmas == peaks.fma_chains(t) and not stack, stack


@pytest.mark.skipif(not X86 or not shutil.which("objdump"), reason="x86-64 objdump needed")
def test_the_spill_check_sees_the_old_16_chain_loop_spill_on_avx2(tmp_path):
    """16 accumulators + a + b on 16 ymm registers: the check must see that spill."""
    t = isa_target("avx2")
    flags = tuple(f for f in peaks.peak_flags(t) if not f.startswith("-DNACC"))
    obj = str(tmp_path / "p16.o")
    src = tmp_path / "peak.c"
    src.write_text(peaks._source())
    subprocess.run([t.compiler, *[f for f in t.cflags if f not in ("-shared", "-fopenmp")],
                    *flags, "-DNACC=16", "-c", str(src), "-o", obj], check=True)
    _, stack = _hot_loop_stack_accesses(obj)
    assert stack


@pytest.mark.skipif(not X86 or not {"avx2", "fma"} <= set(HOST.features),
                    reason="needs a CPU that runs AVX2 + FMA code")
def test_the_peak_on_a_16_register_target_is_checked_against_a_gemm_in_the_same_run():
    """The AVX2 peak loop, timed in turns with a GEMM built for the same AVX2 target (one
    thread each): the peak holds (the median of back-to-back ratios, generous repeats, a
    margin for a shared machine). A spilling loop reads ~0.6x a GEMM and fails."""
    t = isa_target("avx2")
    ffi = cffi.FFI()
    ffi.cdef(peaks._CDECL)
    lib = ffi.dlopen(str(peaks.peak_library(t)))
    assert lib.peak_chains() == 12 and lib.peak_vec_bytes() == 32
    n = 192
    s, args = gemm_packed(n, n, n, block_cols=16, block_rows=6)
    mod = tvmlite.build(s, args, target=t)
    mod.set_num_threads(1)
    rng = np.random.default_rng(0)
    a, b = (tvmlite.asaligned(rng.uniform(-1, 1, (n, n)), "float32") for _ in range(2))
    c = tvmlite.empty((n, n), "float32")
    mod(a, b, c)
    np.testing.assert_allclose(c, a.astype(np.float64) @ b, rtol=1e-4, atol=1e-4)
    timer = mod.time_evaluator(number=1, repeat=1, min_repeat_ms=40)
    lib.peak_gflops(1, 0.1)  # warm-up
    ratios, fma, gemm = [], [], []
    for _ in range(9):
        fma.append(lib.peak_gflops(1, 0.04))
        gemm.append(2 * n ** 3 / timer(a, b, c).median / 1e9)
        ratios.append(fma[-1] / gemm[-1])
    assert statistics.median(ratios) >= 0.75, (fma, gemm)


def test_a_share_at_most_the_peak_is_a_share_and_above_it_is_read_against_the_bounds():
    assert peaks.share_of_peak(50.0, 200.0, "the peak") == "25.00% of the peak"
    assert peaks.share_of_peak(0.5, 200.0, "the peak") == "0.25% of the peak"
    # the Zen 4 Quickstart: 216.6 on a probe that read 215.2 is a kernel at the peak
    at = Verdict(216.6, 215.2, MIN_NOISE, 700.0, "measured")
    assert at.kind == "at_peak" and at.at_peak
    assert at.text("this CPU's float32 peak") == \
        "at this CPU's float32 peak (216.6 of 215.2 GFLOP/s, measured)"
    assert "MEASUREMENT PROBLEM" not in peaks.share_of_peak(216.6, 215.2, "the peak")
    assert Verdict(210.0, 215.2, MIN_NOISE).kind == "at_peak"    # within the noise below
    assert Verdict(205.0, 215.2, MIN_NOISE).kind == "share"
    # above the probe's noise, below the theoretical peak: the probe read low
    low = Verdict(226.4, 215.2, MIN_NOISE, 700.0)
    assert low.kind == "peak_low" and low.at_peak and "probe read low" in low.text()
    # above the theoretical peak: the only measurement problem
    bad = Verdict(750.0, 215.2, MIN_NOISE, 700.0)
    assert bad.kind == "impossible" and not bad.at_peak
    assert bad.text().startswith("MEASUREMENT PROBLEM") and "700.0" in bad.text()
    # no clock: nothing to check a figure far above the probe against
    unchecked = Verdict(260.0, 215.2, MIN_NOISE, None)
    assert unchecked.kind == "unchecked" and "no clock" in unchecked.text()
    assert Verdict(1.0, 0.0).kind == "unknown"


def test_the_noise_is_the_probes_spread_within_bounds():
    assert run_noise([100.0, 99.5, 99.8]) == MIN_NOISE
    assert run_noise([100.0, 94.0]) == pytest.approx(0.06)
    assert run_noise([100.0, 50.0]) == MAX_NOISE
    # a 6% spread widens "at the peak" to 6% above it
    assert Verdict(105.0, 100.0, run_noise([100.0, 94.0]), 300.0).kind == "at_peak"
    assert Verdict(105.0, 100.0, MIN_NOISE, 300.0).kind == "peak_low"


def test_a_theoretical_peak_below_the_measured_one_bounds_nothing():
    """The clock read is then not the one the CPU ran at (a nominal cpu MHz)."""
    v = Verdict(450.0, 400.0, MIN_NOISE, 330.0)
    assert v.bound is None and v.kind == "unchecked"


def test_the_max_clock_is_cpufreqs_else_cpuinfos_else_unknown(tmp_path):
    for cpu, khz in (("cpu0", "3500000"), ("cpu1", "5100000\n"), ("cpufreq", "9")):
        d = tmp_path / "sys" / cpu / "cpufreq"
        d.mkdir(parents=True)
        (d / "cpuinfo_max_freq").write_text(khz)
    info = tmp_path / "cpuinfo"
    info.write_text("processor\t: 0\ncpu MHz\t\t: 2596.1\nprocessor\t: 1\n"
                    "cpu MHz\t\t: 3100.0\n")
    assert max_clock(tmp_path / "sys", info) == Clock(5.1, True)
    assert max_clock(tmp_path / "none", info) == Clock(3.1, False)
    assert max_clock(tmp_path / "none", tmp_path / "missing") is None
    assert Clock(3.1, False).bound_ghz == pytest.approx(3.1 * NOMINAL_HEADROOM)


def test_the_theoretical_peak_reads_the_target():
    for isa in ("avx2", "avx512"):
        t = isa_target(isa)
        _, pipes = t.fma_latency_pipes
        lanes = t.vector_lanes("float32")
        assert theoretical_gflops(t, "float32", Clock(5.0, True)) == \
            pytest.approx(t.cores * pipes * lanes * 2 * 5.0)
        assert theoretical_gflops(t, "float64", Clock(5.0, True)) == \
            pytest.approx(t.cores * pipes * lanes * 5.0)
        assert theoretical_gflops(t, "float32", None) is None


def fake_probe(monkeypatch, fma, gemm=(), load=0.0):
    """Replace the timed child by these runs; returns the list of its calls."""
    calls = []

    def run(target, threads, seconds, runs, with_gemm):
        calls.append((threads, seconds, runs))
        return list(fma), list(gemm), load
    monkeypatch.setattr(peaks, "_run_child", run)
    return calls


def test_the_peak_is_the_best_of_its_runs(monkeypatch, tmp_path):
    fake_probe(monkeypatch, [200.0, 215.2, 205.0], [190.0, 205.0])
    p = peaks.measure_peak(HOST, cache_file=tmp_path / "peak.json")
    assert p.gflops == p.fma_gflops == 215.2 and p.gemm_gflops == 205.0
    assert p.noise == pytest.approx((215.2 - 200.0) / 215.2)
    assert peaks.cached_peak(HOST, tmp_path / "peak.json") == p


def test_judge_kernel_at_the_peak_leaves_the_cache(monkeypatch, tmp_path):
    cache = tmp_path / "peak.json"
    fake_probe(monkeypatch, [215.0, 215.2, 214.9])
    peaks.measure_peak(HOST, cache_file=cache)
    v = peaks.judge_kernel(216.6, HOST, cache_file=cache, theoretical=700.0)
    assert v.kind == "at_peak" and v.how == "measured"
    assert peaks.cached_peak(HOST, cache).gflops == 215.2
    half = peaks.judge_kernel(108.3, HOST, "float64", cache_file=cache, theoretical=350.0)
    assert half.kind == "at_peak" and half.peak == pytest.approx(107.6)


def test_judge_kernel_above_the_noise_raises_the_cached_peak(monkeypatch, tmp_path):
    cache = tmp_path / "peak.json"
    fake_probe(monkeypatch, [215.2, 214.0])
    peaks.measure_peak(HOST, cache_file=cache)
    v = peaks.judge_kernel(226.4, HOST, cache_file=cache, theoretical=700.0)
    assert v.kind == "peak_low"
    raised = peaks.cached_peak(HOST, cache)
    assert raised.gflops == 226.4 and raised.raised_from == 215.2
    assert any("raised from the probe's 215.2" in n for n in raised.notes())
    # now the kernel is at the (raised) peak, and a float64 figure raises it in fp32 units
    assert peaks.judge_kernel(226.4, HOST, cache_file=cache, theoretical=700.0).kind == \
        "at_peak"
    peaks.judge_kernel(120.0, HOST, "float64", cache_file=cache, theoretical=350.0)
    assert peaks.cached_peak(HOST, cache).gflops == 240.0
    assert peaks.cached_peak(HOST, cache).raised_from == 215.2


def test_judge_kernel_above_the_theoretical_peak_or_unchecked_leaves_the_cache(
        monkeypatch, tmp_path):
    cache = tmp_path / "peak.json"
    fake_probe(monkeypatch, [215.2])
    peaks.measure_peak(HOST, cache_file=cache)
    bad = peaks.judge_kernel(800.0, HOST, cache_file=cache, theoretical=700.0)
    assert bad.kind == "impossible" and "MEASUREMENT PROBLEM" in bad.text()
    unknown = peaks.judge_kernel(300.0, HOST, cache_file=cache, theoretical=None)
    assert unknown.kind == "unchecked"
    assert peaks.cached_peak(HOST, cache).gflops == 215.2


def test_judge_kernel_without_a_peak_uses_the_estimate(monkeypatch, tmp_path):
    calls = fake_probe(monkeypatch, [1.0])
    v = peaks.judge_kernel(10.0, HOST, cache_file=tmp_path / "peak.json", measure=False,
                           theoretical=None)
    assert not calls and v.peak == HOST.peak_gflops_estimate() and "estimated" in v.how


def test_a_cached_peak_under_load_is_measured_again_once(monkeypatch, tmp_path):
    cache = tmp_path / "peak.json"
    loaded = peaks.Peak(150.0, HOST.cores, (150.0, 120.0), 1.0, 150.0, None, 24, 1.0)
    peaks._store(HOST, loaded, cache)
    monkeypatch.setattr(peaks, "busy_cores_now", lambda: 0.0)    # a quiet moment
    # still under load: the higher of the two loaded figures is kept, and not re-measured
    calls = fake_probe(monkeypatch, [140.0], load=1.0)
    assert peaks.cached_peak(HOST, cache) == loaded and len(calls) == 1
    assert peaks.cached_peak(HOST, cache) == loaded and len(calls) == 1
    # a later process (a fresh memo) measures a quiet figure, which replaces it
    monkeypatch.setattr(peaks, "_MEASURED", set())
    calls = fake_probe(monkeypatch, [210.0, 205.0], load=0.0)
    quiet = peaks.cached_peak(HOST, cache)
    assert len(calls) == 1 and quiet.gflops == 210.0 and not quiet.under_load
    assert peaks.cached_peak(HOST, cache) == quiet and len(calls) == 1
    # a process that measured the peak itself does not measure it again on reading it
    monkeypatch.setattr(peaks, "_MEASURED", set())
    calls = fake_probe(monkeypatch, [100.0], load=2.0)
    other = tmp_path / "other.json"
    peaks.measure_peak(HOST, cache_file=other)
    assert peaks.cached_peak(HOST, other).under_load and len(calls) == 1
    assert peaks.cached_peak(HOST, cache, remeasure=False) == quiet


def test_a_cached_peak_under_load_stays_while_the_machine_is_busy(monkeypatch, tmp_path):
    cache = tmp_path / "peak.json"
    loaded = peaks.Peak(150.0, HOST.cores, (150.0, 120.0), 1.0, 150.0, None, 24, 1.0)
    peaks._store(HOST, loaded, cache)
    monkeypatch.setattr(peaks, "busy_cores_now", lambda: 1.5)    # a suite's other workers
    calls = fake_probe(monkeypatch, [210.0], load=0.0)
    assert peaks.cached_peak(HOST, cache) == loaded and not calls
    monkeypatch.setattr(peaks, "_MEASURED", set())             # a later, quiet process
    monkeypatch.setattr(peaks, "busy_cores_now", lambda: 0.0)
    assert peaks.cached_peak(HOST, cache).gflops == 210.0 and len(calls) == 1


def test_busy_cores_now_sees_a_spinning_process():
    hog = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        time.sleep(0.2)
        busy = peaks.busy_cores_now(0.3)
    finally:
        hog.kill()
        hog.wait()
    assert busy is None or busy >= 0.5


def test_a_peak_under_load_is_marked_and_does_not_replace_a_quiet_one(tmp_path):
    cache = tmp_path / "peak.json"
    quiet = peaks.Peak(150.0, HOST.cores, (150.0,), 1.0, 150.0, 140.0, 24, 0.0)
    peaks._store(HOST, quiet, cache)
    assert peaks.cached_peak(HOST, cache) == quiet and not quiet.notes()
    # a real competing process keeps a core busy while the peak is measured
    hog = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        loaded = peaks.measure_peak(HOST, seconds=0.1, runs=3, cache_file=cache)
    finally:
        hog.kill()
        hog.wait()
    assert loaded.load is not None and loaded.under_load
    assert any("measured under load" in n for n in loaded.notes())
    assert loaded.gemm_gflops is not None and loaded.gflops == max(loaded.fma_gflops,
                                                                 loaded.gemm_gflops)
    assert peaks.cached_peak(HOST, cache) == quiet    # the quiet peak stays
    cache.unlink()
    peaks._store(HOST, loaded, cache)                 # alone, it is cached with its mark
    again = peaks.cached_peak(HOST, cache, remeasure=False)
    assert again.under_load and json.loads(cache.read_text())[HOST.key()]["under_load"]


def test_a_peak_of_the_old_spilling_loop_is_not_trusted(tmp_path):
    cache = tmp_path / "peak.json"
    cache.write_text(json.dumps({HOST.key(): {"gflops": 114.0, "threads": 2, "runs": [114.0],
                                              "measured_at": 1.0}}))
    assert peaks.cached_peak(HOST, cache) is None


def test_notes_flag_a_loop_below_the_gemm():
    p = peaks.Peak(172.0, 2, (114.0,), 1.0, 114.0, 172.0, 16, 0.0)
    assert p.fma_below_gemm and "read below a real GEMM" in p.notes()[0]
