"""A model over a symbolic sequence length: one attention + MLP layer imported with the
length as a range, built once, run at lengths 1, a middle one and the largest against
onnxruntime; the merge of the probe graphs (affine dimensions, what it refuses) and the
feeds' checks (a length outside the range, a shape that contradicts it)."""
from __future__ import annotations

import math

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto as TP  # noqa: E402
from onnx import helper as oh  # noqa: E402
from onnx import numpy_helper as nh  # noqa: E402

from tvmlite import te  # noqa: E402
from tvmlite.frontend import from_onnx  # noqa: E402
from tvmlite.frontend.onnx import OnnxImportError  # noqa: E402
from tvmlite.graph.build import FeedError, build_graph  # noqa: E402
from tvmlite.graph.ir import GraphError  # noqa: E402
from tvmlite.graph.symbolic import affine_of, probe_sizes, shape_at  # noqa: E402

HIDDEN, HEADS, MAX_LEN = 16, 2, 24
LENGTHS = (1, 7, MAX_LEN)


def attention_model(hidden: int = HIDDEN, heads: int = HEADS, dim: str = "L") -> onnx.ModelProto:
    """Self-attention (reshapes to heads with -1, so the length is the model's own),
    residual + LayerNorm, a ReLU MLP and a residual: the shapes a BERT layer has."""
    rng = np.random.default_rng(0)
    inits, nodes = [], []

    def w(*shape: int) -> str:
        name = f"w{len(inits)}"
        v = rng.standard_normal(shape) / math.sqrt(shape[0])
        inits.append(nh.from_array(v.astype(np.float32), name))
        return name

    def c(v: object, dt: object = np.int64) -> str:
        name = f"c{len(inits)}"
        inits.append(nh.from_array(np.asarray(v, dt), name))
        return name

    def op(t: str, ins: list, **a: object) -> str:
        out = f"{t.lower()}{len(nodes)}"
        nodes.append(oh.make_node(t, ins, [out], name=out, **a))
        return out

    d = hidden // heads

    def split(x: str, perm: list) -> str:
        return op("Transpose", [op("Reshape", [x, c([1, -1, heads, d])])], perm=perm)
    q = split(op("Add", [op("MatMul", ["x", w(hidden, hidden)]), w(hidden)]), [0, 2, 1, 3])
    k = split(op("MatMul", ["x", w(hidden, hidden)]), [0, 2, 3, 1])
    v = split(op("MatMul", ["x", w(hidden, hidden)]), [0, 2, 1, 3])
    att = op("Div", [op("MatMul", [q, k]), c(math.sqrt(d), np.float32)])
    ctx = op("MatMul", [op("Softmax", [att], axis=-1), v])
    ctx = op("Reshape", [op("Transpose", [ctx], perm=[0, 2, 1, 3]), c([1, -1, hidden])])
    x1 = op("Add", [op("MatMul", [ctx, w(hidden, hidden)]), "x"])
    x1 = op("LayerNormalization", [x1, w(hidden), w(hidden)], axis=-1)
    h = op("Relu", [op("MatMul", [x1, w(hidden, 2 * hidden)])])
    out = op("Add", [op("MatMul", [h, w(2 * hidden, hidden)]), x1])
    g = oh.make_graph(nodes, "attn", [oh.make_tensor_value_info("x", TP.FLOAT, [1, dim, hidden])],
                      [oh.make_tensor_value_info(out, TP.FLOAT, None)], inits)
    m = oh.make_model(g, opset_imports=[oh.make_opsetid("", 17)])
    m.ir_version = 8
    return m


@pytest.fixture(scope="module")
def model() -> onnx.ModelProto:
    return attention_model()


@pytest.fixture(scope="module")
def graph(model):
    return from_onnx(model, shapes={"x": (1, (1, MAX_LEN), HIDDEN)})


@pytest.fixture(scope="module")
def built(graph):
    return build_graph(graph, quiet=True)


def reference(model, x):
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, {"x": x})[0]


def feed(length: int) -> np.ndarray:
    return np.random.default_rng(length).standard_normal((1, length, HIDDEN)).astype("float32")


def test_import_makes_the_length_symbolic(graph):
    assert graph.sizes == (("L", 1, MAX_LEN),)
    assert graph.kernels is not None    # merged from fused graphs
    (L,) = {d for d in graph.types["x"].shape if not isinstance(d, int)}
    scores = [t for v, t in graph.types.items() if len(t.shape) == 4 and
              t.shape[2:] == (L, L)]
    assert scores, "the attention scores are (1, heads, L, L)"
    assert shape_at(graph.types["x"].shape, {"L": 5}) == (1, 5, HIDDEN)
    assert "L in [1, 24]" in str(graph)


