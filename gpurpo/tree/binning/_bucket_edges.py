"""Quantile bin edges of float32 rows by bucket selection, without sorting the rows.

The edge rule of :func:`gpurpo.tree.binning._sorted_edges.edges_from_sorted` reads a
sorted row at ``max_bins - 1`` ranks only: the value at each rank, the end of
its run of ties and the next distinct value. With more than ``max_bins``
distinct values (the usual case for continuous features), this module finds
those few values without sorting the whole row: a selection of many ranks by
one distribution pass, as in a bucket sort (Knuth, TAOCP vol. 3, section
5.2.5, distribution counting; section 5.3.3 for selection):

1. the row's minimum and maximum (NaN apart) come with the transposition that
   makes the row (:func:`gpurpo.tree.binning._sorted_edges.transpose_block_to_float32`),
   or from :func:`row_ranges`;
2. 256 evenly spaced values estimate how crowded the buckets at the ranks
   would be (:func:`_crowding`) with buckets of equal width in value and with
   buckets of equal width in the values' order-preserving 32-bit keys (about
   equal shares of each binade: skewed and heavy-tailed values); the less
   crowded scale is kept, with ``n / 2``, ``n`` or ``2 n`` buckets, the fewest
   expected to gather under a quarter of the values, else the row is sorted;
3. one pass gives each value its bucket and counts them. The bucket is a
   non-decreasing function of the value (rounding is monotone), so every
   value of a bucket is smaller than every value of a later one, and equal
   values share a bucket;
4. one walk over the counts finds the bucket of each rank, and marks it and
   the non-empty bucket after it (which holds the next distinct value);
5. one pass lists the values of the marked buckets and gathers them bucket by
   bucket; each bucket of a rank is sorted (sorting networks of 8 and 16
   inputs, about 5 values on average for normal values), and the rule of
   ``edges_from_sorted`` reads the sorted row through the buckets;
6. the codes of the row's values (``#{edges < x}``, when the caller wants
   them) come from the same bucket ids: each edge lies between two
   consecutive distinct values, so a table per bucket gives the edges below
   all of its values, and a comparison settles the values of a bucket with
   an edge inside it (:func:`_codes_from_buckets`).

More than ``max_bins`` non-empty buckets prove more than ``max_bins``
distinct values. Rows with fewer, with crowded buckets (a feature mostly
zero, values of Student's t with 3 degrees of freedom), with an infinite or
extreme value, or with at most 512 values are left to the caller, who sorts
them (:func:`needs_sort`); the estimate costs such a row about 3 us. Both
routes give the same edges, bit for bit. The rows' codes come from their
buckets at the same time (step 6), so a feature is read once for its edges
and its codes.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from gpurpo.tree._borrow import borrow, borrow_all
from gpurpo.tree.binning._code_tables import float32_codes_agree
from gpurpo.tree.binning._quantile_rule import quantile_rank
from gpurpo.tree.binning._row_sort import _key, radix_sort_rows

_FLOAT32_MAX = np.float32(np.finfo(np.float32).max)
# buckets sorted by a sorting network up to this size, by the radix sort above
_SMALL_BUCKET = 16
# rows whose marked buckets hold more than 1 / _CROWDED of the values are sorted whole
_CROWDED = 4
# the crowding estimate of a row (_crowding): its sample, and its coarse cells
_SAMPLE = 256
_CELLS = 64
# the estimate must be this far below the limit: it errs by some 10 %
_ESTIMATE_MARGIN = 0.85
# row status, out_status[r]
DONE = 0
NEEDS_SORT = 1
# where an edge lies among the buckets (_row_edges, _codes_from_buckets): between two
# values of one bucket; between a bucket's largest value and a later bucket's
# smallest; or between buckets whose two values do not compare as ordered (signed
# zeros), which no bucket table can code
_EDGE_INSIDE = 0
_EDGE_BETWEEN = 1
_EDGE_UNORDERED = 2


@njit(cache=True)
def _exchange(a, b):
    """``(min(a, b), max(a, b))`` by selects (finite values), a comparator of a network.

    A plain function, which LLVM inlines: numba's ``inline="always"`` copied it into
    the 19 comparators of :func:`_sort8`, 1.9 s more of compilation for the binning.
    """
    return (a if a < b else b), (b if a < b else a)


@njit(inline="always", cache=True)
def _sort8(a, lo, c):
    """Sort the ``c <= 8`` finite values ``a[lo:lo + c]`` in place by the 19-comparator
    sorting network for 8 inputs (Knuth, TAOCP vol. 3, section 5.3.4, fig. 49),
    padded with +inf: no data-dependent branch, the values in registers."""
    pad = np.float32(np.inf)
    v0 = a[lo] if c > 0 else pad
    v1 = a[lo + 1] if c > 1 else pad
    v2 = a[lo + 2] if c > 2 else pad
    v3 = a[lo + 3] if c > 3 else pad
    v4 = a[lo + 4] if c > 4 else pad
    v5 = a[lo + 5] if c > 5 else pad
    v6 = a[lo + 6] if c > 6 else pad
    v7 = a[lo + 7] if c > 7 else pad
    v0, v2 = _exchange(v0, v2)
    v1, v3 = _exchange(v1, v3)
    v4, v6 = _exchange(v4, v6)
    v5, v7 = _exchange(v5, v7)
    v0, v4 = _exchange(v0, v4)
    v1, v5 = _exchange(v1, v5)
    v2, v6 = _exchange(v2, v6)
    v3, v7 = _exchange(v3, v7)
    v0, v1 = _exchange(v0, v1)
    v2, v3 = _exchange(v2, v3)
    v4, v5 = _exchange(v4, v5)
    v6, v7 = _exchange(v6, v7)
    v2, v4 = _exchange(v2, v4)
    v3, v5 = _exchange(v3, v5)
    v1, v4 = _exchange(v1, v4)
    v3, v6 = _exchange(v3, v6)
    v1, v2 = _exchange(v1, v2)
    v3, v4 = _exchange(v3, v4)
    v5, v6 = _exchange(v5, v6)
    if c > 0:
        a[lo] = v0
    if c > 1:
        a[lo + 1] = v1
    if c > 2:
        a[lo + 2] = v2
    if c > 3:
        a[lo + 3] = v3
    if c > 4:
        a[lo + 4] = v4
    if c > 5:
        a[lo + 5] = v5
    if c > 6:
        a[lo + 6] = v6
    if c > 7:
        a[lo + 7] = v7


@njit(inline="always", cache=True)
def _sort16(a, lo, c):
    """Sort the ``8 < c <= 16`` finite values ``a[lo:lo + c]`` in place by Batcher's
    odd-even merge network for 16 inputs (63 comparators; Knuth, TAOCP vol. 3, section
    5.3.4, Algorithm M), padded with +inf like :func:`_sort8`: the buckets of the ranks
    of normal values often hold 9 to 16 (an insertion sort mispredicted its way
    through them: a sixth of the per-row kernel's time on a delicious-shaped X)."""
    pad = np.float32(np.inf)
    v0 = a[lo + 0]
    v1 = a[lo + 1]
    v2 = a[lo + 2]
    v3 = a[lo + 3]
    v4 = a[lo + 4]
    v5 = a[lo + 5]
    v6 = a[lo + 6]
    v7 = a[lo + 7]
    v8 = a[lo + 8]
    v9 = a[lo + 9] if c > 9 else pad
    v10 = a[lo + 10] if c > 10 else pad
    v11 = a[lo + 11] if c > 11 else pad
    v12 = a[lo + 12] if c > 12 else pad
    v13 = a[lo + 13] if c > 13 else pad
    v14 = a[lo + 14] if c > 14 else pad
    v15 = a[lo + 15] if c > 15 else pad
    v0, v1 = _exchange(v0, v1)
    v2, v3 = _exchange(v2, v3)
    v4, v5 = _exchange(v4, v5)
    v6, v7 = _exchange(v6, v7)
    v8, v9 = _exchange(v8, v9)
    v10, v11 = _exchange(v10, v11)
    v12, v13 = _exchange(v12, v13)
    v14, v15 = _exchange(v14, v15)
    v0, v2 = _exchange(v0, v2)
    v1, v3 = _exchange(v1, v3)
    v4, v6 = _exchange(v4, v6)
    v5, v7 = _exchange(v5, v7)
    v8, v10 = _exchange(v8, v10)
    v9, v11 = _exchange(v9, v11)
    v12, v14 = _exchange(v12, v14)
    v13, v15 = _exchange(v13, v15)
    v1, v2 = _exchange(v1, v2)
    v5, v6 = _exchange(v5, v6)
    v9, v10 = _exchange(v9, v10)
    v13, v14 = _exchange(v13, v14)
    v0, v4 = _exchange(v0, v4)
    v1, v5 = _exchange(v1, v5)
    v2, v6 = _exchange(v2, v6)
    v3, v7 = _exchange(v3, v7)
    v8, v12 = _exchange(v8, v12)
    v9, v13 = _exchange(v9, v13)
    v10, v14 = _exchange(v10, v14)
    v11, v15 = _exchange(v11, v15)
    v2, v4 = _exchange(v2, v4)
    v3, v5 = _exchange(v3, v5)
    v10, v12 = _exchange(v10, v12)
    v11, v13 = _exchange(v11, v13)
    v1, v2 = _exchange(v1, v2)
    v3, v4 = _exchange(v3, v4)
    v5, v6 = _exchange(v5, v6)
    v9, v10 = _exchange(v9, v10)
    v11, v12 = _exchange(v11, v12)
    v13, v14 = _exchange(v13, v14)
    v0, v8 = _exchange(v0, v8)
    v1, v9 = _exchange(v1, v9)
    v2, v10 = _exchange(v2, v10)
    v3, v11 = _exchange(v3, v11)
    v4, v12 = _exchange(v4, v12)
    v5, v13 = _exchange(v5, v13)
    v6, v14 = _exchange(v6, v14)
    v7, v15 = _exchange(v7, v15)
    v4, v8 = _exchange(v4, v8)
    v5, v9 = _exchange(v5, v9)
    v6, v10 = _exchange(v6, v10)
    v7, v11 = _exchange(v7, v11)
    v2, v4 = _exchange(v2, v4)
    v3, v5 = _exchange(v3, v5)
    v6, v8 = _exchange(v6, v8)
    v7, v9 = _exchange(v7, v9)
    v10, v12 = _exchange(v10, v12)
    v11, v13 = _exchange(v11, v13)
    v1, v2 = _exchange(v1, v2)
    v3, v4 = _exchange(v3, v4)
    v5, v6 = _exchange(v5, v6)
    v7, v8 = _exchange(v7, v8)
    v9, v10 = _exchange(v9, v10)
    v11, v12 = _exchange(v11, v12)
    v13, v14 = _exchange(v13, v14)
    a[lo + 0] = v0
    a[lo + 1] = v1
    a[lo + 2] = v2
    a[lo + 3] = v3
    a[lo + 4] = v4
    a[lo + 5] = v5
    a[lo + 6] = v6
    a[lo + 7] = v7
    a[lo + 8] = v8
    if c > 9:
        a[lo + 9] = v9
    if c > 10:
        a[lo + 10] = v10
    if c > 11:
        a[lo + 11] = v11
    if c > 12:
        a[lo + 12] = v12
    if c > 13:
        a[lo + 13] = v13
    if c > 14:
        a[lo + 14] = v14
    if c > 15:
        a[lo + 15] = v15


@njit(inline="always", cache=True)
def _sort_segment(a, lo, hi, radix_out, radix_scratch):
    """Sort ``a[lo:hi]`` increasingly (finite values) in place: by a sorting network
    of 8 inputs up to 8 values, of 16 up to ``_SMALL_BUCKET``, by the radix sort of
    :mod:`gpurpo.tree.binning._row_sort` above (a crowded bucket, such as the zeros of a
    feature mostly zero: linear time, where a quicksort of many equal values is not)."""
    c = hi - lo
    if c <= 8:
        _sort8(a, lo, c)
        return
    if c <= _SMALL_BUCKET:
        _sort16(a, lo, c)
        return
    keys = a[lo:hi].view(np.uint32).reshape((1, c))
    out = radix_out[:c].view(np.uint32).reshape((1, c))
    radix_sort_rows(keys, out, radix_scratch)
    a[lo:hi] = radix_out[:c]


@njit(nogil=True, cache=True)
def row_ranges(values, out_lo, out_hi):
    """``out_lo[r]``, ``out_hi[r]``: the smallest and largest non-NaN value of row ``r``
    (+inf and -inf for a row of NaN), for the rows of ``values`` that
    :func:`gpurpo.tree.binning._sorted_edges.transpose_block_to_float32` did not give."""
    for r in range(values.shape[0]):
        row = values[r]
        lo = np.float32(np.inf)
        hi = np.float32(-np.inf)
        for i in range(row.shape[0]):
            x = row[i]
            lo = x if x < lo else lo
            hi = x if x > hi else hi
        out_lo[r] = lo
        out_hi[r] = hi


@njit(nogil=True, cache=True)
def _count_nan(row):
    count = 0
    for i in range(row.shape[0]):
        count += row[i] != row[i]
    return count


@njit(inline="always", cache=True)
def _previous_nonempty(counts, b):
    """The last non-empty bucket before ``b`` (-1 if none)."""
    b0 = b - 1
    while b0 >= 0 and counts[b0] == 0:
        b0 -= 1
    return b0


@njit(cache=True)
def _value_scale(lo, hi, nb):
    """Buckets per unit of value, ``nb / (hi - lo)`` in float32, for :func:`_bucket_ids`
    (not finite for a range too narrow or too wide: the caller then gives up)."""
    return np.float32(nb / (np.float64(hi) - np.float64(lo)))


@njit(nogil=True, cache=True)
def _bucket_ids(row, lo, scale, nb, n_nan, ids):
    """``ids[i]``: the bucket ``min(floor((row[i] - lo) * scale), nb - 1)`` of each
    value, ``nb`` for NaN. In float32: rounding is monotone, so the index still
    never decreases as the value grows (and the loop vectorises)."""
    top = np.float32(nb - 1)
    if n_nan == 0:
        for i in range(row.shape[0]):
            t = (row[i] - lo) * scale
            ids[i] = np.uint32(t if t < top else top)
        return
    for i in range(row.shape[0]):
        x = row[i]
        if x != x:
            ids[i] = np.uint32(nb)
        else:
            t = (x - lo) * scale
            ids[i] = np.uint32(t if t < top else top)


@njit(inline="always", cache=True)
def _segment_min(values, first, c):
    m = values[first]
    for t in range(first + 1, first + c):
        m = values[t] if values[t] < m else m
    return m


@njit(inline="always", cache=True)
def _segment_max(values, first, c):
    m = values[first]
    for t in range(first + 1, first + c):
        m = values[t] if values[t] > m else m
    return m


@njit(nogil=True, cache=True)
def _key_bucket_ids(row, lo, hi, nb, ids):
    """``ids[i]``: the bucket of ``row[i]`` among ``nb`` of equal width in the space of
    the order-preserving 32-bit keys of :func:`gpurpo.tree.binning._row_sort._key` (``nb``
    for NaN): about equal shares of each binade, for heavy-tailed or skewed values
    that equal widths in value crowd into a few buckets. Monotone as well."""
    key_lo = _key(np.float32(lo).view(np.uint32))
    key_hi = _key(np.float32(hi).view(np.uint32))
    scale = nb / (np.float64(key_hi - key_lo) + 1.0)
    for i in range(row.shape[0]):
        x = row[i]
        if x != x:
            ids[i] = np.uint32(nb)
        else:
            # -0.0 keys below 0.0, the minimum the comparisons of the range may keep
            offset = max(np.int64(_key(np.float32(x).view(np.uint32))) - np.int64(key_lo), 0)
            ids[i] = np.uint32(np.float64(offset) * scale)


@njit(nogil=True, cache=True)
def _crowding(row, lo, hi, nb, in_keys, sample_ids, cells):
    """The density ratio ``R = C sum_c p_c^2`` of the row's values over ``C = _CELLS``
    coarse cells of its buckets (``p_c``: the share in cell ``c`` of ``_SAMPLE``
    evenly spaced values). A rank falls in a cell as often as the cell holds
    values, so R is the mean density at the ranks over the mean density (1
    for uniform values, 2.5 for normal ones), and ``R n / nb`` estimates the
    mean count of the buckets that hold the ranks (within some 10 % of the
    counts met on normal, uniform, exponential and lognormal rows)."""
    n_all = row.shape[0]
    step = max(n_all // _SAMPLE, 1)
    sample = row[::step][:_SAMPLE]
    if in_keys:
        _key_bucket_ids(sample, lo, hi, nb, sample_ids)
    else:
        scale = _value_scale(lo, hi, nb)
        if not np.isfinite(scale):
            return np.inf
        _bucket_ids(sample, lo, scale, nb, 1, sample_ids)  # 1: the sample may hold NaN
    cells[:] = 0
    m = 0
    for i in range(sample.shape[0]):
        b = np.int64(sample_ids[i])
        if b < nb:
            cells[b * _CELLS // nb] += 1
            m += 1
    if m == 0:
        return np.inf
    squares = 0.0
    for c in range(_CELLS):
        squares += np.float64(cells[c]) * cells[c]
    return _CELLS * squares / (np.float64(m) * m)


@njit(nogil=True, cache=True)
def _select_buckets(row, lo, hi, n, nb, n_nan, max_bins, in_keys, scratch):
    """Bucket ids and counts of ``row`` in ``nb`` buckets (equal widths in value, or in
    keys with ``in_keys``), the bucket of each rank, the marked buckets and, for
    each bucket of a rank, the non-empty bucket after it (``following``; ``nb``
    for none).

    Returns ``(n_marked, before_last)``: the number of marked buckets (listed in
    ``marked``) and the non-empty bucket before the last one (-1 for none, or
    when the last holds no rank); ``(-1, -1)`` when the row has at most
    ``max_bins`` non-empty buckets or its marked buckets hold more than
    ``1 / _CROWDED`` of its values.
    """
    (counts, segment, cursor, marks, ids, picked, gathered, ranks, rank_bucket, rank_start,
     following, marked, radix_out, radix_scratch, cells) = scratch
    n_all = row.shape[0]
    if in_keys:
        _key_bucket_ids(row, lo, hi, nb, ids)
    else:
        scale = _value_scale(lo, hi, nb)
        if not np.isfinite(scale):
            return -1, -1
        _bucket_ids(row, lo, scale, nb, n_nan, ids)
    counts[: nb + 1] = 0
    for i in range(n_all):
        counts[ids[i]] += 1
    n_nonempty = 0
    for b in range(nb):
        n_nonempty += counts[b] > 0
    if n_nonempty <= max_bins:
        return -1, -1

    # one walk over the buckets finds the bucket of each quantile's rank (and the
    # rank of that bucket's first value) and marks, in increasing order, those
    # buckets and the non-empty bucket after each, which holds the next distinct
    # value (its minimum); after the last, the one before it, which holds the value
    # below a run that ends the row (its maximum)
    marks[: nb + 1] = 0
    n_marked = 0
    run = 0
    j = 1
    pending = -1  # the last bucket of a rank, until a non-empty bucket follows it
    for b in range(nb):
        c = counts[b]
        if pending >= 0 and c > 0:
            following[pending] = b
            marks[b] = 1
            marked[n_marked] = b
            n_marked += 1
            pending = -1
        run += c
        if ranks[j] < run:
            if not marks[b]:
                marks[b] = 1
                marked[n_marked] = b
                n_marked += 1
            pending = b
            while ranks[j] < run:
                rank_bucket[j] = b
                rank_start[j] = run - c
                j += 1
    before_last = -1
    if pending >= 0:  # the last non-empty bucket holds a rank: mark the one before it
        following[pending] = nb
        before_last = _previous_nonempty(counts, pending)
        if before_last >= 0 and not marks[before_last]:
            marks[before_last] = 1
            marked[n_marked] = before_last
            n_marked += 1
    total = 0
    for t in range(n_marked):
        b = marked[t]
        segment[b] = total
        cursor[b] = total
        total += counts[b]
    if total > n // _CROWDED:
        return -1, -1
    return n_marked, before_last


@njit(nogil=True, cache=True)
def _row_edges(row, lo, hi, n_nan, max_bins, out_row, scratch, edge_meta):
    """Edges of one row with more than ``2 max(max_bins, _SAMPLE)`` non-NaN values and
    a finite range.

    Buckets of equal width in value, or (heavy tails, skewed values) in the
    space of the values' order-preserving keys, as a sample estimates them the
    less crowded. Returns ``(n_edges, float32_ok)``, or ``(-1, False)`` when
    the buckets do not select (at most ``max_bins`` non-empty buckets: there
    may be at most ``max_bins`` distinct values; or crowded buckets, such as
    the zeros of a feature mostly zero): the caller sorts the row.
    """
    # views without reference counts (the caller holds the arrays; see gpurpo.tree._borrow)
    scratch = borrow_all(scratch)
    edge_meta = borrow_all(edge_meta)
    row = borrow(row)
    out_row = borrow(out_row)
    (counts, segment, cursor, marks, ids, picked, gathered, ranks, rank_bucket, rank_start,
     following, marked, radix_out, radix_scratch, cells) = scratch
    edge_bucket, edge_kind, edge_above = edge_meta
    n_all = row.shape[0]
    n = n_all - n_nan
    if ranks[0] != n:  # ranks[0] holds the n the ranks are of
        ranks[0] = n
        for j in range(1, max_bins):
            ranks[j] = quantile_rank(j, n, max_bins)
        ranks[max_bins] = n  # beyond every rank: ends the walk below
    # equal widths in value, unless their buckets at the ranks would crowd
    # (estimated on a sample) more than equal widths in keys; and the fewest
    # buckets (n / 2, n or 2 n) expected to leave under 1 / _CROWDED of the
    # values to gather (2 buckets gathered per rank)
    sample_ids = ids[n_all - _SAMPLE :]
    limit = n / _CROWDED
    per_ratio = 2.0 * (max_bins - 1) * n / _ESTIMATE_MARGIN  # gathered values, times nb / R
    nb = n // 2
    ratio = _crowding(row, lo, hi, nb, False, sample_ids, cells)
    use_keys = False
    if per_ratio * ratio / nb > limit:
        in_keys = _crowding(row, lo, hi, nb, True, sample_ids, cells)
        use_keys = in_keys < ratio
        ratio = min(ratio, in_keys)
    expected = per_ratio * ratio
    if expected / nb > limit:
        nb = n
    if expected / nb > limit:
        nb = 2 * n
    if expected / nb > limit:
        return -1, False, 0, 0
    n_marked, before_last = _select_buckets(row, lo, hi, n, nb, n_nan, max_bins, use_keys,
                                            scratch)
    if n_marked < 0:
        return -1, False, 0, 0

    # gather the marked buckets, each into its own segment: first the positions
    # of their values (branch-free), then the values
    n_picked = 0
    for i in range(n_all):
        picked[n_picked] = i
        n_picked += marks[ids[i]]
    for t in range(n_picked):
        i = np.uint64(picked[t])  # unsigned indices: no negative-index fix-ups
        b = ids[i]
        gathered[np.uint64(cursor[b])] = row[i]
        cursor[b] += 1
    previous_b = -1
    for j in range(1, max_bins):
        b = rank_bucket[j]
        if b != previous_b and counts[b] > 1:
            _sort_segment(gathered, segment[b], segment[b] + counts[b], radix_out,
                          radix_scratch)
        previous_b = b

    # the rule of edges_from_sorted, on the sorted row seen through the buckets
    e = 0
    ok = True
    last = -1  # rank (in the sorted row) of the last value an edge was placed after
    run_end = -1  # rank of the end of the last run of ties walked (its ranks repeat its edge)
    for j in range(1, max_bins):
        if ranks[j] <= run_end:
            continue
        b = rank_bucket[j]
        first = segment[b]
        c = counts[b]
        k = ranks[j] - rank_start[j]
        i = k
        while i + 1 < c and gathered[first + i + 1] == gathered[first + i]:
            i += 1
        run_end = rank_start[j] + i
        above_bucket = b  # the bucket of the value above the edge
        inside = True  # and the value below it in that bucket too
        if i + 1 < c:
            below = gathered[first + i]
            above = gathered[first + i + 1]
            at = rank_start[j] + i
        else:
            b2 = following[b]
            if b2 < nb:
                below = gathered[first + i]
                above = _segment_min(gathered, segment[b2], counts[b2])
                at = rank_start[j] + i
                above_bucket = b2
                inside = False
            else:
                # the quantile falls in the largest value: the edge goes below its run
                i = k
                while i > 0 and gathered[first + i - 1] == gathered[first + i]:
                    i -= 1
                if i > 0:
                    below = gathered[first + i - 1]
                    above = gathered[first + i]
                    at = rank_start[j] + i - 1
                else:
                    b0 = before_last  # b is the last non-empty bucket
                    if b0 < 0:
                        continue
                    below = _segment_max(gathered, segment[b0], counts[b0])
                    above = gathered[first]
                    at = rank_start[j] - 1
                    inside = False
        if at <= last:
            continue
        out_row[e] = 0.5 * (np.float64(below) + np.float64(above))
        ok = ok and float32_codes_agree(below, above)
        edge_bucket[e] = above_bucket
        edge_kind[e] = (_EDGE_INSIDE if inside else
                        (_EDGE_BETWEEN if below < above else _EDGE_UNORDERED))
        edge_above[e] = above
        e += 1
        last = at
    return e, ok, nb, n_picked


@njit(nogil=True, cache=True)
def _codes_from_buckets(row, ids, nb, n_edges, edge_meta, missing_bin, picked, n_picked, base,
                        above, out):
    """``out[i] = #{edges < row[i]}`` (``missing_bin`` for NaN) for the very values whose
    edges :func:`_row_edges` placed, from their bucket ids: a table read per value
    instead of :func:`gpurpo.tree.binning._code_tables.bin_codes_fitted`'s value-to-cell
    arithmetic (its tie fix-ups for ``float32_ok`` False still apply).

    Each edge lies between two consecutive distinct values of the row. When they
    sit in different buckets (``_EDGE_BETWEEN``), the edge is above every value of
    the lower bucket and below every value of the upper one (buckets are monotone
    in value), so it counts for the whole upper bucket and the buckets after it:
    ``base[b]`` is the number of edges below every value of bucket ``b``. When both
    sit in one bucket (``_EDGE_INSIDE``, a bucket of a rank, so marked: its values
    are among the ``picked`` positions), a value of that bucket is above the edge
    exactly when it is at least the value just above it (every value of the row
    is at most the one below or at least the one above): ``above[b]``, +inf for the
    other buckets, adds one to those codes. Returns False, having written nothing,
    when a bucket holds two inside edges or an edge is ``_EDGE_UNORDERED``: the
    caller codes the row by value. ``above`` holds +inf on entry and on return;
    ``base`` is scratch.
    """
    edge_bucket, edge_kind, edge_above = edge_meta
    last = -1  # the edges' buckets never decrease
    fixed = -1  # the bucket of the last inside edge: no later edge may lie in it
    for k in range(n_edges):
        b = edge_bucket[k]
        if edge_kind[k] == _EDGE_UNORDERED or b < last or b <= fixed:
            return False
        last = b
        if edge_kind[k] == _EDGE_INSIDE:
            fixed = b
    pos = 0  # base[:pos] is filled
    below_all = 0
    for k in range(n_edges):
        b = edge_bucket[k]
        if pos < b:
            base[pos:b] = below_all  # a slice: 4x faster than a loop of byte stores
            pos = b
        if edge_kind[k] == _EDGE_INSIDE:
            base[b] = below_all
            above[b] = edge_above[k]
            pos = b + 1
        below_all += 1
    base[pos:nb] = below_all
    base[nb] = missing_bin  # NaN's id
    for i in range(row.shape[0]):
        out[i] = base[ids[i]]
    for t in range(n_picked):
        i = np.uint64(picked[t])  # unsigned: no negative-index fix-ups
        out[i] += np.uint8(row[i] >= above[ids[i]])
    for k in range(n_edges):
        above[edge_bucket[k]] = np.float32(np.inf)
    return True


# values of a row that _two_valued_codes checks before it reads the whole row
_TWO_VALUED_PROBE = 64


@njit(cache=True)
def _two_valued_codes(row, lo, hi, missing_bin, out):
    """Codes of a row whose non-NaN values are all ``lo < hi`` (a binary feature's): 1 for
    ``hi``, 0 for ``lo``, ``missing_bin`` for NaN (its one edge lies between the two).

    Returns the row's number of NaN, or -1 when it holds another value (``out``
    then holds garbage); its first ``_TWO_VALUED_PROBE`` values are checked
    first, so that a continuous row costs a few reads.
    """
    n = row.shape[0]
    for i in range(min(n, _TWO_VALUED_PROBE)):
        v = row[i]
        if v != lo and v != hi and not np.isnan(v):
            return -1
    # one pass with no early exit, which vectorises
    other = 0
    n_nan = 0
    nan_code = np.uint8(missing_bin)
    for i in range(n):
        v = row[i]
        is_hi = v == hi
        is_nan = v != v
        other += np.int64(not (is_hi or v == lo or is_nan))
        n_nan += np.int64(is_nan)
        out[i] = nan_code if is_nan else np.uint8(is_hi)
    return -1 if other > 0 else n_nan


@njit(nogil=True, cache=True)
def bucket_edges_rows(values, lo, hi, max_bins, out_edges, out_n_edges, out_float32_ok,
                      out_has_nan, out_extreme, out_status, missing_bin, out_codes, out_coded):
    """Edges of each float32 row of ``values`` (q, n), as :func:`edges_from_sorted`
    gives them for the sorted rows, where bucket selection applies.

    ``lo[r]`` and ``hi[r]`` are row ``r``'s smallest and largest non-NaN
    values (:func:`row_ranges`). Fills, for every row: ``out_has_nan[r]``,
    ``out_extreme[r]`` (a non-NaN magnitude of at least float32's largest,
    or infinite; see :func:`gpurpo.tree.binning._mapper._bin_by_blocks`) and
    ``out_status[r]``. For the rows of status :data:`DONE`,
    ``out_edges[r, :out_n_edges[r]]`` and ``out_float32_ok[r]``; the rows of
    status :data:`NEEDS_SORT` (at most ``2 max(max_bins, _SAMPLE)`` non-NaN values, an
    extreme value, a single value, at most ``max_bins`` non-empty buckets,
    or marked buckets holding more than a quarter of the values) are left
    for the caller to sort. A row of two distinct values (a binary feature)
    takes their midpoint, the one edge of the sorted row, and its codes in one
    pass, whatever its length.

    ``out_codes`` (q, n) uint8, or of shape (0, n) for none: the codes of the rows
    done, from their buckets (:func:`_codes_from_buckets`), where
    ``out_coded[r]`` says so (False for the other rows); NaN coded ``missing_bin``.
    Those codes compare the float32 values: for a row whose ``out_float32_ok``
    is False, :func:`gpurpo.tree.binning._code_tables.bin_codes_fitted` still compares
    the values next to a tie edge in float64.
    """
    q, n_all = values.shape
    n_buckets = 2 * n_all + 1
    coding = out_codes.shape[0] > 0
    edge_meta = (
        np.empty(max_bins, dtype=np.int64),  # the bucket of the value above each edge
        np.empty(max_bins, dtype=np.uint8),  # _EDGE_INSIDE, _EDGE_BETWEEN or _EDGE_UNORDERED
        np.empty(max_bins, dtype=np.float32),  # the value above each edge
    )
    base = np.empty(n_buckets + 1, dtype=np.uint8)
    above = np.full(n_buckets + 1, np.inf, dtype=np.float32)
    scratch = (
        np.empty(n_buckets, dtype=np.int32),  # counts
        np.empty(n_buckets, dtype=np.int32),  # segment
        np.empty(n_buckets, dtype=np.int32),  # cursor
        np.empty(n_buckets, dtype=np.uint8),  # marks
        np.empty(n_all, dtype=np.uint32),  # ids
        np.empty(n_all + 1, dtype=np.int32),  # picked
        np.empty(n_all, dtype=np.float32),  # gathered
        np.full(max_bins + 1, -1, dtype=np.int64),  # ranks (ranks[0]: their n)
        np.empty(max_bins, dtype=np.int64),  # rank_bucket
        np.empty(max_bins, dtype=np.int64),  # rank_start
        np.empty(n_buckets, dtype=np.int32),  # following
        np.empty(2 * max_bins, dtype=np.int64),  # marked
        np.empty(n_all, dtype=np.float32),  # radix_out
        np.empty((2, n_all), dtype=np.uint32),  # radix_scratch
        np.empty(_CELLS, dtype=np.int64),  # cells
    )
    two_codes = np.empty(0 if coding else n_all, dtype=np.uint8)
    for r in range(q):
        row = values[r]
        out_status[r] = NEEDS_SORT
        if coding:
            out_coded[r] = False
        extreme = abs(lo[r]) >= _FLOAT32_MAX or abs(hi[r]) >= _FLOAT32_MAX
        if lo[r] < hi[r] and not extreme:
            # two distinct values (binary features): one edge, their midpoint, as the
            # sorted row gives it, and the codes in the same pass, with no sort
            n_nan = _two_valued_codes(row, lo[r], hi[r], missing_bin,
                                      out_codes[r] if coding else two_codes)
            if n_nan >= 0:
                out_has_nan[r] = n_nan > 0
                out_extreme[r] = False
                out_edges[r, 0] = 0.5 * (np.float64(lo[r]) + np.float64(hi[r]))
                out_n_edges[r] = 1
                out_float32_ok[r] = float32_codes_agree(lo[r], hi[r])
                out_status[r] = DONE
                if coding:
                    out_coded[r] = True
                continue
        n_nan = _count_nan(row)
        n = n_all - n_nan
        out_has_nan[r] = n_nan > 0
        out_extreme[r] = n > 0 and extreme
        if n <= max(2 * max_bins, 2 * _SAMPLE) or out_extreme[r] or lo[r] == hi[r]:
            continue
        n_edges, ok, nb, n_picked = _row_edges(row, lo[r], hi[r], n_nan, max_bins,
                                               out_edges[r], scratch, edge_meta)
        if n_edges >= 0:
            out_n_edges[r] = n_edges
            out_float32_ok[r] = ok
            out_status[r] = DONE
            if coding:
                out_coded[r] = _codes_from_buckets(row, scratch[4], nb, n_edges, edge_meta,
                                                   missing_bin, scratch[5], n_picked, base,
                                                   above, out_codes[r])


def needs_sort(status: np.ndarray) -> np.ndarray:
    """The rows :func:`bucket_edges_rows` left to be sorted."""
    return np.flatnonzero(status == NEEDS_SORT)
