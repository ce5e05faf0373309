"""An exported model library loaded back into Python: what ``tvmlite run DIR`` calls.

``ModelLibrary(dir)`` reads ``manifest.json``, loads ``lib<name>.so`` with cffi (the
declarations are the exported headers' own), and calls ``<name>_init`` on the weights
file. ``run(feeds)`` checks every feed against the manifest (name, shape, dtype: each
error names the input) and calls ``<name>_run``; ``time_run`` gives the latency of
whole runs, and ``profile`` the time of each fused kernel through the kernels' own C
timers, on buffers laid out as the manifest says.
"""
from __future__ import annotations

import json
import statistics
import time
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from tvmlite.codegen_c import load_library
from tvmlite.graph.build import FeedError
from tvmlite.graph.ir import GraphError
from tvmlite.runtime.arrays import empty

__all__ = ["ModelLibrary", "LibraryError"]


class LibraryError(GraphError):
    """A model directory that cannot be loaded or initialized (the message says why)."""


def _declarations(header: str) -> str:
    """The C declarations of an exported header, without its preprocessor lines."""
    keep = [ln for ln in header.splitlines()
            if not ln.startswith(("#", "//", "extern \"C\"", "}"))]
    return "\n".join(keep) + "\n"


class ModelLibrary:
    """A loaded model library (a directory written by ``GraphModule.export_library``)."""

    def __init__(self, directory: str | Path):
        self.dir = Path(directory)
        mpath = self.dir / "manifest.json"
        if not mpath.is_file():
            raise LibraryError(f"{str(self.dir)!r} holds no manifest.json: not a model "
                               f"library written by tvmlite compile / export_library")
        try:
            self.manifest = json.loads(mpath.read_text())
            self.name = self.manifest["name"]
        except (ValueError, KeyError) as err:
            raise LibraryError(f"{str(mpath)!r} is not a model manifest: {err}") from err
        name = self.name
        decl = _declarations((self.dir / f"{name}.h").read_text())
        kernels = self.dir / f"{name}_kernels.h"
        if kernels.is_file():
            decl += _declarations(kernels.read_text())
        self.ffi, self.lib = load_library(self.dir / f"lib{name}.so", decl)
        weights = str(self.dir / self.manifest["weights"]["file"]).encode()
        if getattr(self.lib, f"{name}_init")(weights) != 0:
            raise LibraryError(f"{name}_init: {self.last_error()}")

    def last_error(self) -> str:
        return self.ffi.string(getattr(self.lib, f"{self.name}_last_error")()).decode()

    def set_num_threads(self, n: int) -> None:
        getattr(self.lib, f"{self.name}_set_num_threads")(n)

    def _check(self, feeds: Mapping[str, Any]) -> list[np.ndarray]:
        inputs = self.manifest["inputs"]
        names = [i["name"] for i in inputs]
        for k in feeds:
            if k not in names:
                raise FeedError(f"run: {k!r} is not an input of {self.name} (inputs: {names})")
        out = []
        for spec in inputs:
            n = spec["name"]
            if n not in feeds:
                raise FeedError(f"run: input {n!r} is not given (inputs: {names})")
            a = np.asarray(feeds[n])
            if list(a.shape) != spec["shape"]:
                raise FeedError(f"run: input {n!r} has shape {tuple(a.shape)}, the model "
                                f"takes {tuple(spec['shape'])}")
            if a.dtype.name != spec["dtype"]:
                raise FeedError(f"run: input {n!r} has dtype {a.dtype.name}, the model takes "
                                f"{spec['dtype']}")
            out.append(np.asarray(a, order="C"))
        return out

    def _call(self, feeds: Mapping[str, Any]) -> tuple[Any, list[np.ndarray], list[Any]]:
        """The run function, the input and output arrays (the caller keeps them alive
        while C holds their pointers) and the pointers."""
        ins = self._check(feeds)
        outs = [empty(tuple(o["shape"]), o["dtype"]) for o in self.manifest["outputs"]]
        ptrs = [self.ffi.cast("void *", a.ctypes.data) for a in ins + outs]
        return getattr(self.lib, f"{self.name}_run"), ins + outs, ptrs

    def run(self, feeds: Mapping[str, Any]) -> list[np.ndarray]:
        """The outputs, in the model's order."""
        fn, arrays, ptrs = self._call(feeds)
        if fn(*ptrs) != 0:
            raise LibraryError(f"{self.name}_run: {self.last_error()}")
        return arrays[len(self.manifest["inputs"]):]

    def time_run(self, feeds: Mapping[str, Any], repeat: int = 10) -> list[float]:
        """Seconds of each of ``repeat`` runs (after one warm-up run)."""
        fn, arrays, ptrs = self._call(feeds)   # arrays: alive while C uses the pointers
        fn(*ptrs)
        times = []
        for _ in range(repeat):
            t0 = time.perf_counter()
            fn(*ptrs)
            times.append(time.perf_counter() - t0)
        return times

    def profile(self, feeds: Mapping[str, Any], repeat: int = 5) -> list[tuple[str, float]]:
        """(kernel name, median seconds per call) of each kernel, in run order, timed
        by its C timer on buffers of the manifest's shapes (weights from the file)."""
        m = self.manifest
        blob = np.fromfile(self.dir / m["weights"]["file"], np.uint8)
        values: dict[str, np.ndarray] = {}
        for name, off in m["weight_offsets"].items():
            spec = m["values"].get(name)
            if spec is None:
                continue
            dt = np.dtype(spec["dtype"])
            n = int(np.prod(spec["shape"]))
            arr = empty(tuple(spec["shape"]), spec["dtype"])
            arr[...] = blob[off:off + n * dt.itemsize].view(dt).reshape(spec["shape"])
            values[name] = arr
        for spec, a in zip(m["inputs"], self._check(feeds)):
            values[spec["name"]] = a
        out = []
        for k in m["kernels"]:
            arrays = []
            for v in k["args"]:
                if v not in values:
                    spec = m["values"][v]
                    values[v] = empty(tuple(spec["shape"]), spec["dtype"])
                arrays.append(values[v])
            ptrs = [self.ffi.cast("void *", a.ctypes.data) for a in arrays]
            timer = getattr(self.lib, f"{k['function']}_time")
            times = [timer(*ptrs, 1) for _ in range(repeat)]
            out.append((k["name"], statistics.median(times)))
        return out