def test_a_te_var_with_its_range_is_the_same_graph(model, graph):
    L = te.var("L")
    g = from_onnx(model, shapes={"x": (1, L, HIDDEN)}, ranges={"L": (1, MAX_LEN)})
    assert {v: str(t) for v, t in g.types.items()} == {v: str(t) for v, t in graph.types.items()}


@pytest.mark.parametrize("length", LENGTHS)
def test_run_any_length_matches_onnxruntime(model, built, length):
    x = feed(length)
    (y,) = built.run({"x": x})
    assert y.shape == (1, length, HIDDEN)
    np.testing.assert_allclose(y, reference(model, x), rtol=1e-4, atol=1e-4)


def test_lengths_outside_the_range_are_clear_errors(built):
    for bad in (0, MAX_LEN + 1):
        with pytest.raises(FeedError, match=r"size %d on axis 1 \(L\); the model runs at L in "
                           r"\[1, 24\]" % bad):
            built.run({"x": np.zeros((1, bad, HIDDEN), "float32")})
    with pytest.raises(FeedError, match="takes"):
        built.run({"x": np.zeros((1, 3, HIDDEN + 1), "float32")})


def test_a_symbolic_dim_needs_a_range(model):
    with pytest.raises(OnnxImportError, match="symbolic dimension 'L'"):
        from_onnx(model)
    with pytest.raises(OnnxImportError, match="symbolic size L with no range"):
        from_onnx(model, shapes={"x": (1, te.var("L"), HIDDEN)})
    for bad in ((0, 8), (9, 3), (1.5, 8), (1, 2, 3)):
        with pytest.raises(OnnxImportError, match=r"range is \(lo, hi\)"):
            from_onnx(model, shapes={"x": (1, bad, HIDDEN)})
    with pytest.raises(GraphError, match="at least two sizes"):
        from_onnx(model, shapes={"x": (1, (1, 2), HIDDEN)})


def test_a_range_of_one_size_is_a_fixed_size(model):
    g = from_onnx(model, shapes={"x": (1, (5, 5), HIDDEN)})
    assert g.sizes == () and g.types["x"].shape == (1, 5, HIDDEN)


def test_probe_sizes_and_affine_dims():
    assert probe_sizes("L", 1, 512) == (2, 3, 512)
    assert probe_sizes("L", 7, 8) == (7, 8)
    L = te.var("L")
    assert affine_of(L * 12 + 3, "L") == (12, 3)
    assert affine_of(16, "L") == (0, 16)


def test_a_size_the_graph_cannot_carry_names_the_value():
    """A length-wise max pool with stride 2 has floor(L / 2) outputs: not a*L + b."""
    x = oh.make_tensor_value_info("x", TP.FLOAT, [1, 1, 1, "L"])
    y = oh.make_tensor_value_info("y", TP.FLOAT, None)
    node = oh.make_node("MaxPool", ["x"], ["y"], name="pool", kernel_shape=[1, 2],
                        strides=[1, 2])
    m = oh.make_model(oh.make_graph([node], "p", [x], [y]),
                      opset_imports=[oh.make_opsetid("", 17)])
    with pytest.raises(GraphError, match="not a\\*L \\+ b"):
        from_onnx(m, shapes={"x": (1, 1, 1, (1, 64))})


def test_a_constant_that_depends_on_the_size_is_refused():
    """A position table sliced to the length: its values change with L."""
    x = oh.make_tensor_value_info("x", TP.FLOAT, [1, "L", 4])
    y = oh.make_tensor_value_info("y", TP.FLOAT, None)
    table = nh.from_array(np.arange(64 * 4, dtype=np.float32).reshape(64, 4), "pos")
    nodes = [oh.make_node("Shape", ["x"], ["s"], start=1, end=2),
             oh.make_node("Slice", ["pos", "zero", "s"], ["p"]),
             oh.make_node("Add", ["x", "p"], ["y"], name="add")]
    zero = nh.from_array(np.array([0], np.int64), "zero")
    m = oh.make_model(oh.make_graph(nodes, "pos", [x], [y], [table, zero]),
                      opset_imports=[oh.make_opsetid("", 17)])
    with pytest.raises(GraphError, match="depends on the symbolic size L"):
        from_onnx(m, shapes={"x": (1, (1, 64), 4)})


