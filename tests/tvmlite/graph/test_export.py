"""export_library: the model library built, called from a C main, compared with
onnxruntime; the weights checksum refuses a corrupt file; the arena shares memory."""
from __future__ import annotations

import json
import subprocess

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto as TP  # noqa: E402
from onnx import helper as oh  # noqa: E402
from onnx import numpy_helper as nh  # noqa: E402

import tvmlite  # noqa: E402
from tvmlite.codegen_c.model import checksum64, plan_arena  # noqa: E402
from tvmlite.frontend import from_onnx  # noqa: E402

RNG = np.random.default_rng(1)

MAIN = r"""
#include <stdio.h>
#include <stdlib.h>
#include "net.h"
int main(int argc, char **argv) {
  static float x[1 * 3 * 6 * 6], y[4], r[1 * 4 * 6 * 6];
  FILE *f = fopen(argv[2], "rb");
  if (fread(x, sizeof x, 1, f) != 1) return 10;
  fclose(f);
  if (net_init(argv[1])) { printf("init: %s\n", net_last_error()); return 1; }
  net_set_num_threads(2);
  if (net_run(x, y, r)) { printf("run: %s\n", net_last_error()); return 2; }
  f = fopen(argv[3], "wb");
  fwrite(y, sizeof y, 1, f); fwrite(r, sizeof r, 1, f);
  fclose(f);
  net_free();
  return 0;
}
"""


def _model():
    def w(*s):
        return RNG.standard_normal(s).astype(np.float32)
    nodes = [oh.make_node("Conv", ["x", "W", "B"], ["c"], pads=[1, 1, 1, 1]),
             oh.make_node("Relu", ["c"], ["r"]),
             oh.make_node("Conv", ["r", "W2"], ["c2"], pads=[1, 1, 1, 1]),
             oh.make_node("Add", ["c2", "r"], ["s"]),
             oh.make_node("Conv", ["s", "W3"], ["c3"]),
             oh.make_node("GlobalAveragePool", ["c3"], ["y"])]
    g = oh.make_graph(nodes, "net", [oh.make_tensor_value_info("x", TP.FLOAT, (1, 3, 6, 6))],
                      [oh.make_tensor_value_info(o, TP.FLOAT, None) for o in ("y", "r")],
                      [nh.from_array(v, k) for k, v in (("W", w(4, 3, 3, 3)), ("B", w(4)),
                                                        ("W2", w(4, 4, 3, 3)),
                                                        ("W3", w(4, 4, 1, 1)))])
    m = oh.make_model(g, opset_imports=[oh.make_opsetid("", 17)])
    m.ir_version = 8
    return m


