"""Compile CUDA C as C++20 with g++ and cache the shared libraries.

A source is compiled in two passes: ``g++ -E`` expands the preprocessor
(with ``emulator.h`` included first), :mod:`._parse` rewrites the expanded text
and appends the launch table, and ``g++ -shared`` builds the library. The
result is cached on disk under a key that hashes everything that determines
it (source, name, options, the emulator header and this package's parsing
code, the compiler's version), so a source is compiled once per machine.
Libraries are written to a temporary name and renamed into place, so
concurrent processes never load a half-written file; the cache keeps the
``MAX_CACHED_LIBRARIES`` most recently used libraries.
"""

from __future__ import annotations

import functools
import hashlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from gpurpo.testing.cuda_emulator import _parse

__all__ = [
    "EmulatorCompileError",
    "EmulatorUnavailableError",
    "build",
    "cache_dir",
    "compiler_flags",
    "preprocess",
]

_HERE = Path(__file__).resolve().parent
HEADER = _HERE / "emulator.h"
MAX_CACHED_LIBRARIES = 256
CXX_FLAGS = ("-std=c++20", "-O2", "-pthread", "-shared", "-fPIC", "-fno-strict-aliasing")

# NVRTC options that have no meaning for the C++ build (accepted, ignored).
_IGNORED_PREFIXES = (
    "--std=", "-std=", "--gpu-architecture", "-arch", "--fmad", "-fmad", "--ftz", "-ftz",
    "--prec-div", "-prec-div", "--prec-sqrt", "-prec-sqrt", "--maxrregcount", "-maxrregcount",
    "--relocatable-device-code", "-rdc", "--dopt", "-dopt", "--split-compile", "-split-compile",
    "--diag-suppress", "-diag-suppress", "--diag-error", "-diag-error", "--diag-warn", "-diag-warn",
    "-Xptxas", "--ptxas-options",
)
_IGNORED_EXACT = frozenset(
    {
        "--use_fast_math", "-use_fast_math", "-lineinfo", "--generate-line-info", "-G",
        "--device-debug", "--restrict", "-restrict", "--extra-device-vectorization", "-extra-device-vectorization",
        "-default-device", "--device-as-default-execution-space", "-dw", "--disable-warnings",
        "-w", "-ewp", "--extensible-whole-program", "--device-int128", "-device-int128",
    }
)


class EmulatorCompileError(RuntimeError):
    """The CUDA source did not compile as C++ for the emulator.

    Attributes
    ----------
    log : str
        The compiler's complete output.
    """

    def __init__(self, message: str, log: str = ""):
        super().__init__(message)
        self.log = log


class EmulatorUnavailableError(RuntimeError):
    """No C++20 compiler is available to build emulated kernels."""


def _compiler() -> str:
    cxx = os.environ.get("GPURPO_EMULATOR_CXX", "g++")
    path = shutil.which(cxx)
    if path is None:
        raise EmulatorUnavailableError(
            f"the CUDA emulator needs a C++20 compiler but {cxx!r} was not found on PATH; "
            "install g++ (12 or newer) or set GPURPO_EMULATOR_CXX"
        )
    return path


@functools.lru_cache(maxsize=4)
def _compiler_version(cxx: str) -> str:
    try:
        out = subprocess.run([cxx, "--version"], capture_output=True, text=True, check=True)
    except (OSError, subprocess.CalledProcessError) as exc:
        raise EmulatorUnavailableError(f"cannot run the C++ compiler {cxx!r}: {exc}") from exc
    return out.stdout.strip()


def compiler_flags(options: tuple[str, ...]) -> tuple[str, ...]:
    """Translate NVRTC/CuPy compile options into g++ flags.

    Macro definitions (``-D``/``--define-macro``), undefinitions and include
    paths carry over; code-generation options of NVRTC are ignored.

    Raises
    ------
    ValueError
        For an option that is neither translated nor known to be ignorable.
    """
    flags: list[str] = []
    for opt in options:
        if not isinstance(opt, str):
            raise TypeError(f"compile options must be strings, got {type(opt).__name__}: {opt!r}")
        if opt.startswith("--define-macro="):
            flags.append("-D" + opt.split("=", 1)[1])
        elif opt.startswith("--undefine-macro="):
            flags.append("-U" + opt.split("=", 1)[1])
        elif opt.startswith("--include-path="):
            flags.append("-I" + opt.split("=", 1)[1])
        elif opt.startswith(("-D", "-U", "-I")) and len(opt) > 2:
            flags.append(opt)
        elif opt in _IGNORED_EXACT or opt.startswith(_IGNORED_PREFIXES):
            continue
        else:
            raise ValueError(
                f"compile option {opt!r} is not supported by the CUDA emulator; supported: "
                "-D/--define-macro, -U/--undefine-macro, -I/--include-path and NVRTC "
                "code-generation options (ignored)"
            )
    return tuple(flags)


