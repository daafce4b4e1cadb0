"""Ridge least squares with many right-hand sides, written once against ``xp``.

Solves ``Z = argmin_Z ||B - X Z||_F^2 + alpha ||Z||_F^2``, i.e.
``(X^T X + alpha I) Z = X^T B``, for a block ``B`` of ``l`` columns:

* ``"direct"``: Cholesky factorisation ``X^T X + alpha I = L L^T`` computed
  once (in float64), after which every block costs two products with ``X``
  and two with ``L^{-1}``;
* ``"cg"``: conjugate gradient on the normal equations in the CGLS form
  (Hestenes & Stiefel 1952; Paige & Saunders, ACM TOMS 8(1), 1982, section
  7.1, with the damping ``alpha``), batched over the ``l`` columns: each
  iteration costs one product with ``X`` and one with ``X.T``, and ``X^T X`` is
  never formed, so sparse and implicit ``X`` work.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
from sklearn.exceptions import ConvergenceWarning

from gpurpo._validation import (
    check_array,
    check_choice,
    check_consistent_rows,
    check_finite_product,
    check_float,
    check_int,
)
from gpurpo.backend import resolve_backend
from gpurpo.linalg.operators import MatrixOperator, as_operator, working_dtype

__all__ = ["RidgeSolver", "ridge_solve", "SOLVERS"]

SOLVERS = ("auto", "direct", "cg")

#: "auto" uses the direct solver for dense X with at most this many columns.
DIRECT_MAX_FEATURES = 2000


def lower_inverse(L: Any, xp: Any, block: int = 64) -> Any:
    """Inverse of a lower-triangular ``L`` by recursive 2 x 2 blocking.

    ``[[A, 0], [B, C]]^{-1} = [[A^{-1}, 0], [-C^{-1} B A^{-1}, C^{-1}]]``, the
    recursion of LAPACK's blocked ``trtri``: about ``m^3 / 3`` multiply-adds,
    almost all in matrix products, against ``m^3`` for a general inverse.
    Blocks of at most ``block`` rows are inverted by ``xp.linalg.inv``
    (raising ``LinAlgError`` for a singular diagonal block).
    """
    m = L.shape[0]
    if m <= block:
        return xp.tril(xp.linalg.inv(L))
    h = m // 2
    inv_a = lower_inverse(L[:h, :h], xp, block)
    inv_c = lower_inverse(L[h:, h:], xp, block)
    out = xp.zeros_like(L)
    out[:h, :h] = inv_a
    out[h:, h:] = inv_c
    out[h:, :h] = -(inv_c @ (L[h:, :h] @ inv_a))
    return out


class RidgeSolver:
    """Reusable solver of ``(X^T X + alpha I) Z = X^T B`` for blocks ``B``.

    Parameters
    ----------
    op : MatrixOperator
        ``X``, shape ``(n, d)``.
    alpha : float
        Ridge penalty ``>= 0`` (``0`` needs ``X`` of full column rank for
        ``"direct"``).
    solver : {"auto", "direct", "cg"}
        ``"auto"``: ``"direct"`` for dense ``X`` with at most
        :data:`DIRECT_MAX_FEATURES` columns, ``"cg"`` otherwise.
    tol : float, optional
        CG stopping tolerance per column, LSQR's rules with the ridge term:
        ``||r|| <= tol (||b|| + ||X|| ||z||)`` or
        ``||X^T r - alpha z|| <= tol (||X|| ||r|| + alpha ||z||)``, ``r = b - X z``.
        Default ``1e-8`` (float64) or ``1e-4`` (float32); values below ten
        machine epsilons are raised to that.
    max_iter : int, optional
        Maximum CG iterations (default 1000); a ``ConvergenceWarning`` is
        issued when a column has not converged by then.
    """

    def __init__(
        self,
        op: MatrixOperator,
        alpha: float,
        solver: str = "auto",
        tol: float | None = None,
        max_iter: int | None = None,
    ) -> None:
        self.op = op
        self.alpha = alpha
        if solver == "auto":
            solver = "direct" if op.kind == "dense" and op.shape[1] <= DIRECT_MAX_FEATURES else "cg"
        self.solver = solver
        if tol is None:
            tol = 1e-8 if op.dtype == np.float64 else 1e-4
        self.tol = tol
        self.max_iter = 1000 if max_iter is None else max_iter
        self.n_iter_: int = 0
        self._inv_lower = None
        if solver == "direct":
            self._factorize()

    def _factorize(self) -> None:
        xp = self.op.xp
        d = self.op.shape[1]
        gram = self.op.gram()
        check_finite_product(gram, "the Gram matrix X^T X", "X")
        gram = gram + self.alpha * xp.eye(d, dtype=xp.float64)
        try:
            lower = xp.linalg.cholesky(gram)
            inv_lower = lower_inverse(lower, xp)
        except np.linalg.LinAlgError:
            inv_lower = None
        # Some backends (CuPy by default) return a partial factor instead of
        # raising: certify the factorisation by its backward error.
        if inv_lower is not None and bool(xp.isfinite(inv_lower).all()):
            backward = xp.linalg.norm(lower @ lower.T - gram)
            if not bool(backward <= 1e-8 * xp.linalg.norm(gram)):
                inv_lower = None
        if inv_lower is None or not bool(xp.isfinite(inv_lower).all()):
            raise ValueError(
                f"X^T X + alpha I is not numerically positive definite with alpha={self.alpha} "
                f"(X of shape {self.op.shape}); increase alpha or use solver='cg'"
            )
        self._inv_lower = inv_lower

    @property
    def inverse_factor(self) -> Any:
        """``L^{-1}`` (float64, lower triangular) with ``X^T X + alpha I = L L^T``.

        Only for the ``"direct"`` solver; ``(X^T X + alpha I)^{-1} = L^{-T} L^{-1}``.
        """
        if self._inv_lower is None:
            raise ValueError(f"inverse_factor needs solver='direct', this solver is {self.solver!r}")
        return self._inv_lower

    def solve_normal(self, rhs: Any) -> Any:
        """``(X^T X + alpha I)^{-1} rhs`` for a dense ``(d, l)`` block (``"direct"`` only).

        Computed in float64 and returned in ``rhs``'s dtype.
        """
        inv_lower = self.inverse_factor
        xp = self.op.xp
        Z = inv_lower.T @ (inv_lower @ xp.asarray(rhs, dtype=xp.float64))
        return Z.astype(rhs.dtype, copy=False)

    def solve(self, B: Any) -> Any:
        """``Z`` of shape ``(d, l)`` for ``B`` of shape ``(n, l)``, in ``B``'s dtype."""
        if self.solver == "direct":
            return self.solve_normal(self.op.rmatmat(B)).astype(B.dtype, copy=False)
        return self._cgls(B)

    def _cgls(self, B: Any) -> Any:
        """Batched CGLS for ``min ||B - X Z||^2 + alpha ||Z||^2`` (one CG per column).

        Per column, with ``r = b - X z`` and ``s = X^T r - alpha z`` (the
        normal-equation residual): ``a = ||s||^2 / (||X p||^2 + alpha ||p||^2)``,
        ``z += a p``, ``r -= a X p``, ``s' = X^T r - alpha z``,
        ``p = s' + (||s'||^2 / ||s||^2) p``. A column stops (and is frozen)
        by the stopping rules of LSQR (Paige & Saunders 1982, section 6):
        S1 ``||r|| <= tol (||b|| + ||X|| ||z||)`` (a near-exact fit) or S2
        ``||s|| <= tol (||X|| ||r|| + alpha ||z||)`` (normal equations solved,
        with the ridge term), ``||X||`` being the running estimate
        ``max ||X p|| / ||p||``. Unlike a test relative to ``||X^T b||`` these
        are reachable in floating point when ``b`` is far from the range of X.
        """
        op = self.op
        xp = op.xp
        d = op.shape[1]
        dtype = B.dtype
        tol = max(self.tol, 10 * float(np.finfo(dtype).eps))
        Z = xp.zeros((d, B.shape[1]), dtype=dtype)
        R = B.copy()
        b_norm = xp.sqrt(xp.sum(B * B, axis=0))
        S = op.rmatmat(R)
        P = S.copy()
        gamma = xp.sum(S * S, axis=0)
        norm_estimate = xp.zeros((), dtype=dtype)
        active = gamma > 0
        iteration = 0
        while iteration < self.max_iter and bool(active.any()):
            iteration += 1
            T = op.matmat(P)
            t_sq = xp.sum(T * T, axis=0)
            p_sq = xp.sum(P * P, axis=0)
            ratio = xp.where(active & (p_sq > 0), t_sq / xp.where(p_sq > 0, p_sq, 1), 0)
            norm_estimate = xp.maximum(norm_estimate, xp.sqrt(xp.max(ratio)))
            delta = t_sq + self.alpha * p_sq
            step = xp.where(active & (delta > 0), gamma / xp.where(delta > 0, delta, 1), 0)
            Z += step[None, :] * P
            R -= step[None, :] * T
            S = op.rmatmat(R) - self.alpha * Z
            gamma_new = xp.sum(S * S, axis=0)
            beta = xp.where(active, gamma_new / xp.where(gamma > 0, gamma, 1), 0)
            P = S + beta[None, :] * P
            gamma = xp.where(active, gamma_new, gamma)
            r_norm = xp.sqrt(xp.sum(R * R, axis=0))
            z_norm = xp.sqrt(xp.sum(Z * Z, axis=0))
            normal_ok = xp.sqrt(gamma) <= tol * (norm_estimate * r_norm + self.alpha * z_norm)
            fit_ok = r_norm <= tol * (b_norm + norm_estimate * z_norm)
            active = active & ~normal_ok & ~fit_ok
        self.n_iter_ = iteration
        if bool(active.any()):
            warnings.warn(
                f"conjugate gradient did not reach tol={self.tol} in max_iter={self.max_iter} "
                "iterations; increase max_iter or alpha",
                ConvergenceWarning,
                stacklevel=3,
            )
        return Z


