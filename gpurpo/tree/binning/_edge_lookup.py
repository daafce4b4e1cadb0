"""Edge lookups shared by the binning and by the split and prediction kernels (numba).

``#{edges < x}`` (the code of a value), the threshold of a bin and the code of 0.0.
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
