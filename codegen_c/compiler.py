"""C source -> shared library, through a content-addressed on-disk cache.

Tuning compiles thousands of candidates, many of them identical (replays, re-measured
bests, the same kernel in two tasks), so a compile is keyed by everything that decides
its output: the source, the compiler (path and version), the flags, and the CPU the
``-march=native`` flag resolves to. A hit costs one ``stat``. Layout::

    <cache_dir>/<key[:2]>/<key>.c     the source, kept for inspection
    <cache_dir>/<key[:2]>/<key>.so    the library
    <cache_dir>/<key[:2]>/<key>.o     an object ``link_shared`` links (a bundle's kernels)
    <cache_dir>/<key[:2]>/<key>.log   compiler warnings, only when there were any

Writers never expose a half-written file: each compiles to a unique temp name in the
same directory and ``os.replace``s it into place, so any number of threads or processes
may compile the same source at once.
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import signal
import subprocess
import tempfile
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tvmlite.errors import TvmliteError

if TYPE_CHECKING:
    from tvmlite.target.target import Target

__all__ = ["CompileError", "CompileTimeoutError", "compile_shared", "compile_executable",
           "default_cache_dir", "link_shared"]

# Bump when the command line shape below changes, so old cache entries are not reused.
_SCHEME = "tvmlite-compile-v1"
_LINK_LIBS = ("-lm",)
_STDERR_LINES = 30


class CompileError(TvmliteError, RuntimeError):
    """The C compiler rejected a source; ``.stderr`` holds its full diagnostics."""

    def __init__(self, message: str, source_path: Path, stderr: str) -> None:
        super().__init__(message)
        self.source_path = source_path
        self.stderr = stderr


class CompileTimeoutError(CompileError):
    """The compiler ran longer than ``timeout`` seconds (and was killed)."""


def default_cache_dir() -> Path:
    """``$TVMLITE_CACHE_DIR`` when set (a benchmark of tuning time starts from an empty
    one: a warm cache makes every repeated candidate free), else
    ``~/.cache/tvmlite/kernels``, or ``<tmp>/tvmlite-cache`` when HOME is not writable."""
    chosen = os.environ.get("TVMLITE_CACHE_DIR")
    if chosen:
        path = Path(chosen)
        try:
            path.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise ValueError(f"TVMLITE_CACHE_DIR={chosen!r} cannot be used as the kernel "
                             f"cache: {e.strerror}; point it at a writable folder") from None
        return path
    home = Path(os.path.expanduser("~/.cache/tvmlite/kernels"))
    try:
        home.mkdir(parents=True, exist_ok=True)
        if os.access(home, os.W_OK | os.X_OK):
            return home
    except OSError:
        pass
    fallback = Path(tempfile.gettempdir()) / "tvmlite-cache"
    fallback.mkdir(parents=True, exist_ok=True)
    return fallback


def cache_key(source: str, target: Target, flags: tuple[str, ...],
              link: tuple[str, ...] = _LINK_LIBS) -> str:
    """sha256 of everything that decides the compiled bytes.

    The CPU (arch + features) is included because ``-march=native`` means a different
    instruction set on another machine sharing the same home directory.
    """
    canon = json.dumps({
        "scheme": _SCHEME, "source": source, "compiler": target.compiler,
        "compiler_version": target.compiler_version, "flags": list(flags),
        "link": list(link), "arch": target.arch, "features": list(target.features),
    }, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canon.encode()).hexdigest()


def compile_shared(source: str, target: Target, *,
                   cache_dir: str | os.PathLike[str] | None = None,
                   timeout: float | None = 60.0, extra_flags: tuple[str, ...] = (),
                   warnings_as_errors: bool = False, linkable: bool = False) -> Path:
    """Compile ``source`` into a shared library with ``target``'s compiler and flags.

    Returns the path of the cached ``.so`` (compiling only on a cache miss). Raises
    CompileError with the compiler's diagnostics, CompileTimeoutError after ``timeout``
    seconds. ``warnings_as_errors`` adds ``-Werror`` (part of the cache key, so a cached
    library built with warnings never satisfies a -Werror request).

    ``linkable=True`` (with no extra flags) compiles the object ``link_shared`` would
    link, through the same cache, and links the library from it: a model's kernels are
    built to run here and then exported into one bundle, and so gcc compiles each once
    rather than twice, for one more link (tens of milliseconds) per kernel.
    """
    if not isinstance(source, str):
        raise TypeError(f"compile_shared(source=...) must be C source text (str), got "
                        f"{type(source).__name__}")
    if isinstance(extra_flags, str) or not all(isinstance(f, str) for f in extra_flags):
        raise TypeError("compile_shared(extra_flags=...) must be a tuple of strings, e.g. "
                        "('-DN=4',)")
    if timeout is not None and timeout <= 0:
        raise ValueError(f"compile_shared(timeout={timeout!r}): use a positive number of "
                         "seconds, or None for no limit")
    if linkable and not extra_flags and not warnings_as_errors:
        obj = _compile_cached(source, target, object_flags(target), (), ".o", cache_dir,
                              timeout)
        lib = obj.with_suffix(".so")
        return lib if lib.exists() else _link([obj], target, lib, timeout)
    flags = tuple(target.cflags) + tuple(extra_flags) + (("-Werror",) if warnings_as_errors
                                                         else ())
    return _compile_cached(source, target, flags, _LINK_LIBS, ".so", cache_dir, timeout)


def object_flags(target: Target) -> tuple[str, ...]:
    """The flags that compile one file of a bundle: the target's, ``-c`` for ``-shared``."""
    return tuple(f for f in target.cflags if f != "-shared") + ("-c",)


