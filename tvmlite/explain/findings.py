"""What the loop nest and the generated code say about a kernel's speed, one finding each.

Every finding names where it is (a loop, a stage), what is wrong, and what to try, in
the schedule's own terms (which loop, which primitive). The facts come from the
compiler's own records: the vectorize pass's ``VectorDecision``s, codegen's
``LaneFallback``s, the loop nest (``loop_nest``) and the final vectorized IR.

Map: Finding · vector fallbacks · register pressure (and the spill report) · parallel
work · unrolling · compute_at recomputation · local buffers kept in memory ·
accumulations through memory.
"""
from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass

from tvmlite.codegen_c.promotion import promotable
from tvmlite.explain.traffic import FLOAT_OPS
from tvmlite.ir.expr import ITEMSIZE, BinOp, Broadcast, Call, Load, Ramp, free_vars, walk
from tvmlite.ir.printer import expr_str
from tvmlite.ir.stmt import Allocate, For, IfThenElse, Stmt, Store, stmt_children
from tvmlite.passes.unroll import MAX_COPIES, steps
from tvmlite.passes.vectorize import MAX_UNROLLED_CHUNKS

MIN_PARALLEL_SECONDS = 20e-6   # per thread and parallel region: fork/join costs microseconds
IMBALANCE = 0.10               # idle share of the threads worth reporting


@dataclass(frozen=True)
class Finding:
    """kind: vector, registers, spill, parallel, unroll, recompute, roofline; ``fault``
    False for a plain fact (the unrolled sizes, a balanced parallel loop)."""
    kind: str
    where: str
    what: str
    try_: str = ""
    fault: bool = True

    def __str__(self) -> str:
        mark = "!" if self.fault else "-"
        text = f"{mark} [{self.kind}] {self.where}: {self.what}"
        return text + (f"\n    try: {self.try_}" if self.try_ else "")


# -- vector fallbacks -------------------------------------------------------------------------

def _stage(d) -> str:
    return ", ".join(d.stages) or "?"


def _full_fallback_advice(d) -> str:
    r = d.reason
    if "not affine" in r:
        return (f"vectorize a loop the indices are affine in (reorder it innermost), or "
                f"split/fuse so that {d.loop} appears in the index only as `a*{d.loop}+b`")
    if "select whose branches load" in r:
        return ("give the condition its own stage: compute the padded/selected tensor at "
                "root (compute_root) or compute_at an outer loop, so this loop only loads")
    if "same element" in r:
        return (f"{d.loop} is a reduction here: vectorize a spatial loop instead (reorder "
                f"it innermost), or rfactor the reduction by {d.loop}")
    if "inner loop" in r:
        return (f"reorder so {d.loop} is the innermost loop of its stage, or unroll the "
                "inner loop")
    if "guard" in r or "condition" in r:
        return f"split with a factor that divides the axis extent, so {d.loop} needs no guard"
    if "less than two lanes" in r:
        return f"split so the vectorized loop {d.loop} has at least one whole vector"
    return f"vectorize another loop of {_stage(d)}"


