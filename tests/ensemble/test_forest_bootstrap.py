"""The forests' bootstrap draws rows uniformly with replacement (Breiman 2001).

Each tree here is a single leaf (no split is allowed) grown on one-hot
outputs ``Y = I_n``, so its leaf value is the fraction of the tree's draws
that fell on each row: the per-row draw counts come out of the grown trees,
independently of the seeds that ``estimators_samples_`` replays. With ``k``
uniform draws with replacement from ``n`` rows:

* a row's count in one tree is Binomial(k, 1/n);
* the totals of the rows over ``T`` trees are Multinomial(T k, uniform);
* the number of distinct rows in a tree has mean ``n (1 - (1 - 1/n)^k)``.

Each is tested with ``scipy.stats`` at a small significance level with a
fixed seed; a negative control shows that sampling without replacement
fails every test.
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from scipy import stats

from gpurpo.ensemble import ExtraTreesRegressor, RandomForestRegressor

N_ROWS = 150
N_TREES = 400
ALPHA = 1e-3


def _draw_counts(forest):
    """(T, n) per-tree draw counts and distinct rows, read from the single-leaf trees."""
    counts, distinct = [], []
    for tree in forest.estimators_:
        assert tree.node_count == 1
        # the identity outputs have few nonzeros: their leaves may be stored sparse
        value = (tree.value.toarray() if sp.issparse(tree.value) else np.asarray(tree.value))[0]
        draws = tree.weighted_n_node_samples[0]
        counts.append(np.rint(value * draws).astype(np.int64))
        distinct.append(int(tree.n_node_samples[0]))
    return np.array(counts), np.array(distinct)


def _count_histogram_pvalue(counts, k, n):
    """Chi-square goodness of fit of the per-(tree, row) counts to Binomial(k, 1/n).

    Counts of 4 and more share one cell so that every expected frequency is large.
    """
    observed = np.bincount(np.minimum(counts.ravel(), 4), minlength=5)
    pmf = stats.binom.pmf(np.arange(4), k, 1.0 / n)
    expected = counts.size * np.append(pmf, 1.0 - pmf.sum())
    return stats.chisquare(observed, expected).pvalue


def _row_totals_pvalue(counts):
    """Chi-square test that the rows' totals over all trees are uniform."""
    return stats.chisquare(counts.sum(axis=0)).pvalue


def _distinct_rows_z(distinct, k, n):
    """z-score of the mean number of distinct rows per tree against its exact mean and variance."""
    q1, q2 = (1 - 1 / n) ** k, (1 - 2 / n) ** k
    mean = n * (1 - q1)
    # Variance of the number of rows never drawn (the occupancy problem).
    var = n * q1 + n * (n - 1) * q2 - (n * q1) ** 2
    return (distinct.mean() - mean) / np.sqrt(var / len(distinct))


def _fit(forest, max_samples):
    X = np.random.default_rng(0).standard_normal((N_ROWS, 3))
    return forest(
        n_estimators=N_TREES, bootstrap=True, max_samples=max_samples, min_samples_split=10**6,
        random_state=12,
    ).fit(X, np.eye(N_ROWS))


@pytest.mark.parametrize(
    "forest, max_samples",
    [(RandomForestRegressor, None), (ExtraTreesRegressor, None), (RandomForestRegressor, 0.5)],
)
def test_bootstrap_draws_uniformly_with_replacement(forest, max_samples):
    model = _fit(forest, max_samples)
    counts, distinct = _draw_counts(model)
    k = N_ROWS if max_samples is None else int(round(max_samples * N_ROWS))
    assert counts.shape == (N_TREES, N_ROWS)
    np.testing.assert_array_equal(counts.sum(axis=1), k)
    # estimators_samples_ replays the same draws the trees were grown on.
    replay = np.array([np.bincount(s, minlength=N_ROWS) for s in model.estimators_samples_])
    np.testing.assert_array_equal(replay, counts)
    np.testing.assert_array_equal(distinct, (counts > 0).sum(axis=1))
    # Different trees draw different samples.
    assert len({c.tobytes() for c in counts}) == N_TREES

    assert _count_histogram_pvalue(counts, k, N_ROWS) > ALPHA
    assert _row_totals_pvalue(counts) > ALPHA
    assert abs(_distinct_rows_z(distinct, k, N_ROWS)) < 4.0


def test_the_bootstrap_tests_reject_sampling_without_replacement():
    """Negative control: the same statistics on draws without replacement fail."""
    rng = np.random.default_rng(0)
    k = N_ROWS // 2
    counts = np.zeros((N_TREES, N_ROWS), dtype=np.int64)
    for t in range(N_TREES):
        counts[t, rng.choice(N_ROWS, k, replace=False)] = 1
    assert _count_histogram_pvalue(counts, k, N_ROWS) < ALPHA
    assert abs(_distinct_rows_z((counts > 0).sum(axis=1), k, N_ROWS)) > 4.0
    # A bootstrap that favours some rows fails the uniformity of the row totals.
    p = np.linspace(1.0, 1.5, N_ROWS)
    skewed = np.array([np.bincount(rng.choice(N_ROWS, N_ROWS, p=p / p.sum()), minlength=N_ROWS)
                       for _ in range(N_TREES)])
    assert _row_totals_pvalue(skewed) < ALPHA
