"""onnx's Backend interface over tvmlite, so onnx's own backend test suite
(``onnx.backend.test.BackendTest``) runs against tvmlite.

``TvmliteBackend.prepare(model)`` imports the model (``from_onnx``, every input shape
taken from the model), builds it for this CPU (``tvmlite.build``) and returns a
``TvmliteRep`` whose ``run(inputs)`` takes the inputs in the graph's input order (a list)
or by name (a dict) and returns the outputs in the model's order.
"""
from __future__ import annotations

from typing import Any, Mapping

import numpy as np
from onnx.backend.base import Backend, BackendRep

from tvmlite.frontend.onnx import from_onnx
from tvmlite.graph.build import build_graph

__all__ = ["TvmliteBackend", "TvmliteRep", "prepare", "run_model", "supports_device"]


class TvmliteRep(BackendRep):
    """A prepared (built) model."""

    def __init__(self, module: Any):
        self.module = module

    def run(self, inputs: Any, **kwargs: Any) -> tuple[np.ndarray, ...]:
        names = self.module.graph.inputs
        if isinstance(inputs, Mapping):
            feeds = dict(inputs)
        else:
            if isinstance(inputs, np.ndarray):
                inputs = [inputs]
            feeds = dict(zip(names, inputs))
        return tuple(self.module.run(feeds))


class TvmliteBackend(Backend):
    """onnx.backend.base.Backend for tvmlite (CPU only)."""

    @classmethod
    def prepare(cls, model: Any, device: str = "CPU", **kwargs: Any) -> TvmliteRep:
        super().prepare(model, device, **kwargs)
        graph = from_onnx(model)
        return TvmliteRep(build_graph(graph, quiet=True))

    @classmethod
    def run_model(cls, model: Any, inputs: Any, device: str = "CPU",
                  **kwargs: Any) -> tuple[np.ndarray, ...]:
        return cls.prepare(model, device, **kwargs).run(inputs)

    @classmethod
    def supports_device(cls, device: str) -> bool:
        return device == "CPU"


prepare = TvmliteBackend.prepare
run_model = TvmliteBackend.run_model
supports_device = TvmliteBackend.supports_device


