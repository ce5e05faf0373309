"""Sixteen idioms of TVM users, each written as a TVM user writes it (``tvm`` spelled
``tvmlite``), checked against numpy. The first eleven ran unchanged before issue 28; the
last five (``lower(simple_mode=True)``, ``tvmlite.cpu``/``tvmlite.nd``, TVM's
``time_evaluator`` signature, ``topi``, ``autotvm``) are the ones it added.

Where tvmlite differs on purpose (DESIGN.md) the test says so in a comment: the target is
a CPU, not "llvm"; an autotvm template takes its config as its first argument and is
named by an identifier."""
from __future__ import annotations

import numpy as np
import pytest

import tvmlite
from tvmlite import te

RNG = np.random.default_rng(0)


def rand(*shape: int) -> np.ndarray:
    return RNG.random(shape, dtype=np.float32)


# -- 1..11: what worked already ------------------------------------------------------

def test_01_vector_add():
    n = 1024
    A = te.placeholder((n,), name="A")
    B = te.placeholder((n,), name="B")
    C = te.compute(A.shape, lambda i: A[i] + B[i], name="C")
    s = te.create_schedule(C.op)
    fadd = tvmlite.build(s, [A, B, C], name="myadd")
    a, b, c = rand(n), rand(n), np.zeros(n, "float32")
    fadd(a, b, c)
    np.testing.assert_allclose(c, a + b)


def test_02_split_reorder_vectorize_parallel_unroll():
    M = N = K = 64
    A, B = te.placeholder((M, K), name="A"), te.placeholder((K, N), name="B")
    k = te.reduce_axis((0, K), "k")
    C = te.compute((M, N), lambda x, y: te.sum(A[x, k] * B[k, y], axis=k), name="C")
    s = te.create_schedule(C.op)
    xo, xi = s[C].split(C.op.axis[0], factor=16)
    yo, yi = s[C].split(C.op.axis[1], factor=16)
    ko, ki = s[C].split(k, factor=4)
    s[C].reorder(xo, yo, ko, ki, xi, yi)
    s[C].vectorize(yi)
    s[C].unroll(ki)
    s[C].parallel(xo)
    func = tvmlite.build(s, [A, B, C], name="mmult")
    a, b, c = rand(M, K), rand(K, N), np.zeros((M, N), "float32")
    func(a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-5)


def test_03_tile_and_fuse():
    M = N = K = 64
    A, B = te.placeholder((M, K), name="A"), te.placeholder((K, N), name="B")
    k = te.reduce_axis((0, K), "k")
    C = te.compute((M, N), lambda x, y: te.sum(A[x, k] * B[k, y], axis=k), name="C")
    s = te.create_schedule(C.op)
    xo, yo, xi, yi = s[C].tile(C.op.axis[0], C.op.axis[1], 32, 32)
    fused = s[C].fuse(xo, yo)
    s[C].parallel(fused)
    func = tvmlite.build(s, [A, B, C])
    a, b, c = rand(M, K), rand(K, N), np.zeros((M, N), "float32")
    func(a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-5)


def test_04_print_lower():
    A = te.placeholder((16, 16), name="A")
    B = te.compute((16, 16), lambda i, j: A[i, j] * 2.0, name="B")
    s = te.create_schedule(B.op)
    text = str(tvmlite.lower(s, [A, B]))
    assert "for" in text and "B" in text


def test_05_cache_write_and_compute_at():
    M = N = K = 64
    A, B = te.placeholder((M, K), name="A"), te.placeholder((K, N), name="B")
    k = te.reduce_axis((0, K), "k")
    C = te.compute((M, N), lambda x, y: te.sum(A[x, k] * B[k, y], axis=k), name="C")
    s = te.create_schedule(C.op)
    CC = s.cache_write(C, "local")
    xo, yo, xi, yi = s[C].tile(C.op.axis[0], C.op.axis[1], 16, 16)
    s[CC].compute_at(s[C], yo)
    xc, yc = s[CC].op.axis
    (kc,) = s[CC].op.reduce_axis
    s[CC].reorder(kc, xc, yc)
    s[CC].vectorize(yc)
    func = tvmlite.build(s, [A, B, C])
    a, b, c = rand(M, K), rand(K, N), np.zeros((M, N), "float32")
    func(a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-5)


