"""``explain``: what bounds a kernel and what to change, from its schedule.

One function gathers the facts (``explain_schedule``): it lowers the schedule twice (the
loop nest, and the final vectorized IR with the vectorize pass's decisions), generates
the C (collecting codegen's lane-by-lane fallbacks), compiles it (cached) and reads the
object code for spills, then builds the roofline (``roofline.py``, bytes by
``traffic.py``) and the findings (``findings.py``). ``Explanation`` prints as the report
``tvmlite explain`` shows; ``build_warnings`` are the lines ``build(..., explain=True)``
and ``TVMLITE_LOG=fallbacks`` print as a kernel is built.

A kernel measured at what its bound allows (``Roofline.at_bound``) has nothing left to
fix: the report says so first, and what would otherwise be faults (a register block over
the register file, stack accesses) are shown as facts, without advice.
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any, Sequence

from tvmlite.codegen_c import compile_shared
from tvmlite.codegen_c.codegen import STACK_LIMIT, generate
from tvmlite.codegen_c.promotion import MAX_PROMOTED_BYTES
from tvmlite.explain.findings import (
    Finding,
    memory_accumulation_findings,
    memory_local_findings,
    parallel_findings,
    recompute_findings,
    register_block,
    register_findings,
    stack_locals,
    unroll_findings,
    vector_findings,
)
from tvmlite.explain.roofline import Level, Roofline
from tvmlite.explain.spills import read_spills
from tvmlite.explain.traffic import Traffic, executed_flops, l1_bytes, registers_buffers
from tvmlite.ir.expr import ITEMSIZE
from tvmlite.passes.pipeline import loop_nest, lower
from tvmlite.schedule.schedule import Schedule
from tvmlite.target import bandwidth as bandwidths
from tvmlite.target import peak as peaks
from tvmlite.target.peak_bound import MIN_NOISE, theoretical_gflops
from tvmlite.target.target import Target

COMPULSORY = 1.25   # memory bytes within this factor of the arguments' bytes: compulsory


@dataclass(frozen=True)
class Explanation:
    name: str
    roofline: Roofline
    findings: tuple
    source: str = ""          # what was explained (a record, a module)

    @property
    def faults(self) -> list[Finding]:
        return [f for f in self.findings if f.fault]

    def one_line(self) -> str:
        return self.roofline.one_line()

    @property
    def at_bound(self) -> bool:
        """It runs at what its bound allows (``Roofline.at_bound``): nothing to fix."""
        return self.roofline.at_bound

    def __str__(self) -> str:
        head = f"explain {self.name}" + (f" ({self.source})" if self.source else "")
        lines = [head, ""]
        if self.at_bound:
            lines += [f"=> {self.one_line()}: it runs at what its bound allows, so nothing "
                      "in its schedule needs fixing; the findings below are facts", ""]
        lines += ["roofline:", *("  " + x for x in self.roofline.lines()), "",
                  f"=> {self.one_line()}", "", "findings (! = to fix, - = fact):"]
        lines += [str(f) for f in self.findings] or ["  none"]
        return "\n".join(lines)


def _peak(target: Target, dtype: str, peak: float | None, measure: bool
          ) -> tuple[float, str, float]:
    """(peak GFLOP/s in ``dtype``, where it came from, its noise)."""
    scale = 0.5 if dtype == "float64" else 1.0
    if peak is not None:
        return float(peak) * scale, "given", MIN_NOISE
    got = peaks.cached_peak(target)
    if got is None and measure:
        try:
            got = peaks.measure_peak(target)
        except (OSError, RuntimeError, ValueError):
            got = None
    if got is not None:
        return got.gflops * scale, (f"fp32 FMA peak measured by codegen_c/peak.c, "
                                    f"{got.threads} bound threads, best of "
                                    f"{len(got.runs)} runs" +
                                    (", raised by a kernel" if got.raised_from is not None
                                     else "") +
                                    (", halved for float64" if scale < 1 else "")), got.noise
    return (target.peak_gflops_estimate(dtype),
            "estimated from the spec; `tvmlite target --peak` measures it", MIN_NOISE)


def _bandwidth(target: Target, bw: Any, measure: bool) -> Any:
    if bw is not None:
        return bw
    got = bandwidths.cached_bandwidth(target)
    if got is None and measure:
        try:
            got = bandwidths.measure_bandwidth(target)
        except (OSError, RuntimeError, ValueError):
            got = None
    return got


def explain_schedule(s: Schedule, tensors: Sequence[Any], target: Target | None = None,
                     seconds: float | None = None, flops: int | None = None,
                     name: str = "default_function", peak: float | None = None,
                     bandwidth: Any = None, measure: bool = True, source: str = "",
                     check_spills: bool = True) -> Explanation:
    """Explain schedule ``s`` of ``tensors`` on ``target`` (default: this CPU).

    ``seconds`` is a measured time of one run (a record's mean cost); ``flops`` the
    useful flops of a run (a workload's; default: the flops the nest executes). ``peak``
    (GFLOP/s) and ``bandwidth`` (``target.bandwidth.Bandwidth``) default to the cached
    measurements, measured now when missing and ``measure`` is true."""
    if not isinstance(s, Schedule):
        raise TypeError(f"explain: expected a Schedule, got {type(s).__name__}")
    if seconds is not None and (not isinstance(seconds, (int, float)) or seconds <= 0):
        raise ValueError(f"explain: seconds={seconds!r} must be a positive time or None")
    target = target or Target.host()
    tensors = list(tensors)
    vbytes = target.vector_bits // 8
    nest = loop_nest(s, tensors, name)
    final = lower(s, tensors, name, vector_bytes=vbytes)
    outputs = [st.name for st in s.state.stages]
    lane: list = []
    src = generate(final, outputs, openmp=target.openmp, fallbacks=lane)
    spills = None
    if check_spills:
        spills = read_spills(compile_shared(src, target), name, target.compiler, target.arch)
    in_regs = registers_buffers(final.body)
    executed = executed_flops(nest.body)
    flops = int(flops) if flops else max(1, executed)
    dtype = tensors[-1].dtype
    peak_gf, peak_how, noise = _peak(target, dtype, peak, measure)
    bw = _bandwidth(target, bandwidth, measure)
    traffic = Traffic(nest.body, in_regs)
    levels = [Level("L1", l1_bytes(final.body, in_regs), bw.gbps("L1d") if bw else None)]
    caches = dict(target.caches)
    whole = sum(traffic.footprint(nest.body).values())
    for below, level in (("L1d", "L2"), ("L2", "L3"), ("L3", "memory")):
        if below in caches:
            # warm: a working set that fits stays in the cache from one run to the next
            moved = 0 if whole <= caches[below] else sum(traffic.moved(caches[below]).values())
            levels.append(Level(level, moved, bw.gbps(level) if bw else None))
    roof = Roofline(flops, tuple(levels), peak_gf, peak_how,
                    bw.describe() if bw else "not measured (`tvmlite explain` measures it)",
                    seconds, noise, theoretical_gflops(target, dtype))
    findings = vector_findings(final.vector_decisions, lane)
    # a local buffer is worth keeping in registers when it leaves a quarter of the
    # register file to the operands (a 32-vector block on 32 registers spills anyway)
    findings += memory_local_findings(final.body, min(MAX_PROMOTED_BYTES,
                                                       target.vector_registers * vbytes * 3 // 4))
    findings += memory_accumulation_findings(final.body)
    findings += register_findings(register_block(final.body, target.vector_registers), spills,
                                  tuple(stack_locals(final.body, STACK_LIMIT)))
    findings += parallel_findings(nest.body, target.cores, seconds, flops)
    findings += unroll_findings(nest.body, vbytes)
    sizes = {st.name: math.prod(st.op.shape) for st in s.state.stages
             if st.name not in {t.name for t in tensors}}
    findings += recompute_findings(nest.body, sizes)
    copies = [f for f in findings if f.kind == "recompute" and not f.fault]
    if executed > 1.05 * flops and not copies:
        findings.append(Finding("recompute", "kernel", f"executes {executed:,} flops for "
                                f"{flops:,} useful ones ({executed / flops:.3g}x)",
                                "an inlined or compute_at stage is evaluated more than once "
                                "per element: compute_root it, or compute_at an outer loop"))
    findings += _roofline_findings(roof, final.args)
    if roof.at_bound:     # at the peak: what would be faults are facts, with no advice
        findings = [dataclasses.replace(f, fault=False, try_="") for f in findings]
    return Explanation(name, roof, tuple(findings), source)


def _roofline_findings(roof: Roofline, args: tuple) -> list[Finding]:
    bound = roof.bound
    if bound == "compute":
        f = roof.fraction
        if f is not None and f < 0.5:
            return [Finding("roofline", "kernel", f"compute-bound but at {f:.0%} of the peak",
                            "the findings above (scalar lanes, spills, idle threads) are "
                            "where the rest goes")]
        return []
    lv = roof.bound_level()
    args_bytes = sum(b.size * ITEMSIZE.get(b.dtype, 4) for b in args)
    if bound == "memory" and lv.bytes <= COMPULSORY * args_bytes:
        return [Finding("roofline", "kernel", f"memory-bound on compulsory traffic: "
                        f"{lv.bytes:,} B moved for {args_bytes:,} B of arguments "
                        f"({roof.flops / lv.bytes:.3g} flop/B)",
                        "no loop order raises this intensity: fuse the op into its producer "
                        "or consumer (compute_inline / compute_at) so its data are read once")]
    below = {"L1": "registers", "L2": "L1d", "L3": "L2", "memory": "L3"}[bound]
    return [Finding("roofline", "kernel", f"{bound}-bound: {lv.bytes / roof.flops:.2g} B/flop "
                    f"cross into {below}",
                    "tile (split + reorder) the loops so the block reused by the inner loops "
                    f"fits in {below}; cache_read a reused input into a packed tile"
                    if bound != "L1" else
                    "keep more values in registers: cache_write the output and unroll a "
                    "small register block so each load feeds several FMAs")]


def build_warnings(func: Any, source: str, lib_path: Any, target: Target) -> list[str]:
    """The scalar fallbacks and spill warning of a kernel just built, one line each."""
    lane: list = []
    generate(func, [b.name for b in func.args], openmp=target.openmp, fallbacks=lane)
    out = [f"{func.name}: {f.where}: {f.what}"
           for f in vector_findings(func.vector_decisions, lane)]
    spills = read_spills(lib_path, func.name, target.compiler, target.arch)
    if not isinstance(spills, str) and spills.spills:
        on_stack = stack_locals(func.body, STACK_LIMIT)
        also = f" (it keeps {', '.join(on_stack)} on the stack)" if on_stack else ""
        out.append(f"{func.name}: spills: {spills.hot_stack_ops} vector stack loads/stores in "
                   f"its innermost loop(s) ({spills.tool}){also}")
    return out
