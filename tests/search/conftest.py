"""Shared fixtures of the search tests."""
import pytest

from tvmlite import te


def _user_computes():
    """Computes no rule or template was written for: conv + bias + relu, A^T B, and a batch
    matmul followed by a softmax."""
    data = te.placeholder((1, 8, 8, 4), name="data")
    weight = te.placeholder((3, 3, 4, 8), name="weight")
    bias = te.placeholder((8,), name="bias")
    pad = te.compute((1, 10, 10, 4), lambda n, h, w, c: te.if_then_else(
        te.all(h >= 1, h < 9, w >= 1, w < 9), data[n, h - 1, w - 1, c], 0.0), name="pad")
    ry, rx, rc = (te.reduce_axis((0, e), name=nm) for e, nm in ((3, "ry"), (3, "rx"), (4, "rc")))
    conv = te.compute((1, 8, 8, 8), lambda n, h, w, f: te.sum(
        pad[n, h + ry, w + rx, rc] * weight[ry, rx, rc, f], axis=[ry, rx, rc]), name="conv")
    out = te.compute((1, 8, 8, 8), lambda n, h, w, f: te.max(conv[n, h, w, f] + bias[f], 0.0),
                     name="out")
    yield "conv_bias_relu", [data, weight, bias, out]

    A = te.placeholder((24, 16), name="A")
    B = te.placeholder((24, 32), name="B")
    k = te.reduce_axis((0, 24), name="k")
    yield "matmul_tn", [A, B, te.compute((16, 32), lambda i, j: te.sum(A[k, i] * B[k, j], axis=k),
                                         name="C")]

    X = te.placeholder((2, 8, 16), name="X")
    Y = te.placeholder((2, 16, 12), name="Y")
    r = te.reduce_axis((0, 16), name="r")
    bmm = te.compute((2, 8, 12), lambda b, i, j: te.sum(X[b, i, r] * Y[b, r, j], axis=r),
                     name="bmm")
    m = te.reduce_axis((0, 12), name="m")
    mx = te.compute((2, 8), lambda b, i: te.max(bmm[b, i, m], axis=m), name="mx")
    ex = te.compute((2, 8, 12), lambda b, i, j: te.exp(bmm[b, i, j] - mx[b, i]), name="ex")
    m2 = te.reduce_axis((0, 12), name="m2")
    sm = te.compute((2, 8), lambda b, i: te.sum(ex[b, i, m2], axis=m2), name="sm")
    yield "bmm_softmax", [X, Y, te.compute((2, 8, 12), lambda b, i, j: ex[b, i, j] / sm[b, i],
                                           name="prob")]


@pytest.fixture
def user_computes():
    """Computes no rule or template was written for, by name: tensors, inputs first."""
    return dict(_user_computes())
