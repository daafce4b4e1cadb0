"""numba twin of the ``tree_split_small`` kernel of ``kernels/tree_split_small.cu``.

Splits every small node of a batch exactly on its samples (:mod:`._node_split`),
with per-chunk scratch. :func:`launch` is the registered implementation: it
turns the argument records of :mod:`gpurpo.tree._records` into those of
:mod:`._kernel_records` and runs the compiled kernel :func:`split_small_nodes`.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from gpurpo.backend import cpu_helper
from gpurpo.tree._borrow import borrow_all
from gpurpo.tree._numba._kernel_records import (
    EvalRules,
    EvalScratch,
    NodeAt,
    NodeBits,
    NodeColumns,
    NodeData,
    SplitOut,
    kernel_records,
)
from gpurpo.tree._numba._node_split import SORT_LIMIT, _eval_node
from gpurpo.tree._numba._shared import N_CHUNKS
from gpurpo.tree._random import N_ROUNDS, SMALL_P, feistel_params

# positions of the visiting order computed at once; holds a whole order of SMALL_P features
PERM_BATCH = max(32, SMALL_P)


@njit(cache=True)
def _eval_scratch(max_ns, mp, n_bins, n_slots, n_listing):
    """Buffers of ``_eval_node`` for nodes of up to ``max_ns`` samples.

    Returns ``((w, wy, y), scratch)``: a node's gathered weights, weighted
    targets and targets, zeroed (their padding channels stay zero), and the
    :data:`~._kernel_records.EvalScratch`, its ``listing`` of ``n_listing``
    entries (:func:`_list_node_features`); ``hist``, the bucket sort's list
    heads ``bin_pos`` and its bit set ``occupied`` are zeroed too
    (``_eval_node`` leaves them zeroed); ``link`` holds the bucket sort's list
    links.
    """
    data = (
        np.empty(max_ns, dtype=np.float64),
        np.zeros((max_ns, mp), dtype=np.float64),
        np.zeros((max_ns, mp), dtype=np.float32),
    )
    scratch = EvalScratch(
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
    return data, scratch


@njit(cache=True)
def _eval_rules(rules, p):
    """The :data:`~._kernel_records.EvalRules` of the kernel's ``Rules``, for ``p`` features."""
    lo_bits, hi_bits = feistel_params(p)
    return EvalRules(rules.n_candidates, rules.min_samples_leaf, rules.random_split,
                     rules.missing_bin, rules.tie_rtol, lo_bits, hi_bits)


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
def _split_chunk(ch, n_chunks, max_ns, codes, sparse, batch, weights, targets, edges, rules, out):
    """Split the nodes ``ch, ch + n_chunks, ...`` with scratch buffers of this chunk."""
    p = codes.shape[0]
    m = targets.shape[2]
    mp = ((m + 7) // 8) * 8
    n_bins = rules.missing_bin + 1
    n_slots = max(1, min(rules.n_candidates, p))
    identity = np.empty(max_ns, dtype=np.int32)
    for a in range(max_ns):
        identity[a] = a
    # each row's position in the current node, -1 outside it (read with the column lists)
    slot_of_row = np.full(targets.shape[0] if sparse.col_ptr.shape[0] > 0 else 1, -1,
                          dtype=np.int32)
    # a node's codes of one feature, gathered from its column when there are no dense codes
    node_codes = np.empty((1, max_ns if codes.shape[1] == 0 else 1), dtype=np.uint8)
    data, scratch = _eval_scratch(max_ns, mp, n_bins, n_slots, 0)
    _split_chunk_nodes(
        ch, n_chunks, codes, sparse, batch, weights, targets, edges, rules, out,
        data, scratch,
        NodeColumns(
            sparse.subtracted_bin, sparse.listed, sparse.col_ptr,
            sparse.col_rows, sparse.col_codes, slot_of_row, node_codes, identity,
            # no stored entries by row: nodes walk the visiting order
            np.empty(0, dtype=np.int64), np.empty(0, dtype=np.int32),
            np.empty(0, dtype=np.int32),
        ),
    )


@njit(cache=True)
def _split_chunk_nodes(ch, n_chunks, codes, sparse, batch, weights, targets, edges, rules, out,
                       data, scratch, columns):
    """The loop of :func:`_split_chunk` on views of its arrays that hold no reference.

    ``data`` holds the gathered weights, weighted targets and targets of a node,
    ``scratch`` the other buffers of :func:`_eval_node` (:func:`_eval_scratch`),
    ``columns`` its :data:`~._kernel_records.NodeColumns`.
    """
    codes, weights, targets = borrow_all((codes, weights, targets))
    sample_indices, node_ranges, node_tree, node_seed, _ = borrow_all(batch)
    edges = borrow_all(edges)
    out = borrow_all(out)
    w, wy, y = borrow_all(data)
    scratch = borrow_all(scratch)
    columns = borrow_all(columns)
    slot_of_row = columns.slot_of_row
    identity = columns.identity
    n_nodes = node_ranges.shape[0]
    m = targets.shape[2]
    eval_rules = _eval_rules(rules, codes.shape[0])
    node_data = NodeData(codes, sample_indices, w, wy, y, identity, m)
    zero = np.int64(0)
    # no bit sets of codes (those of the subtree kernel's blocks)
    no_bits = NodeBits(np.empty((0, 0), dtype=np.uint64), np.empty(0, dtype=np.bool_),
                       np.empty(0, dtype=np.uint64), zero, zero - 1)
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
        use_columns = _claim_slots(sample_indices, start, ns, columns.col_ptr.shape[0] > 0,
                                   slot_of_row)
        f, b, ml, g = _eval_node(node_data, NodeAt(start, ns, zero, node_seed[i], use_columns),
                                 columns, edges, eval_rules, scratch, no_bits)
        if use_columns:
            _release_slots(sample_indices, start, ns, slot_of_row)
        out.feature[i] = f
        out.bin[i] = b
        out.missing_left[i] = ml
        out.gain[i] = g


@njit(parallel=True, cache=True)
def split_small_nodes(codes, sparse, batch, weights, targets, edges, rules, out):
    """``tree_split_small`` on the records of :mod:`._kernel_records`: ``sparse`` (a
    ``Sparse``), ``batch`` (a ``Batch``), ``edges`` (an ``Edges``), ``rules`` (a
    ``Rules``), ``out`` (a ``SplitOut``)."""
    node_ranges = batch.node_ranges
    n_nodes = node_ranges.shape[0]
    max_ns = max(np.int64(1), np.int64(np.max(node_ranges[:, 1] - node_ranges[:, 0])))
    # nodes are dealt to a few chunks (strided, for balance); each chunk owns scratch
    # buffers, so nothing is allocated per node
    n_chunks = min(n_nodes, N_CHUNKS)
    for ch in prange(n_chunks):
        _split_chunk(np.int64(ch), n_chunks, max_ns, codes, sparse, batch, weights, targets,
                     edges, rules, out)


def launch(codes, batch, weights, targets, edges, rules, sparse, out_feature, out_bin,
           out_missing_left, out_gain):
    """``tree_split_small`` on the CPU: :func:`split_small_nodes` on the kernel records.

    ``batch``, ``edges``, ``rules`` and ``sparse`` are the typed
    :class:`~gpurpo.tree._records.NodeBatch`, ``EdgeTable``, ``SplitRules`` and
    ``SparseColumns`` of the contract (:mod:`gpurpo.tree.kernels`). Inside
    :func:`gpurpo.backend.serial_cpu_kernels` the kernel's single-threaded twin runs.
    """
    kernel_batch, kernel_edges, kernel_rules, kernel_sparse = kernel_records(
        batch, edges, rules, sparse)
    cpu_helper(split_small_nodes)(
        codes, kernel_sparse, kernel_batch, weights, targets, kernel_edges, kernel_rules,
        SplitOut(out_feature, out_bin, out_missing_left, out_gain),
    )
