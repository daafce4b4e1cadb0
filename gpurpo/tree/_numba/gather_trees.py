"""Gathering the grown nodes of a batch of trees into per-tree node arrays (numba).
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from gpurpo.tree.binning._edge_lookup import _edge


@njit(parallel=True, cache=True)
def gather_tree_arrays(order, is_leaf, feature, bin_, missing_left, left, right, local_id,
                       leaf_index, start, stop, weighted, gain, depth, edge_values, edge_ptr,
                       out_left, out_right, out_feature, out_threshold, out_bin,
                       out_missing_left, out_leaf_index, out_n_samples, out_weighted,
                       out_gain, out_depth):
    """Per-tree node arrays in one pass (host helper of the grower's ``finish``).

    Position j describes node ``g = order[j]``: children as local ids
    (``local_id``), the split's feature, bin, threshold ``_edge(edge_values, edge_ptr, f, bin)``,
    missing side and gain for internal nodes; -1 / NaN / 0 for leaves.
    """
    for j in prange(order.shape[0]):
        g = order[j]
        if is_leaf[g]:
            out_left[j] = -1
            out_right[j] = -1
            out_feature[j] = -1
            out_threshold[j] = np.nan
            out_bin[j] = 0
            out_missing_left[j] = 0
            out_gain[j] = 0.0
        else:
            f = feature[g]
            b = bin_[g]
            out_left[j] = local_id[left[g]]
            out_right[j] = local_id[right[g]]
            out_feature[j] = f
            out_threshold[j] = _edge(edge_values, edge_ptr, f, b)
            out_bin[j] = b
            out_missing_left[j] = missing_left[g]
            out_gain[j] = gain[g]
        out_leaf_index[j] = leaf_index[g]
        out_n_samples[j] = stop[g] - start[g]
        out_weighted[j] = weighted[g]
        out_depth[j] = depth[g]
