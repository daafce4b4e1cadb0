"""Single-pass numba helpers for the grower's host node tables.

The level-wise grower keeps every node of a batch of trees in host arrays
(``HostNodeTable`` in :mod:`gpurpo.tree.grower`); on a GPU these tables are the
host's share of the work, millions of nodes per batch. Written as NumPy
expressions, numbering the nodes of the finished trees and absorbing the
output of a ``tree_grow_subtrees`` call took a dozen passes over the tables
(sorts, repeats, fancy indexing); each helper here does its job in one or two
sequential passes. They hold no GIL, so CPU forests growing batches on
several threads run them concurrently.

Invariant used throughout: a node's children have larger ids than the node
(nodes are appended after their parents in every growth path).
"""

from __future__ import annotations

import numpy as np
from numba import njit

__all__ = ["number_nodes", "sum_internal_weights", "absorb_subtrees", "leaf_table", "pack_tree",
           "place_leaf_samples"]


@njit(cache=True, nogil=True)
def number_nodes(tree, is_leaf, out_leaf_index, out_local_id, out_order, out_counts):
    """Per-tree numbering of nodes, in node order.

    Parameters
    ----------
    tree : int32 array (N,)
        Tree of each node, in ``[0, T)`` with ``T = len(out_counts)``.
    is_leaf : bool array (N,)
    out_leaf_index : int32 array (N,)
        Rank of each leaf among its tree's leaves (node order); -1 for
        internal nodes.
    out_local_id : int64 array (N,)
        Rank of each node among its tree's nodes.
    out_order : int64 array (N,)
        The node ids grouped by tree, node order within a tree (the stable
        order by tree).
    out_counts : int64 array (T,)
        Nodes per tree.
    """
    n_trees = out_counts.shape[0]
    leaves = np.zeros(n_trees, dtype=np.int64)
    out_counts[:] = 0
    for g in range(tree.shape[0]):
        t = tree[g]
        out_local_id[g] = out_counts[t]
        out_counts[t] += 1
        if is_leaf[g]:
            out_leaf_index[g] = leaves[t]
            leaves[t] += 1
        else:
            out_leaf_index[g] = -1
    first = np.empty(n_trees, dtype=np.int64)
    acc = 0
    for t in range(n_trees):
        first[t] = acc
        acc += out_counts[t]
    for g in range(tree.shape[0]):
        out_order[first[tree[g]] + out_local_id[g]] = g


@njit(cache=True, nogil=True)
def sum_internal_weights(is_leaf, left, right, weighted):
    """``weighted[g] = weighted[left[g]] + weighted[right[g]]`` for internal nodes.

    Leaves hold their weighted sample counts on entry; nodes are visited from
    the last id down, so children are summed before their parents. Returns
    False (and stops) if a child's id is not above its parent's.
    """
    for g in range(is_leaf.shape[0] - 1, -1, -1):
        if is_leaf[g]:
            continue
        lo = left[g]
        hi = right[g]
        if lo <= g or hi <= g:
            return False
        weighted[g] = weighted[lo] + weighted[hi]
    return True


@njit(cache=True, nogil=True)
def absorb_subtrees(
    roots, offsets, count, feature, bin_, missing_left, gain, left, right, depth, start, stop,
    first_new, n_tree, n_parent, n_depth, n_start, n_stop, n_feature, n_bin, n_missing_left,
    n_gain, n_left, n_right, n_seed,
):
    """Write the nodes grown by ``tree_grow_subtrees`` into the node tables.

    Root ``r`` (node id ``roots[r]``) owns the output rows ``offsets[r] +
    j`` for its ``count[r]`` nodes ``j`` (local numbering, ``j = 0`` the
    root, children's local ids above their parent's). Local node ``j > 0``
    becomes node ``first_new + (nodes before it, roots excluded)``: the new
    ids follow the roots in order, each subtree's nodes in local order.
    Subtree outputs are relative to the root's sample range (``start``,
    ``stop``); ``n_*`` are the node tables (rows ``first_new`` on must have
    room). Leaves get ``feature`` -1 (from the kernel), gain ``-inf`` and no
    children; new nodes get seed 0 (grown nodes need no seed).
    Returns the number of new nodes.
    """
    nxt = first_new
    neg_inf = -np.inf
    for r in range(roots.shape[0]):
        base = offsets[r]
        c = count[r]
        root = roots[r]
        t = n_tree[root]
        root_start = n_start[root]
        g_base = nxt - 1  # global id of local node j >= 1: g_base + j
        for j in range(c):
            row = base + j
            g = root if j == 0 else g_base + j
            if j > 0:
                n_tree[g] = t
                n_depth[g] = depth[row]
                n_start[g] = start[row] + root_start
                n_stop[g] = stop[row] + root_start
                n_seed[g] = 0
            f = feature[row]
            n_feature[g] = f
            n_bin[g] = bin_[row]
            n_missing_left[g] = missing_left[row]
            if f >= 0:
                gl = g_base + left[row]
                gr = g_base + right[row]
                n_gain[g] = gain[row]
                n_left[g] = gl
                n_right[g] = gr
                n_parent[gl] = g
                n_parent[gr] = g
            else:
                n_gain[g] = neg_inf
                n_left[g] = -1
                n_right[g] = -1
        nxt += c - 1
    return nxt - first_new


