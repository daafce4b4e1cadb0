"""numba twins of ``kernels/tree_segment_sums.cu``: ordered sums of consecutive segments."""

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


@njit(parallel=True, cache=True)
def segment_row_sums(rows, row_weights, bounds, Y, out):
    """``out[s, c] = 0.0 + w[e] * Y[rows[e], c] + ...`` over the entries ``e`` of segment
    ``s`` (``bounds[s] <= e < bounds[s + 1]``), in increasing ``e``."""
    d = Y.shape[1]
    for s in prange(out.shape[0]):
        for c in range(d):
            out[s, c] = 0.0
        for e in range(bounds[s], bounds[s + 1]):
            w = row_weights[e]
            r = rows[e]
            for c in range(d):
                out[s, c] += w * Y[r, c]
