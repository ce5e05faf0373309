"""AutoTVM-style schedule templates (knobs -> Steps) for the operator library, and the
hand-written expert recipes (``recipes``).

Importing this package registers one template per operator under its ``tvmlite.ops``
name; each is callable with exactly the operator's arguments and picks its config from
the dispatch context (``search.apply_history_best``), else its fallback config:

    with search.apply_history_best("matmul.jsonl"):
        s, tensors = tvmlite.schedules.matmul(512, 512, 512, "float32")

Map: linalg.py (matmul, batch_matmul, dense) · conv.py (conv1d, conv2d_nchw,
conv2d_nhwc, depthwise_conv2d_nchw/nhwc) · reduce.py (softmax, norm2) · dot.py (qmatmul
with dot-product intrinsics: knob ``tensorize``) · recipes.py.
"""
from __future__ import annotations

from tvmlite.schedules import dot, recipes
from tvmlite.schedules.conv import (
                                    conv1d,
                                    conv2d_nchw,
                                    conv2d_nhwc,
                                    depthwise_conv2d_nchw,
                                    depthwise_conv2d_nhwc,
)
from tvmlite.schedules.linalg import batch_matmul, dense, matmul
from tvmlite.schedules.reduce import norm2, softmax

__all__ = ["dot", "recipes", "matmul", "batch_matmul", "dense", "conv1d", "conv2d_nchw",
           "conv2d_nhwc", "depthwise_conv2d_nchw", "depthwise_conv2d_nhwc", "softmax", "norm2"]
