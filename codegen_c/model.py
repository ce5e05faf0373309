"""The deployable model library: one C entry point running every fused kernel in order.

``export_model(module, dir, name)`` writes into ``dir``:

- ``kernel_<i>.c``: each distinct kernel's C, as built (compiled on its own, so the
  kernels' static helpers never clash), and ``<name>.c``, the model's entry points;
- ``lib<name>.so``: all of them linked into one library (``<name>_kernels.h`` declares
  each kernel and its C timer, for profiling); ``<name>.h`` declares
  ``int <name>_init(const char *weights_path)``, ``int <name>_run(in0, ..., out0, ...)``
  (model input and output order), ``void <name>_free(void)``,
  ``void <name>_set_num_threads(int)`` and ``const char *<name>_last_error(void)``;
  ``int <name>_profile(<_run's arguments>, int32_t calls, double *seconds)`` is a run
  that writes each kernel's time into ``seconds`` (``calls`` > 1: each kernel is run
  ``calls - 1`` times more just before its timed call, so its inputs are hot in cache, as
  a tuner times it; 1: as a run reaches it);
  a model with a symbolic size (``Graph.sizes``: ``L`` in ``[lo, hi]``) takes it first,
  ``int <name>_run(int64_t L, in0, ..., out0, ...)``, checks it (outside the range:
  6) and passes it to each kernel over it; the arena is planned for ``L = hi``;
- a tuned dynamic kernel is its variants (``kernel_<i>_v<j>.c``) and its dispatcher;
- the weights a kernel reads pre-packed (its record's prepack) are packed once, by
  the kernel's pack function, in ``_init``;
- ``<name>.weights``: the constants, each at a 64-byte aligned offset after a 64-byte
  header (magic, version, payload bytes, a 64-bit checksum of the payload), which
  ``_init`` reads and verifies;
- ``manifest.json``: inputs and outputs (names, shapes, dtypes), each kernel with the
  record its schedule came from and the values it reads and writes, the weights'
  offsets, the arena plan, target, compiler and flags.

Intermediates live in one arena planned here (``plan_arena``): a buffer's lifetime runs
from the kernel that writes it to the last one that reads it, and buffers whose lifetimes
do not overlap share memory (first fit by offset). No Python runs at run time.
"""
from __future__ import annotations

import json
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from tvmlite.codegen_c.compiler import link_shared
from tvmlite.codegen_c.header import header
from tvmlite.errors import TvmliteError
from tvmlite.graph.symbolic import affine_of, shape_at
from tvmlite.ir.dtypes import CTYPE

__all__ = ["ALIGN", "MAGIC", "ExportError", "Arena", "plan_arena", "weights_blob",
           "checksum64", "export_model", "model_c", "c_bytes", "byte_sizes"]

ALIGN = 64
MAGIC = b"TVMLWGT1"
HEADER_BYTES = 64


class ExportError(TvmliteError, ValueError):
    """A model that cannot be written as a library (the message says why)."""


def checksum64(data: bytes) -> int:
    """The weights checksum: ``sum(w[i] * (2*i + 1)) mod 2**64`` over the payload's
    little-endian 64-bit words (position-weighted, so swapped or shifted blocks change
    it; numpy computes it at export, ``_init`` recomputes it in one pass)."""
    words = np.frombuffer(data, "<u8")
    odd = np.arange(words.size, dtype=np.uint64) * np.uint64(2) + np.uint64(1)
    with np.errstate(over="ignore"):
        return int(np.sum(words * odd, dtype=np.uint64))


def _align(n: int) -> int:
    return (n + ALIGN - 1) // ALIGN * ALIGN


@dataclass(frozen=True)
class Arena:
    """Offsets of the intermediates in one buffer of ``size`` bytes; ``total`` is what
    they would take without sharing."""
    offsets: dict[str, int]
    size: int
    total: int


def plan_arena(sizes: dict[str, int], lifetimes: dict[str, tuple[int, int]]) -> Arena:
    """First-fit offsets: each buffer (in order of first write) takes the lowest offset
    where it overlaps no buffer live at the same time."""
    placed: list[tuple[int, int, int, int]] = []   # offset, end, first, last
    offsets = {}
    for name in sorted(sizes, key=lambda n: (lifetimes[n][0], -sizes[n])):
        first, last = lifetimes[name]
        size = _align(sizes[name])
        busy = sorted((o, e) for o, e, f, l2 in placed if not (l2 < first or f > last))
        at = 0
        for o, e in busy:
            if at + size <= o:
                break
            at = max(at, e)
        offsets[name] = at
        placed.append((at, at + size, first, last))
    size = max((e for _, e, _, _ in placed), default=0)
    return Arena(offsets, size, sum(_align(s) for s in sizes.values()))


