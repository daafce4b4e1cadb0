"""Label-space linear algebra: ML-CSSP, PLST, Rembrandt and the ridge solvers.

References are independent of gpurpo: ``numpy.linalg.svd``/``eigh``/``solve``,
``numpy.linalg.matrix_rank``, a plain sequential sampling loop, ``scipy.stats``
and the identities of the papers (leverage scores sum to k; a rank-k matrix is
spanned by k well-chosen columns).
"""

from __future__ import annotations

import math
import tracemalloc

import numpy as np
import pytest
import scipy.linalg
import scipy.sparse as sp
import scipy.stats
from scipy.sparse.linalg import aslinearoperator
from sklearn.exceptions import ConvergenceWarning
from threadpoolctl import threadpool_limits

from gpurpo.linalg import cssp_select, plst, rembrandt, ridge_solve
from gpurpo.linalg.cssp import sample_until_distinct


@pytest.fixture(autouse=True)
def _single_threaded_blas():
    """Small matrices: one BLAS thread is as fast and immune to CPU oversubscription."""
    with threadpool_limits(limits=1, user_api="blas"):
        yield


def max_angle(X, Y):
    return float(np.max(scipy.linalg.subspace_angles(np.asarray(X, float), np.asarray(Y, float))))


def rank_k_matrix(n, d, k, seed):
    rng = np.random.default_rng(seed)
    return rng.standard_normal((n, k)) @ rng.standard_normal((k, d))


def exact_leverage(Y, k):
    Vt = np.linalg.svd(np.asarray(Y, float), full_matrices=False)[2][:k]
    return np.sum(Vt**2, axis=0)


# --------------------------------------------------------------------------
# ML-CSSP
# --------------------------------------------------------------------------


@pytest.mark.parametrize("method", ["sample", "sample_qr"])
@pytest.mark.parametrize("kind", ["dense", "csr", "linear_operator"])
@pytest.mark.parametrize("k", [1, 4, 9])
def test_cssp_on_rank_k_matrix_spans_column_space(method, kind, k):
    Y = rank_k_matrix(120, 40, k, seed=k)
    Y_in = {"dense": Y, "csr": sp.csr_matrix(Y), "linear_operator": aslinearoperator(Y)}[kind]
    indices, n_trials = cssp_select(Y_in, k, random_state=3, method=method)
    assert isinstance(indices, np.ndarray) and indices.dtype == np.int64
    assert indices.shape == (k,)
    assert len(set(indices.tolist())) == k
    assert np.all((indices >= 0) & (indices < 40))
    assert n_trials >= k
    if method == "sample_qr":
        assert n_trials >= max(k, math.ceil(2 * k * math.log(k)))
    Y_C = Y[:, indices]
    assert np.linalg.matrix_rank(Y_C) == k
    # every column of Y is reproduced from the selected ones: Y = Y_C Y_C^+ Y
    residual = Y - Y_C @ np.linalg.lstsq(Y_C, Y, rcond=None)[0]
    assert np.linalg.norm(residual) <= 1e-8 * np.linalg.norm(Y)


def _sequential_reference(p, k, rng, max_trials):
    """Bi & Kwok Algorithm 1, lines 4-8, one draw at a time."""
    chosen, trials = [], 0
    while len(chosen) < k and trials < max_trials:
        i = int(rng.choice(p.shape[0], p=p))
        trials += 1
        if i not in chosen:
            chosen.append(i)
    return chosen, trials


@pytest.mark.parametrize("seed", range(6))
def test_sampler_equals_sequential_draws(seed):
    rng = np.random.default_rng(seed)
    d, k = 50, 7
    p = rng.random(d) ** 4
    p /= p.sum()
    ref_chosen, ref_trials = _sequential_reference(p, k, np.random.default_rng(seed + 100), 10**6)
    draws, n_trials, complete = sample_until_distinct(p, k, np.random.default_rng(seed + 100), 10**6)
    assert complete and n_trials == ref_trials == len(draws)
    first = []
    for i in draws.tolist():
        if i not in first:
            first.append(i)
    assert first == ref_chosen


