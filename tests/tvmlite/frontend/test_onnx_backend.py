"""onnx's own backend test suite against tvmlite: its pytorch-converted and
pytorch-operator model tests (the nine light zoo models are run with random weights by
tests/tvmlite/graph/test_build.py and bench/models.py: their stored outputs come from
constant weights).

Excluded, as expected failures, are the tests of ops outside the issue's list; the
tests of listed ops that fail are named in ``FAILING`` with the reason."""
from __future__ import annotations

import warnings

import pytest

pytest.importorskip("onnx")
import onnx.backend.test  # noqa: E402

from tvmlite.frontend import onnx_backend  # noqa: E402

OUTSIDE_THE_LIST = ["ConstantPad", "ReflectionPad", "ReplicationPad", "ZeroPad",
                    "operator_pad", "PReLU", "GLU", "operator_chunk", "ConvTranspose",
                    "operator_convtranspose", "SELU", "operator_selu", "ELU", "LogSoftmax",
                    "log_softmax", "Softplus", "operator_repeat", "operator_symbolic_override"]
FAILING = {   # listed ops, not supported in every form yet
    "Conv3d": "3-D convolutions: only 1-D (as 2-D) and 2-D windows are converted",
    "MaxPool3d": "3-D pools", "AvgPool3d": "3-D pools",
    "MaxPool1d_stride_padding_dilation": "dilated pools",
    "MaxPool2d_stride_padding_dilation": "dilated pools",
}

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    backend_test = onnx.backend.test.BackendTest(onnx_backend, __name__)
backend_test.include(r"^test_.*_cpu$")
for name in OUTSIDE_THE_LIST + list(FAILING):
    backend_test.exclude(f"test_{name}")
_cases = backend_test.test_cases
globals().update({k: v for k, v in _cases.items()
                  if k in ("OnnxBackendPyTorchConvertedModelTest",
                           "OnnxBackendPyTorchOperatorModelTest")})


def test_run_time_shape_values_are_bound_at_run_once_per_value():
    import numpy as np
    from onnx import TensorProto as TP
    from onnx import helper as oh
    g = oh.make_graph([oh.make_node("Reshape", ["x", "shape"], ["y"])], "m",
                      [oh.make_tensor_value_info("x", TP.FLOAT, (2, 3)),
                       oh.make_tensor_value_info("shape", TP.INT64, (2,))],
                      [oh.make_tensor_value_info("y", TP.FLOAT, ("a", "b"))])
    m = oh.make_model(g, opset_imports=[oh.make_opsetid("", 17)])
    assert onnx_backend.bound_inputs(m) == ["shape"] and onnx_backend.open_inputs(m) == []
    rep = onnx_backend.prepare(m)
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    (y,) = rep.run([x, np.array([3, 2], np.int64)])
    (z,) = rep.run({"x": x, "shape": np.array([6, 1], np.int64)})
    assert y.shape == (3, 2) and z.shape == (6, 1) and np.array_equal(z.ravel(), x.ravel())
    assert rep.builds == 2
    rep.run([x, np.array([3, 2], np.int64)])
    assert rep.builds == 2