def vector_findings(decisions: tuple, lane_fallbacks: list) -> list[Finding]:
    """One finding per distinct fallback of a vectorize loop (unrolled copies counted),
    joined with the lane-by-lane code codegen wrote for it."""
    out: list[Finding] = []
    counts = Counter(decisions)
    calls_by_codegen = Counter(f.name for f in lane_fallbacks if f.kind == "call")
    gathers_by_codegen = Counter((f.name, f.stride) for f in lane_fallbacks
                                 if f.kind in ("gather", "scatter"))
    for d, n in counts.items():
        where = f"loop {d.loop} of {_stage(d)}" + (f" ({n} unrolled copies)" if n > 1 else "")
        if d.reason:
            out.append(Finding("vector", where, f"stays scalar ({d.extent} iterations): "
                               f"{d.reason}", _full_fallback_advice(d)))
            continue
        if d.scalar_tail:
            factor = math.gcd(d.extent, d.lanes)
            out.append(Finding("vector", where, f"{d.chunks} vector(s) of {d.lanes} lanes "
                               f"and a scalar tail of {d.scalar_tail} (extent {d.extent} is "
                               f"not a multiple of {d.lanes})",
                               f"split the axis so {d.loop}'s extent is a multiple of "
                               f"{d.lanes} (a factor dividing the axis, e.g. pad it), or "
                               f"vectorize an axis whose extent is (gcd here: {factor})"))
        if d.guarded:
            out.append(Finding("vector", where, "an imperfect split's guard: chunks where "
                               "it fails at the first or last lane run lane by lane",
                               f"choose a split factor of {d.loop}'s axis that divides its "
                               "extent"))
        for cond in d.selects:
            out.append(Finding("vector", where, f"a select on the lane (`{cond}`) loads in "
                               f"its branches: each vector takes one branch where all its "
                               f"lanes agree, the vectors across its border run lane by lane",
                               f"pad the tensor the select guards (a window then needs no "
                               f"border), or split {d.loop}'s axis so the border falls "
                               f"between vectors"))
        for kind, items in (("gather", d.gathers), ("scatter", d.scatters)):
            for buf, stride in items:
                lanes = gathers_by_codegen.get((buf, stride), 0)
                verb = "loads" if kind == "gather" else "stores"
                out.append(Finding("vector", where, f"a {kind}: {verb} {buf} with lanes "
                                   f"{stride} elements apart (stride not 1), written lane by "
                                   f"lane by codegen ({lanes} place(s) in the C)",
                                   f"vectorize the loop along which {buf} is contiguous "
                                   f"(reorder it innermost), or cache_read {buf} and lay "
                                   f"the copy out along {d.loop}"))
        for func in d.calls:
            if calls_by_codegen.get(func):
                out.append(Finding("vector", where, f"{func} has no vector form in codegen: "
                                   f"computed one lane at a time "
                                   f"({calls_by_codegen[func]} place(s) in the C)",
                                   f"compute the {func} in a stage of its own (not inlined "
                                   "into this loop), or accept the scalar calls"))
    return out


# -- register pressure ------------------------------------------------------------------------

@dataclass(frozen=True)
class RegisterBlock:
    """The innermost loop body with the most live vector values."""
    loop: str
    accumulators: int
    operands: int
    estimate: int
    registers: int


def _innermost_blocks(s: Stmt, loop: str = "(kernel body)", regs: dict | None = None):
    """(loop name, body, promoted buffer -> lanes) of each loop with no loop inside."""
    regs = dict(regs or {})
    if isinstance(s, Allocate):
        lanes = promotable(s)
        if lanes:
            regs[s.buffer.name] = lanes
    kids = stmt_children(s)
    if isinstance(s, For) and not any(isinstance(x, For) for k in kids for x in _walk(k)):
        yield s.var.name, s.body, regs
        return
    for k in kids:
        yield from _innermost_blocks(k, s.var.name if isinstance(s, For) else loop, regs)


def _walk(s: Stmt):
    stack = [s]
    while stack:
        x = stack.pop()
        yield x
        stack.extend(stmt_children(x))


def register_block(final_body: Stmt, registers: int) -> RegisterBlock | None:
    """Live vector values of each innermost block: the accumulators held in registers
    (promoted local buffers' vectors it touches, and vector stores at an address the
    innermost loop does not change: the compiler keeps those in registers across the
    loop), plus each distinct vector operand (a load or broadcast) it uses more than
    once, plus one temporary."""
    best = None
    for loop, body, regs in _innermost_blocks(final_body):
        acc: set[tuple[str, str]] = set()
        span: dict[str, tuple[int, int]] = {}   # operand -> (first use, last use)
        for pos, st in enumerate(_walk(body)):
            exprs = [st.value] if isinstance(st, Store) else \
                [st.cond] if isinstance(st, IfThenElse) else []
            if isinstance(st, Store) and (st.buffer.name in regs or (
                    loop != "(kernel body)" and isinstance(st.indices[0], Ramp)
                    and loop not in free_vars(st.indices[0]))):
                acc.add((st.buffer.name, expr_str(st.indices[0])))
            for e in exprs:
                for x in walk(e):
                    if isinstance(x, Load) and x.buffer.name in regs:
                        acc.add((x.buffer.name, expr_str(x.indices[0])))
                    elif (isinstance(x, Load) and isinstance(x.indices[0], Ramp)) or \
                            isinstance(x, Broadcast):
                        first = span.get(expr_str(x), (pos, pos))[0]
                        span[expr_str(x)] = (first, pos)
        # an operand used by several statements is live from its first use to its last
        reused = max((sum(1 for a, b in span.values() if a <= p <= b and a < b)
                      for p in {a for a, _ in span.values()}), default=0)
        est = len(acc) + reused + (1 if span else 0)
        if acc and (best is None or est > best.estimate):
            best = RegisterBlock(loop, len(acc), reused, est, registers)
    return best


