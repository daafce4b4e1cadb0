"""The quantile rule of the bin edges, written once.

Every edge strategy of :class:`~gpurpo.tree.binning.BinMapper` (sorted rows, bucket
selection, weighted samples, sparse columns) computes the edges that
:func:`quantile_edges` defines, each faster for its kind of input; the tests hold
each one against it.

For the finite values ``x`` of one feature with weights ``w`` (unit weights unless
``sample_weight`` is given), distinct values ``v_0 < v_1 < ... < v_{D-1}`` and
cumulative weights ``C_i = sum of w over x <= v_i`` (``W = C_{D-1}``):

* ``D <= max_bins``: one bin per distinct value, edges at the midpoints
  ``(v_i + v_{i+1}) / 2``, ``i = 0 .. D - 2``;
* otherwise, for ``j = 1 .. max_bins - 1``, ``i_j`` is the first ``i`` with
  ``C_i max_bins >= j W`` (the distinct value holding the ``j / max_bins``
  quantile; compared without a division, so exactly for counts), clipped to
  ``D - 2`` (a quantile in the largest value gives the edge below it), and the
  edges are the midpoints ``(v_{i_j} + v_{i_j + 1}) / 2`` of the distinct ``i_j``.
  A value and all its ties stay in one bin.

With unit weights, ``C_i max_bins >= j n`` holds from the distinct value that
holds the sample of 0-based rank :func:`quantile_rank` in sorted order, which is how
the sorted and bucket strategies find ``i_j`` without cumulative sums.
"""

from __future__ import annotations

import numpy as np
from numba import njit


def quantile_edges(values: np.ndarray, max_bins: int, weights: np.ndarray | None = None) -> np.ndarray:
    """The bin edges of one feature by the quantile rule (the NumPy reference).

    Parameters
    ----------
    values : ndarray of shape (n,)
        The feature's finite values (NaN left out by the caller).
    max_bins : int
        Most value bins (at most ``max_bins - 1`` edges).
    weights : ndarray of shape (n,) or None
        Row weights; an integer weight has the effect of repeating the row.

    Returns
    -------
    ndarray of float64
        The increasing edges.
    """
    if values.size == 0:
        return np.empty(0, dtype=np.float64)
    distinct, inverse = np.unique(values.astype(np.float64), return_inverse=True)
    if distinct.size <= max_bins:
        return 0.5 * (distinct[:-1] + distinct[1:])
    counts = np.bincount(inverse.ravel(), weights=weights, minlength=distinct.size)
    cum = np.cumsum(counts)
    levels = np.arange(1, max_bins) * cum[-1]
    at = np.searchsorted(cum * max_bins, levels, side="left")
    at = np.unique(np.minimum(at, distinct.size - 2))
    return 0.5 * (distinct[at] + distinct[at + 1])


@njit(inline="always", cache=True)
def quantile_rank(j, n, max_bins):
    """0-based rank ``ceil(j n / max_bins) - 1`` (at least 0) of the sample holding the
    ``j / max_bins`` quantile among ``n`` sorted values (unit weights)."""
    rank = (j * n + max_bins - 1) // max_bins - 1
    return max(rank, 0)
