"""Per-leaf sums of the original outputs on the CPU (CUDA backends: the ordered segment
sums of ``kernels/tree_segment_sums.cu``, the same bits).
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange


@njit(parallel=True, cache=True)
def accumulate_leaves_dense(leaf_of_sample, weights, Y, out):
    n = Y.shape[0]
    d = Y.shape[1]
    block = 64
    n_blocks = (d + block - 1) // block
    for blk in prange(n_blocks):
        c0 = blk * block
        c1 = min(d, c0 + block)
        for i in range(n):
            leaf = leaf_of_sample[i]
            if leaf >= 0:
                w = np.float64(weights[i])
                for c in range(c0, c1):
                    out[leaf, c] += w * Y[i, c]


@njit(cache=True)
def accumulate_leaves_csr(leaf_of_sample, weights, indptr, indices, data, out):
    n = leaf_of_sample.shape[0]
    for i in range(n):
        leaf = leaf_of_sample[i]
        if leaf >= 0:
            w = np.float64(weights[i])
            for q in range(indptr[i], indptr[i + 1]):
                out[leaf, indices[q]] += w * data[q]
