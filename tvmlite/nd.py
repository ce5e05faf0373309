"""``tvmlite.nd``: TVM's array functions under their names (``tvm.nd.array``,
``tvm.nd.empty``, ``tvm.nd.NDArray``), defined in ``tvmlite.runtime.arrays``.

    dev = tvmlite.cpu(0)
    a = tvmlite.nd.array(np.random.rand(64, 64).astype("float32"), dev)
    c = tvmlite.nd.empty((64, 64), "float32", dev)
    mod(a, b, c); c.numpy()
"""
from __future__ import annotations

from tvmlite.runtime.arrays import NDArray
from tvmlite.runtime.arrays import nd_array as array
from tvmlite.runtime.arrays import nd_empty as empty
from tvmlite.runtime.device import Device, cpu

__all__ = ["NDArray", "array", "empty", "Device", "cpu"]
