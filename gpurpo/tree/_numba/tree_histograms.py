"""numba twin of ``kernels/tree_histograms.cu``: per-node, per-feature histograms.

Each frontier node's weights and weighted (projected) targets are gathered once in
sample order, then added into the bins of each of its candidate features, from dense
feature-major codes or from a sparse X's stored-entry columns.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from gpurpo.tree._borrow import borrow_all
from gpurpo.tree._numba._node_codes import _node_codes_of
from gpurpo.tree._numba._shared import N_CHUNKS
from gpurpo.tree._numba.tree_partition import stored_code
from gpurpo.tree.binning._edge_lookup import _zero_code


@njit(cache=True)
def _clear_accumulator(acc, n_channels):
    """Zero the first ``n_channels`` columns of a (node, feature) task's accumulator."""
    for b in range(acc.shape[0]):
        for c in range(n_channels):
            acc[b, c] = 0.0


@njit(cache=True)
def _store_accumulator(acc, out, i, j, n_channels):
    """``out[i, j] = acc`` (float64 sums rounded to the float32 cells), ``n_channels`` columns."""
    for b in range(acc.shape[0]):
        for c in range(n_channels):
            out[i, j, b, c] = acc[b, c]


# bytes of the weighted target rows the host histograms gather for a group of nodes
HISTOGRAM_ROWS_BYTES = 1 << 26


@njit(cache=True)
def _gather_weighted_rows(sample_indices, start, stop, t, weights, targets, rows, r0):
    """``rows[r0 + e - start] = (w, w y_1, ..., w y_m)`` of the samples
    ``sample_indices[start:stop]`` of tree ``t`` (``w`` in float64)."""
    m = targets.shape[2]
    for e in range(start, stop):
        s = sample_indices[e]
        w = np.float64(weights[t, s])
        r = r0 + e - start
        rows[r, 0] = w
        for c in range(m):
            rows[r, 1 + c] = w * targets[s, t, c]


@njit(cache=True)
def _node_feature_histogram(row, sample_indices, e0, e1, rows, r0, n_channels, with_count, acc):
    """Adds the samples ``sample_indices[e0:e1]`` to ``acc`` by their code in ``row``: their
    gathered weighted rows (:func:`_gather_weighted_rows`, the node's first at
    ``rows[r0]``) to channels 0 .. m, and one to the last channel (the count) when
    ``with_count``; ``acc`` has ``n_channels`` columns."""
    width = rows.shape[1]
    for e in range(e0, e1):
        b = row[sample_indices[e]]
        r = r0 + e - e0
        for c in range(width):
            acc[b, c] += rows[r, c]
        if with_count:
            acc[b, n_channels - 1] += 1.0


