"""Synthetic generators: make_multilabel and the friedman1 multi-output problems."""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.datasets import make_friedman1
from sklearn.ensemble import RandomForestRegressor
from sklearn.linear_model import Ridge
from sklearn.metrics import label_ranking_average_precision_score

from gpurpo.datasets import (
    make_delicious_like,
    make_friedman1_multioutput,
    make_mediamill_like,
    make_multilabel,
)

# --------------------------------------------------------------------------
# make_multilabel
# --------------------------------------------------------------------------


def _check_label_matrix(Y, n, d):
    assert Y.shape == (n, d)
    if sp.issparse(Y):
        assert Y.format == "csr"
        assert Y.has_sorted_indices
        Yc = Y.copy()
        Yc.sum_duplicates()
        assert Yc.nnz == Y.nnz, "duplicate (row, label) entries"
        values = Y.data
    else:
        values = Y
    assert set(np.unique(values)) <= {0.0, 1.0}


def test_shapes_types_and_output_formats():
    X, Y = make_multilabel(300, 7, 40, random_state=0, sparse_output=True)
    assert X.shape == (300, 7) and X.dtype == np.float64
    _check_label_matrix(Y, 300, 40)
    X2, Yd = make_multilabel(300, 7, 40, random_state=0, sparse_output=False)
    assert isinstance(Yd, np.ndarray)
    _check_label_matrix(Yd, 300, 40)
    np.testing.assert_array_equal(X, X2)
    np.testing.assert_array_equal(Y.toarray(), Yd)
    X3, _ = make_multilabel(50, 4, 10, random_state=0, dtype=np.float32)
    assert X3.dtype == np.float32
    # "auto": sparse for a low label density, dense otherwise
    assert sp.issparse(make_multilabel(50, 4, 200, label_cardinality=3, random_state=0)[1])
    assert not sp.issparse(make_multilabel(50, 4, 10, label_cardinality=3, random_state=0)[1])


@pytest.mark.parametrize("cardinality,d", [(1.0, 10), (4.0, 50), (19.0, 983), (0.5, 30)])
def test_mean_label_cardinality_is_controlled(cardinality, d):
    n = 3000
    _, Y = make_multilabel(n, 10, d, label_cardinality=cardinality, random_state=1,
                           sparse_output=True)
    per_row = np.diff(Y.indptr)
    # per-row counts are 1 + Poisson(c - 1) (Bernoulli(c) for c < 1):
    # the mean is within a few standard errors of c
    sd = np.sqrt(max(cardinality - 1.0, cardinality * (1 - cardinality), 1e-3) / n)
    assert abs(per_row.mean() - cardinality) < 5 * sd + 0.01
    if cardinality >= 1:
        assert per_row.min() >= 1


def test_same_seed_same_data_other_seed_other_data():
    a = make_multilabel(200, 6, 30, random_state=5)
    b = make_multilabel(200, 6, 30, random_state=5)
    c = make_multilabel(200, 6, 30, random_state=6)
    np.testing.assert_array_equal(a[0], b[0])
    np.testing.assert_array_equal(np.asarray(a[1]), np.asarray(b[1]))
    assert not np.array_equal(a[0], c[0])


def test_popularity_skew_concentrates_label_frequencies():
    def top_share(skew):
        _, Y = make_multilabel(3000, 10, 200, label_cardinality=5, popularity_skew=skew,
                               random_state=2, sparse_output=True)
        freq = np.sort(np.asarray(Y.sum(axis=0)).ravel())[::-1]
        return freq[:20].sum() / freq.sum()

    flat, skewed = top_share(0.0), top_share(1.5)
    # the top 10% of labels: without skew their share reflects only how
    # prevalent the topics are; Zipf popularity concentrates occurrences
    assert flat < 0.35
    assert skewed > flat + 0.15


def test_labels_are_correlated_through_few_latent_factors():
    n, d, k = 2000, 60, 5
    _, Y = make_multilabel(n, 10, d, n_latent=k, label_cardinality=4, noise=0.05,
                           random_state=3, sparse_output=False)
    rng = np.random.default_rng(0)
    # independent labels with the same frequencies: permute each column
    Yp = np.column_stack([rng.permutation(Y[:, j]) for j in range(d)])

    def low_rank_share(M):
        """Share of the off-diagonal label correlations held by the top k eigenpairs."""
        C = np.corrcoef(M.T)
        np.fill_diagonal(C, 0.0)
        w = np.sort(np.abs(np.linalg.eigvalsh(C)))[::-1]
        return (w[:k] ** 2).sum() / (w**2).sum()

    assert low_rank_share(Y) > 0.7
    assert low_rank_share(Yp) < 0.45


def test_structure_is_learnable_and_nonlinear():
    X, Y = make_multilabel(2000, 20, 50, random_state=0, sparse_output=False)
    Xtr, Ytr, Xte, Yte = X[:1500], Y[:1500], X[1500:], Y[1500:]
    baseline = label_ranking_average_precision_score(Yte, np.tile(Ytr.mean(axis=0), (500, 1)))
    forest = RandomForestRegressor(
        30, max_features="sqrt", min_samples_leaf=3, random_state=0, n_jobs=1
    ).fit(Xtr, Ytr)
    lrap_forest = label_ranking_average_precision_score(Yte, forest.predict(Xte))
    lrap_linear = label_ranking_average_precision_score(
        Yte, Ridge(alpha=1.0).fit(Xtr, Ytr).predict(Xte)
    )
    assert lrap_forest > baseline + 0.15
    assert lrap_forest > lrap_linear + 0.05


