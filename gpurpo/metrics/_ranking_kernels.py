"""The ranking metrics' per-row counts, as kernels: LRAP and precision at k.

For row ``i`` with relevant labels ``Y_i`` (``T[i, j] != 0``) and scores
``s_i``, LRAP (Joly et al. 2014, eq. 6) needs, for each relevant ``j``,
``R_ij = #{k : s_ik >= s_ij}`` and ``L_ij = #{k in Y_i : s_ik >= s_ij}``.
The kernel ``"lrap_row_counts(T, S, out_ratio_sum, out_n_relevant)"`` takes a
block of rows: ``T`` 0/1 relevance, dense or CSR (host or GPU, as the data);
``S`` dense scores (float32 or float64); it writes each row's
``sum_{j in Y_i} L_ij / R_ij`` and ``|Y_i|`` into the float64 outputs
(:func:`gpurpo.metrics.label_ranking_average_precision` sums them over rows):

* CPU (numba, rows in parallel): the row's relevant scores are gathered in
  column order (from the stored entries of a CSR ``T``, with no dense copy), in
  the scores' own precision; with few of them (at most :func:`direct_limit`) each ``R_ij`` is a count over
  the row (a compare-and-add loop the compiler vectorises, ``|Y_i| d``
  comparisons), with many the row and the relevant scores are sorted
  (numba's own sort) and each count is a binary search (``d log d``);
* CUDA backends (CuPy, and the emulator in tests): the array version of
  :mod:`gpurpo.metrics` on dense float64 blocks (a broadcast count, or a sort
  of the whole block).

Ties count as ranked above, as in scikit-learn's
``label_ranking_average_precision_score``. Scores must not be NaN.

The kernel ``"top_k_hits(T, S, k)"`` (:func:`gpurpo.metrics.precision_at_k`)
returns the number of relevant labels among each row's ``k`` best scores
(ties to the lowest columns), summed over the block's rows: on the CPU by the
one-pass top-k kernel of :mod:`gpurpo._top_k`, ``T`` read at those columns
only, on CUDA backends by a dense mask of the block
(:func:`gpurpo._top_k.top_k_mask`).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import scipy.sparse as sp
from numba import njit, prange

from gpurpo._top_k import top_k, top_k_mask
from gpurpo.backend import NUMPY, Backend, register_kernel
from gpurpo.metrics._ranking_counts import ranking_counts_xp


def direct_limit(d: int) -> int:
    """The most relevant labels a row counts directly (``|Y_i| d`` comparisons)
    rather than by sorting (about ``d log2 d`` steps, each dearer than a
    vectorised comparison)."""
    return max(16, 4 * max(int(d) - 1, 1).bit_length())


@njit(inline="always", cache=True)
def _row_ratio_sum(S, i, relevant, r, limit):
    """``sum_j L_ij / R_ij`` over the ``r`` relevant scores ``relevant`` (column order) of
    row ``i`` of ``S``: direct counts for at most ``limit`` of them, else binary
    searches in the sorted row."""
    d = S.shape[1]
    total = 0.0
    if r <= limit:
        for j in range(r):
            s_j = relevant[j]
            above = 0
            for k in range(d):
                above += S[i, k] >= s_j
            relevant_above = 0
            for m in range(r):
                relevant_above += relevant[m] >= s_j
            total += relevant_above / above
        return total
    row_sorted = np.sort(S[i])
    relevant_sorted = np.sort(relevant[:r])
    for j in range(r):
        s_j = relevant[j]
        above = d - np.searchsorted(row_sorted, s_j)
        relevant_above = r - np.searchsorted(relevant_sorted, s_j)
        total += relevant_above / above
    return total


@njit(parallel=True, cache=True)
def _lrap_row_counts_dense(T, S, limit, out_ratio_sum, out_n_relevant):
    """``out_ratio_sum[i] = sum_{j : T[i, j] != 0} L_ij / R_ij`` (in column order) and
    ``out_n_relevant[i] = #{j : T[i, j] != 0}`` for the rows of ``T``, ``S`` (c, d);
    rows of at most ``limit`` relevant labels count directly, the others sort."""
    c, d = S.shape
    for i in prange(c):
        r = 0
        for k in range(d):
            if T[i, k] != 0:
                r += 1
        out_n_relevant[i] = r
        relevant = np.empty(r, dtype=S.dtype)
        q = 0
        for k in range(d):
            if T[i, k] != 0:
                relevant[q] = S[i, k]
                q += 1
        out_ratio_sum[i] = _row_ratio_sum(S, i, relevant, r, limit) if r else 0.0


@njit(parallel=True, cache=True)
def _lrap_row_counts_csr(indptr, indices, data, S, limit, out_ratio_sum, out_n_relevant):
    """:func:`_lrap_row_counts_dense` with ``T`` in CSR (sorted column indices, no
    duplicates; stored zeros are not relevant)."""
    c = S.shape[0]
    for i in prange(c):
        relevant = np.empty(indptr[i + 1] - indptr[i], dtype=S.dtype)
        r = 0
        for e in range(indptr[i], indptr[i + 1]):
            if data[e] != 0:
                relevant[r] = S[i, indices[e]]
                r += 1
        out_n_relevant[i] = r
        out_ratio_sum[i] = _row_ratio_sum(S, i, relevant, r, limit) if r else 0.0


def lrap_row_counts_cpu(T: Any, S: Any, out_ratio_sum: Any, out_n_relevant: Any) -> None:
    """The kernel on the CPU: ``T`` dense or SciPy sparse, ``S`` dense (c, d)."""
    S = np.ascontiguousarray(S)
    if S.dtype not in (np.float32, np.float64):
        S = S.astype(np.float64)
    limit = direct_limit(S.shape[1])
    if sp.issparse(T):
        T = sp.csr_matrix(T)
        if not T.has_sorted_indices:
            T = T.sorted_indices()
        _lrap_row_counts_csr(T.indptr, T.indices, T.data, S, limit, out_ratio_sum,
                             out_n_relevant)
        return
    _lrap_row_counts_dense(np.ascontiguousarray(T), S, limit, out_ratio_sum, out_n_relevant)


def _lrap_row_counts_xp(
    backend: Backend, T: Any, S: Any, out_ratio_sum: Any, out_n_relevant: Any
) -> None:
    """The kernel on CUDA backends: the array version of :mod:`gpurpo.metrics`."""
    xp = backend.xp
    if backend.issparse(T):
        T = T.toarray()
    ratio_sum, n_relevant = ranking_counts_xp(T.astype(xp.float64, copy=False),
                                              S.astype(xp.float64, copy=False), xp)
    out_ratio_sum[...] = ratio_sum
    out_n_relevant[...] = n_relevant


register_kernel("lrap_row_counts", cpu=lrap_row_counts_cpu, cuda=_lrap_row_counts_xp)


def top_k_hits_cpu(T: Any, S: Any, k: int) -> float:
    """The kernel ``top_k_hits`` on the CPU: each row's top ``k`` columns by the numba
    kernel of :mod:`gpurpo._top_k` (one pass over the row, in the scores' own
    precision), then the relevance ``T`` (dense or SciPy sparse) read at those
    columns only."""
    rows = S.shape[0]
    indices = top_k(S, k, NUMPY)[0]
    if sp.issparse(T):
        at = sp.csr_matrix(T)[np.repeat(np.arange(rows), k), indices.ravel()]
        return float(np.asarray(at, dtype=np.float64).sum())
    return float(np.take_along_axis(np.asarray(T), indices, axis=1).sum(dtype=np.float64))


def _top_k_hits_xp(backend: Backend, T: Any, S: Any, k: int) -> float:
    """The kernel ``top_k_hits`` on CUDA backends: a mask of each row's top ``k``
    (:func:`gpurpo._top_k.top_k_mask`) times the dense relevance."""
    xp = backend.xp
    if backend.issparse(T):
        T = T.toarray()
    S = S.astype(xp.float64, copy=False)
    return float(xp.sum(T.astype(xp.float64, copy=False) * top_k_mask(S, k, xp)))


register_kernel("top_k_hits", cpu=top_k_hits_cpu, cuda=_top_k_hits_xp)