def stack_locals(final_body: Stmt, stack_limit: int) -> list[str]:
    """Local buffers codegen declares as stack arrays (not kept in registers)."""
    return [s.buffer.name for s in _walk(final_body) if isinstance(s, Allocate)
            and not promotable(s)
            and s.buffer.size * ITEMSIZE.get(s.buffer.dtype, 4) <= stack_limit]


def register_findings(block: RegisterBlock | None, spills, on_stack: tuple = ()) -> list[Finding]:
    out = []
    if block is not None:
        over = block.estimate > block.registers
        out.append(Finding(
            "registers", f"innermost loop {block.loop}",
            f"about {block.estimate} live vectors ({block.accumulators} accumulators + "
            f"at most {block.operands} operands live at once + 1) for {block.registers} vector "
            f"registers",
            "make the register block smaller: lower the innermost split factors of the "
            "spatial axes of the cache_write stage (fewer unrolled rows or vectors)"
            if over else "", fault=over))
    if spills is None:
        return out
    if isinstance(spills, str):
        out.append(Finding("spill", "object code", f"not checked: {spills}", fault=False))
    elif spills.spills:
        ex = "; ".join(spills.examples)
        also = (f"; the kernel keeps {', '.join(on_stack)} on the stack, so some of these "
                "are its accesses rather than spills") if on_stack else ""
        out.append(Finding("spill", "object code", f"{spills.hot_stack_ops} vector "
                           f"loads/stores to the stack in {spills.hot_loops} innermost "
                           f"loop(s) ({spills.tool}; e.g. {ex}){also}",
                           "fewer live vectors in the innermost loop (smaller register "
                           "block), or cache_write a stack-resident buffer whose accesses "
                           "are whole vectors at constant offsets"))
    else:
        out.append(Finding("spill", "object code", f"no vector stack traffic in "
                           f"{spills.hot_loops} innermost loop(s) ({spills.tool})",
                           fault=False))
    return out


# -- parallel work ----------------------------------------------------------------------------

def parallel_findings(nest: Stmt, cores: int, seconds: float | None, flops: int,
                      outer: int = 1) -> list[Finding]:
    """Per parallel loop: iterations per thread, idle share, time per region."""
    out: list[Finding] = []
    loops = list(_parallel_loops(nest, 1))
    if not loops and cores > 1:
        return [Finding("parallel", "kernel", f"no parallel loop: one of {cores} cores works",
                        "parallel the outermost spatial loop (fuse outer spatial loops "
                        "first if it has few iterations)")]
    for loop, entries in loops:
        E = loop.extent
        per = math.ceil(E / cores)
        busy = min(E, cores)
        idle = 1 - E / (per * cores)
        where = f"parallel loop {loop.var.name}"
        work = flops / entries * per / E
        text = (f"{E} iterations on {cores} threads: {per} per thread (~{work:,.0f} flops "
                f"each time), {busy} busy, {idle:.0%} idle, entered {entries} time(s)")
        if seconds is not None:
            region = seconds / entries
            text += f", {region * 1e6:.3g} us per region"
        faults = []
        if E < cores:
            faults.append(f"fuse {loop.var.name} with the next spatial loop before parallel, "
                          "so every thread gets work")
        elif idle > IMBALANCE:
            faults.append(f"split or fuse so {loop.var.name}'s extent is a multiple of "
                          f"{cores}")
        if seconds is not None and entries > 1 and seconds / entries < MIN_PARALLEL_SECONDS:
            faults.append("parallel an outer loop: each region's fork/join costs "
                          "microseconds, more than its work")
        out.append(Finding("parallel", where, text, "; ".join(faults), fault=bool(faults)))
    return out