def test_a_million_labels_sparse_and_small():
    tracemalloc.start()
    try:
        X, Y = make_multilabel(2000, 10, 1_000_000, label_cardinality=20, random_state=0)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert sp.issparse(Y) and Y.shape == (2000, 1_000_000)
    _check_label_matrix(Y, 2000, 1_000_000)
    assert abs(Y.nnz / 2000 - 20) < 1.0
    # a dense Y would take 16 GB; the generator stays within a few tens of MB
    assert peak < 150 * 2**20
    # labels come from the whole label space, not only from a popular head
    assert np.unique(Y.indices).size > 10_000


def test_benchmark_shapes():
    X, Y = make_delicious_like(n_samples=3000)
    assert X.shape == (3000, 500) and Y.shape == (3000, 983) and sp.issparse(Y)
    assert abs(Y.nnz / 3000 - 19.02) < 0.5
    X, Y = make_mediamill_like(n_samples=3000)
    assert X.shape == (3000, 120) and Y.shape == (3000, 101)
    assert abs(Y.nnz / 3000 - 4.376) < 0.2
    assert make_delicious_like(n_samples=10, sparse_output=False)[1].shape == (10, 983)


@pytest.mark.parametrize(
    "kwargs,match",
    [
        (dict(label_cardinality=60), "label_cardinality must be <= n_labels"),
        (dict(label_cardinality=0), "label_cardinality must be >"),
        (dict(n_informative=11), "n_informative must be <= 10"),
        (dict(n_latent=0), "n_latent must be >= 1"),
        (dict(noise=1.5), "noise must be <= 1"),
        (dict(popularity_skew=-1), "popularity_skew must be >= 0"),
        (dict(sparse_output="yes"), "sparse_output must be one of"),
        (dict(dtype=np.int32), "dtype must be float32 or float64"),
        (dict(n_samples=0), "n_samples must be >= 1"),
    ],
)
def test_make_multilabel_rejects_bad_parameters(kwargs, match):
    params = dict(n_samples=20, n_features=10, n_labels=50)
    params.update(kwargs)
    with pytest.raises(ValueError, match=match):
        make_multilabel(**params)


# --------------------------------------------------------------------------
# friedman1 multi-output
# --------------------------------------------------------------------------


def _friedman(X5):
    """Friedman (1991) #1, written out independently of the package."""
    x1, x2, x3, x4, x5 = X5.T
    return 10 * np.sin(np.pi * x1 * x2) + 20 * (x3 - 0.5) ** 2 + 10 * x4 + 5 * x5


def test_reference_formula_is_sklearns_friedman1():
    X, y = make_friedman1(n_samples=200, n_features=5, noise=0.0, random_state=0)
    np.testing.assert_allclose(_friedman(X), y, rtol=1e-12)


@pytest.mark.parametrize("kind", ["chain", "group", "ind"])
def test_noise_free_outputs_equal_the_formula(kind):
    X, Y = make_friedman1_multioutput(kind, n_samples=300, n_outputs=6, noise=0.0,
                                      random_state=0)
    assert Y.shape == (300, 6)
    assert X.min() >= 0.0 and X.max() <= 1.0
    if kind == "ind":
        assert X.shape == (300, 30)
        expected = np.column_stack([_friedman(X[:, 5 * j : 5 * j + 5]) for j in range(6)])
    else:
        assert X.shape == (300, 5)
        expected = np.repeat(_friedman(X)[:, None], 6, axis=1)
    np.testing.assert_allclose(Y, expected, rtol=1e-12)


def test_group_residuals_are_independent_noise():
    X, Y = make_friedman1_multioutput("group", n_samples=20000, n_outputs=8, noise=2.0,
                                      random_state=1)
    E = Y - _friedman(X)[:, None]
    np.testing.assert_allclose(E.mean(axis=0), 0.0, atol=0.1)
    np.testing.assert_allclose(E.std(axis=0), 2.0, rtol=0.03)
    C = np.corrcoef(E.T)
    assert np.abs(C[~np.eye(8, dtype=bool)]).max() < 0.05


def test_chain_outputs_accumulate_noise():
    X, Y = make_friedman1_multioutput("chain", n_samples=20000, n_outputs=5, noise=1.0,
                                      random_state=2)
    E = Y - _friedman(X)[:, None]
    # y_j - f(x) = e_1 + ... + e_j  has variance j
    np.testing.assert_allclose(E.var(axis=0), np.arange(1, 6), rtol=0.05)
    steps = np.diff(np.column_stack([_friedman(X), Y]), axis=1)
    np.testing.assert_allclose(steps.std(axis=0), 1.0, rtol=0.03)
    C = np.corrcoef(steps.T)
    assert np.abs(C[~np.eye(5, dtype=bool)]).max() < 0.05


def test_ind_outputs_depend_only_on_their_own_inputs():
    X, Y = make_friedman1_multioutput("ind", n_samples=20000, n_outputs=4, noise=1.0,
                                      random_state=3)
    F = np.column_stack([_friedman(X[:, 5 * j : 5 * j + 5]) for j in range(4)])
    E = Y - F
    np.testing.assert_allclose(E.std(axis=0), 1.0, rtol=0.03)
    C = np.corrcoef(Y.T)
    assert np.abs(C[~np.eye(4, dtype=bool)]).max() < 0.05


def test_friedman_determinism_and_errors():
    a = make_friedman1_multioutput("group", 50, 3, random_state=4)
    b = make_friedman1_multioutput("group", 50, 3, random_state=4)
    np.testing.assert_array_equal(a[1], b[1])
    with pytest.raises(ValueError, match="kind must be one of"):
        make_friedman1_multioutput("chained")
    with pytest.raises(ValueError, match="noise must be >= 0"):
        make_friedman1_multioutput("chain", noise=-1.0)
    with pytest.raises(ValueError, match="n_outputs must be >= 1"):
        make_friedman1_multioutput("ind", n_outputs=0)
