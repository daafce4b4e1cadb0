"""Randomized range finder, randomized SVD and leverage scores.

Halko, Martinsson & Tropp, "Finding structure with randomness: probabilistic
algorithms for constructing approximate matrix decompositions", SIAM Review
53(2), 2011 (HMT below). Stage A is the randomized subspace iteration of HMT
Algorithm 4.4; stage B is the direct SVD of HMT Algorithm 5.1. Everything
runs on :class:`~gpurpo.linalg.operators.MatrixOperator`, i.e. only through
products with ``A`` and ``A.T``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from gpurpo._validation import check_choice, check_int
from gpurpo.backend import check_random_state
from gpurpo.linalg.operators import MatrixOperator, as_operator, check_n_components, check_n_iter
from gpurpo.linalg.qr import NORMALIZERS, normalize_block, orthonormalize, qr_factor

__all__ = ["randomized_range_finder", "randomized_svd", "leverage_scores", "flip_signs"]


def _gaussian(op: MatrixOperator, rows: int, cols: int, rng: np.random.Generator) -> Any:
    """Standard Gaussian test matrix drawn on the host, moved to the backend."""
    draw = rng.standard_normal((rows, cols), dtype=op.dtype)
    return op.backend.asarray(draw)


def _range_finder(
    op: MatrixOperator, size: int, n_iter: int, rng: np.random.Generator, normalizer: str
) -> Any:
    """HMT Algorithm 4.4 (randomized subspace iteration) on ``op``.

    Step 1: draw a Gaussian ``n x size`` matrix Omega. Step 2: ``Y_0 = A Omega``,
    ``Y_0 = Q_0 R_0``. Steps 3-6, for ``j = 1..n_iter``:
    ``A^T Q_{j-1} = Q~_j R~_j`` and ``Y_j = A Q~_j = Q_j R_j``. Step 7: return
    ``Q = Q_{n_iter}``. The factorisations inside the loop only need a
    well-conditioned basis of the same span
    (:func:`~gpurpo.linalg.qr.normalize_block`); the returned ``Q_{n_iter}``
    is orthonormal to working precision. With ``normalizer="none"`` the
    intermediate factorisations are skipped (plain power iteration, HMT
    Algorithm 4.3).
    """
    xp = op.xp
    Y = op.matmat(_gaussian(op, op.shape[1], size, rng))
    for _ in range(n_iter):
        Q = normalize_block(Y, xp, normalizer)
        Q = normalize_block(op.rmatmat(Q), xp, normalizer)
        Y = op.matmat(Q)
    return orthonormalize(Y, xp, "householder" if normalizer == "householder" else "QR")


def _svd_of_range(
    op: MatrixOperator, Q: Any, k: int, normalizer: str
) -> tuple[Any, Any, Any]:
    """HMT Algorithm 5.1: ``B = Q^T A``, ``B = U~ S V^T``, ``U = Q U~``.

    ``B^T = A^T Q`` (one product) is factorised as ``W R`` and the small
    ``R = U_r S V_r^T`` gives ``B = V_r S (W U_r)^T``.
    """
    xp = op.xp
    BT = op.rmatmat(Q)
    W, R = xp.linalg.qr(BT) if normalizer == "householder" else qr_factor(BT, xp)
    Ur, s, Vrt = xp.linalg.svd(R)
    U = Q @ Vrt[:k].T
    Vt = (W @ Ur[:, :k]).T
    return U, s[:k], Vt


def flip_signs(U: Any, Vt: Any, xp: Any) -> tuple[Any, Any]:
    """Deterministic signs of an SVD: the largest-magnitude entry of each row of Vt is positive.

    The convention of scikit-learn's ``svd_flip(u_based_decision=False)``, a
    zero pivot counting as positive. The distributed SVD of :mod:`gpurpo.dask`
    applies it too, so both return factors of the same signs.

    Parameters
    ----------
    U : array (m, k)
    Vt : array (k, n)
    xp : array module of ``U`` and ``Vt``

    Returns
    -------
    U, Vt : arrays
        Column ``j`` of ``U`` and row ``j`` of ``Vt`` multiplied by the same sign.
    """
    rows = xp.arange(Vt.shape[0])
    pivots = xp.argmax(xp.abs(Vt), axis=1)
    signs = xp.sign(Vt[rows, pivots])
    signs = xp.where(signs == 0, 1, signs).astype(Vt.dtype)
    return U * signs[None, :], Vt * signs[:, None]


def _randomized_svd(
    op: MatrixOperator,
    k: int,
    n_oversamples: int,
    n_iter: int,
    rng: np.random.Generator,
    normalizer: str,
) -> tuple[Any, Any, Any]:
    """Rank-``k`` SVD of ``op`` with ``l = min(k + p, min(m, n))`` samples.

    Works on ``A.T`` when ``A`` is wide, so that the range basis lives on the
    longer side and the final small SVD is of an ``l x min(m, n)`` matrix.
    """
    xp = op.xp
    m, n = op.shape
    transpose = m < n
    work = op.T if transpose else op
    size = min(k + n_oversamples, min(m, n))
    Q = _range_finder(work, size, n_iter, rng, normalizer)
    U, s, Vt = _svd_of_range(work, Q, k, normalizer)
    if transpose:
        U, Vt = Vt.T, U.T
    U, Vt = flip_signs(U, Vt, xp)
    return xp.ascontiguousarray(U), s, xp.ascontiguousarray(Vt)


def randomized_range_finder(
    A: Any,
    size: int,
    n_iter: int,
    random_state: Any = None,
    power_iteration_normalizer: str = "QR",
) -> Any:
    """Orthonormal basis approximating the range of ``A`` (HMT Algorithm 4.4).

    Parameters
    ----------
    A : array, sparse matrix or operator, shape (m, n)
        Dense (NumPy/CuPy), sparse (SciPy/cupyx) or any object with ``shape``,
        ``matmat`` and ``rmatmat`` (see :func:`gpurpo.linalg.as_operator`).
    size : int
        Number of basis vectors ``l``, ``1 <= l <= m``.
    n_iter : int
        Number of power (subspace) iterations ``q >= 0``.
    random_state : None, int, numpy Generator or RandomState
        Seed of the Gaussian test matrix (drawn on the host).
    power_iteration_normalizer : {"QR", "auto", "householder", "none"}
        How each product is orthonormalised (HMT Algorithm 4.4, steps 2, 4
        and 5): ``"QR"`` (= ``"auto"``) Cholesky QR (one pass inside the
        loop when the triangular factor shows it accurate, Cholesky QR2
        certified by its Gram matrix otherwise and for the returned basis,
        Householder QR as the fallback); ``"householder"`` LAPACK Householder
        QR only; ``"none"`` no orthonormalisation until the end (HMT
        Algorithm 4.3). See :mod:`gpurpo.linalg.qr`.

    Returns
    -------
    Q : array, shape (m, size)
        Orthonormal columns, in the input's namespace and dtype (float32
        stays float32).

    Notes
    -----
    With ``size = k + p`` (``p >= 2``) and ``q`` iterations the expected
    spectral error obeys HMT Corollary 10.10 (tail bounded by
    ``sigma_{k+1}``): ``E||A - Q Q^T A|| <= c^(1/(2q+1)) sigma_{k+1}`` with
    ``c = 1 + sqrt(k/(p-1)) + e sqrt(k+p)/p * sqrt(min(m, n) - k)``.
    """
    op = as_operator(A, "A")
    size = check_int(size, "size")
    if not 1 <= size <= op.shape[0]:
        raise ValueError(
            f"size must be between 1 and the number of rows of A ({op.shape[0]}), got {size}"
        )
    n_iter = check_int(n_iter, "n_iter", low=0)
    normalizer = check_choice(power_iteration_normalizer, "power_iteration_normalizer", NORMALIZERS)
    rng = check_random_state(random_state)
    return op.output(_range_finder(op, size, n_iter, rng, normalizer))


def randomized_svd(
    A: Any,
    n_components: int,
    n_oversamples: int = 10,
    n_iter: int | str = "auto",
    random_state: Any = None,
    power_iteration_normalizer: str = "QR",
) -> tuple[Any, Any, Any]:
    """Truncated SVD ``A ~ U diag(s) Vt`` by randomized subspace iteration.

    Stage A is HMT Algorithm 4.4 with ``l = k + p`` samples, stage B HMT
    Algorithm 5.1. The decomposition runs on ``A.T`` when ``A`` has more
    columns than rows (the cheaper side).

    Parameters
    ----------
    A : array, sparse matrix or operator, shape (m, n)
        Dense, sparse or implicit (``shape``, ``matmat``, ``rmatmat``).
    n_components : int
        Rank ``k``, ``1 <= k <= min(m, n)``.
    n_oversamples : int, default=10
        Oversampling ``p``; ``l = min(k + p, min(m, n))`` samples are drawn.
    n_iter : int or "auto", default="auto"
        Power iterations ``q``; ``"auto"`` uses 7 when ``k < 0.1 min(m, n)``
        and 4 otherwise (as scikit-learn).
    random_state : None, int, numpy Generator or RandomState
        Seed of the Gaussian test matrix.
    power_iteration_normalizer : {"QR", "auto", "householder", "none"}
        See :func:`randomized_range_finder`.

    Returns
    -------
    U : array, shape (m, k)
        Left singular vectors (orthonormal columns).
    s : array, shape (k,)
        Singular values in decreasing order.
    Vt : array, shape (k, n)
        Right singular vectors (orthonormal rows); the largest-magnitude entry
        of each row is positive.

    All three are in the input's namespace and dtype (float32 stays float32).
    """
    op = as_operator(A, "A")
    k = check_n_components(n_components, op.shape, "A")
    p = check_int(n_oversamples, "n_oversamples", low=0)
    q = check_n_iter(n_iter, k, op.shape)
    normalizer = check_choice(power_iteration_normalizer, "power_iteration_normalizer", NORMALIZERS)
    rng = check_random_state(random_state)
    return op.output(*_randomized_svd(op, k, p, q, rng, normalizer))


def leverage_scores(
    A: Any,
    k: int,
    n_oversamples: int = 10,
    n_iter: int | str = "auto",
    random_state: Any = None,
    power_iteration_normalizer: str = "QR",
) -> Any:
    """Rank-``k`` column leverage scores of ``A``.

    ``ell_j = ||(V_k^T)_{:, j}||^2``, the SQUARED norm of column ``j`` of the
    top-``k`` right singular vectors (Bi & Kwok 2013, the numerator of
    Algorithm 1's sampling probabilities; Boutsidis, Mahoney & Drineas 2009,
    eq. (3)). Since ``V_k`` has orthonormal columns the scores lie in
    ``[0, 1]`` and sum to ``k``. ``V_k`` comes from :func:`randomized_svd`.

    Parameters
    ----------
    A : array, sparse matrix or operator, shape (m, n)
    k : int
        Rank, ``1 <= k <= min(m, n)``.
    n_oversamples, n_iter, random_state, power_iteration_normalizer
        As in :func:`randomized_svd`.

    Returns
    -------
    scores : array, shape (n,)
        One score per column of ``A``, in the input's namespace.
    """
    op = as_operator(A, "A")
    k = check_n_components(k, op.shape, "A", name="k")
    p = check_int(n_oversamples, "n_oversamples", low=0)
    q = check_n_iter(n_iter, k, op.shape)
    normalizer = check_choice(power_iteration_normalizer, "power_iteration_normalizer", NORMALIZERS)
    rng = check_random_state(random_state)
    Vt = _randomized_svd(op, k, p, q, rng, normalizer)[2]
    return op.output(op.xp.sum(Vt * Vt, axis=0))
