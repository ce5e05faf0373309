"""The driver of the C measuring harness (harness.c): build it for a target, run it.

The harness is one C program per kernel *signature* (argument count, dtypes and which are
outputs): a generated prelude gives it the kernel's exact function pointer types, so it
calls what it dlopens with the right C type, and every candidate of a workload shares one
compiled harness (cached by content like any kernel). It is built with the target's own
compiler and flags, so it runs wherever the kernel runs -- on this machine, on a board, or
under ``qemu-<arch>`` here (``prefix`` is the emulator's command line). Inputs come from
the harness's seeded generator (splitmix64: the same numbers on every machine) or from raw
files; outputs are written as raw files, read back with ``read_outputs``.

Pre-packed constant inputs (tvmlite.schedule.prepack) are part of the signature: ``packs``
(``BuildResult.packs``' JSON: ``{"fn", "input", "packed": {"shape", "dtype", ...}}``) makes
the harness call each ``<kernel>_pack_<input>`` once on the original input it filled and
hand the kernel the packed buffer in that argument's place -- the kernel's C signature
takes the packed buffer there -- so the check covers pack + kernel and the timings are the
kernel's alone (the result's ``packed`` names the pack functions that ran before them).

A dynamic kernel (a workload measured at sizes) takes its symbolic sizes first, as
``int64_t`` (``BuildResult.sizes``): the prelude declares ``nsizes`` of them and the
harness passes the values of its ``--size`` flags there, in order; the buffers' counts are
the ones at those sizes.

Map: ``PackSlot`` / ``pack_slots`` and the prelude · ``build_harness`` · ``run_harness``
and its errors · raw file helpers ``write_inputs`` / ``read_outputs``.
"""
from __future__ import annotations

import json
import os
import platform
import shutil
import signal
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

import numpy as np

from tvmlite.codegen_c.compiler import compile_executable
from tvmlite.errors import TvmliteError
from tvmlite.ir.dtypes import CTYPE, numpy_dtype

if TYPE_CHECKING:  # tvmlite.target (peak, bandwidth) imports codegen_c
    from tvmlite.target.target import Target

__all__ = ["HarnessError", "HarnessResult", "EmulatorNotFoundError", "build_harness",
           "run_harness", "write_inputs", "read_outputs", "harness_arg_flags",
           "emulator_prefix", "QEMU_PACKAGE", "PackSlot", "pack_slots"]

QEMU_PACKAGE = "qemu-user"
# arch -> (GNU triplet, the Debian package of its libc, libgomp's package)
_SYSROOTS = {"aarch64": ("aarch64-linux-gnu", "libc6-arm64-cross", "libgomp1-arm64-cross"),
             "x86_64": ("x86_64-linux-gnu", "libc6-amd64-cross", "libgomp1-amd64-cross")}

# the harness's dtypes, in the order of harness.c's DTYPES table (its index is the C's)
_SHORT = {"float32": "f32", "float64": "f64", "int32": "i32", "int64": "i64", "int8": "i8",
          "uint8": "u8", "int16": "i16", "float16": "f16", "bfloat16": "bf16"}
_CTYPE = {d: CTYPE[d] for d in _SHORT}
_EXIT = {2: "bad usage", 3: "the kernel or a pack function failed (could not allocate)",
         4: "a file could not be loaded, read or written"}


class EmulatorNotFoundError(TvmliteError, RuntimeError):
    """No user-mode emulator (or no cross sysroot) for an architecture; the message names
    the Debian package to install."""


