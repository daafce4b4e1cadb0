"""The :class:`Backend` object: array module, sparse module, transfers and kernel dispatch."""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType
from typing import Any

import numpy as np
import scipy.sparse as _sp

from gpurpo.backend import _activity, _registry
from gpurpo.backend._arrays import to_host
from gpurpo.backend._cupy import BackendUnavailableError, _require_cupy, is_gpu_array
from gpurpo.backend._device_arrays import CountingNamespace, DeviceArray, device_asarray
from gpurpo.backend._sources import _load_cupy_module, _load_emulated_module

BACKEND_NAMES = ("numpy", "cupy", "emulated")


#: the dtypes of cupyx.scipy.sparse matrices (type characters)
CUPYX_SPARSE_DTYPES = "?fdFD"


def device_sparse_dtype(dtype: Any, requested: Any = None) -> np.dtype:
    """The dtype in which a SciPy sparse matrix of ``dtype`` goes to a cupyx matrix:
    ``requested`` when given, else ``dtype`` when cupyx holds it (bool, float32,
    float64, complex), float32 for float16 and float64 for integers (word counts,
    label indicators), whose cupyx matrices raise ValueError."""
    if requested is not None:
        return np.dtype(requested)
    dtype = np.dtype(dtype)
    if dtype.char in CUPYX_SPARSE_DTYPES:
        return dtype
    return np.dtype(np.float32 if dtype == np.float16 else np.float64)


