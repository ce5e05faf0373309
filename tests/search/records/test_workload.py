"""Workloads: JSON round trip of every operator (same key, same numbers), key stability,
flop counts, and hostile workload JSON (each a clean WorkloadError, never a crash)."""
from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import tvmlite
from tvmlite import te, testing
from tvmlite.ops import OPS
from tvmlite.search.records.compute_json import MAX_DEPTH, MAX_NODES
from tvmlite.search.records.workload import Workload, WorkloadError, workload_key

REPO = Path(__file__).resolve().parents[3]

CASES = [
    ("matmul", dict(M=8, N=8, K=8)),
    ("matmul", dict(M=4, N=5, K=6, dtype="int32")),
    ("batch_matmul", dict(B=2, M=3, N=4, K=5)),
    ("dense", dict(N=3, K=8, M=5)),
    ("dense", dict(N=3, K=8, M=5, bias=True, relu=True)),
    ("conv1d", dict(N=1, L=9, CI=2, CO=3, kernel=3, stride=2, padding=1)),
    ("conv2d_nchw", dict(N=1, CI=4, H=7, W=7, CO=4, kernel=3)),
    ("conv2d_nchw", dict(N=1, CI=4, H=9, W=8, CO=6, kernel=3, stride=2, padding=1, groups=2)),
    ("conv2d_nhwc", dict(N=1, H=7, W=6, CI=4, CO=4, kernel=(3, 2), stride=(1, 2),
                         padding=(1, 0), groups=2)),
    ("depthwise_conv2d_nchw", dict(N=1, C=3, H=7, W=7, kernel=3, padding=1, multiplier=2)),
    ("depthwise_conv2d_nhwc", dict(N=1, H=7, W=7, C=3, kernel=3, stride=2)),
    ("conv3d_ndhwc", dict(N=1, D=4, H=4, W=4, CI=2, CO=3, kernel=2, padding=1)),
    ("max_pool2d", dict(N=1, C=2, H=7, W=7, kernel=3, stride=2, padding=1)),
    ("avg_pool2d", dict(N=1, C=2, H=7, W=7, kernel=3, padding=1, count_include_pad=False)),
    ("softmax", dict(N=4, M=8)),
    ("norm2", dict(N=4, M=6)),
    ("add", dict(shape=(4, 5))),
    ("relu", dict(shape=(3, 4, 5), dtype="float64")),
    ("bias_add", dict(shape=(2, 3, 4), axis=1)),
    # the quantized operators (uint8 data, int8 weights, int32 sums, a requantize)
    ("qmatmul", dict(M=5, N=7, K=9, data_zp=3, weight_zp=-2)),
    ("qdense", dict(N=3, K=9, M=5, data_zp=7, scale=0.37, out_zp=11, bias=True)),
    ("qconv2d_nchw", dict(N=1, CI=4, H=7, W=7, CO=6, kernel=3, padding=1, groups=2,
                          data_zp=5, weight_zp=1, out_zp=100, relu=True)),
    ("qconv2d_nhwc", dict(N=1, H=6, W=5, CI=3, CO=4, kernel=3, padding=1,
                          data_zp=4, scale=0.5, out_zp=128)),
]


def roundtrip(wl: Workload) -> Workload:
    return Workload.from_json(json.loads(json.dumps(wl.to_json(), allow_nan=False)))


def same_numbers(a: Workload, b: Workload) -> None:
    inputs = testing.random_inputs(a.tensors, seed=3)
    np.testing.assert_array_equal(testing.evaluate_te(a.tensors, inputs),
                                  testing.evaluate_te(b.tensors, inputs))


def test_cases_cover_every_operator():
    assert {name for name, _ in CASES} == set(OPS)


@pytest.mark.parametrize("op,kw", CASES, ids=[f"{o}-{i}" for i, (o, _) in enumerate(CASES)])
def test_operator_round_trip(op, kw):
    wl = Workload.from_op(op, **kw)
    back = roundtrip(wl)
    assert back == wl and back.key == wl.key and back is not wl
    assert back.name == op and back.args == wl.args
    assert back.to_json() == wl.to_json()
    assert [t.shape for t in back.tensors] == [t.shape for t in wl.tensors]
    same_numbers(wl, back)