def test_c_main_against_onnxruntime(tmp_path):
    m = _model()
    mod = tvmlite.build(from_onnx(m))
    out = tmp_path / "lib"
    lib = mod.export_library(out, name="net")
    assert lib == out / "libnet.so"
    for f in ("net.h", "net.c", "net.weights", "manifest.json", "kernel_0.c"):
        assert (out / f).is_file()
    manifest = json.loads((out / "manifest.json").read_text())
    assert [i["name"] for i in manifest["inputs"]] == ["x"]
    assert [o["shape"] for o in manifest["outputs"]] == [[1, 4, 1, 1], [1, 4, 6, 6]]
    assert all(k["record"] is None for k in manifest["kernels"])
    assert manifest["arena"]["bytes"] <= manifest["arena"]["intermediates_bytes"]
    (tmp_path / "main.c").write_text(MAIN)
    exe = tmp_path / "main"
    cc = mod.target.compiler
    subprocess.run([cc, "-O1", str(tmp_path / "main.c"), f"-I{out}", f"-L{out}", "-lnet",
                    f"-Wl,-rpath,{out}", "-o", str(exe)], check=True)
    x = RNG.standard_normal((1, 3, 6, 6)).astype(np.float32)
    x.tofile(tmp_path / "x.bin")
    proc = subprocess.run([str(exe), str(out / "net.weights"), str(tmp_path / "x.bin"),
                           str(tmp_path / "out.bin")], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout
    got = np.fromfile(tmp_path / "out.bin", np.float32)
    ref = ort.InferenceSession(m.SerializeToString(),
                               providers=["CPUExecutionProvider"]).run(None, {"x": x})
    want = np.concatenate([r.reshape(-1) for r in ref])
    assert np.abs(got - want).max() <= 1e-3 * np.abs(want).max() + 1e-4
    # a flipped byte in the weights: _init refuses it and says why
    blob = bytearray((out / "net.weights").read_bytes())
    blob[-70] ^= 0xFF
    (tmp_path / "bad.weights").write_bytes(bytes(blob))
    proc = subprocess.run([str(exe), str(tmp_path / "bad.weights"), str(tmp_path / "x.bin"),
                           str(tmp_path / "out.bin")], capture_output=True, text=True)
    assert proc.returncode == 1 and "checksum mismatch" in proc.stdout
    proc = subprocess.run([str(exe), str(tmp_path / "none.weights"), str(tmp_path / "x.bin"),
                           str(tmp_path / "out.bin")], capture_output=True, text=True)
    assert proc.returncode == 1 and "cannot open" in proc.stdout


def test_arena_shares_memory_between_disjoint_lifetimes():
    sizes = {"a": 100, "b": 100, "c": 100}
    arena = plan_arena(sizes, {"a": (0, 1), "b": (1, 2), "c": (2, 3)})
    assert arena.offsets["a"] == arena.offsets["c"] != arena.offsets["b"]
    assert arena.size == 2 * 128 and arena.total == 3 * 128


def test_checksum_sees_order():
    a = np.arange(16, dtype=np.uint64).tobytes()
    b = np.arange(16, dtype=np.uint64)[::-1].copy().tobytes()
    assert checksum64(a) != checksum64(b)


def test_aarch64_library_under_qemu(tmp_path):
    import shutil

    from tvmlite.codegen_c.harness import emulator_prefix
    from tvmlite.target.target import Target
    try:
        target = Target.from_name("aarch64-neon")
        prefix = emulator_prefix("aarch64")
    except tvmlite.TvmliteError as err:
        pytest.skip(f"no AArch64 toolchain or qemu: {err}")
    if shutil.which(target.compiler) is None:
        pytest.skip("no AArch64 cross compiler")
    m = _model()
    mod = tvmlite.build(from_onnx(m), target=target)
    with pytest.raises(tvmlite.TvmliteError, match="cannot run"):
        mod.run({"x": np.zeros((1, 3, 6, 6), np.float32)})
    out = tmp_path / "arm"
    mod.export_library(out, name="net")
    (tmp_path / "main.c").write_text(MAIN)
    exe = tmp_path / "main"
    subprocess.run([target.compiler, "-O1", str(tmp_path / "main.c"), f"-I{out}", f"-L{out}",
                    "-lnet", f"-Wl,-rpath,{out}", "-o", str(exe)], check=True)
    x = RNG.standard_normal((1, 3, 6, 6)).astype(np.float32)
    x.tofile(tmp_path / "x.bin")
    proc = subprocess.run(prefix + [str(exe), str(out / "net.weights"), str(tmp_path / "x.bin"),
                                    str(tmp_path / "out.bin")], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    got = np.fromfile(tmp_path / "out.bin", np.float32)
    ref = ort.InferenceSession(m.SerializeToString(),
                               providers=["CPUExecutionProvider"]).run(None, {"x": x})
    want = np.concatenate([r.reshape(-1) for r in ref])
    assert np.abs(got - want).max() <= 1e-3 * np.abs(want).max() + 1e-4


def test_prepacked_weights_are_packed_once_in_init(tmp_path):
    import re

    from tvmlite import te
    from tvmlite.graph.dispatch import use_lookup
    from tvmlite.schedule.prepack import declare_constants

    def packing(key, tensors, target):   # a "record" that reads every conv weight packed
        weights = [t.name for t in tensors[:-1] if re.fullmatch(r"in\d+_W\d*(_hwio)?", t.name)]
        s = te.create_schedule(tensors[-1].op)
        return (declare_constants(s, weights), {"test": "packed"}) if weights else None
    m = _model()
    with use_lookup(packing):
        mod = tvmlite.build(from_onnx(m))
    assert sum(len(k.code.packs) for k in mod.kernels) == 3
    x = RNG.standard_normal((1, 3, 6, 6)).astype(np.float32)
    ref = ort.InferenceSession(m.SerializeToString(),
                               providers=["CPUExecutionProvider"]).run(None, {"x": x})
    for a, b in zip(mod.run({"x": x}), ref):
        assert np.abs(a - b).max() <= 1e-3 * np.abs(b).max() + 1e-4
    out = tmp_path / "lib"
    mod.export_library(out, name="net")
    assert "net_init" in (out / "net.c").read_text() and "_pack_" in (out / "net.c").read_text()
    from tvmlite.graph.library import LibraryError, ModelLibrary
    lib = ModelLibrary(out)
    # profiled inside runs, on the packed weights: each kernel as the run reaches it and
    # hot (called again first), and the run's outputs unchanged by it
    for hot in (False, True):
        prof = lib.profile({"x": x}, repeat=2, hot=hot)
        assert [n for n, _ in prof] == [k["name"] for k in lib.manifest["kernels"]]
        # a tiny kernel can take less than a coarse clock's tick: none negative, the run not 0
        assert all(t >= 0 for _, t in prof) and sum(t for _, t in prof) > 0
    for a, b in zip(lib.run({"x": x}), ref):
        assert np.abs(a - b).max() <= 1e-3 * np.abs(b).max() + 1e-4
    with pytest.raises(ValueError, match="at least 1"):
        lib.profile({"x": x}, repeat=0)
    header = out / "net.h"   # a library exported before _profile existed
    header.write_text("\n".join(ln for ln in header.read_text().splitlines()
                                if "net_profile" not in ln))
    with pytest.raises(LibraryError, match="export the model again"):
        ModelLibrary(out).profile({"x": x})


def test_identical_kernels_share_one_function_and_each_packs_its_own_weights(tmp_path):
    """Two identical conv kernels (different weights, named differently) share one
    compiled function whose default schedule pre-packs the weight: each call's pack in
    ``_init`` finds its own weight, by position."""
    from tvmlite.graph.library import ModelLibrary
    names = ("Wa", "Wb", "Wc_other_name")    # the first conv also reads the input's transpose
    p = {"pads": [1, 1, 1, 1]}
    nodes = [oh.make_node("Conv", ["x", "Wa"], ["a"], **p), oh.make_node("Relu", ["a"], ["ra"]),
             oh.make_node("Conv", ["ra", "Wb"], ["b"], **p), oh.make_node("Relu", ["b"], ["rb"]),
             oh.make_node("Conv", ["rb", "Wc_other_name"], ["c"], **p),
             oh.make_node("Relu", ["c"], ["y"])]
    g = oh.make_graph(nodes, "twins", [oh.make_tensor_value_info("x", TP.FLOAT, (1, 32, 14, 14))],
                      [oh.make_tensor_value_info("y", TP.FLOAT, None)],
                      [nh.from_array(RNG.standard_normal((32, 32, 3, 3)).astype(np.float32), n)
                       for n in names])
    m = oh.make_model(g, opset_imports=[oh.make_opsetid("", 17)])
    m.ir_version = 8
    mod = tvmlite.build(from_onnx(m))
    convs = [k for k in mod.kernels if k.compute.blas][1:]
    assert len(convs) == 2 and convs[0].key == convs[1].key and convs[0].code.packs
    x = RNG.standard_normal((1, 32, 14, 14)).astype(np.float32)
    ref = ort.InferenceSession(m.SerializeToString(),
                               providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    mod.export_library(tmp_path / "lib", name="twins")
    got = ModelLibrary(tmp_path / "lib").run({"x": x})[0]
    assert np.abs(got - ref).max() <= 1e-3 * np.abs(ref).max() + 1e-4
