"""An exported model library loaded back into Python: what ``tvmlite run DIR`` calls.

``ModelLibrary(dir)`` reads ``manifest.json``, loads ``lib<name>.so`` with cffi (the
declarations are the exported headers' own), and calls ``<name>_init`` on the weights
file. ``run(feeds)`` checks every feed against the manifest (name, shape, dtype: each
error names the input) and calls ``<name>_run``; ``time_run`` gives the latency of
whole runs, and ``profile`` the time of each fused kernel inside runs (``<name>_profile``),
as the run reaches it or hot in cache. A model with a symbolic size
(manifest ``sizes``) reads it from the feeds' shapes, checks its range (a FeedError) and
passes it first to ``<name>_run`` and to the kernels that take it.
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

    def _shape(self, spec: dict, sizes: dict[str, int]) -> tuple[int, ...]:
        """A manifest value's shape at ``sizes`` (its ``affine`` dims when symbolic)."""
        if "affine" not in spec or not sizes:
            return tuple(spec["shape"])
        (n,) = sizes.values()
        return tuple(a * n + b for a, b in spec["affine"])

    def _check(self, feeds: Mapping[str, Any]) -> tuple[list[np.ndarray], dict[str, int]]:
        inputs = self.manifest["inputs"]
        names = [i["name"] for i in inputs]
        for k in feeds:
            if k not in names:
                raise FeedError(f"run: {k!r} is not an input of {self.name} (inputs: {names})")
        sizes: dict[str, int] = {}
        ranges = {s["name"]: (s["min"], s["max"]) for s in self.manifest.get("sizes", [])}
        for spec in inputs:   # the symbolic size, from the first input that has it bare
            a = np.asarray(feeds[spec["name"]]) if spec["name"] in feeds else None
            if a is None or a.ndim != len(spec["shape"]):
                continue
            for d, (want, got) in enumerate(zip(spec["shape"], a.shape)):
                if want in ranges and want not in sizes:
                    lo, hi = ranges[want]
                    if not lo <= got <= hi:
                        raise FeedError(f"run: input {spec['name']!r} has size {got} on axis "
                                        f"{d} ({want}); the model runs at {want} in "
                                        f"[{lo}, {hi}]")
                    sizes[want] = int(got)
        out = []
        for spec in inputs:
            n = spec["name"]
            if n not in feeds:
                raise FeedError(f"run: input {n!r} is not given (inputs: {names})")
            a = np.asarray(feeds[n])
            if a.shape != self._shape(spec, sizes):
                raise FeedError(f"run: input {n!r} has shape {tuple(a.shape)}, the model "
                                f"takes {tuple(spec['shape'])}")
            if a.dtype.name != spec["dtype"]:
                raise FeedError(f"run: input {n!r} has dtype {a.dtype.name}, the model takes "
                                f"{spec['dtype']}")
            out.append(np.asarray(a, order="C"))
        return out, sizes

    def _call(self, feeds: Mapping[str, Any]) -> tuple[Any, list[np.ndarray], list[Any]]:
        """The run function, the input and output arrays (the caller keeps them alive
        while C holds their pointers) and the arguments (the size first, if any)."""
        ins, sizes = self._check(feeds)
        outs = [empty(self._shape(o, sizes), o["dtype"]) for o in self.manifest["outputs"]]
        ptrs = list(sizes.values()) + [self.ffi.cast("void *", a.ctypes.data)
                                       for a in ins + outs]
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

    def profile(self, feeds: Mapping[str, Any], repeat: int = 5,
                hot: bool = False) -> list[tuple[str, float]]:
        """(kernel name, median seconds) of each kernel, in run order, timed inside
        ``<name>_profile`` runs: on the run's own buffers (arena, pre-packed weights), each
        kernel as the run reaches it -- its inputs just written by the kernels before,
        its weights wherever the last run left them -- so the times add up to a run. With
        ``hot``, each is timed after two more calls of it on the same buffers, its inputs
        in cache: as a tuner times it, which is what the gap between the two shows."""
        if not isinstance(repeat, int) or repeat < 1:
            raise ValueError(f"profile(repeat=...) takes a count of at least 1, got {repeat!r}")
        try:
            fn = getattr(self.lib, f"{self.name}_profile")
        except AttributeError:
            raise LibraryError(f"{self.dir} has no {self.name}_profile (exported by an "
                               f"older tvmlite): export the model again") from None
        _, arrays, ptrs = self._call(feeds)   # arrays: alive while C uses the pointers
        n = len(self.manifest["kernels"])
        seconds = self.ffi.new("double[]", n)
        runs: list[list[float]] = [[] for _ in range(n)]
        for r in range(repeat + 1):   # the first run warms up
            if fn(*ptrs, 3 if hot else 1, seconds) != 0:
                raise LibraryError(f"{self.name}_profile: {self.last_error()}")
            if r:
                for i in range(n):
                    runs[i].append(seconds[i])
        return [(k["name"], statistics.median(t))
                for k, t in zip(self.manifest["kernels"], runs)]