def test_06_rfactor():
    n = 256
    A = te.placeholder((n,), name="A")
    k = te.reduce_axis((0, n), "k")
    B = te.compute((1,), lambda i: te.sum(A[k], axis=k), name="B")
    s = te.create_schedule(B.op)
    ko, ki = s[B].split(B.op.reduce_axis[0], factor=16)
    s.rfactor(B, ki)
    func = tvmlite.build(s, [A, B])
    a, b = rand(n), np.zeros(1, "float32")
    func(a, b)
    np.testing.assert_allclose(b, [a.sum()], rtol=1e-5)


def test_07_get_source_and_export_library(tmp_path):
    A = te.placeholder((8,), name="A")
    B = te.compute((8,), lambda i: A[i] + 1.0, name="B")
    s = te.create_schedule(B.op)
    mod = tvmlite.build(s, [A, B], name="addone")
    assert "addone" in mod.get_source()
    path = mod.export_library(str(tmp_path / "addone.so"))
    assert path.exists() and path.with_suffix(".h").exists()


def test_08_symbolic_size():
    n = te.var("n")
    A = te.placeholder((n,), name="A")
    B = te.placeholder((n,), name="B")
    C = te.compute(A.shape, lambda i: A[i] + B[i], name="C")
    s = te.create_schedule(C.op)
    fadd = tvmlite.build(s, [A, B, C])
    for size in (1, 17, 100):
        a, b, c = rand(size), rand(size), np.zeros(size, "float32")
        fadd(a, b, c)
        np.testing.assert_allclose(c, a + b)


def test_09_intrinsics_max_exp_if_then_else():
    A = te.placeholder((64,), name="A")
    B = te.compute((64,), lambda i: te.if_then_else(A[i] > 0.5, te.exp(A[i]),
                                                    te.max(A[i], te.const(0.25))), name="B")
    s = te.create_schedule(B.op)
    func = tvmlite.build(s, [A, B])
    a, b = rand(64), np.zeros(64, "float32")
    func(a, b)
    np.testing.assert_allclose(b, np.where(a > 0.5, np.exp(a), np.maximum(a, 0.25)), rtol=1e-6)


def test_10_schedule_of_a_list_of_ops_and_inline():
    A = te.placeholder((32, 32), name="A")
    B = te.compute((32, 32), lambda i, j: A[i, j] * 2.0, name="B")
    C = te.compute((32, 32), lambda i, j: B[i, j] + 1.0, name="C")
    s = te.create_schedule([C.op])
    s[B].compute_inline()
    func = tvmlite.build(s, [A, C])
    a, c = rand(32, 32), np.zeros((32, 32), "float32")
    func(a, c)
    np.testing.assert_allclose(c, a * 2 + 1, rtol=1e-6)


def test_11_op_axis_and_reduce_axis_handles():
    A = te.placeholder((32, 48), name="A")
    k = te.reduce_axis((0, 48), name="k")
    B = te.compute((32,), lambda i: te.sum(A[i, k], axis=k), name="B")
    s = te.create_schedule(B.op)
    (i,) = s[B].op.axis
    (kk,) = s[B].op.reduce_axis
    ko, ki = s[B].split(kk, nparts=4)
    s[B].reorder(i, ko, ki)
    func = tvmlite.build(s, [A, B])
    a, b = rand(32, 48), np.zeros(32, "float32")
    func(a, b)
    np.testing.assert_allclose(b, a.sum(axis=1), rtol=1e-5)


# -- 12..16: what issue 28 added --------------------------------------------------------

def test_12_lower_simple_mode():
    A = te.placeholder((16,), name="A")
    B = te.compute((16,), lambda i: A[i] * 3.0, name="B")
    s = te.create_schedule(B.op)
    simple = tvmlite.lower(s, [A, B], simple_mode=True)
    assert str(simple) == str(tvmlite.lower(s, [A, B]))    # already print-friendly
    with pytest.raises(TypeError, match="simple_mode"):
        tvmlite.lower(s, [A, B], simple_mode="yes")


