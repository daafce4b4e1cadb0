"""Which backend a call runs on: the global setting and "compute follows data"."""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterator
from types import ModuleType
from typing import Any

import numpy as np

from gpurpo.backend._backend import CUPY, EMULATED, NUMPY, Backend
from gpurpo.backend._cupy import (
    _cupy_status,
    _require_cupy,
    cupy_available,
    is_gpu_array,
)

SETTING_NAMES = ("numpy", "cupy", "auto", "emulated")
DEVICE_NAMES = ("auto", "cpu", "cuda", "cuda-emulated")

_state = threading.local()


def _env_setting() -> str | None:
    value = os.environ.get("GPURPO_BACKEND")
    if value is None or value.strip() == "":
        return None
    value = value.strip().lower()
    if value not in SETTING_NAMES:
        raise ValueError(
            f"environment variable GPURPO_BACKEND must be one of {SETTING_NAMES}, got {value!r}"
        )
    return value


def _current_setting() -> str | None:
    stack = getattr(_state, "stack", None)
    if stack:
        return stack[-1]
    if _explicit_setting is not None:
        return _explicit_setting
    return _env_setting()


_explicit_setting: str | None = None


def _check_setting(name: str | None) -> str | None:
    if name is None:
        return None
    if not isinstance(name, str) or name.lower() not in SETTING_NAMES:
        raise ValueError(f"backend must be one of {SETTING_NAMES} or None, got {name!r}")
    name = name.lower()
    if name == "cupy":
        _require_cupy()
    return name


def set_backend(name: str | None) -> None:
    """Set the process-wide backend preference.

    :func:`use_backend` overrides it within a block of code (per thread).

    Parameters
    ----------
    name : {"numpy", "cupy", "auto", "emulated"} or None
        ``"numpy"`` computes on the CPU, ``"cupy"`` on the current CUDA device
        (NumPy inputs are moved there and results moved back), ``"auto"``
        picks CuPy when it imports and a CUDA device works, else NumPy.
        ``"emulated"`` is for testing (:mod:`gpurpo.testing`).
        ``None`` restores the default: follow the data (CuPy inputs on the
        GPU, everything else on the CPU), or ``GPURPO_BACKEND`` when set.
    """
    global _explicit_setting
    _explicit_setting = _check_setting(name)


@contextlib.contextmanager
def use_backend(name: str | None) -> Iterator[Backend]:
    """Context manager form of :func:`set_backend`; yields the resolved backend.

    The setting holds for the current thread until the block exits, and
    blocks nest.

    Parameters
    ----------
    name : {"numpy", "cupy", "auto", "emulated"} or None
        As in :func:`set_backend`; ``None`` follows the data within the block
        (ignoring the process-wide setting and ``GPURPO_BACKEND``).

    Returns
    -------
    context manager
        Yields the :class:`Backend` that :func:`get_backend` gives under the
        new setting; the previous setting is back on exit.

    Raises
    ------
    ValueError
        If ``name`` is not one of the settings.
    BackendUnavailableError
        If ``name="cupy"`` where CuPy or a CUDA device is missing.
    """
    setting = _check_setting(name)
    stack = getattr(_state, "stack", None)
    if stack is None:
        stack = _state.stack = []
    stack.append(setting)
    try:
        yield get_backend()
    finally:
        stack.pop()


def get_backend() -> Backend:
    """The backend used for host (NumPy/SciPy) inputs under the current setting.

    Returns
    -------
    Backend
        From the innermost :func:`use_backend` block, else
        :func:`set_backend`, else ``GPURPO_BACKEND``; NumPy when none is set
        (and for ``"auto"`` without a working CuPy).

    Raises
    ------
    BackendUnavailableError
        If the setting is ``"cupy"`` and CuPy or a CUDA device is missing.
    ValueError
        If ``GPURPO_BACKEND`` holds an unknown name.
    """
    setting = _current_setting()
    if setting in (None, "numpy"):
        return NUMPY
    if setting == "auto":
        return CUPY if cupy_available() else NUMPY
    if setting == "cupy":
        _require_cupy()
        return CUPY
    return EMULATED


