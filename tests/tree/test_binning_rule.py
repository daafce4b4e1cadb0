"""Every edge strategy of the bin mapper against the one quantile rule.

The rule is :func:`gpurpo.tree.binning._quantile_rule.quantile_edges` (NumPy's
unique, bincount and searchsorted, documented with its formula); the strategies are
the sorted-row kernel, bucket selection, the weighted and the sparse-column kernels,
and ``BinMapper.fit`` end to end. Data: continuous, tie-heavy counts, few distinct
values, a constant run with outliers, with and without NaN.
"""

import math

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from gpurpo.tree.binning import BinMapper
from gpurpo.tree.binning._bucket_edges import DONE, bucket_edges_rows, row_ranges
from gpurpo.tree.binning._quantile_rule import quantile_edges, quantile_rank
from gpurpo.tree.binning._sorted_edges import edges_from_sorted
from gpurpo.tree.binning._sparse import sparse_column_edges
from gpurpo.tree.binning._weighted_edges import weighted_column_edges

MISSING = 255


def _columns(kind: str, n: int, p: int, seed: int) -> np.ndarray:
    """(n, p) float32-representable columns of one kind of data."""
    rng = np.random.default_rng(seed)
    if kind == "continuous":
        X = rng.normal(size=(n, p))
    elif kind == "counts":  # heavy-tailed, tie-heavy counts
        X = np.round(np.exp(rng.normal(2.0, 1.2, size=(n, p))) / 5) * 5
    elif kind == "few":  # at most 6 distinct values
        X = rng.integers(0, 6, size=(n, p)).astype(float)
    elif kind == "spike":  # a run of zeros holding most quantiles, a few outliers
        X = np.where(rng.random((n, p)) < 0.9, 0.0, rng.exponential(size=(n, p)))
    else:
        raise AssertionError(kind)
    X = X.astype(np.float32).astype(np.float64)
    if seed % 2:
        X[rng.random((n, p)) < 0.05] = np.nan
    return X


def _reference(X: np.ndarray, max_bins: int, weights=None) -> list[np.ndarray]:
    out = []
    for f in range(X.shape[1]):
        col = X[:, f]
        keep = ~np.isnan(col)
        out.append(quantile_edges(col[keep], max_bins, None if weights is None else weights[keep]))
    return out


def _table(out: np.ndarray, n_edges: np.ndarray) -> list[np.ndarray]:
    return [out[f, : n_edges[f]] for f in range(len(n_edges))]


def _sorted_strategy(X, max_bins):
    rows = np.sort(X.T.astype(np.float32), axis=1)
    out = np.full((X.shape[1], max(max_bins - 1, 1)), np.nan)
    n_edges = np.zeros(X.shape[1], dtype=np.int64)
    ok = np.zeros(X.shape[1], dtype=np.bool_)
    edges_from_sorted(rows, max_bins, out, n_edges, ok)
    return _table(out, n_edges), np.ones(X.shape[1], dtype=bool)


def _bucket_strategy(X, max_bins):
    values = np.ascontiguousarray(X.T.astype(np.float32))
    q = values.shape[0]
    lo, hi = np.empty(q, np.float32), np.empty(q, np.float32)
    row_ranges(values, lo, hi)
    out = np.full((q, max(max_bins - 1, 1)), np.nan)
    n_edges = np.zeros(q, dtype=np.int64)
    flags = [np.zeros(q, dtype=np.bool_) for _ in range(3)]
    status = np.full(q, -1, dtype=np.int8)
    codes = np.zeros(values.shape, dtype=np.uint8)
    coded = np.zeros(q, dtype=np.bool_)
    bucket_edges_rows(values, lo, hi, max_bins, out, n_edges, flags[0], flags[1], flags[2],
                      status, MISSING, codes, coded)
    return _table(out, n_edges), status == DONE


