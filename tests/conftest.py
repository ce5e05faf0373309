"""Fixtures shared across the test tree: results that cost a tuning or a build, made once
per session and copied (never modified) by the modules that use them."""
from __future__ import annotations

from pathlib import Path

import pytest

from tvmlite import cli
from tvmlite.target import bandwidth, peak
from tvmlite.target.target import Target

TUNED_MATMUL_ARGS = ["matmul", "M=16", "N=16", "K=16", "--trials", "4", "--population", "8"]
"""The tiny template-free tuning the CLI tests read: matmul 16^3, 4 trials."""


def store_known_peak_and_bandwidth(root: Path) -> tuple[Path, Path]:
    """Write a peak of 300 GFLOP/s and fixed cache bandwidths for this host into ``root``
    (peak.json, bw.json), so that a tuning's summary or an explanation reads known numbers
    and no test measures them or writes the user's caches. Returns the two paths."""
    target = Target.host()
    peak_file, bw_file = root / "peak.json", root / "bw.json"
    peak._store(target, peak.Peak(300.0, target.cores, (300.0,), 0.0), peak_file)
    bandwidth._store(target, bandwidth.Bandwidth(
        (("L1d", 1, 500.0), ("L2", 1, 200.0), ("L3", 1, 50.0), ("memory", 1, 20.0)),
        target.cores, 0.0), bw_file)
    return peak_file, bw_file


@pytest.fixture(scope="session")
def known_peak_and_bandwidth():
    """``store_known_peak_and_bandwidth``, for modules that redirect the caches themselves
    (a fixture: test modules cannot import this conftest under --import-mode=importlib)."""
    return store_known_peak_and_bandwidth


@pytest.fixture(scope="session")
def tuned_matmul_log(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The log of ``tvmlite tune`` with TUNED_MATMUL_ARGS (one thread, known peak and
    bandwidth caches), run once for every module that reads it. Copy it before appending:
    other modules read the same file."""
    root = tmp_path_factory.mktemp("tuned_matmul")
    peak_file, bw_file = store_known_peak_and_bandwidth(root)
    log = root / "mm.jsonl"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("OMP_NUM_THREADS", "1")
        mp.setattr(peak, "default_cache_file", lambda: peak_file)
        mp.setattr(bandwidth, "default_cache_file", lambda: bw_file)
        code = cli.main(["tune", *TUNED_MATMUL_ARGS, "--log", str(log), "--quiet"])
    assert code == 0
    return log


@pytest.fixture
def symbolic_model(tmp_path: Path) -> Path:
    """A tiny ONNX model over a range of L, written into tmp_path: x (N, L, 16) @ W ->
    relu (a dynamic task over L) and z (N, 16) -> gemm (static); N is fixed to 1 by
    --shape, L made a range (``--shape x=1,1..4,16 --shape z=1,16``)."""
    onnx = pytest.importorskip("onnx")
    import numpy as np
    from onnx import TensorProto
    from onnx import helper as oh
    from onnx import numpy_helper as nh
    rng = np.random.default_rng(3)
    value = oh.make_tensor_value_info
    graph = oh.make_graph(
        [oh.make_node("MatMul", ["x", "W"], ["m"]), oh.make_node("Relu", ["m"], ["y"]),
         oh.make_node("Gemm", ["z", "FW"], ["w"], transB=1)], "sym",
        [value(n, TensorProto.FLOAT, s) for n, s in (("x", ("N", "L", 16)), ("z", ("N", 16)))],
        [value(n, TensorProto.FLOAT, None) for n in ("y", "w")],
        [nh.from_array(rng.standard_normal(s).astype(np.float32), n)
         for n, s in (("W", (16, 8)), ("FW", (4, 16)))])
    path = tmp_path / "sym.onnx"
    onnx.save(oh.make_model(graph, opset_imports=[oh.make_opsetid("", 13)], ir_version=8),
              str(path))
    return path