def weights_blob(constants: dict[str, np.ndarray]) -> tuple[bytes, dict[str, int]]:
    """The weights file and each constant's byte offset in it."""
    payload = bytearray()
    offsets = {}
    for name, value in constants.items():
        offsets[name] = HEADER_BYTES + len(payload)
        data = np.asarray(value, order="C").tobytes()
        payload += data + b"\0" * (_align(len(data)) - len(data))
    head = MAGIC + struct.pack("<QQQ", 1, len(payload), checksum64(bytes(payload)))
    return head + b"\0" * (HEADER_BYTES - len(head)) + bytes(payload), offsets


def _ctype(dtype: str) -> str:
    return "uint8_t" if dtype == "bool" else CTYPE[dtype]


def _ident(i: int) -> str:
    return f"in{i}"


def model_c(module: Any, name: str, kernel_names: dict[str, str], weight_offsets: dict[str, int],
            arena: Arena, weights_bytes: int, checksum: int) -> tuple[str, str]:
    """(the model's C source, its header's declarations)."""
    g = module.graph
    ins = [f"const {_ctype(g.types[v].dtype)} *in{i}" for i, v in enumerate(g.inputs)]
    outs = [f"{_ctype(g.types[v].dtype)} *out{i}" for i, v in enumerate(g.outputs)]
    sizes = [f"int64_t {n}" for n, _, _ in g.sizes]
    sig = ", ".join(sizes + ins + outs) or "void"
    profile_sig = ", ".join(sizes + ins + outs + ["int32_t calls", "double *seconds"])
    run_args = ", ".join([n for n, _, _ in g.sizes] + [f"in{i}" for i in range(len(ins))]
                         + [f"out{i}" for i in range(len(outs))])
    size_note = "".join(
        f"   {n}: the symbolic size, {lo} <= {n} <= {hi}, the first argument of _run; the\n"
        f"   buffers' shapes below are in {n} (out of range: _run returns 6 and computes\n"
        f"   nothing). The arena is sized for {n} = {hi}.\n" for n, lo, hi in g.sizes)
    decl = (f"/* {name}: {len(g.inputs)} inputs, {len(g.outputs)} outputs, C-contiguous.\n"
            + size_note
            + "".join(f"   in{i}  {v}: {g.types[v]}\n" for i, v in enumerate(g.inputs))
            + "".join(f"   out{i} {v}: {g.types[v]}\n" for i, v in enumerate(g.outputs))
            + "   Every function but _last_error returns 0 on success, else non-zero with\n"
              f"   {name}_last_error() saying why. Call {name}_init once before _run. */\n"
            f"int {name}_init(const char *weights_path);\n"
            f"int {name}_run({sig});\n"
            f"/* _run timing each of its {len(module.kernels)} kernels into seconds[]; with\n"
            f"   calls > 1, each first runs calls - 1 more times (its inputs hot) */\n"
            f"int {name}_profile({profile_sig});\n"
            f"void {name}_free(void);\n"
            f"void {name}_set_num_threads(int n);\n"
            f"const char *{name}_last_error(void);\n")
    ptr: dict[str, str] = {}
    for i, v in enumerate(g.inputs):
        ptr[v] = f"(void *)in{i}"
    for i, v in enumerate(g.outputs):
        ptr.setdefault(v, f"(void *)out{i}")
    for v, off in weight_offsets.items():
        ptr.setdefault(v, f"(void *)(g_weights + {off})")
    for v, off in arena.offsets.items():
        ptr.setdefault(v, f"(void *)(g_arena + {off})")
    # pre-packed weights: one buffer per (kernel call, packed input), filled in _init
    packs: list[str] = []
    pack_lines: list[str] = []
    call_ptrs: list[list[str]] = []
    code_names = arg_names(module)
    for ki, k in enumerate(module.kernels):
        args = [ptr[v] for v in k.compute.arg_values] + [ptr[k.output]]
        names = code_names[k.key]
        if any(not isinstance(d, int) for d in p_shapes(k)):
            raise ExportError(f"export_library: kernel {k.name} pre-packs an input whose "
                              f"shape is symbolic")
        for p in k.code.packs:
            j = names.index(p.input)
            src, dst = p.func.args
            nbytes = int(np.prod([int(d) for d in dst.shape])) * np.dtype(
                "uint8" if dst.dtype == "bool" else dst.dtype).itemsize
            buf = f"g_pack_{len(packs)}"
            packs.append(buf)
            pack_lines += [
                f"  {buf} = aligned_alloc({ALIGN}, {_align(max(nbytes, 1))});",
                f"  if (!{buf} || {p.func.name}((const {_ctype(src.dtype)} *){args[j]}, "
                f"({_ctype(dst.dtype)} *){buf})) {{",
                f"    snprintf(g_err, sizeof g_err, \"packing {p.input} of kernel {k.name} "
                f"failed\"); {name}_free(); return 2;", "  }"]
            args[j] = f"(void *){buf}"
        call_ptrs.append(args)
    lines = ["// generated by tvmlite: the model's entry points", "#include <stdint.h>",
             "#include <stdio.h>", "#include <stdlib.h>", "#include <string.h>",
             "#include <time.h>", ""]
    seen = set()
    for k in module.kernels:
        if k.key not in seen:
            seen.add(k.key)
            lines.append(k.code.decl)
    lines += ["static char g_err[512];", "static unsigned char *g_weights;",
              "static unsigned char *g_arena;"] + [f"static void *{b};" for b in packs] + [
              "",
              f"const char *{name}_last_error(void) {{ return g_err; }}", "",
              "static uint64_t checksum64(const unsigned char *p, uint64_t n) {",
              "  uint64_t h = 0, w;",
              "  for (uint64_t i = 0; i < n / 8; i++) { memcpy(&w, p + 8 * i, 8);"
              " h += w * (2 * i + 1); }",
              "  return h;", "}", "",
              f"void {name}_free(void) {{", "  free(g_weights); g_weights = 0;",
              "  free(g_arena); g_arena = 0;"] + [f"  free({b}); {b} = 0;" for b in packs] + [
              "}", "",
              f"int {name}_init(const char *path) {{",
              f"  {name}_free();",
              "  FILE *f = fopen(path, \"rb\");",
              "  if (!f) { snprintf(g_err, sizeof g_err, \"cannot open weights file %s\", path);"
              " return 1; }",
              f"  uint64_t want = {HEADER_BYTES + weights_bytes}ULL;",
              f"  g_weights = aligned_alloc({ALIGN}, want ? want : {ALIGN});",
              "  if (!g_weights) { fclose(f); snprintf(g_err, sizeof g_err, \"out of memory\");"
              " return 2; }",
              "  size_t got = fread(g_weights, 1, want, f);",
              "  int extra = fgetc(f) != EOF;", "  fclose(f);",
              "  if (got != want || extra || memcmp(g_weights, \"" + MAGIC.decode() + "\", 8)) {",
              "    snprintf(g_err, sizeof g_err, \"%s is not this model's weights file "
              "(%zu bytes, expected %llu)\", path, got, (unsigned long long)want);",
              f"    {name}_free(); return 3;", "  }",
              "  uint64_t sum; memcpy(&sum, g_weights + 24, 8);",
              f"  if (sum != {checksum}ULL || checksum64(g_weights + {HEADER_BYTES}, "
              f"{weights_bytes}ULL) != sum) {{",
              "    snprintf(g_err, sizeof g_err, \"%s: checksum mismatch (corrupt weights)\","
              " path);", f"    {name}_free(); return 4;", "  }",
              f"  g_arena = aligned_alloc({ALIGN}, {max(arena.size, ALIGN)});",
              "  if (!g_arena) { snprintf(g_err, sizeof g_err, \"out of memory (arena)\");"
              f" {name}_free(); return 2; }}"] + pack_lines + [
              "  g_err[0] = 0;", "  return 0;", "}", "",
              f"void {name}_set_num_threads(int n) {{"]
    for key in sorted(seen):
        lines.append(f"  {kernel_names[key]}_set_num_threads(n);")
    lines += ["}", "", "static double seconds_between(struct timespec a, struct timespec b) {",
              "  return (double)(b.tv_sec - a.tv_sec) + (double)(b.tv_nsec - a.tv_nsec) * 1e-9;",
              "}", "",
              "/* every kernel in order; with seconds, each one's time (after calls - 1 more",
              "   runs of it when calls > 1) */",
              f"static int run_kernels({profile_sig}) {{",
              "  if (!g_weights) { snprintf(g_err, sizeof g_err, \"" + name
              + "_init was not called (or failed)\"); return 1; }", "  int32_t rc;",
              "  struct timespec t0, t1;"]
    for n, lo, hi in g.sizes:
        lines += [f"  if ({n} < {lo} || {n} > {hi}) {{",
                  f"    snprintf(g_err, sizeof g_err, \"{n} = %lld is outside [{lo}, {hi}], "
                  f"the sizes this model runs at\", (long long){n}); return 6;", "  }"]
    for i, (k, args) in enumerate(zip(module.kernels, call_ptrs)):
        call = f"{kernel_names[k.key]}({', '.join(list(k.code.sizes) + args)})"
        lines += [f"  for (int32_t r = 1; seconds && r < calls; ++r) if ({call}) break;",
                  "  if (seconds) clock_gettime(CLOCK_MONOTONIC, &t0);",
                  f"  rc = {call};",
                  "  if (seconds) { clock_gettime(CLOCK_MONOTONIC, &t1); "
                  f"seconds[{i}] = seconds_between(t0, t1); }}",
                  f"  if (rc) {{ snprintf(g_err, sizeof g_err, \"kernel {k.name} failed "
                  f"(%d)\", (int)rc); return 5; }}"]
    for i, v in enumerate(g.outputs):
        if ptr[v] != f"(void *)out{i}":
            lines.append(f"  memcpy(out{i}, {ptr[v]}, {c_bytes(g, v)});")
    lead = f"{run_args}, " if run_args else ""
    lines += ["  return 0;", "}", "",
              f"int {name}_run({sig}) {{ return run_kernels({lead}1, 0); }}", "",
              f"int {name}_profile({profile_sig}) {{",
              "  if (calls < 1 || !seconds) { snprintf(g_err, sizeof g_err, \"" + name
              + "_profile: calls must be at least 1 and seconds an array of "
              + f"{len(module.kernels)}\"); return 7; }}",
              f"  return run_kernels({lead}calls, seconds);", "}", ""]
    return "\n".join(lines), decl