def test_rebuilt_matmul_builds_and_matches_numpy():
    back = roundtrip(Workload.from_op("matmul", 16, 16, 16))
    mod = tvmlite.build(back.schedule(), list(back.tensors))
    a, b = testing.random_inputs(back.tensors, seed=1)
    c = np.empty((16, 16), np.float32)
    mod(a, b, c)
    testing.assert_allclose(c, a.astype(np.float64) @ b, "float32", 16)


def user_compute():
    A = te.placeholder((6, 5), name="A")
    k = te.reduce_axis((0, 5), name="k")
    rowmax = te.compute((6,), lambda i: te.max(A[i, k], axis=k), name="rowmax")
    nan, inf = te.const(float("nan"), "float32"), te.const(float("inf"), "float32")

    def body(i, j):
        bucket = (A[i, j] * 4.0).astype("int32") % 3
        shifted = te.exp(A[i, j] - rowmax[i]) + bucket.astype("float32")
        picked = te.if_then_else(A[i, j] > rowmax[i] * 0.5, shifted, te.cast(i + j, "float32"))
        return te.min(te.if_then_else(i < 0, nan, picked), inf)
    out = te.compute((6, 5), body, name="out", tag="user_op")
    return [A, out]


def test_user_compute_round_trip():
    wl = Workload.from_tensors(user_compute(), name="my_op", args={"n": 6, "k": (5, 5)})
    text = json.dumps(wl.to_json(), allow_nan=False)
    assert '"nan"' in text and '"inf"' in text
    back = roundtrip(wl)
    assert back.key == wl.key and back.args == {"n": 6, "k": (5, 5)}
    same_numbers(wl, back)
    assert back.tensors[-1].op.tag == "user_op"


def test_key_stable_and_sensitive():
    a, b = Workload.from_op("matmul", 8, 8, 8), Workload.from_op("matmul", 8, 8, 8)
    assert a.key == b.key and a == b and len({a, b}) == 1
    assert workload_key(OPS["matmul"](8, 8, 8)) == a.key
    assert Workload.from_op("matmul", 8, 8, 16).key != a.key
    assert Workload.from_op("matmul", 8, 8, 8, "float64").key != a.key
    # the key ignores labels: the same compute under another name shares records
    assert Workload.from_tensors(OPS["matmul"](8, 8, 8), name="gemm").key == a.key
    code = ("from tvmlite.search.records.workload import Workload; "
            "print(Workload.from_op('matmul', 8, 8, 8).key)")
    env = dict(os.environ, PYTHONHASHSEED="12345")
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True,
                         text=True, timeout=120, check=True)
    assert out.stdout.strip() == a.key


def test_key_survives_schedule_renaming():
    """Two ops of one DAG share a name; creating a schedule renames one. The key (and a
    rebuilt workload) must agree with that renaming."""
    A = te.placeholder((8,), name="A")
    X = te.compute((8,), lambda i: A[i] * 2.0, name="X")
    Y = te.compute((8,), lambda i: X[i] + 1.0, name="X")
    wl = Workload.from_tensors([A, Y])
    key = wl.key
    s = wl.schedule()
    assert [st.name for st in s.state.stages] == ["X", "X_1"]
    assert workload_key([A, Y]) == key and roundtrip(wl).key == key