def _sparse_strategy(X, max_bins):
    matrix = sp.csc_matrix(np.where(np.isnan(X), np.nan, X))
    slots = np.minimum(np.diff(matrix.indptr), max_bins - 1)
    ptr = np.concatenate([[0], np.cumsum(slots)]).astype(np.int64)
    out = np.full(ptr[-1], np.nan)
    n_edges = np.zeros(X.shape[1], dtype=np.int64)
    sparse_column_edges(matrix.indptr.astype(np.int64), matrix.data, X.shape[0], max_bins,
                        ptr, out, n_edges)
    return [out[ptr[f]: ptr[f] + n_edges[f]] for f in range(X.shape[1])], np.ones(X.shape[1], bool)


def _mapper_strategy(X, max_bins):
    mapper = BinMapper(max_bins=max_bins).fit(X)  # 12,000 rows: no subsample
    return [np.asarray(e) for e in mapper.edges_], np.ones(X.shape[1], dtype=bool)


STRATEGIES = {"sorted": _sorted_strategy, "bucket": _bucket_strategy,
              "sparse": _sparse_strategy, "mapper": _mapper_strategy}


@pytest.mark.parametrize("strategy", sorted(STRATEGIES))
@pytest.mark.parametrize("kind", ["continuous", "counts", "few", "spike"])
@pytest.mark.parametrize("max_bins", [2, 7, 255])
def test_each_strategy_gives_the_edges_of_the_rule(strategy, kind, max_bins):
    checked = 0
    for seed in (0, 1):
        X = _columns(kind, n=12_000, p=6, seed=seed)
        got, applies = STRATEGIES[strategy](X, max_bins)
        for f, ref in enumerate(_reference(X, max_bins)):
            if applies[f]:
                np.testing.assert_array_equal(got[f], ref, err_msg=f"{strategy} {kind} f={f}")
                checked += 1
    if strategy != "bucket":
        assert checked == 2 * 6
    elif kind == "continuous":  # bucket selection leaves few-valued rows to sorting
        assert checked > 0


@pytest.mark.parametrize("kind", ["continuous", "counts", "few", "spike"])
@pytest.mark.parametrize("max_bins", [3, 16, 255])
def test_weighted_strategy_gives_the_edges_of_the_rule(kind, max_bins):
    X = _columns(kind, n=2000, p=5, seed=3)
    weights = np.random.default_rng(4).exponential(size=X.shape[0])
    table, n_edges = weighted_column_edges(X, weights, max_bins)
    for f, ref in enumerate(_reference(X, max_bins, weights)):
        np.testing.assert_array_equal(table[f, : n_edges[f]], ref, err_msg=f"{kind} f={f}")


def test_integer_weights_repeat_rows():
    # the rule's defining property: a weight of k counts the row k times
    rng = np.random.default_rng(5)
    values = np.round(rng.normal(size=400), 1)
    weights = rng.integers(1, 4, size=400)
    np.testing.assert_array_equal(quantile_edges(values, 9, weights.astype(float)),
                                  quantile_edges(np.repeat(values, weights), 9))


@settings(max_examples=300, deadline=None)
@given(st.integers(1, 10**7), st.integers(2, 255), st.data())
def test_quantile_rank_is_the_ceiling_rank(n, max_bins, data):
    j = data.draw(st.integers(1, max_bins - 1))
    assert quantile_rank(j, n, max_bins) == max(math.ceil(j * n / max_bins) - 1, 0)


def test_the_rule_by_hand():
    # 10 values, 4 distinct (0 x4, 1 x3, 2 x2, 5 x1); max_bins = 3 < 4 distinct:
    # levels 10/3 and 20/3 of the cumulative counts (4, 7, 9, 10) fall in 0 and 1
    values = np.array([0, 0, 0, 0, 1, 1, 1, 2, 2, 5], dtype=float)
    np.testing.assert_array_equal(quantile_edges(values, 3), [0.5, 1.5])
    # at most max_bins distinct values: every midpoint
    np.testing.assert_array_equal(quantile_edges(values, 4), [0.5, 1.5, 3.5])
    # a quantile in the largest value gives the edge below it
    np.testing.assert_array_equal(quantile_edges(np.array([0.0, 1, 2, 9, 9, 9, 9, 9]), 2), [5.5])
