"""Loop IR -> C: explicit SIMD through GCC/Clang vector extensions, OpenMP for parallel.

Vector values use ``tvmlite_f32x16``-style types; memory is accessed through the
unaligned, may-alias twin (``..._u``) so any offset is legal. Gathers and scatters
are written lane by lane; vector min/max/select go through bit masks because C (unlike
C++) has no vector ``?:``. Only validated identifiers and numbers from the IR reach the
text: names were checked when the tensors and steps were made.

Every place where a vector is written lane by lane (a gather, a scatter, a function with
no vector form) is recorded as a ``LaneFallback`` in ``CodeGen.fallbacks``;
``generate(..., fallbacks=[])`` hands them out with their line in the C source.

Map: the OpenMP schedule of a parallel loop · types · expressions · statements · the
kernel, timing and thread entry points (``generate``). Their parameter lists, the timer's
text and the declarations cffi and headers need are ``signature.py``; the vector types
and helper functions the body calls are written by ``preamble.py``; how a vector cast is
written is ``vector_casts.py``, which buffers live in registers ``promotion.py``.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Iterable

from tvmlite.codegen_c.intrinsics import (
    AMX_DENIED,
    amx_permit_source,
    helper_name,
    helper_source,
    include_line,
    tile_helper_name,
    tile_helper_source,
)
from tvmlite.codegen_c.lowp import conversion_name, legalize
from tvmlite.codegen_c.preamble import MASK_OF, SHORT, helper_lines, typedef_lines
from tvmlite.codegen_c.promotion import promotable
from tvmlite.codegen_c.signature import params, timer_lines
from tvmlite.codegen_c.vector_casts import held_in_register, vector_cast_steps
from tvmlite.ir.dtypes import (
    ALIGNMENT,
    CTYPE,
    ITEMSIZE,
    STORAGE_FLOATS,
    round_up_to_alignment,
)
from tvmlite.ir.expr import (
    BinOp,
    Broadcast,
    Call,
    Cast,
    Cmp,
    Const,
    Expr,
    Load,
    Not,
    Ramp,
    Select,
    Var,
    free_vars,
    lanes_of,
    walk,
)
from tvmlite.ir.simplify import bound
from tvmlite.ir.stmt import (
    Allocate,
    For,
    IfThenElse,
    Seq,
    Stmt,
    Store,
    TensorIntrinsic,
    walk_stmts,
)
from tvmlite.ir.symbolic import INF, is_static, numel, size_ranges
from tvmlite.passes.pipeline import LoweredFunc
from tvmlite.target.intrinsics import get_intrinsic


def omp_schedule(loop: For) -> str:
    """OpenMP schedule of a parallel loop: ``dynamic`` when its iterations do unequal
    work, ``static`` otherwise. They do when it runs over the tiles of a split that need
    not divide: a symbolic trip count holding a (ceil) division, or, at a static one, a
    guard left in the body that reads the loop variable (the simplifier drops the ones
    that always hold). A static partition hands the partial tiles, all at the end, to the
    last thread: a GMM variant with 54-row tiles over symbolic M has 12 tasks at M = 117,
    4 of them 9 rows, and ran clearly faster there with dynamic. Equal iterations keep the
    contiguous static partition, which dynamic's interleaving can only cost locality (a
    conv2d over an unsplit symbolic batch ran slower with dynamic)."""
    if not is_static(loop.extent):
        return "dynamic" if any(isinstance(x, BinOp) and x.op == "//"
                                for x in walk(loop.extent)) else "static"
    v = loop.var.name
    if any(isinstance(st, IfThenElse) and v in free_vars(st.cond)
           for st in walk_stmts(loop.body)):
        return "dynamic"
    return "static"


STACK_LIMIT = 64 * 1024
FUNCS = {"exp": "exp", "log": "log", "sqrt": "sqrt", "tanh": "tanh", "erf": "erf",
         "abs": "fabs"}


@dataclass(frozen=True)
class LaneFallback:
    """A vector the C code computes one lane at a time. kind: "gather" (a load whose lanes
    are ``stride`` elements apart), "scatter" (such a store), "call" (``name`` has no
    vector form here, so it runs once per lane); ``line`` is 1-based in the C source."""
    kind: str
    name: str
    lanes: int
    stride: int
    line: int


def _is_number(e: Expr) -> bool:
    """``e`` is a constant (or one broadcast) that is not NaN."""
    value = e.value if isinstance(e, Broadcast) else e
    return isinstance(value, Const) and not math.isnan(value.value)


class CodeGen:
    def __init__(self, openmp: bool = True):
        self.openmp = openmp
        self.vtypes: set = set()      # (dtype, lanes) used
        self.helpers: set = set()     # helper function names needed
        self.ranges: dict = {}
        self.lines: list = []
        self.tmp = 0
        self.promoted: dict = {}      # buffer name -> lanes: held in vector variables
        self.fallbacks: list = []     # LaneFallback, line relative to the kernel body
        self.intrinsics: dict = {}    # helper name -> (intrinsic, a, b, acc vector type)
        self.tiles: dict = {}   # tile helper name -> (intrinsic, a, b, acc, row/col tiles)

    # -- types -------------------------------------------------------------------
    def vt(self, dtype: str, lanes: int, unaligned: bool = False) -> str:
        dtype = "int32" if dtype == "bool" else "uint16" if dtype in STORAGE_FLOATS else dtype
        self.vtypes.add((dtype, lanes))
        return f"tvmlite_{SHORT[dtype]}x{lanes}{'_u' if unaligned else ''}"

    def fresh(self, prefix: str) -> str:
        self.tmp += 1
        return f"tvmlite_{prefix}{self.tmp}"

    # -- expressions ---------------------------------------------------------------
    def expr(self, e: Expr) -> str:
        L = lanes_of(e)
        if isinstance(e, Const):
            return _const(e)
        if isinstance(e, Var):
            return e.name
        if isinstance(e, Broadcast):
            # x - 0 == x exactly (also for -0.0), so the compiler folds it to a broadcast
            return f"(({CTYPE[e.dtype]})({self.expr(e.value)}) - ({self.vt(e.dtype, e.lanes)}){{}})"
        if isinstance(e, Ramp):
            vt = self.vt(e.dtype, e.lanes)
            steps = ", ".join(str(i * e.stride) for i in range(e.lanes))
            return f"(({vt}){{{steps}}} + ({CTYPE[e.dtype]})({self.expr(e.base)}))"
        if isinstance(e, Load):
            return self.load(e)
        if isinstance(e, BinOp):
            return self.binop(e, L)
        if isinstance(e, Cmp):  # on vectors: a lane mask of -1/0
            return f"({self.expr(e.a)} {e.op} {self.expr(e.b)})"
        if isinstance(e, Not):
            return f"(!{self.expr(e.a)})"
        if isinstance(e, Select):
            if lanes_of(e.cond) > 1:
                self.helpers.add(("vsel", e.dtype, L))
                mask = self.expr(e.cond)
                cond_dt = MASK_OF[e.cond.a.dtype] if isinstance(e.cond, Cmp) else "int32"
                if cond_dt != MASK_OF[e.dtype]:
                    mask = f"__builtin_convertvector({mask}, {self.vt(MASK_OF[e.dtype], L)})"
                return (f"tvmlite_vsel_{SHORT[e.dtype]}x{L}({mask}, "
                        f"{self.expr(e.then)}, {self.expr(e.other)})")
            return f"({self.expr(e.cond)} ? {self.expr(e.then)} : {self.expr(e.other)})"
        if isinstance(e, Call):
            return self.call(e, L)
        if isinstance(e, Cast):
            if e.dtype in STORAGE_FLOATS or e.value.dtype in STORAGE_FLOATS:  # see lowp
                self.helpers.add(("cvt", f"{e.value.dtype}:{e.dtype}", L))
                return f"{conversion_name(e.value.dtype, e.dtype, L)}({self.expr(e.value)})"
            if L > 1:
                text = self.expr(e.value)
                if held_in_register(e.value.dtype, e.dtype, L):
                    self.helpers.add(("inreg", e.value.dtype, L))
                    text = f"tvmlite_inreg_{SHORT[e.value.dtype]}x{L}({text})"
                for step in vector_cast_steps(e.value.dtype, e.dtype):
                    text = f"__builtin_convertvector({text}, {self.vt(step, L)})"
                return text
            return f"(({CTYPE[e.dtype]})({self.expr(e.value)}))"
        raise TypeError(f"codegen: cannot print {type(e).__name__} (was the IR lowered?)")

    def binop(self, e: BinOp, L: int) -> str:
        a, b = self.expr(e.a), self.expr(e.b)
        if e.op in ("and", "or"):
            return f"({a} {'&&' if e.op == 'and' else '||'} {b})"
        if e.op in ("min", "max"):
            if L > 1:
                # against a number (a clip's bound, ReLU's 0) NaN can come from ``a`` only:
                # one compare instead of two (the helper's doc in preamble)
                kind = "v" + e.op + ("k" if e.dtype in ("float32", "float64") and _is_number(e.b)
                                       else "")
                self.helpers.add((kind, e.dtype, L))
                return f"tvmlite_{kind}_{SHORT[e.dtype]}x{L}({a}, {b})"
            self.helpers.add((e.op, e.dtype, 1))
            return f"tvmlite_{e.op}_{SHORT[e.dtype]}({a}, {b})"
        if e.op in ("//", "%"):
            lo = bound(e.a, self.ranges)[0]
            if isinstance(e.b, Const) and e.b.value > 0 and lo >= 0:
                return f"({a} {'/' if e.op == '//' else '%'} {b})"
            name = "floordiv" if e.op == "//" else "floormod"
            self.helpers.add((name, e.dtype, 1))
            return f"tvmlite_{name}_{SHORT[e.dtype]}({a}, {b})"
        if L == 1 and ITEMSIZE[e.dtype] < 4 and e.op in ("+", "-", "*"):
            # C computes on narrow integers in int: wrap the result back, as numpy does
            return f"(({CTYPE[e.dtype]})({a} {e.op} {b}))"
        return f"({a} {e.op} {b})"

    def call(self, e: Call, L: int) -> str:
        suffix = "f" if e.dtype == "float32" else ""
        one = "1.0f" if e.dtype == "float32" else "1.0"

        def scalar(x: str) -> str:
            if e.func == "sigmoid":
                return f"({one} / ({one} + __builtin_exp{suffix}(-({x}))))"
            return f"__builtin_{FUNCS[e.func]}{suffix}({x})"
        if L == 1:
            return scalar(self.expr(e.arg))
        if e.dtype == "float32" and e.func in ("exp", "sigmoid"):
            # exp in vector registers: libm's expf one lane at a time is far slower
            self.helpers.add(("vexp", "float32", L))
            self.vt("int32", L)
            x = self.expr(e.arg)
            if e.func == "exp":
                return f"tvmlite_vexp_f32x{L}({x})"
            return f"(1.0f / (1.0f + tvmlite_vexp_f32x{L}(-({x}))))"
        if e.dtype == "float32" and e.func == "erf":    # in vector registers (preamble)
            self.helpers.add(("verf", "float32", L))
            self.vt("int32", L)
            return f"tvmlite_verf_f32x{L}({self.expr(e.arg)})"
        if e.dtype == "float32" and e.func == "sqrt":   # the ISA's vector root (preamble)
            self.helpers.add(("vsqrt", "float32", L))
            return f"tvmlite_vsqrt_f32x{L}({self.expr(e.arg)})"
        vt = self.vt(e.dtype, L)
        self.fallbacks.append(LaneFallback("call", e.func, L, 0, len(self.lines) + 1))
        t = self.fresh("x")
        lanes = ", ".join(scalar(f"{t}[{i}]") for i in range(L))
        return f"({{ {vt} {t} = {self.expr(e.arg)}; ({vt}){{{lanes}}}; }})"

    def load(self, e: Load) -> str:
        idx = e.indices[0]
        buf = e.buffer.name
        if buf in self.promoted:
            return f"{buf}_r{idx.base.value}"
        if isinstance(idx, Ramp):
            if idx.stride == 1:
                vt, vtu = self.vt(e.dtype, idx.lanes), self.vt(e.dtype, idx.lanes, True)
                return f"(({vt})*({vtu}*)({buf} + {self.expr(idx.base)}))"
            self.fallbacks.append(LaneFallback("gather", buf, idx.lanes, idx.stride,
                                               len(self.lines) + 1))
            t = self.fresh("b")
            lanes = ", ".join(f"{buf}[{t} + {i * idx.stride}]" for i in range(idx.lanes))
            return (f"({{ int64_t {t} = {self.expr(idx.base)}; "
                    f"({self.vt(e.dtype, idx.lanes)}){{{lanes}}}; }})")
        if lanes_of(idx) > 1:
            raise TypeError("codegen: a vector index must be a ramp")
        return f"{buf}[{self.expr(idx)}]"

    # -- statements ----------------------------------------------------------------
    def emit(self, line: str, depth: int) -> None:
        self.lines.append("  " * depth + line)

    def stmt(self, s: Stmt, depth: int) -> None:
        if isinstance(s, Seq):
            for x in s.stmts:
                self.stmt(x, depth)
        elif isinstance(s, For):
            if s.kind == "parallel" and self.openmp:
                self.emit(f"#pragma omp parallel for schedule({omp_schedule(s)})", depth)
            v = s.var.name
            self.emit(f"for (int64_t {v} = 0; {v} < {self.extent(s.extent)}; ++{v}) {{", depth)
            old = self.ranges.get(v)
            self.ranges[v] = (0, s.extent - 1) if is_static(s.extent) else (0, INF)
            self.stmt(s.body, depth + 1)
            if old is None:
                self.ranges.pop(v, None)
            self.emit("}", depth)
        elif isinstance(s, IfThenElse):
            self.emit(f"if ({self.expr(s.cond)}) {{", depth)
            self.stmt(s.then, depth + 1)
            if s.other is not None:
                self.emit("} else {", depth)
                self.stmt(s.other, depth + 1)
            self.emit("}", depth)
        elif isinstance(s, Store):
            self.store(s, depth)
        elif isinstance(s, Allocate):
            self.allocate(s, depth)
        elif isinstance(s, TensorIntrinsic):
            self.intrinsic(s, depth)
        else:
            raise TypeError(f"codegen: unknown statement {type(s).__name__}")

    def intrinsic(self, s: TensorIntrinsic, depth: int) -> None:
        """``out[o:o+lanes] = helper(out[o:o+lanes], a + ai, b + bi)`` (codegen_c/intrinsics)."""
        if s.tile:
            self.tile_intrinsic(s, depth)
            return
        lanes = get_intrinsic(s.name).lanes
        acc_vt = self.vt(s.out.dtype, lanes)
        fn = helper_name(s.name, s.a.dtype, s.b.dtype)
        self.intrinsics[fn] = (s.name, s.a.dtype, s.b.dtype, acc_vt)
        buf, o = s.out.name, s.out_index
        if buf in self.promoted:   # promotable() saw a constant multiple of the lanes
            acc = dst = f"{buf}_r{o.value}"  # type: ignore[attr-defined]
        else:
            vtu = self.vt(s.out.dtype, lanes, True)
            dst = f"*({vtu}*)({buf} + {self.expr(o)})"
            acc = f"(({acc_vt}){dst})"
        self.emit(f"{dst} = {fn}({acc}, {s.a.name} + {self.expr(s.a_index)}, "
                  f"{s.b.name} + {self.expr(s.b_index)});", depth)

    def tile_intrinsic(self, s: TensorIntrinsic, depth: int) -> None:
        """A tile block's helper call (codegen_c/intrinsics: tile_helper_source)."""
        intr = get_intrinsic(s.name)
        rows, lanes, groups, ldc, lda, ldb, fresh = s.tile
        rt, ct = rows // intr.tile_rows, lanes // intr.lanes
        fn = tile_helper_name(s.name, s.a.dtype, s.b.dtype, rt, ct)
        self.tiles[fn] = (s.name, s.a.dtype, s.b.dtype, s.out.dtype, rt, ct)
        self.emit(f"{fn}({s.out.name} + {self.expr(s.out_index)}, {ldc}, {s.a.name} + "
                  f"{self.expr(s.a_index)}, {lda}, {s.b.name} + {self.expr(s.b_index)}, "
                  f"{ldb}, {groups // intr.kgroups}, {fresh});", depth)

    def store(self, s: Store, depth: int) -> None:
        idx, buf = s.indices[0], s.buffer.name
        value = self.expr(s.value)
        if buf in self.promoted:
            self.emit(f"{buf}_r{idx.base.value} = {value};", depth)
            return
        if isinstance(idx, Ramp):
            if idx.stride == 1:
                vt = self.vt(s.buffer.dtype, idx.lanes, True)
                self.emit(f"*({vt}*)({buf} + {self.expr(idx.base)}) = {value};", depth)
                return
            self.fallbacks.append(LaneFallback("scatter", buf, idx.lanes, idx.stride,
                                               len(self.lines) + 1))
            t, b = self.fresh("v"), self.fresh("b")
            self.emit(f"{{ {self.vt(s.buffer.dtype, idx.lanes)} {t} = {value}; "
                      f"int64_t {b} = {self.expr(idx.base)};", depth)
            for i in range(idx.lanes):
                self.emit(f"  {buf}[{b} + {i * idx.stride}] = {t}[{i}];", depth)
            self.emit("}", depth)
            return
        self.emit(f"{buf}[{self.expr(idx)}] = {value};", depth)

    def extent(self, e) -> str:
        """A loop bound or element count: a number, or C for a symbolic size expression."""
        return str(e) if is_static(e) else self.expr(e)

    def nbytes(self, b) -> str:
        """Bytes to allocate for buffer ``b``, rounded up to whole cache lines."""
        n = numel(b.shape)
        if is_static(n):
            return str(round_up_to_alignment(max(n, 1) * ITEMSIZE[b.dtype]))
        return (f"((((int64_t)({self.expr(n)})) * {ITEMSIZE[b.dtype]} + {ALIGNMENT - 1}) / "
                f"{ALIGNMENT} * {ALIGNMENT})")

    def allocate(self, s: Allocate, depth: int) -> None:
        b = s.buffer
        ct = CTYPE[b.dtype]
        if not is_static(numel(b.shape)):  # a region of symbolic size: on the heap
            self.emit("{", depth)
            self.emit(f"{ct}* restrict {b.name} = "
                      f"({ct}*)aligned_alloc({ALIGNMENT}, {self.nbytes(b)});", depth + 1)
            self.emit(f"if ({b.name} == NULL) {{ tvmlite_status = -1; }} else {{", depth + 1)
            self.stmt(s.body, depth + 2)
            self.emit(f"free({b.name});", depth + 2)
            self.emit("}", depth + 1)
            self.emit("}", depth)
            return
        n = max(b.size, 1)
        self.emit("{", depth)
        lanes = promotable(s)
        if lanes:
            vt = self.vt(b.dtype, lanes)
            regs = ", ".join(f"{b.name}_r{i}" for i in range(0, n, lanes))
            self.emit(f"{vt} {regs};", depth + 1)
            self.promoted[b.name] = lanes
            self.stmt(s.body, depth + 1)
            del self.promoted[b.name]
        elif n * ITEMSIZE[b.dtype] <= STACK_LIMIT:
            self.emit(f"{ct} {b.name}[{n}] __attribute__((aligned({ALIGNMENT})));", depth + 1)
            self.stmt(s.body, depth + 1)
        else:
            self.emit(f"{ct}* restrict {b.name} = ({ct}*)aligned_alloc({ALIGNMENT}, "
                      f"{round_up_to_alignment(n * ITEMSIZE[b.dtype])});", depth + 1)
            self.emit(f"if ({b.name} == NULL) {{ tvmlite_status = -1; }} else {{", depth + 1)
            self.stmt(s.body, depth + 2)
            self.emit(f"free({b.name});", depth + 2)
            self.emit("}", depth + 1)
        self.emit("}", depth)


