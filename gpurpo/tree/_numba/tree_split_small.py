"""numba twin of the ``tree_split_small`` kernel of ``kernels/tree_split_small.cu``.

Splits every small node of a batch exactly on its samples (:mod:`._node_split`),
with per-chunk scratch. :func:`launch` is the registered implementation: it
unpacks the argument records of :mod:`gpurpo.tree._records` into the compiled
kernel :func:`split_small_nodes`.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from gpurpo.backend import cpu_helper
from gpurpo.tree._borrow import borrow_all
from gpurpo.tree._numba._node_split import SORT_LIMIT, _eval_node
from gpurpo.tree._numba._shared import N_CHUNKS
from gpurpo.tree._random import N_ROUNDS, SMALL_P, feistel_params

# positions of the visiting order computed at once; holds a whole order of SMALL_P features
PERM_BATCH = max(32, SMALL_P)


@njit(cache=True)
def _eval_scratch(max_ns, mp, n_bins, n_slots, n_listing):
    """Scratch buffers of ``_eval_node`` for nodes of up to ``max_ns`` samples.

    Returns (w, wy, y, S, code_buf, order, hist, bin_pos, LS, MS, keys, perm, cand_f,
    cand_g, cand_b, cand_ml, link, occupied, listing), ``listing`` of
    ``n_listing`` entries (:func:`_list_node_features`); ``wy`` and ``y`` are zeroed
    (their padding channels stay zero), ``hist``, the bucket sort's list heads
    ``bin_pos`` and its bit set ``occupied`` too (``_eval_node`` leaves them
    zeroed); ``link`` holds the bucket sort's list links.
    """
    return (
        np.empty(max_ns, dtype=np.float64),
        np.zeros((max_ns, mp), dtype=np.float64),
        np.zeros((max_ns, mp), dtype=np.float32),
        np.empty(mp, dtype=np.float64),
        np.empty(min(max_ns, SORT_LIMIT), dtype=np.int64),
        np.empty(min(max_ns, SORT_LIMIT), dtype=np.int64),
        np.zeros((n_bins, mp + 2), dtype=np.float64),
        np.zeros(n_bins, dtype=np.int64),
        np.empty(mp, dtype=np.float64),
        np.empty(mp, dtype=np.float64),
        np.empty(N_ROUNDS, dtype=np.uint64),
        np.empty(PERM_BATCH, dtype=np.int64),
        np.empty(n_slots, dtype=np.int64),
        np.empty(n_slots, dtype=np.float64),
        np.empty(n_slots, dtype=np.int64),
        np.empty(n_slots, dtype=np.int64),
        np.empty(min(max_ns, SORT_LIMIT), dtype=np.int64),
        np.zeros((n_bins + 63) // 64, dtype=np.uint64),
        np.empty(n_listing, dtype=np.int64),
    )


@njit(inline="always", cache=True)
def _claim_slots(node_rows, start, ns, allowed, slot_of_row):
    """Whether a node may read the stored-entry columns, and if so its rows' slots.

    The column lists give each bin's samples in row order: the node's position
    order when its rows ``node_rows[start:start + ns]`` increase (the stable
    partitions keep them so), when columns exist (``allowed``): at every node
    size, a feature whose column (``listed``) is shorter than the node takes
    its table from the column (see :func:`_eval_node`). Sets ``slot_of_row[row]`` to the row's
    position in the node; undo with :func:`_release_slots`.
    """
    if not allowed:
        return False
    for a in range(start + 1, start + ns):
        if node_rows[a] <= node_rows[a - 1]:
            return False
    for a in range(ns):
        slot_of_row[node_rows[start + a]] = a
    return True


@njit(inline="always", cache=True)
def _release_slots(node_rows, start, ns, slot_of_row):
    """Reset the slots that :func:`_claim_slots` set (-1: outside the node)."""
    for a in range(start, start + ns):
        slot_of_row[node_rows[a]] = -1


@njit(cache=True)
def _split_chunk(
    ch, n_chunks, max_ns, codes, subtracted_bin, listed, col_ptr, col_rows, col_codes,
    sample_indices,
    node_ranges, node_tree, node_seed, weights, targets, edge_values, edge_ptr, n_candidates,
    min_samples_leaf, random_split, missing_bin, tie_rtol, out_feature, out_bin,
    out_missing_left, out_gain,
):
    """Split the nodes ``ch, ch + n_chunks, ...`` with scratch buffers of this chunk."""
    p = codes.shape[0]
    m = targets.shape[2]
    mp = ((m + 7) // 8) * 8
    n_bins = missing_bin + 1
    n_slots = max(1, min(n_candidates, p))
    identity = np.empty(max_ns, dtype=np.int32)
    for a in range(max_ns):
        identity[a] = a
    # each row's position in the current node, -1 outside it (read with the column lists)
    slot_of_row = np.full(targets.shape[0] if col_ptr.shape[0] > 0 else 1, -1, dtype=np.int32)
    # a node's codes of one feature, gathered from its column when there are no dense codes
    node_codes = np.empty((1, max_ns if codes.shape[1] == 0 else 1), dtype=np.uint8)
    _split_chunk_nodes(
        ch, n_chunks, codes, subtracted_bin, listed, col_ptr, col_rows, col_codes, sample_indices,
        node_ranges, node_tree, node_seed, weights, targets, edge_values, edge_ptr, n_candidates,
        min_samples_leaf, random_split, missing_bin, tie_rtol, out_feature, out_bin,
        out_missing_left, out_gain, identity, slot_of_row, node_codes,
        _eval_scratch(max_ns, mp, n_bins, n_slots, 0),
        # no stored entries by row: nodes walk the visiting order
        np.empty(0, dtype=np.int64), np.empty(0, dtype=np.int32), np.empty(0, dtype=np.int32),
    )


@njit(cache=True)
def _split_chunk_nodes(
    ch, n_chunks, codes, subtracted_bin, listed, col_ptr, col_rows, col_codes, sample_indices,
    node_ranges, node_tree, node_seed, weights, targets, edge_values, edge_ptr, n_candidates,
    min_samples_leaf, random_split, missing_bin, tie_rtol, out_feature, out_bin,
    out_missing_left, out_gain, identity, slot_of_row, node_codes, scratch, entry_ptr,
    entry_features, row_of_col,
):
    """The loop of :func:`_split_chunk` on views of its arrays that hold no reference."""
    (
        codes, subtracted_bin, listed, col_ptr, col_rows, col_codes, sample_indices, node_ranges,
        node_tree, node_seed, weights, targets, edge_values, edge_ptr, out_feature, out_bin,
        out_missing_left, out_gain, identity, slot_of_row, node_codes, entry_ptr, entry_features,
        row_of_col,
    ) = borrow_all((
        codes, subtracted_bin, listed, col_ptr, col_rows, col_codes, sample_indices, node_ranges,
        node_tree, node_seed, weights, targets, edge_values, edge_ptr, out_feature, out_bin,
        out_missing_left, out_gain, identity, slot_of_row, node_codes, entry_ptr, entry_features,
        row_of_col,
    ))
    (w, wy, y, S, code_buf, order, hist, bin_pos, LS, MS, keys, perm,
     cand_f, cand_g, cand_b, cand_ml, link, occupied, listing) = borrow_all(scratch)
    n_nodes = node_ranges.shape[0]
    m = targets.shape[2]
    lo_bits, hi_bits = feistel_params(codes.shape[0])
    zero = np.int64(0)
    for i in range(ch, n_nodes, n_chunks):
        start = node_ranges[i, 0]
        ns = node_ranges[i, 1] - start
        t = node_tree[i]
        for a in range(ns):
            s = sample_indices[start + a]
            wa = np.float64(weights[t, s])
            w[a] = wa
            for c in range(m):
                yv = targets[s, t, c]
                y[a, c] = yv
                wy[a, c] = wa * yv
        use_columns = _claim_slots(sample_indices, start, ns, col_ptr.shape[0] > 0,
                                   slot_of_row)
        f, b, ml, g = _eval_node(
            codes, sample_indices, start, ns, w, wy, y, identity, zero, node_seed[i],
            n_candidates, min_samples_leaf, random_split, missing_bin, tie_rtol, edge_values,
            edge_ptr, lo_bits, hi_bits, S, code_buf, order, hist, bin_pos, LS, MS, keys, perm,
            cand_f, cand_g, cand_b, cand_ml, link, occupied, m, subtracted_bin, listed, use_columns,
            col_ptr, col_rows, col_codes, slot_of_row, node_codes, identity, entry_ptr,
            entry_features, row_of_col, listing,
        )
        if use_columns:
            _release_slots(sample_indices, start, ns, slot_of_row)
        out_feature[i] = f
        out_bin[i] = b
        out_missing_left[i] = ml
        out_gain[i] = g


@njit(parallel=True, cache=True)
def split_small_nodes(
    codes,
    subtracted_bin,
    listed,
    col_ptr,
    col_rows,
    col_codes,
    sample_indices,
    node_ranges,
    node_tree,
    node_seed,
    weights,
    targets,
    edge_values, edge_ptr,
    n_candidates,
    min_samples_leaf,
    random_split,
    missing_bin,
    tie_rtol,
    out_feature,
    out_bin,
    out_missing_left,
    out_gain,
):
    n_nodes = node_ranges.shape[0]
    max_ns = max(np.int64(1), np.int64(np.max(node_ranges[:, 1] - node_ranges[:, 0])))
    # nodes are dealt to a few chunks (strided, for balance); each chunk owns scratch
    # buffers, so nothing is allocated per node
    n_chunks = min(n_nodes, N_CHUNKS)
    for ch in prange(n_chunks):
        _split_chunk(
            np.int64(ch), n_chunks, max_ns, codes, subtracted_bin, listed, col_ptr, col_rows,
            col_codes,
            sample_indices, node_ranges, node_tree, node_seed, weights, targets, edge_values,
            edge_ptr,
            n_candidates, min_samples_leaf, random_split, missing_bin, tie_rtol, out_feature,
            out_bin, out_missing_left, out_gain,
        )


def launch(codes, batch, weights, targets, edges, rules, sparse, out_feature, out_bin,
           out_missing_left, out_gain):
    """``tree_split_small`` on the CPU: :func:`split_small_nodes` on the records' arrays.

    ``batch``, ``edges``, ``rules`` and ``sparse`` are the typed
    :class:`~gpurpo.tree._records.NodeBatch`, ``EdgeTable``, ``SplitRules`` and
    ``SparseColumns`` of the contract (:mod:`gpurpo.tree.kernels`). Inside
    :func:`gpurpo.backend.serial_cpu_kernels` the kernel's single-threaded twin runs.
    """
    columns = sparse.sparse_codes
    cpu_helper(split_small_nodes)(
        codes, sparse.subtracted_bin, sparse.listed, columns.col_ptr, columns.col_rows,
        columns.col_codes, batch.sample_indices, batch.node_ranges, batch.node_tree,
        batch.node_seed, weights, targets, edges.edge_values, edges.edge_ptr,
        rules.n_candidates, rules.min_samples_leaf, int(rules.random_split), rules.missing_bin,
        rules.tie_rtol, out_feature, out_bin, out_missing_left, out_gain,
    )
