"""numba twin of ``kernels/tree_predict.cu``: tree traversal and leaf sums for prediction.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from gpurpo.tree._numba._shared import N_CHUNKS
from gpurpo.tree.binning._edge_lookup import _count_below


@njit(parallel=True, cache=True)
def apply_trees(X, feature, threshold, missing_left, left, right, roots, out):
    n = X.shape[0]
    n_trees = roots.shape[0]
    for i in prange(n):
        for t in range(n_trees):
            node = roots[t]
            while feature[node] >= 0:
                node = _child(X[i, feature[node]], node, threshold, missing_left, left, right)
            out[i, t] = node


@njit(inline="always", cache=True)
def _child(x, node, threshold, missing_left, left, right):
    """The child of internal ``node`` that a row whose value of its feature is ``x``
    goes to: left when ``x <= threshold[node]``, NaN to the side of ``missing_left``."""
    go_left = missing_left[node] != 0 if np.isnan(x) else x <= threshold[node]
    return left[node] if go_left else right[node]


# rows that apply_trees_csr walks down a tree together
APPLY_LANES = 8


@njit(parallel=True, cache=True)
def apply_trees_csr(indptr, indices, data, n_columns, feature, threshold, missing_left, left,
                    right, roots, out):
    """:func:`apply_trees` of a CSR X (sorted column indices, no duplicates), without
    densifying a row: a node's value is 0.0 unless the row stores its feature, which a
    bitmap of the row's features tells (p bits: 125 KB at a million features,
    cache-resident), and a stored value is found by binary search among the row's
    entries. Text-like trees are thousands of nodes deep along their chains of all-zero
    sides, so the bitmap answers most nodes in one read.

    Each node step waits for the previous one's loads, so ``APPLY_LANES`` rows (each
    with its bitmap) walk a tree together, one step each in turn: their independent
    steps overlap.

    The bitmaps' width comes from ``n_columns`` (every stored column and node feature
    is below it), not from a pass over the nodes: a call on a few rows costs their
    paths only, not the size of the forest.
    """
    n = indptr.shape[0] - 1
    n_trees = roots.shape[0]
    p_words = max(1, (n_columns + 63) >> 6)
    n_groups = (n + APPLY_LANES - 1) // APPLY_LANES
    n_chunks = min(n_groups, N_CHUNKS)
    for ch in prange(n_chunks):
        stored = np.zeros((APPLY_LANES, p_words), dtype=np.uint64)
        nodes = np.empty(APPLY_LANES, dtype=np.int64)
        for group in range(ch, n_groups, n_chunks):
            i0 = group * APPLY_LANES
            lanes = min(APPLY_LANES, n - i0)
            for lane in range(lanes):
                for e in range(indptr[i0 + lane], indptr[i0 + lane + 1]):
                    stored[lane, indices[e] >> 6] |= np.uint64(1) << np.uint64(indices[e] & 63)
            for t in range(n_trees):
                for lane in range(lanes):
                    nodes[lane] = roots[t]
                walking = lanes
                while walking > 0:
                    walking = 0
                    for lane in range(lanes):
                        node = nodes[lane]
                        f = feature[node]
                        if f < 0:
                            continue
                        walking += 1
                        x = 0.0
                        if (stored[lane, f >> 6] >> np.uint64(f & 63)) & np.uint64(1):
                            a = indptr[i0 + lane]
                            x = data[a + _count_below(indices[a:], indptr[i0 + lane + 1] - a, f)]
                        nodes[lane] = _child(x, node, threshold, missing_left, left, right)
                for lane in range(lanes):
                    out[i0 + lane, t] = nodes[lane]
            for lane in range(lanes):
                for e in range(indptr[i0 + lane], indptr[i0 + lane + 1]):
                    stored[lane, indices[e] >> 6] = np.uint64(0)


@njit(parallel=True, cache=True)
def sum_leaves_dense(leaf_rows, values, out):
    n = leaf_rows.shape[0]
    n_trees = leaf_rows.shape[1]
    d = values.shape[1]
    for i in prange(n):
        for t in range(n_trees):
            leaf = leaf_rows[i, t]
            if leaf >= 0:
                for c in range(d):
                    out[i, c] += values[leaf, c]


@njit(parallel=True, cache=True)
def sum_leaves_csr(leaf_rows, indptr, indices, data, out):
    n = leaf_rows.shape[0]
    n_trees = leaf_rows.shape[1]
    for i in prange(n):
        for t in range(n_trees):
            leaf = leaf_rows[i, t]
            if leaf >= 0:
                for q in range(indptr[leaf], indptr[leaf + 1]):
                    out[i, indices[q]] += data[q]