def test_a_dispatch_table_in_the_log_serves_its_kernel(tmp_path, model, graph):
    """A dynamic kernel's dispatch record (as the dynamic search logs it): under
    apply_history_best the build compiles its dispatcher, which serves every length."""
    from tvmlite import search
    from tvmlite.graph.kernel import default_schedule, kernel_compute
    from tvmlite.search.records.dispatch import DispatchTable, dispatch_record
    from tvmlite.search.records.record import append_record
    from tvmlite.search.records.workload import Workload
    from tvmlite.target.target import Target

    target = Target.host()
    # a kernel whose schedules pre-pack no weight: the variants of a table share the
    # dispatcher's arguments, so the dynamic search's variants read their weights as given
    k = next(k for k in graph.kernels if k.anchor == "softmax")
    kc = kernel_compute(graph, k)
    wl = Workload.from_tensors(list(kc.tensors), name="graph_kernel")
    variants = tuple(default_schedule(kc, target, {"L": m}).steps for m in (3, MAX_LEN))
    table = DispatchTable("L", variants, ((1, 4, 0), (5, None, 1)),
                          {3: (0, 1e-6), MAX_LEN: (1, 2e-6)})
    log = tmp_path / "dyn.jsonl"
    append_record(log, dispatch_record(wl, target, table))
    with search.apply_history_best(str(log)):
        mod = build_graph(graph, quiet=True)
    tuned = [b for b in mod.kernels if b.record is not None]
    assert [b.name for b in tuned] == [k.name]
    assert tuned[0].record["dispatch"] == [[1, 4, 0], [5, None, 1]]
    assert len(tuned[0].code.variants) == 2 and tuned[0].code.sizes == ("L",)
    for length in (2, 9):
        x = feed(length)
        np.testing.assert_allclose(mod.run({"x": x})[0], reference(model, x),
                                   rtol=1e-4, atol=1e-4)


@pytest.fixture(scope="module")
def library(built, tmp_path_factory):
    from tvmlite.graph.library import ModelLibrary
    d = tmp_path_factory.mktemp("attn_lib")
    built.export_library(d, name="attn")
    return d, ModelLibrary(d)


@pytest.mark.parametrize("length", LENGTHS)
def test_the_c_library_runs_any_length(model, library, length):
    x = feed(length)
    (y,) = library[1].run({"x": x})
    np.testing.assert_allclose(y, reference(model, x), rtol=1e-4, atol=1e-4)


def test_the_c_library_takes_and_checks_the_size(library):
    import json

    from tvmlite.graph.library import LibraryError
    d, lib = library
    header = (d / "attn.h").read_text()
    assert "int attn_run(int64_t L, const float *in0, float *out0);" in header
    assert "1 <= L <= 24" in header
    manifest = json.loads((d / "manifest.json").read_text())
    assert manifest["sizes"] == [{"name": "L", "min": 1, "max": MAX_LEN}]
    assert manifest["inputs"][0]["shape"] == [1, "L", HIDDEN]
    x = np.zeros((1, MAX_LEN + 1, HIDDEN), "float32")
    y = np.zeros_like(x)
    run = getattr(lib.lib, "attn_run")
    ptr = [lib.ffi.cast("void *", a.ctypes.data) for a in (x, y)]
    assert run(MAX_LEN + 1, *ptr) == 6 and run(0, *ptr) == 6
    assert "L = 0 is outside [1, 24]" in lib.last_error()
    profile, seconds = getattr(lib.lib, "attn_profile"), lib.ffi.new("double[]", 64)
    assert profile(MAX_LEN + 1, *ptr, 1, seconds) == 6 and profile(3, *ptr, 0, seconds) == 7
    assert "calls must be at least 1" in lib.last_error()
    prof = lib.profile({"x": feed(5)}, repeat=2, hot=True)
    assert len(prof) == len(manifest["kernels"]) and all(t >= 0 for _, t in prof)
    assert sum(t for _, t in prof) > 0
    with pytest.raises(FeedError, match=r"\(L\); the model runs at L in \[1, 24\]"):
        lib.run({"x": x})
    assert not isinstance(FeedError("x"), LibraryError)


def test_an_input_with_the_same_dim_param_shares_the_size():
    """x and m both declare (1, "L", 4): shapes= gives x's range, m follows; feeds that
    disagree on L are a FeedError."""
    x = oh.make_tensor_value_info("x", TP.FLOAT, [1, "L", 4])
    mask = oh.make_tensor_value_info("m", TP.FLOAT, [1, "L", 4])
    y = oh.make_tensor_value_info("y", TP.FLOAT, None)
    m = oh.make_model(oh.make_graph([oh.make_node("Add", ["x", "m"], ["y"], name="add")],
                                    "two", [x, mask], [y]),
                      opset_imports=[oh.make_opsetid("", 17)])
    g = from_onnx(m, shapes={"x": (1, (1, 16), 4)})
    assert str(g.types["m"]) == "float32[1, L, 4]"
    mod = build_graph(g, quiet=True)
    a, b = feed(5)[:, :, :4], feed(6)[:, :5, :4]
    np.testing.assert_allclose(mod.run({"x": a, "m": b})[0], a + b, rtol=1e-6)
    with pytest.raises(FeedError, match="input 'm' has shape \\(1, 6, 4\\)"):
        mod.run({"x": a, "m": feed(6)[:, :, :4]})
