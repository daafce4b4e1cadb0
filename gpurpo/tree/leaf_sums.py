"""The k best outputs of summed sparse leaf rows, without an (n, d) block of scores.

Trees with CSR leaf values (sparse ``Y``) predict row ``i`` as
``(1 / T) sum_t V[leaf(i, t)]`` over T trees. ``predict_top_k`` took the k
largest scores of each row from dense blocks of rows
(:func:`gpurpo._top_k.top_k_of_row_blocks`): every block of rows cleared and
scanned its d columns, whatever the leaves held -- O(d) per row, 36 s for
200 rows of a 2-tree forest on 10^8 labels. Here the sums of a row are kept
as its columns with stored entries, in increasing order, and the top k is
chosen among them and the implicit zeros: O(L log L) per row for the L leaf
entries a row reaches.

The scores are those of the dense route, bit for bit. The dense kernel
(``tree_sum_leaves_csr``) adds the leaf rows of the trees, in tree order, to
a zero-initialised float64 row. Here the entries a row reaches in all the
trees (of every group: the chunks of a forest) are sorted by column, then by
their position in tree order, and each column's entries are added in that
order to 0.0: the same additions in the same order. The division by T is the
dense route's too. The k best columns are then taken by decreasing score, equal scores by increasing column (the rule
of :func:`gpurpo._top_k.top_k`), among the stored columns and the k lowest
columns without a stored entry (score 0.0): any other such column ties with
all of those at 0.0 and comes after them.

The same sums, as a CSR matrix (:func:`leaf_sums_csr`), give a forest
classifier's sparse 0/1 predictions and its out-of-bag predictions of sparse
outputs without (n, d) dense arrays.

CPU only (numba kernels); the CUDA backends keep the dense route, whose
blocks the device scans in parallel.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np
import scipy.sparse as sp
from numba import njit, prange
from numba.typed import List

from gpurpo._top_k import offer

__all__ = [
    "LEAF_SUM_ENTRIES", "LEAF_TOP_K_MIN_RATIO", "LEAF_TOP_K_ROWS", "leaf_sums_csr",
    "prefers_leaf_sums",
    "top_k_of_leaf_sums",
]

#: Rows whose trees are traversed together.
LEAF_TOP_K_ROWS = 2048

#: Leaf entries (16 bytes each: column and sum) that the rows summed together may reach.
LEAF_SUM_ENTRIES = 1 << 22

#: The sums of the leaf entries win over dense blocks from d = LEAF_TOP_K_MIN_RATIO x the
#: entries a row reaches on average (:func:`prefers_leaf_sums`).
LEAF_TOP_K_MIN_RATIO = 4


def prefers_leaf_sums(values: Sequence[Any], n_trees: int, d: int) -> bool:
    """Whether :func:`top_k_of_leaf_sums` should beat dense blocks of scores.

    A row costs the dense route about d (a row of the block cleared, its leaf
    entries added, the row scanned) and this route about the L leaf entries
    it reaches, a few times dearer each (gathered, sorted and summed). On
    2,000 rows of forests of multi-label trees (one process, 2 threads, the
    same traversal of the trees in both routes), this route against dense
    blocks: 0.149 s / 0.062 s at d = 0.5 L (delicious-shaped labels, d = 983,
    100 trees), 0.098 / 0.108 s at d = 3 L, 0.072 / 0.088 s at d = 20 L,
    0.012 / 0.044 s at d = 100 L (20 trees) and 0.068 / 0.430 s at d = 200 L
    (d = 100,000, 100 trees). L is estimated as ``n_trees`` times the mean
    number of entries of a leaf.
    """
    rows = sum(int(v.shape[0]) for v in values)
    entries = sum(int(v.nnz) for v in values)
    per_row = n_trees * entries / max(rows, 1)
    return d >= LEAF_TOP_K_MIN_RATIO * max(per_row, 1.0)


@njit(parallel=True, cache=True)
def _bounds(leaf_rows, group_start, indptrs, out_start):
    """``out_start[i + 1]``: the number of leaf entries row i reaches in all the trees
    (trees ``group_start[g]`` to ``group_start[g + 1] - 1`` are those of group g)."""
    n = leaf_rows.shape[0]
    for i in prange(n):
        total = 0
        for g in range(group_start.shape[0] - 1):
            indptr = indptrs[g]
            for t in range(group_start[g], group_start[g + 1]):
                leaf = leaf_rows[i, t]
                if leaf >= 0:
                    total += indptr[leaf + 1] - indptr[leaf]
        out_start[i + 1] = total


@njit(parallel=True, cache=True)
def _leaf_sums(leaf_rows, group_start, indptrs, indices, data, start, out_count, out_cols,
               out_sums):
    """Row i's columns, in increasing order, with the sums of their leaf entries, the
    trees' entries of a column added in tree order to 0.0."""
    n = leaf_rows.shape[0]
    for i in prange(n):
        size = start[i + 1] - start[i]
        # an entry's key: its column, then its position in tree order (unique keys,
        # so any sort orders the entries of a column in tree order)
        keys = np.empty(size, dtype=np.int64)
        vals = np.empty(size, dtype=np.float64)
        q = 0
        for g in range(group_start.shape[0] - 1):
            indptr = indptrs[g]
            ind = indices[g]
            dat = data[g]
            for t in range(group_start[g], group_start[g + 1]):
                leaf = leaf_rows[i, t]
                if leaf >= 0:
                    for e in range(indptr[leaf], indptr[leaf + 1]):
                        keys[q] = np.int64(ind[e]) * size + q
                        vals[q] = dat[e]
                        q += 1
        keys.sort()
        o = start[i]
        b = 0
        while b < size:
            col = keys[b] // size
            first = col * size
            end = first + size  # the keys of the next column start here
            s = 0.0
            while b < size and keys[b] < end:
                s += vals[keys[b] - first]
                b += 1
            out_cols[o] = col
            out_sums[o] = s
            o += 1
        out_count[i] = o - start[i]