def test_13_device_and_nd_arrays():
    n = 256
    A = te.placeholder((n,), name="A")
    B = te.placeholder((n,), name="B")
    C = te.compute(A.shape, lambda i: A[i] + B[i], name="C")
    s = te.create_schedule(C.op)
    fadd = tvmlite.build(s, [A, B, C])
    dev = tvmlite.cpu(0)
    a = tvmlite.nd.array(rand(n), dev)
    b = tvmlite.nd.array(rand(n), dev)
    c = tvmlite.nd.array(np.zeros(n, dtype=C.dtype), dev)
    fadd(a, b, c)
    np.testing.assert_allclose(c.numpy(), a.numpy() + b.numpy())
    assert c.shape == (n,) and c.dtype == "float32" and c.device == dev
    d = tvmlite.nd.empty((n,), "float32", dev)
    fadd(a, b, d)
    np.testing.assert_allclose(d.numpy(), c.numpy())


def test_14_time_evaluator_tvm_signature():
    n = 1024
    A = te.placeholder((n,), name="A")
    B = te.placeholder((n,), name="B")
    C = te.compute(A.shape, lambda i: A[i] + B[i], name="C")
    s = te.create_schedule(C.op)
    func = tvmlite.build(s, [A, B, C], name="myadd")
    dev = tvmlite.cpu(0)
    a, b = tvmlite.nd.array(rand(n), dev), tvmlite.nd.array(rand(n), dev)
    c = tvmlite.nd.array(np.zeros(n, dtype="float32"), dev)
    evaluator = func.time_evaluator(func.entry_name, dev, number=10)
    result = evaluator(a, b, c)
    assert len(result.results) == 1 and result.mean > 0 and result.median > 0   # TVM: repeat=1
    np.testing.assert_allclose(c.numpy(), a.numpy() + b.numpy())
    assert len(func.time_evaluator(number=2, repeat=3)(a, b, c).results) == 3   # ours
    with pytest.raises(ValueError, match="entry_name"):
        func.time_evaluator("other", dev)


@pytest.mark.parametrize("case", ["conv2d_nchw", "depthwise_conv2d_nchw", "dense", "relu",
                                  "softmax", "max_pool", "avg_pool", "add", "matmul",
                                  "batch_matmul"])
def test_15_topi_operators(case):
    from tvmlite import topi
    x = te.placeholder((1, 4, 8, 8), name="x")
    if case == "conv2d_nchw":
        w = te.placeholder((6, 4, 3, 3), name="w")
        out, args = topi.nn.conv2d_nchw(x, w, 1, 1, 1), [x, w]
        ref = lambda a, b: _conv_ref(a, b, pad=1)   # noqa: E731
    elif case == "depthwise_conv2d_nchw":
        w = te.placeholder((4, 1, 3, 3), name="w")
        out, args = topi.nn.depthwise_conv2d_nchw(x, w, 1, 1, 1), [x, w]
        ref = lambda a, b: np.concatenate([_conv_ref(a[:, c:c + 1], b[c:c + 1], pad=1)  # noqa: E731
                                           for c in range(4)], axis=1)
    elif case == "dense":
        d, w, bias = (te.placeholder((8, 16), name="d"), te.placeholder((12, 16), name="w"),
                      te.placeholder((12,), name="bias"))
        out, args = topi.nn.dense(d, w, bias), [d, w, bias]
        ref = lambda a, b, c: a @ b.T + c   # noqa: E731
    elif case == "relu":
        shifted = te.compute(x.shape, lambda n, c, h, w: x[n, c, h, w] - 0.5, name="shifted")
        out, args, ref = topi.nn.relu(shifted), [x], lambda a: np.maximum(a - 0.5, 0)
    elif case == "softmax":
        y = te.placeholder((4, 32), name="y")
        out, args = topi.nn.softmax(y, axis=-1), [y]
        ref = lambda a: np.exp(a) / np.exp(a).sum(axis=-1, keepdims=True)   # noqa: E731
    elif case in ("max_pool", "avg_pool"):
        kind = case.split("_")[0]
        out, args = topi.nn.pool2d(x, (2, 2), (2, 2), (1, 1), (0, 0, 0, 0), kind), [x]
        red = np.max if kind == "max" else np.mean
        ref = lambda a: red(a.reshape(1, 4, 4, 2, 4, 2), axis=(3, 5))   # noqa: E731
    elif case == "add":
        y = te.placeholder((1, 4, 8, 8), name="y")
        out, args, ref = topi.add(x, y), [x, y], lambda a, b: a + b
    elif case == "matmul":
        a_, b_ = te.placeholder((8, 16), name="a"), te.placeholder((16, 4), name="b")
        out, args, ref = topi.matmul(a_, b_), [a_, b_], lambda a, b: a @ b
    else:
        a_, b_ = te.placeholder((2, 8, 16), name="a"), te.placeholder((2, 4, 16), name="b")
        out, args = topi.nn.batch_matmul(a_, b_), [a_, b_]     # TOPI's default: B transposed
        ref = lambda a, b: a @ b.transpose(0, 2, 1)   # noqa: E731
    s = te.create_schedule(out.op)
    func = tvmlite.build(s, [*args, out])
    arrays = [rand(*map(int, t.shape)) for t in args]
    result = np.zeros(tuple(map(int, out.shape)), "float32")
    func(*arrays, result)
    np.testing.assert_allclose(result, ref(*arrays), rtol=1e-4, atol=1e-5)


