"""Host transfers, counting and segment helpers shared by the backends' algorithm code."""

from __future__ import annotations

from types import ModuleType
from typing import Any

import numpy as np

from gpurpo.backend._activity import nbytes_of, record_d2h
from gpurpo.backend._cupy import is_gpu_array
from gpurpo.backend._device_arrays import DeviceArray
from gpurpo.backend._frames import device_frame_values, is_device_frame

#: device arrays of at least this many bytes come to the host through pinned memory
#: when asked (``to_host(a, pinned=True)``)
PINNED_MIN_BYTES = 1 << 20


def to_host(a: Any, pinned: bool = False) -> Any:
    """Return a NumPy array / SciPy sparse matrix for any supported input.

    Parameters
    ----------
    a : array, sparse matrix or None
        NumPy/SciPy or CuPy/cupyx data, or a cuDF frame (its values).
    pinned : bool, default=False
        For a CuPy array of at least ``PINNED_MIN_BYTES``: copy it into
        page-locked host memory (``cupyx.empty_pinned``, from CuPy's pinned
        memory pool), which the device writes directly, at about twice the
        speed of a copy to pageable memory. For arrays the caller reads and
        drops (the grown trees' tables), not for arrays handed to users.

    Returns
    -------
    ndarray, SciPy sparse matrix or None
        ``a.get()`` for GPU data (a device-to-host copy), the plain NumPy
        view of a device array of the emulated backend (made inside
        :func:`~gpurpo.backend.count_device_activity` blocks), else ``a``
        itself (not copied); ``None`` for ``None``. The copies are counted
        in open :func:`~gpurpo.backend.count_device_activity` blocks.
    """
    if a is None:
        return None
    if is_device_frame(a):
        a = device_frame_values(a, "array")
    if is_gpu_array(a):
        if pinned and a.ndim and a.flags.c_contiguous and a.nbytes >= PINNED_MIN_BYTES:
            import cupyx

            out = cupyx.empty_pinned(a.shape, dtype=a.dtype)
            a.get(out=out)
        else:
            out = a.get()
        record_d2h(nbytes_of(out))
        return out
    if isinstance(a, DeviceArray):
        plain = a.view(np.ndarray)
        record_d2h(plain.nbytes)
        return plain
    return a


def bincount(xp: ModuleType, x: Any, minlength: int, weights: Any = None) -> Any:
    """``xp.bincount(x, weights, minlength)``, also for an empty ``x``: zeros of length
    ``minlength`` (int64, or float64 with ``weights``), as NumPy gives. CuPy before
    14.2 raises on an empty ``x`` whatever ``minlength`` (it reduces ``max(x)``)."""
    if int(x.shape[0]) == 0:
        return xp.zeros(int(minlength), dtype=xp.int64 if weights is None else xp.float64)
    return xp.bincount(x, weights=weights, minlength=int(minlength))


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