def compile_executable(source: str, target: Target, *,
                       cache_dir: str | os.PathLike[str] | None = None,
                       timeout: float | None = 120.0) -> Path:
    """Compile ``source`` (one C file with ``main``) into a program for ``target``: the
    target's compiler (a cross compiler for another architecture) and flags, without
    ``-shared``, linked with libdl and libm. Cached like ``compile_shared``; the result
    runs on the target (or under its emulator), not necessarily here."""
    if not isinstance(source, str):
        raise TypeError(f"compile_executable(source=...) must be C source text (str), got "
                        f"{type(source).__name__}")
    flags = tuple(f for f in target.cflags if f not in ("-shared", "-fPIC"))
    return _compile_cached(source, target, flags, ("-ldl", "-lm"), ".exe", cache_dir, timeout)


def _compile_cached(source: str, target: Target, flags: tuple[str, ...],
                    link: tuple[str, ...], suffix: str, cache_dir: Any,
                    timeout: float | None) -> Path:
    key = cache_key(source, target, flags, link)
    root = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    bucket = root / key[:2]
    so_path = bucket / f"{key}{suffix}"
    if so_path.exists():
        return so_path
    bucket.mkdir(parents=True, exist_ok=True)
    c_path = bucket / f"{key}.c"
    if not c_path.exists():
        _atomic_write(c_path, source)

    tmp_so = bucket / f".{key}.{_unique()}{suffix}.tmp"
    cmd = [target.compiler, *flags, str(c_path), "-o", str(tmp_so), *link]
    try:
        returncode, stderr = _run_compiler(cmd, timeout, c_path)
        if returncode != 0:
            raise CompileError(_error_message(cmd, c_path, stderr, returncode), c_path,
                               stderr)
        if stderr.strip():
            _atomic_write(bucket / f"{key}.log", stderr)
        os.replace(tmp_so, so_path)
    finally:
        tmp_so.unlink(missing_ok=True)
    return so_path


def link_shared(sources: list[Path], target: Target, out: Path,
                timeout: float | None = 300.0) -> Path:
    """Compile several C files (each on its own, so their ``static`` helpers never
    clash) and link them into one shared library ``out``: the deployable bundle. The
    files compile at the same time, one per core of this machine: a model's kernels are
    tens of files, and a tuned kernel's unrolled C takes gcc seconds. Each object goes
    through the cache like ``compile_shared``'s libraries, so a kernel built with
    ``compile_shared(linkable=True)`` and then linked into the bundle (a model's build and
    export) compiles once, and a second export not at all."""
    flags = object_flags(target)

    def compile_object(src: Path) -> Path:
        return _compile_cached(Path(src).read_text(), target, flags, (), ".o", None, timeout)

    with ThreadPoolExecutor(max(1, min(len(sources), os.cpu_count() or 1))) as pool:
        futures = [pool.submit(compile_object, Path(src)) for src in sources]
        try:
            objects = [done.result() for done in futures]   # the first error, in order
        except BaseException:      # an error or Ctrl-C: start no further compile
            for f in futures:
                f.cancel()
            raise
    return _link(objects, target, Path(out), timeout)


def _link(objects: list[Path], target: Target, out: Path, timeout: float | None) -> Path:
    """Link ``objects`` into the shared library ``out``, replaced atomically."""
    tmp = out.with_name(f".{out.name}.{_unique()}.tmp")
    cmd = [target.compiler, "-shared", *[f for f in target.cflags if f in ("-fopenmp", "-fPIC")],
           *map(str, objects), "-o", str(tmp), *_LINK_LIBS]
    try:
        rc, err = _run_compiler(cmd, timeout, out)
        if rc != 0:
            raise CompileError(_error_message(cmd, out, err, rc), out, err)
        os.replace(tmp, out)
    finally:
        tmp.unlink(missing_ok=True)
    return out


def _unique() -> str:
    """A name part no other thread or process uses at the same time."""
    return f"{os.getpid()}.{threading.get_ident()}.{secrets.token_hex(4)}"


def _atomic_write(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.{_unique()}.tmp")
    try:
        tmp.write_text(text)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def _run_compiler(cmd: list[str], timeout: float | None, c_path: Path) -> tuple[int, str]:
    """Run the compiler in its own process group, so a timeout also kills cc1/as/ld."""
    try:
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True, start_new_session=True)
    except OSError as e:
        raise CompileError(f"could not start the compiler {cmd[0]!r}: {e}. Re-detect the "
                           "target with Target.host() or pass compiler=/path/to/cc",
                           c_path, str(e)) from e
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        _kill_group(proc)
        out, err = proc.communicate()
        raise CompileTimeoutError(
            f"compiling {c_path} took longer than timeout={timeout}s and was stopped: "
            "raise compile_shared(timeout=...) or simplify the kernel (less unrolling)",
            c_path, err or "") from None
    except BaseException:
        _kill_group(proc)
        proc.wait()
        raise
    return proc.returncode, (out or "") + (err or "")


def _kill_group(proc: subprocess.Popen[str]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        proc.kill()


def _error_message(cmd: list[str], c_path: Path, stderr: str, returncode: int) -> str:
    lines = stderr.rstrip().splitlines()
    shown = "\n".join(lines[:_STDERR_LINES])
    more = f"\n... ({len(lines) - _STDERR_LINES} more lines in .stderr)" \
        if len(lines) > _STDERR_LINES else ""
    return (f"C compiler failed (exit {returncode}) on {c_path}\n"
            f"command: {' '.join(cmd)}\n{shown}{more}")