def show_backend(file: Any = None) -> str:
    """Print (and return) the active backend, device and library versions.

    Parameters
    ----------
    file : file-like, optional
        Where to print, as for :func:`print` (default: ``sys.stdout``).

    Returns
    -------
    str
        The printed text, four lines without a final newline.
    """
    import numba
    import scipy
    import sklearn

    backend = get_backend()
    lines = [
        f"gpurpo backend : {backend.name} (setting: {_current_setting() or 'follow data'})",
        f"device         : {backend.device_name}",
        f"numpy {np.__version__}, scipy {scipy.__version__}, numba {numba.__version__}, "
        f"scikit-learn {sklearn.__version__}",
        f"cupy           : {_cupy_status()[1]}",
    ]
    text = "\n".join(lines)
    print(text, file=file)
    return text


def resolve_backend(*arrays: Any, device: str = "auto") -> Backend:
    """Pick the backend for a computation on ``arrays``.

    Parameters
    ----------
    *arrays
        The inputs (NumPy, CuPy, SciPy or cupyx sparse, cuDF frames; ``None`` is
        ignored).
    device : {"auto", "cpu", "cuda"}
        ``"auto"``: CuPy and cuDF inputs compute on the GPU; host inputs follow the
        global setting (default: CPU). ``"cpu"``/``"cuda"`` force the device;
        host inputs are moved to the GPU for ``"cuda"``. Other values are
        for testing (:mod:`gpurpo.testing`).

    Returns
    -------
    Backend
        ``"cupy"``, ``"numpy"`` or ``"emulated"``.

    Raises
    ------
    ValueError
        If the inputs mix host and GPU arrays (allowed with ``device="cuda"``
        and its emulation ``"cuda-emulated"``, which move the host ones), if ``device`` is unknown, or if GPU inputs
        are given with ``device="cpu"``.
    BackendUnavailableError
        If ``"cuda"`` is asked for where CuPy or a device is missing.
    """
    if device not in DEVICE_NAMES:
        raise ValueError(f"device must be one of {DEVICE_NAMES}, got {device!r}")
    present = [a for a in arrays if a is not None]
    on_gpu = [is_gpu_array(a) for a in present]
    # "cuda" (and its CPU emulation) moves host inputs to the device: no mixing there
    if any(on_gpu) and not all(on_gpu) and device not in ("cuda", "cuda-emulated"):
        kinds = ", ".join(f"argument {i}: {'GPU' if g else 'host'}" for i, g in enumerate(on_gpu))
        raise ValueError(
            "inputs mix host (NumPy/SciPy) and GPU (CuPy) arrays "
            f"({kinds}); move them to one device first"
        )
    data_on_gpu = bool(present) and all(on_gpu)
    if device == "cuda":
        _require_cupy()
        return CUPY
    if device == "cuda-emulated":
        return EMULATED
    if device == "cpu":
        if data_on_gpu:
            raise ValueError(
                "device='cpu' was requested but the inputs are GPU (CuPy or cuDF) data; "
                "pass NumPy arrays (e.g. X.get(), or a cuDF frame's .to_numpy()) or use "
                "device='cuda'"
            )
        return NUMPY
    if data_on_gpu:
        return CUPY
    return get_backend()


def namespace_of(*arrays: Any) -> ModuleType:
    """The array module (``numpy`` or ``cupy``) the inputs live in.

    Parameters
    ----------
    *arrays
        Dense or sparse arrays, host or GPU (``None`` is ignored).

    Returns
    -------
    module
        ``cupy`` when any input is a GPU array, else ``numpy`` (whatever the
        global setting).

    Raises
    ------
    ValueError
        If the inputs mix host and GPU arrays.
    """
    return resolve_backend(*arrays).xp if any(is_gpu_array(a) for a in arrays) else np