@dataclass(frozen=True)
class Backend:
    """One compute backend: its array module, sparse module and kernels.

    Parameters
    ----------
    name : {"numpy", "cupy", "emulated"}
        ``"numpy"`` runs on the CPU with numba kernels; ``"cupy"`` runs on a
        CUDA device with the kernels of ``kernels/*.cu``; ``"emulated"`` keeps
        arrays in NumPy but runs the CUDA kernels through gpurpo's CPU
        emulation of the CUDA execution model (for testing without a GPU).
    """

    name: str

    def __post_init__(self) -> None:
        if self.name not in BACKEND_NAMES:
            raise ValueError(f"backend name must be one of {BACKEND_NAMES}, got {self.name!r}")

    @property
    def xp(self) -> ModuleType:
        """The NumPy-compatible array module (``numpy`` or ``cupy``).

        Inside a :func:`~gpurpo.backend.count_device_activity` block, the
        device backends give a counting stand-in for it
        (:class:`~gpurpo.backend._device_arrays.CountingNamespace`).
        """
        if self.name == "cupy":
            cupy = _require_cupy()
            return _counting_namespace(cupy, False) if _activity.counting() else cupy
        if self.name == "emulated" and _activity.counting():
            return _counting_namespace(np, True)
        return np

    @property
    def sparse(self) -> ModuleType:
        """``scipy.sparse`` or ``cupyx.scipy.sparse``."""
        if self.name == "cupy":
            _require_cupy()
            import cupyx.scipy.sparse as cusparse

            return cusparse
        return _sp

    @property
    def is_gpu(self) -> bool:
        """Whether arrays of this backend live on a CUDA device (the CuPy backend)."""
        return self.name == "cupy"

    @property
    def uses_cuda_kernels(self) -> bool:
        """True when kernels come from ``kernels/*.cu`` (real or emulated CUDA)."""
        return self.name in ("cupy", "emulated")

    @property
    def device_name(self) -> str:
        """The device computing for this backend, in words (the GPU's name, or the CPU)."""
        if self.name == "cupy":
            cupy = _require_cupy()
            props = cupy.cuda.runtime.getDeviceProperties(cupy.cuda.Device().id)
            name = props["name"]
            return name.decode() if isinstance(name, bytes) else str(name)
        if self.name == "emulated":
            return "CPU (emulated CUDA)"
        return "CPU"

    # -- arrays ------------------------------------------------------------

    def issparse(self, a: Any) -> bool:
        """True for SciPy or cupyx sparse matrices/arrays."""
        if _sp.issparse(a):
            return True
        if is_gpu_array(a):
            import cupyx.scipy.sparse as cusparse

            return cusparse.issparse(a)
        return False

    def asarray(self, a: Any, dtype: Any = None) -> Any:
        """Move a dense array (or sparse matrix) to this backend.

        Host arrays go to the device on ``"cupy"``; device arrays come back to
        the host on ``"numpy"``/``"emulated"``. Sparse input stays sparse (CSR
        or CSC kept, other formats converted to CSR).

        Inside a :func:`~gpurpo.backend.count_device_activity` block, a copy
        of host data to the device is counted, and on ``"emulated"`` dense
        results are device arrays (sparse matrices stay SciPy matrices
        there, uncounted).
        """
        if self.name == "emulated" and _activity.counting() and not self.issparse(a):
            return device_asarray(a if isinstance(a, DeviceArray) else to_host(a), dtype)
        if type(a) is np.ndarray and self.name != "cupy":
            return np.asarray(a, dtype=dtype)
        if self.issparse(a):
            on_host = not is_gpu_array(a)
            a = self._as_sparse(a, dtype)
            if self.is_gpu and on_host:
                _activity.record_h2d(_activity.nbytes_of(a))
            return a
        if self.name == "cupy":
            cupy = _require_cupy()
            if not is_gpu_array(a):
                out = cupy.asarray(a, dtype=dtype)
                _activity.record_h2d(_activity.nbytes_of(out))
                return out
            return cupy.asarray(a, dtype=dtype)
        return np.asarray(to_host(a), dtype=dtype)

    def _as_sparse(self, a: Any, dtype: Any) -> Any:
        fmt = a.format if a.format in ("csr", "csc") else "csr"
        if self.name == "cupy":
            import cupyx.scipy.sparse as cusparse

            if not is_gpu_array(a):
                a = getattr(_sp, f"{fmt}_matrix")(a)
                # cupyx holds a few dtypes only (integer counts are cast on the host)
                on_device = device_sparse_dtype(a.dtype, dtype)
                if a.dtype != on_device:
                    a = a.astype(on_device)
                a = (cusparse.csr_matrix if fmt == "csr" else cusparse.csc_matrix)(a)
            elif a.format != fmt:
                a = a.asformat(fmt)
        else:
            if is_gpu_array(a):
                a = a.get()
            a = getattr(_sp, f"{fmt}_matrix")(a)
        if dtype is not None and a.dtype != dtype:
            a = a.astype(dtype)
        return a

    def to_host(self, a: Any, pinned: bool = False) -> Any:
        """``a`` on the host: the module function :func:`to_host`.

        Parameters
        ----------
        a : array, sparse matrix or None
            NumPy/SciPy or CuPy/cupyx data.
        pinned : bool, default=False
            Large CuPy arrays through page-locked memory (see :func:`to_host`).

        Returns
        -------
        ndarray, SciPy sparse matrix or None
            ``a.get()`` for GPU data (and device arrays of
            :func:`~gpurpo.backend.count_device_activity` blocks), else ``a``
            itself (no copy).
        """
        return to_host(a, pinned)

    def device_attributes(self) -> dict[str, int]:
        """Attributes used to derive launch configurations.

        Returns a dict with ``multiprocessor_count``,
        ``max_shared_memory_per_block`` (dynamic shared memory a launch gets
        without opting in), ``max_shared_memory_per_block_optin`` (what a
        kernel may opt in to, ``cudaFuncAttributeMaxDynamicSharedMemorySize``),
        ``max_shared_memory_per_multiprocessor``, ``max_threads_per_block`` and
        ``warp_size``. The emulated backend reports a small device so that
        launch-configuration code is exercised with several blocks. The
        CuPy device's attributes are read once per device.
        """
        if self.name == "cupy":
            cupy = _require_cupy()
            return dict(_cupy_device_attributes(int(cupy.cuda.Device().id)))
        return {
            "multiprocessor_count": 4,
            "max_shared_memory_per_block": 48 * 1024,
            "max_shared_memory_per_block_optin": 99 * 1024,
            "max_shared_memory_per_multiprocessor": 100 * 1024,
            "max_threads_per_block": 1024,
            "warp_size": 32,
        }

    # -- kernels -----------------------------------------------------------

    def load_module(self, filename: str, options: tuple[str, ...] = ()) -> Any:
        """Load ``kernels/<filename>`` as a ``cupy.RawModule`` (or its emulation).

        The module is compiled once per (file, options, device) and cached.
        On ``"cupy"`` NVRTC targets the current device's architecture (CuPy's
        default). On ``"emulated"`` the same source is compiled as C++20 by
        :mod:`gpurpo.testing.cuda_emulator`. The kernels of both count their
        launches in :func:`~gpurpo.backend.count_device_activity` blocks (on
        ``"cupy"`` the module comes wrapped in
        :class:`~gpurpo.backend._sources.CountedModule`).
        """
        if self.name == "cupy":
            cupy = _require_cupy()
            return _load_cupy_module(filename, tuple(options), cupy.cuda.Device().id)
        if self.name == "emulated":
            return _load_emulated_module(filename, tuple(options))
        raise BackendUnavailableError(
            "the 'numpy' backend runs numba kernels and has no CUDA modules; "
            "use backend 'cupy' or 'emulated'"
        )

    def kernel(self, name: str) -> Callable[..., Any]:
        """Return the implementation of kernel ``name`` for this backend.

        The CUDA implementation (used by ``"cupy"`` and ``"emulated"``) is
        called with this backend as its first argument so that it can load its
        module and allocate with ``backend.xp``; the numba implementation is
        called with the kernel's arguments only.
        """
        try:
            impls = _registry._KERNELS[name]
        except KeyError:
            raise KeyError(
                f"no kernel named {name!r} is registered; known: {sorted(_registry._KERNELS)}"
            ) from None
        if self.uses_cuda_kernels:
            impl = impls.get("cuda")
            if impl is None:
                raise NotImplementedError(f"kernel {name!r} has no CUDA implementation")
            return functools.partial(impl, self)
        impl = impls.get("cpu")
        if impl is None:
            raise NotImplementedError(f"kernel {name!r} has no CPU implementation")
        if getattr(_registry._serial_state, "on", False):
            return _registry._serial_twin(impl)
        return impl

    def __repr__(self) -> str:
        return f"Backend({self.name!r})"


