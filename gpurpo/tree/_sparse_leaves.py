"""Sparse leaf values on the host: one numba pass per tree instead of a SciPy product.

The sparse leaf values of a tree are ``A^T diag(s) Y``, with ``A`` the (n x L)
sample-leaf indicator and ``s_i = w_i / W_leaf(i)`` (:mod:`gpurpo.tree.leaves`).
Through SciPy this takes an indicator matrix, a sparse product, a
duplicate-summing pass and an index sort per tree, then a ``vstack`` of the
trees of a batch. Here Gustavson's row-by-row product (Gustavson 1978, "Two
fast algorithms for sparse matrices: multiplication and permuted
transposition") runs over the samples grouped by leaf, with a dense
accumulator of ``d`` entries: for each leaf, the rows of its samples are
added in increasing sample order (the order of SciPy's product, so the same
sums bit for bit), and the labels touched are emitted sorted, exact zeros
dropped (as SciPy's product does); each leaf's sums are then multiplied by
one over its weight, as they are emitted.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from gpurpo.tree._numba._shared import _prefetch

__all__ = ["leaf_values_csr", "stack_csr_arrays"]

# Samples ahead (in leaf order) whose rows leaf_values_csr prefetches.
_PREFETCH_SAMPLES = 8


@njit(cache=True, nogil=True)
def _sort_small(a, n):
    # insertion sort of a[:n], for the few labels of a small leaf
    for i in range(1, n):
        v = a[i]
        j = i - 1
        while j >= 0 and a[j] > v:
            a[j + 1] = a[j]
            j -= 1
        a[j + 1] = v


@njit(cache=True, nogil=True)
def _prefetch_rows(members, q0, q1, indptr, indices, data):
    """Hint the loads of the rows of ``members[q0:q1]``: their first indices and values,
    and their last values (a row of a few labels spans one or two lines of each)."""
    for q in range(q0, q1):
        i = members[q]
        r0 = indptr[i]
        r1 = indptr[i + 1]
        if r1 > r0:
            _prefetch(indices, r0)
            _prefetch(data, r0)
            _prefetch(data, r1 - 1)


@njit(cache=True, nogil=True)
def leaf_values_csr(leaf_of_sample, scale, leaf_scale, indptr, indices, data, n_leaves,
                    n_outputs):
    """CSR arrays of ``diag(leaf_scale) A^T diag(scale) Y`` for ``Y`` in CSR (``indptr``,
    ``indices``, ``data``): each leaf's sums first, then their product by its factor.

    A leaf of one sample whose row's column indices are increasing and distinct
    (canonical) is that row scaled, copied in order without the accumulator (the
    same values: each sum is ``0.0 + s * y``); fully grown trees are mostly such
    leaves. The leaves are visited in order, their samples' rows gathered from
    all over ``Y``: the rows of the samples ``_PREFETCH_SAMPLES`` ahead are
    prefetched (their row pointers twice as far ahead), so that their loads
    overlap instead of waiting one after the other on a ``Y`` out of the cache.

    Parameters
    ----------
    leaf_of_sample : int array (n,)
        Leaf of each sample, -1 when the sample is not in the tree.
    scale : float64 array (n,)
        Factor of each sample's row (its weight).
    leaf_scale : float64 array (n_leaves,)
        Factor of each leaf's sums (one over the leaf's weight).
    indptr, indices, data : CSR arrays of Y (n, n_outputs)
    n_leaves, n_outputs : int

    Returns
    -------
    (out_indptr int64 (n_leaves + 1,), out_indices int32, out_data float64): row ``l``
    holds the nonzero values of leaf ``l``, its column indices increasing.
    """
    n = leaf_of_sample.shape[0]
    # samples grouped by leaf, increasing within each leaf (a stable counting sort)
    first = np.zeros(n_leaves + 1, dtype=np.int64)
    for i in range(n):
        leaf = leaf_of_sample[i]
        if leaf >= 0:
            first[leaf + 1] += 1
    for leaf in range(n_leaves):
        first[leaf + 1] += first[leaf]
    n_members = first[n_leaves]
    members = np.empty(n_members, dtype=np.int64)
    fill = first[:n_leaves].copy()
    # and a bound on the output size: every label of every member
    bound = 0
    for i in range(n):
        leaf = leaf_of_sample[i]
        if leaf >= 0:
            members[fill[leaf]] = i
            fill[leaf] += 1
            bound += indptr[i + 1] - indptr[i]
    out_indptr = np.zeros(n_leaves + 1, dtype=np.int64)
    out_indices = np.empty(bound, dtype=np.int32)
    out_data = np.empty(bound, dtype=np.float64)
    sums = np.zeros(n_outputs, dtype=np.float64)
    seen = np.zeros(n_outputs, dtype=np.bool_)
    touched = np.empty(n_outputs, dtype=np.int64)
    nnz = 0
    ahead = 0  # members whose rows are prefetched
    ahead_ptr = 0  # members whose row pointers are
    for leaf in range(n_leaves):
        q0 = first[leaf]
        q1 = first[leaf + 1]
        stop = min(n_members, q1 + 2 * _PREFETCH_SAMPLES)
        for q in range(ahead_ptr, stop):
            _prefetch(indptr, members[q])
        ahead_ptr = max(ahead_ptr, stop)
        stop = min(n_members, q1 + _PREFETCH_SAMPLES)
        _prefetch_rows(members, ahead, stop, indptr, indices, data)
        ahead = max(ahead, stop)
        factor = leaf_scale[leaf]
        if q1 - q0 == 1:
            i = members[q0]
            s = scale[i]
            start = nnz
            last = -1
            canonical = True
            for r in range(indptr[i], indptr[i + 1]):
                k = indices[r]
                if k <= last:
                    canonical = False
                    break
                last = k
                v = s * np.float64(data[r])
                if v != 0.0:
                    out_indices[nnz] = k
                    out_data[nnz] = v * factor
                    nnz += 1
            if canonical:
                out_indptr[leaf + 1] = nnz
                continue
            nnz = start  # unsorted or repeated labels: summed below
        n_touched = 0
        for q in range(q0, q1):
            i = members[q]
            s = scale[i]
            for r in range(indptr[i], indptr[i + 1]):
                k = indices[r]
                if not seen[k]:
                    seen[k] = True
                    touched[n_touched] = k
                    n_touched += 1
                sums[k] += s * np.float64(data[r])
        if n_touched <= 32:
            _sort_small(touched, n_touched)
        else:
            touched[:n_touched].sort()
        for t in range(n_touched):
            k = touched[t]
            if sums[k] != 0.0:
                out_indices[nnz] = k
                out_data[nnz] = sums[k] * factor
                nnz += 1
            sums[k] = 0.0
            seen[k] = False
        out_indptr[leaf + 1] = nnz
    if nnz == bound:  # no zero dropped, no label shared: the arrays as they are, uncopied
        return out_indptr, out_indices, out_data
    return out_indptr, out_indices[:nnz].copy(), out_data[:nnz].copy()


def stack_csr_arrays(parts: list) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(data, indices, indptr) of the SciPy CSR matrices ``parts`` stacked by rows."""
    offsets = np.cumsum([0] + [int(p.indptr[-1]) for p in parts])
    indptr = np.concatenate(
        [np.zeros(1, dtype=np.int64)]
        + [p.indptr[1:].astype(np.int64) + off for p, off in zip(parts, offsets[:-1])]
    )
    indices = np.concatenate([p.indices for p in parts])
    data = np.concatenate([p.data for p in parts])
    return data, indices, indptr
