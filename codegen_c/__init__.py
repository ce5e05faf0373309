"""Loop IR -> C, and C -> a loaded library: compiler driver with an on-disk cache, cffi loader."""

from __future__ import annotations

from tvmlite.codegen_c.compiler import (
                                        CompileError,
                                        CompileTimeoutError,
                                        compile_executable,
                                        compile_shared,
                                        default_cache_dir,
                                        link_shared,
)
from tvmlite.codegen_c.loader import load_library

__all__ = ["CompileError", "CompileTimeoutError", "compile_executable", "compile_shared",
           "default_cache_dir",
           "link_shared", "load_library"]