def p_shapes(k: Any) -> list:
    """The dimensions of the inputs kernel ``k`` pre-packs (weights: numbers)."""
    return [d for p in k.code.packs for t in p.func.args for d in t.shape]


def c_bytes(g: Any, v: str) -> str:
    """The bytes of value ``v`` as a C expression: a number, or a product of
    ``(a * L + b)`` factors in a graph with a symbolic size."""
    item = np.dtype(g.types[v].dtype).itemsize
    if not g.sizes:
        return str(int(np.prod(g.types[v].shape)) * item)
    size = g.sizes[0][0]
    factors = [str(item)]
    for d in g.types[v].shape:
        a, b = affine_of(d, size)
        factors.append(str(b) if not a else f"({a}LL * {size} + {b}LL)")
    return " * ".join(factors)


def byte_sizes(g: Any, v: str) -> int:
    """The most bytes value ``v`` takes at any size of the graph's range (its arena
    slot): its dimensions are affine with a >= 1 in the size, so at the largest."""
    shape = shape_at(g.types[v].shape, {n: hi for n, _, hi in g.sizes})
    return int(np.prod(shape)) * np.dtype(g.types[v].dtype).itemsize


def arg_names(module: Any) -> dict[str, list[str]]:
    """Per kernel key, the argument names its compiled code was generated with: those
    of the first kernel of that key. Identical kernels share one function, but their
    placeholders are named after their own values, so a pack names its input as the
    first one does; the arguments are in the same order in all of them."""
    out: dict[str, list[str]] = {}
    for k in module.kernels:
        out.setdefault(k.key, [t.name for t in k.compute.tensors])
    return out


