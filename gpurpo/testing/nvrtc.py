"""Compile CUDA C to PTX with NVRTC, without a GPU or driver.

NVRTC is the compiler ``cupy.RawModule`` uses at run time. Compiling every
``kernels/*.cu`` with it in CI (through the ``cuda-bindings`` and
``nvidia-cuda-nvrtc-cu12`` wheels) catches kernels that would only fail on
a GPU machine. :func:`compile_ptx` returns the PTX text; :func:`ptx_entries`
lists the kernels it defines.

The NVRTC shared library is located by ``cuda-bindings`` (through
``cuda.pathfinder``); if that fails, the library shipped in the
``nvidia-cuda-nvrtc-cu12`` wheel is loaded explicitly.
"""

from __future__ import annotations

import ctypes
import functools
import importlib.util
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

__all__ = [
    "NvrtcError",
    "NvrtcUnavailableError",
    "compile_ptx",
    "kernel_names",
    "nvrtc_version",
    "ptx_entries",
]

DEFAULT_OPTIONS = ("--std=c++17",)


class NvrtcError(RuntimeError):
    """NVRTC rejected a source; ``log`` holds the compiler's messages."""

    def __init__(self, message: str, log: str = ""):
        super().__init__(message)
        self.log = log


class NvrtcUnavailableError(RuntimeError):
    """``cuda-bindings`` or the NVRTC library is missing."""


def _wheel_library() -> Path | None:
    spec = importlib.util.find_spec("nvidia")
    if spec is None or not spec.submodule_search_locations:
        return None
    for root in spec.submodule_search_locations:
        lib_dir = Path(root) / "cuda_nvrtc" / "lib"
        candidates = sorted(lib_dir.glob("libnvrtc.so*")) + sorted(lib_dir.glob("nvrtc64_*.dll"))
        for path in candidates:
            if "builtins" not in path.name and "alt" not in path.name:
                return path
    return None


@functools.lru_cache(maxsize=1)
def _nvrtc() -> Any:
    try:
        from cuda.bindings import nvrtc
    except ImportError as exc:
        raise NvrtcUnavailableError(
            "NVRTC compile checks need the 'cuda-bindings<13' and 'nvidia-cuda-nvrtc-cu12' "
            f"packages (pip install 'gpurpo[test]'): {exc}"
        ) from exc
    try:
        nvrtc.nvrtcVersion()
    except Exception as first:  # library not found by cuda-bindings
        path = _wheel_library()
        if path is None:
            raise NvrtcUnavailableError(
                f"cuda-bindings could not load the NVRTC library ({first}) and the "
                "nvidia-cuda-nvrtc-cu12 wheel is not installed"
            ) from first
        try:
            ctypes.CDLL(str(path), mode=ctypes.RTLD_GLOBAL)
            nvrtc.nvrtcVersion()
        except Exception as exc:
            raise NvrtcUnavailableError(f"cannot load the NVRTC library {path}: {exc}") from exc
    return nvrtc


def nvrtc_version() -> tuple[int, int]:
    """(major, minor) version of the NVRTC library in use."""
    nvrtc = _nvrtc()
    err, major, minor = nvrtc.nvrtcVersion()
    _check(nvrtc, err, "nvrtcVersion")
    return int(major), int(minor)


def _check(nvrtc: Any, err: Any, what: str, log: str = "") -> None:
    if err != nvrtc.nvrtcResult.NVRTC_SUCCESS:
        _, text = nvrtc.nvrtcGetErrorString(err)
        raise NvrtcError(f"{what} failed: {text.decode() if isinstance(text, bytes) else text}", log)


def _get_log(nvrtc: Any, prog: Any) -> str:
    err, size = nvrtc.nvrtcGetProgramLogSize(prog)
    _check(nvrtc, err, "nvrtcGetProgramLogSize")
    # NVRTC writes into the buffer: it must be a fresh mutable one. (``b" " * 1``
    # is CPython's cached one-byte object: writing its NUL terminator there would
    # turn every later b" " of the interpreter into b"\0".)
    buf = bytearray(size)
    (err,) = nvrtc.nvrtcGetProgramLog(prog, buf)
    _check(nvrtc, err, "nvrtcGetProgramLog")
    return bytes(buf).rstrip(b"\0 ").decode(errors="replace")


def compile_ptx(
    source: str,
    arch: str = "compute_90",
    options: Iterable[str] = DEFAULT_OPTIONS,
    name: str = "kernel.cu",
) -> str:
    """Compile CUDA C ``source`` to PTX with NVRTC.

    Parameters
    ----------
    source : str
        CUDA C source.
    arch : str
        Virtual architecture, e.g. ``"compute_80"`` or ``"compute_90"``
        (passed as ``--gpu-architecture``).
    options : iterable of str
        Further NVRTC options; the default matches what
        :meth:`gpurpo.backend.Backend.load_module` gives ``cupy.RawModule``.
    name : str
        File name used in the compiler's messages.

    Returns
    -------
    str
        The PTX text.

    Raises
    ------
    NvrtcError
        If the source does not compile; ``.log`` holds NVRTC's messages.
    NvrtcUnavailableError
        If cuda-bindings / the NVRTC library are not installed.
    """
    if not isinstance(source, str):
        raise TypeError(f"source must be a str, got {type(source).__name__}")
    if not re.fullmatch(r"(compute|sm)_\d+[a-z]?", arch):
        raise ValueError(f"arch must look like 'compute_90' or 'sm_80', got {arch!r}")
    nvrtc = _nvrtc()
    opts = [f"--gpu-architecture={arch}".encode(), *(str(o).encode() for o in options)]
    err, prog = nvrtc.nvrtcCreateProgram(source.encode(), name.encode(), 0, [], [])
    _check(nvrtc, err, "nvrtcCreateProgram")
    try:
        (err,) = nvrtc.nvrtcCompileProgram(prog, len(opts), opts)
        log = _get_log(nvrtc, prog)
        if err != nvrtc.nvrtcResult.NVRTC_SUCCESS:
            raise NvrtcError(f"NVRTC could not compile {name!r} for {arch}:\n{log}", log)
        err, size = nvrtc.nvrtcGetPTXSize(prog)
        _check(nvrtc, err, "nvrtcGetPTXSize", log)
        buf = bytearray(size)
        (err,) = nvrtc.nvrtcGetPTX(prog, buf)
        _check(nvrtc, err, "nvrtcGetPTX", log)
    finally:
        nvrtc.nvrtcDestroyProgram(prog)
    return bytes(buf).rstrip(b"\0").decode()


_ENTRY = re.compile(r"^\s*(?:\.(?:visible|weak)\s+)?\.entry\s+([A-Za-z_$][\w$]*)\s*\(", re.M)


def ptx_entries(ptx: str) -> set[str]:
    """Names of the kernels (``.entry`` directives) defined in PTX text."""
    return set(_ENTRY.findall(ptx))


def kernel_names(source: str, options: Iterable[str] = DEFAULT_OPTIONS, name: str = "kernel.cu") -> list[str]:
    """Names of the ``extern "C" __global__`` kernels defined by ``source``.

    Macros are expanded with the C preprocessor of the CUDA emulator when a
    C++ compiler is available (so macro-generated kernels are listed);
    otherwise the kernels are read from the text with comments ignored.
    """
    from gpurpo.testing.cuda_emulator import _build, _parse

    text = source
    try:
        text = _build.preprocess(source, name, tuple(options))
    except _build.EmulatorUnavailableError:
        pass
    return [k.name for k in _parse.find_kernels(text)]
