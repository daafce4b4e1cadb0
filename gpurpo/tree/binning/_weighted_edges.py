"""Weighted quantile bin edges of the columns of a dense sample (numba).

:class:`gpurpo.tree.binning.BinMapper` fits the edges of a weighted sample
(``sample_weight``) with :func:`gpurpo.tree.binning._quantile_rule.quantile_edges`, one
column at a time: ``np.unique`` with its inverse (an argsort), a
``bincount`` of the weights and a search of the quantile levels in their
cumulative sums: an argsort per column, slow where NumPy's argsort is (AMD
Zen 4, see :mod:`gpurpo.tree.binning._row_sort`).

:func:`weighted_column_edges` computes the very same edges in one kernel:
tasks take blocks of columns, gather each column's non-NaN values with their
weights, sort the pairs by a least-significant-digit radix sort of the
values' order-preserving 64-bit keys (Knuth, TAOCP vol. 3, 5.2.5; -0.0 keyed
as 0.0, so that the two, equal as values, keep their order), then add the
weights of each run of equal values in row order, as ``bincount`` does (a
stable sort keeps the rows of a run in order), and apply the rule of
``quantile_edges`` to the runs.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numba import njit, prange

from gpurpo.tree.binning._row_sort import bucket_starts

_BITS = 11
_RADIX = 1 << _BITS
_DIGIT = np.uint64(_RADIX - 1)
_PASSES = 6  # 6 x 11 bits cover the 64-bit keys
_SIGN = np.uint64(0x8000000000000000)
# columns gathered per task: 8 float64 values of a C-ordered row are one cache line
_BLOCK = 8


@njit(inline="always", cache=True)
def _key64(x):
    """The order-preserving unsigned key of a non-NaN float64 ``x`` (-0.0 keyed as 0.0)."""
    bits = np.float64(x + 0.0).view(np.uint64)
    flip = np.uint64(np.uint64(0) - (bits >> np.uint64(63)))
    return np.uint64(bits ^ (flip | _SIGN))


@njit(inline="always", cache=True)
def _digit64(key, d):
    return np.intp((key >> np.uint64(_BITS * d)) & _DIGIT)


@njit(cache=True)
def _sort_pairs(keys, weights, keys_tmp, weights_tmp, n):
    """Sort ``keys[:n]`` increasingly with ``weights[:n]`` alongside, stably (LSD radix).

    Returns which buffers hold the result: 0 for ``keys``/``weights``, 1 for the
    temporaries. A digit shared by every key is skipped. The counts are int32 (a
    column of fewer than 2**31 values; 48 KB of them instead of 96 KB: 0.170 ->
    0.156 s for the delicious-shaped sample, where 8-bit digits took 0.167 s).
    """
    hist = np.zeros((_PASSES, _RADIX), dtype=np.int32)
    for i in range(n):
        k = keys[i]
        for d in range(_PASSES):
            hist[d, _digit64(k, d)] += 1
    src_k, src_w, dst_k, dst_w = keys, weights, keys_tmp, weights_tmp
    where = 0
    for d in range(_PASSES):
        h = hist[d]
        if n == 0 or h[_digit64(src_k[0], d)] == n:
            continue
        bucket_starts(h)
        for i in range(n):
            k = src_k[i]
            g = _digit64(k, d)
            dst_k[h[g]] = k
            dst_w[h[g]] = src_w[i]
            h[g] += 1
        src_k, src_w, dst_k, dst_w = dst_k, dst_w, src_k, src_w
        where = 1 - where
    return where


@njit(cache=True)
def _edges_of_sorted_pairs(values, keys, weights, n, max_bins, run_values, run_cum, out):
    """Edges of ``quantile_edges`` from ``n`` sorted keys (and the values they key) with
    their weights; returns their number. ``run_values`` and ``run_cum`` hold at least
    ``n`` entries."""
    if n == 0:
        return 0
    runs = 0
    total = 0.0
    i = 0
    while i < n:
        k = keys[i]
        s = 0.0
        j = i
        while j < n and keys[j] == k:
            s += weights[j]
            j += 1
        run_values[runs] = values[i]
        total += s
        run_cum[runs] = total
        runs += 1
        i = j
    if runs <= max_bins:
        for r in range(runs - 1):
            out[r] = 0.5 * (run_values[r] + run_values[r + 1])
        return runs - 1
    scaled = run_cum[:runs] * max_bins  # the rule compares C * max_bins with j * W
    n_out = 0
    last = -1
    for level_index in range(1, max_bins):
        at = np.searchsorted(scaled, level_index * total)
        at = min(at, runs - 2)
        if at > last:  # the levels increase, so "unique" keeps the first of each
            out[n_out] = 0.5 * (run_values[at] + run_values[at + 1])
            n_out += 1
            last = at
    return n_out


@njit(parallel=True, cache=True)
def _weighted_edges_blocks(X, weights, max_bins, out, n_edges):
    n, p = X.shape
    n_blocks = (p + _BLOCK - 1) // _BLOCK
    for blk in prange(n_blocks):
        f0 = blk * _BLOCK
        f1 = min(p, f0 + _BLOCK)
        keys = np.empty((f1 - f0, n), dtype=np.uint64)
        pair_w = np.empty((f1 - f0, n))
        counts = np.zeros(f1 - f0, dtype=np.int64)
        for i in range(n):
            for f in range(f0, f1):
                x = np.float64(X[i, f])
                if not np.isnan(x):
                    c = counts[f - f0]
                    keys[f - f0, c] = _key64(x)
                    pair_w[f - f0, c] = weights[i]
                    counts[f - f0] = c + 1
        keys_tmp = np.empty(n, dtype=np.uint64)
        w_tmp = np.empty(n)
        values = np.empty(n)
        run_values = np.empty(n)
        run_cum = np.empty(n)
        for f in range(f0, f1):
            m = counts[f - f0]
            k_f = keys[f - f0]
            w_f = pair_w[f - f0]
            if _sort_pairs(k_f, w_f, keys_tmp, w_tmp, m) == 1:
                k_f = keys_tmp
                w_f = w_tmp
            for i in range(m):
                k = k_f[i]
                flip = np.uint64(np.uint64(0) - (k >> np.uint64(63)))
                values[i] = np.uint64(k ^ (~flip | _SIGN)).view(np.float64)
            n_edges[f] = _edges_of_sorted_pairs(values, k_f, w_f, m, max_bins, run_values,
                                                run_cum, out[f])


def weighted_column_edges(
    sample: Any, weights: np.ndarray, max_bins: int
) -> tuple[np.ndarray, np.ndarray]:
    """The edges of :func:`gpurpo.tree.binning._quantile_rule.quantile_edges` of every column of a dense
    ``sample`` (n, p) with the row weights ``weights`` (n,), NaN left out.

    Returns
    -------
    out : float64 ndarray of shape (p, max(max_bins - 1, 1))
        Feature ``f``'s edges are ``out[f, :n_edges[f]]``.
    n_edges : int64 ndarray of shape (p,)
    """
    sample = np.asarray(sample)
    if sample.dtype not in (np.float32, np.float64):
        sample = sample.astype(np.float64)
    n, p = sample.shape
    out = np.empty((p, max(max_bins - 1, 1)), dtype=np.float64)
    n_edges = np.zeros(p, dtype=np.int64)
    if p:
        _weighted_edges_blocks(sample, np.ascontiguousarray(weights, dtype=np.float64),
                               int(max_bins), out, n_edges)
    return out, n_edges