def test_sampler_min_trials_and_cap():
    p = np.full(10, 0.1)
    draws, n_trials, complete = sample_until_distinct(p, 2, np.random.default_rng(0), 1000, min_trials=37)
    assert complete and n_trials == 37 == len(draws)
    draws, n_trials, complete = sample_until_distinct(p, 10, np.random.default_rng(0), 10)
    assert n_trials == 10 and len(draws) == 10
    assert complete == (len(set(draws.tolist())) == 10)


def test_cssp_first_draw_follows_leverage_probabilities():
    """k = 1: the single selected column is drawn with p_i = ||(V_1^T)_(i)||^2."""
    rng = np.random.default_rng(5)
    Y = rng.standard_normal((30, 1)) @ np.array([[3.0, -2.0, 1.0, 0.5, 0.25, 0.1]])
    Y += 1e-3 * rng.standard_normal(Y.shape)
    p = exact_leverage(Y, 1)
    reps = 1000
    counts = np.zeros(6)
    for seed in range(reps):
        idx, n_trials = cssp_select(Y, 1, random_state=seed)
        assert n_trials == 1
        counts[idx[0]] += 1
    keep = p * reps >= 5
    expected = p[keep] * reps
    observed = counts[keep]
    stat, pvalue = scipy.stats.chisquare(observed, expected * observed.sum() / expected.sum())
    assert pvalue > 1e-3, (counts, p * reps)


def test_cssp_max_trials_fallback_warns_and_completes():
    Y = rank_k_matrix(60, 30, 6, seed=11)
    with pytest.warns(RuntimeWarning, match="max_trials=6"):
        indices, n_trials = cssp_select(Y, 6, random_state=0, max_trials=6)
    assert n_trials == 6
    assert len(set(indices.tolist())) == 6
    assert np.linalg.matrix_rank(Y[:, indices]) == 6


def test_cssp_prefers_high_leverage_columns_and_beats_uniform():
    """Encoding error ||Y - Y_C Y_C^+ Y||_F is below uniform sampling on low-rank + noise."""
    rng = np.random.default_rng(12)
    n, d, k = 150, 60, 5
    weights = np.ones(d)
    weights[:8] = 20.0
    Y = (rng.standard_normal((n, k)) @ rng.standard_normal((k, d))) * weights
    Y += 0.1 * rng.standard_normal((n, d))

    def error(cols):
        Y_C = Y[:, cols]
        return np.linalg.norm(Y - Y_C @ np.linalg.lstsq(Y_C, Y, rcond=None)[0])

    cssp = np.mean([error(cssp_select(Y, k, random_state=s)[0]) for s in range(10)])
    uniform = np.mean([error(rng.choice(d, k, replace=False)) for _ in range(10)])
    assert cssp < uniform


# --------------------------------------------------------------------------
# PLST
# --------------------------------------------------------------------------


def _labels(n, d, seed, rank=5):
    rng = np.random.default_rng(seed)
    scores = (rng.standard_normal((n, rank)) * np.geomspace(6, 1.5, rank)) @ rng.standard_normal((rank, d))
    return sp.csr_matrix((scores > 2.0).astype(np.float64))


@pytest.mark.parametrize("sparse_input", [True, False])
def test_plst_equals_pca_of_labels(sparse_input):
    Y = _labels(300, 60, seed=13)
    D = Y.toarray()
    mean = D.mean(axis=0)
    _, s, Vt = np.linalg.svd(D - mean, full_matrices=False)
    k = 3
    assert s[k - 1] > 1.2 * s[k]  # a spectral gap, so the subspace is well defined
    comps, mu = plst(Y if sparse_input else D, k, n_iter=12, random_state=0)
    assert comps.shape == (k, 60) and mu.shape == (60,)
    np.testing.assert_allclose(mu, mean, atol=1e-12)
    assert max_angle(comps.T, Vt[:k].T) < 1e-6
    # encoding / decoding with the components is the best rank-k centred fit
    Z = (D - mean) @ comps.T
    np.testing.assert_allclose(np.linalg.norm(D - mean - Z @ comps), np.sqrt(np.sum(s[k:] ** 2)), rtol=1e-8)


# --------------------------------------------------------------------------
# Ridge solvers and Rembrandt
# --------------------------------------------------------------------------


