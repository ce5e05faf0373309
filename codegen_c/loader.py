"""Open a compiled kernel library with cffi (ABI mode: no second C compile per kernel).

Libraries are opened once per process and kept open: the cache key is the path and the
declarations, which is sound because ``compile_shared`` paths are content-addressed (a
given path always holds the same code). Keeping the FFI object referenced also keeps
the library mapped for as long as any function pointer taken from it may be called.

Libraries are opened with RTLD_NODELETE: cffi dlcloses a library when its ``lib`` object
dies (at the latest at interpreter exit), which unloads libgomp while its idle worker
threads still run inside it -- a segfault at exit of any process that ran a parallel
kernel. RTLD_NOW reports unresolved symbols at load time instead of at the first call.
"""

from __future__ import annotations

import os
import threading
from typing import Any

import cffi

__all__ = ["load_library"]

_LOADED: dict[tuple[str, str], tuple[cffi.FFI, Any]] = {}
_LOCK = threading.Lock()
_DLOPEN_FLAGS = cffi.FFI().RTLD_NOW | getattr(cffi.FFI(), "RTLD_NODELETE", 0)


def load_library(path: str | os.PathLike[str], cdecl: str) -> tuple[cffi.FFI, Any]:
    """Return ``(ffi, lib)`` for the shared library at ``path`` declared by ``cdecl``.

    ``cdecl`` is plain C declarations (no #include, no macros), e.g.
    ``"void add(float* a, int n);"``. Raises OSError naming the path when the library
    cannot be opened, ValueError when ``cdecl`` does not parse.
    """
    key = (os.path.abspath(os.fspath(path)), cdecl)
    with _LOCK:
        hit = _LOADED.get(key)
        if hit is not None:
            return hit
        ffi = cffi.FFI()
        try:
            ffi.cdef(cdecl)
        except (cffi.CDefError, cffi.FFIError) as e:
            raise ValueError(f"load_library(cdecl=...): cffi could not parse the "
                             f"declarations ({e}); pass plain C prototypes without "
                             f"#include or macros") from e
        try:
            lib = ffi.dlopen(key[0], _DLOPEN_FLAGS)
        except OSError as e:
            raise OSError(f"could not load the kernel library {key[0]!r}: {e}. Check that "
                          f"the file exists and was built for this machine (recompile "
                          f"with compile_shared)") from e
        _LOADED[key] = (ffi, lib)
        return ffi, lib
