"""The kernel registry: each hot loop's numba (CPU) and CUDA implementations."""

from __future__ import annotations

import contextlib
import threading
import types
from collections.abc import Callable, Iterator
from typing import Any

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


#: An elementwise CPU kernel over fewer elements than this runs on one thread
#: (:func:`cpu_helper`'s ``small``): a boosting round's kernels on 1,123 rows x 53
#: outputs, 690 calls, took 0.05 s on one thread and 0.37 s on two.
SERIAL_ELEMENTS = 1 << 18


def cpu_helper(fn: Callable[..., Any], *, small: bool = False) -> Callable[..., Any]:
    """A numba host helper as this thread may call it.

    Inside :func:`serial_cpu_kernels`, or for a ``small`` call, the
    single-threaded, GIL-free twin of a ``parallel=True`` function (as
    :meth:`Backend.kernel` does for the registered kernels); else ``fn``
    itself. For numba functions called outside the kernel registry, and by
    the registered launchers that judge their calls' size.

    Parameters
    ----------
    fn : callable
        A numba-compiled function (or any callable).
    small : bool, default=False
        The call's work is too small for threads: each parallel region
        costs the wake-up of the workers, and between regions they
        spin-wait, which on a machine with few cores (a CI runner) slows
        the calling thread down.

    Returns
    -------
    callable
        The serial twin of ``fn`` when this thread is inside
        :func:`serial_cpu_kernels` or ``small``, and ``fn`` was compiled with
        ``parallel=True``; else ``fn``.
    """
    if small or getattr(_serial_state, "on", False):
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
