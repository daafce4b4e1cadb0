"""Array namespace, device selection, random numbers and kernel dispatch.

gpurpo's algorithm code is written once against a NumPy-compatible module ``xp``
(``numpy`` on the CPU, ``cupy`` on CUDA). This module is the single place that
knows which one is in use:

* :func:`resolve_backend` picks the backend for a call from the inputs ("compute
  follows data"), the estimator's ``device`` argument and the global setting
  (:func:`set_backend`, :func:`use_backend`, environment variable
  ``GPURPO_BACKEND``);
* :class:`Backend` bundles the array module, its sparse module, host/device
  transfers, device attributes and the kernel dispatch point
  (:meth:`Backend.kernel`);
* :func:`register_kernel` is how the hot loops (histograms, leaf accumulation,
  tree traversal) plug in their three implementations: a numba CPU kernel used
  by the ``"numpy"`` backend and a CUDA kernel (``kernels/*.cu`` through
  :meth:`Backend.load_module`) used by both ``"cupy"`` and the CPU emulation of
  CUDA (backend ``"emulated"``);
* random numbers are drawn on the host from one seeded
  :class:`numpy.random.Generator` and moved to the device, so a seed gives the
  same projections on every backend.
"""

from __future__ import annotations

import contextlib
import functools
import os
import re
import threading
from dataclasses import dataclass
from pathlib import Path
import types
from types import ModuleType
from typing import Any, Callable, Iterator

import numpy as np
import scipy.sparse as _sp

__all__ = [
    "Backend",
    "BackendUnavailableError",
    "cupy_available",
    "get_backend",
    "set_backend",
    "use_backend",
    "show_backend",
    "resolve_backend",
    "namespace_of",
    "is_gpu_array",
    "to_host",
    "segment_ids",
    "segment_positions",
    "check_random_state",
    "spawn_seeds",
    "register_kernel",
    "registered_kernels",
    "serial_cpu_kernels",
    "cpu_helper",
    "kernel_dir",
    "kernel_source",
]

BACKEND_NAMES = ("numpy", "cupy", "emulated")
SETTING_NAMES = ("numpy", "cupy", "auto", "emulated")
DEVICE_NAMES = ("auto", "cpu", "cuda", "cuda-emulated")

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
    """True for CuPy arrays and cupyx sparse matrices (checked without importing CuPy).

    Parameters
    ----------
    a : object
        Any object; ``None`` gives False.

    Returns
    -------
    bool
        True when the type of ``a`` is defined in a ``cupy`` or ``cupyx``
        module.
    """
    if a is None:
        return False
    module = type(a).__module__ or ""
    return module.startswith("cupy") or module.startswith("cupyx")


# --------------------------------------------------------------------------
# The Backend object
# --------------------------------------------------------------------------


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
        """The NumPy-compatible array module (``numpy`` or ``cupy``)."""
        if self.name == "cupy":
            return _require_cupy()
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
        """
        if type(a) is np.ndarray and self.name != "cupy":
            return np.asarray(a, dtype=dtype)
        if self.issparse(a):
            return self._as_sparse(a, dtype)
        if self.name == "cupy":
            cupy = _require_cupy()
            return cupy.asarray(a, dtype=dtype)
        return np.asarray(to_host(a), dtype=dtype)

    def _as_sparse(self, a: Any, dtype: Any) -> Any:
        fmt = a.format if a.format in ("csr", "csc") else "csr"
        if self.name == "cupy":
            import cupyx.scipy.sparse as cusparse

            if not is_gpu_array(a):
                a = getattr(_sp, f"{fmt}_matrix")(a)
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

    def to_host(self, a: Any) -> Any:
        """``a`` on the host: the module function :func:`to_host`.

        Parameters
        ----------
        a : array, sparse matrix or None
            NumPy/SciPy or CuPy/cupyx data.

        Returns
        -------
        ndarray, SciPy sparse matrix or None
            ``a.get()`` for GPU data, else ``a`` itself (no copy).
        """
        return to_host(a)

    def device_attributes(self) -> dict[str, int]:
        """Attributes used to derive launch configurations.

        Returns a dict with ``multiprocessor_count``,
        ``max_shared_memory_per_block``, ``max_threads_per_block`` and
        ``warp_size``. The emulated backend reports a small device so that
        launch-configuration code is exercised with several blocks.
        """
        if self.name == "cupy":
            cupy = _require_cupy()
            dev = cupy.cuda.Device()
            attrs = dev.attributes
            return {
                "multiprocessor_count": int(attrs["MultiProcessorCount"]),
                "max_shared_memory_per_block": int(attrs["MaxSharedMemoryPerBlock"]),
                "max_threads_per_block": int(attrs["MaxThreadsPerBlock"]),
                "warp_size": int(attrs["WarpSize"]),
            }
        return {
            "multiprocessor_count": 4,
            "max_shared_memory_per_block": 48 * 1024,
            "max_threads_per_block": 1024,
            "warp_size": 32,
        }

    # -- kernels -----------------------------------------------------------

    def load_module(self, filename: str, options: tuple[str, ...] = ()) -> Any:
        """Load ``kernels/<filename>`` as a ``cupy.RawModule`` (or its emulation).

        The module is compiled once per (file, options, device) and cached.
        On ``"cupy"`` NVRTC targets the current device's architecture (CuPy's
        default). On ``"emulated"`` the same source is compiled as C++20 by
        :mod:`gpurpo.cuda_emulator`.
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
            impls = _KERNELS[name]
        except KeyError:
            raise KeyError(
                f"no kernel named {name!r} is registered; known: {sorted(_KERNELS)}"
            ) from None
        if self.uses_cuda_kernels:
            impl = impls.get("cuda")
            if impl is None:
                raise NotImplementedError(f"kernel {name!r} has no CUDA implementation")
            return functools.partial(impl, self)
        impl = impls.get("cpu")
        if impl is None:
            raise NotImplementedError(f"kernel {name!r} has no CPU implementation")
        if getattr(_serial_state, "on", False):
            return _serial_twin(impl)
        return impl

    def __repr__(self) -> str:
        return f"Backend({self.name!r})"


