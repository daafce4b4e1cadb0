"""Columns of 0.0 and 1.0 only (word presence, one-hot): their bins in one pass.

Such a column's quantile bins (:mod:`gpurpo.tree.binning`) are known without a
sort: with both values present, one edge at their midpoint 0.5 (code 1 for
1.0, code 0 for 0.0); with one of them only, no edge and code 0 everywhere. Its
codes are ``x != 0.0`` (but for a column of 1.0 alone), its count of the code of 0.0 the number of zeros (all
of them without an edge), and the smallest fitted value of each bin
(:mod:`gpurpo.tree.binning._bin_lows`) is 0.0 or 1.0. The values are compared
by their bits (+0.0 and 1.0 exactly: -0.0 and NaN are other values), so one
integer comparison per value decides, and the codes are written straight from
``X`` (row-major) to the feature-major code matrix: no float32 copy, no edge
search, no code table. A group of columns holding another value ends the pass:
the rest of the columns then take the general rule
(:func:`gpurpo.tree.binning._mapper._bin_by_blocks`), which gives the same
edges, codes and lows for these columns.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from gpurpo.tree._numba._shared import _prefetch
from gpurpo.tree.binning._code_tables import float32_codes_agree

__all__ = ["binary_blocks", "one_bits"]

# Rows ahead whose lines binary_blocks prefetches (as the float32 transpose does).
_PREFETCH = 32


def one_bits(X: np.ndarray) -> tuple[np.ndarray, np.unsignedinteger]:
    """``X`` (C-ordered float32 or float64) seen as unsigned integers of its width, and the
    bits of 1.0 at that width, of that type (those of +0.0 are 0)."""
    if X.dtype == np.float64:
        return X.view(np.uint64), np.float64(1.0).view(np.uint64)
    return X.view(np.uint32), np.float32(1.0).view(np.uint32)


@njit(inline="always", cache=True)
def _group_codes(bits, flat, f, width, one, codes, ones):
    """Codes ``bits[:, f:f + width] != 0`` into ``codes[f:f + width]`` (``width`` a constant)
    and each column's number of ones in ``ones[f:f + width]``. Returns False when a value
    is other than +0.0 or 1.0 (the codes then hold garbage).

    The values are checked once per group, from per-column flags that the loop over the
    rows folds in (``b ^ (one * code)`` is 0 for +0.0 and 1.0 only): an exit per row,
    or one flag for the group, stops the loop's vectorisation (twice the time). The ones
    are counted afterwards, from the group's codes (in the cache), for the same reason.
    """
    n = bits.shape[0]
    stride = bits.shape[1]
    flags = np.zeros(width, dtype=bits.dtype)
    for i in range(n):
        if i + _PREFETCH < n:
            for c in range(0, width, 8):
                _prefetch(flat, (i + _PREFETCH) * stride + f + c)
            _prefetch(flat, (i + _PREFETCH) * stride + f + width - 1)
        for j in range(width):
            b = bits[i, f + j]
            code = b != 0
            codes[f + j, i] = np.uint8(code)
            flags[j] |= b ^ (one * bits.dtype.type(code))
    other = 0
    for j in range(width):
        other |= flags[j] != 0
    if other:
        return False
    for j in range(width):
        row = codes[f + j]
        count = 0
        for i in range(n):
            count += row[i]
        ones[f + j] = count
    return True


@njit(cache=True)
def _block_codes(bits, flat, f0, f1, one, codes, ones):
    """:func:`_group_codes` over the columns ``[f0, f1)``: groups of 16, of 8, then single
    columns. Returns False after the first group holding another value."""
    f = f0
    while f + 16 <= f1:
        if not _group_codes(bits, flat, f, 16, one, codes, ones):
            return False
        f += 16
    while f + 8 <= f1:
        if not _group_codes(bits, flat, f, 8, one, codes, ones):
            return False
        f += 8
    while f < f1:
        if not _group_codes(bits, flat, f, 1, one, codes, ones):
            return False
        f += 1
    return True


@njit(nogil=True, cache=True)
def binary_blocks(bits, one, starts, width, codes, n_zero, edges, n_edges, float32_ok,
                  has_nan, extreme, lows, lows_known):
    """The bins of the blocks of ``width`` columns from ``starts`` (in order) while all their
    values are +0.0 or 1.0; returns how many blocks are done.

    ``bits`` (n, p): ``X`` as unsigned integers (:func:`one_bits`), ``one`` the bits of
    1.0. For each column ``f`` of a block done, as
    :func:`gpurpo.tree.binning._mapper._bin_by_blocks` fills them: ``codes[f]``,
    ``n_zero[f]``, ``edges[f, :n_edges[f]]``, ``float32_ok[f]``, ``has_nan[f]``,
    ``extreme[f]``, the lows of its bins in ``lows[f]`` and ``lows_known[f]``. The
    first block holding another value is left as it is (its codes partly written).
    """
    n, p = bits.shape
    flat = bits.reshape(-1)
    ones = np.empty(p, dtype=np.int64)
    agree = float32_codes_agree(np.float32(0.0), np.float32(1.0))
    for k in range(starts.shape[0]):
        f0 = starts[k]
        f1 = min(p, f0 + width)
        if not _block_codes(bits, flat, f0, f1, one, codes, ones):
            return k
        for f in range(f0, f1):
            split = 0 < ones[f] and ones[f] < n
            n_edges[f] = 1 if split else 0
            if split:
                edges[f, 0] = 0.5
            float32_ok[f] = agree if split else True
            has_nan[f] = False
            extreme[f] = False
            n_zero[f] = n - ones[f] if split else n
            if ones[f] == n:
                codes[f, :] = 0  # 1.0 alone: one bin
            lows[f, 0] = 0.0 if ones[f] < n else 1.0
            lows[f, 1] = 1.0
            lows_known[f] = True
    return starts.shape[0]