def emulator_prefix(arch: str, sysroot: str | None = None,
                    native_ok: bool = True) -> list[str]:
    """The command line prefix that runs a dynamically linked ``arch`` program on this
    machine: ``[]`` when this machine is ``arch`` (with ``native_ok``; else qemu of this
    arch on this machine's own libraries), else ``["qemu-aarch64", "-L",
    "/usr/aarch64-linux-gnu"]`` (qemu user mode and the cross sysroot)."""
    if arch not in _SYSROOTS:
        raise EmulatorNotFoundError(f"no emulator known for {arch!r}: use one of "
                                    f"{', '.join(_SYSROOTS)}")
    host = platform.machine().lower()
    native = {"amd64": "x86_64", "arm64": "aarch64"}.get(host, host) == arch
    if native and native_ok and sysroot is None:
        return []
    exe = shutil.which(f"qemu-{arch}") or shutil.which(f"qemu-{arch}-static")
    if exe is None:
        raise EmulatorNotFoundError(
            f"qemu-{arch} (user-mode emulation) is not on PATH: install the Debian package "
            f"{QEMU_PACKAGE} (`apt-get install {QEMU_PACKAGE}`)")
    cpu = ["-cpu", "max"] if arch == "x86_64" else []   # qemu64 lacks AVX; max has AVX2
    if native and sysroot is None:
        return [exe, *cpu]
    triplet, libc, gomp = _SYSROOTS[arch]
    root = sysroot or f"/usr/{triplet}"
    if not os.path.isdir(os.path.join(root, "lib")):
        raise EmulatorNotFoundError(
            f"the {arch} sysroot {root} (its libc, libm and libgomp) is missing: install "
            f"{libc} and {gomp} (they come with gcc-{triplet}), or pass sysroot=...")
    return [exe, *cpu, "-L", root]


class HarnessError(TvmliteError, RuntimeError):
    """The harness did not finish: ``kind`` is "timeout", "crash" (a signal) or "failed"
    (an exit code); the message quotes its stderr."""

    def __init__(self, kind: str, message: str):
        super().__init__(message)
        self.kind = kind


@dataclass(frozen=True)
class HarnessResult:
    """What one harness run printed: the check call's seconds, calls per repeat, the
    seconds per call of each repeat (empty with repeat=0), and the pack functions run once
    before them (their time is in none of these)."""
    first_call: float
    number: int
    costs: tuple[float, ...]
    packed: tuple[str, ...] = ()


def _count(arg: Any) -> int:
    n = 1
    for d in (arg["shape"] if isinstance(arg, dict) else arg.shape):
        n *= int(d)
    return max(n, 1)


@dataclass(frozen=True)
class PackSlot:
    """One pack function as the harness runs it: its name, the index of the kernel
    argument whose original input it reads and whose place its buffer takes, and that
    buffer's dtype and element count."""
    fn: str
    arg: int
    dtype: str
    count: int


def pack_slots(args: Sequence[Any], packs: Sequence[dict] = ()) -> list[PackSlot]:
    """``packs`` (``BuildResult.packs``' JSON) resolved against ``args`` (by input name);
    ValueError naming the pack when its input is not an input argument or its dtype is
    not one the harness knows."""
    names = [a.name for a in args]
    out = []
    for p in packs:
        dtype = p["packed"]["dtype"]
        i = names.index(p["input"]) if p["input"] in names else -1
        if i < 0 or args[i].is_output or dtype not in _CTYPE:
            raise ValueError(f"harness packs=...: pack {p['fn']!r} needs input "
                             f"{p['input']!r} among the input arguments {names} and a "
                             f"packed dtype of {sorted(_CTYPE)}, got {dtype!r}")
        out.append(PackSlot(p["fn"], i, dtype, _count(p["packed"])))
    return out