def test_flops():
    assert Workload.from_op("matmul", 4, 5, 6).flops == 2 * 4 * 5 * 6
    assert Workload.from_op("add", (3, 7)).flops == 21
    n, ci, h, w, co, k, g = 1, 4, 9, 9, 6, 3, 2
    conv = Workload.from_op("conv2d_nchw", n, ci, h, w, co, k, groups=g)
    oh = ow = h - k + 1
    assert conv.flops == 2 * n * co * oh * ow * (ci // g) * k * k
    padded = Workload.from_op("conv2d_nchw", n, ci, h, w, co, k, padding=1, groups=g)
    pad_points = n * ci * (h + 2) * (w + 2)          # one select per padded element
    assert padded.flops == pad_points + 2 * n * co * h * w * (ci // g) * k * k


def test_bad_constructor_arguments():
    with pytest.raises(WorkloadError, match="unknown operator 'matmull'.*matmul"):
        Workload.from_op("matmull", 8, 8, 8)
    with pytest.raises(WorkloadError, match="signature"):
        Workload.from_op("matmul", 8, 8, 8, bogus=1)
    with pytest.raises(WorkloadError, match="M must be a positive int"):
        Workload.from_op("matmul", 0, 8, 8)
    A, B, C = OPS["matmul"](4, 4, 4)
    with pytest.raises(WorkloadError, match="placeholder B is read"):
        Workload.from_tensors([A, C])
    with pytest.raises(WorkloadError, match="placeholders first"):
        Workload.from_tensors([C, A, B])
    with pytest.raises(WorkloadError, match="args"):
        Workload.from_tensors([A, B, C], args={"f": object()})
    with pytest.raises(WorkloadError, match="reserved"):
        Workload.from_tensors([A, B, C], name="main")


# -- hostile workload JSON ------------------------------------------------------------------

def base() -> dict:
    return copy.deepcopy(BASE)


BASE = Workload.from_op("matmul", 4, 4, 4).to_json()
# ops: 0 = A, 1 = B, 2 = C (body: reduce(sum, read(A, [i, k]) * read(B, [k, j])))


def body(d):
    return d["compute"]["ops"][2]["body"]


def source(d):
    return body(d)["source"]


def set_(path, value):
    """A mutation that sets d[path...] = value."""
    def mutate(d):
        node = d
        for p in path[:-1]:
            node = node[p]
        node[path[-1]] = value
    return mutate


def deep_nesting(d):
    node = {"node": "var", "name": "i"}
    for _ in range(10**5):
        node = {"node": "not", "a": node}
    body(d)["source"] = node


def too_many_nodes(d):
    level = [{"node": "const", "dtype": "float32", "value": 1.0}] * (1 << 17)
    while len(level) > 1:  # a balanced tree: shallow, but wide
        level = [{"node": "binop", "op": "+", "a": level[i], "b": level[i + 1]}
                 for i in range(0, len(level), 2)]
    body(d)["source"] = level[0]


def too_many_ops(d):
    d["compute"]["ops"] = [{"op": "placeholder", "name": f"p{i}", "shape": [1],
                            "dtype": "float32"} for i in range(300)]


OPS_PATH = ["compute", "ops"]
HOSTILE = {
    "unknown node kind": (set_(OPS_PATH + [2, "body", "source", "node"], "lambda"),
                          "unknown expression node"),
    "operator with C code": (set_(OPS_PATH + [2, "body", "source", "op"], 'x; system("rm")'),
                             "unknown binop op"),
    "call of a non-function": (set_(OPS_PATH + [2, "body", "source"], {
        "node": "call", "func": "system", "arg": {"node": "var", "name": "i"}}),
        "unknown call func"),
    "placeholder name with C code": (set_(OPS_PATH + [0, "name"], 'A[0]; system("rm")'),
                                     "identifier"),
    "compute name reserved": (set_(OPS_PATH + [2, "name"], "int"), "reserved"),
    "compute name main": (set_(OPS_PATH + [2, "name"], "main"), "reserved"),
    "tvmlite_ prefix": (set_(OPS_PATH + [1, "name"], "tvmlite_x"), "reserved"),
    "dunder name": (set_(OPS_PATH + [2, "axis", 0, 0], "__x"), "reserved"),
    "reduce axis with C code": (set_(OPS_PATH + [2, "body", "axes", 0, 0], "k){}"),
                                "identifier"),
    "variable with C code": (set_(OPS_PATH + [2, "body", "source", "a", "indices", 0, "name"],
                                  "i+system()"), "not an identifier"),
    "dtype complex64": (set_(OPS_PATH + [0, "dtype"], "complex64"), "dtype must be one of"),
    "dtype char*": (set_(OPS_PATH + [1, "dtype"], "char*"), "dtype must be one of"),
    "bool placeholder": (set_(OPS_PATH + [1, "dtype"], "bool"), "dtype must be one of"),
    "cast to char*": (set_(OPS_PATH + [2, "body", "source"], {
        "node": "cast", "dtype": "char*", "value": {"node": "var", "name": "i"}}),
        "dtype must be one of"),
    "negative shape": (set_(OPS_PATH + [0, "shape"], [-1, 4]), "positive ints"),
    "zero shape": (set_(OPS_PATH + [0, "shape"], [0, 4]), "positive ints"),
    "huge shape": (set_(OPS_PATH + [0, "shape"], [1 << 20, 1 << 20]), "more than"),
    "bool shape": (set_(OPS_PATH + [0, "shape"], [True, 4]), "positive ints"),
    "float shape": (set_(OPS_PATH + [0, "shape"], [4.0, 4]), "positive ints"),
    "scalar shape": (set_(OPS_PATH + [0, "shape"], 4), "shape must be a list"),
    "bool axis extent": (set_(OPS_PATH + [2, "axis", 0, 1], True), "positive ints"),
    "float reduce extent": (set_(OPS_PATH + [2, "body", "axes", 0, 2], 4.0), "extent"),
    "read arity mismatch": (set_(OPS_PATH + [2, "body", "source", "a", "indices"],
                                 [{"node": "var", "name": "i"}]), "2 dimensions"),
    "read of a later op": (set_(OPS_PATH + [2, "body", "source", "b", "tensor"], 2),
                           "earlier op"),
    "read index is a bool": (set_(OPS_PATH + [2, "body", "source", "b", "tensor"], True),
                             "earlier op"),
    "free variable": (set_(OPS_PATH + [2, "body", "source", "a", "indices", 0, "name"], "z"),
                      "'z' is not an axis"),
    "nested reduce": (lambda d: body(d).__setitem__("source", copy.deepcopy(body(d))),
                      "reduction must be the whole body"),
    "unknown combiner": (set_(OPS_PATH + [2, "body", "combiner"], "prod"),
                         "unknown reduce combiner"),
    "float const as int": (set_(OPS_PATH + [2, "body", "source"], {
        "node": "const", "dtype": "int32", "value": 1.5}), "not a valid int32"),
    "int const out of range": (set_(OPS_PATH + [2, "body", "source"], {
        "node": "const", "dtype": "int32", "value": 1 << 40}), "not a valid int32"),
    "nan spelled wrong": (set_(OPS_PATH + [2, "body", "source"], {
        "node": "const", "dtype": "float32", "value": "NaN();"}), "not a valid float32"),
    "extra key": (set_(OPS_PATH + [2, "body", "source", "evil"], 1), "unknown"),
    "deep nesting": (deep_nesting, f"deeper than {MAX_DEPTH}"),
    "too many nodes": (too_many_nodes, f"more than {MAX_NODES}"),
    "too many ops": (too_many_ops, "list of 1 to 256"),
    "key mismatch": (set_(["key"], "0" * 64), "key mismatch"),
    "edited shape keeps old key": (set_(OPS_PATH + [0, "shape"], [4, 5]), "key mismatch"),
    "bad key": (set_(["key"], "../../etc"), "64 lowercase hex"),
    "unused op": (lambda d: d["compute"]["ops"].append({
        "op": "placeholder", "name": "Z", "shape": [1], "dtype": "float32"}), "not needed"),
    "args with an object": (set_(["args", "M"], {"__class__": "os.system"}), "plain value"),
    "not an object": (lambda d: d["compute"].__setitem__("ops", ["A"]), "must be an object"),
}


@pytest.mark.parametrize("case", list(HOSTILE))
def test_hostile_workload_json(case):
    mutate, pattern = HOSTILE[case]
    d = base()
    mutate(d)
    with pytest.raises(WorkloadError, match=pattern):
        Workload.from_json(d)


def test_deep_nesting_as_json_text_is_clean():
    """json.loads itself cannot parse a 10^5-deep line (RecursionError); the dict built
    without recursion is rejected by the workload reader, also without recursion."""
    text = '{"node": "not", "a": ' * 10**5 + '{"node": "var", "name": "i"}' + "}" * 10**5
    with pytest.raises(RecursionError):
        json.loads(text)
    d = base()
    deep_nesting(d)
    with pytest.raises(WorkloadError, match="deeper"):
        Workload.from_json(d)


def test_from_tensors_refuses_too_deep_expressions():
    A = te.placeholder((4,), name="A")

    def chain(i):
        e = A[i]
        for _ in range(MAX_DEPTH + 5):
            e = e + 1.0
        return e
    C = te.compute((4,), chain, name="C")
    with pytest.raises(WorkloadError, match="deeper"):
        Workload.from_tensors([A, C])
