"""Ridge regression computed on the active backend: the default estimator of the label-space models.

``coef = argmin_B ||Y_c - X_c B||_F^2 + alpha ||B||_F^2`` with ``X_c``, ``Y_c``
the column-centred data (the intercept is not penalised), i.e. the normal
equations ``(X_c^T X_c + alpha I) B = X_c^T Y_c``. Two solvers, both written
once against ``xp``:

* ``"direct"``: the ``p x p`` Gram matrix ``X_c^T X_c`` is formed in float64
  (for sparse ``X`` as ``X^T X - n m m^T``, so ``X`` is never densified) and
  the system is solved by Cholesky factorisation, or through the
  eigendecomposition (minimum-norm solution) when it is singular
  (``alpha = 0`` and ``X`` rank deficient);
* ``"cg"``: batched conjugate gradient on the implicitly centred operator
  (:class:`gpurpo.linalg.RidgeSolver`), for wide or sparse ``X``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from sklearn.base import BaseEstimator, MultiOutputMixin, RegressorMixin
from sklearn.utils.validation import check_is_fitted

from gpurpo._input_features import check_feature_names, check_n_features
from gpurpo._validation import check_array, check_consistent_rows, check_finite_product
from gpurpo.backend import Backend, is_gpu_array, resolve_backend, to_host
from gpurpo.linalg import RidgeSolver, as_operator, centered
from gpurpo.linalg.ridge import DIRECT_MAX_FEATURES, check_solver_params

__all__ = ["RidgeRegression", "ridge_fit"]


def _column_means(X: Any, backend: Backend, dtype: Any) -> Any:
    xp = backend.xp
    if backend.issparse(X):
        total = xp.asarray(X.sum(axis=0, dtype=np.float64), dtype=xp.float64).ravel()
        return (total / X.shape[0]).astype(dtype)
    return xp.mean(X, axis=0, dtype=xp.float64).astype(dtype)


def _centered_gram(X: Any, x_mean: Any, backend: Backend) -> Any:
    """``X_c^T X_c`` in float64 without densifying sparse ``X``."""
    xp = backend.xp
    if backend.issparse(X):
        X64 = X.astype(np.float64)
        gram = xp.asarray((X64.T @ X64).toarray(), dtype=xp.float64)
        m = x_mean.astype(xp.float64)
        return gram - X.shape[0] * xp.outer(m, m)
    Xc = X.astype(xp.float64) - x_mean.astype(xp.float64)[None, :]
    return Xc.T @ Xc


def _cross(X: Any, Y: Any, backend: Backend) -> Any:
    """``X^T Y`` as a dense float64 array, for dense or sparse ``X`` and ``Y``."""
    xp = backend.xp
    X64 = X.astype(xp.float64)
    Y64 = Y.astype(xp.float64)
    if backend.issparse(Y) and not backend.issparse(X):
        return xp.ascontiguousarray((Y64.T @ X64).T)
    out = X64.T @ Y64
    if backend.issparse(out):
        out = out.toarray()
    return xp.asarray(out)


def _solve_normal_equations(gram: Any, rhs: Any, alpha: float, xp: Any) -> Any:
    """``(G + alpha I)^+ rhs`` for a symmetric positive semi-definite ``G`` (float64).

    Cholesky factorisation ``G + alpha I = L L^T`` and two solves when it is
    certified by its backward error (some backends return a partial factor
    instead of raising); otherwise, for a singular system (``alpha = 0`` and
    rank-deficient ``X``), the minimum-norm solution from the
    eigendecomposition ``G = V diag(w) V^T``.
    """
    p = gram.shape[0]
    shifted = gram + alpha * xp.eye(p, dtype=gram.dtype)
    try:
        lower = xp.linalg.cholesky(shifted)
    except np.linalg.LinAlgError:
        lower = None
    if lower is not None and bool(xp.isfinite(lower).all()):
        backward = xp.linalg.norm(lower @ lower.T - shifted)
        diagonal = xp.abs(xp.diagonal(lower))
        well_posed = bool(xp.min(diagonal) > 1e-7 * xp.max(diagonal))
        if well_posed and bool(backward <= 1e-10 * xp.linalg.norm(shifted)):
            return xp.linalg.solve(lower.T, xp.linalg.solve(lower, rhs))
    w, V = xp.linalg.eigh(gram)
    shifted_w = w + alpha
    cutoff = p * np.finfo(np.float64).eps * float(xp.max(xp.abs(shifted_w)))
    inverse = xp.where(shifted_w > cutoff, 1.0 / xp.where(shifted_w > cutoff, shifted_w, 1.0), 0.0)
    return V @ (inverse[:, None] * (V.T @ rhs))


def ridge_fit(
    X: Any,
    Y: Any,
    backend: Backend,
    alpha: float,
    fit_intercept: bool = True,
    solver: str = "auto",
    tol: float | None = None,
    max_iter: int | None = None,
) -> tuple[Any, Any, int]:
    """Fit ``Y ~ X B + 1 c^T`` with a ridge penalty on ``B``; inputs already validated.

    With ``m``, ``mu`` the column means of ``X`` and ``Y`` (zero without
    intercept), the direct solver uses ``X_c^T X_c = X^T X - n m m^T`` and
    ``X_c^T Y_c = X^T Y - n m mu^T``, so neither a sparse ``X`` nor a sparse
    ``Y`` is densified; then ``c = mu - B^T m``.

    Parameters
    ----------
    X : array or sparse matrix, shape (n, p)
        On ``backend``.
    Y : array or sparse matrix, shape (n, l)
        Targets on ``backend``; sparse targets always use the direct solver.
    backend : Backend
    alpha, fit_intercept, solver, tol, max_iter
        As in :class:`RidgeRegression`.

    Returns
    -------
    B : array, shape (p, l)
    c : array, shape (l,)
        In the working dtype (float32 when ``X`` and ``Y`` are both float32).
    n_iter : int
        Conjugate-gradient iterations, or 1 for the direct solver (one exact solve).
    """
    xp = backend.xp
    dtype = xp.float32 if (X.dtype == xp.float32 and Y.dtype == xp.float32) else xp.float64
    n, p = X.shape
    if fit_intercept:
        x_mean = _column_means(X, backend, xp.float64)
        y_mean = _column_means(Y, backend, xp.float64)
    else:
        x_mean = xp.zeros(p, dtype=xp.float64)
        y_mean = xp.zeros(Y.shape[1], dtype=xp.float64)
    if solver == "auto":
        solver = "direct" if p <= DIRECT_MAX_FEATURES or backend.issparse(Y) else "cg"
    if solver == "direct" or backend.issparse(Y):
        gram = _centered_gram(X, x_mean, backend)
        check_finite_product(gram, "the Gram matrix X^T X", "X")
        rhs = _cross(X, Y, backend) - n * xp.outer(x_mean, y_mean)
        check_finite_product(rhs, "the cross product X^T y", "X and y")
        B = _solve_normal_equations(gram, rhs, alpha, xp)
        n_iter = 1
    else:
        op = as_operator(X, "X", backend)
        if fit_intercept:
            op = centered(op, x_mean.astype(op.dtype))
        Yc = Y.astype(xp.float64) - y_mean[None, :]
        solver = RidgeSolver(op, alpha, "cg", tol, max_iter)
        B = solver.solve(Yc.astype(op.dtype)).astype(xp.float64)
        n_iter = max(1, solver.n_iter_)
    c = y_mean - x_mean @ B
    return B.astype(dtype), c.astype(dtype), n_iter


def in_namespace_of(result: Any, reference: Any) -> Any:
    """Return ``result`` in the namespace of the user's ``reference`` input."""
    return result if is_gpu_array(reference) else to_host(result)