@njit(parallel=True, cache=True)
def _top_k_of_sums(start, count, cols, sums, d, divisor, out_indices, out_values):
    """Row i's k best columns among its stored sums (divided by ``divisor``) and the
    implicit zeros, offered in column order (:func:`gpurpo._top_k.offer`)."""
    n, k = out_indices.shape
    for i in prange(n):
        idx = out_indices[i]
        val = out_values[i]
        kept = 0
        a = start[i]
        a_end = a + count[i]
        zeros_left = k  # the lowest columns without a stored entry that may enter
        col = 0
        while a < a_end or (zeros_left > 0 and col < d):
            if a < a_end and cols[a] == col:
                v = sums[a] / divisor
                j = cols[a]
                a += 1
                col += 1
            elif zeros_left > 0 and col < d and (a >= a_end or col < cols[a]):
                v = 0.0
                j = col
                zeros_left -= 1
                col += 1
            else:
                # no more implicit zeros may enter: jump to the next stored column
                v = sums[a] / divisor
                j = cols[a]
                col = j + 1
                a += 1
            kept = offer(idx, val, kept, v, j)


def _typed(arrays: Sequence[np.ndarray], dtypes: tuple[Any, ...]) -> List:
    """The arrays as a numba typed list of one dtype: the first of ``dtypes`` they all
    have already, else the last (converting only then)."""
    common = next((t for t in dtypes if all(a.dtype == t for a in arrays)), dtypes[-1])
    out = List()
    for a in arrays:
        out.append(np.ascontiguousarray(a, dtype=common))
    return out


def _block_sums(
    n: int,
    values: Sequence[Any],
    leaf_rows_of: Callable[[int, int], Sequence[np.ndarray]],
    block_rows: int,
    block_entries: int,
) -> Iterator[tuple[int, int, np.ndarray, np.ndarray, np.ndarray, np.ndarray]]:
    """``(r0, r1, start, count, cols, sums)`` for consecutive ranges of rows: row
    ``r0 + i``'s columns ``cols[start[i] : start[i] + count[i]]``, increasing, and their
    sums. The trees are traversed ``block_rows`` rows at a time, and the rows of a
    range reach at most ``block_entries`` leaf entries together (a row alone may
    reach more: its range is that row)."""
    indptrs = _typed([v.indptr for v in values], (np.int32, np.int64))
    indices = _typed([v.indices for v in values], (np.int32, np.int64))
    data = _typed([v.data for v in values], (np.float64, np.float32, np.float64))
    group_start = None
    step = max(1, int(block_rows))
    for r0 in range(0, n, step):
        r1 = min(n, r0 + step)
        groups = [np.asarray(a, dtype=np.int32) for a in leaf_rows_of(r0, r1)]
        if group_start is None:
            group_start = np.concatenate([[0], np.cumsum([g.shape[1] for g in groups])])
            group_start = group_start.astype(np.int64)
        leaf_rows = np.ascontiguousarray(np.concatenate(groups, axis=1))
        bound = np.zeros(r1 - r0 + 1, dtype=np.int64)
        _bounds(leaf_rows, group_start, indptrs, bound)
        np.cumsum(bound, out=bound)
        a = 0
        while a < r1 - r0:
            # the most rows from a whose entries fit the budget (at least one)
            b = max(a + 1, int(np.searchsorted(bound, bound[a] + block_entries, side="right"))
                    - 1)
            start = bound[a : b + 1] - bound[a]
            count = np.empty(b - a, dtype=np.int64)
            cols = np.empty(int(start[-1]), dtype=np.int64)
            sums = np.empty(int(start[-1]), dtype=np.float64)
            _leaf_sums(np.ascontiguousarray(leaf_rows[a:b]), group_start, indptrs, indices,
                       data, start, count, cols, sums)
            yield r0 + a, r0 + b, start, count, cols, sums
            a = b