def export_model(module: Any, directory: Path, name: str = "model") -> Path:
    """Write the library of the built model ``module`` (a GraphModule) into
    ``directory``; returns the path of ``lib<name>.so``."""
    if not name.isidentifier():
        raise ExportError(f"export_library: name must be a C identifier, got {name!r}")
    g = module.graph
    code_names = arg_names(module)
    for k in module.kernels:
        for p in k.code.packs:
            names = code_names[k.key]
            v = k.compute.arg_values[names.index(p.input)] if p.input in names else None
            if v not in g.constants:
                raise ExportError(f"export_library: kernel {k.name} pre-packs {p.input!r}, "
                                  f"which is not a weight of the model")
    directory.mkdir(parents=True, exist_ok=True)
    used = {v for k in module.kernels for v in k.compute.arg_values}
    consts = {v: g.constants[v] for v in g.constants if v in used or v in g.outputs}
    blob, offsets = weights_blob(consts)
    order = {k.output: i for i, k in enumerate(module.kernels)}
    last: dict[str, int] = {}
    for i, k in enumerate(module.kernels):
        for v in k.compute.arg_values:
            last[v] = i
    inter = [v for v in order if v not in g.outputs]
    sizes = {v: byte_sizes(g, v) for v in inter}
    arena = plan_arena(sizes, {v: (order[v], last.get(v, order[v])) for v in inter})
    kernel_names: dict[str, str] = {}
    sources: list[Path] = []
    for k in module.kernels:
        if k.key in kernel_names:
            continue
        kernel_names[k.key] = k.code.name
        index = len(kernel_names) - 1
        for j, text in enumerate(k.code.variants):   # a dispatching kernel's variants
            path = directory / f"kernel_{index}_v{j}.c"
            path.write_text(text)
            sources.append(path)
        path = directory / f"kernel_{index}.c"
        path.write_text(k.code.source)
        sources.append(path)
    checksum = struct.unpack("<Q", blob[24:32])[0]
    src, decl = model_c(module, name, kernel_names, offsets, arena, len(blob) - HEADER_BYTES,
                        checksum)
    main = directory / f"{name}.c"
    main.write_text(src)
    (directory / f"{name}.h").write_text(header(name, decl))
    # the kernels' own entry points (each with its C timer), for profiling tools
    (directory / f"{name}_kernels.h").write_text(header(f"{name}_kernels", "".join(
        dict.fromkeys(k.code.decl for k in module.kernels))))
    (directory / f"{name}.weights").write_bytes(blob)
    lib = link_shared(sources + [main], module.target, directory / f"lib{name}.so")
    manifest = {
        "name": name, "format": 1,
        "sizes": [{"name": n, "min": lo, "max": hi} for n, lo, hi in g.sizes],
        "inputs": [_value(g, v) for v in g.inputs], "outputs": [_value(g, v) for v in g.outputs],
        "kernels": [{"name": k.name, "function": k.code.name, "key": k.key,
                     "sizes": list(k.code.sizes),
                     "nodes": [n.op for n in _kernel_nodes(g, k.output)],
                     "args": list(k.compute.arg_values) + [k.output],
                     "record": k.record} for k in module.kernels],
        "values": {v: _value(g, v) for k in module.kernels
                   for v in list(k.compute.arg_values) + [k.output]},
        "weight_offsets": offsets,
        "arena": {"bytes": arena.size, "intermediates_bytes": arena.total,
                  "offsets": arena.offsets},
        "weights": {"file": f"{name}.weights", "bytes": len(blob), "checksum64": checksum,
                    "alignment": ALIGN},
        "target": module.target.to_json(), "compiler": module.target.compiler,
        "compiler_version": module.target.compiler_version,
        "flags": list(module.target.cflags),
        "sources": [p.name for p in sources] + [main.name],
    }
    (directory / "manifest.json").write_text(json.dumps(manifest, indent=1, default=str) + "\n")
    return lib


def _value(g: Any, v: str) -> dict[str, Any]:
    """A value's manifest entry; in a graph with a symbolic size a dimension is the
    text of its expression, and ``affine`` gives each dimension as ``[a, b]``
    (``a * size + b``), which ``ModelLibrary`` evaluates."""
    shape = g.types[v].shape
    out: dict[str, Any] = {"name": v, "shape": [d if isinstance(d, int) else str(d)
                                                for d in shape], "dtype": g.types[v].dtype}
    if g.sizes:
        out["affine"] = [list(affine_of(d, g.sizes[0][0])) for d in shape]
    return out


def _kernel_nodes(g: Any, output: str) -> Sequence[Any]:
    for k in g.kernels:
        if k.output == output:
            return k.nodes
    return ()