@functools.cache
def _counting_namespace(module: ModuleType, device_arrays: bool) -> CountingNamespace:
    return CountingNamespace(module, device_arrays)


NUMPY = Backend("numpy")
CUPY = Backend("cupy")
EMULATED = Backend("emulated")
_BY_NAME = {"numpy": NUMPY, "cupy": CUPY, "emulated": EMULATED}


#: ``cudaDevAttrMaxSharedMemoryPerMultiprocessor`` and
#: ``cudaDevAttrMaxSharedMemoryPerBlockOptin`` of the CUDA runtime's ``cudaDeviceAttr``
_SHARED_PER_MULTIPROCESSOR, _SHARED_PER_BLOCK_OPTIN = 81, 97


@functools.cache
def _cupy_device_attributes(device_id: int) -> dict[str, int]:
    """The launch attributes of :meth:`Backend.device_attributes` of CUDA device
    ``device_id`` (reading a device's attributes queries the driver for each of them)."""
    cupy = _require_cupy()
    attrs = cupy.cuda.Device(device_id).attributes
    runtime = cupy.cuda.runtime
    return {
        "multiprocessor_count": int(attrs["MultiProcessorCount"]),
        "max_shared_memory_per_block": int(attrs["MaxSharedMemoryPerBlock"]),
        "max_shared_memory_per_block_optin": int(
            runtime.deviceGetAttribute(_SHARED_PER_BLOCK_OPTIN, device_id)),
        "max_shared_memory_per_multiprocessor": int(
            runtime.deviceGetAttribute(_SHARED_PER_MULTIPROCESSOR, device_id)),
        "max_threads_per_block": int(attrs["MaxThreadsPerBlock"]),
        "warp_size": int(attrs["WarpSize"]),
    }
