"""Counters of device activity: kernel launches, host/device copies, synchronisations.

:func:`count_device_activity` opens a counting block; while at least one is
open, the device backends (and the CUDA emulator of :mod:`gpurpo.testing`)
report what they do through :func:`record_device_activity`, and every open
block adds it up. Outside a block :func:`record_device_activity` returns at
once and the backends behave exactly as without counters.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from typing import Any

__all__ = ["DeviceActivity", "count_device_activity", "counting", "record_device_activity"]

_FIELDS = ("launches", "d2h", "h2d", "syncs", "d2h_bytes", "h2d_bytes")
_LOCK = threading.Lock()
_OPEN: list[DeviceActivity] = []


class DeviceActivity:
    """What a device backend did inside one :func:`count_device_activity` block.

    Attributes
    ----------
    launches : int
        Kernel launches: the CUDA kernels of ``kernels/*.cu`` and the
        array-library operations on device arrays (one per operation).
    d2h, h2d : int
        Copies device-to-host and host-to-device.
    syncs : int
        Synchronisations of the host with the device (every device-to-host
        copy, and operations whose output size depends on the data).
    d2h_bytes, h2d_bytes : int
        Bytes of those copies.
    """

    __slots__ = _FIELDS

    def __init__(self) -> None:
        for name in _FIELDS:
            setattr(self, name, 0)

    def as_dict(self) -> dict[str, int]:
        """The six counters by name."""
        return {name: getattr(self, name) for name in _FIELDS}

    def __repr__(self) -> str:
        inner = ", ".join(f"{k}={v}" for k, v in self.as_dict().items())
        return f"DeviceActivity({inner})"


def counting() -> bool:
    """Whether a :func:`count_device_activity` block is open (in any thread)."""
    return bool(_OPEN)


def record_device_activity(
    launches: int = 0,
    d2h: int = 0,
    h2d: int = 0,
    syncs: int = 0,
    d2h_bytes: int = 0,
    h2d_bytes: int = 0,
) -> None:
    """Add to the counters of every open :func:`count_device_activity` block.

    The device backends call it for what they do; a launcher of kernels that
    does not go through a backend (such as the CUDA emulator of
    :mod:`gpurpo.testing`) calls it for its launches. Thread-safe; a no-op
    when no block is open.

    Parameters
    ----------
    launches : int, default=0
        Kernel launches.
    d2h, h2d : int, default=0
        Copies device-to-host and host-to-device.
    syncs : int, default=0
        Synchronisations of the host with the device.
    d2h_bytes, h2d_bytes : int, default=0
        Bytes of those copies.
    """
    if not _OPEN:
        return
    with _LOCK:
        for activity in _OPEN:
            activity.launches += launches
            activity.d2h += d2h
            activity.h2d += h2d
            activity.syncs += syncs
            activity.d2h_bytes += d2h_bytes
            activity.h2d_bytes += h2d_bytes


def record_d2h(nbytes: int) -> None:
    """One device-to-host copy of ``nbytes`` bytes, which synchronises the host."""
    record_device_activity(d2h=1, syncs=1, d2h_bytes=int(nbytes))


def record_h2d(nbytes: int) -> None:
    """One host-to-device copy of ``nbytes`` bytes."""
    record_device_activity(h2d=1, h2d_bytes=int(nbytes))


def nbytes_of(a: Any) -> int:
    """Bytes of a dense array, or of the arrays of a compressed sparse matrix."""
    if hasattr(a, "nbytes"):
        return int(a.nbytes)
    return sum(int(getattr(a, part).nbytes) for part in ("data", "indices", "indptr")
               if hasattr(a, part))


@contextlib.contextmanager
def count_device_activity() -> Iterator[DeviceActivity]:
    """Count what the device backends do inside a ``with`` block.

    Counts are process-wide: work done by every thread while the block is
    open counts (forests grow batches of trees in threads), and blocks nest
    (an inner block's counts are also an outer block's). Outside every block
    nothing is counted and nothing changes.

    What is counted, backend by backend:

    ``"emulated"`` (the CPU emulation of CUDA), everything a CuPy run of the
    same code would do:

    * a launch for every CUDA kernel of ``kernels/*.cu`` (loaded through
      :meth:`Backend.load_module`), and one launch for every array-library
      operation on device arrays: calls of ``backend.xp`` functions (but
      ``empty``, views, reshapes and other metadata functions), ufuncs and
      operators, reductions, sorts, scans, fancy-index gets, every
      ``__setitem__``, and the array methods that compute (``astype``,
      ``copy``, ``sum``, ``argsort``, ``cumsum``, ``take``, ...). Inside a
      block ``backend.xp`` is a counting stand-in for ``numpy`` whose
      results are device arrays (:class:`~gpurpo.backend._device_arrays.DeviceArray`,
      a NumPy array subclass); CuPy may take more than one kernel for some
      operations, so this is a lower bound;
    * a device-to-host copy and a sync for :meth:`Backend.to_host` of a
      device array, ``.get()``, and every scalar conversion (``int``,
      ``float``, ``bool``, ``operator.index``, ``.item()``, ``.tolist()``);
      a sync and an 8-byte copy for the operations whose output size
      depends on the data (``nonzero``, ``flatnonzero``, ``argwhere``,
      ``unique``, ``compress``, ``extract``, ``bincount``, one-argument
      ``where``, boolean-mask indexing), which read a count back;
    * a host-to-device copy for :meth:`Backend.asarray` and
      ``xp.asarray``/``xp.array`` of host data, and for every host (NumPy)
      array handed to a device operation (CuPy would need it on the device).

    ``"cupy"``: the CUDA kernels of ``kernels/*.cu``, the calls of
    ``backend.xp`` functions (one launch each, as above), the copies of
    :meth:`Backend.asarray` and :meth:`Backend.to_host` / :func:`to_host`,
    and ``xp.asarray`` of host data. Operators, methods, indexing and scalar
    conversions of CuPy arrays happen inside CuPy and are NOT counted there;
    measure those on ``"emulated"``.

    ``"numpy"``: nothing (no device).

    Returns
    -------
    context manager
        Yields a :class:`DeviceActivity` whose integer attributes
        ``launches``, ``d2h``, ``h2d``, ``syncs``, ``d2h_bytes`` and
        ``h2d_bytes`` grow while the block is open and keep their values
        after it closes.

    Examples
    --------
    >>> from gpurpo.backend import EMULATED, count_device_activity
    >>> import numpy as np
    >>> with count_device_activity() as activity:
    ...     x = EMULATED.asarray(np.arange(4.0))
    ...     total = float((x * 2).sum())
    >>> (activity.h2d, activity.launches, activity.d2h)
    (1, 2, 1)
    """
    activity = DeviceActivity()
    with _LOCK:
        _OPEN.append(activity)
    try:
        yield activity
    finally:
        with _LOCK:
            _OPEN.remove(activity)
