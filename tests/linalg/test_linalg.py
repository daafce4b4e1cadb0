"""Randomized range finder, SVD, PCA, leverage scores and the operator layer.

References are independent of gpurpo: ``numpy.linalg.svd``/``qr``,
``scipy.linalg.subspace_angles``, exact PCA of the densified centred matrix,
and the error bounds of Halko, Martinsson & Tropp (2011).
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.linalg
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.sparse.linalg import aslinearoperator
from threadpoolctl import threadpool_limits

from gpurpo import backend as B
from gpurpo.linalg import (
    PCAResult,
    as_operator,
    leverage_scores,
    qr_factor,
    randomized_pca,
    randomized_range_finder,
    randomized_svd,
)
from gpurpo.linalg.qr import normalize_block


@pytest.fixture(autouse=True)
def _single_threaded_blas():
    """Small matrices: one BLAS thread is as fast and immune to CPU oversubscription."""
    with threadpool_limits(limits=1, user_api="blas"):
        yield


KINDS = ["dense", "csr", "csr_array", "linear_operator", "implicit"]


class Implicit:
    """The smallest operator gpurpo accepts: shape, matmat and rmatmat only."""

    def __init__(self, A):
        self._A = A
        self.shape = A.shape
        self.calls = 0

    def matmat(self, X):
        self.calls += 1
        return self._A @ X

    def rmatmat(self, X):
        self.calls += 1
        return self._A.T @ X


def as_kind(A, kind):
    if kind == "dense":
        return A
    if kind == "csr":
        return sp.csr_matrix(A)
    if kind == "csr_array":
        return sp.csr_array(A)
    if kind == "linear_operator":
        return aslinearoperator(A)
    return Implicit(A)


def low_rank_plus_noise(m, n, spectrum, noise, seed, dtype=np.float64):
    """U diag(spectrum) V^T + noise, U and V Haar-random orthonormal."""
    rng = np.random.default_rng(seed)
    r = len(spectrum)
    U = np.linalg.qr(rng.standard_normal((m, r)))[0]
    V = np.linalg.qr(rng.standard_normal((n, r)))[0]
    A = (U * np.asarray(spectrum)) @ V.T + noise * rng.standard_normal((m, n))
    return A.astype(dtype)


def max_angle(X, Y):
    return float(np.max(scipy.linalg.subspace_angles(np.asarray(X, float), np.asarray(Y, float))))


# --------------------------------------------------------------------------
# randomized_svd against numpy.linalg.svd
# --------------------------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("shape", [(300, 120), (90, 260)], ids=["tall", "wide"])
def test_randomized_svd_matches_exact_svd(kind, dtype, shape):
    k = 6
    A = low_rank_plus_noise(*shape, np.geomspace(100, 10, 8), 0.02, seed=1, dtype=dtype)
    U_ex, s_ex, Vt_ex = np.linalg.svd(A.astype(np.float64), full_matrices=False)
    U, s, Vt = randomized_svd(as_kind(A, kind), k, random_state=0)
    assert isinstance(U, np.ndarray) and isinstance(s, np.ndarray) and isinstance(Vt, np.ndarray)
    assert U.shape == (shape[0], k) and s.shape == (k,) and Vt.shape == (k, shape[1])
    # an operator without a dtype attribute is computed in float64
    expected_dtype = np.float64 if kind == "implicit" else dtype
    assert U.dtype == s.dtype == Vt.dtype == expected_dtype
    rtol = 1e-9 if dtype == np.float64 else 1e-4
    np.testing.assert_allclose(s, s_ex[:k], rtol=rtol)
    angle_tol = 1e-7 if dtype == np.float64 else 2e-3
    assert max_angle(U, U_ex[:, :k]) < angle_tol
    assert max_angle(Vt.T, Vt_ex[:k].T) < angle_tol
    ortho_tol = 1e-12 if dtype == np.float64 else 1e-5
    np.testing.assert_allclose(U.T @ U, np.eye(k), atol=ortho_tol)
    np.testing.assert_allclose(Vt @ Vt.T, np.eye(k), atol=ortho_tol)
    # the factors reproduce A's best rank-k part
    best = (U_ex[:, :k] * s_ex[:k]) @ Vt_ex[:k]
    assert np.linalg.norm((U * s) @ Vt - best) <= 10 * rtol * np.linalg.norm(best)


@pytest.mark.parametrize("normalizer", ["QR", "auto", "householder", "none"])
def test_randomized_svd_every_normalizer(normalizer):
    A = low_rank_plus_noise(200, 80, np.geomspace(50, 5, 6), 0.01, seed=2)
    s_ex = np.linalg.svd(A, compute_uv=False)
    _, s, _ = randomized_svd(A, 4, n_iter=3, random_state=1, power_iteration_normalizer=normalizer)
    np.testing.assert_allclose(s, s_ex[:4], rtol=1e-8)


def test_signs_are_deterministic_and_u_v_consistent():
    A = low_rank_plus_noise(120, 60, [9, 7, 5, 3], 0.01, seed=3)
    U1, s1, Vt1 = randomized_svd(A, 3, random_state=0)
    U2, s2, Vt2 = randomized_svd(A, 3, random_state=7)
    np.testing.assert_allclose(Vt1, Vt2, atol=1e-8)
    np.testing.assert_allclose(U1, U2, atol=1e-8)
    # u_i = A v_i / s_i holds with the returned signs
    np.testing.assert_allclose(A @ Vt1.T / s1, U1, atol=1e-8)


@settings(max_examples=25, deadline=None)
@given(
    m=st.integers(2, 25),
    n=st.integers(2, 25),
    data=st.data(),
)
def test_full_sampling_is_exact(m, n, data):
    """With k + p >= min(m, n) the sampled range is the whole range: exact SVD."""
    k = data.draw(st.integers(1, min(m, n)))
    seed = data.draw(st.integers(0, 2**16))
    A = np.random.default_rng(seed).standard_normal((m, n))
    _, s, _ = randomized_svd(A, k, n_oversamples=min(m, n), n_iter=0, random_state=seed)
    np.testing.assert_allclose(s, np.linalg.svd(A, compute_uv=False)[:k], rtol=1e-8, atol=1e-10)


def test_rank_deficient_input_keeps_orthonormal_factors():
    """Rank 3 with l = 13 samples: the Householder fallback of the QR must kick in."""
    A = low_rank_plus_noise(150, 70, [5, 3, 1], 0.0, seed=4)
    U, s, Vt = randomized_svd(A, 5, random_state=0)
    s_ex = np.linalg.svd(A, compute_uv=False)
    np.testing.assert_allclose(s, s_ex[:5], atol=1e-12)
    np.testing.assert_allclose(U.T @ U, np.eye(5), atol=1e-12)
    np.testing.assert_allclose(Vt @ Vt.T, np.eye(5), atol=1e-12)


def test_implicit_operator_only_sees_products():
    A = low_rank_plus_noise(100, 40, [4, 3, 2], 0.01, seed=5)
    op = Implicit(A)
    _, s, _ = randomized_svd(op, 3, n_iter=2, random_state=0)
    np.testing.assert_allclose(s, np.linalg.svd(A, compute_uv=False)[:3], rtol=1e-6)
    # 2 products per power iteration + the first + stage B
    assert op.calls == 2 * 2 + 2


# --------------------------------------------------------------------------
# Range finder: HMT error bounds
# --------------------------------------------------------------------------


def _slow_decay(m, n, seed):
    rng = np.random.default_rng(seed)
    U = np.linalg.qr(rng.standard_normal((m, n)))[0]
    V = np.linalg.qr(rng.standard_normal((n, n)))[0]
    s = 1.0 / np.arange(1, n + 1) ** 0.5
    return (U * s) @ V.T, s


@pytest.mark.parametrize("normalizer", ["QR", "householder", "none"])
@pytest.mark.parametrize("n_iter", [0, 1, 3])
def test_range_finder_error_within_factor_of_optimal(normalizer, n_iter):
    A, s = _slow_decay(400, 150, seed=6)
    k, p = 10, 10
    Q = randomized_range_finder(A, k + p, n_iter, random_state=3, power_iteration_normalizer=normalizer)
    assert Q.shape == (400, k + p)
    np.testing.assert_allclose(Q.T @ Q, np.eye(k + p), atol=1e-12)
    residual = A - Q @ (Q.T @ A)
    spectral = np.linalg.norm(residual, 2)
    frobenius = np.linalg.norm(residual)
    opt_spectral = s[k]
    opt_frobenius = np.sqrt(np.sum(s[k:] ** 2))
    # HMT Corollary 10.10 / eq. (1.11) bound on the spectral error
    c = 1 + np.sqrt(k / (p - 1)) + np.e * np.sqrt(k + p) / p * np.sqrt(min(A.shape) - k)
    assert spectral <= c ** (1 / (2 * n_iter + 1)) * opt_spectral
    # no rank-(k + p) projection beats sigma_{k+p+1} (Eckart-Young)
    assert spectral >= s[k + p] * (1 - 1e-12)
    # HMT Theorem 10.5 (Frobenius, q = 0): E <= sqrt(1 + k/(p-1)) * tail; power iterations only help
    assert frobenius <= np.sqrt(1 + k / (p - 1)) * opt_frobenius
    if n_iter >= 1:
        assert spectral <= 2.0 * opt_spectral


def test_range_finder_on_sparse_and_float32():
    A = low_rank_plus_noise(300, 100, [30, 20, 10], 0.01, seed=7, dtype=np.float32)
    S = sp.csr_matrix(A)
    Q = randomized_range_finder(S, 5, 2, random_state=0)
    assert Q.dtype == np.float32
    np.testing.assert_allclose(Q.T @ Q, np.eye(5), atol=1e-5)
    U = np.linalg.svd(A.astype(float), full_matrices=False)[0][:, :3]
    # the top-3 singular subspace lies in span(Q)
    assert np.linalg.norm(U - Q @ (Q.T @ U)) < 1e-3


def test_same_seed_same_result_and_generators_accepted():
    A = low_rank_plus_noise(80, 50, [5, 4, 3], 0.1, seed=8)
    Q1 = randomized_range_finder(A, 6, 1, random_state=42)
    Q2 = randomized_range_finder(A, 6, 1, random_state=np.random.default_rng(42))
    np.testing.assert_array_equal(Q1, Q2)
    Q3 = randomized_range_finder(A, 6, 1, random_state=np.random.RandomState(0))
    assert Q3.shape == (80, 6)


# --------------------------------------------------------------------------
# QR factorisation used between power iterations
# --------------------------------------------------------------------------


@pytest.mark.parametrize("case", ["well", "ill", "rank_deficient", "zero", "float32"])
def test_qr_factor_is_a_thin_qr(case):
    rng = np.random.default_rng(9)
    m, width = 500, 12
    G = rng.standard_normal((m, width))
    if case == "ill":
        G = np.linalg.qr(G)[0] * np.geomspace(1, 1e-11, width)
    elif case == "rank_deficient":
        G = G[:, :4] @ rng.standard_normal((4, width))
    elif case == "zero":
        G = np.zeros((m, width))
    elif case == "float32":
        G = G.astype(np.float32)
    Q, R = qr_factor(G, np)
    tol = 1e-5 if case == "float32" else 1e-12
    np.testing.assert_allclose(Q.T @ Q, np.eye(width), atol=tol)
    np.testing.assert_allclose(Q @ R, G, atol=tol * max(1.0, np.abs(G).max()))
    assert Q.dtype == G.dtype
    # span(Q) contains span(G) (numpy's own QR as the reference basis)
    if case in ("well", "ill", "float32"):
        assert max_angle(Q, np.linalg.qr(G.astype(float))[0]) < 1e-3


@pytest.mark.parametrize("case", ["well", "ill", "rank_deficient", "float32", "float32_ill"])
def test_normalize_block_keeps_span_with_good_conditioning(case):
    """The cheap step between power iterations: same span, condition number ~ 1."""
    rng = np.random.default_rng(10)
    m, width = 400, 10
    G = rng.standard_normal((m, width)) * np.geomspace(1, 1e-2, width)
    if case == "ill":
        G = np.linalg.qr(G)[0] * np.geomspace(1, 1e-12, width)
    elif case == "rank_deficient":
        G = G[:, :3] @ rng.standard_normal((3, width))
    elif case == "float32":
        G = G.astype(np.float32)
    elif case == "float32_ill":
        G = (np.linalg.qr(G)[0] * np.geomspace(1, 1e-4, width)).astype(np.float32)
    Q = normalize_block(G, np)
    assert Q.shape == G.shape and Q.dtype == G.dtype
    assert np.linalg.cond(Q.astype(float)) < 1.1
    # G is reproduced from the columns of Q: span(G) is inside span(Q)
    coef = np.linalg.lstsq(Q.astype(float), G.astype(float), rcond=None)[0]
    tol = 1e-4 if G.dtype == np.float32 else 1e-10
    assert np.linalg.norm(G - Q @ coef) <= tol * np.linalg.norm(G)


# --------------------------------------------------------------------------
# PCA with implicit centring
# --------------------------------------------------------------------------


def exact_pca(A, k):
    A = np.asarray(A, dtype=np.float64)
    mean = A.mean(axis=0)
    _, s, Vt = np.linalg.svd(A - mean, full_matrices=False)
    return Vt[:k], s[:k] ** 2 / (A.shape[0] - 1), mean


def _sparse_counts(n, d, seed):
    """Sparse non-negative data: a sparse rank-6 product plus sparse noise (clear gaps)."""
    rng = np.random.default_rng(seed)
    F = sp.random(n, 6, density=0.4, format="csr", random_state=rng) @ sp.diags(np.geomspace(8, 1, 6))
    G = sp.random(6, d, density=0.3, format="csr", random_state=rng)
    noise = sp.random(n, d, density=0.02, format="csr", random_state=rng)
    return (F @ G + 0.05 * noise).tocsr()


@pytest.mark.parametrize("kind", ["dense", "csr", "linear_operator", "implicit"])
def test_randomized_pca_equals_exact_pca(kind):
    S = _sparse_counts(250, 90, seed=10)
    D = S.toarray()
    k = 5
    comps, var, mean = exact_pca(D, k)
    A = S if kind == "csr" else as_kind(D, kind)
    result = randomized_pca(A, k, n_iter=10, random_state=0)
    assert isinstance(result, PCAResult)
    c, v, mu = result
    assert c.shape == (k, 90) and v.shape == (k,) and mu.shape == (90,)
    np.testing.assert_allclose(mu, mean, atol=1e-12)
    np.testing.assert_allclose(v, var, rtol=1e-6)
    assert max_angle(c.T, comps.T) < 1e-4
    np.testing.assert_allclose(c @ c.T, np.eye(k), atol=1e-12)


def test_randomized_pca_sparse_never_densifies(monkeypatch):
    S = _sparse_counts(200, 70, seed=11)
    D = S.toarray()

    def refuse(self, *args, **kwargs):
        raise AssertionError("a sparse matrix was densified")

    for cls in (sp.csr_matrix, sp.csc_matrix, sp.coo_matrix, sp.csr_array, sp.csc_array):
        for method in ("toarray", "todense"):
            monkeypatch.setattr(cls, method, refuse)
    c, v, mu = randomized_pca(S, 4, n_iter=8, random_state=0)
    monkeypatch.undo()
    comps, var, mean = exact_pca(D, 4)
    np.testing.assert_allclose(v, var, rtol=1e-6)
    assert max_angle(c.T, comps.T) < 1e-4


def test_randomized_pca_float32_stays_float32():
    A = low_rank_plus_noise(150, 40, [6, 4, 2], 0.05, seed=12, dtype=np.float32) + 3
    c, v, mu = randomized_pca(sp.csr_matrix(A), 3, random_state=0)
    assert c.dtype == v.dtype == mu.dtype == np.float32
    comps, var, mean = exact_pca(A, 3)
    np.testing.assert_allclose(mu, mean, rtol=1e-5)
    np.testing.assert_allclose(v, var, rtol=1e-3)


# --------------------------------------------------------------------------
# Leverage scores
# --------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["dense", "csr", "linear_operator"])
def test_leverage_scores_equal_exact_and_sum_to_k(kind):
    A = low_rank_plus_noise(200, 60, np.geomspace(40, 8, 7), 0.05, seed=13)
    k = 5
    exact = np.sum(np.linalg.svd(A, full_matrices=False)[2][:k] ** 2, axis=0)
    scores = leverage_scores(as_kind(A, kind), k, random_state=0)
    assert scores.shape == (60,)
    np.testing.assert_allclose(scores, exact, atol=1e-8)
    assert scores.sum() == pytest.approx(k, abs=1e-10)
    assert np.all(scores >= 0) and np.all(scores <= 1 + 1e-12)


def test_leverage_scores_are_squared_not_signed():
    """A column aligned with -v_1 has leverage 1, not -1 (squared norms)."""
    A = np.zeros((4, 3))
    A[0, 0] = -5.0
    A[1, 1] = 1.0
    A[2, 2] = 0.5
    scores = leverage_scores(A, 1, random_state=0)
    np.testing.assert_allclose(scores, [1.0, 0.0, 0.0], atol=1e-12)


# --------------------------------------------------------------------------
# Operators, namespaces, bad input
# --------------------------------------------------------------------------


def test_integer_and_bool_inputs_are_computed_in_float64():
    A = np.rint(low_rank_plus_noise(40, 20, [90, 50, 30], 0.1, seed=14)).astype(np.int64)
    U, s, Vt = randomized_svd(A, 3, random_state=0)
    assert s.dtype == np.float64
    np.testing.assert_allclose(s, np.linalg.svd(A.astype(float), compute_uv=False)[:3], rtol=1e-6)
    op = as_operator(sp.csr_matrix(A.astype(bool)))
    assert op.dtype == np.float64


def test_operator_returning_wrong_shape_is_reported():
    class Bad(Implicit):
        def matmat(self, X):
            return np.ones((3, X.shape[1]))

    with pytest.raises(ValueError, match=r"A\.matmat returned an array of shape \(3, "):
        randomized_svd(Bad(np.ones((10, 5))), 2, random_state=0)


def test_operator_returning_nan_is_reported():
    class Nan(Implicit):
        def matmat(self, X):
            return np.full((self.shape[0], X.shape[1]), np.nan)

    with pytest.raises(ValueError, match="A.matmat returned NaN"):
        randomized_svd(Nan(np.ones((10, 5))), 2, random_state=0)


BAD_INPUTS = [
    (lambda: randomized_svd(np.ones(5), 1), ValueError, "A must be a 2-D array"),
    (lambda: randomized_svd(np.ones((2, 3, 4)), 1), ValueError, "A must be a 2-D array"),
    (lambda: randomized_svd(np.array([[1.0, np.nan], [0, 1]]), 1), ValueError, "A contains NaN"),
    (lambda: randomized_svd(np.array([[1.0, np.inf], [0, 1]]), 1), ValueError, "A contains NaN"),
    (
        lambda: randomized_svd(sp.csr_matrix(np.array([[1.0, np.nan], [0, 1]])), 1),
        ValueError,
        "A contains NaN",
    ),
    (lambda: randomized_svd(np.ones((5, 4)), 0), ValueError, r"n_components must be between 1 and .* got 0"),
    (lambda: randomized_svd(np.ones((5, 4)), 5), ValueError, r"= 4 for A of shape \(5, 4\), got 5"),
    (lambda: randomized_svd(np.ones((5, 4)), 2.5), TypeError, "n_components must be an int"),
    (lambda: randomized_svd(np.ones((5, 4)), 2, n_iter="many"), ValueError, "n_iter must be .* got 'many'"),
    (lambda: randomized_svd(np.ones((5, 4)), 2, n_iter=-1), ValueError, "n_iter must be >= 0, got -1"),
    (lambda: randomized_svd(np.ones((5, 4)), 2, n_oversamples=-2), ValueError, "n_oversamples must be >= 0"),
    (
        lambda: randomized_svd(np.ones((5, 4)), 2, power_iteration_normalizer="LX"),
        ValueError,
        "power_iteration_normalizer must be one of",
    ),
    (lambda: randomized_range_finder(np.ones((5, 4)), 0, 1), ValueError,
     "size must be between 1 and .* got 0"),
    (lambda: randomized_range_finder(np.ones((5, 4)), 6, 1), ValueError, "size must be .* got 6"),
    (lambda: randomized_svd(np.array([["a", "b"]]), 1), (TypeError, ValueError), "A must hold numbers"),
    (lambda: randomized_svd("abc", 1), TypeError, "A must be a 2-D array, a sparse matrix or an op"),
    (lambda: randomized_svd(object(), 1), TypeError, "A must be a 2-D array, a sparse matrix or an operator"),
    (lambda: randomized_pca(np.ones((1, 4)), 1), ValueError, "at least 2 rows"),
    (lambda: leverage_scores(np.ones((5, 4)), 0), ValueError, "k must be between 1 and .* got 0"),
    (lambda: randomized_svd(np.ones((5, 4)), 2, random_state="x"), TypeError,
     "random_state must be None, an int, a numpy SeedSequence, Generator or RandomState; got str"),
]


@pytest.mark.parametrize("call, error, message", BAD_INPUTS)
def test_bad_input_errors_name_the_argument(call, error, message):
    with pytest.raises(error, match=message):
        call()


@pytest.mark.gpu
def test_cupy_input_gives_cupy_output_equal_to_numpy():
    if not B.cupy_available():
        pytest.skip("needs CuPy and a CUDA device")
    import cupy
    import cupyx.scipy.sparse as cusparse

    A = low_rank_plus_noise(300, 100, [9, 6, 3, 1], 0.01, seed=15)
    U, s, Vt = randomized_svd(A, 3, random_state=0)
    for A_gpu in (cupy.asarray(A), cusparse.csr_matrix(cupy.asarray(A))):
        Ug, sg, Vtg = randomized_svd(A_gpu, 3, random_state=0)
        assert isinstance(Ug, cupy.ndarray) and isinstance(sg, cupy.ndarray)
        np.testing.assert_allclose(sg.get(), s, rtol=1e-10)
        np.testing.assert_allclose(Vtg.get(), Vt, atol=1e-8)
    c, v, mu = randomized_pca(cusparse.csr_matrix(cupy.asarray(A)), 3, random_state=0)
    c_ref, v_ref, mu_ref = randomized_pca(sp.csr_matrix(A), 3, random_state=0)
    np.testing.assert_allclose(v.get(), v_ref, rtol=1e-10)
    np.testing.assert_allclose(c.get(), c_ref, atol=1e-8)


def test_emulated_backend_gives_host_arrays_equal_to_exact_svd():
    """Under the emulated backend (NumPy arrays) results stay NumPy and match numpy.linalg.svd."""
    A = low_rank_plus_noise(60, 30, [5, 3], 0.01, seed=16)
    with B.use_backend("emulated"):
        U, s, Vt = randomized_svd(A, 2, random_state=0)
    assert all(isinstance(a, np.ndarray) for a in (U, s, Vt))
    U_ref, s_ref, Vt_ref = np.linalg.svd(A, full_matrices=False)
    np.testing.assert_allclose(s, s_ref[:2], rtol=1e-6)
    # Singular vectors agree up to sign (the gap s_2 / s_3 is large).
    np.testing.assert_allclose(np.abs(np.sum(Vt * Vt_ref[:2], axis=1)), 1.0, atol=1e-6)
    np.testing.assert_allclose((U * s) @ Vt, (U_ref[:, :2] * s_ref[:2]) @ Vt_ref[:2], atol=1e-6)
