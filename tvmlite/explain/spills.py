"""Does the compiled kernel spill vector registers? Read from the object code.

``objdump -d`` of the kernel's shared library (the target's objdump: ``objdump`` for the
host, ``aarch64-linux-gnu-objdump`` beside a cross gcc). We take the kernel's functions
(``name`` and its OpenMP bodies ``name._omp_fn.N``), find its loops (a branch back to a
lower address), keep the innermost ones (no loop inside) as the hot loops, and count the
instructions there that move a vector register to or from the stack (x86: an
``%xmm/%ymm/%zmm`` operand with a ``(%rsp)``/``(%rbp)`` memory operand; AArch64: a
``q``/``v`` register stored or loaded at ``[sp...]``). Codegen puts a local buffer that
it does not keep in registers on the stack too, so those accesses are only spills when
the kernel has no such stack array; the report says which.
"""
from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

_X86_VEC = re.compile(r"%[xyz]mm\d+")
_X86_STACK = re.compile(r"\(%r[sb]p\)|\(%r[sb]p,")
_ARM_VEC = re.compile(r"\b[qv]\d+\b")
_ARM_STACK = re.compile(r"\[sp\b")
_INSN = re.compile(r"^\s*([0-9a-f]+):\s+(\S+)\s*(.*)$")
_FUNC = re.compile(r"^[0-9a-f]+ <(.+)>:$")
_X86_JUMP = re.compile(r"^j[a-z]+$")
_ARM_JUMP = re.compile(r"^(b(\.[a-z]+)?|cbn?z|tbn?z)$")


@dataclass(frozen=True)
class SpillReport:
    """Vector stack traffic of the kernel: in its innermost loops and in all of it."""
    tool: str
    hot_loops: int
    hot_stack_ops: int
    all_stack_ops: int
    examples: tuple           # a few instructions from the hot loops

    @property
    def spills(self) -> bool:
        return self.hot_stack_ops > 0


def objdump_for(compiler: str) -> str | None:
    """The objdump matching ``compiler`` (a cross prefix is kept), if installed."""
    name = Path(compiler).name
    m = re.match(r"^(.*-)(gcc|cc|clang)(-\d+)?$", name)
    candidates = [f"{m.group(1)}objdump"] if m else []
    candidates.append("objdump")
    return next((shutil.which(c) for c in candidates if shutil.which(c)), None)


def read_spills(lib_path: str | Path, kernel: str, compiler: str, arch: str
                ) -> SpillReport | str:
    """The SpillReport of ``kernel`` in ``lib_path``, or a sentence saying why not."""
    tool = objdump_for(compiler)
    if tool is None:
        return "no objdump found (install binutils) to read the object code"
    try:
        out = subprocess.run([tool, "-d", "--no-show-raw-insn", str(lib_path)],
                             capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"{tool} -d failed: {e}"
    if out.returncode != 0:
        return f"{tool} -d failed: {out.stderr.strip()[:200]}"
    funcs = _functions(out.stdout, kernel)
    if not funcs:
        return f"{tool} -d shows no function {kernel} in {lib_path}"
    vec, stack = (_X86_VEC, _X86_STACK) if arch == "x86_64" else (_ARM_VEC, _ARM_STACK)
    jump = _X86_JUMP if arch == "x86_64" else _ARM_JUMP
    hot_loops = hot_ops = all_ops = 0
    examples: list = []
    for insns in funcs:
        loops = []
        for addr, mnem, ops in insns:
            all_ops += bool(vec.search(ops) and stack.search(ops))
            if jump.match(mnem):
                m = re.match(r"([0-9a-f]+)\b", ops.split(",")[-1].strip())
                if m and int(m.group(1), 16) < addr:
                    loops.append((int(m.group(1), 16), addr))
        inner = [lp for lp in loops if not any(o != lp and lp[0] <= o[0] and o[1] <= lp[1]
                                               for o in loops)]
        hot_loops += len(inner)
        for addr, mnem, ops in insns:
            if any(lo <= addr <= hi for lo, hi in inner) and vec.search(ops) and stack.search(ops):
                hot_ops += 1
                if len(examples) < 3:
                    examples.append(f"{mnem} {ops}")
    return SpillReport(f"{Path(tool).name} -d", hot_loops, hot_ops, all_ops, tuple(examples))


def _functions(text: str, kernel: str) -> list:
    """Instructions (address, mnemonic, operands) of ``kernel`` and its OpenMP bodies."""
    funcs: list[list] = []
    current: list | None = None
    for line in text.splitlines():
        m = _FUNC.match(line)
        if m:
            name = m.group(1)
            keep = name == kernel or name.startswith(f"{kernel}._omp_fn")
            current = [] if keep else None
            if current is not None:
                funcs.append(current)
            continue
        if current is not None:
            m = _INSN.match(line)
            if m:
                current.append((int(m.group(1), 16), m.group(2), m.group(3)))
    return funcs
