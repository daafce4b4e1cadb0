"""numba twin of ``kernels/tree_partition.cu``: stable partition of the nodes' samples.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from gpurpo.backend import cpu_helper
from gpurpo.tree._numba._node_codes import _node_codes_of
from gpurpo.tree._numba._shared import SERIAL_SAMPLES, total_samples
from gpurpo.tree._numba.tree_grow_subtrees import _partition_positions
from gpurpo.tree.binning._edge_lookup import _count_below


@njit(inline="always", cache=True)
def stored_code(row_ptr, row_features, row_codes, zero_code, s, f):
    """The code of feature ``f`` of row ``s`` of a sparse X held as its stored rows
    (``SparseCodes``): binary search among the row's features, else ``zero_code[f]``."""
    lo = row_ptr[s]
    hi = row_ptr[s + 1]
    at = lo + _count_below(row_features[lo:], hi - lo, f)
    if at < hi and row_features[at] == f:
        return row_codes[at]
    return zero_code[f]


@njit(inline="always", cache=True)
def _partition_node(codes, row_ptr, row_features, row_codes, zero_code, sample_indices, start,
                    stop, f, b, miss_left, missing_bin):
    """Reorders ``sample_indices[start:stop]`` stably, those going left first (code
    ``<= b``, or ``missing_bin`` when ``miss_left``); their codes of feature ``f`` from
    the dense ``codes``, or with ``codes`` of shape (p, 0) looked up in the stored rows
    (:func:`stored_code`). Returns the number going left."""
    by_rows = codes.shape[1] == 0
    right = np.empty(stop - start, dtype=sample_indices.dtype)
    w = start
    r = 0
    for a in range(start, stop):
        s = sample_indices[a]
        if by_rows:
            code = stored_code(row_ptr, row_features, row_codes, zero_code, s, f)
        else:
            code = codes[f, s]
        if (miss_left if code == missing_bin else code <= b):
            sample_indices[w] = s  # w <= a: not read again
            w += 1
        else:
            right[r] = s
            r += 1
    for j in range(r):
        sample_indices[w + j] = right[j]
    return w - start


@njit(parallel=True, cache=True)
def partition(codes, sample_indices, node_ranges, node_feature, node_bin, node_missing_left,
              missing_bin, out_n_left):
    """``tree_partition`` of dense ``codes`` (see kernels.py): each splitting node's
    samples reordered stably, left-going first; a node of feature < 0 keeps them."""
    no_ptr = np.zeros(1, dtype=np.int64)
    no_features = np.empty(0, dtype=np.int32)
    no_codes = np.empty(0, dtype=np.uint8)
    for i in prange(node_ranges.shape[0]):
        f = node_feature[i]
        out_n_left[i] = 0 if f < 0 else _partition_node(
            codes, no_ptr, no_features, no_codes, no_codes, sample_indices, node_ranges[i, 0],
            node_ranges[i, 1], f, node_bin[i], node_missing_left[i] != 0, missing_bin)


@njit(parallel=True, cache=True)
def partition_rows(row_ptr, row_features, row_codes, zero_code, sample_indices, node_ranges,
                   node_feature, node_bin, node_missing_left, missing_bin, out_n_left):
    """:func:`partition` of a sparse X held as its stored rows: each sample's code of the
    node's feature is looked up in its row (:func:`stored_code`), as the CUDA kernel
    does. Same result."""
    no_codes = np.empty((zero_code.shape[0], 0), dtype=np.uint8)
    for i in prange(node_ranges.shape[0]):
        f = node_feature[i]
        out_n_left[i] = 0 if f < 0 else _partition_node(
            no_codes, row_ptr, row_features, row_codes, zero_code, sample_indices,
            node_ranges[i, 0], node_ranges[i, 1], f, node_bin[i], node_missing_left[i] != 0,
            missing_bin)


@njit(parallel=True, cache=True)
def partition_columns(col_ptr, col_rows, col_codes, edge_values, edge_ptr, sample_indices,
                      node_ranges, node_feature, node_bin, node_missing_left, missing_bin,
                      out_n_left):
    """:func:`partition` of a sparse X held without its dense codes: each sample's code
    of the node's feature is looked up in the feature's stored-entry column (binary
    search; rows absent from it take the feature's code of 0.0). Same result."""
    for i in prange(node_ranges.shape[0]):
        start = node_ranges[i, 0]
        ns = node_ranges[i, 1] - start
        f = node_feature[i]
        if f < 0:  # not splitting: its samples stay
            out_n_left[i] = 0
            continue
        codes = np.empty((1, ns), dtype=np.uint8)
        _node_codes_of(f, sample_indices, start, ns, edge_values, edge_ptr, False, col_ptr,
                       col_rows, col_codes, col_rows, codes[0])
        samples = sample_indices[start : start + ns]
        out_n_left[i] = _partition_positions(
            codes, np.arange(ns).astype(np.int32), samples, np.empty_like(samples), 0, ns, 0,
            node_bin[i], node_missing_left[i], missing_bin)


def launch(codes, sample_indices, node_ranges, node_feature, node_bin, node_missing_left,
           missing_bin, out_n_left):
    """``tree_partition`` on the CPU: :func:`partition`, on one thread for a call of fewer
    than ``SERIAL_SAMPLES`` samples (:func:`gpurpo.backend.cpu_helper`)."""
    cpu_helper(partition, small=total_samples(node_ranges) < SERIAL_SAMPLES)(
        codes, sample_indices, node_ranges, node_feature, node_bin, node_missing_left,
        missing_bin, out_n_left)


def launch_columns(col_ptr, col_rows, col_codes, edge_values, edge_ptr, sample_indices,
                   node_ranges, node_feature, node_bin, node_missing_left, missing_bin,
                   out_n_left):
    """:func:`partition_columns`, on one thread inside
    :func:`gpurpo.backend.serial_cpu_kernels` or for a call of fewer than
    ``SERIAL_SAMPLES`` samples."""
    cpu_helper(partition_columns, small=total_samples(node_ranges) < SERIAL_SAMPLES)(
        col_ptr, col_rows, col_codes, edge_values, edge_ptr, sample_indices, node_ranges,
        node_feature, node_bin, node_missing_left, missing_bin, out_n_left)
