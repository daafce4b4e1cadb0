"""Rembrandt's three computations (exact, precomputed cross product, factored) and their parts.

References are independent of gpurpo: ``numpy.linalg.eigh`` of the dense
``M = Y^T X (X^T X + alpha I)^{-1} X^T Y``, a plain NumPy transcription of
Mineiro & Karampatziakis' Algorithm 2 (same Gaussian start), ``numpy.linalg.inv``
and ``numpy.linalg.solve``.
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.linalg
import scipy.sparse as sp
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scipy.sparse.linalg import aslinearoperator
from threadpoolctl import threadpool_limits

from gpurpo.label_space import RembrandtReducer
from gpurpo.linalg import as_operator, rembrandt
from gpurpo.linalg.rembrandt import (
    CROSS_PRODUCT_MAX_ENTRIES,
    exact_products_costs,
    method_costs,
    product_cost,
)
from gpurpo.linalg.ridge import RidgeSolver, lower_inverse

METHODS = ["exact", "precomputed", "factored"]


@pytest.fixture(autouse=True)
def _single_threaded_blas():
    with threadpool_limits(limits=1, user_api="blas"):
        yield


def reference_eigh(X, Y, alpha):
    """Eigenvalues (decreasing) and eigenvectors of the dense M, with NumPy only."""
    Y = Y.toarray() if sp.issparse(Y) else Y
    M = Y.T @ X @ np.linalg.solve(X.T @ X + alpha * np.eye(X.shape[1]), X.T @ Y)
    w, V = np.linalg.eigh((M + M.T) / 2)
    return w[::-1], V[:, ::-1], M


def reference_algorithm2(X, Y, k, p, q, alpha, seed):
    """Algorithm 2 transcribed with NumPy: Gaussian start, q power steps, Ritz step."""
    Y = Y.toarray() if sp.issparse(Y) else Y
    S = X.T @ X + alpha * np.eye(X.shape[1])
    width = min(k + p, Y.shape[1])
    Q = np.random.default_rng(seed).standard_normal((Y.shape[1], width))
    Q = np.linalg.qr(Q)[0]
    for _ in range(q):
        Q = np.linalg.qr(Y.T @ X @ np.linalg.solve(S, X.T @ (Y @ Q)))[0]
    T = Y.T @ X @ np.linalg.solve(S, X.T @ (Y @ Q))
    _, sigma, Vt = np.linalg.svd(T, full_matrices=False)
    return Q @ Vt[:k].T, sigma[:k]


def max_angle(A, B):
    return float(np.max(scipy.linalg.subspace_angles(A, B)))


def gapped_problem(n, d, c, seed, sparse_y=True):
    """Binary labels driven by a few strong directions of X: a clear top-k gap."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d))
    scores = X[:, :4] @ (rng.standard_normal((4, c)) * np.array([[6.0], [4.0], [2.5], [1.5]]))
    Y = (scores + rng.standard_normal((n, c)) > 2.0).astype(np.float64)
    return X, (sp.csr_matrix(Y) if sparse_y else Y)


# --------------------------------------------------------------------------
# Each method against the dense eigendecomposition
# --------------------------------------------------------------------------


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("sparse_y", [True, False])
@pytest.mark.parametrize("n, d, c", [(300, 12, 40), (300, 40, 15)])
def test_each_method_finds_the_top_eigenpairs(method, sparse_y, n, d, c):
    X, Y = gapped_problem(n, d, c, seed=1, sparse_y=sparse_y)
    k, alpha = 3, 0.5
    w, V, _ = reference_eigh(X, Y, alpha)
    assert w[k - 1] > 1.5 * w[k]
    R, s = rembrandt(X, Y, k, n_iter=30, alpha=alpha, random_state=0, method=method)
    assert R.shape == (c, k) and s.shape == (k,)
    assert R.dtype == np.float64 and s.dtype == np.float64
    np.testing.assert_allclose(R.T @ R, np.eye(k), atol=1e-12)
    np.testing.assert_allclose(s, w[:k], rtol=1e-9)
    assert max_angle(R, V[:, :k]) < 1e-7


@pytest.mark.parametrize("method", ["precomputed", "factored"])
@pytest.mark.parametrize("n_iter", [0, 1, 2])
def test_randomized_methods_follow_algorithm_2_iterate_by_iterate(method, n_iter):
    """Few iterations, no convergence: the embedding is that of the transcribed algorithm."""
    X, Y = gapped_problem(200, 15, 60, seed=2)
    k, p, alpha = 4, 3, 0.1
    R_ref, s_ref = reference_algorithm2(X, Y, k, p, n_iter, alpha, seed=7)
    R, s = rembrandt(X, Y, k, n_oversamples=p, n_iter=n_iter, alpha=alpha, random_state=7, method=method)
    np.testing.assert_allclose(s, s_ref, rtol=1e-9)
    np.testing.assert_allclose(np.abs(np.sum(R * R_ref, axis=0)), 1.0, atol=1e-9)