NUMPY = Backend("numpy")
CUPY = Backend("cupy")
EMULATED = Backend("emulated")
_BY_NAME = {"numpy": NUMPY, "cupy": CUPY, "emulated": EMULATED}


# --------------------------------------------------------------------------
# Global setting
# --------------------------------------------------------------------------

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
        ``"emulated"`` runs the CUDA kernels in the CPU emulator (tests).
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
        The inputs (NumPy, CuPy, SciPy or cupyx sparse; ``None`` is ignored).
    device : {"auto", "cpu", "cuda", "cuda-emulated"}
        ``"auto"``: CuPy inputs compute on the GPU; host inputs follow the
        global setting (default: CPU). ``"cpu"``/``"cuda"`` force the device;
        host inputs are moved to the GPU for ``"cuda"``. ``"cuda-emulated"``
        gives the ``"emulated"`` backend.

    Returns
    -------
    Backend
        ``"cupy"``, ``"numpy"`` or ``"emulated"``.

    Raises
    ------
    ValueError
        If the inputs mix host and GPU arrays (allowed with ``device="cuda"``,
        which moves the host ones), if ``device`` is unknown, or if GPU inputs
        are given with ``device="cpu"``.
    BackendUnavailableError
        If ``"cuda"`` is asked for where CuPy or a device is missing.
    """
    if device not in DEVICE_NAMES:
        raise ValueError(f"device must be one of {DEVICE_NAMES}, got {device!r}")
    present = [a for a in arrays if a is not None]
    on_gpu = [is_gpu_array(a) for a in present]
    if any(on_gpu) and not all(on_gpu) and device != "cuda":
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
                "device='cpu' was requested but the inputs are CuPy (GPU) arrays; "
                "pass NumPy arrays (e.g. X.get()) or use device='cuda'"
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


def to_host(a: Any) -> Any:
    """Return a NumPy array / SciPy sparse matrix for any supported input.

    Parameters
    ----------
    a : array, sparse matrix or None
        NumPy/SciPy or CuPy/cupyx data.

    Returns
    -------
    ndarray, SciPy sparse matrix or None
        ``a.get()`` for GPU data (a device-to-host copy), else ``a`` itself
        (not copied); ``None`` for ``None``.
    """
    if a is None:
        return None
    if is_gpu_array(a):
        return a.get()
    return a


def segment_ids(xp: ModuleType, lengths: Any, total: int) -> Any:
    """Segment of every position when segments of ``lengths`` are laid end to end.

    The same as ``xp.repeat(xp.arange(len(lengths)), lengths)``, which CuPy
    before 14.1 does not accept with an array of repeats: on CuPy, a
    ``searchsorted`` of the positions in the segments' ends, on the device;
    on NumPy, the repeat itself.

    Parameters
    ----------
    xp : module
        ``numpy`` or ``cupy``.
    lengths : int array of shape (S,)
        Non-negative segment lengths, on ``xp``.
    total : int
        ``lengths.sum()`` (known to the caller, so no device-to-host copy).

    Returns
    -------
    int64 array of shape (total,)
    """
    if xp is np:
        # NumPy repeats in one linear pass (the search is O(total log S))
        return np.repeat(np.arange(len(lengths), dtype=np.int64), np.asarray(lengths, np.int64))
    return _segment_ids_by_search(xp, lengths, total)


def _segment_ids_by_search(xp: ModuleType, lengths: Any, total: int) -> Any:
    """:func:`segment_ids` as a search of the positions in the segments' ends."""
    ends = xp.cumsum(xp.asarray(lengths, dtype=xp.int64))
    return xp.searchsorted(ends, xp.arange(int(total), dtype=xp.int64), side="right").astype(
        xp.int64
    )


