"""scope: what the ONNX import claims, and the reason a model falls outside it."""
from __future__ import annotations

import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto as TP  # noqa: E402
from onnx import helper as oh  # noqa: E402

from tvmlite.frontend import scope  # noqa: E402
from tvmlite.frontend.converters import CONVERTERS  # noqa: E402


def _model(op, dtype=TP.FLOAT, opset=17, **attrs):
    g = oh.make_graph([oh.make_node(op, ["x"], ["y"], **attrs)], "m",
                      [oh.make_tensor_value_info("x", dtype, (2,))],
                      [oh.make_tensor_value_info("y", dtype, (2,))])
    return oh.make_model(g, opset_imports=[oh.make_opsetid("", opset)])


def test_every_listed_op_is_converted():
    assert scope.LISTED_OPS - set(CONVERTERS) == {"Constant"}   # Constant: the importer's


def test_reasons_name_the_op_the_opset_and_the_dtype():
    assert scope.out_of_scope(_model("Relu")) is None
    assert "op Selu" in scope.out_of_scope(_model("Selu"))
    assert not scope.uses_only_listed(_model("Selu"))
    assert scope.out_of_scope(_model("Relu", opset=22)).startswith("opset 22")
    assert scope.out_of_scope(_model("Relu", TP.FLOAT16)).startswith("dtype float16")
    assert scope.out_of_scope(_model("Cast", to=TP.UINT8)).startswith("dtype uint8")
    assert scope.model_ops(_model("Relu")) == {"Relu"}
    assert scope.model_opset(_model("Relu", opset=13)) == 13