@njit(cache=True)
def _histogram_chunk(ch, n_chunks, codes, sample_indices, node_ranges, node_features, i0, i1,
                     rows, row_start, with_count, acc, out, col_ptr, col_rows, col_codes,
                     edge_values, edge_ptr, row_buf, pos_buf, stored):
    """The (node, feature) tasks ``ch, ch + n_chunks, ...`` of the nodes ``i0 .. i1 - 1`` of
    :func:`histograms_in_groups`, from their gathered weighted rows (node ``i``'s first at
    ``rows[row_start[i - i0]]``).

    On views of its arrays that hold no reference (see :mod:`gpurpo.tree._borrow`);
    ``acc`` is the chunk's accumulator, zeroed for each task. ``codes`` of shape
    ``(p, 0)`` (a sparse X without dense codes, :func:`histograms_columns`): the
    node's codes of the feature are put at their samples in ``row_buf``
    (length n) and summed as a row of the codes, the same sums: the column is
    written over the node's code of 0.0 when it holds at most 8 entries per
    sample of the node, else each sample is looked up in it
    (:func:`_node_codes_of`, into ``pos_buf``). With ``stored`` (a
    :class:`~gpurpo.tree.binning.SparseCodes`' rows, ``(row_ptr, row_features,
    row_codes, zero_code)``, ``row_ptr`` of length n + 1) each sample's code is
    looked up in its row instead (:func:`stored_code`), as the CUDA kernel's
    fallback does.
    """
    (
        codes, sample_indices, node_ranges, node_features, rows, row_start, acc, out, col_ptr,
        col_rows, col_codes, edge_values, edge_ptr, row_buf, pos_buf,
    ) = borrow_all((
        codes, sample_indices, node_ranges, node_features, rows, row_start, acc, out, col_ptr,
        col_rows, col_codes, edge_values, edge_ptr, row_buf, pos_buf,
    ))
    k = node_features.shape[1]
    n_channels = out.shape[3]
    gather = codes.shape[1] == 0
    row_ptr, row_features, row_codes, zero_code = stored
    by_rows = gather and row_ptr.shape[0] > 1
    for task in range(ch, (i1 - i0) * k, n_chunks):
        i = i0 + task // k
        j = task - (i - i0) * k
        f = node_features[i, j]
        _clear_accumulator(acc, n_channels)
        if f < 0:  # an unused slot: zeros
            _store_accumulator(acc, out, i, j, n_channels)
            continue
        start = node_ranges[i, 0]
        stop = node_ranges[i, 1]
        row = row_buf
        if by_rows:
            for a in range(start, stop):
                s = sample_indices[a]
                row_buf[s] = stored_code(row_ptr, row_features, row_codes, zero_code, s, f)
        elif gather and col_ptr[f + 1] - col_ptr[f] <= 8 * (stop - start):
            # the node's samples at the code of 0.0, then the whole column: its rows
            # outside the node are written too but never read for this task
            zero = _zero_code(edge_values, edge_ptr, f)
            for a in range(start, stop):
                row_buf[sample_indices[a]] = zero
            for e in range(col_ptr[f], col_ptr[f + 1]):
                row_buf[col_rows[e]] = col_codes[e]
        elif gather:
            _node_codes_of(f, sample_indices, start, stop - start, edge_values, edge_ptr, False,
                           col_ptr, col_rows, col_codes, col_rows, pos_buf)
            for a in range(stop - start):
                row_buf[sample_indices[start + a]] = pos_buf[a]
        else:
            row = codes[f]
        _node_feature_histogram(row, sample_indices, start, stop, rows, row_start[i - i0],
                                n_channels, with_count, acc)
        _store_accumulator(acc, out, i, j, n_channels)