def cache_dir() -> Path:
    """Directory of compiled emulator libraries.

    ``$GPURPO_EMULATOR_CACHE`` if set, else ``$XDG_CACHE_HOME/gpurpo/emulator``
    (default ``~/.cache/gpurpo/emulator``); a per-user folder in the temporary
    directory when that is not writable.
    """
    env = os.environ.get("GPURPO_EMULATOR_CACHE")
    if env:
        candidates = [Path(env)]
    else:
        xdg = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
        candidates = [Path(xdg) / "gpurpo" / "emulator"]
    candidates.append(Path(tempfile.gettempdir()) / f"gpurpo-emulator-{os.getuid()}")
    for path in candidates:
        try:
            path.mkdir(parents=True, exist_ok=True)
        except OSError:
            continue
        if os.access(path, os.W_OK):
            return path
    raise EmulatorUnavailableError(f"no writable cache directory for the CUDA emulator (tried {candidates})")


def _key(source: str, name: str, flags: tuple[str, ...], cxx: str) -> str:
    h = hashlib.sha256()
    for part in (
        HEADER.read_bytes(),
        Path(_parse.__file__).read_bytes(),
        Path(__file__).read_bytes(),
        _compiler_version(cxx).encode(),
        "\0".join(CXX_FLAGS + flags).encode(),
        name.encode(),
        source.encode(),
    ):
        h.update(hashlib.sha256(part).digest())
    return h.hexdigest()[:40]


def _run(cmd: list[str], what: str, name: str) -> None:
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        log = proc.stderr.strip()
        errors = [line for line in log.splitlines() if "error" in line]
        summary = "\n".join(errors[:20]) if errors else log[-4000:]
        raise EmulatorCompileError(f"{what} of {name!r} for the CUDA emulator failed:\n{summary}", log)


def _safe_name(name: str) -> str:
    return "".join(c if c.isalnum() or c in "._-" else "_" for c in name) or "kernel.cu"


def _preprocess(cxx: str, source: str, name: str, flags: tuple[str, ...], work: Path) -> str:
    src = work / "kernel.cu.cpp"
    line_name = name.replace("\\", "\\\\").replace('"', '\\"')
    src.write_text(f'#include "emulator.h"\n#line 1 "{line_name}"\n{source}\n')
    pre = work / "kernel.ii"
    _run(
        [cxx, "-E", "-std=c++20", "-pthread", f"-I{HEADER.parent}", *flags, "-x", "c++", str(src), "-o", str(pre)],
        "preprocessing",
        name,
    )
    return pre.read_text()


def preprocess(source: str, name: str = "kernel.cu", options: tuple[str, ...] = ()) -> str:
    """The user part of ``source`` after the C preprocessor (macros expanded).

    Raises
    ------
    EmulatorUnavailableError
        If no C++ compiler is available.
    EmulatorCompileError
        If preprocessing fails.
    """
    cxx = _compiler()
    flags = compiler_flags(tuple(options))
    with tempfile.TemporaryDirectory(prefix="gpurpo-pp-") as tmp:
        return _parse.split_user_section(_preprocess(cxx, source, name, flags, Path(tmp)), name)[1]


def build(source: str, name: str = "kernel.cu", options: tuple[str, ...] = ()) -> Path:
    """Compile ``source`` for the emulator (or find it in the cache).

    Parameters
    ----------
    source : str
        CUDA C source with ``extern "C" __global__`` kernels.
    name : str
        File name used in compiler messages.
    options : tuple of str
        NVRTC-style options, see :func:`compiler_flags`.

    Returns
    -------
    pathlib.Path
        The shared library.

    Raises
    ------
    EmulatorCompileError
        If the source does not compile or uses a construct the emulator
        cannot translate.
    """
    cxx = _compiler()
    flags = compiler_flags(tuple(options))
    cache = cache_dir()
    key = _key(source, name, flags, cxx)
    target = cache / f"{_safe_name(Path(name).stem)}-{key}.so"
    if target.is_file():
        try:
            os.utime(target)  # most recently used: kept by _prune
        except OSError:
            pass
        return target
    work = Path(tempfile.mkdtemp(prefix="build-", dir=cache))
    try:
        head, body = _parse.split_user_section(_preprocess(cxx, source, name, flags, work), name)
        try:
            kernels = _parse.find_kernels(body)
            body = _parse.rewrite_shared(body)
        except _parse.SourceError as exc:
            raise EmulatorCompileError(f"cannot emulate {name!r}: {exc}") from None
        text = head + _parse.strip_global(body) + _parse.trampolines(kernels)
        gen = work / "kernel.gen.cpp"
        gen.write_text(text)
        lib = work / "kernel.so"
        _run([cxx, *CXX_FLAGS, "-x", "c++", str(gen), "-o", str(lib)], "compilation", name)
        os.replace(lib, target)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    _prune(cache, keep=MAX_CACHED_LIBRARIES)
    return target


def _prune(cache: Path, keep: int) -> None:
    """Delete all but the ``keep`` most recently used libraries of the cache."""
    libs = []
    for path in cache.glob("*.so"):
        try:
            libs.append((path.stat().st_mtime, path))
        except OSError:
            continue
    libs.sort(reverse=True)
    for _, path in libs[keep:]:
        try:
            path.unlink()  # a process that loaded it keeps its mapping
        except OSError:
            pass