def top_k_of_leaf_sums(
    n: int,
    d: int,
    k: int,
    divisor: float,
    values: Sequence[Any],
    leaf_rows_of: Callable[[int, int], Sequence[np.ndarray]],
    block_rows: int = LEAF_TOP_K_ROWS,
    block_entries: int = LEAF_SUM_ENTRIES,
) -> tuple[np.ndarray, np.ndarray]:
    """Each row's ``k`` best columns of ``(1 / divisor) sum_g sum_t V_g[leaf_rows_g[i, t]]``.

    Parameters
    ----------
    n, d : int
        Rows and columns (outputs) of the scores; ``1 <= k <= d``.
    k : int
    divisor : float
        The sums are divided by it (the number of trees of a forest, 1 for a tree).
    values : sequence of SciPy CSR matrices (L_g, d)
        The leaf values of each group of trees (the chunks of a forest), in tree order.
    leaf_rows_of : callable ``(r0, r1) -> sequence of int arrays (r1 - r0, T_g)``
        For rows ``r0:r1``, the row of ``values[g]`` each row reaches in each
        tree of group g (-1: none).
    block_rows : int
        Rows whose trees are traversed together.
    block_entries : int
        Leaf entries the rows summed together may reach (memory: 16 bytes each).

    Returns
    -------
    indices : int64 array (n, k)
        By decreasing score, equal scores by increasing column.
    scores : float64 array (n, k)
    """
    indices = np.empty((n, k), dtype=np.int64)
    scores = np.empty((n, k), dtype=np.float64)
    for r0, r1, start, count, cols, sums in _block_sums(n, values, leaf_rows_of, block_rows,
                                                        block_entries):
        _top_k_of_sums(start, count, cols, sums, int(d), float(divisor), indices[r0:r1],
                       scores[r0:r1])
    return indices, scores


def leaf_sums_csr(
    n: int,
    d: int,
    divisor: float | np.ndarray,
    values: Sequence[Any],
    leaf_rows_of: Callable[[int, int], Sequence[np.ndarray]],
    block_rows: int = LEAF_TOP_K_ROWS,
    block_entries: int = LEAF_SUM_ENTRIES,
    above: float | None = None,
) -> sp.csr_matrix:
    """The scores ``(1 / divisor) sum_g sum_t V_g[leaf_rows_g[i, t]]`` as a CSR matrix (n, d).

    Arguments as for :func:`top_k_of_leaf_sums`; ``divisor`` may also be one
    float64 divisor per row, an array (n,). A column a row's leaves hold is
    stored (with its sum, 0.0 included), the others are zeros; the stored
    values are those of the dense route, bit for bit. ``above``: store only
    the scores above it (a classifier's labels need nothing else, and the
    matrix of all the sums may be much larger).
    """
    per_row = np.ndim(divisor) == 1
    parts = []
    for r0, r1, start, count, cols, sums in _block_sums(n, values, leaf_rows_of, block_rows,
                                                        block_entries):
        # the positions start[i] .. start[i] + count[i] - 1 of every row, in order
        skipped = np.repeat(start[:-1] - np.concatenate([[0], np.cumsum(count)[:-1]]), count)
        kept = skipped + np.arange(int(count.sum()))
        by = np.repeat(np.asarray(divisor, dtype=np.float64)[r0:r1], count) if per_row \
            else float(divisor)
        scores = sums[kept] / by
        row_of = np.repeat(np.arange(r1 - r0), count)
        columns = cols[kept]
        if above is not None:
            chosen = scores > above
            scores, columns, row_of = scores[chosen], columns[chosen], row_of[chosen]
        indptr = np.concatenate([[0], np.cumsum(np.bincount(row_of, minlength=r1 - r0))])
        parts.append(sp.csr_matrix((scores, columns, indptr), shape=(r1 - r0, d)))
    if not parts:
        return sp.csr_matrix((0, d))
    return sp.vstack(parts, format="csr")
