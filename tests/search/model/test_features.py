"""Per-store features of the loop IR (tvmlite.search.model.features): shapes and finiteness for
every operator, exact values on small matmuls, a reuse sanity check and a speed check."""
from __future__ import annotations

import math

import numpy as np
import pytest

from tvmlite import te
from tvmlite.ir.stmt import Store, walk_stmts
from tvmlite.ops import OPS
from tvmlite.passes.pipeline import loop_nest, lower
from tvmlite.schedule.state import ScheduleError
from tvmlite.schedules.recipes import gemm_packed
from tvmlite.search.model import features as F
from tvmlite.target.target import Target

SMALL = {
    "matmul": dict(M=8, N=8, K=8),
    "batch_matmul": dict(B=2, M=4, N=8, K=4),
    "dense": dict(N=3, K=8, M=5, bias=True, relu=True),
    "conv1d": dict(N=1, L=9, CI=2, CO=4, kernel=3, padding=1),
    "conv2d_nchw": dict(N=1, CI=4, H=9, W=11, CO=6, kernel=3, stride=2, padding=1,
                        dilation=2, groups=2),
    "conv2d_nhwc": dict(N=1, H=6, W=7, CI=3, CO=4, kernel=3, padding=1),
    "depthwise_conv2d_nchw": dict(N=1, C=3, H=7, W=7, kernel=3, padding=1),
    "depthwise_conv2d_nhwc": dict(N=1, H=7, W=7, C=3, kernel=3, stride=2, padding=1),
    "conv3d_ndhwc": dict(N=1, D=4, H=5, W=5, CI=2, CO=3, kernel=3, padding=1),
    "max_pool2d": dict(N=1, C=3, H=9, W=8, kernel=3, stride=2, padding=1),
    "avg_pool2d": dict(N=1, C=3, H=9, W=8, kernel=3, stride=2, padding=1,
                       count_include_pad=False),
    "softmax": dict(N=3, M=7),
    "norm2": dict(N=5, M=7),
    "add": dict(shape=(3, 5, 2)),
    "relu": dict(shape=7, dtype="int32"),
    "bias_add": dict(shape=(2, 3, 5), axis=1),
    # the quantized operators (uint8 data, int8 weights, int32 sums, a requantize)
    "qmatmul": dict(M=5, N=7, K=9, data_zp=3, weight_zp=-2),
    "qdense": dict(N=3, K=9, M=5, data_zp=7, scale=0.37, out_zp=11, bias=True),
    "qconv2d_nchw": dict(N=1, CI=4, H=7, W=7, CO=6, kernel=3, padding=1, groups=2,
                         data_zp=5, weight_zp=1, out_zp=100, relu=True),
    "qconv2d_nhwc": dict(N=1, H=6, W=5, CI=3, CO=4, kernel=3, padding=1,
                         data_zp=4, scale=0.5, out_zp=128),
}
COL = {name: i for i, name in enumerate(F.FEATURE_NAMES)}


@pytest.fixture(scope="module")
def target() -> Target:
    return Target.host()


def _log(x: float) -> float:
    return math.log2(1 + x)


def _n_stores(func) -> int:
    return sum(isinstance(s, Store) for s in walk_stmts(func.body))


def _check(func, target: Target) -> np.ndarray:
    x = F.extract(func, target)
    assert x.dtype == np.float32
    assert x.shape == (_n_stores(func), F.N_FEATURES)
    assert np.isfinite(x).all() and (x >= 0).all()
    return x


def _matmul(n: int):
    A, B, C = OPS["matmul"](n, n, n)
    return te.create_schedule(C.op), [A, B, C]


def test_names_are_stable_and_unique() -> None:
    assert len(F.FEATURE_NAMES) == F.N_FEATURES == len(set(F.FEATURE_NAMES))
    assert F.FEATURE_NAMES[:2] == ("float_addsub", "float_mul")
    assert "buf4_stride" in COL and "ai_curve_9" in COL


def test_every_op_is_covered() -> None:
    assert set(SMALL) == set(OPS)


@pytest.mark.parametrize("name", sorted(SMALL))
def test_default_schedule_of_every_op(name: str, target: Target) -> None:
    tensors = OPS[name](**SMALL[name])
    s = te.create_schedule(tensors[-1].op)
    x = _check(loop_nest(s, tensors), target)
    assert x.shape[0] >= 1
    assert (x[:, COL["vec_pos_none"]] == 1).all()