def _parallel_loops(s: Stmt, entries: int):
    if isinstance(s, For):
        if s.kind == "parallel":
            yield s, entries
            return
        entries *= s.extent
    for c in stmt_children(s):
        yield from _parallel_loops(c, entries)


# -- unrolling --------------------------------------------------------------------------------

def unroll_findings(nest: Stmt, vector_bytes: int) -> list[Finding]:
    """The unrolled loops of the nest and their sizes (statements after unrolling)."""
    out: list[Finding] = []
    for s in _walk(nest):
        if isinstance(s, For) and s.kind == "unroll":
            size = s.extent * steps(s.body, vector_bytes)
            stages = ", ".join(sorted({x.buffer.name for x in _walk(s) if isinstance(x, Store)}))
            where = f"loop {s.var.name} of {stages}"
            if size > MAX_COPIES:
                out.append(Finding("unroll", where, f"unroll of {s.extent} x "
                                   f"{steps(s.body, vector_bytes)} statements = {size} > "
                                   f"{MAX_COPIES}: left as a serial loop",
                                   f"unroll a smaller loop, or split {s.var.name} and unroll "
                                   "the inner part"))
            else:
                out.append(Finding("unroll", where, f"unrolled {s.extent} x "
                                   f"{steps(s.body, vector_bytes)} = {size} statement(s)",
                                   fault=False))
    return list(dict.fromkeys(out))


# -- compute_at recomputation -----------------------------------------------------------------

def recompute_findings(nest: Stmt, full_sizes: dict) -> list[Finding]:
    """Per intermediate stage: how many times its elements are computed (the executions
    of its stores that do not read the stage itself, i.e. plain or init stores) over its
    size. ``full_sizes`` maps stage name -> elements of the whole tensor."""
    counts: Counter = Counter()
    arithmetic: set = set()
    for st, times, loops in _stores(nest, 1, ()):
        name = st.buffer.name
        if name not in full_sizes:
            continue
        if any(isinstance(x, Load) and x.buffer.name == name for x in walk(st.value)):
            continue
        counts[name] += times
        if any(isinstance(x, BinOp) and x.op in FLOAT_OPS and x.dtype.startswith("float")
               or isinstance(x, Call) for x in walk(st.value)):
            arithmetic.add(name)
    out = []
    for name, n in counts.items():
        factor = n / max(1, full_sizes[name])
        if factor <= 1.05:
            continue
        what = f"computed {factor:.3g}x its size ({n} evaluations of {full_sizes[name]} elements)"
        if name not in arithmetic:
            # measured on a depthwise conv: the padding recomputed inside the tile ran
            # faster than the same schedule with the padding at root, which makes a pass
            # through memory (see docs/explain.md)
            out.append(Finding("recompute", f"stage {name}", what + ": a copy (no "
                               "arithmetic), so recomputing it where it is read keeps the "
                               "tile in cache; moving it out costs a pass through memory",
                               fault=False))
            continue
        out.append(Finding("recompute", f"stage {name}", what,
                           f"compute_at {name} at an outer loop of its consumer (one "
                           "iteration of which covers the reuse), or compute_root it"))
    return out


def _stores(s: Stmt, times: int, loops: tuple):
    if isinstance(s, Store):
        yield s, times, loops
        return
    if isinstance(s, For):
        times, loops = times * s.extent, loops + (s,)
    for c in stmt_children(s):
        yield from _stores(c, times, loops)


# -- local buffers that stay in memory --------------------------------------------------------

