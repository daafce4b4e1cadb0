"""numba twin of ``kernels/tree_node_stats.cu``: impurity flag and squared norm of each node.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from gpurpo.backend import cpu_helper


def launch(sample_indices, node_ranges, node_tree, weights, targets, node_done, out_impure,
           out_q):
    """``tree_node_stats`` on the CPU: :func:`node_stats` (``node_done``, the CUDA kernel's
    counters, is not read)."""
    cpu_helper(node_stats)(sample_indices, node_ranges, node_tree, weights, targets, out_impure,
                           out_q)


@njit(parallel=True, cache=True)
def node_stats(sample_indices, node_ranges, node_tree, weights, targets, out_impure, out_q):
    n_nodes = node_ranges.shape[0]
    m = targets.shape[2]
    for i in prange(n_nodes):
        start = node_ranges[i, 0]
        stop = node_ranges[i, 1]
        t = node_tree[i]
        s0 = sample_indices[start] if stop > start else 0
        impure = False
        q = 0.0
        for a in range(start, stop):
            s = sample_indices[a]
            sq = 0.0
            for c in range(m):
                v = targets[s, t, c]
                if v != targets[s0, t, c]:
                    impure = True
                v64 = np.float64(v)
                sq += v64 * v64
            q += np.float64(weights[t, s]) * sq
        out_impure[i] = 1 if impure else 0
        out_q[i] = q
