"""CuPy detection: whether CuPy imports and a CUDA device runs a kernel."""

from __future__ import annotations

import functools
from types import ModuleType
from typing import Any

from gpurpo.backend._frames import is_device_frame

_CUPY_INSTALL_HINT = (
    "install CuPy for your CUDA version, e.g. `pip install 'gpurpo[cuda12]'` "
    "(cupy-cuda12x) or `pip install 'gpurpo[cuda13]'` (cupy-cuda13x), on a machine "
    "with an NVIDIA GPU and driver"
)


class BackendUnavailableError(RuntimeError):
    """Raised when a backend is requested that cannot run on this machine."""


# --------------------------------------------------------------------------
# CuPy detection
# --------------------------------------------------------------------------


def _import_cupy() -> ModuleType | None:
    try:
        import cupy  # noqa: F401
    except Exception:  # ImportError, or a broken CUDA install raising at import
        return None
    return cupy


@functools.lru_cache(maxsize=1)
def _cupy_status() -> tuple[bool, str]:
    cupy = _import_cupy()
    if cupy is None:
        return False, "CuPy is not installed"
    try:
        n_devices = cupy.cuda.runtime.getDeviceCount()
    except Exception as exc:  # no driver, no device
        return False, f"CuPy imports but no CUDA device works ({exc.__class__.__name__}: {exc})"
    if n_devices < 1:
        return False, "CuPy imports but reports no CUDA device"
    try:
        value = float((cupy.arange(4, dtype=cupy.float32) * 2).sum())
    except Exception as exc:  # cannot compile or launch
        return False, f"CuPy cannot run a kernel ({exc.__class__.__name__}: {exc})"
    if value != 12.0:
        return False, "CuPy ran a test kernel but got a wrong result"
    return True, f"CuPy {cupy.__version__} with {n_devices} CUDA device(s)"


def cupy_available() -> bool:
    """Return True when CuPy imports and a CUDA device runs a kernel.

    Returns
    -------
    bool
        The result of a one-off check (import, device count, a test
        kernel), cached for the process.
    """
    return _cupy_status()[0]


def _require_cupy() -> ModuleType:
    ok, why = _cupy_status()
    if not ok:
        raise BackendUnavailableError(
            f"the 'cupy' backend needs CuPy and a working CUDA device, but {why}; "
            + _CUPY_INSTALL_HINT
        )
    return _import_cupy()


def is_gpu_array(a: Any) -> bool:
    """True for CuPy arrays, cupyx sparse matrices and cuDF frames (checked without
    importing CuPy or cuDF).

    Parameters
    ----------
    a : object
        Any object; ``None`` gives False.

    Returns
    -------
    bool
        True when the type of ``a`` is defined in a ``cupy`` or ``cupyx``
        module, or is a cuDF ``DataFrame``, ``Series`` or ``Index``
        (:func:`~gpurpo.backend._frames.is_device_frame`).
    """
    if a is None:
        return False
    module = type(a).__module__ or ""
    return module.startswith("cupy") or module.startswith("cupyx") or is_device_frame(a)
