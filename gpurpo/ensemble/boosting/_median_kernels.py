"""Weighted medians of the columns of an (n, d) matrix, by selection on the CPU.

The absolute-error loss of boosting takes a weighted median per output three
times: the initial estimate, the per-output step of every iteration
(:func:`gpurpo.ensemble.boosting.step_sizes.weighted_median_step`) and each leaf's value.
The array version (:func:`weighted_median_columns`, the CUDA backends' kernel)
argsorts the whole matrix, gathers it twice and takes a cumulative sum; on the
CPU that sort would dominate an absolute-error boosting run. A weighted median
needs no sort: a weighted quickselect (Hoare's FIND with the weights of the parts, e.g. Cormen et al.,
*Introduction to Algorithms*, problem 9-2) finds it in expected O(n) per
column.

Kernel contract (registered with :func:`gpurpo.backend.register_kernel`)
------------------------------------------------------------------------
``boost_weighted_median_columns(Z, W)``
    Z (n, d); W (n, d) or (n, 1), non-negative (a column broadcast to every
    output). Returns float64 (d,): for column ``j`` the smallest ``z`` among
    its values such that the weight of ``{i : z_ij <= z}`` is at least half
    the column's total weight; 0 for a column of zero total weight. The
    CUDA-side version is the array version on CuPy (a segmented sort), the CPU
    one the numba kernel below. Where the weight below a value is exactly half
    the total, the two may round their partial sums differently and pick the
    lower or the upper of two values that both minimise
    ``sum_i W_ij |z_ij - z|``.
``boost_weighted_median_step(R, H, w)``
    R (n, d); H (n, d) or (n, 1); w (n,). Returns float64 (d,): the
    weighted medians of the columns of ``R / H`` with weights ``w_i |H_ij|``
    (ratio 0 and weight 0 where ``H_ij = 0``), the exact absolute-error step
    of :func:`gpurpo.ensemble.boosting.step_sizes.weighted_median_step`.
``boost_weighted_median_leaves(R, w, leaf, n_leaves)``
    R (n, d); w (n,) non-negative; leaf int (n,) in ``[0, n_leaves)``. Returns
    float64 (n_leaves, d): for leaf ``l`` and column ``j`` the weighted median of
    ``R[i, j]`` over the rows ``i`` of leaf ``l`` with weights ``w[i]``, as
    ``boost_weighted_median_columns`` takes it of those rows (in increasing row
    order on the CPU, so that its selection gives the bits of that kernel); 0 for
    a leaf without weight. Every leaf in one call: the numba kernel deals
    (leaf, column block) tasks to threads; the array version sorts each column
    by (leaf, value) once and finds every leaf's median from one cumulative
    sum of the weights, which it rounds from the first row of the column, not of
    the leaf (the exact-half caveat above).
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

import numpy as np
from numba import njit, prange

from gpurpo.backend import Backend, bincount, register_kernel


@njit(inline="always", cache=True)
def _swap(values, weights, a, b):
    values[a], values[b] = values[b], values[a]
    weights[a], weights[b] = weights[b], weights[a]


@njit(cache=True)
def weighted_median_of(values, weights):
    """The lower weighted median of ``values`` (reordered in place with ``weights``).

    Three-way partitions around a pseudo-random pivot (a fixed linear
    congruential sequence, so that the result and the work are
    reproducible) keep the part holding the median: the values below the
    pivot when their weight, plus the weight already known below, reaches
    half the total; the pivot when its copies reach it; else the values
    above. Returns 0.0 when the total weight is not positive.
    """
    n = values.shape[0]
    total = 0.0
    for i in range(n):
        total += weights[i]
    if not total > 0.0:
        return 0.0
    half = 0.5 * total
    below = 0.0  # weight of the values known to lie below the part [lo, hi)
    lo = 0
    hi = n
    state = np.uint64(0x9E3779B97F4A7C15)
    while True:
        state = state * np.uint64(6364136223846793005) + np.uint64(1442695040888963407)
        pick = lo + np.int64((state >> np.uint64(33)) % np.uint64(hi - lo))
        pivot = values[pick]
        # Dijkstra's three-way partition: [lo, lt) < pivot, [lt, i) == pivot, (gt, hi) > pivot
        lt = lo
        i = lo
        gt = hi - 1
        weight_lt = 0.0
        weight_eq = 0.0
        while i <= gt:
            v = values[i]
            if v < pivot:
                weight_lt += weights[i]
                _swap(values, weights, i, lt)
                lt += 1
                i += 1
            elif v > pivot:
                _swap(values, weights, i, gt)
                gt -= 1
            else:
                weight_eq += weights[i]
                i += 1
        if below + weight_lt >= half:
            hi = lt
        elif below + weight_lt + weight_eq >= half or gt + 1 >= hi:
            # (no value above: the rounding of the partial sums left the median here)
            return pivot
        else:
            below += weight_lt + weight_eq
            lo = gt + 1


# columns gathered per task: a row's 8 float64 values are one 64-byte line
_COLUMN_BLOCK = 8


@njit(parallel=True, cache=True)
def _weighted_median_blocks(A, B, w, ratios, out):
    """``out[j]`` = :func:`weighted_median_of` column ``j`` of the values, with its weights.

    ``ratios`` False: the values are ``A[:, j]`` and the weights ``B[:, j]``
    (``B[:, 0]`` when ``B`` has one column; ``w`` unused). ``ratios`` True
    (the step of :func:`gpurpo.ensemble.boosting.step_sizes.weighted_median_step`): the
    values are ``A[i, j] / B[i, j]`` and the weights ``w[i] |B[i, j]|``,
    ratio 0 and weight 0 where ``B[i, j] = 0``. Tasks gather blocks of
    :data:`_COLUMN_BLOCK` columns into contiguous rows, forming the ratios on
    the way (one cache line per row of a C-ordered matrix), instead of
    transposed copies of whole matrices.
    """
    n, d = A.shape
    shared = B.shape[1] == 1
    n_blocks = (d + _COLUMN_BLOCK - 1) // _COLUMN_BLOCK
    for blk in prange(n_blocks):
        j0 = blk * _COLUMN_BLOCK
        j1 = min(d, j0 + _COLUMN_BLOCK)
        values = np.empty((j1 - j0, n))
        weights = np.empty((j1 - j0, n))
        for i in range(n):
            for j in range(j0, j1):
                b = B[i, 0] if shared else B[i, j]
                if ratios:
                    values[j - j0, i] = A[i, j] / b if b != 0 else 0.0
                    weights[j - j0, i] = w[i] * abs(b)
                else:
                    values[j - j0, i] = A[i, j]
                    weights[j - j0, i] = b
        for j in range(j0, j1):
            out[j] = weighted_median_of(values[j - j0], weights[j - j0])


@njit(parallel=True, cache=True)
def _weighted_median_leaf_blocks(R, w, order, starts, out):
    """``out[l, j]`` = :func:`weighted_median_of` column ``j`` of the rows
    ``order[starts[l]:starts[l + 1]]`` (leaf ``l``'s rows, increasing) with their weights,
    by (leaf, block of :data:`_COLUMN_BLOCK` columns) tasks."""
    n_leaves, d = out.shape
    n_blocks = (d + _COLUMN_BLOCK - 1) // _COLUMN_BLOCK
    for task in prange(n_leaves * n_blocks):
        lf = task // n_blocks
        j0 = (task - lf * n_blocks) * _COLUMN_BLOCK
        j1 = min(d, j0 + _COLUMN_BLOCK)
        a = starts[lf]
        size = starts[lf + 1] - a
        values = np.empty((j1 - j0, size))
        weights = np.empty((j1 - j0, size))
        for q in range(size):
            i = order[a + q]
            for j in range(j0, j1):
                values[j - j0, q] = R[i, j]
                weights[j - j0, q] = w[i]
        for j in range(j0, j1):
            out[lf, j] = weighted_median_of(values[j - j0], weights[j - j0]) if size else 0.0


def weighted_median_leaves_cpu(R: Any, w: Any, leaf: Any, n_leaves: int) -> np.ndarray:
    """``boost_weighted_median_leaves`` by selection (numba): each leaf's rows found by
    one stable sort of ``leaf``."""
    R = np.ascontiguousarray(R, dtype=np.float64)
    w = np.ascontiguousarray(w, dtype=np.float64)
    leaf = np.asarray(leaf, dtype=np.int64)
    order = np.argsort(leaf, kind="stable")
    starts = np.zeros(n_leaves + 1, dtype=np.int64)
    np.cumsum(np.bincount(leaf, minlength=n_leaves), out=starts[1:])
    out = np.zeros((n_leaves, R.shape[1]), dtype=np.float64)
    if out.size:
        _weighted_median_leaf_blocks(R, w, order, starts, out)
    return out


def weighted_median_leaves(xp: ModuleType, R: Any, w: Any, leaf: Any, n_leaves: int) -> Any:
    """``boost_weighted_median_leaves`` in array operations (every leaf at once).

    Each column is sorted by (leaf, value) through unique integer keys
    ``leaf * n + rank of the value``, so the leaves' rows form the same segments in
    every column; the median of a segment is its first row whose weight from
    the segment's start reaches half the segment's weight, found by counting
    the rows before it.
    """
    R = R.astype(xp.float64)
    n, d = R.shape
    out = xp.zeros((n_leaves, d), dtype=xp.float64)
    if n * d * n_leaves == 0:
        return out
    # (n, d) temporaries kept few: each key array is dropped once sorted
    order = xp.argsort(leaf.astype(xp.int64)[:, None] * n
                       + xp.argsort(xp.argsort(R, axis=0), axis=0), axis=0)
    values = xp.take_along_axis(R, order, axis=0)
    cum = xp.zeros((n + 1, d), dtype=xp.float64)
    cum[1:] = xp.cumsum(w.astype(xp.float64)[order], axis=0)
    counts = bincount(xp, leaf, n_leaves)
    stops = xp.cumsum(counts)
    starts = stops - counts
    base = cum[starts]
    total = cum[stops] - base
    segment = xp.searchsorted(stops, xp.arange(n), side="right")  # the leaf of each row
    reached = (cum[1:] - base[segment]) >= 0.5 * total[segment]
    before = xp.zeros((n + 1, d), dtype=xp.int64)
    before[1:] = xp.cumsum(~reached, axis=0)
    first = starts[:, None] + before[stops] - before[starts]
    median = xp.take_along_axis(values, xp.minimum(first, n - 1), axis=0)
    return xp.where((counts[:, None] > 0) & (total > 0), median, 0.0)


def _medians(A: Any, B: Any, w: Any, ratios: bool) -> np.ndarray:
    A = np.ascontiguousarray(A, dtype=np.float64)
    B = np.ascontiguousarray(B, dtype=np.float64)
    w = np.ascontiguousarray(w, dtype=np.float64)
    out = np.empty(A.shape[1], dtype=np.float64)
    if A.shape[1]:
        _weighted_median_blocks(A, B, w, ratios, out)
    return out


def weighted_median_columns(xp: ModuleType, Z: Any, W: Any) -> Any:
    """Lower weighted median of every column of ``Z``.

    Parameters
    ----------
    Z : array of shape (n, d)
    W : array of shape (n, d) or (n, 1)
        Non-negative weights (broadcast against ``Z``).

    Returns
    -------
    array of shape (d,), float64
        For column ``j`` the smallest ``z`` among its values such that the
        weight of ``{i : z_ij <= z}`` is at least half the column's total
        weight; it minimises ``sum_i W_ij |z_ij - z|``. 0 for columns of
        zero total weight.
    """
    Z = Z.astype(xp.float64)
    W = xp.broadcast_to(W.astype(xp.float64), Z.shape)
    order = xp.argsort(Z, axis=0)
    z_sorted = xp.take_along_axis(Z, order, axis=0)
    cum = xp.cumsum(xp.take_along_axis(W, order, axis=0), axis=0)
    total = cum[-1]
    reached = cum >= 0.5 * total[None, :]
    first = xp.argmax(reached, axis=0)
    median = xp.take_along_axis(z_sorted, first[None, :], axis=0)[0]
    return xp.where(total > 0, median, 0.0)



def weighted_median_columns_cpu(Z: Any, W: Any) -> np.ndarray:
    """:func:`gpurpo.ensemble.boosting._median_kernels.weighted_median_columns` by selection (numba)."""
    return _medians(Z, W, np.empty(0), False)


def weighted_median_step_cpu(R: Any, H: Any, w: Any) -> np.ndarray:
    """:func:`gpurpo.ensemble.boosting.step_sizes.weighted_median_step` by selection (numba)."""
    return _medians(R, H, w, True)


def _weighted_median_columns_xp(backend: Backend, Z: Any, W: Any) -> Any:
    return weighted_median_columns(backend.xp, Z, W)


def _weighted_median_step_xp(backend: Backend, R: Any, H: Any, w: Any) -> Any:
    xp = backend.xp
    H64 = H.astype(xp.float64)
    nonzero = H64 != 0
    ratio = xp.where(nonzero, R / xp.where(nonzero, H64, 1.0), 0.0)
    weight = w.astype(xp.float64)[:, None] * xp.abs(H64)
    return weighted_median_columns(xp, ratio, weight)


def _weighted_median_leaves_xp(backend: Backend, R: Any, w: Any, leaf: Any,
                               n_leaves: int) -> Any:
    return weighted_median_leaves(backend.xp, R, w, leaf, n_leaves)


register_kernel("boost_weighted_median_columns", cpu=weighted_median_columns_cpu,
                cuda=_weighted_median_columns_xp)
register_kernel("boost_weighted_median_step", cpu=weighted_median_step_cpu,
                cuda=_weighted_median_step_xp)
register_kernel("boost_weighted_median_leaves", cpu=weighted_median_leaves_cpu,
                cuda=_weighted_median_leaves_xp)
