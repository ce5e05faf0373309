"""``tvmlite compile --precision``: the bf16 build's error line, a bad value, a symbolic
model refused with the reason."""
from __future__ import annotations

import re

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto as TP  # noqa: E402
from onnx import helper as oh  # noqa: E402
from onnx import numpy_helper as nh  # noqa: E402

from tvmlite.cli.commands import main  # noqa: E402
from tvmlite.target.intrinsics import best_intrinsic  # noqa: E402
from tvmlite.target.target import Target  # noqa: E402


def tiny_model(tmp_path):
    rng = np.random.default_rng(2)
    nodes = [oh.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
             oh.make_node("Relu", ["c"], ["r"]), oh.make_node("Flatten", ["r"], ["f"]),
             oh.make_node("Gemm", ["f", "fw"], ["y"], transB=1)]
    g = oh.make_graph(nodes, "tiny", [oh.make_tensor_value_info("x", TP.FLOAT, [1, 8, 4, 4])],
                      [oh.make_tensor_value_info("y", TP.FLOAT, [1, 5])],
                      [nh.from_array(rng.standard_normal((16, 8, 3, 3)).astype(np.float32)
                                     * 0.2, "w"),
                       nh.from_array(rng.standard_normal((5, 256)).astype(np.float32) * 0.05,
                                     "fw")])
    m = oh.make_model(g, opset_imports=[oh.make_opsetid("", 13)])
    m.ir_version = 8
    path = tmp_path / "tiny.onnx"
    onnx.save(m, str(path))
    return path, m


def test_compile_bf16_reports_its_error_against_fp32(tmp_path, capsys):
    path, _ = tiny_model(tmp_path)
    assert main(["compile", str(path), "--precision", "bf16", "--layout", "nhwc",
                 "--out", str(tmp_path / "lib")]) == 0
    out = capsys.readouterr().out
    m = re.search(r"error: +bf16 against the fp32 build .*max abs (\S+), relative (\S+) ", out)
    assert m, out
    assert 0 < float(m.group(1).rstrip(",")) and 0 < float(m.group(2)) < 3e-2
    assert (tmp_path / "lib" / "libmodel.so").exists()
    assert main(["compile", str(path), "--layout", "nhwc", "--out", str(tmp_path / "f")]) == 0
    assert "error:" not in capsys.readouterr().out      # fp32: nothing to compare


def test_bf16_on_a_target_without_bf16_dot_products_says_what_it_costs(tmp_path, capsys):
    """Zen 3 (AVX2) has no bf16 arithmetic: a bf16 build there only stores bf16, and the
    summary says so; a host with AVX512-BF16 is not told."""
    path, _ = tiny_model(tmp_path)
    host = Target.host()
    cases = [("host", best_intrinsic(host.arch, host.features, "bfloat16", "bfloat16",
                                     "float32") is None)]
    if host.arch == "x86_64" and "avx2" in host.features:
        cases.append(("x86_64-avx2", True))
    for target, told in cases:
        assert main(["compile", str(path), "--precision", "bf16", "--layout", "nhwc",
                     "--target", target, "--out", str(tmp_path / target)]) == 0
        out = capsys.readouterr().out
        assert ("has no bf16 dot product" in out) == told, out


def test_a_bad_precision_is_a_usage_error(tmp_path, capsys):
    path, _ = tiny_model(tmp_path)
    assert main(["compile", str(path), "--precision", "fp16", "--out", str(tmp_path)]) == 2
    assert "invalid choice: 'fp16' (choose from 'fp32', 'bf16')" in capsys.readouterr().err
