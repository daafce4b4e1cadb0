"""``EmulatedModule``: the CPU stand-in for ``cupy.RawModule``."""

from __future__ import annotations

import ctypes
import os
import threading
from pathlib import Path
from typing import Any

from gpurpo.testing.cuda_emulator import _build
from gpurpo.testing.cuda_emulator._launch import EmulatedKernel, parse_signature

__all__ = ["EmulatedModule", "raw_kernel"]

DEFAULT_SHARED_MEM_LIMIT = 48 * 1024
DEFAULT_SHARED_MEM_OPTIN_LIMIT = 227 * 1024
DEFAULT_TIMEOUT = 300.0

_LIBS: dict[str, ctypes.CDLL] = {}
_LIBS_LOCK = threading.Lock()


def _load(path: Path) -> ctypes.CDLL:
    key = str(path)
    with _LIBS_LOCK:
        lib = _LIBS.get(key)
        if lib is None:
            lib = ctypes.CDLL(key)
            lib.gpurpo_emu_kernel_count.restype = ctypes.c_int
            for fn in ("name", "signature", "param_names", "param_decls"):
                f = getattr(lib, f"gpurpo_emu_kernel_{fn}")
                f.argtypes = [ctypes.c_int]
                f.restype = ctypes.c_char_p
            lib.gpurpo_emu_launch.argtypes = [
                ctypes.c_int,
                ctypes.POINTER(ctypes.c_void_p),
                ctypes.POINTER(ctypes.c_uint),
                ctypes.POINTER(ctypes.c_uint),
                ctypes.c_ulonglong,
                ctypes.c_ulonglong,
                ctypes.c_int,
                ctypes.c_double,
                ctypes.c_char_p,
                ctypes.c_ulonglong,
            ]
            lib.gpurpo_emu_launch.restype = ctypes.c_int
            _LIBS[key] = lib
    return lib


def _env_int(name: str, default: int) -> int:
    value = os.environ.get(name)
    if value is None or value.strip() == "":
        return default
    try:
        return int(value)
    except ValueError:
        raise ValueError(f"environment variable {name} must be an integer, got {value!r}") from None


class EmulatedModule:
    """CUDA C kernels compiled for the CPU emulation of the CUDA execution model.

    Same construction and lookup as ``cupy.RawModule``: the source is
    compiled once (g++, C++20; cached on disk across processes) and
    ``get_function(name)`` returns a kernel called as
    ``kernel(grid, block, args, shared_mem=0)`` on NumPy arrays.

    Parameters
    ----------
    code : str, optional
        CUDA C source. Kernels must be ``extern "C" __global__``.
    path : str or Path, optional
        Read the source from this file instead of ``code``.
    options : tuple of str
        NVRTC-style options: ``-D``/``-U``/``-I`` carry over, code-generation
        options (``--std=...``, ``--use_fast_math``, ...) are ignored.
    name : str
        File name shown in compiler messages (defaults to the path's name or
        ``"kernel.cu"``).
    shared_mem_limit : int
        Static plus dynamic shared memory per block, in bytes (48 KiB, the
        limit of a CUDA launch without opt-in).
    shared_mem_optin_limit : int
        The most a kernel may opt in to through
        ``kernel.max_dynamic_shared_size_bytes`` (227 KiB as on sm_90).
    concurrent_blocks : int, optional
        Blocks run at the same time (each on its own set of block-size
        threads). Default: ``$GPURPO_EMULATOR_CONCURRENT_BLOCKS`` or 1.
    timeout : float
        Seconds after which a launch whose threads are stuck (e.g. in a
        barrier that not all threads reach) is abandoned with an error.
    check_bounds : bool
        Pass arrays through guarded copies that detect writes outside them.

    Raises
    ------
    EmulatorCompileError
        If the source does not compile for the emulator.
    EmulatorUnavailableError
        If no C++20 compiler is available.
    """

    def __init__(
        self,
        code: str | None = None,
        path: str | os.PathLike[str] | None = None,
        options: tuple[str, ...] = (),
        *,
        name: str | None = None,
        shared_mem_limit: int = DEFAULT_SHARED_MEM_LIMIT,
        shared_mem_optin_limit: int = DEFAULT_SHARED_MEM_OPTIN_LIMIT,
        concurrent_blocks: int | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        check_bounds: bool = True,
    ):
        if (code is None) == (path is None):
            raise TypeError("EmulatedModule needs exactly one of code= or path=")
        if path is not None:
            code = Path(path).read_text()
            name = name or Path(path).name
        if not isinstance(code, str):
            raise TypeError(f"code must be a str, got {type(code).__name__}")
        if isinstance(options, str):
            raise TypeError(f"options must be a tuple of strings, got the string {options!r}")
        self.code = code
        self.name = name or "kernel.cu"
        self.options = tuple(options)
        if shared_mem_limit < 1 or shared_mem_optin_limit < shared_mem_limit:
            raise ValueError(
                "need 1 <= shared_mem_limit <= shared_mem_optin_limit, got "
                f"{shared_mem_limit} and {shared_mem_optin_limit}"
            )
        self.shared_mem_limit = int(shared_mem_limit)
        self.shared_mem_optin_limit = int(shared_mem_optin_limit)
        if concurrent_blocks is None:
            concurrent_blocks = _env_int("GPURPO_EMULATOR_CONCURRENT_BLOCKS", 1)
        if not 1 <= int(concurrent_blocks) <= 64:
            raise ValueError(f"concurrent_blocks must be in [1, 64], got {concurrent_blocks}")
        self.concurrent_blocks = int(concurrent_blocks)
        if not timeout > 0:
            raise ValueError(f"timeout must be positive, got {timeout}")
        self.timeout = float(timeout)
        self.check_bounds = bool(check_bounds)
        self.library_path = _build.build(self.code, self.name, self.options)
        self._lib = _load(self.library_path)
        self._launch = self._lib.gpurpo_emu_launch
        self._kernels: dict[str, EmulatedKernel] = {}
        lib = self._lib
        for i in range(lib.gpurpo_emu_kernel_count()):
            kname = lib.gpurpo_emu_kernel_name(i).decode()
            names = lib.gpurpo_emu_kernel_param_names(i).decode()
            decls = lib.gpurpo_emu_kernel_param_decls(i).decode()
            params = parse_signature(
                lib.gpurpo_emu_kernel_signature(i).decode(),
                names.split(";") if names else [],
                decls.split(";") if decls else [],
            )
            self._kernels[kname] = EmulatedKernel(self, i, kname, params)

    @property
    def kernel_names(self) -> tuple[str, ...]:
        """Names of the ``extern "C" __global__`` kernels of the module."""
        return tuple(self._kernels)

    def get_function(self, name: str) -> EmulatedKernel:
        """The kernel ``name`` (a new handle each call, like ``cupy.RawModule``)."""
        try:
            k = self._kernels[name]
        except KeyError:
            raise KeyError(
                f"no extern \"C\" __global__ kernel named {name!r} in {self.name!r}; "
                f"kernels: {sorted(self._kernels)}"
            ) from None
        return EmulatedKernel(self, k._index, k.name, k.params)

    def __repr__(self) -> str:
        return f"<EmulatedModule {self.name!r}: {', '.join(self._kernels)}>"


def raw_kernel(code: str, name: str, options: tuple[str, ...] = (), **kwargs: Any) -> EmulatedKernel:
    """Counterpart of ``cupy.RawKernel(code, name, options)``."""
    return EmulatedModule(code=code, options=options, **kwargs).get_function(name)
