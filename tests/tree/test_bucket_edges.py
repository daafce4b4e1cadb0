"""Bin edges by bucket selection (gpurpo.tree.binning._bucket_edges) against the edges of sorted rows.

The kernel reads only the buckets that hold the quantiles' ranks and their
neighbours; it must place exactly the edges :func:`edges_from_sorted` places on
``np.sort``'s rows (bit for bit, with the same float32 verdict), report NaN and
extreme values, and leave to the caller (status NEEDS_SORT) only the rows it
cannot prove to hold more than ``max_bins`` distinct values. Each test checks
that the rows it means to exercise went the way it intends, so that a kernel
that sent everything to the sort could not pass it.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpurpo.backend import NUMPY
from gpurpo.tree import BinMapper
from gpurpo.tree.binning._bucket_edges import DONE, NEEDS_SORT, bucket_edges_rows, row_ranges
from gpurpo.tree.binning._quantile_rule import quantile_edges
from gpurpo.tree.binning._sorted_edges import edges_from_sorted

F32_MAX = np.finfo(np.float32).max
MISSING = 255  # the code of NaN in the codes from buckets


def _sorted_rule(values: np.ndarray, max_bins: int):
    """The reference: the edges of each row sorted by NumPy."""
    q = values.shape[0]
    out = np.full((q, max(max_bins - 1, 1)), np.nan)
    n_edges = np.zeros(q, dtype=np.int64)
    ok = np.zeros(q, dtype=np.bool_)
    edges_from_sorted(np.sort(values, axis=1), max_bins, out, n_edges, ok)
    return out, n_edges, ok


def _bucket_rule(values: np.ndarray, max_bins: int):
    q = values.shape[0]
    lo = np.empty(q, dtype=np.float32)
    hi = np.empty(q, dtype=np.float32)
    row_ranges(values, lo, hi)
    out = np.full((q, max(max_bins - 1, 1)), np.nan)
    n_edges = np.full(q, -7, dtype=np.int64)
    ok = np.zeros(q, dtype=np.bool_)
    has_nan = np.zeros(q, dtype=np.bool_)
    extreme = np.zeros(q, dtype=np.bool_)
    status = np.full(q, -1, dtype=np.int8)
    codes = np.full(values.shape, 77, dtype=np.uint8)
    coded = np.ones(q, dtype=np.bool_)
    bucket_edges_rows(values, lo, hi, max_bins, out, n_edges, ok, has_nan, extreme, status,
                      MISSING, codes, coded)
    return out, n_edges, ok, has_nan, extreme, status, codes, coded


def _assert_same_edges(values: np.ndarray, max_bins: int) -> tuple[np.ndarray, np.ndarray]:
    """Rows done by buckets have the sorted rule's edges, and the rows coded from their
    buckets the codes ``#{edges < x}`` (NumPy's searchsorted on the reference edges,
    NaN coded ``MISSING``); returns the statuses and which rows were coded."""
    values = np.ascontiguousarray(values, dtype=np.float32)
    ref_out, ref_n, ref_ok = _sorted_rule(values, max_bins)
    out, n_edges, ok, has_nan, extreme, status, codes, coded = _bucket_rule(values, max_bins)
    assert set(np.unique(status)) <= {DONE, NEEDS_SORT}
    assert not coded[status != DONE].any()
    for r in np.flatnonzero(status == DONE):
        assert n_edges[r] == ref_n[r], r
        np.testing.assert_array_equal(out[r, : n_edges[r]], ref_out[r, : ref_n[r]])
        assert ok[r] == ref_ok[r], r
        if coded[r]:
            x = values[r].astype(np.float64)
            expected = np.searchsorted(ref_out[r, : ref_n[r]], x, side="left")
            np.testing.assert_array_equal(codes[r], np.where(np.isnan(x), MISSING, expected))
    np.testing.assert_array_equal(has_nan, np.isnan(values).any(axis=1))
    with np.errstate(invalid="ignore"):
        big = np.where(np.isnan(values), 0.0, np.abs(values)) >= F32_MAX
    np.testing.assert_array_equal(extreme, big.any(axis=1))
    return status, coded


def test_continuous_rows_are_done_by_buckets_with_the_sorted_edges():
    """Rows of normal, uniform and exponential values: by buckets of equal width
    (some of them twice as many, for the exponential row)."""
    rng = np.random.default_rng(0)
    n = 12_920
    rows = np.array([
        rng.standard_normal(n),
        rng.exponential(size=n),
        rng.uniform(-1e-30, 1e-30, n),
        -rng.standard_normal(n) * 1e20,
    ], dtype=np.float32)
    for max_bins in (255, 64, 3):
        status, coded = _assert_same_edges(rows, max_bins)
        assert (status == DONE).all(), (max_bins, status)
        assert coded.all(), (max_bins, coded)  # and coded from their buckets


def test_skewed_and_heavy_tailed_rows_take_buckets_of_equal_width_in_keys():
    """Lognormal (sigma 1 and 4), cubed exponential and gamma(0.5) values crowd equal
    widths in value near their minimum; buckets of equal width in the values'
    order-preserving keys (about equal shares of each binade) select them.
    Cauchy values, whose both tails reach far, may go either way: same edges."""
    rng = np.random.default_rng(6)
    n = 12_920
    rows = np.array([
        rng.lognormal(0.0, 1.0, n),
        rng.lognormal(0.0, 4.0, n),
        rng.exponential(size=n) ** 3,
        rng.gamma(0.5, size=n),
        rng.standard_cauchy(n),
    ], dtype=np.float32)
    status, coded = _assert_same_edges(rows, 255)
    assert (status[:4] == DONE).all(), status


def test_ties_at_the_quantiles_and_at_the_largest_value():
    """Runs of equal values across ranks, ending a bucket, ending the row (the edge
    then goes below the run, from the previous bucket's largest value), -0.0 and 0.0.

    24,000 values: on fewer, runs this long crowd the buckets and the rows are sorted.
    """
    rng = np.random.default_rng(1)
    n = 24_000
    rounded = np.round(rng.standard_normal(n), 3)  # about 6 copies of each value
    top = rng.standard_normal(n)
    top[rng.random(n) < 0.1] = top.max() + 1.0  # 10 % share the largest value
    zeros = rng.standard_normal(n)
    zeros[: n // 10] = 0.0
    zeros[: n // 20] = -0.0
    spread = np.repeat(np.linspace(-5.0, 5.0, 4_000), 6)  # a distinct value per bucket
    # ranks 21,082, 21,176, 21,270: the largest value's run (2,800 values) fills the
    # last bucket and holds the ranks from 21,270; their edge goes below the run,
    # after the bucket before it, which holds a run of 120 values where rank 21,082
    # ends too (the same edge, placed once) ...
    run_before = np.concatenate([np.linspace(0.0, 1.0, 21_080), np.full(120, 1.99),
                                 np.full(2_800, 2.0)])
    # ... or 8 distinct values between ranks, in no rank's bucket (the largest of
    # them, not the first gathered, is the edge's floor)
    cluster = 1.9896 - np.array([3, 1, 7, 0, 5, 2, 6, 4]) * 1e-6  # inside one bucket
    cluster_before = np.concatenate([np.linspace(0.0, 1.0, 21_180), cluster,
                                     np.full(2_812, 2.0)])
    rows = [rounded, top, zeros, spread, run_before, cluster_before]
    for max_bins in (255, 128, 17):
        for row in rows:
            status, coded = _assert_same_edges(row[None, :], max_bins)
            assert status[0] == DONE, max_bins


def test_a_run_that_ends_just_before_the_next_rank():
    """The run holding one rank ends one position before the next rank: that next
    rank starts a new run and places its own edge (in both implementations). 24,001
    values: no quantile level ``j n / max_bins`` is an integer, where the reference's
    float64 levels could round to either side."""
    n, max_bins = 24_001, 255
    ranks = (np.arange(1, max_bins) * n + max_bins - 1) // max_bins - 1
    values = np.arange(n, dtype=np.float64)
    for j in (10, 100, 200):
        values[ranks[j - 1] : ranks[j]] = values[ranks[j - 1]]
    row = np.random.default_rng(7).permutation(values)[None, :]
    status, coded = _assert_same_edges(row, max_bins)
    assert status[0] == DONE
    mapper = BinMapper(max_bins=max_bins).fit(row.T)
    np.testing.assert_array_equal(mapper.edges_[0], quantile_edges(values, max_bins, None))


def test_signed_zeros_below_skewed_values_in_key_buckets():
    """Lognormal values with zeros of both signs, 0.0 met first (the range's
    minimum): -0.0's key lies below 0.0's, and its bucket is still the first."""
    rng = np.random.default_rng(8)
    row = rng.lognormal(0.0, 2.0, 24_000)
    row[100] = 0.0
    row[200:260] = -0.0
    status, coded = _assert_same_edges(row[None, :], 255)
    assert status[0] == DONE


def test_adjacent_float32_values_keep_the_float32_verdict():
    """Consecutive float32 numbers: the edges between them are float32 ties
    (:func:`float32_codes_agree` False), as on the sorted rows."""
    start = np.float32(1.5)
    adjacent = start + np.arange(3_000, dtype=np.float32) * np.spacing(start)
    row = np.tile(adjacent, 2)[None, :]
    status, coded = _assert_same_edges(row, 255)
    assert status[0] == DONE
    ok = _bucket_rule(np.ascontiguousarray(row, dtype=np.float32), 255)[2]
    assert not ok[0]


def test_a_crowded_bucket_is_sorted_whole():
    """2,000 values within 1e-4 of zero and 22,000 spread up to 1,000: the first bucket
    holds the crowd (beyond the insertion limit: the radix sort) and a twelfth of the
    ranks."""
    rng = np.random.default_rng(2)
    row = np.concatenate([rng.normal(0.0, 1e-4, 2_000), np.linspace(1.0, 1_000.0, 22_000)])
    rng.shuffle(row)
    status, coded = _assert_same_edges(row[None, :], 255)
    assert status[0] == DONE
    # that bucket holds many edges: no bucket table codes it, the codes come by value
    assert not coded[0]
    X = np.column_stack([row, rng.standard_normal(row.size)])
    mapper = BinMapper()
    codes = mapper.fit_transform(X, NUMPY).codes
    np.testing.assert_array_equal(codes, mapper.transform(X, NUMPY).codes)
    edges = mapper.thresholds_[0, : mapper.n_value_bins_[0] - 1]
    np.testing.assert_array_equal(codes[0], np.searchsorted(edges, row, side="left"))


def test_codes_from_buckets_next_to_float32_ties_compare_in_float64():
    """Adjacent float32 numbers and the float64 midpoints between them: the edges lie at
    such midpoints (``float32_ok`` False), where a float64 value equal to an edge rounds
    up to the float32 above it. The row is coded from its buckets; fit_transform's
    codes are still ``#{edges < x}`` in float64 (the tie comparisons of
    bin_codes_fitted), where the float32 codes differ."""
    start = np.float32(1.5)
    adjacent = start + np.arange(3_000, dtype=np.float32) * np.spacing(start)
    mids = 0.5 * (adjacent[:-1].astype(np.float64) + adjacent[1:].astype(np.float64))
    rng = np.random.default_rng(11)
    x = rng.permutation(np.concatenate([np.tile(adjacent, 2).astype(np.float64), mids]))
    row = np.ascontiguousarray(x.astype(np.float32)[None, :])
    _, n_edges, ok, _, _, status, codes32, coded = _bucket_rule(row, 255)
    assert status[0] == DONE and coded[0] and not ok[0]
    X = np.column_stack([x, rng.standard_normal(x.size)])
    mapper = BinMapper()
    codes = mapper.fit_transform(X, NUMPY).codes
    edges = mapper.thresholds_[0, : mapper.n_value_bins_[0] - 1]
    expected = np.searchsorted(edges, x, side="left")
    assert (codes32[0] != expected).sum() > 10  # the float32 codes alone would be wrong
    np.testing.assert_array_equal(codes[0], expected)
    np.testing.assert_array_equal(codes, mapper.transform(X, NUMPY).codes)


def test_segments_of_every_size_are_sorted():
    """The sort of a bucket's values: the network of 8 inputs, that of 16, the radix sort
    beyond (sizes 1 to 40), on ties, signed zeros and random values, segments in
    the middle of a longer array and at its end (the network reads no further)."""
    from gpurpo.tree.binning._bucket_edges import _sort_segment

    rng = np.random.default_rng(12)
    for c in range(1, 41):
        for values in (rng.standard_normal(c), rng.integers(-2, 3, c).astype(float),
                       np.where(rng.random(c) < 0.5, -0.0, 0.0)):
            for at_end in (False, True):
                a = rng.standard_normal(c + (0 if at_end else 20)).astype(np.float32)
                lo = a.size - c if at_end else 7
                a[lo:lo + c] = values
                before = a.copy()
                _sort_segment(a, lo, lo + c, np.empty(c, np.float32), np.empty((2, c), np.uint32))
                np.testing.assert_array_equal(a[lo:lo + c], np.sort(before[lo:lo + c]))
                np.testing.assert_array_equal(np.delete(a, np.s_[lo:lo + c]),
                                              np.delete(before, np.s_[lo:lo + c]))


def _hand_made_edges(kinds, buckets, aboves):
    return (np.array(buckets, dtype=np.int64), np.array(kinds, dtype=np.uint8),
            np.array(aboves, dtype=np.float32))


def test_codes_from_buckets_by_hand():
    """Buckets of width 1 over [0, 6): an edge between buckets 1 and 3 (bucket 2 empty),
    one inside bucket 4 (between 4.2 and 4.7), NaN in bucket 6. The codes are
    searchsorted's; an unordered edge, or two inside edges in one bucket, give up
    (False, nothing written) and leave ``above`` all +inf."""
    from gpurpo.tree.binning._bucket_edges import (
        _EDGE_BETWEEN,
        _EDGE_INSIDE,
        _EDGE_UNORDERED,
        _codes_from_buckets,
    )

    row = np.array([0.5, 1.5, 3.5, 4.2, 4.7, 5.5, np.nan, 4.2, 1.1], dtype=np.float32)
    nb = 6
    ids = np.array([0, 1, 3, 4, 4, 5, 6, 4, 1], dtype=np.uint32)
    picked = np.flatnonzero(np.isin(ids, [1, 3, 4])).astype(np.int32)
    edges = np.array([2.5, 4.45])
    base = np.empty(nb + 1, dtype=np.uint8)
    above = np.full(nb + 1, np.inf, dtype=np.float32)
    out = np.full(row.size, 99, dtype=np.uint8)
    meta = _hand_made_edges([_EDGE_BETWEEN, _EDGE_INSIDE], [3, 4], [3.5, 4.7])
    assert _codes_from_buckets(row, ids, nb, 2, meta, 200, picked, picked.size, base, above, out)
    expected = np.where(np.isnan(row), 200, np.searchsorted(edges, row.astype(np.float64)))
    np.testing.assert_array_equal(out, expected)
    assert np.isinf(above).all()
    for kinds, buckets in (([_EDGE_UNORDERED, _EDGE_INSIDE], [3, 4]),
                           ([_EDGE_INSIDE, _EDGE_INSIDE], [4, 4])):
        out[:] = 99
        meta = _hand_made_edges(kinds, buckets, [3.5, 4.7])
        assert not _codes_from_buckets(row, ids, nb, 2, meta, 200, picked, picked.size, base,
                                       above, out)
        assert (out == 99).all() and np.isinf(above).all()


def test_rows_left_to_the_sort():
    """Too few values, a single value, few distinct values, infinite or extreme values,
    crowded buckets: status NEEDS_SORT (their NaN and extreme flags are still given)."""
    rng = np.random.default_rng(3)
    n = 2_000
    few = rng.integers(0, 200, n).astype(np.float32)  # 200 distinct <= max_bins
    short = np.full(n, np.nan, dtype=np.float32)
    short[:400] = rng.standard_normal(400)  # 400 values <= 2 max_bins
    constant = np.full(n, 3.0, dtype=np.float32)
    infinite = rng.standard_normal(n).astype(np.float32)
    infinite[5] = np.inf
    huge = rng.standard_normal(n).astype(np.float32)
    huge[7] = -F32_MAX
    outlier = rng.standard_normal(n).astype(np.float32)
    outlier[0] = 1e30  # the others share a few buckets
    mostly_zero = rng.standard_normal(n).astype(np.float32)
    mostly_zero[: n // 2] = 0.0  # the zeros' bucket holds half the ranks: crowded
    rows = np.array([few, short, constant, infinite, huge, outlier, mostly_zero])
    status, coded = _assert_same_edges(rows, 255)
    assert (status == NEEDS_SORT).all(), status


def test_nan_rows_take_the_nan_path_of_the_bucket_ids():
    rng = np.random.default_rng(4)
    row = rng.standard_normal((3, 24_000)).astype(np.float32)
    row[0, rng.random(24_000) < 0.3] = np.nan
    row[1, :10] = np.nan
    status, coded = _assert_same_edges(row, 255)
    assert (status == DONE).all(), status


@settings(max_examples=60, deadline=None)
@given(
    n=st.integers(1, 30_000),
    max_bins=st.integers(2, 255),
    levels=st.integers(1, 5_000),
    scale_exp=st.integers(-30, 30),
    nan_share=st.sampled_from([0.0, 0.0, 0.1]),
    seed=st.integers(0, 2**32 - 1),
)
def test_fuzzed_rows_match_the_sorted_edges(n, max_bins, levels, scale_exp, nan_share, seed):
    """Quantised values (``levels`` of them, so ties and few-distinct rows occur),
    scaled, shifted, with NaN: the rows done by buckets have the sorted edges (up to
    30,000 values: about two rows in three go by buckets; on fewer than some 5,000,
    255 bins crowd the buckets and most rows go to the sort)."""
    rng = np.random.default_rng(seed)
    values = rng.integers(0, levels, (3, n)) * 10.0**scale_exp + rng.standard_normal((3, 1))
    values[1] = rng.standard_normal(n) * 10.0**scale_exp
    values[rng.random((3, n)) < nan_share] = np.nan
    status, coded = _assert_same_edges(values, max_bins)


def test_bin_mapper_edges_equal_the_numpy_reference():
    """Through BinMapper.fit_transform (bucket selection for the continuous features,
    the sort for the others): each feature's edges are those of the reference
    :func:`quantile_edges` on its float32-rounded finite values."""
    rng = np.random.default_rng(5)
    n = 3_000
    X = np.column_stack([
        rng.standard_normal(n),
        rng.standard_cauchy(n),
        rng.integers(0, 7, n),
        np.round(rng.standard_normal(n), 1),
        rng.exponential(size=n),
    ])
    X[rng.random(X.shape) < 0.05] = np.nan
    mapper = BinMapper(max_bins=255)
    mapper.fit_transform(X, NUMPY)
    for f in range(X.shape[1]):
        column = X[:, f].astype(np.float32)
        expected = quantile_edges(column[~np.isnan(column)], 255, None)
        np.testing.assert_array_equal(mapper.edges_[f], expected)


@pytest.mark.parametrize("max_bins", [2, 255])
def test_short_rows_and_empty_blocks(max_bins):
    """Rows of 0 and 1 values (and all-NaN rows) are left to the sort, flags set."""
    for n in (0, 1, 5):
        values = np.full((2, n), np.nan, dtype=np.float32)
        if n:
            values[0, 0] = 1.0
        status, coded = _assert_same_edges(values, max_bins)
        assert (status == NEEDS_SORT).all()