def segment_positions(xp: ModuleType, starts: Any, lengths: Any, total: int) -> tuple[Any, Any]:
    """Positions ``starts[s] + k`` (k < ``lengths[s]``) of all segments, and their segment.

    The segments laid end to end (:func:`segment_ids`), each position mapped
    back into its own range ``[starts[s], starts[s] + lengths[s])``; for
    example the buffer positions of the samples of a list of tree nodes.

    Parameters
    ----------
    xp : module
        ``numpy`` or ``cupy``.
    starts, lengths : int arrays of shape (S,)
        First position and length of every segment, on ``xp``.
    total : int
        ``lengths.sum()``.

    Returns
    -------
    (positions, segment) : int64 arrays of shape (total,)
    """
    lengths = xp.asarray(lengths, dtype=xp.int64)
    seg = segment_ids(xp, lengths, total)
    offsets = xp.cumsum(lengths) - lengths
    pos = xp.arange(int(total), dtype=xp.int64) - offsets[seg] + xp.asarray(starts)[seg]
    return pos, seg


# --------------------------------------------------------------------------
# Random numbers
# --------------------------------------------------------------------------


def check_random_state(random_state: Any) -> np.random.Generator:
    """Turn ``random_state`` into a :class:`numpy.random.Generator`.

    Accepts ``None`` (fresh entropy), an int seed, a ``SeedSequence``, a
    ``Generator`` (returned as is) or a legacy ``RandomState`` (a seed is
    drawn from it). Random numbers are drawn on the host and moved to the
    device, so the same seed gives the same model on every backend.

    Parameters
    ----------
    random_state : None, int, SeedSequence, Generator or RandomState
        The seed or source of random numbers; an int must be non-negative.

    Returns
    -------
    numpy.random.Generator
        A new generator, or ``random_state`` itself when it is one.

    Raises
    ------
    ValueError
        If ``random_state`` is a negative int.
    TypeError
        If ``random_state`` has another type.
    """
    if random_state is None or isinstance(random_state, (int, np.integer, np.random.SeedSequence)):
        if isinstance(random_state, (int, np.integer)) and random_state < 0:
            raise ValueError(f"random_state must be a non-negative int, got {random_state}")
        return np.random.default_rng(random_state)
    if isinstance(random_state, np.random.Generator):
        return random_state
    if isinstance(random_state, np.random.RandomState):
        return np.random.default_rng(random_state.randint(0, 2**31 - 1))
    raise TypeError(
        "random_state must be None, an int, a numpy SeedSequence, Generator or "
        f"RandomState; got {type(random_state).__name__}"
    )


def spawn_seeds(random_state: Any, n: int) -> list[int]:
    """Draw ``n`` independent integer seeds from ``random_state``.

    Parameters
    ----------
    random_state : None, int, SeedSequence, Generator or RandomState
        As in :func:`check_random_state`; a Generator is advanced.
    n : int
        Number of seeds.

    Returns
    -------
    list of int
        ``n`` Python ints in ``[0, 2**63 - 1)``.
    """
    rng = check_random_state(random_state)
    return [int(s) for s in rng.integers(0, 2**63 - 1, size=n, dtype=np.int64)]


# --------------------------------------------------------------------------
# Kernel registry and sources
# --------------------------------------------------------------------------

_KERNELS: dict[str, dict[str, Callable[..., Any]]] = {}

# ``serial_cpu_kernels``: per thread, and the single-threaded twins made so far
_serial_state = threading.local()
_SERIAL_TWINS: dict[Any, Callable[..., Any]] = {}
_SERIAL_LOCK = threading.Lock()