def check_solver_params(
    alpha: Any, solver: Any, tol: Any, max_iter: Any
) -> tuple[float, str, float | None, int | None]:
    alpha = check_float(alpha, "alpha", low=0.0)
    solver = check_choice(solver, "solver", SOLVERS)
    if tol is not None:
        tol = check_float(tol, "tol", low=0.0, low_inclusive=False)
    if max_iter is not None:
        max_iter = check_int(max_iter, "max_iter", low=1)
    return alpha, solver, tol, max_iter


def ridge_solve(
    X: Any,
    B: Any,
    alpha: float = 1e-3,
    solver: str = "auto",
    tol: float | None = None,
    max_iter: int | None = None,
) -> Any:
    """Solve ``min_Z ||B - X Z||_F^2 + alpha ||Z||_F^2`` for every column of ``B``.

    Parameters
    ----------
    X : array, sparse matrix or operator, shape (n, d)
    B : array or sparse matrix, shape (n, l)
        Right-hand sides; sparse ``B`` is densified (it is a block of targets).
    alpha : float, default=1e-3
        Ridge penalty, ``>= 0``.
    solver : {"auto", "direct", "cg"}
        See :class:`RidgeSolver`.
    tol, max_iter : optional
        Conjugate-gradient controls, see :class:`RidgeSolver`.

    Returns
    -------
    Z : array, shape (d, l)
        In the inputs' namespace.
    """
    backend = X.backend if isinstance(X, MatrixOperator) else resolve_backend(X, B)
    op = as_operator(X, "X", backend)
    block = check_array(B, "B", backend, accept_sparse=True)
    check_consistent_rows(X=op, B=block)
    alpha, solver, tol, max_iter = check_solver_params(alpha, solver, tol, max_iter)
    if backend.issparse(block):
        block = block.toarray()
    dtype = np.result_type(op.dtype, working_dtype(block.dtype))
    block = backend.asarray(block, dtype=dtype)
    Z = RidgeSolver(op, alpha, solver, tol, max_iter).solve(block)
    return op.output(Z)