@njit(parallel=True, cache=True)
def _histograms_grouped(codes, col_ptr, col_rows, col_codes, edge_values, edge_ptr,
                        sample_indices, node_ranges, node_features, node_tree, weights, targets,
                        out, rows_bytes, stored):
    """``tree_histograms`` on the host from the dense ``codes``, or from a sparse X's
    stored-entry columns (``codes`` of shape ``(p, 0)``) or rows (``stored``, see
    :func:`_histogram_chunk`), by groups of nodes whose gathered rows fit
    ``rows_bytes`` (at least one node a group).

    Each node's weights and weighted targets are gathered once, in the order
    of its samples (:func:`_gather_weighted_rows`, float64 rows of ``m + 1``
    values), and its ``k`` features add those rows by their codes, so the
    products are formed once per node, not once per feature, and the targets
    are read in sample order, not at the samples' scattered rows.
    """
    n_nodes = node_features.shape[0]
    k = node_features.shape[1]
    n_bins = out.shape[2]
    n_channels = out.shape[3]
    m = targets.shape[2]
    with_count = n_channels == m + 2
    gather = codes.shape[1] == 0
    budget = max(1, rows_bytes // (8 * (m + 1)))
    i0 = 0
    while i0 < n_nodes:
        i1 = i0 + 1
        total = node_ranges[i0, 1] - node_ranges[i0, 0]
        max_ns = total
        while i1 < n_nodes and total + node_ranges[i1, 1] - node_ranges[i1, 0] <= budget:
            total += node_ranges[i1, 1] - node_ranges[i1, 0]
            max_ns = max(max_ns, node_ranges[i1, 1] - node_ranges[i1, 0])
            i1 += 1
        row_start = np.zeros(i1 - i0 + 1, dtype=np.int64)
        for i in range(i0, i1):
            row_start[i - i0 + 1] = row_start[i - i0] + node_ranges[i, 1] - node_ranges[i, 0]
        rows = np.empty((total, m + 1), dtype=np.float64)
        for i in prange(i0, i1):
            _gather_weighted_rows(sample_indices, node_ranges[i, 0], node_ranges[i, 1],
                                  node_tree[i], weights, targets, rows, row_start[i - i0])
        n_chunks = min((i1 - i0) * k, N_CHUNKS)
        for ch in prange(n_chunks):
            _histogram_chunk(ch, n_chunks, codes, sample_indices, node_ranges, node_features,
                             i0, i1, rows, row_start, with_count,
                             np.empty((n_bins, n_channels), dtype=np.float64), out, col_ptr,
                             col_rows, col_codes, edge_values, edge_ptr,
                             np.empty(targets.shape[0] if gather else 1, dtype=np.uint8),
                             np.empty(max(max_ns, 1) if gather else 1, dtype=np.uint8),
                             stored)
        i0 = i1


def _no_rows():
    """``stored`` of :func:`_histograms_grouped` when there are no stored rows."""
    return (np.zeros(1, dtype=np.int64), np.empty(0, dtype=np.int32),
            np.empty(0, dtype=np.uint8), np.empty(0, dtype=np.uint8))


def histograms_in_groups(codes, sample_indices, node_ranges, node_features, node_tree, weights,
                         targets, out, rows_bytes):
    """``tree_histograms`` on the host from dense codes, by groups of nodes whose gathered
    rows fit ``rows_bytes`` (:func:`_histograms_grouped`)."""
    # no stored-entry columns: arrays of their types, never read
    no_ptr = np.zeros(1, dtype=np.int64)
    _histograms_grouped(codes, no_ptr, np.empty(0, dtype=np.int32), np.empty(0, dtype=np.uint8),
                        np.empty(0, dtype=np.float64), no_ptr, sample_indices, node_ranges,
                        node_features, node_tree, weights, targets, out, rows_bytes, _no_rows())


def histograms(codes, batch, node_features, weights, targets, out, rows=None):
    """``tree_histograms`` on the host (see kernels.py): :func:`histograms_in_groups` with
    groups of ``HISTOGRAM_ROWS_BYTES``, on the arrays of ``batch`` (a typed
    :class:`~gpurpo.tree._records.NodeBatch`); with ``codes`` of shape (p, 0), from
    ``rows``, the ``row_ptr, row_features, row_codes, zero_code`` of a sparse X's
    stored rows."""
    if codes.shape[1] != 0:
        histograms_in_groups(codes, batch.sample_indices, batch.node_ranges, node_features,
                             batch.node_tree, weights, targets, out, HISTOGRAM_ROWS_BYTES)
        return
    if rows is None or rows[0].shape[0] != weights.shape[1] + 1:
        raise ValueError("codes of shape (p, 0) need rows: the stored rows of the sparse X "
                         f"of {weights.shape[1]} samples")
    no_ptr = np.zeros(1, dtype=np.int64)
    _histograms_grouped(codes, no_ptr, np.empty(0, dtype=np.int32), np.empty(0, dtype=np.uint8),
                        np.empty(0, dtype=np.float64), no_ptr, batch.sample_indices,
                        batch.node_ranges, node_features, batch.node_tree, weights, targets, out,
                        HISTOGRAM_ROWS_BYTES, tuple(rows))


def histograms_columns(col_ptr, col_rows, col_codes, edges, batch, node_features, weights,
                       targets, out):
    """:func:`histograms` of a sparse X held without its dense codes: each (node,
    feature) reads the feature's codes from its stored-entry column, decoded with
    ``edges`` (a typed :class:`~gpurpo.tree._records.EdgeTable`). Same sums."""
    edge_ptr = edges.edge_ptr
    no_codes = np.empty((edge_ptr.shape[0] - 1, 0), dtype=np.uint8)
    _histograms_grouped(no_codes, col_ptr, col_rows, col_codes, edges.edge_values, edge_ptr,
                        batch.sample_indices, batch.node_ranges, node_features, batch.node_tree,
                        weights, targets, out, HISTOGRAM_ROWS_BYTES, _no_rows())
