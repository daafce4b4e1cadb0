"""Edge lookups shared by the binning and by the split and prediction kernels (numba).

``#{edges < x}`` (the code of a value), the threshold of a bin, the code of 0.0 and
the Extra-Trees cut of a node (from the bin lows that follow the edges).
"""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True)
def _count_below(edges, n_edges, x):
    """``#{edges[:n_edges] < x}`` by binary search (increasing edges)."""
    lo_e = 0
    hi_e = n_edges
    while lo_e < hi_e:
        mid = (lo_e + hi_e) >> 1
        if edges[mid] < x:
            lo_e = mid + 1
        else:
            hi_e = mid
    return lo_e


@njit(inline="always", cache=True)
def _edge(edge_values, edge_ptr, f, b):
    """The upper edge of value bin ``b`` of feature ``f`` in the ragged edge table
    (``edge_values[edge_ptr[f]:edge_ptr[f + 1]]``, increasing): the split "code <= b"
    is "x <= edge". ``+inf`` from the feature's last value bin on (its number of
    edges): the values of a ``(p, n_bins - 1)`` table padded with ``+inf``, without
    its ``p x 255`` cells (2 GB at a million features)."""
    at = edge_ptr[f] + b
    return edge_values[at] if at < edge_ptr[f + 1] else np.inf


@njit(inline="always", cache=True)
def _zero_code(edge_values, edge_ptr, f):
    """The code of 0.0 of feature ``f``: its number of negative edges (uint8)."""
    e0 = edge_ptr[f]
    return np.uint8(_count_below(edge_values[e0:], edge_ptr[f + 1] - e0, 0.0))


@njit(inline="always", cache=True)
def _bin_low(edge_values, edge_ptr, f, b):
    """The smallest fitted value of value bin ``b`` of feature ``f``, from the lows that
    follow the edges in ``edge_values`` (:mod:`gpurpo.tree.binning._bin_lows`);
    ``+inf`` beyond the feature's last value bin, as :func:`_edge`."""
    if b > edge_ptr[f + 1] - edge_ptr[f]:
        return np.inf
    return edge_values[edge_ptr[edge_ptr.shape[0] - 1] + edge_ptr[f] + f + b]


@njit(inline="always", cache=True)
def _random_cut(edge_values, edge_ptr, f, bmin, bmax, u):
    """The Extra-Trees split "code <= b" of feature ``f`` in a node whose codes span
    ``[bmin, bmax]``, from the uniform draw ``u`` in [0, 1).

    Geurts, Ernst & Wehenkel (2006), scikit-learn's ``RandomSplitter``: a
    threshold ``t`` drawn uniformly between the node's smallest and largest
    value, rows ``x <= t`` to the left, so each gap between the node's
    neighbouring values is cut with probability proportional to its width.
    Here ``t = lo + u (hi - lo)`` with ``lo``, ``hi`` the smallest fitted
    values of bins ``bmin`` and ``bmax`` (the lows that follow the edges in
    ``edge_values``, :mod:`gpurpo.tree.binning._bin_lows`), and the cut is
    the largest bin ``b`` in ``[bmin, bmax - 1]`` whose low is at most ``t``
    (binary search): scikit-learn's partition where each bin holds one value.
    ``bmax`` when ``bmax <= bmin`` (a constant feature). The CUDA twin is
    ``random_cut_bin`` of ``kernels/bin_edges.cuh``, the same operations in
    the same order.
    """
    if bmax <= bmin:
        return bmax
    if bmax - bmin == 1:
        return bmin
    lo = _bin_low(edge_values, edge_ptr, f, bmin)
    hi = _bin_low(edge_values, edge_ptr, f, bmax)
    t = lo + u * (hi - lo)
    # the largest b in [first, last] with low(b) <= t (lows increase; NaN: first)
    first = bmin
    last = bmax - 1
    while first < last:
        mid = (first + last + 1) >> 1
        if _bin_low(edge_values, edge_ptr, f, mid) <= t:
            first = mid
        else:
            last = mid - 1
    return first
