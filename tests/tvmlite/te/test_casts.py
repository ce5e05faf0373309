"""tvmlite/te/casts.py: te.cast, plain (wrapping as numpy's astype) and saturating (clipped
to the target's range first, NaN to 0 for integers), built and run on this machine, every
boundary compared with numpy."""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import tvmlite
from tvmlite import te
from tvmlite.te.casts import saturate_bounds

F32_EDGES = np.array([-1e10, -129.0, -128.5, -128.0, -127.9, -0.7, 0.0, 0.7, 126.5, 127.0,
                      127.9, 128.0, 255.0, 255.5, 256.0, 300.0, 65504.0, 65520.0, 70000.0,
                      1e10, np.inf, -np.inf, np.nan], dtype=np.float32)


def _run(src: str, dsts: tuple, x: np.ndarray, saturate: bool) -> list:
    """Each cast of ``x`` (a ``src`` array) to ``dsts``: one stage vectorized, and the same
    casts in scalar stages, so both code paths are compared."""
    n = x.size
    A = te.placeholder((n,), src, name="A")
    def stage(d: str, name: str) -> te.Tensor:
        return te.compute((n,), lambda i: te.cast(A[i], d, saturate=saturate), name=name)
    outs = [stage(d, f"V{k}") for k, d in enumerate(dsts)]
    outs += [stage(d, f"S{k}") for k, d in enumerate(dsts)]
    s = te.create_schedule([o.op for o in outs])
    for o in outs[:len(dsts)]:
        _, xi = s[o].split(o.op.axis[0], factor=8)
        s[o].vectorize(xi)
    mod = tvmlite.build(s, [A, *outs])
    got = [tvmlite.nd.empty((n,), o.dtype) for o in outs]
    mod(x, *got)
    return [g.numpy() for g in got]


def _saturated(x: np.ndarray, dst: str) -> np.ndarray:
    """numpy's clip, then astype (NaN to 0 first for an integer ``dst``)."""
    np_dt = np.dtype(ml_dtypes.bfloat16) if dst == "bfloat16" else np.dtype(dst)
    if np_dt.kind in "iu":
        info = np.iinfo(np_dt)
        hi = np.nextafter(np.float32(info.max), np.float32(0)) if dst == "int32" else info.max
        return np.clip(np.where(np.isnan(x), 0, x), info.min, hi).astype(np_dt)
    finfo = ml_dtypes.finfo(np_dt)
    return np.clip(x, float(finfo.min), float(finfo.max)).astype(np_dt)


def test_saturating_casts_of_float32_clip_at_every_boundary():
    dsts = ("int8", "uint8", "int16", "int32", "float16", "bfloat16")
    got = _run("float32", dsts, F32_EDGES, saturate=True)
    for k, d in enumerate(dsts):
        want = _saturated(F32_EDGES, d)
        for g in (got[k], got[k + len(dsts)]):
            if d in ("float16", "bfloat16"):
                np.testing.assert_array_equal(g.astype(np.float32), want.astype(np.float32))
            else:
                np.testing.assert_array_equal(g, want, err_msg=d)
    i8 = got[0]
    assert i8[F32_EDGES.tolist().index(300.0)] == 127 and i8[-1] == 0   # NaN -> 0
    assert i8[F32_EDGES.tolist().index(-1e10)] == -128
    assert i8[F32_EDGES.tolist().index(-128.5)] == -128                  # truncation


def test_saturating_casts_between_integers_and_plain_casts_wrapping_as_numpy():
    x = np.array([-2**31, -40000, -129, -128, -1, 0, 127, 128, 255, 256, 40000, 2**31 - 1],
                 dtype=np.int32)
    sat = _run("int32", ("int8", "uint8", "int16"), x, saturate=True)
    plain = _run("int32", ("int8", "uint8", "int16"), x, saturate=False)
    for k, d in enumerate(("int8", "uint8", "int16")):
        info = np.iinfo(d)
        np.testing.assert_array_equal(sat[k], np.clip(x, info.min, info.max).astype(d))
        np.testing.assert_array_equal(sat[k + 3], sat[k])
        np.testing.assert_array_equal(plain[k], x.astype(d))             # wraps
        np.testing.assert_array_equal(plain[k + 3], x.astype(d))
    y = np.array([-128, -1, 0, 1, 127], dtype=np.int8)
    (u, u_s) = _run("int8", ("uint8",), y, saturate=True)
    np.testing.assert_array_equal(u, [0, 0, 0, 1, 127])
    np.testing.assert_array_equal(u_s, u)


def test_saturate_bounds_are_inside_the_range_in_the_source_dtype():
    assert saturate_bounds("int8", "int32") == (None, None)       # nothing to clip
    assert saturate_bounds("uint8", "int8") == (None, 127)
    assert saturate_bounds("int8", "uint8") == (0, None)
    lo, hi = saturate_bounds("float32", "int32")                   # 2^31 is not an int32
    assert hi == float(np.nextafter(np.float32(2**31), np.float32(0))) and lo == -2.0**31
    assert str(te.cast(te.placeholder((2,), "int8", name="B")[0], "int32", True)) == "int32(B[0])"
    with pytest.raises(TypeError, match="te.cast: dtype must be one of"):
        te.cast(1, "float8")
