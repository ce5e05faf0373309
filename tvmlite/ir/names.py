"""The one table of names the generated C owns, and the identifier rule every name of a
tensor, axis, stage or kernel follows.

Names reach the C text as they are (``float* restrict A``, ``for (int64_t i = ...)``), so
a C keyword, a type or function the generated code uses, or our own ``tvmlite_`` prefix
would break or hijack it. ``te.check_name`` refuses them in user names; bound inference
keeps the loop variables it generates clear of them. ``unique_name`` is how a schedule
step names a new loop or stage and how ``te.compute`` renames an axis away from a size.
"""
from __future__ import annotations

import hashlib
import re

__all__ = ["IDENT", "RESERVED", "RESERVED_PREFIXES", "unique_name"]

IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")

RESERVED = frozenset("""
auto break case char const continue default do double else enum extern float for goto if
inline int long register restrict return short signed sizeof static struct switch typedef
union unsigned void volatile while
_Alignas _Alignof _Atomic _Bool _Complex _Generic _Imaginary _Noreturn _Static_assert
_Thread_local
int32_t int64_t NULL free malloc aligned_alloc main timespec clock_gettime CLOCK_MONOTONIC
omp_set_num_threads
""".split())

RESERVED_PREFIXES = ("tvmlite_", "__")


MAX_LOOP_NAME = 48  # generated loop names stay well inside IDENT's 64 characters


def unique_name(name: str, taken: set) -> str:
    """``name``, made unique among ``taken``; a generated name that grew too long (deep
    splits, many fused loops) keeps its head and a digest of the rest, deterministically."""
    if len(name) > MAX_LOOP_NAME:
        digest = hashlib.sha1(name.encode()).hexdigest()[:8]
        name = f"{name[:MAX_LOOP_NAME - 9]}_{digest}"
    out, n = name, 0
    while out in taken:
        n += 1
        out = f"{name}_{n}"
    return out
