"""The measured peak: the FMA loop fits the target's register file (no spill in its object
code on AVX2 or AVX-512), is checked against a GEMM timed in the same run, a peak
measured under load is marked and never replaces a quiet one, and a share above 100% of
the peak is reported as a measurement problem."""
from __future__ import annotations

import dataclasses
import json
import re
import shutil
import statistics
import subprocess
import sys

import cffi
import numpy as np
import pytest

import tvmlite
from tvmlite.schedules.recipes import gemm_packed
from tvmlite.target import peak as peaks
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


def test_a_share_above_100_percent_is_a_measurement_problem():
    assert peaks.share_of_peak(50.0, 200.0, "the peak") == "25.00% of the peak"
    text = peaks.share_of_peak(120.0, 114.0, "this CPU's float32 peak")
    assert "MEASUREMENT PROBLEM" in text and "%" not in text


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
    again = peaks.cached_peak(HOST, cache)
    assert again.under_load and json.loads(cache.read_text())[HOST.key()]["under_load"]


def test_a_peak_of_the_old_spilling_loop_is_not_trusted(tmp_path):
    cache = tmp_path / "peak.json"
    cache.write_text(json.dumps({HOST.key(): {"gflops": 114.0, "threads": 2, "runs": [114.0],
                                              "measured_at": 1.0}}))
    assert peaks.cached_peak(HOST, cache) is None


def test_notes_flag_a_loop_below_the_gemm():
    p = peaks.Peak(172.0, 2, (114.0,), 1.0, 114.0, 172.0, 16, 0.0)
    assert p.fma_below_gemm and "read below a real GEMM" in p.notes()[0]