def prelude(args: Sequence[Any], packs: Sequence[dict] = (), nsizes: int = 0) -> str:
    """The C definitions that fix the kernel's signature for harness.c: ``nsizes``
    leading ``int64_t`` sizes (``tvmlite_sizes``, set from ``--size``), then the arrays;
    the kernel takes each pre-packed input's packed buffer (its dtype) in that input's
    place; each pack function is ``int32_t (const T_in*, T_packed*)``."""
    slots = pack_slots(args, packs)
    dtypes = [a.dtype for a in args]
    for s in slots:
        dtypes[s.arg] = s.dtype
    arrays = [f"{'' if a.is_output else 'const '}{_CTYPE[d]}*" for a, d in zip(args, dtypes)]
    params = ["int64_t"] * nsizes + arrays
    casts = ", ".join([f"tvmlite_sizes[{i}]" for i in range(nsizes)]
                      + [f"({arrays[i]})(p)[{i}]" for i in range(len(args))])
    lines = [
        "/* generated by tvmlite: the kernel's signature and its pack functions' */",
        "#include <stdint.h>",
        f"#define TVMLITE_NARGS {len(args)}",
        f"#define TVMLITE_NPACKS {len(slots)}",
        f"#define TVMLITE_NSIZES {nsizes}",
        f"static int64_t tvmlite_sizes[{max(nsizes, 1)}];",
        f"typedef int32_t (*tvmlite_kernel_fn)({', '.join(params)});",
        f"typedef double (*tvmlite_time_fn)({', '.join(params)}, int32_t);",
        f"#define TVMLITE_CALL(f, p) (f)({casts})",
        f"#define TVMLITE_TIME(f, p, n) (f)({casts}, (n))"]
    for j, s in enumerate(slots):
        src, dst = _CTYPE[args[s.arg].dtype], _CTYPE[s.dtype]
        lines.append(f"typedef int32_t (*tvmlite_pack_fn_{j})(const {src}*, {dst}*);")
    short = list(_SHORT)
    lines += [
        "static int tvmlite_pack_arg(int j) {",
        "  switch (j) {", *(f"    case {j}: return {s.arg};" for j, s in enumerate(slots)),
        "    default: return -1;", "  }", "}",
        "static int tvmlite_pack_dtype(int j) {",
        "  switch (j) {", *(f"    case {j}: return {short.index(s.dtype)};"
                           for j, s in enumerate(slots)),
        "    default: return -1;", "  }", "}",
        "static int32_t tvmlite_pack_call(int j, void* fn, const void* in, void* packed) {",
        "  switch (j) {", *(f"    case {j}: return ((tvmlite_pack_fn_{j})fn)((const "
                           f"{_CTYPE[args[s.arg].dtype]}*)in, ({_CTYPE[s.dtype]}*)packed);"
                           for j, s in enumerate(slots)),
        "    default: (void)fn; (void)in; (void)packed; return -1;", "  }", "}", ""]
    return "\n".join(lines)


def build_harness(args: Sequence[Any], target: Target, cache_dir: Any = None,
                  packs: Sequence[dict] = (), nsizes: int = 0) -> Path:
    """The harness program for kernels taking ``nsizes`` sizes, then ``args`` (objects
    with ``name``, ``dtype``, ``shape``, ``is_output``; a pre-packed input as the original
    input) and running the pack functions ``packs`` (module doc), compiled for ``target``.
    Raises CompileError."""
    bad = [a.dtype for a in args if a.dtype not in _CTYPE]
    if bad or not args:
        raise ValueError(f"build_harness(args=...): need at least one argument of dtypes "
                         f"{sorted(_CTYPE)}, got {bad or 'none'}")
    source = prelude(args, packs, nsizes) + (Path(__file__).parent / "harness.c").read_text()
    return compile_executable(source, target, cache_dir=cache_dir)


def harness_arg_flags(args: Sequence[Any], packs: Sequence[dict] = (),
                      sizes: Sequence[int] = ()) -> list[str]:
    """The harness's ``--size`` flags, its ``--arg`` flags, then one ``--pack`` per pack
    function."""
    out: list[str] = [f for n in sizes for f in ("--size", str(int(n)))]
    for a in args:
        out += ["--arg", f"{_SHORT[a.dtype]}:{'out' if a.is_output else 'in'}:{_count(a)}"]
    for s in pack_slots(args, packs):
        out += ["--pack", f"{s.fn}:{s.arg}:{_SHORT[s.dtype]}:{s.count}"]
    return out


