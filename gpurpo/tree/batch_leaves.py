"""Leaf values of a whole batch of trees at once, on a CUDA backend.

The leaf values of a tree grown on projected outputs are the weighted means
of the original outputs of the samples in each leaf (Joly, Geurts & Wehenkel
2014, section 3.1): with ``A_t`` the (n x L_t) sample-leaf indicator of tree
``t`` and ``W`` its leaf weights, ``V_t = diag(1/W) A_t^T diag(w_t) Y``.
:func:`gpurpo.tree.leaves.leaf_values` computes one tree at a time on the
CPU (numba kernels that visit the samples in increasing order). Here all
trees of a batch are labelled together, stacked as the forest stores them
(tree ``t``'s leaf ``l`` is row ``offsets[t] + l``), with a number of
launches that does not depend on the number of trees, and with the CPU's
sums bit for bit: every sum starts from 0.0 and adds its samples in sample
order (no atomics, whose order changes from run to run).

Sparse ``Y`` (:func:`stacked_leaf_values_csr`):

1. every stored entry ``y_ij`` of every sample ``i`` in every tree ``t`` becomes
   one entry keyed ``(row of i's leaf in t) * d + j`` with value ``w_ti y_ij``,
   laid out tree by tree and sample by sample;
2. a stable sort by key groups the entries of each (leaf, label) with their
   samples still in increasing order;
3. ``tree_segment_sums`` adds each group from 0.0 in that order: Gustavson's
   accumulation order, so the sums equal the CPU's bit for bit; the leaf
   weights ``W`` are summed the same way (sample order, as ``numpy.bincount``);
4. exact zero sums are dropped (as the CPU does) and each row is scaled by
   ``1 / W`` of its leaf.

The entries of a batch are processed in groups of trees of at most
``max_entries`` entries (the memory of the keys, values and sort).

Dense ``Y`` (:func:`stacked_leaf_values_dense`, :func:`ordered_leaf_sums`): a
stable sort of the (tree, sample) pairs by their leaf's row lists every
leaf's samples in increasing order; ``tree_segment_row_sums`` then sums each
(leaf, output) over them, one thread each, and ``tree_segment_sums`` the leaf
weights.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from gpurpo.backend import Backend, bincount, segment_positions
from gpurpo.tree import kernels

__all__ = ["stacked_leaf_values_csr", "stacked_leaf_values_dense", "ordered_leaf_sums",
           "ordered_leaf_sums_csr", "inverse_leaf_weights", "require_index_room",
           "MAX_ENTRIES"]

#: Entries (stored outputs of in-tree samples) labelled in one group of trees: about
#: 40 bytes each in keys, values and the sort's scratch.
MAX_ENTRIES = 1 << 26


def _check(Y: Any, leaf_of_sample: Any, weights: Any, n_leaves: Any, backend: Backend,
           sparse: bool = True) -> np.ndarray:
    if sparse and not backend.issparse(Y):
        raise TypeError(f"Y must be a sparse matrix, got {type(Y).__name__}")
    if not sparse and (backend.issparse(Y) or getattr(Y, "ndim", 0) != 2):
        raise TypeError(f"Y must be a dense 2-D array, got {type(Y).__name__} of "
                        f"{getattr(Y, 'ndim', '?')} dimensions")
    if leaf_of_sample.ndim != 2 or leaf_of_sample.shape[1] != Y.shape[0]:
        raise ValueError(
            f"leaf_of_sample must have shape (n_trees, n_samples={Y.shape[0]}), "
            f"got {tuple(leaf_of_sample.shape)}"
        )
    if weights is not None and tuple(weights.shape) != tuple(leaf_of_sample.shape):
        raise ValueError(
            f"weights must have the shape of leaf_of_sample {tuple(leaf_of_sample.shape)}, "
            f"got {tuple(weights.shape)}"
        )
    n_leaves = np.asarray(n_leaves, dtype=np.int64)
    if n_leaves.shape != (leaf_of_sample.shape[0],) or (n_leaves < 0).any():
        raise ValueError(
            f"n_leaves must hold one non-negative count per tree ({leaf_of_sample.shape[0]}), "
            f"got {n_leaves!r}"
        )
    return n_leaves


def _tree_groups(per_tree: np.ndarray, max_entries: int) -> list[tuple[int, int]]:
    """Consecutive tree ranges of at most ``max_entries`` entries (at least one tree)."""
    groups = []
    t0 = 0
    while t0 < len(per_tree):
        t1 = t0 + 1
        total = int(per_tree[t0])
        while t1 < len(per_tree) and total + int(per_tree[t1]) <= max_entries:
            total += int(per_tree[t1])
            t1 += 1
        groups.append((t0, t1))
        t0 = t1
    return groups


def _ordered_group_sums(backend: Backend, keys: Any, values: Any) -> tuple[Any, Any]:
    """Distinct ``keys`` (increasing) and the ordered sums of their ``values``.

    A stable sort keeps the entries of equal keys in their given order; each
    run is then summed from 0.0 in that order by ``tree_segment_sums``.
    """
    xp = backend.xp
    order = xp.argsort(keys, kind="stable")
    keys = keys[order]
    head = xp.empty(keys.shape[0], dtype=bool)
    head[:1] = True
    head[1:] = keys[1:] != keys[:-1]
    starts = xp.flatnonzero(head)
    bounds = xp.concatenate([starts, xp.asarray([keys.shape[0]], dtype=starts.dtype)])
    return keys[starts], kernels.segment_sums(backend, values[order], bounds)


def stacked_leaf_values_csr(
    Y: Any,
    leaf_of_sample: Any,
    weights: Any,
    n_leaves: Any,
    backend: Backend,
    max_entries: int = MAX_ENTRIES,
) -> tuple[Any, np.ndarray]:
    """Sparse leaf values of T trees, stacked (see the module docstring).

    Parameters
    ----------
    Y : CSR matrix (n, d), on ``backend``
        The original outputs.
    leaf_of_sample : int32 array (T, n), on ``backend``
        Leaf of every sample in every tree, -1 where the sample is not in it.
    weights : array (T, n) or None, on ``backend``
        Sample weights in each tree (None: ones).
    n_leaves : int sequence (T,)
        Number of leaves of each tree.
    backend : Backend
    max_entries : int
        Most entries labelled at once.

    Returns
    -------
    values : CSR matrix (sum of n_leaves, d), float64, on ``backend``
        Row ``offsets[t] + l`` holds the mean outputs of leaf ``l`` of tree
        ``t``, its exact zeros not stored, columns increasing.
    offsets : int64 ndarray (T,)
        Host row offset of each tree's first leaf.
    """
    xp = backend.xp
    keys, sums, leaf_weight, offsets = ordered_leaf_sums_csr(
        Y, leaf_of_sample, weights, n_leaves, backend, max_entries)
    keep = sums != 0
    keys, sums = keys[keep], sums[keep]
    d = int(Y.shape[1])
    n_rows = int(leaf_weight.shape[0])
    entry_row = keys // d
    inv = inverse_leaf_weights(xp, leaf_weight)
    out_indptr = xp.zeros(n_rows + 1, dtype=xp.int64)
    out_indptr[1:] = xp.cumsum(bincount(xp, entry_row, n_rows))
    index_type = xp.int32 if max(n_rows, d, int(keys.shape[0])) < 2**31 else xp.int64
    values = backend.sparse.csr_matrix(
        (sums * inv[entry_row], (keys % d).astype(index_type), out_indptr.astype(index_type)),
        shape=(n_rows, d),
    )
    require_index_room(values, int(keys.shape[0]), "the leaf values of a batch of trees")
    return values, offsets


def inverse_leaf_weights(xp: Any, leaf_weight: Any) -> Any:
    """``1 / W`` of every leaf, 0 for a leaf without weight: the factor by which its
    sums become its values (float64, as the CPU computes it)."""
    return xp.where(leaf_weight > 0, 1.0 / xp.where(leaf_weight > 0, leaf_weight, 1.0), 0.0)


def require_index_room(matrix: Any, nnz: int, what: str) -> None:
    """Raise unless the index arrays of the CSR ``matrix`` built from ``nnz`` stored
    entries can hold them: CuPy before 14.3 casts a CSR matrix's indices to int32,
    which wraps past 2**31 - 1 entries (SciPy and later CuPy keep int64)."""
    if nnz > np.iinfo(np.int32).max and np.dtype(matrix.indptr.dtype) == np.int32:
        raise ValueError(
            f"{what} hold {nnz:,} stored entries, more than the 2**31 - 1 that this "
            f"{type(matrix).__module__.split('.')[0]} CSR matrix indexes (int32 indices; "
            "CuPy keeps int64 ones from version 14.3): grow fewer trees per batch "
            "(batch_size), or install CuPy 14.3 or later")


def ordered_leaf_sums_csr(
    Y: Any,
    leaf_of_sample: Any,
    weights: Any,
    n_leaves: Any,
    backend: Backend,
    max_entries: int = MAX_ENTRIES,
) -> tuple[Any, Any, Any, np.ndarray]:
    """The sums of :func:`stacked_leaf_values_csr` before the leaves' division.

    Takes its arguments. Returns the keys ``row * d + label`` (int64, increasing)
    of the (stacked leaf row, label) pairs with a stored output, their sums
    ``sum_i w_ti y_ij`` in sample order (float64, exact zeros kept), the leaf
    weights ``W`` (float64 (R,)) and the host row offsets of the trees (T,).
    """
    xp = backend.xp
    n_leaves = _check(Y, leaf_of_sample, weights, n_leaves, backend)
    if not isinstance(max_entries, (int, np.integer)) or max_entries < 1:
        raise ValueError(f"max_entries must be a positive integer, got {max_entries!r}")
    n_trees, n = (int(s) for s in leaf_of_sample.shape)
    d = int(Y.shape[1])
    offsets = np.concatenate([[0], np.cumsum(n_leaves)[:-1]]).astype(np.int64)
    n_rows = int(n_leaves.sum())
    Yc = Y.tocsr()
    indptr = xp.asarray(Yc.indptr, dtype=xp.int64)
    indices = xp.asarray(Yc.indices, dtype=xp.int64)
    data = xp.asarray(Yc.data, dtype=xp.float64)
    row_nnz = indptr[1:] - indptr[:-1]
    leaf = xp.asarray(leaf_of_sample, dtype=xp.int64)
    inside = leaf >= 0
    # the stacked row of every (tree, sample): its leaf's row, -1 outside the tree
    rows = xp.where(inside, leaf + xp.asarray(offsets)[:, None], -1)
    w = xp.ones((n_trees, n), dtype=xp.float64) if weights is None else xp.asarray(weights, dtype=xp.float64)
    per_tree = backend.to_host(xp.where(inside, row_nnz[None, :], 0).sum(axis=1))
    out_keys, out_sums = [], []
    leaf_weight = xp.zeros(n_rows, dtype=xp.float64)
    for t0, t1 in _tree_groups(per_tree, int(max_entries)):
        flat = xp.flatnonzero(inside[t0:t1].ravel())
        pair_row = rows[t0:t1].ravel()[flat]
        pair_w = w[t0:t1].ravel()[flat]
        sample = flat % n
        # leaf weights, summed in sample order
        w_rows, w_sums = _ordered_group_sums(backend, pair_row, pair_w)
        leaf_weight[w_rows] = w_sums
        total = int(per_tree[t0:t1].sum())
        if total == 0:
            continue
        pos, pair = segment_positions(xp, indptr[sample], row_nnz[sample], total)
        keys = pair_row[pair] * d + indices[pos]
        keys, sums = _ordered_group_sums(backend, keys, pair_w[pair] * data[pos])
        out_keys.append(keys)
        out_sums.append(sums)
    keys = xp.concatenate(out_keys) if out_keys else xp.zeros(0, dtype=xp.int64)
    sums = xp.concatenate(out_sums) if out_sums else xp.zeros(0, dtype=xp.float64)
    return keys, sums, leaf_weight, offsets


def ordered_leaf_sums(
    Y: Any,
    leaf_of_sample: Any,
    weights: Any,
    n_leaves: Any,
    backend: Backend,
) -> tuple[Any, Any, np.ndarray]:
    """Leaf weights and weighted output sums of T trees, stacked, in the CPU's order.

    Every sum starts from 0.0 and adds the leaf's samples in increasing order:
    the sums of :func:`gpurpo.tree.kernels.accumulate_leaves_dense` and of
    ``numpy.bincount`` on the CPU, bit for bit, whatever the backend.

    Parameters
    ----------
    Y : array (n, d), on ``backend``
        The outputs, dense.
    leaf_of_sample : int array (T, n), on ``backend``
        Leaf of every sample in every tree, -1 where the sample is not in it.
    weights : array (T, n) or None, on ``backend``
        Sample weights in each tree (None: ones).
    n_leaves : int sequence (T,)
        Number of leaves of each tree.
    backend : Backend

    Returns
    -------
    leaf_weight : float64 (R,)
        ``W`` of every stacked leaf (R = sum of n_leaves).
    sums : float64 (R, d)
        ``sum_i w_ti y_i`` over the samples of every stacked leaf.
    offsets : int64 ndarray (T,)
        Host row offset of each tree's first leaf.
    """
    xp = backend.xp
    n_leaves = _check(Y, leaf_of_sample, weights, n_leaves, backend, sparse=False)
    n = int(leaf_of_sample.shape[1])
    offsets = np.concatenate([[0], np.cumsum(n_leaves)[:-1]]).astype(np.int64)
    n_rows = int(n_leaves.sum())
    # every (tree, sample) pair keyed by its leaf's stacked row (n_rows: outside the tree,
    # sorted last and in no segment); a stable sort keeps each leaf's samples in
    # increasing order, and needs no count of the pairs in the trees (no copy to the
    # host); 32-bit keys sort in half the passes of 64-bit ones
    key_type = xp.int32 if n_rows < 2**31 - 1 else xp.int64
    leaf = xp.asarray(leaf_of_sample)
    first_row = xp.asarray(offsets.astype(key_type))[:, None]
    keys = xp.where(leaf >= 0, leaf.astype(key_type, copy=False) + first_row,
                    key_type(n_rows)).ravel()
    pairs = xp.argsort(keys, kind="stable")
    bounds = xp.searchsorted(keys[pairs], xp.arange(n_rows + 1, dtype=key_type), side="left")
    w = (xp.ones(pairs.shape[0], dtype=xp.float64) if weights is None
         else xp.asarray(weights, dtype=xp.float64).ravel()[pairs])
    leaf_weight = kernels.segment_sums(backend, w, bounds)
    sums = kernels.segment_row_sums(backend, pairs % n, w, bounds, Y)
    return leaf_weight, sums, offsets


def stacked_leaf_values_dense(
    Y: Any,
    leaf_of_sample: Any,
    weights: Any,
    n_leaves: Any,
    backend: Backend,
) -> tuple[Any, np.ndarray]:
    """Dense leaf values of T trees, stacked (see the module docstring).

    Takes the arguments of :func:`ordered_leaf_sums`; returns the values,
    float64 (sum of n_leaves, d) on ``backend`` (row ``offsets[t] + l`` the
    mean outputs of leaf ``l`` of tree ``t``, 0 for a leaf without weight),
    and the host row offsets (T,): :func:`gpurpo.tree.leaves.leaf_values` of
    every tree on the CPU, stacked, bit for bit.
    """
    xp = backend.xp
    leaf_weight, sums, offsets = ordered_leaf_sums(Y, leaf_of_sample, weights, n_leaves, backend)
    inv = inverse_leaf_weights(xp, leaf_weight)
    return sums * inv[:, None], offsets
