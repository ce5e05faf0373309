import numpy as np
import pytest

import tvmlite
from tvmlite.runtime.arrays import ALIGNMENT, asaligned, empty, full, is_aligned


@pytest.mark.parametrize("shape", [7, (3, 5), (1, 1, 1), (0, 4), (129, 33)])
@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "int64"])
def test_empty_is_aligned_contiguous_and_writable(shape, dtype):
    for _ in range(5):                                 # several allocations, several offsets
        a = empty(shape, dtype)
        assert a.shape == ((shape,) if isinstance(shape, int) else shape)
        assert a.dtype == np.dtype(dtype) and a.flags.c_contiguous and a.flags.writeable
        assert a.size == 0 or a.ctypes.data % ALIGNMENT == 0   # (no data, no address)
        a[...] = 3
        assert (a == 3).all()


def test_full():
    a = full((4, 4), np.nan)
    assert is_aligned(a) and np.isnan(a).all() and a.dtype == np.float32


def test_asaligned_copies_only_when_needed():
    raw = np.arange(100, dtype=np.float32)
    off = raw[(-raw.ctypes.data % 64) // 4 + 1:][:50]
    assert not is_aligned(off)
    b = asaligned(off)
    assert is_aligned(b) and np.array_equal(b, off) and b is not off
    assert asaligned(b) is b
    c = asaligned(b, "float64")                          # a dtype change copies
    assert c.dtype == np.float64 and is_aligned(c)
    t = asaligned(np.ones((4, 6), np.float32).T)          # non-contiguous -> contiguous copy
    assert t.flags.c_contiguous and is_aligned(t)


def test_top_level_names():
    assert tvmlite.empty is empty and tvmlite.asaligned is asaligned


def test_seeded_inputs_are_aligned_and_unchanged_in_value():
    from tvmlite import te
    from tvmlite.testing.check import random_inputs
    A = te.placeholder((33, 17), name="A")
    B = te.placeholder((5,), name="B", dtype="int32")
    a, b = random_inputs([A, B], seed=3)
    assert is_aligned(a) and is_aligned(b)
    rng = np.random.default_rng(3)
    np.testing.assert_array_equal(a, rng.uniform(-1, 1, (33, 17)).astype("float32"))


def test_nd_array_is_an_aligned_copy_with_tvms_accessors():
    src = np.arange(12, dtype="float32").reshape(3, 4)
    a = tvmlite.nd.array(src, tvmlite.cpu(0))
    assert is_aligned(a.data) and a.shape == (3, 4) and a.dtype == "float32"
    out = a.numpy()
    out[0, 0] = 99                        # a copy, as TVM's numpy() is
    assert a.data[0, 0] == 0 and np.array_equal(a.asnumpy(), src)
    a.copyfrom(src * 2)
    assert np.array_equal(a.numpy(), src * 2)
    with pytest.raises(ValueError, match="copyfrom"):
        a.copyfrom(np.zeros(3, "float32"))
    e = tvmlite.nd.empty((5,), "int32")
    assert e.shape == (5,) and e.dtype == "int32" and e.device == tvmlite.cpu()


def test_devices_are_this_cpu_only():
    from tvmlite.runtime.device import Device
    assert tvmlite.cpu(0) == Device() and tvmlite.cpu(0).device_type == 1
    with pytest.raises(ValueError, match="CPU only"):
        Device("cuda")
    with pytest.raises(ValueError):
        tvmlite.cpu(-1)
    with pytest.raises(TypeError, match="dev must be a tvmlite.cpu"):
        tvmlite.nd.array(np.zeros(2), "cuda")
