"""The C a kernel's body calls but C lacks: vector types (GCC vector extensions, each with
an unaligned twin) and helper functions -- scalar min/max with NaN propagating, floor
division and modulo defined for every divisor, and vector min/max, select and exp
written with bit masks (C, unlike C++, has no vector ``?:``)."""
from __future__ import annotations

from typing import Callable

from tvmlite.codegen_c.lowp import conversion_lines
from tvmlite.ir.dtypes import C_HELPER, CTYPE, DTYPE_INFO, ITEMSIZE

SHORT = {name: d.short for name, d in DTYPE_INFO.items()}
MASK_OF = {name: d.mask for name, d in DTYPE_INFO.items()}


def typedef_lines(vtypes: set) -> list:
    """The vector types used, each with its unaligned, may-alias twin (``..._u``)."""
    out = []
    for dtype, lanes in sorted(vtypes):
        ct = CTYPE[dtype]
        nbytes = lanes * ITEMSIZE[dtype]
        name = f"tvmlite_{SHORT[dtype]}x{lanes}"
        out.append(f"typedef {ct} {name} __attribute__((vector_size({nbytes})));")
        out.append(f"typedef {ct} {name}_u __attribute__((vector_size({nbytes}), "
                   f"aligned({ITEMSIZE[dtype]}), may_alias));")
    return out


def helper_lines(helpers: set, vector_type: Callable[[str, int], str]) -> list:
    """The C helper functions ``helpers`` names ((kind, dtype, lanes)); ``vector_type`` names
    a vector type (and records it: a helper may use mask types the kernel does not)."""
    out = []
    for kind, dtype, lanes in sorted(helpers):
        if kind == "cvt":    # float32 <-> a storage float: dtype is "src:dst"
            src, dst = dtype.split(":")
            out += conversion_lines(src, dst, lanes, vector_type)
            continue
        ct, sh = CTYPE[dtype], SHORT[dtype]
        if kind in ("min", "max"):
            op = "<" if kind == "min" else ">"
            nan = " || a != a" if dtype in ("float32", "float64") else ""  # NaN wins
            out.append(f"{C_HELPER} {ct} tvmlite_{kind}_{sh}({ct} a, {ct} b) "
                       f"{{ return a {op} b{nan} ? a : b; }}")
        elif kind in ("floordiv", "floormod") and ITEMSIZE[dtype] < 4:
            # narrow integers: computed in int32, where no divisor traps, then wrapped
            body = ("{ int32_t x = a, y = b; if (y == 0) return 0; int32_t q = x / y; "
                    "return (" + ct + ")((x % y != 0 && ((x < 0) != (y < 0))) ? q - 1 : q); }"
                    if kind == "floordiv" else
                    "{ int32_t x = a, y = b; if (y == 0) return 0; int32_t r = x % y; "
                    "return (" + ct + ")((r != 0 && ((r < 0) != (y < 0))) ? r + y : r); }")
            out.append(f"{C_HELPER} {ct} tvmlite_{kind}_{sh}({ct} a, {ct} b) {body}")
        elif kind in ("floordiv", "floormod"):
            # Defined for every divisor (as TVM and Halide define them): x // 0 == 0 and
            # x % 0 == 0, and x // -1 == -x wrapping (INT_MIN // -1 == INT_MIN): C's
            # '/' by 0, or of INT_MIN by -1, is undefined and traps (SIGFPE).
            ut = "uint32_t" if dtype == "int32" else "uint64_t"
            body = ("{ if (b == 0) return 0; if (b == -1) return (" + ct + ")((" + ut +
                    ")0 - (" + ut + ")a); " + ct + " q = a / b; "
                    "return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q; }"
                    if kind == "floordiv" else
                    "{ if (b == 0 || b == -1) return 0; " + ct + " r = a % b; "
                    "return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r; }")
            out.append(f"{C_HELPER} {ct} tvmlite_{kind}_{sh}({ct} a, {ct} b) {body}")
        else:
            vt, mt = vector_type(dtype, lanes), vector_type(MASK_OF[dtype], lanes)
            name = f"tvmlite_{kind}_{sh}x{lanes}"
            if kind == "vexp":
                out.append(VEXP.format(name=name, vt=vt, mt=mt))
            elif kind == "verf":
                out.append(VERF.format(name=name, vt=vt, mt=mt))
            elif kind == "vsqrt":
                out += vsqrt_lines(name, vt, lanes)
            elif kind == "vsel":
                out.append(f"{C_HELPER} {vt} {name}({mt} m, {vt} t, {vt} o) "
                           f"{{ return ({vt})((({mt})t & m) | (({mt})o & ~m)); }}")
            elif kind == "inreg":   # codegen.held_in_register says why
                out += [f"{C_HELPER} {vt} {name}({vt} v) {{",
                        "#if defined(__SSE2__)",
                        '  __asm__("" : "+x"(v));',
                        "#endif",
                        "  return v;", "}"]
            elif kind in ("vmink", "vmaxk"):
                # min/max of a float and a number k (never NaN): the same value as vmin/vmax
                # (a NaN ``a`` wins, a tie gives k) from one compare, false for a NaN ``a``
                op = ">=" if kind == "vmink" else "<="
                out.append(f"{C_HELPER} {vt} {name}({vt} a, {vt} k) {{ {mt} m = (a {op} k);"
                           f" return ({vt})((({mt})k & m) | (({mt})a & ~m)); }}")
            else:
                op = "<" if kind == "vmin" else ">"
                nan = " | (a != a)" if dtype in ("float32", "float64") else ""
                out.append(f"{C_HELPER} {vt} {name}({vt} a, {vt} b) {{ {mt} m = (a {op} b)"
                           f"{nan}; return ({vt})((({mt})a & m) | (({mt})b & ~m)); }}")
    return out