def run_harness(exe: str | os.PathLike[str], lib: str | os.PathLike[str], kernel: str,
                args: Sequence[Any], *, prefix: Sequence[str] = (), seed: int = 0,
                inputs_dir: Any = None, outputs_dir: Any = None, number: int = 1,
                repeat: int = 1, min_repeat_ms: float = 0.0, threads: int | None = None,
                slow_seconds: float | None = None, timeout: float = 60.0,
                env: dict | None = None, packs: Sequence[dict] = (),
                sizes: Sequence[int] = ()) -> HarnessResult:
    """Run the harness on ``lib``'s ``kernel`` (through ``prefix``, e.g. ``["qemu-aarch64",
    "-L", "/usr/aarch64-linux-gnu"]``) at ``sizes`` (a dynamic kernel's, as many as
    ``exe`` was built for), its pack functions ``packs`` (the ones ``exe`` was built for)
    run once first; raises HarnessError when it times out, dies of a signal or exits
    non-zero."""
    cmd = [*prefix, os.fspath(exe), "--lib", os.fspath(lib), "--kernel", kernel,
           *harness_arg_flags(args, packs, sizes), "--seed", str(int(seed)),
           "--number", str(int(number)), "--repeat", str(int(repeat)),
           "--min-repeat-ms", repr(float(min_repeat_ms))]
    if inputs_dir is not None:
        cmd += ["--inputs", os.fspath(inputs_dir)]
    if outputs_dir is not None:
        cmd += ["--outputs", os.fspath(outputs_dir)]
    if threads:
        cmd += ["--threads", str(int(threads))]
    if slow_seconds is not None:
        cmd += ["--slow-seconds", repr(float(slow_seconds))]
    try:
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True, start_new_session=True, env=env)
    except OSError as e:
        raise HarnessError("failed", f"could not start {cmd[0]!r}: {e}") from None
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        _kill_group(proc)
        proc.communicate()
        raise HarnessError("timeout", f"ran longer than {timeout}s and was killed") from None
    except BaseException:
        _kill_group(proc)
        proc.wait()
        raise
    tail = "\n".join(err.strip().splitlines()[-10:])
    if proc.returncode < 0:
        raise HarnessError("crash", f"killed by {_signal_name(-proc.returncode)}"
                           + (f"; stderr:\n{tail}" if tail else ""))
    if proc.returncode != 0:
        why = _EXIT.get(proc.returncode, f"exit code {proc.returncode}")
        raise HarnessError("failed", f"the harness failed: {why}" + (f"; stderr:\n{tail}"
                                                                     if tail else ""))
    try:
        d = json.loads(out.strip().splitlines()[-1])
        return HarnessResult(float(d["first_call"]), int(d["number"]),
                             tuple(float(c) for c in d["costs"]),
                             tuple(str(n) for n in d.get("packed", ())))
    except (IndexError, ValueError, KeyError, TypeError) as e:
        raise HarnessError("failed", f"the harness printed no result line ({e}): "
                           f"{out[-200:]!r}") from None


def write_inputs(directory: str | os.PathLike[str], args: Sequence[Any],
                 arrays: Sequence[np.ndarray]) -> None:
    """Write the input ``arrays`` (one per input argument, in order) as ``arg<i>.bin``."""
    ins = [i for i, a in enumerate(args) if not a.is_output]
    if len(ins) != len(arrays):
        raise ValueError(f"write_inputs: {len(ins)} inputs, got {len(arrays)} arrays")
    for i, x in zip(ins, arrays):
        a = args[i]
        np.ascontiguousarray(x, dtype=numpy_dtype(a.dtype)).reshape(-1).tofile(
            Path(directory) / f"arg{i}.bin")


def read_outputs(directory: str | os.PathLike[str], args: Sequence[Any]) -> list[np.ndarray]:
    """The outputs the harness wrote, shaped as their arguments."""
    out = []
    for i, a in enumerate(args):
        if a.is_output:
            data = np.fromfile(Path(directory) / f"arg{i}.bin", dtype=numpy_dtype(a.dtype))
            if data.size != _count(a):
                raise ValueError(f"read_outputs: arg{i}.bin holds {data.size} elements, "
                                 f"expected {_count(a)}")
            out.append(data.reshape(tuple(int(d) for d in a.shape)))
    return out


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        proc.kill()


def _signal_name(signum: int) -> str:
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"