def test_exact_method_with_rank_below_k_completes_an_orthonormal_basis():
    rng = np.random.default_rng(3)
    X = rng.standard_normal((50, 2))
    Y = sp.csr_matrix((rng.random((50, 9)) < 0.3).astype(float))
    w, V, M = reference_eigh(X, Y, 1e-3)
    R, s = rembrandt(X, Y, 5, alpha=1e-3, method="exact")
    np.testing.assert_allclose(R.T @ R, np.eye(5), atol=1e-12)
    np.testing.assert_allclose(s[:2], w[:2], rtol=1e-10)
    np.testing.assert_array_equal(s[2:], 0.0)
    assert max_angle(R[:, :2], V[:, :2]) < 1e-8
    # the completed directions lie in the null space of M
    assert np.linalg.norm(M @ R[:, 2:]) < 1e-8 * np.linalg.norm(M)


@pytest.mark.parametrize("n, d, c, expect", [(40, 5, 3000, "data"), (2000, 10, 30, "cross")])
def test_exact_method_through_the_cross_product_or_through_the_data(n, d, c, expect):
    rng = np.random.default_rng(4)
    X = rng.standard_normal((n, d))
    # labels used by a few samples each, so that many columns of Y are empty
    rows = rng.integers(0, n, 3 * n)
    cols = np.minimum((rng.pareto(1.0, 3 * n) * 3).astype(int), c - 1)
    Y = sp.csr_matrix((np.ones(3 * n), (rows, cols)), shape=(n, c))
    Y.sum_duplicates()
    Y.data[:] = 1.0
    k = 3
    gram, rotate = exact_products_costs(n, d, c, k, product_cost(as_operator(Y)))
    assert min(gram, key=gram.get) == expect and min(rotate, key=rotate.get) == expect
    w, V, M = reference_eigh(X, Y, 1.0)
    R, s = rembrandt(X, Y, k, alpha=1.0, method="exact")
    np.testing.assert_allclose(s, w[:k], rtol=1e-9)
    np.testing.assert_allclose(R.T @ R, np.eye(k), atol=1e-12)
    # captured variance equals the top-k sum (robust to near-equal eigenvalues)
    np.testing.assert_allclose(np.trace(R.T @ M @ R), w[:k].sum(), rtol=1e-9)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    n=st.integers(3, 30),
    d=st.integers(1, 12),
    c=st.integers(1, 12),
    k=st.integers(1, 12),
    alpha=st.sampled_from([1e-6, 1e-2, 1.0, 100.0]),
    sparse_y=st.booleans(),
    seed=st.integers(0, 2**31 - 1),
)
def test_every_method_captures_the_top_k_variance(n, d, c, k, alpha, sparse_y, seed):
    """With l >= rank(M), one power step spans range(M): all methods are exact then."""
    k = min(k, n, c)
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d))
    Y = (rng.random((n, c)) < 0.4).astype(float)
    Y_in = sp.csr_matrix(Y) if sparse_y else Y
    w, _, M = reference_eigh(X, Y, alpha)
    scale = max(w[0], 1e-300)
    for method in METHODS:
        R, s = rembrandt(X, Y_in, k, n_oversamples=c, n_iter=1, alpha=alpha, random_state=seed, method=method)
        np.testing.assert_allclose(R.T @ R, np.eye(k), atol=1e-10)
        np.testing.assert_allclose(s, w[:k], rtol=1e-7, atol=1e-9 * scale)
        np.testing.assert_allclose(np.trace(R.T @ M @ R), w[:k].sum(), rtol=1e-7, atol=1e-9 * scale)


# --------------------------------------------------------------------------
# dtypes, operators, choice of method, errors
# --------------------------------------------------------------------------


@pytest.mark.parametrize("method", ["auto"] + METHODS)
def test_float32_inputs_stay_float32(method):
    X, Y = gapped_problem(300, 12, 40, seed=5)
    w, V, _ = reference_eigh(X, Y, 0.5)
    R, s = rembrandt(
        X.astype(np.float32), Y.astype(np.float32), 3, n_iter=20, alpha=0.5, random_state=0, method=method
    )
    assert R.dtype == np.float32 and s.dtype == np.float32
    np.testing.assert_allclose(s, w[:3], rtol=1e-4)
    assert max_angle(R.astype(float), V[:, :3]) < 1e-3


@pytest.mark.parametrize("method", ["auto"] + METHODS)
def test_linear_operator_labels(method):
    X, Y = gapped_problem(250, 10, 30, seed=6)
    w, V, _ = reference_eigh(X, Y, 0.5)
    R, s = rembrandt(X, aslinearoperator(Y), 3, n_iter=30, alpha=0.5, random_state=0, method=method)
    np.testing.assert_allclose(s, w[:3], rtol=1e-9)
    assert max_angle(R, V[:, :3]) < 1e-7