@pytest.mark.parametrize("solver", ["direct", "cg"])
@pytest.mark.parametrize("alpha", [0.0, 1e-3, 5.0])
@pytest.mark.parametrize("kind", ["dense", "csr", "linear_operator"])
def test_ridge_solve_matches_normal_equations(solver, alpha, kind):
    rng = np.random.default_rng(14)
    X = rng.standard_normal((200, 25))
    Bm = rng.standard_normal((200, 4))
    X_in = {"dense": X, "csr": sp.csr_matrix(X), "linear_operator": aslinearoperator(X)}[kind]
    Z = ridge_solve(X_in, Bm, alpha=alpha, solver=solver, tol=1e-12)
    reference = np.linalg.solve(X.T @ X + alpha * np.eye(25), X.T @ Bm)
    np.testing.assert_allclose(Z, reference, rtol=1e-8, atol=1e-10)


def test_ridge_cg_warns_when_not_converged():
    rng = np.random.default_rng(15)
    X = rng.standard_normal((100, 40)) * np.geomspace(1, 1e-3, 40)
    with pytest.warns(ConvergenceWarning, match="max_iter=2"):
        ridge_solve(sp.csr_matrix(X), rng.standard_normal((100, 2)), alpha=0.0, solver="cg", max_iter=2)


def test_ridge_direct_reports_singular_system():
    X = np.ones((10, 3))
    with pytest.raises(ValueError, match="not numerically positive definite with alpha=0.0"):
        ridge_solve(X, np.ones((10, 1)), alpha=0.0, solver="direct")


def _regression_data(seed, n=400, d=30, c=50, sparse_y=True):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d))
    W = rng.standard_normal((d, 6)) * np.geomspace(4, 1, 6)
    scores = X @ W @ rng.standard_normal((6, c)) + rng.standard_normal((n, c))
    Y = (scores > 1.0).astype(np.float64)
    return X, (sp.csr_matrix(Y) if sparse_y else Y), Y


def exact_rembrandt(X, Y, alpha, k):
    M = Y.T @ X @ np.linalg.solve(X.T @ X + alpha * np.eye(X.shape[1]), X.T @ Y)
    w, V = np.linalg.eigh(M)
    return V[:, ::-1][:, :k], w[::-1][:k], w[::-1]


@pytest.mark.parametrize(
    "solver, x_kind",
    [("direct", "dense"), ("cg", "dense"), ("cg", "csr"), ("direct", "csr"), ("cg", "linear_operator")],
)
@pytest.mark.parametrize("alpha", [1e-3, 10.0])
def test_rembrandt_converges_to_top_eigenvectors(solver, x_kind, alpha):
    X, Y, Yd = _regression_data(16)
    k = 4
    V, w, all_w = exact_rembrandt(X, Yd, alpha, k)
    assert w[k - 1] > 1.1 * all_w[k]
    X_in = {"dense": X, "csr": sp.csr_matrix(X), "linear_operator": aslinearoperator(X)}[x_kind]
    R, s = rembrandt(X_in, Y, k, n_iter=25, alpha=alpha, random_state=0, solver=solver, tol=1e-12)
    assert R.shape == (50, k) and s.shape == (k,)
    np.testing.assert_allclose(R.T @ R, np.eye(k), atol=1e-10)
    np.testing.assert_allclose(s, w, rtol=1e-8)
    assert max_angle(R, V) < 1e-6


def test_rembrandt_defaults_and_float32():
    X, Y, Yd = _regression_data(17, sparse_y=True)
    X32 = X.astype(np.float32)
    Y32 = Y.astype(np.float32)
    R, s = rembrandt(X32, Y32, 3, random_state=0)
    assert R.dtype == np.float32 and s.dtype == np.float32
    V, w, _ = exact_rembrandt(X, Yd, 1e-3, 3)
    # the paper's defaults (p = 20, q = 1) already capture the leading eigenspace well
    np.testing.assert_allclose(s, w, rtol=5e-3)
    assert max_angle(R, V) < 0.2


def test_rembrandt_beats_plst_on_explained_prediction_variance():
    """Rembrandt maximises the captured variance of the predictions P_X Y."""
    X, Y, Yd = _regression_data(18, sparse_y=False)
    k = 3
    P = X @ np.linalg.solve(X.T @ X + 1e-3 * np.eye(X.shape[1]), X.T @ Yd)
    R, _ = rembrandt(X, Yd, k, random_state=0, n_iter=4)
    comps, _ = plst(Yd, k, random_state=0)
    captured_rembrandt = np.trace(R.T @ (Yd.T @ P) @ R)
    captured_plst = np.trace(comps @ (Yd.T @ P) @ comps.T)
    assert captured_rembrandt >= captured_plst


