"""from_onnx: conversion of small onnx.helper models, and its errors on bad input."""
from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto as TP  # noqa: E402
from onnx import helper as oh  # noqa: E402
from onnx import numpy_helper as nh  # noqa: E402

from tvmlite.frontend import OnnxImportError, UnsupportedOpsError, from_onnx  # noqa: E402
from tvmlite.graph import GraphError  # noqa: E402


def model(nodes, inputs, outputs, inits=(), opset=17):
    g = oh.make_graph(nodes, "m", [oh.make_tensor_value_info(n, TP.FLOAT, s) for n, s in inputs],
                      [oh.make_tensor_value_info(o, TP.FLOAT, None) for o in outputs],
                      [nh.from_array(np.asarray(v), k) for k, v in inits])
    m = oh.make_model(g, opset_imports=[oh.make_opsetid("", opset)])
    m.ir_version = 8
    return m


def test_imports_nodes_types_and_constants():
    w = np.ones((4, 3), np.float32)
    g = from_onnx(model([oh.make_node("MatMul", ["x", "w"], ["y"]),
                         oh.make_node("Relu", ["y"], ["z"])], [("x", (2, 4))], ["z"],
                        [("w", w)]))
    assert [n.op for n in g.nodes] == ["matmul", "relu"]
    assert g.types["z"].shape == (2, 3) and g.inputs == ("x",) and g.outputs == ("z",)
    assert np.array_equal(g.constants["w"], w)
    assert "matmul(x, w) -> y: float32[2, 3]" in str(g)


def test_shape_arithmetic_is_folded_into_the_reshape():
    nodes = [oh.make_node("Shape", ["x"], ["s"]),
             oh.make_node("Gather", ["s", "i0"], ["n"], axis=0),
             oh.make_node("Unsqueeze", ["n", "ax"], ["n1"]),
             oh.make_node("Concat", ["n1", "m1"], ["shape"], axis=0),
             oh.make_node("Reshape", ["x", "shape"], ["y"]),
             oh.make_node("ConstantOfShape", ["cs"], ["c"],
                          value=nh.from_array(np.array([2.0], np.float32))),
             oh.make_node("Mul", ["y", "c"], ["z"])]
    g = from_onnx(model(nodes, [("x", (2, 3, 4))], ["z"],
                        [("i0", np.array(0, np.int64)), ("ax", np.array([0], np.int64)),
                         ("m1", np.array([-1], np.int64)), ("cs", np.array([1, 12], np.int64))]))
    assert [n.op for n in g.nodes] == ["reshape", "mul"]
    assert g.types["z"].shape == (2, 12)


def test_clip_by_opset():
    old = from_onnx(model([oh.make_node("Clip", ["x"], ["y"], min=0.0, max=6.0)],
                          [("x", (3,))], ["y"], opset=9))
    new = from_onnx(model([oh.make_node("Clip", ["x", "lo", "hi"], ["y"])], [("x", (3,))],
                          ["y"], [("lo", np.float32(0)), ("hi", np.float32(6))], opset=13))
    assert old.nodes[0].attrs == new.nodes[0].attrs == (("max", 6.0), ("min", 0.0))


def test_unsupported_ops_are_all_named_with_count_and_first_node():
    nodes = [oh.make_node("Foo", ["x"], ["a"], name="f1"), oh.make_node("Foo", ["a"], ["b"]),
             oh.make_node("Bar", ["b"], ["c"], name="b1"), oh.make_node("Relu", ["c"], ["d"])]
    with pytest.raises(UnsupportedOpsError) as err:
        from_onnx(model(nodes, [("x", (2,))], ["d"]))
    msg = str(err.value)
    assert "2 unsupported op type(s)" in msg and "Foo (x2, first node 'f1')" in msg
    assert "Bar (x1, first node 'b1')" in msg


def test_symbolic_dimension_needs_a_shape_and_the_error_names_it():
    m = model([oh.make_node("Relu", ["x"], ["y"])], [("x", ("batch", 3))], ["y"])
    with pytest.raises(OnnxImportError, match="symbolic dimension 'batch'"):
        from_onnx(m)
    assert from_onnx(m, shapes={"x": (5, 3)}).types["y"].shape == (5, 3)
    with pytest.raises(OnnxImportError, match="not inputs"):
        from_onnx(m, shapes={"nope": (1,)})
    with pytest.raises(OnnxImportError, match="2 dimensions .*declares 3"):
        from_onnx(model([oh.make_node("Relu", ["x"], ["y"])], [("x", ("b", 3, 4))], ["y"]),
                  shapes={"x": (1, 3)})
    with pytest.raises(OnnxImportError, match="size 4 on axis 1, which the model fixes at 3"):
        from_onnx(m, shapes={"x": (5, 4)})


