"""tvmlite compile / tvmlite run: a small ONNX model compiled to a library and run on
.npy inputs, outputs equal onnxruntime's; bad inputs are named."""
from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto as TP  # noqa: E402
from onnx import helper as oh  # noqa: E402
from onnx import numpy_helper as nh  # noqa: E402

from tvmlite.cli.commands import main  # noqa: E402


def _model_file(tmp_path):
    rng = np.random.default_rng(3)
    nodes = [oh.make_node("Conv", ["data", "W"], ["c"], pads=[1, 1, 1, 1]),
             oh.make_node("Relu", ["c"], ["r"]), oh.make_node("Flatten", ["r"], ["f"]),
             oh.make_node("Gemm", ["f", "FW"], ["logits"], transB=1)]
    g = oh.make_graph(nodes, "tiny",
                      [oh.make_tensor_value_info("data", TP.FLOAT, ("N", 2, 4, 4))],
                      [oh.make_tensor_value_info("logits", TP.FLOAT, None)],
                      [nh.from_array(rng.standard_normal((3, 2, 3, 3)).astype(np.float32), "W"),
                       nh.from_array(rng.standard_normal((5, 48)).astype(np.float32), "FW")])
    m = oh.make_model(g, opset_imports=[oh.make_opsetid("", 13)])
    m.ir_version = 8
    path = tmp_path / "tiny.onnx"
    onnx.save(m, str(path))
    return path, m


def test_compile_and_run(tmp_path, capsys):
    path, m = _model_file(tmp_path)
    out = tmp_path / "lib"
    assert main(["compile", str(path), "--out", str(out)]) == 1      # symbolic N: named
    assert "symbolic dimension 'N'" in capsys.readouterr().err
    assert main(["compile", str(path), "--shape", "data=1,2,4,4", "--out", str(out),
                 "--name", "tiny"]) == 0
    assert "fused kernels" in capsys.readouterr().out
    x = np.random.default_rng(4).standard_normal((1, 2, 4, 4)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    res = tmp_path / "out.npz"
    assert main(["run", str(out), "--input", f"data={tmp_path / 'x.npy'}", "--output",
                 str(res), "--repeat", "3", "--profile"]) == 0
    printed = capsys.readouterr().out
    assert "median" in printed and "k0_conv" in printed
    ref = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]
                               ).run(None, {"data": x})[0]
    got = np.load(res)["logits"]
    assert np.abs(got - ref).max() <= 1e-3 * np.abs(ref).max() + 1e-4
    np.save(tmp_path / "bad.npy", x.astype(np.float64))
    assert main(["run", str(out), "--input", f"data={tmp_path / 'bad.npy'}"]) == 1
    assert "input 'data' has dtype float64" in capsys.readouterr().err
    assert main(["run", str(out), "--input", f"img={tmp_path / 'x.npy'}"]) == 1
    assert "'img' is not an input" in capsys.readouterr().err
    assert main(["run", str(tmp_path)]) == 1
    assert "no manifest.json" in capsys.readouterr().err
