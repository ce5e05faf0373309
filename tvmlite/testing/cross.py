"""Run a schedule on a target this machine may not be: build it for the target, run it in
the C harness (under qemu when the architecture differs), return its outputs as numpy
arrays. What the tests of other architectures use to compare a kernel with numpy.

- ``cross_unavailable(target_name)``: why a target cannot be built and run here (its
  compiler, qemu or the sysroot is missing: the message names the Debian package), or None.
- ``run_on_target(s, tensors, target, inputs)``: the outputs of the kernel on ``inputs``
  (a pre-packed input is packed by its generated pack function in the harness first).
"""
from __future__ import annotations

import tempfile
from typing import Any, Sequence

import numpy as np

from tvmlite import te
from tvmlite.codegen_c import compile_shared
from tvmlite.codegen_c.harness import (
    EmulatorNotFoundError,
    build_harness,
    emulator_prefix,
    read_outputs,
    run_harness,
    write_inputs,
)
from tvmlite.runtime.module import generate_c
from tvmlite.target.target import CompilerNotFoundError, Target

__all__ = ["cross_unavailable", "run_on_target", "TensorArg", "harness_packs"]


class TensorArg:
    """A kernel argument as the harness sees it (dtype, shape, output or not)."""

    def __init__(self, t: te.Tensor):
        self.name, self.dtype = t.name, t.dtype
        self.shape = tuple(int(d) for d in t.shape)
        self.is_output = not isinstance(t.op, te.PlaceholderOp)


def cross_unavailable(target_name: str) -> str | None:
    """None when ``target_name`` can be compiled for and run here; else the reason."""
    try:
        target = Target.from_name(target_name)
        emulator_prefix(target.arch)
    except (CompilerNotFoundError, EmulatorNotFoundError) as e:
        return str(e)
    return None


def run_on_target(s: Any, tensors: Sequence[te.Tensor], target: Target,
                  inputs: Sequence[np.ndarray], threads: int | None = None,
                  timeout: float = 120.0, warnings_as_errors: bool = True) -> list[np.ndarray]:
    """Build schedule ``s`` of ``tensors`` for ``target`` (a Target or a name), run it once
    on ``inputs`` (the placeholders' arrays, in order) in the harness, return the outputs.
    With ``warnings_as_errors`` a compiler warning fails the build."""
    target = Target.resolve(target)
    func, source, _ = generate_c(s, list(tensors), target, name="tvmlite_kernel")
    lib = compile_shared(source, target, warnings_as_errors=warnings_as_errors)
    args = [TensorArg(t) for t in tensors]
    packs = harness_packs(func)
    exe = build_harness(args, target, packs=packs)
    with tempfile.TemporaryDirectory(prefix="tvmlite-cross-") as d:
        write_inputs(d, args, list(inputs))
        run_harness(exe, lib, "tvmlite_kernel", args, prefix=emulator_prefix(target.arch),
                    inputs_dir=d, outputs_dir=d, repeat=0, threads=threads, timeout=timeout,
                    packs=packs)
        return read_outputs(d, args)


def harness_packs(func: Any) -> tuple[dict, ...]:
    """A lowered kernel's pack functions as the harness takes them (``BuildResult.packs``'
    JSON shape): the function, the input it packs, the packed buffer's shape and dtype."""
    return tuple({"fn": p.func.name, "input": p.input,
                  "packed": {"name": p.packed, "shape": [int(d) for d in p.func.args[1].shape],
                             "dtype": p.func.args[1].dtype, "is_output": False}}
                 for p in getattr(func, "packs", ()))