def memory_local_findings(final_body: Stmt, max_bytes: int) -> list[Finding]:
    """Local buffers small enough for registers that codegen keeps in memory, because an
    access is not a whole vector at a constant offset; names the loop of that access."""
    out = []
    for s in _walk(final_body):
        if not isinstance(s, Allocate) or promotable(s) or s.buffer.scope != "local":
            continue
        nbytes = s.buffer.size * ITEMSIZE.get(s.buffer.dtype, 4)
        if nbytes > max_bytes:
            continue
        vector = any(isinstance(x, Load) and x.buffer.name == s.buffer.name
                     and isinstance(x.indices[0], Ramp) for st in _walk(s.body)
                     if isinstance(st, Store) for x in walk(st.value))
        culprit = _non_constant_access(s.body, s.buffer.name, "(its allocation)") \
            if vector else None
        if culprit is None:
            continue
        loop, index = culprit
        what = (f"lives in memory, not in vector registers: it is accessed at `{index}` "
                f"inside loop {loop} (not a whole vector at a constant offset)")
        advice = (f"unroll loop {loop} (and vectorize the innermost axis of "
                  f"{s.buffer.name}'s accesses) so every access is a constant vector")
        if loop.endswith("_v"):     # the vectorize pass's loop over the chunks of loop X
            src = loop[:-2]
            what += (f"; {loop} is the loop over the vectors of the vectorized loop {src}, "
                     f"which has more than {MAX_UNROLLED_CHUNKS} vectors")
            advice = (f"split {src} so its vectorized part is at most {MAX_UNROLLED_CHUNKS} "
                      f"vectors and unroll the part outside, or tile the stage writing "
                      f"{s.buffer.name} smaller (a smaller register block)")
        out.append(Finding("registers", f"local buffer {s.buffer.name} ({nbytes} B)", what,
                           advice))
    return out


def _non_constant_access(s: Stmt, name: str, loop: str):
    if isinstance(s, For):
        return _non_constant_access(s.body, name, s.var.name)
    if isinstance(s, (Store, IfThenElse)):
        exprs = [s.value, *s.indices] if isinstance(s, Store) else [s.cond]
        idx = [s.indices[0]] if isinstance(s, Store) and s.buffer.name == name else []
        idx += [x.indices[0] for e in exprs for x in walk(e)
                if isinstance(x, Load) and x.buffer.name == name]
        for i in idx:
            if not (isinstance(i, Ramp) and i.stride == 1 and type(i.base).__name__ == "Const"):
                return loop, expr_str(i)
    for c in stmt_children(s):
        got = _non_constant_access(c, name, loop)
        if got is not None:
            return got
    return None


def memory_accumulation_findings(final_body: Stmt) -> list[Finding]:
    """Innermost blocks that accumulate into memory: a store whose value reads the same
    element of a buffer codegen does not keep in registers, so every update is a load and
    a store (the search's cache_write stage exists to avoid this)."""
    out = []
    for loop, body, regs in _innermost_blocks(final_body):
        hits: Counter = Counter()
        local: set = set()
        for st in _walk(body):
            if not isinstance(st, Store) or st.buffer.name in regs:
                continue
            if loop != "(kernel body)" and loop not in free_vars(st.indices[0]):
                continue    # the same element all loop long: the compiler keeps it in a register
            key = expr_str(st.indices[0])
            if any(isinstance(x, Load) and x.buffer.name == st.buffer.name
                   and expr_str(x.indices[0]) == key for x in walk(st.value)):
                hits[st.buffer.name] += 1
                if st.buffer.scope == "local":
                    local.add(st.buffer.name)
        for name, n in hits.items():
            advice = (f"unroll loop {loop} (or tile {name}'s stage so its block is at most "
                      f"{MAX_UNROLLED_CHUNKS} vectors wide): then every access is a vector at "
                      "a constant offset and codegen keeps the block in registers"
                      if name in local else
                      f"cache_write {name} (\"local\") and compute_at the local stage in the "
                      "loop around the reduction, with its innermost tiles unrolled and "
                      "vectorized, so the block stays in registers")
            out.append(Finding("registers", f"innermost loop {loop}", f"{n} accumulation(s) "
                               f"into {name} go through memory: each update loads and stores "
                               f"it (an L1 round trip per FMA)", advice))
    return list(dict.fromkeys(out))
