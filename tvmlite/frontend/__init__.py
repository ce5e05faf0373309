"""Model importers: ``from_onnx`` (the ``onnx`` package reads the file; its ops are
converted by opset in ``converters.py``) and ``onnx_backend``, onnx's Backend interface.

Map: onnx.py (loading, checks, the import loop) · converters.py (one function per op) ·
quantized_converters.py (the quantized ops) ·
decompositions.py (ops converted as several nodes) · common.py (the converters' context
and helpers) · scope.py (what the import claims: ops, opsets, dtypes) · onnx_backend.py.
"""
from __future__ import annotations

from tvmlite.frontend.converters import ConversionError
from tvmlite.frontend.onnx import OnnxImportError, UnsupportedOpsError, from_onnx

__all__ = ["from_onnx", "OnnxImportError", "UnsupportedOpsError", "ConversionError"]