@njit(cache=True, nogil=True)
def pack_tree(feature, threshold, missing_go_left, children_left, children_right, leaf_index,
              node_offset, leaf_offset, out_feature, out_threshold, out_missing_go_left,
              out_left, out_right, out_leaf_row):
    """Copy one tree's node arrays into the packed arrays, from ``node_offset`` on.

    Children become global node ids (``+ node_offset``, -1 kept), leaf
    indices global leaf rows (``+ leaf_offset``, -1 kept), and thresholds
    finite (NaN to 0, infinities to the largest finite doubles, as
    ``numpy.nan_to_num``). Returns the tree's number of leaves.
    """
    big = np.finfo(np.float64).max
    leaves = 0
    for i in range(feature.shape[0]):
        j = node_offset + i
        out_feature[j] = feature[i]
        t = threshold[i]
        if np.isnan(t):
            t = 0.0
        elif t == np.inf:
            t = big
        elif t == -np.inf:
            t = -big
        out_threshold[j] = t
        out_missing_go_left[j] = missing_go_left[i]
        c = children_left[i]
        out_left[j] = c + node_offset if c >= 0 else -1
        c = children_right[i]
        out_right[j] = c + node_offset if c >= 0 else -1
        r = leaf_index[i]
        out_leaf_row[j] = r + leaf_offset if r >= 0 else -1
        if feature[i] < 0:
            leaves += 1
    return leaves


@njit(cache=True, nogil=True)
def leaf_table(left, feature, tree, start, stop, leaf_index):
    """The leaves of the node tables, in node order, and their sample ranges.

    Sets ``feature`` to -1 at every leaf (``left < 0``) and returns
    ``(leaf_ids, leaf_start, leaf_length, leaf_tree, leaf_rank)``: the
    leaves' node ids, the start and length of their ranges in the sample
    buffer, their trees and their ``leaf_index`` (rank among the tree's
    leaves, from :func:`number_nodes`).
    """
    n_leaves = 0
    for g in range(left.shape[0]):
        if left[g] < 0:
            n_leaves += 1
    leaf_ids = np.empty(n_leaves, dtype=np.int64)
    leaf_start = np.empty(n_leaves, dtype=np.int64)
    leaf_length = np.empty(n_leaves, dtype=np.int64)
    leaf_tree = np.empty(n_leaves, dtype=np.int64)
    leaf_rank = np.empty(n_leaves, dtype=np.int32)
    j = 0
    for g in range(left.shape[0]):
        if left[g] >= 0:
            continue
        feature[g] = -1
        leaf_ids[j] = g
        leaf_start[j] = start[g]
        leaf_length[j] = stop[g] - start[g]
        leaf_tree[j] = tree[g]
        leaf_rank[j] = leaf_index[g]
        j += 1
    return leaf_ids, leaf_start, leaf_length, leaf_tree, leaf_rank


@njit(cache=True, nogil=True)
def place_leaf_samples(sample_indices, weights, leaf_start, leaf_length, leaf_tree, leaf_rank,
                       leaf_of_sample, leaf_weight):
    """The leaf of every sample and each leaf's weighted sample count, in one pass.

    Leaf ``j`` holds the samples ``sample_indices[leaf_start[j]:leaf_start[j] +
    leaf_length[j]]`` of tree ``leaf_tree[j]``: each gets ``leaf_of_sample[t, s] =
    leaf_rank[j]``, and ``leaf_weight[j]`` is the float64 sum of their ``weights[t, s]``,
    added in buffer order (as ``numpy.bincount`` adds them).
    """
    for j in range(leaf_start.shape[0]):
        t = leaf_tree[j]
        rank = leaf_rank[j]
        total = 0.0
        for pos in range(leaf_start[j], leaf_start[j] + leaf_length[j]):
            s = sample_indices[pos]
            leaf_of_sample[t, s] = rank
            total += np.float64(weights[t, s])
        leaf_weight[j] = total
