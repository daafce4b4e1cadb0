"""Edge lookups shared by the binning and by the split and prediction kernels (numba).

``#{edges < x}`` (the code of a value), the threshold of a bin, the code of 0.0 and
the Extra-Trees cut of a node.
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
    edges), as the ``(p, n_bins - 1)`` table padded with ``+inf`` that the kernels
    read before, without its ``p x 255`` cells (2 GB at a million features)."""
    at = edge_ptr[f] + b
    return edge_values[at] if at < edge_ptr[f + 1] else np.inf


@njit(inline="always", cache=True)
def _zero_code(edge_values, edge_ptr, f):
    """The code of 0.0 of feature ``f``: its number of negative edges (uint8)."""
    e0 = edge_ptr[f]
    return np.uint8(_count_below(edge_values[e0:], edge_ptr[f + 1] - e0, 0.0))


@njit(inline="always", cache=True)
def _random_cut(edge_values, edge_ptr, f, bmin, bmax, u):
    """The Extra-Trees split "code <= b" of feature ``f`` in a node whose codes span
    ``[bmin, bmax]``, from the uniform draw ``u`` in [0, 1).

    The candidates are the ``K = bmax - bmin`` edges ``e(b)``, ``b`` in
    ``[bmin, bmax - 1]``. The cut is the candidate nearest to
    ``t = lo + u (hi - lo)``, where ``[lo, hi]`` extends ``[e(bmin), e(bmax - 1)]``
    by half a neighbouring gap on each side: evenly spaced edges are drawn with
    probability ``1 / K`` each, as scikit-learn's threshold drawn uniformly
    between the node's smallest and largest values (Geurts, Ernst & Wehenkel
    2006) cuts each gap of evenly spaced values. ``bmax`` when ``bmax <= bmin``
    (a constant feature). The CUDA twin is ``random_cut_bin`` of
    ``kernels/bin_edges.cuh``, the same operations in the same order.
    """
    if bmax <= bmin:
        return bmax
    if bmax - bmin == 1:
        return bmin
    first = _edge(edge_values, edge_ptr, f, bmin)
    last = _edge(edge_values, edge_ptr, f, bmax - 1)
    lo = first - 0.5 * (_edge(edge_values, edge_ptr, f, bmin + 1) - first)
    hi = last + 0.5 * (last - _edge(edge_values, edge_ptr, f, bmax - 2))
    t = lo + u * (hi - lo)
    b = bmin
    below = first
    while b + 1 <= bmax - 1:
        above = _edge(edge_values, edge_ptr, f, b + 1)
        if not 0.5 * (below + above) <= t:  # NaN (edges of +inf) stops too
            break
        b += 1
        below = above
    return b