def test_truncated_and_foreign_files(tmp_path):
    m = model([oh.make_node("Relu", ["x"], ["y"])], [("x", (3,))], ["y"])
    data = m.SerializeToString()
    (tmp_path / "cut.onnx").write_bytes(data[: len(data) // 2])
    (tmp_path / "text.onnx").write_text("this is not a model\n" * 10)
    for name in ("cut.onnx", "text.onnx"):
        with pytest.raises(OnnxImportError):
            from_onnx(tmp_path / name)
    with pytest.raises(OnnxImportError, match="no model file"):
        from_onnx(tmp_path / "missing.onnx")


def _external_model(tmp_path, location):
    m = model([oh.make_node("Add", ["x", "w"], ["y"])], [("x", (4,))], ["y"],
              [("w", np.arange(4, dtype=np.float32))])
    t = m.graph.initializer[0]
    t.ClearField("float_data")
    t.ClearField("raw_data")
    t.data_location = TP.EXTERNAL
    for k, v in (("location", location), ("offset", "0"), ("length", "16")):
        e = t.external_data.add()
        e.key, e.value = k, v
    path = tmp_path / "model" / "m.onnx"
    path.parent.mkdir()
    path.write_bytes(m.SerializeToString())
    return path


def test_external_data_outside_the_folder_is_refused_unread(tmp_path):
    secret = tmp_path / "secret.bin"
    secret.write_bytes(np.arange(4, dtype=np.float32).tobytes())
    path = _external_model(tmp_path, "../secret.bin")
    with pytest.raises(OnnxImportError, match="outside the model's folder"):
        from_onnx(path)
    (tmp_path / "abs").mkdir()
    with pytest.raises(OnnxImportError, match="outside the model's folder"):
        from_onnx(_external_model(tmp_path / "abs", str(secret)))


def test_external_data_inside_the_folder_is_read_and_missing_is_named(tmp_path):
    path = _external_model(tmp_path, "w.bin")
    with pytest.raises(OnnxImportError, match="does not exist"):
        from_onnx(path)
    (path.parent / "w.bin").write_bytes(np.arange(4, dtype=np.float32).tobytes())
    assert np.array_equal(from_onnx(path).constants["w"], np.arange(4, dtype=np.float32))


def test_cycle_and_no_outputs():
    cyc = model([oh.make_node("Relu", ["b"], ["a"]), oh.make_node("Relu", ["a"], ["b"])],
                [("x", (2,))], ["b"])
    with pytest.raises(GraphError, match="cycle"):
        from_onnx(cyc)
    none = model([oh.make_node("Relu", ["x"], ["y"])], [("x", (2,))], [])
    with pytest.raises(OnnxImportError, match="outputs"):
        from_onnx(none)


def test_a_window_larger_than_its_padded_input_is_refused_by_name():
    # ONNX leaves it undefined (onnxruntime returns one element): not a silent empty output
    pool = model([oh.make_node("MaxPool", ["x"], ["y"], kernel_shape=[2, 2], strides=[2, 2],
                               name="p")], [("x", (1, 2, 4, 1))], ["y"])
    with pytest.raises(GraphError, match=r"'p'.*window 2 is larger than its padded input 1"):
        from_onnx(pool)
    conv = model([oh.make_node("Conv", ["x", "w"], ["y"], name="c")], [("x", (1, 2, 2, 2))],
                 ["y"], inits=[("w", np.ones((4, 2, 3, 3), np.float32))])
    with pytest.raises(GraphError, match=r"'c'.*window 3"):
        from_onnx(conv)


def test_empty_values_are_constants_computed_at_import():
    m = model([oh.make_node("ReduceSum", ["x"], ["y"], keepdims=1),
               oh.make_node("Relu", ["x"], ["z"])], [("x", ("n", 0, 4))], ["y", "z"], opset=11)
    g = from_onnx(m, shapes={"x": (2, 0, 4)})
    assert g.nodes == () and g.inputs == ("x",)
    assert np.array_equal(g.constants["y"], np.zeros((1, 1, 1), np.float32))
    assert g.constants["z"].shape == (2, 0, 4)
