"""What the CUDA histogram launches of one growth share.

``tree_histograms`` sums in fixed point (``kernels/tree_histograms.cu``): each
channel's scale follows from the largest ``|w|`` and ``|y_c|`` of the weights
and targets, which ``tree_histogram_bounds`` reads in full. A growth launches
the histograms of its large nodes level after level on the same weights and
targets, so it reads them once (:func:`gpurpo.tree.kernels.histogram_scratch`)
and every launch takes the partial maxima from :class:`HistogramScratch`. Nodes split into
sample chunks add their cells into 64-bit integers in global memory, with a
counter of finished chunks per tile; the last chunk of a tile converts the
sums and sets them and its counter back to zero, so the scratch holds zeros
between launches and is zeroed once, when it grows.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from gpurpo.backend import ELEMENTWISE_BLOCK, Backend, launch_block, launch_grid

__all__ = ["HistogramScratch", "histogram_bounds"]


def histogram_bounds(backend: Backend, weights: Any, targets: Any, acc: Any, done: Any) -> Any:
    """``tree_histogram_bounds``: float32 (n_partial, m + 1) partial maxima of ``|w|``
    (column 0) and ``|y_c|`` (float32 ``weights`` (T, n), ``targets`` (n, T, m), on the
    device), one row per block of a one-wave grid; the uint64 sums ``acc`` and uint32
    counters ``done`` are zeroed by the same launch."""
    xp = backend.xp
    n_trees, m = int(targets.shape[1]), int(targets.shape[2])
    n_rows = int(weights.shape[1]) * n_trees
    attrs = backend.device_attributes()
    block = launch_block(attrs, ELEMENTWISE_BLOCK)
    # one row of partial maxima per block, which every histogram block reads: one wave
    n_partial = launch_grid(max(n_rows, 1), block, attrs, waves=1)
    partial = xp.empty((n_partial, m + 1), dtype=xp.float32)
    backend.load_module("tree_histograms.cu").get_function("tree_histogram_bounds")(
        (n_partial,), (block,),
        (weights, targets, np.int64(n_rows), np.int32(m), partial, acc,
         np.int64(acc.shape[0]), done, np.int64(done.shape[0])),
    )
    return partial


class HistogramScratch:
    """The partial maxima of one growth's weights and targets, and the integer sums and
    counters of its chunked histogram launches, zero between launches.

    Made once per growth and passed to every histogram launch of the growth on
    the same weights and targets (or made by a launch for itself). Making it is
    one launch, which reads ``weights`` (float32 (T, n)) and ``targets``
    (float32 (n, T, m)), C-contiguous device arrays, for the maxima and zeroes
    ``cells`` sums and ``counters`` counters; the sums grow (doubling, one
    zeroing launch) when a launch needs more.
    """

    def __init__(self, backend: Backend, weights: Any, targets: Any, cells: int = 0,
                 counters: int = 0) -> None:
        self.backend = backend
        self.shapes = (tuple(weights.shape), tuple(targets.shape))
        self._allocate(cells, counters, zeroed=False)
        self.partial = histogram_bounds(backend, weights, targets, self._acc, self._done)

    def _allocate(self, cells: int, counters: int, zeroed: bool) -> None:
        """One uint64 buffer: ``cells`` sums, then ``counters`` uint32 counters (at least
        one of each, so that a launch always has arrays to pass)."""
        xp = self.backend.xp
        cells, counters = max(int(cells), 1), max(int(counters), 1)
        buffer = (xp.zeros if zeroed else xp.empty)(cells + (counters + 1) // 2,
                                                    dtype=xp.uint64)
        self._acc = buffer[:cells]
        self._done = buffer[cells:].view(xp.uint32)[:counters]

    def check(self, weights: Any, targets: Any) -> None:
        """Raises ValueError unless ``weights`` and ``targets`` have the shapes of those
        the scratch was made for."""
        shapes = (tuple(weights.shape), tuple(targets.shape))
        if shapes != self.shapes:
            raise ValueError(f"the histogram scratch was made for weights and targets of "
                             f"shapes {self.shapes}, got {shapes}")

    def sums(self, acc_cells: int, n_done: int) -> tuple[Any, Any]:
        """uint64 sums (at least ``acc_cells``) and uint32 counters (at least ``n_done``),
        all zero; grown (doubling, zeroed in one launch) when too small."""
        cells, counters = int(self._acc.shape[0]), int(self._done.shape[0])
        if cells < acc_cells or counters < n_done:
            self._allocate(max(acc_cells, 2 * cells), max(n_done, 2 * counters), zeroed=True)
        return self._acc, self._done