def test_gemm_packed_recipe(target: Target) -> None:
    s, args = gemm_packed(64, 64, 64, 16)
    x = _check(loop_nest(s, args), target)
    update = x[x[:, COL["is_update"]] == 1]
    assert len(update) == 1
    assert update[0, COL["vec_len"]] == pytest.approx(_log(16))
    assert update[0, COL["unroll_num"]] == pytest.approx(_log(2))
    assert update[0, COL["parallel_pos_outer"]] == 1
    assert update[0, COL["is_local"]] == 1 and update[0, COL["enclosing_allocs"]] == 1
    assert x[:, COL["is_init"]].sum() == 1
    assert (x[:, COL["parallel_num"]] == 1).all()


def test_conv2d_split_vectorized_parallel(target: Target) -> None:
    tensors = OPS["conv2d_nchw"](N=1, CI=8, H=10, W=10, CO=8, kernel=3, padding=1)
    out = tensors[-1]
    s = te.create_schedule(out.op)
    _, f, h, w = s[out].op.axis
    rc, ry, rx = s[out].op.reduce_axis
    fo, fi = s[out].split(f, factor=4)
    ho, hi = s[out].split(h, factor=3)        # imperfect: a guard
    wo, wi = s[out].split(w, factor=5)
    s[out].reorder(fo, ho, wo, rc, ry, rx, hi, fi, wi)
    s[out].vectorize(wi)
    s[out].unroll(hi)
    s[out].parallel(fo)
    s[s.tensor("pad")].compute_at(s[out], wo)
    x = _check(loop_nest(s, tensors), target)
    conv = x[x[:, COL["is_update"]] == 1][0]
    assert conv[COL["vec_len"]] == pytest.approx(_log(5))
    assert conv[COL["parallel_len"]] == pytest.approx(_log(2))
    assert conv[COL["num_guards"]] > 0
    pad_rows = x[x[:, COL["is_local"]] == 1]
    assert len(pad_rows) == 1 and pad_rows[0, COL["alloc_outer_prod"]] > 0


def test_matmul_op_counts(target: Target) -> None:
    s, args = _matmul(8)
    x = _check(loop_nest(s, args), target)
    init, update = x
    assert update[COL["float_mul"]] == pytest.approx(_log(512))
    assert update[COL["float_addsub"]] == pytest.approx(_log(512))
    assert update[COL["int_addsub"]] == 0 and update[COL["float_div"]] == 0
    assert init[COL["float_mul"]] == 0 and init[COL["float_addsub"]] == 0
    assert init[COL["is_init"]] == 1 and update[COL["is_update"]] == 1
    assert update[COL["outer_prod"]] == pytest.approx(_log(512))
    assert update[COL["num_loops"]] == pytest.approx(_log(3))
    assert update[COL["buf0_readwrite"]] == 1
    # C[i, j] is re-read across the k loop: loop-multiple-read reuse, 8 times
    assert update[COL["buf0_reuse_loop"]] == 1
    assert update[COL["buf0_reuse_ct"]] == pytest.approx(_log(8))
    assert update[COL["ai_curve_9"]] > 0


def test_vectorize_length_and_position(target: Target) -> None:
    s, args = _matmul(16)
    C = args[-1]
    k = s[C].op.reduce_axis[0]
    s[C].reorder(s[C].op.axis[0], k, s[C].op.axis[1])
    s[C].vectorize(s[C].op.axis[1])
    x = _check(loop_nest(s, args), target)
    assert np.allclose(x[:, COL["vec_len"]], _log(16))
    assert (x[:, COL["vec_pos_inner"]] == 1).all()
    assert (x[:, COL["vec_num"]] == 1).all()


def test_parallel_feature(target: Target) -> None:
    s, args = _matmul(16)
    x = _check(loop_nest(s, args), target)
    assert (x[:, COL["parallel_num"]] == 0).all() and (x[:, COL["parallel_pos_none"]] == 1).all()
    C = args[-1]
    s[C].parallel(s[C].op.axis[0])
    x = _check(loop_nest(s, args), target)
    assert (x[:, COL["parallel_num"]] == 1).all()
    assert np.allclose(x[:, COL["parallel_len"]], _log(16))
    assert (x[:, COL["parallel_pos_outer"]] == 1).all()
    assert (x[:, COL["parallel_per_core"]] > 0).all()


def test_auto_unroll_pragma(target: Target) -> None:
    s, args = _matmul(8)
    C = args[-1]
    s[C].pragma(s[C].op.axis[0], "auto_unroll_max_step", 16)
    x = _check(loop_nest(s, args), target)
    assert np.allclose(x[:, COL["auto_unroll_max_step"]], _log(16))