def _const(e: Const) -> str:
    v = e.value
    if e.dtype in ("float32", "float64"):
        f = "f" if e.dtype == "float32" else ""
        if math.isnan(v):
            return f"__builtin_nan{f}(\"\")"
        if math.isinf(v):
            return f"({'-' if v < 0 else ''}__builtin_inf{f}())"
        return f"{v!r}{f}"
    if e.dtype == "bool":
        return "1" if v else "0"
    if e.dtype == "int64" or not -2**31 <= v < 2**31:
        return f"{v}LL" if v != -2**63 else "(-9223372036854775807LL - 1)"
    return str(v) if v != -2**31 else "(-2147483647 - 1)"


def _emit_body(g: CodeGen, func: LoweredFunc) -> list:
    """The body of one function (allocations, loops, frees) as C lines, emitted with
    ``g`` (which collects the vector types and helpers every function needs)."""
    saved, g.lines = g.lines, []
    sizes = tuple(getattr(func, "sizes", ()))
    g.ranges.update(size_ranges(sizes))
    if sizes:  # symbolic sizes come from C callers too: refuse what no array can have
        g.emit(f"if ({' || '.join(f'{n} < 1' for n in sizes)}) return -2;", 1)
    g.emit("int32_t tvmlite_status = 0;", 1)
    if any(isinstance(st, TensorIntrinsic) and st.tile for st in walk_stmts(func.body)):
        g.emit(f"if (tvmlite_amx_permit() != 0) return {AMX_DENIED};", 1)
    for b in func.allocs:
        ct = CTYPE[b.dtype]
        g.emit(f"{ct}* restrict {b.name} = ({ct}*)aligned_alloc({ALIGNMENT}, {g.nbytes(b)});", 1)
    if func.allocs:
        missing = " || ".join(f"{b.name} == NULL" for b in func.allocs)
        g.emit(f"if ({missing}) {{", 1)
        for b in func.allocs:
            g.emit(f"free({b.name});", 2)
        g.emit("return -1;", 2)
        g.emit("}", 1)
    g.stmt(legalize(func.body), 1)
    for b in func.allocs:
        g.emit(f"free({b.name});", 1)
    g.emit("return tvmlite_status;", 1)
    body, g.lines = g.lines, saved
    return body


