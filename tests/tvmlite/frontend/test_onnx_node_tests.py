"""onnx's backend node tests against tvmlite, for the ops issue 29 lists.

All of onnx's node tests in scope (every op in ``scope.LISTED_OPS``, opsets 9 to 21,
dtypes tvmlite has) pass; ``python -m bench onnx_node_tests`` runs every one of them and
writes the table to bench/results/onnx-node-tests.md. The suite runs a representative
subset, ``SUITE``: at least one test per op, and one per form the frontend decomposes
(run-time weights and training mode of BatchNormalization, run-time Clip bounds,
LayerNormalization off the last axis with its Mean/InvStdDev, Softmax off the last
axis, Gelu tanh, mixed-dtype and integer Pow, truncating integer Div, bool Equal and
Where, run-time axes and slice ranges, empty tensors), so that the whole suite stays
cheap. No expected failures: every test here uses listed ops only.
"""
from __future__ import annotations

import unittest
import warnings

import pytest

pytest.importorskip("onnx")
import onnx.backend.test  # noqa: E402
from onnx.backend.test.loader import load_node_model_tests  # noqa: E402

from tvmlite.frontend import onnx_backend  # noqa: E402
from tvmlite.frontend.scope import model_ops, out_of_scope, uses_only_listed  # noqa: E402

SUITE = [
    "add_bcast", "sub_bcast", "mul_bcast", "div_bcast", "div_int32_trunc", "sum_example",
    "relu", "sigmoid", "tanh", "sqrt", "erf", "leakyrelu", "lrn", "gemm_all_attributes",
    "matmul_bcast", "concat_2d_axis_1", "dropout_random_old", "gather_negative_indices",
    "expand_dim_changed", "batchnorm_epsilon", "batchnorm_epsilon_training_mode",
    "clip", "clip_default_min", "clip_default_inbounds_expanded", "equal_bcast",
    "where_long_example", "gelu_default_1", "gelu_tanh_1", "layer_normalization_default_axis",
    "layer_normalization_3d_axis1_epsilon", "softmax_axis_0", "pow_types_float32_int64",
    "pow_types_int64_int64", "mvn_expanded", "group_normalization_epsilon_expanded",
    "reduce_mean_keepdims_example", "reduce_sum_do_not_keepdims_example",
    "reduce_sum_empty_axes_input_noop_example", "reduce_sum_empty_set", "slice_neg_steps",
    "slice_start_out_of_bounds",
]

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    backend_test = onnx.backend.test.BackendTest(onnx_backend, __name__)
for _name in SUITE:
    backend_test.include(f"^test_{_name}_cpu$")
_node_tests = backend_test.test_cases["OnnxBackendNodeModelTest"]
# only the included tests, not the other node tests as skips
OnnxBackendNodeModelTest = type("OnnxBackendNodeModelTest", (unittest.TestCase,), {
    f"test_{n}_cpu": getattr(_node_tests, f"test_{n}_cpu") for n in SUITE})
OnnxBackendNodeModelTest.__module__ = __name__
del _node_tests   # pytest would collect it


def _in_scope() -> dict[str, object]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cases = load_node_model_tests()   # generated once per process (BackendTest did)
    return {c.name[len("test_"):]: c.model for c in cases
            if uses_only_listed(c.model) and out_of_scope(c.model) is None}


def test_the_subset_is_in_scope_and_has_every_op():
    in_scope = _in_scope()
    assert set(SUITE) <= set(in_scope), sorted(set(SUITE) - set(in_scope))
    covered = set().union(*(model_ops(in_scope[n]) for n in SUITE))
    every = set().union(*(model_ops(m) for m in in_scope.values()))
    assert every - covered == set()