def _lines_per_execution(row: np.ndarray) -> float:
    """Cache lines the store touches per execution, summed over its buffers."""
    lines = sum(2 ** row[COL[f"buf{b}_lines"]] - 1 for b in range(F.MAX_BUFFERS))
    return lines / (2 ** row[COL["outer_prod"]] - 1)


def test_tiling_reduces_lines_and_raises_intensity(target: Target) -> None:
    s, args = _matmul(16)
    naive = F.schedule_features(s, args, target)[1]
    C = args[-1]
    i, j = s[C].op.axis
    io, jo, ii, ji = s[C].tile(i, j, 4, 8)
    ko, ki = s[C].split(s[C].op.reduce_axis[0], factor=4)
    s[C].reorder(io, jo, ko, ii, ki, ji)
    tiled = F.schedule_features(s, args, target)[1]
    # the naive nest walks B down a column (a new line per k); the tile walks rows
    assert _lines_per_execution(tiled) < _lines_per_execution(naive) / 4
    # the innermost tile's footprint is smaller per op: higher intensity at the first sample
    assert tiled[COL["ai_curve_0"]] > naive[COL["ai_curve_0"]]
    # total work and unique data are the same
    assert tiled[COL["float_mul"]] == naive[COL["float_mul"]]
    assert tiled[COL["buf0_unique_bytes"]] == naive[COL["buf0_unique_bytes"]]


def test_lines_are_counted_in_the_targets_cache_lines(target: Target) -> None:
    """A row-major read of 16 float32 (64 bytes) is one 64-byte line or half a
    128-byte one: the line size is the target's, not a constant."""
    import dataclasses
    s, args = _matmul(16)
    t64 = dataclasses.replace(target, cache_line_bytes=64)
    t128 = dataclasses.replace(target, cache_line_bytes=128)
    f64, f128 = (F.schedule_features(s, args, t)[1] for t in (t64, t128))
    cols = [COL[f"buf{b}_unique_lines"] for b in range(F.MAX_BUFFERS)]
    lines64 = sum(2 ** f64[c] - 1 for c in cols)
    lines128 = sum(2 ** f128[c] - 1 for c in cols)
    assert lines128 < lines64 <= 2 * lines128 + F.MAX_BUFFERS
    same = [c for c in range(F.N_FEATURES) if "lines" not in F.FEATURE_NAMES[c]]
    np.testing.assert_array_equal(f64[same], f128[same])


def test_schedule_features_equals_extract(target: Target) -> None:
    s, args = gemm_packed(32, 32, 32, 16)
    np.testing.assert_array_equal(F.schedule_features(s, args, target),
                                  F.extract(loop_nest(s, args, vector_bytes=target.vector_bytes),
                                            target))


def test_errors(target: Target) -> None:
    s, args = gemm_packed(16, 16, 16, 16)
    func = loop_nest(s, args)
    with pytest.raises(TypeError, match="func"):
        F.extract("not a func", target)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="target"):
        F.extract(func, "llvm")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="loop_nest"):
        F.extract(lower(s, args), target)
    with pytest.raises(ScheduleError):
        F.schedule_features(s, [*args[:2], s.tensor("C_local"), args[2]], target)


def test_extract_on_a_packed_gemm(target: Target) -> None:
    """The program the search scores most (a packed GEMM with its copy stage): one finite
    row of FEATURE_NAMES per store, the same on every call. Its speed (the search scores
    thousands a round) is a benchmark's question, not a unit test's on a shared machine."""
    s, args = gemm_packed(256, 256, 256, 64)
    func = loop_nest(s, args)
    first = F.extract(func, target)
    assert first.ndim == 2 and first.shape[0] >= 2 and first.shape[1] == len(F.FEATURE_NAMES)
    assert np.isfinite(first).all()
    assert np.array_equal(first, F.extract(func, target))


def test_program_scale_is_the_float_work_of_the_whole_program(target: Target) -> None:
    """Every row of a program gets log2(1 + its float ops): 2 M N K for a GMM, so the
    scale tells sizes of one dynamic compute apart (a size-independent store's own row
    cannot)."""
    def scale(m):
        A, B, C = OPS["matmul"](m, 32, 16)
        s = te.create_schedule(C.op)
        rows = F.schedule_features(s, [A, B, C], target)
        col = F.program_scale(rows)
        assert col.shape == (len(rows),) and np.all(col == col[0])
        return float(col[0])
    assert scale(8) == pytest.approx(math.log2(1 + 2 * 8 * 32 * 16), rel=1e-3)
    assert scale(64) - scale(8) == pytest.approx(3.0, abs=1e-2)