def generate(func: LoweredFunc, outputs: Iterable[str], openmp: bool = True,
             fallbacks: list | None = None) -> str:
    """Complete C source: the kernel ``name``, ``name_time`` and ``name_set_num_threads``,
    then each pack function of ``func.packs`` (``int32_t name_pack_X(const T* X, T*
    X_packed)``, run once at load time; see ``tvmlite.schedule.prepack``).
    A ``fallbacks`` list receives every ``LaneFallback``, its line counted in the source."""
    outputs = list(outputs)
    g = CodeGen(openmp)
    sizes = tuple(getattr(func, "sizes", ()))
    body = _emit_body(g, func)
    kernel_fallbacks = list(g.fallbacks)
    pack_bodies = [(p, _emit_body(g, p.func)) for p in getattr(func, "packs", ())]
    n = func.name
    tnames = list(sizes) + [f"tvmlite_a{i}" for i in range(len(func.args))]
    src = ["// generated by tvmlite", "#include <stdint.h>", "#include <stdlib.h>",
           "#include <time.h>", "#ifdef _OPENMP", "#include <omp.h>", "#endif", ""]
    helpers = helper_lines(g.helpers, g.vt)   # first: they may use mask types of their own
    intrinsic_lines = [line for fn, (name, a, b, acc) in sorted(g.intrinsics.items())
                       for line in helper_source(name, a, b, acc)]
    intrinsic_lines += [line for fn, t in sorted(g.tiles.items())
                        for line in tile_helper_source(*t)]
    if g.tiles:
        intrinsic_lines = amx_permit_source() + intrinsic_lines
    includes = sorted({include_line(t[0]) for t in (*g.intrinsics.values(),
                                                      *g.tiles.values())})
    src[1:1] = includes
    src += typedef_lines(g.vtypes) + helpers + intrinsic_lines + [""]
    src.append(f"int32_t {n}({params(func, outputs)}) {{")
    if fallbacks is not None:
        fallbacks.extend(LaneFallback(f.kind, f.name, f.lanes, f.stride, f.line + len(src))
                         for f in kernel_fallbacks)
    src += body
    src.append("}")
    src += [""] + timer_lines(n, params(func, outputs, tnames), tnames) + [
            f"void {n}_set_num_threads(int32_t n) {{",
            "#ifdef _OPENMP", "  if (n > 0) omp_set_num_threads(n);", "#endif",
            "  (void)n;", "}", ""]
    for p, pbody in pack_bodies:
        src += [f"int32_t {p.func.name}({params(p.func, [p.packed])}) {{"] + pbody + ["}", ""]
    return "\n".join(src)
