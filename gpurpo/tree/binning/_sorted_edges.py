"""Quantile bin edges of sorted float32 rows, and the float32 transpose that feeds them.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from gpurpo.tree._numba._shared import _prefetch
from gpurpo.tree.binning._code_tables import float32_codes_agree
from gpurpo.tree.binning._quantile_rule import quantile_rank

# Rows ahead whose lines transpose_block_to_float32 prefetches.
TRANSPOSE_PREFETCH = 32


@njit(inline="always", cache=True)
def _transpose_group(X, flat, f0, g, width, ahead, out, out_lo, out_hi, out_exact):
    """:func:`transpose_block_to_float32` for the ``width`` (a constant) features from ``f0 + g``."""
    n = X.shape[0]
    stride = X.shape[1]
    lo = np.full(width, np.inf, dtype=np.float32)
    hi = np.full(width, -np.inf, dtype=np.float32)
    # each feature's sum of |x - float32(x)|: zero where float32 holds every value (NaN
    # makes it NaN), as vector additions, where a flag of comparisons costs more
    err = np.zeros(width, dtype=np.float64)
    for i in range(n):
        if i + ahead < n:
            # the group's values can straddle a line more than their own
            for c in range(0, width, 8):
                _prefetch(flat, (i + ahead) * stride + f0 + g + c)
            _prefetch(flat, (i + ahead) * stride + f0 + g + width - 1)
        for j in range(width):
            x = X[i, f0 + g + j]
            v = np.float32(x)
            out[g + j, i] = v
            lo[j] = v if v < lo[j] else lo[j]
            hi[j] = v if v > hi[j] else hi[j]
            err[j] += abs(np.float64(x) - np.float64(v))
    for j in range(width):
        out_lo[g + j] = lo[j]
        out_hi[g + j] = hi[j]
        out_exact[g + j] = err[j] == 0.0


@njit(nogil=True, cache=True)
def transpose_block_to_float32(X, f0, out, out_lo, out_hi, out_exact):
    """``out[j, i] = float32(X[i, f0 + j])`` for the ``out.shape[0]`` features from ``f0``,
    and ``out_lo[j]``, ``out_hi[j]`` the smallest and largest non-NaN of ``out[j]``
    (+inf and -inf for none; NaN compare false and are skipped), and ``out_exact[j]``
    whether float32 holds every value of the feature exactly, NaN none (then its
    float32 row stands for its values, as for :func:`gpurpo.tree.binning._bin_lows.block_lows`).

    ``X``: C-ordered. Host helper of BinMapper (a block of features, see
    :func:`gpurpo.tree.binning._mapper._bin_by_blocks`). Groups of 16 features, then
    of 8, row by row: the values of a row (one or two 64-byte lines of a
    float64 ``X``) are converted at once (a loop of constant length,
    unrolled and vectorised), written to as many rows of ``out``, each filled
    sequentially, and folded into the group's running minima and maxima (the
    ranges of :mod:`gpurpo.tree.binning._bucket_edges`, at no extra pass). The lines of the row
    ``TRANSPOSE_PREFETCH`` rows ahead are prefetched (:func:`_prefetch`):
    rows further apart than 2 KiB defeat the hardware's stride prefetcher.
    """
    nb = out.shape[0]
    flat = X.reshape(-1)
    ahead = TRANSPOSE_PREFETCH
    g = 0
    while g + 16 <= nb:
        _transpose_group(X, flat, f0, g, 16, ahead, out, out_lo, out_hi, out_exact)
        g += 16
    while g + 8 <= nb:
        _transpose_group(X, flat, f0, g, 8, ahead, out, out_lo, out_hi, out_exact)
        g += 8
    while g < nb:
        _transpose_group(X, flat, f0, g, 1, ahead, out, out_lo, out_hi, out_exact)
        g += 1


@njit(cache=True)
def _count_below_nan(v):
    """The number of non-NaN values of ``v``, sorted with NaN last (binary search)."""
    lo = 0
    hi = v.shape[0]
    while lo < hi:
        mid = (lo + hi) >> 1
        if np.isnan(v[mid]):
            hi = mid
        else:
            lo = mid + 1
    return lo


@njit(nogil=True, cache=True)
def edges_from_sorted(sorted_values, max_bins, out_edges, out_n_edges, out_float32_ok):
    """Quantile bin edges of each row of ``sorted_values`` (host helper of BinMapper.fit).

    Row f holds the feature's sample values sorted increasingly, NaN last (as
    NumPy sorts them; the non-NaN prefix is found by binary search). With at
    most ``max_bins`` distinct values the edges are the midpoints between
    consecutive distinct values; otherwise the midpoints after the distinct
    values holding the ``j / max_bins`` quantiles (j = 1 .. max_bins - 1),
    deduplicated (a rank inside the run of ties of the previous one gives its
    edge again and is skipped without walking the run again): the rule of
    :mod:`gpurpo.tree.binning._quantile_rule`. Fills
    ``out_edges[f, :out_n_edges[f]]``, and ``out_float32_ok[f]`` with
    :func:`float32_codes_agree` of the pairs of values the edges lie between.
    """
    p = sorted_values.shape[0]
    for f in range(p):
        v = sorted_values[f]
        n = _count_below_nan(v)
        ok = True
        n_distinct = 0
        for i in range(n):
            if i == 0 or v[i] != v[i - 1]:
                n_distinct += 1
        if n_distinct <= max_bins:
            e = 0
            for i in range(1, n):
                if v[i] != v[i - 1]:
                    out_edges[f, e] = 0.5 * (np.float64(v[i - 1]) + np.float64(v[i]))
                    ok = ok and float32_codes_agree(v[i - 1], v[i])
                    e += 1
            out_n_edges[f] = e
            out_float32_ok[f] = ok
            continue
        e = 0
        last = -1  # position of the last distinct value used for an edge
        run_end = -1  # end of the last run of ties walked: its ranks give its edge again
        for j in range(1, max_bins):
            # distinct value holding the j / max_bins quantile
            rank = quantile_rank(j, n, max_bins)
            if rank <= run_end:
                continue
            # end of its run of ties
            i = rank
            while i + 1 < n and v[i + 1] == v[i]:
                i += 1
            run_end = i
            if i + 1 >= n:
                # the quantile falls in the largest value: edge below its run
                i = rank
                while i > 0 and v[i - 1] == v[i]:
                    i -= 1
                i -= 1
            if i < 0 or i <= last:
                continue
            out_edges[f, e] = 0.5 * (np.float64(v[i]) + np.float64(v[i + 1]))
            ok = ok and float32_codes_agree(v[i], v[i + 1])
            e += 1
            last = i
        out_n_edges[f] = e
        out_float32_ok[f] = ok
