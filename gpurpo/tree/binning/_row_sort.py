"""Sorting the rows of a float32 block, as the binning's edge fit needs them.

The edge fit of :class:`gpurpo.tree.binning.BinMapper` sorts the float32
values of the features that bucket selection leaves (few distinct values,
heavy tails, infinite values: :mod:`gpurpo.tree.binning._bucket_edges`, in
:func:`gpurpo.tree.binning._mapper._bin_by_blocks`). NumPy sorts them
with x86-simd-sort, whose AVX-512 partition stores each vector with a masked
compress to memory (``vpcompressps``): about 2.5 ns per value on Intel Xeons,
but that instruction is microcoded on AMD Zen 4, where the same sort takes
15 ns per value, slower than a scalar sort (x86-simd-sort issue #6; NumPy pull
request #32690). A least-significant-digit radix sort (Knuth, TAOCP vol. 3,
section 5.2.5) of the values' order-preserving 32-bit keys takes 4.2 ns per
value there (one thread, rows of 12,920 and 30,993 values).

:func:`sort_rows` therefore times both sorts once per process on a small
random block and keeps the faster one. Both give the same sorted values, NaN
last, so the choice changes the speed of a fit, never its result.
"""

from __future__ import annotations

import functools
import time

import numpy as np
from numba import njit

RADIX_BITS = 11
_RADIX = 1 << RADIX_BITS
_DIGIT = np.uint32(_RADIX - 1)
_PASSES = 3  # 3 x 11 bits cover the 32-bit keys
_SIGN = np.uint32(0x80000000)
_ABS = np.uint32(0x7FFFFFFF)
_INF_BITS = np.uint32(0x7F800000)
_QUIET_NAN_BITS = np.uint32(0x7FC00000)


@njit(inline="always", cache=True)
def _key(bits):
    """The order-preserving unsigned key of a float32's ``bits``.

    A positive value gets its sign bit set, a negative one all its bits
    flipped, so that unsigned order is the order of the values with -0.0
    just below 0.0. Every NaN is given the bits of the positive quiet NaN
    first, whose key exceeds +inf's: NaN sort last, as in NumPy.
    """
    if (bits & _ABS) > _INF_BITS:
        bits = _QUIET_NAN_BITS
    flip = np.uint32(np.uint32(0) - (bits >> np.uint32(31)))
    return np.uint32(bits ^ (flip | _SIGN))


@njit(inline="always", cache=True)
def _value_bits(key):
    """The float32 bits of a key of :func:`_key` (its inverse)."""
    flip = np.uint32(np.uint32(0) - (key >> np.uint32(31)))
    return np.uint32(key ^ (~flip | _SIGN))


@njit(inline="always", cache=True)
def _digit(key, d):
    return np.intp((key >> np.uint32(RADIX_BITS * d)) & _DIGIT)


@njit(inline="always", cache=True)
def bucket_starts(counts):
    """Replace the digit counts of a radix pass by the first position of each bucket
    (their exclusive prefix sums), where its scatter writes next."""
    run = 0
    for g in range(counts.shape[0]):
        count = counts[g]
        counts[g] = run
        run += count


@njit(nogil=True, cache=True)
def radix_sort_rows(values, out, scratch):
    """``out[r]`` = the bits of ``values[r]``'s float32 values sorted increasingly, NaN last.

    ``values`` and ``out`` are the uint32 views of C-ordered float32 blocks
    of shape (q, n); ``scratch`` is uint32 of shape (2, n). Each row: one
    pass makes the keys of :func:`_key` and the histograms of their three
    11-bit digits, then a stable counting scatter per digit, least
    significant first (LSD radix sort), skipping a digit that all keys share.
    The last scatter writes the values' bits back from the keys into ``out``.
    """
    q, n = values.shape
    hist = np.zeros((_PASSES, _RADIX), dtype=np.int64)
    keys = scratch[0]
    other = scratch[1]
    for r in range(q):
        row = values[r]
        dest = out[r]
        hist[:] = 0
        for i in range(n):
            k = _key(row[i])
            keys[i] = k
            for d in range(_PASSES):
                hist[d, _digit(k, d)] += 1
        if n == 0:
            continue
        last = -1
        for d in range(_PASSES):
            if hist[d, _digit(keys[0], d)] != n:
                last = d
        if last < 0:
            for i in range(n):
                dest[i] = _value_bits(keys[i])
            continue
        src = keys
        dst = other
        for d in range(last + 1):
            h = hist[d]
            if h[_digit(src[0], d)] == n:
                continue
            bucket_starts(h)
            if d == last:
                for i in range(n):
                    k = src[i]
                    g = _digit(k, d)
                    dest[h[g]] = _value_bits(k)
                    h[g] += 1
            else:
                for i in range(n):
                    k = src[i]
                    g = _digit(k, d)
                    dst[h[g]] = k
                    h[g] += 1
                src, dst = dst, src


def _radix_sort(values: np.ndarray, out: np.ndarray) -> None:
    scratch = np.empty((2, values.shape[1]), dtype=np.uint32)
    radix_sort_rows(values.view(np.uint32), out.view(np.uint32), scratch)


def _numpy_sort(values: np.ndarray, out: np.ndarray) -> None:
    np.copyto(out, values)
    out.sort(axis=1)


@functools.cache
def radix_is_faster() -> bool:
    """Whether :func:`radix_sort_rows` sorts a random (8, 8,192) float32 block
    faster than NumPy on this machine (best of 5 alternating runs each; the
    first run of each, which loads the numba kernel, is not timed)."""
    values = np.random.default_rng(0).standard_normal((8, 8192)).astype(np.float32)
    out = np.empty_like(values)
    best = {_radix_sort: np.inf, _numpy_sort: np.inf}
    for run in range(6):
        for sort in best:
            start = time.perf_counter()
            sort(values, out)
            if run:
                best[sort] = min(best[sort], time.perf_counter() - start)
    return bool(best[_radix_sort] < best[_numpy_sort])


def sort_rows(values: np.ndarray, out: np.ndarray, radix: bool | None = None) -> None:
    """``out[...] = np.sort(values, axis=1)`` for C-ordered float32 blocks of one shape.

    By the radix sort where ``radix`` (default: :func:`radix_is_faster`), else
    by NumPy. The sorted values are the same (NaN last; -0.0 and 0.0, which
    compare equal, may come in either order). Callers that sort from several
    threads decide ``radix`` first, so that the timing runs alone.
    """
    if radix is None:
        radix = radix_is_faster()
    if values.shape[1] and radix:
        _radix_sort(values, out)
    else:
        _numpy_sort(values, out)