@contextlib.contextmanager
def serial_cpu_kernels() -> Iterator[None]:
    """Run this thread's numba kernels single-threaded and without the GIL.

    Inside the block, :meth:`Backend.kernel` returns, for a numba kernel
    compiled with ``parallel=True``, a twin compiled from the same Python
    source with ``nogil=True`` and without ``parallel``. Several Python
    threads can then run kernels at the same time (one batch of trees each):
    numba's default threading layer for pip installs, ``workqueue``, must not
    be entered by several threads at once, and a kernel holding the GIL would
    serialise them anyway. The twins are cached on disk like the kernels.

    Returns
    -------
    context manager
        Yields None; the previous state of the thread is restored on exit
        (blocks nest).
    """
    previous = getattr(_serial_state, "on", False)
    _serial_state.on = True
    try:
        yield
    finally:
        _serial_state.on = previous


def cpu_helper(fn: Callable[..., Any]) -> Callable[..., Any]:
    """A numba host helper as this thread may call it.

    Inside :func:`serial_cpu_kernels`, the single-threaded, GIL-free twin of
    a ``parallel=True`` function (as :meth:`Backend.kernel` does for the
    registered kernels); else ``fn`` itself. For numba functions the grower
    calls directly, outside the kernel registry.

    Parameters
    ----------
    fn : callable
        A numba-compiled function (or any callable).

    Returns
    -------
    callable
        The serial twin of ``fn`` when this thread is inside
        :func:`serial_cpu_kernels` and ``fn`` was compiled with
        ``parallel=True``; else ``fn``.
    """
    if getattr(_serial_state, "on", False):
        return _serial_twin(fn)
    return fn


def _serial_twin(impl: Callable[..., Any]) -> Callable[..., Any]:
    """The single-threaded, GIL-free twin of a parallel numba kernel (else ``impl``)."""
    options = getattr(impl, "targetoptions", None)
    if not options or not options.get("parallel"):
        return impl
    with _SERIAL_LOCK:
        twin = _SERIAL_TWINS.get(impl)
        if twin is None:
            import numba

            py = impl.py_func
            clone = types.FunctionType(
                py.__code__, py.__globals__, py.__name__ + "_serial", py.__defaults__,
                py.__closure__,
            )
            # its own qualified name, hence its own on-disk cache entry
            clone.__qualname__ = py.__qualname__ + "_serial"
            clone.__module__ = py.__module__
            twin = numba.njit(nogil=True, cache=True)(clone)
            _SERIAL_TWINS[impl] = twin
    return twin


def register_kernel(
    name: str,
    *,
    cpu: Callable[..., Any] | None = None,
    cuda: Callable[..., Any] | None = None,
) -> None:
    """Register the implementations of one kernel.

    Parameters
    ----------
    name : str
        Kernel name used by algorithm code through :meth:`Backend.kernel`.
    cpu : callable, optional
        numba (or NumPy) implementation, called with the kernel arguments.
    cuda : callable, optional
        Implementation launching ``kernels/*.cu`` code, called as
        ``cuda(backend, *args)``; it runs on CuPy and on the emulator.
    """
    entry = _KERNELS.setdefault(name, {})
    if cpu is not None:
        entry["cpu"] = cpu
    if cuda is not None:
        entry["cuda"] = cuda


def registered_kernels() -> dict[str, tuple[str, ...]]:
    """Names of registered kernels and which implementations they have.

    Returns
    -------
    dict of str to tuple of str
        Kernel name to the sorted names of its implementations, a subset of
        ``("cpu", "cuda")``.
    """
    return {k: tuple(sorted(v)) for k, v in _KERNELS.items()}


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
    here = Path(__file__).resolve().parent
    for candidate in (here / "kernels", here.parent / "kernels"):
        if candidate.is_dir() and any(candidate.glob("*.cu")):
            return candidate
    raise FileNotFoundError(
        f"CUDA kernel sources not found in {here / 'kernels'} or {here.parent / 'kernels'}; "
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


@functools.lru_cache(maxsize=None)
def _load_cupy_module(filename: str, options: tuple[str, ...], device_id: int) -> Any:
    cupy = _require_cupy()
    with cupy.cuda.Device(device_id):
        return cupy.RawModule(code=kernel_source(filename), options=CUDA_COMPILE_OPTIONS + options)


@functools.lru_cache(maxsize=None)
def _load_emulated_module(filename: str, options: tuple[str, ...]) -> Any:
    from gpurpo import cuda_emulator

    return cuda_emulator.EmulatedModule(
        code=kernel_source(filename), name=filename, options=options
    )
