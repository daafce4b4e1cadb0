"""Weighted bin edges in one kernel (gpurpo.tree.binning._weighted_edges) against the column
rule of gpurpo.tree.binning._quantile_rule.quantile_edges (np.unique, bincount, searchsorted)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpurpo.backend import NUMPY
from gpurpo.tree import BinMapper
from gpurpo.tree.binning._quantile_rule import quantile_edges
from gpurpo.tree.binning._weighted_edges import weighted_column_edges


def _reference(X: np.ndarray, w: np.ndarray, max_bins: int) -> list[np.ndarray]:
    out = []
    for f in range(X.shape[1]):
        col = np.asarray(X[:, f])
        ok = ~np.isnan(col)
        out.append(quantile_edges(col[ok], max_bins, w[ok]))
    return out


def _assert_edges(X, w, max_bins):
    table, n_edges = weighted_column_edges(X, w, max_bins)
    for f, want in enumerate(_reference(X, w, max_bins)):
        np.testing.assert_array_equal(table[f, : n_edges[f]], want)


def _columns(rng, n, large=1e300):
    return np.column_stack([
        rng.standard_normal(n),
        np.round(rng.standard_normal(n), 1),  # ties, fewer distinct values than bins
        np.where(rng.random(n) < 0.15, np.nan, rng.standard_cauchy(n)),
        rng.choice([-0.0, 0.0, 1.0, -3.5], n),  # zeros of both signs: one value
        np.full(n, 2.0),
        np.full(n, np.nan),  # no value: no edge
        rng.integers(0, 600, n) * 0.25,
        rng.standard_normal(n) * 1e-310,  # subnormal float64
        rng.standard_normal(n) * large,
    ])


@pytest.mark.parametrize("max_bins", [2, 16, 255])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("order", ["C", "F"])
def test_kernel_gives_the_column_rule_edges(max_bins, dtype, order):
    rng = np.random.default_rng(max_bins)
    large = 1e300 if dtype == np.float64 else 1e30
    X = np.asarray(_columns(rng, 3000, large).astype(dtype), order=order)
    for w in (rng.integers(1, 5, 3000).astype(float), rng.random(3000) + 1e-3):
        _assert_edges(X, w, max_bins)


@settings(max_examples=80, deadline=None)
@given(
    values=st.lists(st.one_of(st.floats(allow_nan=True, allow_infinity=False),
                              st.sampled_from([0.0, -0.0, 1.0, 1.0 + 2**-52])),
                    min_size=1, max_size=120),
    seed=st.integers(0, 2**31 - 1),
    max_bins=st.integers(2, 40),
)
def test_kernel_on_fuzzed_columns(values, seed, max_bins):
    X = np.array(values, dtype=np.float64).reshape(-1, 1)
    w = np.random.default_rng(seed).integers(1, 6, X.shape[0]).astype(float)
    _assert_edges(X, w, max_bins)


def test_weighted_tree_fit_bins_with_the_kernel_as_with_the_column_rule():
    """BinMapper's weighted fit (rows of weight 0 left out) gives the column rule's
    edges, for a dense sample (the kernel) as for the same sample sparse (column by
    column)."""
    import scipy.sparse as sp

    rng = np.random.default_rng(4)
    X = _columns(rng, 2000)[:, [0, 1, 3, 6]]
    w = rng.integers(0, 4, 2000).astype(float)
    mapper = BinMapper(max_bins=64).fit(X, w)
    kept = w > 0
    for f, want in enumerate(_reference(X[kept], w[kept], 64)):
        np.testing.assert_array_equal(mapper.thresholds_[f, : mapper.n_value_bins_[f] - 1], want)
    sparse = BinMapper(max_bins=64).fit(sp.csr_matrix(X), w)
    np.testing.assert_array_equal(sparse.thresholds_, mapper.thresholds_)
    binned = BinMapper(max_bins=64).fit_transform(X, NUMPY, w)
    np.testing.assert_array_equal(binned.codes, mapper.transform(X, NUMPY).codes)
