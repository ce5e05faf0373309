"""families: the kind of a workload's anchor read off its compute, and which tasks of a
tuning share a cost model (same kind, dtype, L2 side and target)."""
from __future__ import annotations

from dataclasses import replace

import pytest

from tvmlite import te
from tvmlite.search.records.workload import Workload
from tvmlite.search.template_free.families import anchor_kind, family_of, group_families
from tvmlite.target.target import Target

KINDS = [
    ("matmul", (8, 8, 8), {}, "matmul"),
    ("batch_matmul", (2, 8, 8, 8), {}, "matmul"),
    ("dense", (1, 64, 32), {}, "matmul"),
    ("conv2d_nhwc", (1, 6, 6, 4, 4, 3), {"padding": 1}, "conv"),
    ("conv2d_nchw", (1, 4, 6, 6, 4, 3), {"padding": 1, "stride": 2}, "conv"),
    ("conv2d_nhwc", (1, 6, 6, 4, 4, 1), {}, "matmul"),          # 1x1: a matmul over pixels
    ("depthwise_conv2d_nhwc", (1, 6, 6, 4, 3), {"padding": 1}, "depthwise"),
    ("depthwise_conv2d_nchw", (1, 4, 6, 6, 3), {"padding": 1}, "depthwise"),
    ("max_pool2d", (1, 4, 8, 8, 2), {}, "pool"),
    ("avg_pool2d", (1, 4, 8, 8, 2), {}, "pool"),
    ("softmax", (4, 8), {}, "reduce"),
    ("norm2", (8, 8), {}, "reduce"),
    ("relu", ((4, 8),), {}, "elementwise"),
]


@pytest.mark.parametrize("op,args,kwargs,kind", KINDS,
                         ids=[f"{k[0]}-{k[3]}" for k in KINDS])
def test_the_anchor_kind_is_read_off_the_compute(op, args, kwargs, kind):
    assert anchor_kind(Workload.from_op(op, *args, **kwargs)) == kind


def test_a_users_compute_is_classified_by_its_structure_not_its_name():
    A = te.placeholder((16, 24), name="A")
    B = te.placeholder((24, 32), name="B")
    k = te.reduce_axis((0, 24), name="k")
    C = te.compute((16, 32), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="conv")
    assert anchor_kind(Workload.from_tensors([A, B, C], name="conv")) == "matmul"


def test_families_split_by_kind_dtype_cache_side_and_target():
    target = Target.host()
    l2 = target.cache_bytes("L2") or 1 << 20
    small = Workload.from_op("matmul", 8, 8, 8)
    other = Workload.from_op("matmul", 16, 8, 32)
    # three float32 n x n matrices beyond the target's L2, whatever the CPU
    n = int((l2 / 12) ** 0.5) + 8
    big = Workload.from_op("matmul", n, n, n)
    ints = Workload.from_op("matmul", 8, 8, 8, "int32")
    conv = Workload.from_op("conv2d_nhwc", 1, 6, 6, 4, 4, 3, padding=1)
    assert family_of(small, target) == family_of(other, target)
    assert family_of(small, target) != family_of(big, target)
    assert family_of(small, target) != family_of(ints, target)
    assert family_of(small, target) != family_of(conv, target)
    renamed = replace(target, name="elsewhere")
    assert group_families([small, other, big, conv, small],
                          [target, target, target, target, renamed]) == [0, 0, 2, 3, 4]
