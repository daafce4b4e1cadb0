"""numba twin of ``kernels/tree_segment_sums.cu``: ordered sums of consecutive segments."""

from __future__ import annotations

from numba import njit, prange


@njit(parallel=True, cache=True)
def segment_sums(values, bounds, out):
    """``out[s] = 0.0 + values[bounds[s]] + ... + values[bounds[s + 1] - 1]``, in that order."""
    for s in prange(out.shape[0]):
        acc = 0.0
        for q in range(bounds[s], bounds[s + 1]):
            acc += values[q]
        out[s] = acc