# --------------------------------------------------------------------------
# Bad input
# --------------------------------------------------------------------------

BAD = [
    (lambda: cssp_select(np.ones((5, 4)), 0), ValueError, r"k must be between 1 and .* got 0"),
    (lambda: cssp_select(np.ones((5, 4)), 5), ValueError, r"= 4 for Y of shape \(5, 4\), got 5"),
    (lambda: cssp_select(np.eye(5), 2, method="greedy"), ValueError, "method must be one of .* got 'greedy'"),
    (lambda: cssp_select(np.eye(5), 2, max_trials=1), ValueError, "max_trials must be >= 2, got 1"),
    (lambda: cssp_select(np.array([1.0, 2.0]), 1), ValueError, "Y must be a 2-D array"),
    (lambda: cssp_select(sp.csr_matrix(np.array([[np.inf, 1.0]])), 1), ValueError, "Y contains NaN"),
    (lambda: plst(np.eye(4), 5), ValueError, "n_components must be between 1 and .* got 5"),
    (lambda: plst(np.array([[np.nan, 1.0], [1.0, 2.0]]), 1), ValueError, "Y contains NaN"),
    (lambda: rembrandt(np.ones((5, 2)), np.eye(4), 1), ValueError, "inconsistent numbers of rows"),
    (lambda: rembrandt(np.eye(4), np.eye(4), 0), ValueError, "n_components must be between 1 and .* got 0"),
    (lambda: rembrandt(np.eye(4), np.eye(4), 1, alpha=-1.0), ValueError, "alpha must be >= 0.0, got -1.0"),
    (lambda: rembrandt(np.eye(4), np.eye(4), 1, solver="lu"), ValueError,
     "solver must be one of .* got 'lu'"),
    (lambda: rembrandt(np.eye(4), np.eye(4), 1, n_iter=-1), ValueError, "n_iter must be >= 0, got -1"),
    (lambda: rembrandt(np.eye(4)[:, :, None], np.eye(4), 1), ValueError, "X must be a 2-D array"),
    (lambda: ridge_solve(np.eye(4), np.eye(4), tol=0.0), ValueError, "tol must be > 0.0, got 0.0"),
    (lambda: ridge_solve(np.eye(4), np.eye(3)), ValueError, "inconsistent numbers of rows"),
]


@pytest.mark.parametrize("call, error, message", BAD)
def test_bad_input(call, error, message):
    with pytest.raises(error, match=message):
        call()


# --------------------------------------------------------------------------
# Scale: sparse labels stay sparse
# --------------------------------------------------------------------------


def test_plst_and_cssp_on_200k_by_50k_sparse_labels_within_memory():
    n, d, per_row = 200_000, 50_000, 5
    rng = np.random.default_rng(19)
    popularity = 1.0 / np.arange(1, d + 1) ** 0.8
    popularity /= popularity.sum()
    indices = rng.choice(d, size=n * per_row, p=popularity).astype(np.int32)
    Y = sp.csr_matrix(
        (np.ones(n * per_row), indices, np.arange(0, n * per_row + 1, per_row)), shape=(n, d)
    )
    Y.sum_duplicates()
    Y.data[:] = 1.0
    column_mean = np.asarray(Y.sum(axis=0)).ravel() / n
    tracemalloc.start()
    try:
        comps, mean = plst(Y, 4, n_iter=1, random_state=0)
        selected, n_trials = cssp_select(Y, 4, n_iter=1, random_state=0)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    # a dense Y would need n * d * 8 bytes = 80 GB; the whole run stays far below 1 GB
    assert peak < 1e9, f"peak traced memory {peak / 1e9:.2f} GB"
    assert comps.shape == (4, d) and mean.shape == (d,)
    np.testing.assert_allclose(mean, column_mean, rtol=1e-12)
    np.testing.assert_allclose(comps @ comps.T, np.eye(4), atol=1e-10)
    assert len(set(selected.tolist())) == 4 and n_trials >= 4
    # the selected labels are popular ones (their leverage dominates)
    assert np.all(column_mean[selected] > np.median(column_mean))