@pytest.mark.parametrize(
    "x_kind, solver", [("csr", "auto"), ("linear_operator", "auto"), ("dense", "cg")]
)
@pytest.mark.parametrize("method", ["exact", "precomputed"])
def test_cross_product_methods_need_dense_x_and_the_direct_solver(x_kind, solver, method):
    X, Y = gapped_problem(100, 6, 20, seed=7)
    X_in = {"dense": X, "csr": sp.csr_matrix(X), "linear_operator": aslinearoperator(X)}[x_kind]
    with pytest.raises(ValueError, match=f"method='{method}' needs a dense X and the direct solver"):
        rembrandt(X_in, Y, 2, method=method, solver=solver)
    # auto falls back to Algorithm 2 through the operators
    w, V, _ = reference_eigh(X, Y, 1e-3)
    R, s = rembrandt(X_in, Y, 2, n_iter=30, random_state=0, solver=solver, tol=1e-12)
    np.testing.assert_allclose(s, w[:2], rtol=1e-7)


def test_bad_method_names_the_argument():
    with pytest.raises(ValueError, match=r"method must be one of .* got 'svd'"):
        rembrandt(np.eye(4), np.eye(4), 1, method="svd")


def test_cost_model_choices():
    """Delicious-like shapes favour the cross product, 100,000 labels and 100 features
    the exact eigendecomposition through the data, dense labels Algorithm 2 as written."""
    size, k, q = 40, 20, 1
    delicious = method_costs(12920, 500, 983, k, size, q, y_cost=245_530 + 12920 + 983)
    assert min(delicious, key=delicious.get) == "precomputed"
    many_labels = method_costs(20000, 100, 100_000, k, size, q, y_cost=80_000 + 120_000)
    assert min(many_labels, key=many_labels.get) == "exact"
    dense_labels = method_costs(12920, 500, 983, k, size, q, y_cost=12920 * 983)
    assert min(dense_labels, key=dense_labels.get) == "factored"
    few = method_costs(500, 8, 12, 3, 12, q, y_cost=500 * 12)
    assert min(few, key=few.get) == "exact"
    assert CROSS_PRODUCT_MAX_ENTRIES == 1 << 25


# --------------------------------------------------------------------------
# Ridge solver parts and the reducer
# --------------------------------------------------------------------------


@pytest.mark.parametrize("m", [1, 5, 64, 65, 200, 333])
def test_lower_inverse_matches_numpy(m):
    rng = np.random.default_rng(m)
    A = rng.standard_normal((m + 20, m))
    L = np.linalg.cholesky(A.T @ A + np.eye(m))
    inv = lower_inverse(L, np)
    np.testing.assert_allclose(inv, np.linalg.inv(L), rtol=1e-10, atol=1e-12)
    np.testing.assert_array_equal(np.triu(inv, 1), 0.0)


def test_ridge_solver_factor_and_normal_solves():
    rng = np.random.default_rng(8)
    X = rng.standard_normal((120, 15))
    rhs = rng.standard_normal((15, 4))
    solver = RidgeSolver(as_operator(X), 0.3, "direct")
    S = X.T @ X + 0.3 * np.eye(15)
    np.testing.assert_allclose(solver.solve_normal(rhs), np.linalg.solve(S, rhs), rtol=1e-10)
    Li = solver.inverse_factor
    np.testing.assert_allclose(Li.T @ Li, np.linalg.inv(S), rtol=1e-10, atol=1e-14)
    assert solver.solve_normal(rhs.astype(np.float32)).dtype == np.float32
    with pytest.raises(ValueError, match="inverse_factor needs solver='direct'"):
        RidgeSolver(as_operator(X), 0.3, "cg").inverse_factor


@pytest.mark.parametrize("x_sparse", [False, True])
def test_reducer_with_sparse_labels_embeds_the_centred_prediction_covariance(x_sparse):
    X, Y = gapped_problem(300, 10, 35, seed=9)
    Y = Y + sp.csr_matrix(np.where(np.arange(35) < 5, 1.0, 0.0)[None, :].repeat(300, axis=0))
    X_in = sp.csr_matrix(np.where(np.abs(X) > 0.5, X, 0.0)) if x_sparse else X
    Xd = X_in.toarray() if x_sparse else X
    alpha = 0.7
    red = RembrandtReducer(3, alpha=alpha, n_iter=25, random_state=0).fit(Y, X_in)
    Xc = Xd - Xd.mean(axis=0)
    Yc = Y.toarray() - Y.toarray().mean(axis=0)
    w, V, _ = reference_eigh(Xc, Yc, alpha)
    np.testing.assert_allclose(red.eigenvalues_, w[:3], rtol=1e-7)
    assert max_angle(red.decoder_.T, V[:, :3]) < 1e-6