# exp(x) = 2^n * e^r with n = round(x / ln 2), r = x - n ln 2 (ln 2 split in two for
# precision), e^r by a degree-6 polynomial (Cephes' expf coefficients): within 2 ulp of
# libm for |x| <= 87; above 88.37 it is +inf (libm: 88.72), below -87.3 it is 0 (no
# subnormals), NaN stays NaN.
# the vector square roots of each ISA, widest first: (macro, float32 lanes, type, intrinsic)
SQRT_ISAS = (("__AVX512F__", 16, "__m512", "_mm512_sqrt_ps"),
             ("__AVX__", 8, "__m256", "_mm256_sqrt_ps"),
             ("__SSE2__", 4, "__m128", "_mm_sqrt_ps"),
             ("__aarch64__", 4, "float32x4_t", "vsqrtq_f32"))


def vsqrt_lines(name: str, vt: str, lanes: int) -> list[str]:
    """A float32 square root on ``lanes`` lanes in the widest vector instruction the
    compiler's target has (its ``-march``: the ISA macros) that divides them, else one
    lane at a time. Why not ``__builtin_sqrtf`` per lane: it may set errno, so GCC keeps
    a scalar root and a libm call per lane (an LRN's pow(x, 0.75) on Zen 4). Correctly
    rounded either way, NaN for a negative lane, as sqrtf."""
    out = ["#if defined(__x86_64__) || defined(__i386__)", "#include <immintrin.h>",
           "#elif defined(__aarch64__)", "#include <arm_neon.h>", "#endif",
           f"{C_HELPER} {vt} {name}({vt} x) {{", f"  {vt} r;"]
    first = True
    for macro, width, ctype, intrinsic in SQRT_ISAS:
        if lanes % width:
            continue
        out += [f"#{'if' if first else 'elif'} defined({macro})",
                f"  for (int i = 0; i < {lanes}; i += {width}) {{ {ctype} v; "
                f"__builtin_memcpy(&v, (float*)&x + i, sizeof v); v = {intrinsic}(v); "
                "__builtin_memcpy((float*)&r + i, &v, sizeof v); }"]
        first = False
    loop = f"  for (int i = 0; i < {lanes}; ++i) r[i] = __builtin_sqrtf(x[i]);"
    out += [loop] if first else ["#else", loop, "#endif"]
    return out + ["  return r;", "}"]


VEXP = C_HELPER + """ {vt} {name}({vt} x) {{
  const {vt} z = {{0}};
  const {vt} hi = z + 88.3762626647949f, lo = z - 87.3365447504f;
  {mt} over = x > hi, under = x < lo, nan = x != x;
  {vt} c = ({vt})((({mt})x & ~(over | under | nan)) | (({mt})hi & over) | (({mt})lo & under));
  {vt} fx = c * 1.44269504088896341f;
  {mt} n = __builtin_convertvector(fx + ({vt})((({mt})(z + 0.5f) & ~(fx < 0)) | \
(({mt})(z - 0.5f) & (fx < 0))), {mt});
  {vt} nf = __builtin_convertvector(n, {vt});
  {vt} r = c - nf * 0.693359375f + nf * 2.12194440e-4f;
  {vt} p = z + 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f; p = p * r + 8.3334519073e-3f; p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f; p = p * r + 5.0000001201e-1f;
  {vt} y = p * r * r + r + 1.0f;
  {vt} res = y * ({vt})((n + 127) << 23);
  {vt} inf = z + __builtin_inff();
  res = ({vt})((({mt})res & ~(over | under)) | (({mt})inf & over));
  return ({vt})((({mt})res & ~nan) | (({mt})x & nan));
}}"""

# erf on float32 lanes (GELU's): x * P(x**2) / Q(x**2), P and Q of degree 5, with |x|
# clamped to 4.1 (erf is 1.0f from 3.9 on, so the clamp also gives erf(inf) = 1) and the
# quotient capped at 1. The coefficients are a rational fit of erf on [0, 4.1]
# (``python -m bench.erf_fit`` derives them and measures the error): within 2.5 float32
# ulps of math.erf over [-6, 6], one division and ten multiply-adds a vector. The previous
# form (a Taylor series below 0.8, erfc's Chebyshev fit on the vector exp above, both
# computed for every lane) was within 1.5 ulps and five times the instructions: a BERT
# FFN's fused GELU epilogue took a third of its bf16 matmul's time. The sign is put back
# last (erf(-0) = -0); a NaN stays NaN (every compare is false for it).
VERF = C_HELPER + """ {vt} {name}({vt} x) {{
  const {vt} z = {{0}};
  {vt} a = ({vt})(({mt})x & 0x7FFFFFFF);
  a = ({vt})((({mt})a & ~(a > 4.1f)) | (({mt})(z + 4.1f) & (a > 4.1f)));
  {vt} s = a * a;
  {vt} p = z + 1.9131494e-06f;
  p = p * s + 0.00028505723f; p = p * s + 0.00404836f; p = p * s + 0.05360668f;
  p = p * s + 0.19783226f; p = p * s + 1.1283791f;
  {vt} q = z + 3.667901e-05f;
  q = q * s + 0.0012194203f; q = q * s + 0.015542694f; q = q * s + 0.11706523f;
  q = q * s + 0.50865656f; q = q * s + 1.0f;
  {vt} r = a * p / q;
  r = ({vt})((({mt})r & ~(r > 1.0f)) | (({mt})(z + 1.0f) & (r > 1.0f)));
  return ({vt})(({mt})r | (({mt})x & (int32_t)0x80000000u));
}}"""