class RidgeRegression(MultiOutputMixin, RegressorMixin, BaseEstimator):
    """Multi-output ridge regression on NumPy or CuPy (the label-space models' default).

    Minimises ``||Y - X B - 1 c^T||_F^2 + alpha ||B||_F^2`` (Hoerl & Kennard
    1970; the intercept ``c`` is not penalised), computed where the data live
    (CuPy input stays on the GPU). Sparse ``X`` is never densified.

    Parameters
    ----------
    alpha : float, default=1.0
        Ridge penalty, ``>= 0`` (``0``: minimum-norm least squares with the
        direct solver).
    fit_intercept : bool, default=True
        Fit ``c`` (equivalently, centre ``X`` and ``Y``).
    solver : {"auto", "direct", "cg"}, default="auto"
        ``"direct"``: Cholesky factorisation of the float64 ``p x p`` Gram
        matrix (eigendecomposition when singular); ``"cg"``: batched conjugate gradient
        (:class:`gpurpo.linalg.RidgeSolver`) on the implicitly centred ``X``;
        ``"auto"``: direct for at most 2000 features, else CG.
    tol, max_iter : optional
        Conjugate-gradient controls (see :class:`gpurpo.linalg.RidgeSolver`).
    device : {"auto", "cpu", "cuda"}, default="auto"
        Where to compute; ``"auto"`` follows the data.

    Attributes
    ----------
    coef_ : array, shape (n_targets, n_features) or (n_features,)
        ``B^T`` (1-D for a 1-D ``y``), in the namespace the model was fitted in.
    intercept_ : array of shape (n_targets,) or float
    n_iter_ : int
        Conjugate-gradient iterations (1 for the direct solver: one exact solve).
    n_features_in_ : int
    feature_names_in_ : ndarray of str, shape (n_features_in_,)
        Column names of the data frame ``X`` given to ``fit``, when they are all
        strings; absent otherwise. Later inputs must have the same names in the
        same order.
    """

    def __init__(
        self,
        alpha: float = 1.0,
        fit_intercept: bool = True,
        solver: str = "auto",
        tol: float | None = None,
        max_iter: int | None = None,
        device: str = "auto",
    ) -> None:
        self.alpha = alpha
        self.fit_intercept = fit_intercept
        self.solver = solver
        self.tol = tol
        self.max_iter = max_iter
        self.device = device

    def __sklearn_tags__(self) -> Any:
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        return tags

    def fit(self, X: Any, y: Any) -> RidgeRegression:
        """Fit on ``X`` (n, p), dense or sparse, and dense targets ``y`` (n,) or (n, l)."""
        if y is None:
            raise ValueError(f"{type(self).__name__} requires y to be passed, but the target y is None")
        alpha, solver, tol, max_iter = check_solver_params(self.alpha, self.solver, self.tol, self.max_iter)
        if not isinstance(self.fit_intercept, (bool, np.bool_)):
            raise TypeError(f"fit_intercept must be a bool, got {self.fit_intercept!r}")
        backend = resolve_backend(X, y, device=self.device)
        check_feature_names(self, X, reset=True)
        X = check_array(X, "X", backend, accept_sparse=True)
        if X.shape[1] < 1:
            raise ValueError(
                f"X has 0 feature(s) (shape={tuple(X.shape)}) while a minimum of 1 is required."
            )
        Y = check_array(y, "y", backend, accept_sparse=False, ensure_2d=False)
        if Y.ndim not in (1, 2):
            raise ValueError(f"y must be 1-D or 2-D, got shape {tuple(Y.shape)}")
        check_consistent_rows(X=X, y=Y)
        one_d = Y.ndim == 1
        B, c, self.n_iter_ = ridge_fit(
            X, Y[:, None] if one_d else Y, backend, alpha, bool(self.fit_intercept), solver, tol, max_iter
        )
        self.coef_ = B[:, 0] if one_d else backend.xp.ascontiguousarray(B.T)
        self.intercept_ = float(c[0]) if one_d else c
        check_n_features(self, X.shape[1], reset=True)
        return self

    def predict(self, X: Any) -> Any:
        """``X coef_^T + intercept_``, in the namespace of ``X``."""
        check_is_fitted(self, "coef_")
        backend = resolve_backend(X, device=self.device)
        check_feature_names(self, X, reset=False)
        Xv = check_array(X, "X", backend, accept_sparse=True)
        check_n_features(self, Xv.shape[1], reset=False)
        coef = backend.asarray(self.coef_)
        intercept = self.intercept_ if isinstance(self.intercept_, float) else backend.asarray(self.intercept_)
        out = Xv @ coef.T
        if coef.ndim == 1:
            out = backend.xp.asarray(out).ravel()
        return in_namespace_of(out + intercept, X)