def _conv_ref(a: np.ndarray, w: np.ndarray, pad: int) -> np.ndarray:
    p = np.pad(a, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    n, _, h, ww = a.shape
    co, _, kh, kw = w.shape
    out = np.zeros((n, co, h, ww), np.float64)
    for y in range(kh):
        for x in range(kw):
            out += np.einsum("nchw,fc->nfhw", p[:, :, y:y + h, x:x + ww], w[:, :, y, x])
    return out.astype(np.float32)


def test_16_autotvm_template_task_tuner_and_history(tmp_path):
    from tvmlite import autotvm

    # tvmlite: the config is the template's first argument (no autotvm.get_config()), and
    # a template's name is an identifier (it names the kernel), not "tutorial/matmul"
    @autotvm.template("idioms_matmul")
    def matmul(cfg, N, L, M, dtype):
        A = te.placeholder((N, L), name="A", dtype=dtype)
        B = te.placeholder((L, M), name="B", dtype=dtype)
        k = te.reduce_axis((0, L), name="k")
        C = te.compute((N, M), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
        s = te.create_schedule(C.op)
        y, x = s[C].op.axis
        k = s[C].op.reduce_axis[0]
        cfg.define_split("tile_y", y, num_outputs=2)
        cfg.define_split("tile_x", x, num_outputs=2)
        yo, yi = cfg["tile_y"].apply(s, C, y)
        xo, xi = cfg["tile_x"].apply(s, C, x)
        s[C].reorder(yo, xo, k, yi, xi)
        return s, [A, B, C]

    N, L, M = 32, 32, 32
    task = autotvm.task.create("idioms_matmul", args=(N, L, M, "float32"), target="host")
    assert len(task.space) > 1
    log = str(tmp_path / "matmul.log")
    with autotvm.LocalRunner(number=1, repeat=1, min_repeat_ms=0, timeout=10) as runner:
        option = autotvm.measure_option(builder=autotvm.LocalBuilder(timeout=30),
                                        runner=runner)
        tuner = autotvm.tuner.RandomTuner(task)
        tuner.tune(n_trial=4, log_file=log, options=option)
    assert autotvm.tuner.XGBTuner(task).task is task
    with autotvm.apply_history_best(log):
        s, arg_bufs = matmul(N, L, M, "float32")
        func = tvmlite.build(s, arg_bufs)
    a, b, c = rand(N, L), rand(L, M), np.zeros((N, M), "float32")
    func(a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-5)
