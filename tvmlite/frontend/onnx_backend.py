"""onnx's Backend interface over tvmlite, so onnx's own backend test suite
(``onnx.backend.test.BackendTest``) runs against tvmlite.

``TvmliteBackend.prepare(model)`` imports the model (``from_onnx``, every input shape
taken from the model), builds it for this CPU (``tvmlite.build``) and returns a
``TvmliteRep`` whose ``run(inputs)`` takes the inputs in the model's input order (a
list) or by name (a dict) and returns the outputs in the model's order.

tvmlite compiles for static shapes, so a value that decides a shape (a Reshape's shape,
a Slice's starts, a reduction's axes: ``converters.CONSTANT_INPUTS``) must be known when
the model is built. When a model takes such a value as a run-time input, or has an
input whose shape the model leaves open, ``prepare`` cannot build it yet: the rep
builds it at ``run``, with those inputs bound to the values fed (and the open shapes
to the fed arrays' shapes), once per distinct binding.
"""
from __future__ import annotations

from typing import Any, Mapping

import numpy as np
from onnx.backend.base import Backend, BackendRep

from tvmlite.frontend.converters import CONSTANT_INPUTS
from tvmlite.frontend.onnx import from_onnx, load_model
from tvmlite.graph.build import GraphModule, build_graph

__all__ = ["TvmliteBackend", "TvmliteRep", "prepare", "run_model", "supports_device",
           "runtime_inputs", "bound_inputs", "open_inputs", "bind"]


def runtime_inputs(model: Any) -> list[str]:
    """The model's inputs fed at run time (those without an initializer), in order."""
    inits = {t.name for t in model.graph.initializer}
    return [vi.name for vi in model.graph.input if vi.name not in inits]


def bound_inputs(model: Any) -> list[str]:
    """The run-time inputs some node needs as a constant (``CONSTANT_INPUTS``)."""
    fed = set(runtime_inputs(model))
    out: list[str] = []
    for n in model.graph.node:
        for i in CONSTANT_INPUTS.get(n.op_type, ()):
            if i < len(n.input) and n.input[i] in fed and n.input[i] not in out:
                out.append(n.input[i])
    return out


def open_inputs(model: Any) -> list[str]:
    """The run-time inputs with a dimension the model does not fix (symbolic, or 0)."""
    inits = {t.name for t in model.graph.initializer}
    return [vi.name for vi in model.graph.input if vi.name not in inits and any(
        not d.HasField("dim_value") or d.dim_value < 1 for d in vi.type.tensor_type.shape.dim)]


def bind(model: Any, values: Mapping[str, np.ndarray]) -> Any:
    """A copy of ``model`` whose inputs named in ``values`` are initializers holding them."""
    from onnx import ModelProto, numpy_helper
    out = ModelProto()
    out.CopyFrom(model)
    for name, v in values.items():
        out.graph.initializer.append(numpy_helper.from_array(np.asarray(v), name))
    return out


class TvmliteRep(BackendRep):
    """A prepared model: built at ``prepare``, or at ``run`` when some of its inputs
    must be bound first (module docstring)."""

    def __init__(self, module: GraphModule | None = None, model: Any = None):
        if module is None and model is None:
            raise TypeError("TvmliteRep needs a built module or a model to build at run")
        self.module, self.model = module, model
        self.input_names = (list(module.graph.inputs) if module is not None
                            else runtime_inputs(model))
        self._built: dict[tuple, GraphModule] = {}

    @property
    def builds(self) -> int:
        """How many bindings were built at run so far (0 when built at prepare)."""
        return len(self._built)

    def _feeds(self, inputs: Any) -> dict[str, np.ndarray]:
        if isinstance(inputs, Mapping):
            return {k: np.asarray(v) for k, v in inputs.items()}
        if isinstance(inputs, np.ndarray):
            inputs = [inputs]
        return {k: np.asarray(v) for k, v in zip(self.input_names, inputs)}

    def _module_for(self, feeds: Mapping[str, np.ndarray]) -> GraphModule:
        if self.module is not None:
            return self.module
        bound = {k: feeds[k] for k in bound_inputs(self.model) if k in feeds}
        shapes = {k: feeds[k].shape for k in open_inputs(self.model)
                  if k in feeds and k not in bound}
        key = (tuple((k, v.dtype.str, v.shape, v.tobytes()) for k, v in bound.items()),
               tuple(shapes.items()))
        if key not in self._built:
            self._built[key] = build_graph(from_onnx(bind(self.model, bound), shapes=shapes),
                                           quiet=True)
        return self._built[key]

    def run(self, inputs: Any, **kwargs: Any) -> tuple[np.ndarray, ...]:
        feeds = self._feeds(inputs)
        module = self._module_for(feeds)
        return tuple(module.run({k: v for k, v in feeds.items() if k in module.graph.inputs}))


class TvmliteBackend(Backend):
    """onnx.backend.base.Backend for tvmlite (CPU only)."""

    @classmethod
    def prepare(cls, model: Any, device: str = "CPU", **kwargs: Any) -> TvmliteRep:
        super().prepare(model, device, **kwargs)
        proto = load_model(model)
        if bound_inputs(proto) or open_inputs(proto):
            return TvmliteRep(model=proto)
        return TvmliteRep(build_graph(from_onnx(proto), quiet=True))

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
