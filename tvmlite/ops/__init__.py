"""The operator library: compute definitions only (schedules live in tvmlite.schedules).

Each operator takes sizes, options and a dtype as plain arguments and returns the list of
tensors to build, inputs first and the output last, e.g. ``matmul(M, N, K) -> [A, B, C]``.
Plain arguments (not tensors) make an operator a workload that search tasks and tuning
records can name and re-create. Bad arguments raise ValueError naming the argument.

Map:
  linalg.py      matmul, batch_matmul, dense (+bias, +relu), norm2
  nn.py          conv1d, conv2d_nchw, conv2d_nhwc, depthwise_conv2d_nchw/nhwc,
                 conv3d_ndhwc, max_pool2d, avg_pool2d
  elementwise.py add, relu, bias_add, softmax
  quantized.py   qmatmul, qdense, qconv2d_nchw, qconv2d_nhwc (uint8/int8, int32 sums,
                 zero points, requantize with bias and ReLU)
  common.py      argument checks, output-size arithmetic, the "pad" stage
"""
from __future__ import annotations

from typing import Callable

from tvmlite.ops.elementwise import add, bias_add, relu, softmax
from tvmlite.ops.linalg import batch_matmul, dense, matmul, norm2
from tvmlite.ops.nn import (
                            avg_pool2d,
                            conv1d,
                            conv2d_nchw,
                            conv2d_nhwc,
                            conv3d_ndhwc,
                            depthwise_conv2d_nchw,
                            depthwise_conv2d_nhwc,
                            max_pool2d,
)
from tvmlite.ops.quantized import qconv2d_nchw, qconv2d_nhwc, qdense, qmatmul

OPS: dict[str, Callable[..., list]] = {
    "matmul": matmul,
    "batch_matmul": batch_matmul,
    "dense": dense,
    "conv1d": conv1d,
    "conv2d_nchw": conv2d_nchw,
    "conv2d_nhwc": conv2d_nhwc,
    "depthwise_conv2d_nchw": depthwise_conv2d_nchw,
    "depthwise_conv2d_nhwc": depthwise_conv2d_nhwc,
    "conv3d_ndhwc": conv3d_ndhwc,
    "max_pool2d": max_pool2d,
    "avg_pool2d": avg_pool2d,
    "softmax": softmax,
    "norm2": norm2,
    "add": add,
    "relu": relu,
    "bias_add": bias_add,
    "qmatmul": qmatmul,
    "qdense": qdense,
    "qconv2d_nchw": qconv2d_nchw,
    "qconv2d_nhwc": qconv2d_nhwc,
}

__all__ = ["OPS", *OPS]
