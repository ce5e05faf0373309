"""The C signatures of a lowered function: its parameter list, the timer every timed entry
point shares, and the declarations of its entry points for cffi and exported headers.

A kernel's source (``codegen.generate``), a dispatcher's (``dispatch.py``), the header of
an exported library (``header.py``) and the loader's cffi declarations all name the same
functions with the same parameters; one text for each keeps them from drifting apart.

Map: ``params`` · ``timer_lines`` · ``cdecl``.
"""
from __future__ import annotations

from typing import Iterable

from tvmlite.ir.dtypes import CTYPE
from tvmlite.passes.pipeline import LoweredFunc

__all__ = ["params", "timer_lines", "cdecl"]


def params(func: LoweredFunc, outputs: Iterable[str], names: list | None = None) -> str:
    """The C parameter list of ``func``: its symbolic sizes as ``int64_t``, then its
    arrays (``const`` unless in ``outputs``, ``restrict``), renamed by ``names`` if given."""
    outs = set(outputs)
    out = [f"int64_t {n}" for n in getattr(func, "sizes", ())]
    names = names[len(out):] if names else names
    for i, b in enumerate(func.args):
        const = "" if b.name in outs else "const "
        out.append(f"{const}{CTYPE[b.dtype]}* restrict {names[i] if names else b.name}")
    return ", ".join(out)


def timer_lines(name: str, timer_params: str, call_names: list) -> list:
    """C lines of ``double name_time(timer_params, int32_t number)``: calls ``name`` on
    ``call_names`` ``number`` times and returns the mean seconds (-1.0 if a call fails).
    Every timed entry point -- a kernel's, a dispatcher's -- shares this one text."""
    return [f"double {name}_time({timer_params}, int32_t number) {{",
            "  struct timespec t0, t1;",
            "  clock_gettime(CLOCK_MONOTONIC, &t0);",
            "  for (int32_t r = 0; r < number; ++r) {",
            f"    if ({name}({', '.join(call_names)}) != 0) return -1.0;",
            "  }",
            "  clock_gettime(CLOCK_MONOTONIC, &t1);",
            "  return ((double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9)"
            " / (double)number;",
            "}", ""]


def cdecl(func: LoweredFunc, outputs: Iterable[str]) -> str:
    """C declarations of the three entry points (for cffi and the exported header)."""
    outputs = list(outputs)
    n = func.name
    p = params(func, outputs).replace(" restrict", "")
    packs = "".join(
        f"int32_t {pk.func.name}({params(pk.func, [pk.packed]).replace(' restrict', '')});\n"
        for pk in getattr(func, "packs", ()))
    return (f"int32_t {n}({p});\n"
            f"double {n}_time({p}, int32_t number);\n"
            f"void {n}_set_num_threads(int32_t n);\n") + packs
