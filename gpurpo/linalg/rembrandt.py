"""Rembrandt label embeddings (Mineiro & Karampatziakis 2014).

P. Mineiro and N. Karampatziakis, "Fast label embeddings via randomized
linear algebra", ECML-PKDD 2015 (arXiv:1412.6547), Algorithm 2 ("Rembrandt":
Response EMBedding via RANDomized Techniques). The embedding is the top-``k``
eigenspace of ``M = Y^T P_X Y``, the covariance of the least-squares
predictions of ``Y`` from ``X``, with the ridge projector
``P_X = X (X^T X + alpha I)^{-1} X^T``. ``M`` is never formed: a product
``M Q`` solves one ridge problem ``min_Z ||Y Q - X Z||^2 + alpha ||Z||^2``
and multiplies back, ``M Q = Y^T (X Z)``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from gpurpo._validation import check_consistent_rows, check_int
from gpurpo.backend import check_random_state, resolve_backend
from gpurpo.linalg._operators import MatrixOperator, as_operator, check_n_components
from gpurpo.linalg._qr import orthonormalize, qr_factor
from gpurpo.linalg.ridge import RidgeSolver, check_solver_params

__all__ = ["rembrandt"]


def rembrandt(
    X: Any,
    Y: Any,
    n_components: int,
    n_oversamples: int = 20,
    n_iter: int = 1,
    alpha: float = 1e-3,
    random_state: Any = None,
    solver: str = "auto",
    tol: float | None = None,
    max_iter: int | None = None,
) -> tuple[Any, Any]:
    """Label embedding by a randomized range finder on ``Y^T P_X Y``.

    Algorithm 2 of Mineiro & Karampatziakis, with ``l = k + p`` columns:

    * line 3: ``Q <- randn(c, l)`` (orthonormalised, which keeps its span);
    * lines 4-7, ``n_iter`` times: ``Z <- argmin ||Y Q - X Z||^2`` (here with
      the ridge term ``alpha ||Z||^2``), ``Q <- orthogonalize(Y^T X Z)``;
    * lines 8-9: one more solve and ``F <- (Y^T X Z)^T (Y^T X Z)``;
    * line 10: ``(V, Sigma^2) <- eig(F, k)``, computed as the SVD of
      ``T = Y^T X Z`` (same ``V`` and ``Sigma`` without squaring ``T``);
    * line 11: ``V <- Q V``.

    In total ``n_iter + 1`` passes over the data. The ridge problems are
    solved by :class:`gpurpo.linalg.ridge.RidgeSolver`: a Cholesky
    factorisation of ``X^T X + alpha I`` for dense ``X`` of moderate width, or
    batched conjugate gradient for sparse, implicit or wide ``X``.

    Parameters
    ----------
    X : array, sparse matrix or operator, shape (n, d)
        Features.
    Y : array, sparse matrix or operator, shape (n, c)
        Labels (or any responses); sparse ``Y`` is never densified.
    n_components : int
        Embedding dimension ``k``, ``1 <= k <= min(n, c)``.
    n_oversamples : int, default=20
        Oversampling ``p`` (the paper's default); ``l = min(k + p, c)``.
    n_iter : int, default=1
        Range-finder iterations ``q`` (the paper's default).
    alpha : float, default=1e-3
        Ridge penalty of every least-squares fit, ``>= 0``.
    random_state : None, int, numpy Generator or RandomState
        Seed of the Gaussian start ``Q``.
    solver : {"auto", "direct", "cg"}
        ``"auto"``: direct for dense ``X`` with at most 2000 columns, else CG.
    tol, max_iter : optional
        Conjugate-gradient controls (see :class:`~gpurpo.linalg.ridge.RidgeSolver`).

    Returns
    -------
    R : array, shape (c, k)
        The label embedding, orthonormal columns (eigenvectors of ``M``).
    s : array, shape (k,)
        The corresponding eigenvalues of ``M = Y^T P_X Y`` (its singular
        values, ``M`` being positive semi-definite), decreasing.
    """
    operators = [a for a in (X, Y) if isinstance(a, MatrixOperator)]
    backend = operators[0].backend if operators else resolve_backend(X, Y)
    opX = as_operator(X, "X", backend)
    opY = as_operator(Y, "Y", backend)
    check_consistent_rows(X=opX, Y=opY)
    n, c = opY.shape
    k = check_n_components(n_components, opY.shape, "Y")
    p = check_int(n_oversamples, "n_oversamples", low=0)
    q = check_int(n_iter, "n_iter", low=0)
    alpha, solver, tol, max_iter = check_solver_params(alpha, solver, tol, max_iter)
    rng = check_random_state(random_state)
    xp = backend.xp
    dtype = np.result_type(opX.dtype, opY.dtype)
    ridge = RidgeSolver(opX, alpha, solver, tol, max_iter)

    def covariance_product(Q: Any) -> Any:
        """``Y^T P_X Y Q`` through one ridge solve (Algorithm 2, lines 5 and 8)."""
        Z = ridge.solve(xp.asarray(opY.matmat(Q), dtype=dtype))
        return xp.asarray(opY.rmatmat(xp.asarray(opX.matmat(Z), dtype=dtype)), dtype=dtype)

    # Y^T P_X Y has rank at most min(n, d): directions beyond it only make the
    # blocks rank deficient (and the orthonormalisation slower).
    size = min(k + p, c, max(k, min(n, opX.shape[1])))
    Q = orthonormalize(backend.asarray(rng.standard_normal((c, size), dtype=dtype)), xp, "QR")
    for _ in range(q):
        Q = orthonormalize(covariance_product(Q), xp, "QR")
    _, sigma, Vt = xp.linalg.svd(qr_factor(covariance_product(Q), xp)[1])
    embedding = Q @ Vt[:k].T
    return opY.output(xp.ascontiguousarray(embedding), sigma[:k])
