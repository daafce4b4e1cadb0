"""numba twin of ``kernels/tree_thresholds.cu``: the values on each side of every split.

For each internal node of a batch of grown trees, the largest value of its
feature among the training rows sent left and the smallest among those sent
right (rows of zero weight in a tree are not in its sample). The trees'
nodes are disjoint, so trees run in parallel and each walks its rows in turn.

Each step of a row waits for the load of its value (a row of a large X is
rarely in cache), so ``LANES`` rows walk a tree together, one step each in
turn, and their independent loads overlap (as ``tree_apply_csr`` does).
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from gpurpo.tree.binning._edge_lookup import _count_below

# rows that walk a tree together
LANES = 8


@njit(inline="always", cache=True)
def _record(x, node, threshold, missing_left, left, right, low, high):
    """Record ``x`` on its side of internal ``node`` and return the child it goes to."""
    if np.isnan(x):
        return left[node] if missing_left[node] != 0 else right[node]
    if x <= threshold[node]:
        if x > low[node]:
            low[node] = x
        return left[node]
    if x < high[node]:
        high[node] = x
    return right[node]


@njit(parallel=True, cache=True)
def neighbour_values(X, weights, feature, threshold, missing_left, left, right, roots, low, high):
    n = X.shape[0]
    for t in prange(roots.shape[0]):
        rows = np.empty(LANES, dtype=np.int64)
        nodes = np.empty(LANES, dtype=np.int64)
        i = 0
        while i < n:
            lanes = 0
            while lanes < LANES and i < n:
                if weights[t, i] > 0:
                    rows[lanes] = i
                    nodes[lanes] = roots[t]
                    lanes += 1
                i += 1
            walking = lanes
            while walking > 0:
                walking = 0
                for lane in range(lanes):
                    node = nodes[lane]
                    if feature[node] < 0:
                        continue
                    walking += 1
                    nodes[lane] = _record(np.float64(X[rows[lane], feature[node]]), node,
                                          threshold, missing_left, left, right, low, high)


@njit(parallel=True, cache=True)
def neighbour_values_csr(indptr, indices, data, weights, feature, threshold, missing_left, left,
                         right, roots, low, high):
    n = indptr.shape[0] - 1
    for t in prange(roots.shape[0]):
        for i in range(n):
            if weights[t, i] <= 0:
                continue
            start = indptr[i]
            stop = indptr[i + 1]
            node = roots[t]
            while feature[node] >= 0:
                f = feature[node]
                at = start + _count_below(indices[start:], stop - start, f)
                x = np.float64(data[at]) if at < stop and indices[at] == f else 0.0
                node = _record(x, node, threshold, missing_left, left, right, low, high)
