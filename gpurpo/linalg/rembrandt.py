"""Rembrandt label embeddings (Mineiro & Karampatziakis 2014).

P. Mineiro and N. Karampatziakis, "Fast label embeddings via randomized
linear algebra", ECML-PKDD 2015 (arXiv:1412.6547), Algorithm 2 ("Rembrandt":
Response EMBedding via RANDomized Techniques). The embedding is the top-``k``
eigenspace of ``M = Y^T P_X Y``, the covariance of the least-squares
predictions of ``Y`` from ``X``, with the ridge projector
``P_X = X (X^T X + alpha I)^{-1} X^T``.

``M`` is never formed at size ``c x c`` unless ``c`` is the smaller side.
Three ways to reach its eigenspace, with ``X`` of shape ``(n, d)``, ``Y`` of
shape ``(n, c)`` and ``l = k + p`` range-finder columns:

``"factored"``
    Algorithm 2 as written: a product ``M Q`` solves one ridge problem
    ``min_Z ||Y Q - X Z||^2 + alpha ||Z||^2`` and multiplies back,
    ``M Q = Y^T (X Z)``; ``O(n d l + nnz(Y) l)`` per pass. Works for sparse,
    implicit and wide ``X`` (conjugate gradient).
``"precomputed"``
    The same iterates, with the cross product ``W = Y^T X`` (``c x d``,
    ``O(nnz(Y) d)`` once) formed first: ``M Q = W (X^T X + alpha I)^{-1}
    W^T Q`` then costs ``O(c d l + d^2 l)`` per pass, independent of ``n``.
``"exact"``
    With the Cholesky factor ``X^T X + alpha I = L L^T`` and
    ``C = L^{-1} W^T`` (``d x c``), ``M = C^T C``. For ``d <= c`` the
    eigendecomposition ``C C^T = L^{-1} (W^T W) L^{-T} = U Lambda U^T``
    (``d x d``) gives the eigenvalues ``Lambda`` of ``M`` and its eigenvectors
    ``V = C^T U Lambda^{-1/2}``; for ``c < d``, ``M = C^T C`` itself is
    ``c x c``. No randomness and no iteration: the exact top-``k`` eigenpairs.

``method="auto"`` picks the cheapest by counting multiply-adds
(:func:`method_costs`); ``"precomputed"`` and ``"exact"`` need a dense ``X``
and the direct (Cholesky) solver, and ``"auto"`` forms ``W`` only when it is
no larger than ``X`` or :data:`CROSS_PRODUCT_MAX_ENTRIES`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from gpurpo._validation import (
    check_choice,
    check_consistent_rows,
    check_finite_product,
    check_int,
)
from gpurpo.backend import Backend, check_random_state, resolve_backend
from gpurpo.linalg.operators import MatrixOperator, as_operator, check_n_components
from gpurpo.linalg.qr import _cholesky_pass, normalize_block, orthonormalize, qr_factor
from gpurpo.linalg.ridge import RidgeSolver, check_solver_params

__all__ = [
    "CROSS_PRODUCT_MAX_ENTRIES",
    "METHODS",
    "exact_products_costs",
    "method_costs",
    "product_cost",
    "rembrandt",
]

METHODS = ("auto", "exact", "precomputed", "factored")

#: ``method="auto"`` forms the dense ``c x d`` cross product ``W = Y^T X`` only
#: when it has at most this many entries (256 MiB in float64) or no more than ``X``.
CROSS_PRODUCT_MAX_ENTRIES = 1 << 25

#: Multiply-add equivalents of a symmetric eigendecomposition, per ``m^3``
#: (tridiagonal reduction, divide and conquer and back-transformation run
#: well below matrix-product speed).
_EIGH_COST = 10

#: Multiply-add equivalents of drawing one Gaussian number.
_NORMAL_COST = 10


def product_cost(op: MatrixOperator) -> int:
    """Multiply-adds of a product of ``op`` with one column.

    ``nnz`` (plus the sizes of the input and output vectors) for sparse data,
    ``m n`` for dense data and for implicit operators, whose cost is unknown.
    """
    if op.kind == "sparse":
        return int(op.data.nnz) + op.shape[0] + op.shape[1]
    return op.shape[0] * op.shape[1]


def method_costs(
    n: int, d: int, c: int, k: int, size: int, n_iter: int, y_cost: int
) -> dict[str, float]:
    """Estimated multiply-adds of each method, less what they all share.

    The Gram matrix ``X^T X`` and its Cholesky factorisation are common to
    the three (with the direct solver) and left out.

    Parameters
    ----------
    n, d, c : int
        ``X`` is ``n x d``, ``Y`` is ``n x c``.
    k, size : int
        Embedding dimension and range-finder block width ``l``.
    n_iter : int
        Range-finder iterations ``q`` (``q + 1`` products with ``M``).
    y_cost : int
        Multiply-adds of a product of ``Y`` (or ``Y^T``) with one column
        (:func:`product_cost`).

    Returns
    -------
    dict
        ``{"factored": ..., "precomputed": ..., "exact": ...}``.
    """
    n, d, c, k, size, y_cost = (float(v) for v in (n, d, c, k, size, y_cost))
    passes = n_iter + 1
    # Cholesky QR passes on c x l blocks (about n_iter + 3 of them), the
    # Gaussian start and the final rotation Q V.
    finder = 1.5 * (n_iter + 3) * c * size**2 + _NORMAL_COST * c * size + c * size * k
    solve = 2 * d * d * size
    factored = passes * (2 * n * d * size + 2 * y_cost * size + solve) + finder
    cross = y_cost * d
    precomputed = cross + passes * (2 * c * d * size + solve) + finder
    if d <= c:
        gram, rotate = exact_products_costs(n, d, c, k, y_cost)
        # L^{-1} (W^T W) L^{-T}, eigh, L^{-T} U_k, one Cholesky QR pass on V
        exact = min(gram.values()) + (2 + _EIGH_COST) * d**3 + d * d * k
        exact += min(rotate.values()) + 1.5 * c * k * k
    else:
        # D = W L^{-T}, M = D D^T, eigh
        exact = c * d * d + c * c * d / 2 + _EIGH_COST * c**3
    return {"factored": factored, "precomputed": precomputed, "exact": cross + exact}


def exact_products_costs(
    n: float, d: float, c: float, k: float, y_cost: float
) -> tuple[dict[str, float], dict[str, float]]:
    """Multiply-adds of the two ways to form ``W^T W`` and ``W Z`` (``Z`` of ``k`` columns).

    ``W^T W``: a symmetric product of the ``c x d`` block (``"cross"``), or
    ``X^T (Y W)`` through the data (``"data"``); ``W Z``: with ``W``, or as
    ``Y^T (X Z)``. The data route wins when ``c`` is large against ``n``.
    """
    gram = {"cross": c * d * d / 2, "data": y_cost * d + n * d * d}
    rotate = {"cross": c * d * k, "data": (n * d + y_cost) * k}
    return gram, rotate


def _choose_method(
    method: str, opX: MatrixOperator, opY: MatrixOperator, ridge: RidgeSolver, k: int,
    size: int, n_iter: int,
) -> str:
    """The method to run: ``method`` itself, or for ``"auto"`` the cheapest allowed one."""
    cross_ok = opX.kind == "dense" and ridge.solver == "direct"
    if method in ("exact", "precomputed") and not cross_ok:
        raise ValueError(
            f"method={method!r} needs a dense X and the direct solver, got a {opX.kind} X "
            f"of shape {opX.shape} with solver={ridge.solver!r}; use method='factored' or 'auto'"
        )
    if method != "auto":
        return method
    n, d = opX.shape
    c = opY.shape[1]
    if not cross_ok or c * d > max(n * d, CROSS_PRODUCT_MAX_ENTRIES):
        return "factored"
    costs = method_costs(n, d, c, k, size, n_iter, product_cost(opY))
    return min(costs, key=costs.get)


def _orthonormal_columns(V: Any, xp: Any) -> Any:
    """Orthonormalise nearly orthonormal columns, keeping their signs.

    One Cholesky QR pass is accurate to working precision when
    ``||V^T V - I||_F <= 0.1`` (its error is about ``u cond(V)^2``); otherwise,
    for instance with zero columns, Cholesky QR2 or Householder QR
    (:func:`~gpurpo.linalg.qr.qr_factor`) complete the basis.
    """
    first = _cholesky_pass(V, xp)
    if first is not None:
        Q, _, gram = first
        if bool(xp.linalg.norm(gram - xp.eye(gram.shape[0], dtype=gram.dtype)) <= 0.1):
            return Q
    Q, R = qr_factor(V, xp)
    return Q * xp.where(xp.diag(R) < 0, -1.0, 1.0).astype(Q.dtype)[None, :]


def _top(values: Any, vectors: Any, k: int, xp: Any) -> tuple[Any, Any]:
    """The ``k`` largest eigenpairs of an ascending ``eigh`` result, decreasing.

    With fewer than ``k`` eigenpairs (``M`` of rank below ``k``), the missing
    eigenvalues are zero and their vectors zero columns, to be completed.
    """
    values = xp.maximum(values[::-1][:k], 0.0)
    vectors = vectors[:, ::-1][:, :k]
    missing = k - values.shape[0]
    if missing > 0:
        values = xp.concatenate([values, xp.zeros(missing, dtype=values.dtype)])
        pad = xp.zeros((vectors.shape[0], missing), dtype=vectors.dtype)
        vectors = xp.concatenate([vectors, pad], axis=1)
    return values, vectors


def _exact_embedding(
    opX: MatrixOperator, opY: MatrixOperator, W: Any, ridge: RidgeSolver, k: int
) -> tuple[Any, Any]:
    """Top-``k`` eigenpairs ``(V, lambda)`` of ``M = C^T C``, ``C = L^{-1} W^T`` (float64).

    ``W = Y^T X``; products that involve ``W`` are formed with it or through
    ``X`` and ``Y``, whichever :func:`exact_products_costs` finds cheaper.
    """
    xp = opX.xp
    inv_lower = ridge.inverse_factor
    W = xp.asarray(W, dtype=xp.float64)
    c, d = W.shape
    n = opX.shape[0]
    if c < d:
        D = W @ inv_lower.T  # C^T
        M = D @ D.T
        check_finite_product(M, "the matrix Y^T P_X Y", "X and Y")
        values, V = _top(*xp.linalg.eigh(M), k, xp)
        return V, values
    gram_costs, rotate_costs = exact_products_costs(n, d, c, k, product_cost(opY))
    if gram_costs["cross"] <= gram_costs["data"]:
        gram = W.T @ W
        check_finite_product(gram, "the product W^T W of W = Y^T X", "X and Y")
    else:
        gram = xp.asarray(opX.rmatmat(xp.asarray(opY.matmat(W), dtype=opX.dtype)), dtype=xp.float64)
        gram = (gram + gram.T) / 2
        check_finite_product(gram, "the product X^T Y W of W = Y^T X", "X and Y")
    values, U = _top(*xp.linalg.eigh(inv_lower @ gram @ inv_lower.T), k, xp)
    # V = C^T U Lambda^{-1/2} = W L^{-T} U Lambda^{-1/2}; directions of
    # numerically zero eigenvalues are dropped here and completed by the
    # orthonormalisation.
    eps = float(np.finfo(np.float64).eps)
    keep = values > 10 * d * eps * values[0]
    scale = xp.where(keep, 1.0 / xp.sqrt(xp.where(keep, values, 1.0)), 0.0)
    Z = (inv_lower.T @ U) * scale[None, :]
    if rotate_costs["cross"] <= rotate_costs["data"]:
        V = W @ Z
    else:
        XZ = xp.asarray(opX.matmat(xp.asarray(Z, dtype=opX.dtype)), dtype=opY.dtype)
        V = xp.asarray(opY.rmatmat(XZ), dtype=xp.float64)
    return _orthonormal_columns(V, xp), values


def _range_finder(
    product: Callable[[Any], Any], c: int, size: int, k: int, n_iter: int,
    rng: np.random.Generator, backend: Backend, dtype: Any,
) -> tuple[Any, Any]:
    """Algorithm 2, lines 3-11, for a product ``Q -> M Q``.

    The Gaussian start is only orthonormalised when it is also the final
    basis (``n_iter = 0``): ``M Q`` has the span of ``M (Q R^{-1})``. Between
    iterations a single Cholesky QR pass suffices when it is accurate
    (:func:`~gpurpo.linalg.qr.normalize_block`); the last basis is
    orthonormal to working precision.
    """
    xp = backend.xp
    Q = backend.asarray(rng.standard_normal((c, size), dtype=dtype))
    if n_iter == 0:
        Q = orthonormalize(Q, xp, "QR")
    for i in range(n_iter):
        T = product(Q)
        check_finite_product(T, "a product with Y^T P_X Y", "X and Y")
        Q = orthonormalize(T, xp, "QR") if i == n_iter - 1 else normalize_block(T, xp, "QR")
    T = product(Q)
    check_finite_product(T, "a product with Y^T P_X Y", "X and Y")
    _, sigma, Vt = xp.linalg.svd(qr_factor(T, xp)[1])
    return Q @ Vt[:k].T, sigma[:k]


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
    method: str = "auto",
) -> tuple[Any, Any]:
    """Label embedding: the top eigenspace of ``Y^T P_X Y``, ``P_X = X (X^T X + alpha I)^{-1} X^T``.

    ``P_X`` is the ridge projector: with ``alpha = 0`` the projection onto the
    column space of ``X`` (the paper's least-squares fits), with ``alpha > 0``
    its ridge version, whose eigenvalues differ accordingly.

    Algorithm 2 of Mineiro & Karampatziakis, with ``l = k + p`` columns:

    * line 3: ``Q <- randn(c, l)``;
    * lines 4-7, ``n_iter`` times: ``Z <- argmin ||Y Q - X Z||^2`` (here with
      the ridge term ``alpha ||Z||^2``), ``Q <- orthogonalize(Y^T X Z)``;
    * lines 8-9: one more solve and ``F <- (Y^T X Z)^T (Y^T X Z)``;
    * line 10: ``(V, Sigma^2) <- eig(F, k)``, computed as the SVD of the
      triangular factor of ``T = Y^T X Z`` (same ``V`` and ``Sigma`` without
      squaring ``T``);
    * line 11: ``V <- Q V``.

    ``method`` chooses how the products with ``M`` are formed, or replaces the
    range finder by the exact eigendecomposition when that is cheaper (see the
    module docstring). The ridge problems are solved by
    :class:`gpurpo.linalg.ridge.RidgeSolver`: a Cholesky factorisation of
    ``X^T X + alpha I`` for dense ``X`` of moderate width, or batched
    conjugate gradient for sparse, implicit or wide ``X``.

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
        Seed of the Gaussian start ``Q`` (unused by ``method="exact"``).
    solver : {"auto", "direct", "cg"}
        ``"auto"``: direct for dense ``X`` with at most 2000 columns, else CG.
    tol, max_iter : optional
        Conjugate-gradient controls (see :class:`~gpurpo.linalg.ridge.RidgeSolver`).
    method : {"auto", "exact", "precomputed", "factored"}, default="auto"
        ``"factored"``: Algorithm 2 through ``X`` and ``Y``; ``"precomputed"``:
        the same iterates through ``W = Y^T X``; ``"exact"``: the exact
        eigenpairs; ``"auto"``: the cheapest by :func:`method_costs`.
        ``"precomputed"`` and ``"exact"`` need a dense ``X`` and the direct
        solver.

    Returns
    -------
    R : array, shape (c, k)
        The label embedding, orthonormal columns (eigenvectors of ``M``).
    s : array, shape (k,)
        The corresponding eigenvalues of ``M = Y^T P_X Y`` with the ridge
        projector above (its singular values, ``M`` being positive
        semi-definite), decreasing.
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
    method = check_choice(method, "method", METHODS)
    rng = check_random_state(random_state)
    xp = backend.xp
    dtype = np.result_type(opX.dtype, opY.dtype)
    ridge = RidgeSolver(opX, alpha, solver, tol, max_iter)
    # Y^T P_X Y has rank at most min(n, d): directions beyond it only make the
    # blocks rank deficient (and the orthonormalisation slower).
    size = min(k + p, c, max(k, min(n, opX.shape[1])))
    method = _choose_method(method, opX, opY, ridge, k, size, q)

    if method == "factored":

        def product(Q: Any) -> Any:
            """``Y^T P_X Y Q`` through one ridge solve (Algorithm 2, lines 5 and 8)."""
            Z = ridge.solve(xp.asarray(opY.matmat(Q), dtype=dtype))
            return xp.asarray(opY.rmatmat(xp.asarray(opX.matmat(Z), dtype=dtype)), dtype=dtype)

    else:
        W = xp.asarray(opY.rmatmat(opX.data), dtype=dtype)  # Y^T X, c x d
        check_finite_product(W, "the cross product W = Y^T X", "X and Y")
        if method == "exact":
            R, s = _exact_embedding(opX, opY, W, ridge, k)
            return opY.output(xp.ascontiguousarray(R.astype(dtype)), s.astype(dtype))

        def product(Q: Any) -> Any:
            """``W (X^T X + alpha I)^{-1} W^T Q``, the same ``M Q``."""
            return W @ ridge.solve_normal(W.T @ Q)

    embedding, sigma = _range_finder(product, c, size, k, q, rng, backend, dtype)
    return opY.output(xp.ascontiguousarray(embedding), sigma)
