"""numba twin of ``kernels/tree_partition.cu``: stable partition of the nodes' samples.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from gpurpo.backend import cpu_helper
from gpurpo.tree._numba._node_codes import _node_codes_of
from gpurpo.tree._numba._shared import SERIAL_SAMPLES, total_samples
from gpurpo.tree._numba.tree_grow_subtrees import _partition_positions


@njit(parallel=True, cache=True)
def partition(codes, sample_indices, node_ranges, node_feature, node_bin, node_missing_left,
              missing_bin, out_n_left):
    for i in prange(node_ranges.shape[0]):
        start = node_ranges[i, 0]
        stop = node_ranges[i, 1]
        f = node_feature[i]
        if f < 0:  # not splitting: its samples stay
            out_n_left[i] = 0
            continue
        b = node_bin[i]
        miss_left = node_missing_left[i] != 0
        right = np.empty(stop - start, dtype=sample_indices.dtype)
        w = start
        r = 0
        for a in range(start, stop):
            s = sample_indices[a]
            code = codes[f, s]
            if (miss_left if code == missing_bin else code <= b):
                sample_indices[w] = s  # w <= a: not read again
                w += 1
            else:
                right[r] = s
                r += 1
        for j in range(r):
            sample_indices[w + j] = right[j]
        out_n_left[i] = w - start


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
