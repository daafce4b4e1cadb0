"""CUDA kernel sources: where ``kernels/*.cu`` live, ``#include`` expansion, module loading."""

from __future__ import annotations

import functools
import re
from pathlib import Path
from typing import Any

from gpurpo.backend._activity import record_device_activity
from gpurpo.backend._cupy import _require_cupy


def kernel_dir() -> Path:
    """Directory holding the CUDA sources.

    An installed wheel ships them as ``gpurpo/kernels``; a source checkout or
    editable install has them in the top-level ``kernels/`` folder.

    Returns
    -------
    pathlib.Path
        The first of the two folders that holds a ``*.cu`` file.

    Raises
    ------
    FileNotFoundError
        If neither does.
    """
    package = Path(__file__).resolve().parent.parent
    for candidate in (package / "kernels", package.parent / "kernels"):
        if candidate.is_dir() and any(candidate.glob("*.cu")):
            return candidate
    raise FileNotFoundError(
        f"CUDA kernel sources not found in {package / 'kernels'} or {package.parent / 'kernels'}; "
        "the gpurpo installation is incomplete"
    )


_LOCAL_INCLUDE = re.compile(r'^[ \t]*#[ \t]*include[ \t]+"([A-Za-z0-9_]+\.cuh)"[ \t]*$', re.MULTILINE)


def kernel_source(filename: str) -> str:
    """The text of ``kernels/<filename>``, its local headers inlined.

    A line ``#include "name.cuh"`` is replaced by the text of
    ``kernels/name.cuh`` (once per source, headers may include headers), so
    that NVRTC, CuPy and the CUDA emulator compile one self-contained text
    without include paths.

    Parameters
    ----------
    filename : str
        Name of the source in :func:`kernel_dir`, e.g. ``"tree_predict.cu"``.

    Returns
    -------
    str
        The source text with its local headers expanded.

    Raises
    ------
    FileNotFoundError
        If ``filename`` or a header it includes is not in :func:`kernel_dir`.
    """
    return _expand_includes(filename, set())


def _expand_includes(filename: str, seen: set[str]) -> str:
    path = kernel_dir() / filename
    if not path.is_file():
        raise FileNotFoundError(f"no CUDA source {filename!r} in {kernel_dir()}")
    seen.add(filename)

    def inline(match: re.Match[str]) -> str:
        header = match.group(1)
        if header in seen:
            return f"// {header}: already included"
        return f"{_expand_includes(header, seen)}\n// end of {header}"

    return _LOCAL_INCLUDE.sub(inline, path.read_text())


#: NVRTC options every ``kernels/*.cu`` is compiled with (also by the NVRTC CI check).
CUDA_COMPILE_OPTIONS: tuple[str, ...] = ("--std=c++17",)


@functools.cache
def _load_cupy_module(filename: str, options: tuple[str, ...], device_id: int) -> Any:
    cupy = _require_cupy()
    with cupy.cuda.Device(device_id):
        return CountedModule(
            cupy.RawModule(code=kernel_source(filename), options=CUDA_COMPILE_OPTIONS + options)
        )


@functools.cache
def _load_emulated_module(filename: str, options: tuple[str, ...]) -> Any:
    from gpurpo.testing import cuda_emulator

    # its kernels count their own launches (gpurpo.testing.cuda_emulator._launch)
    return cuda_emulator.EmulatedModule(
        code=kernel_source(filename), name=filename, options=options
    )


class CountedModule:
    """A ``cupy.RawModule`` whose kernels count their launches.

    Attributes other than :meth:`get_function` are those of the module.

    Parameters
    ----------
    module : object
        Anything with ``get_function(name)``.
    """

    def __init__(self, module: Any):
        self._module = module

    def get_function(self, name: str) -> CountedKernel:
        """The kernel ``name``, counting one launch per call in open counting blocks."""
        return CountedKernel(self._module.get_function(name))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._module, name)

    def __repr__(self) -> str:
        return f"<counted {self._module!r}>"


class CountedKernel:
    """A kernel (``cupy.RawKernel``) counting its launches.

    Attributes are read and set on the kernel itself (e.g.
    ``max_dynamic_shared_size_bytes``).
    """

    __slots__ = ("_kernel",)

    def __init__(self, kernel: Any):
        object.__setattr__(self, "_kernel", kernel)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        result = self._kernel(*args, **kwargs)
        record_device_activity(launches=1)
        return result

    def __getattr__(self, name: str) -> Any:
        return getattr(self._kernel, name)

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(self._kernel, name, value)

    def __repr__(self) -> str:
        return f"<counted {self._kernel!r}>"
