"""Logistic decoder of the Rembrandt classification pipeline: log loss, L-BFGS, early stopping.

Mineiro & Karampatziakis (arXiv:1412.6547), Algorithm 3, fit the final map
``Q`` from the (feature-mapped) predicted embedding ``H = phi(X W)`` to the
labels by minimising the log loss:

* multiclass (one label per sample): softmax,
  ``L = 1/n sum_i [log sum_j exp(l_ij) - l_{i y_i}]``;
* multi-label: independent sigmoids,
  ``L = 1/n sum_i sum_j [log(1 + exp(l_ij)) - y_ij l_ij]``;

with logits ``l = H Q + 1 b^T`` and an L2 penalty ``alpha/2 ||Q||_F^2``. The
columns of ``H`` are standardised (zero mean, unit variance) first and the
penalty applies to the coefficients of the standardised columns, so it does
not depend on the scale of the embedding; the returned coefficients are
converted back to the raw ``H``.
The optimiser is full-batch L-BFGS (Nocedal & Wright, "Numerical
Optimization", 2nd ed., Algorithm 7.4 two-loop recursion, Algorithm 3.1
backtracking Armijo line search) written once against ``xp``, so it runs on
CuPy as well; it is deterministic. Early stopping monitors the log loss on a
held-out fraction of the rows and keeps the best iterate.

The label matrix enters the loss only through ``sum_ij y_ij l_ij =
<Q, H^T Y> + <b, 1^T Y>``: ``H^T Y`` is computed once by a sparse-dense
product, so a sparse ``Y`` is never densified; the remaining terms are
accumulated over blocks of rows to bound memory.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import numpy as np

from gpurpo.backend import Backend
from gpurpo.label_space._ridge_estimator import _column_means, _cross

__all__ = ["DecoderFit", "fit_logistic_decoder", "logistic_scores"]

#: Bytes of (rows x labels) temporaries per block of the loss and gradient.
_BLOCK_BYTES = 64 * 2**20
#: L-BFGS memory (number of correction pairs), reduced (down to 3) so that
#: the stored pairs take at most _MEMORY_BYTES for very many labels.
_MEMORY = 10
_MEMORY_BYTES = 2**30
#: Armijo sufficient-decrease constant and maximum number of step halvings.
_ARMIJO = 1e-4
_MAX_HALVINGS = 40


class DecoderFit(NamedTuple):
    """Fitted logistic decoder: scores ``H coef + intercept``.

    Attributes
    ----------
    coef : array, shape (D, C)
    intercept : array, shape (C,)
    n_iter : int
        L-BFGS iterations run.
    best_iteration : int
        Iteration whose parameters were kept (0: the initial point).
    validation_loss : list of float
        Held-out log loss after each iteration (empty without early stopping).
    """

    coef: Any
    intercept: Any
    n_iter: int
    best_iteration: int
    validation_loss: list


class _Rows(NamedTuple):
    """One row subset of the standardised problem: ``H``, ``H^T Y`` and ``1^T Y``."""

    H: Any
    HtY: Any
    ysum: Any
    n: int


def _rows(H: Any, Y: Any, backend: Backend) -> _Rows:
    xp = backend.xp
    ysum = _column_means(Y, backend, xp.float64) * Y.shape[0]
    return _Rows(H, _cross(H, Y, backend).astype(H.dtype), ysum.astype(H.dtype), int(H.shape[0]))


def _log_partition(logits: Any, multiclass: bool, xp: Any) -> tuple[Any, Any]:
    """Per-block sum of ``log sum exp`` (softmax) or ``softplus`` (sigmoids) and the probabilities."""
    if multiclass:
        top = xp.max(logits, axis=1, keepdims=True)
        e = xp.exp(logits - top)
        total = xp.sum(e, axis=1, keepdims=True)
        return xp.sum(top) + xp.sum(xp.log(total)), e / total
    softplus = xp.logaddexp(0.0, logits)
    return xp.sum(softplus), xp.exp(logits - softplus)


class _Objective:
    """Mean log loss (plus ``alpha/2 ||Q||^2``) of ``Theta = [Q; b^T]``, shape (D + 1, C)."""

    def __init__(self, rows: _Rows, multiclass: bool, alpha: float, xp: Any) -> None:
        self.rows = rows
        self.multiclass = multiclass
        self.alpha = alpha
        self.xp = xp
        C = rows.HtY.shape[1]
        itemsize = np.dtype(rows.H.dtype).itemsize
        self.block = max(1, _BLOCK_BYTES // max(1, 3 * C * itemsize))

    def __call__(self, theta: Any, gradient: bool = True, penalty: bool = True) -> tuple[float, Any]:
        xp = self.xp
        H, n = self.rows.H, self.rows.n
        Q, b = theta[:-1], theta[-1]
        total = xp.zeros((), dtype=theta.dtype)
        grad = xp.zeros_like(theta) if gradient else None
        for start in range(0, n, self.block):
            Hb = H[start : start + self.block]
            logz, P = _log_partition(Hb @ Q + b[None, :], self.multiclass, xp)
            total = total + logz
            if gradient:
                grad[:-1] += Hb.T @ P
                grad[-1] += xp.sum(P, axis=0)
        linear = xp.sum(Q * self.rows.HtY) + xp.sum(b * self.rows.ysum)
        loss = float(total - linear) / n
        if penalty:
            loss += 0.5 * self.alpha * float(xp.sum(Q * Q))
        if gradient:
            grad[:-1] -= self.rows.HtY
            grad[-1] -= self.rows.ysum
            grad /= n
            if penalty:
                grad[:-1] += self.alpha * Q
        return loss, grad


def _initial_bias(rows: _Rows, multiclass: bool, xp: Any) -> Any:
    """Log label frequencies (smoothed): the best constant model, a good starting point."""
    freq = (rows.ysum + 0.5) / (rows.n + 1.0)
    if multiclass:
        logb = xp.log(freq)
        return logb - xp.mean(logb)
    freq = xp.minimum(freq, 1.0 - 0.5 / (rows.n + 1.0))
    return xp.log(freq) - xp.log1p(-freq)


def _two_loop(grad: Any, pairs: list[tuple[Any, Any, float]], xp: Any) -> Any:
    """L-BFGS direction ``-H_k grad`` (Nocedal & Wright, Algorithm 7.4)."""
    q = grad.copy()
    alphas = []
    for s, y, rho in reversed(pairs):
        a = rho * float(xp.sum(s * q))
        alphas.append(a)
        q -= a * y
    if pairs:
        s, y, rho = pairs[-1]
        q *= 1.0 / (rho * float(xp.sum(y * y)))
    for (s, y, rho), a in zip(pairs, reversed(alphas)):
        beta = rho * float(xp.sum(y * q))
        q += (a - beta) * s
    return -q


def fit_logistic_decoder(
    H: Any,
    Y: Any,
    backend: Backend,
    *,
    multiclass: bool,
    alpha: float,
    max_iter: int,
    tol: float,
    validation_fraction: float | None,
    n_iter_no_change: int,
    rng: np.random.Generator,
    verbose: int = 0,
) -> DecoderFit:
    """Fit ``Q, b`` minimising the log loss of ``H Q + 1 b^T`` for labels ``Y``.

    Parameters
    ----------
    H : array, shape (n, D)
        Dense inputs of the decoder on ``backend`` (Algorithm 3's
        ``phi(X W)``); standardised internally, the returned coefficients
        apply to the raw ``H``.
    Y : array or sparse matrix, shape (n, C)
        0/1 labels (one-hot rows when ``multiclass``); sparse is not densified.
    backend : Backend
    multiclass : bool
        Softmax (True) or independent sigmoids (False).
    alpha : float
        L2 penalty on the coefficients of the standardised ``H`` (not on ``b``).
    max_iter : int
        Maximum number of L-BFGS iterations.
    tol : float
        Early stopping: an iteration improves when the held-out loss drops by
        more than ``tol``; without early stopping the optimiser stops when the
        largest gradient entry is below ``tol``.
    validation_fraction : float or None
        Fraction of rows held out for early stopping (drawn with ``rng``);
        ``None`` trains on all rows without early stopping.
    n_iter_no_change : int
        Stop after this many iterations without improvement of the held-out loss.
    rng : numpy Generator
        Draws the held-out rows.
    verbose : int
        Print the losses every iteration when positive.
    """
    xp = backend.xp
    n = int(H.shape[0])
    dtype = H.dtype
    mean = xp.mean(H, axis=0, dtype=xp.float64)
    scale = xp.std(H, axis=0, dtype=xp.float64)
    scale = xp.where(scale > 0, scale, 1.0)
    Hs = ((H - mean[None, :]) / scale[None, :]).astype(dtype)

    if validation_fraction is not None:
        order = rng.permutation(n)
        n_val = min(n - 1, max(1, int(round(validation_fraction * n))))
        val_idx = backend.asarray(np.sort(order[:n_val]))
        train_idx = backend.asarray(np.sort(order[n_val:]))
        train = _rows(Hs[train_idx], Y[train_idx], backend)
        held_out = _Objective(_rows(Hs[val_idx], Y[val_idx], backend), multiclass, alpha, xp)
    else:
        train = _rows(Hs, Y, backend)
        held_out = None
    objective = _Objective(train, multiclass, alpha, xp)

    C = int(train.HtY.shape[1])
    theta = xp.zeros((Hs.shape[1] + 1, C), dtype=dtype)
    theta[-1] = _initial_bias(train, multiclass, xp)
    loss, grad = objective(theta)
    best_theta, best_val, best_iteration, no_change = theta, math.inf, 0, 0
    history: list[float] = []
    if held_out is not None:
        best_val = held_out(theta, gradient=False, penalty=False)[0]
    pairs: list[tuple[Any, Any, float]] = []
    memory = int(min(_MEMORY, max(3, _MEMORY_BYTES // max(1, 2 * theta.nbytes))))
    iteration = 0
    while iteration < max_iter:
        if held_out is None and float(xp.max(xp.abs(grad))) <= tol:
            break
        direction = _two_loop(grad, pairs, xp)
        slope = float(xp.sum(direction * grad))
        if not slope < 0:
            pairs.clear()
            direction = -grad
            slope = float(xp.sum(direction * grad))
        step = 1.0 if pairs else min(1.0, 1.0 / max(float(xp.sqrt(-slope)), 1e-12))
        for _ in range(_MAX_HALVINGS):
            candidate = theta + step * direction
            new_loss, new_grad = objective(candidate)
            if new_loss <= loss + _ARMIJO * step * slope:
                break
            step *= 0.5
        else:
            break
        iteration += 1
        s, y = candidate - theta, new_grad - grad
        curvature = float(xp.sum(s * y))
        if curvature > 1e-10 * float(xp.sqrt(xp.sum(s * s) * xp.sum(y * y))):
            pairs.append((s, y, 1.0 / curvature))
            if len(pairs) > memory:
                pairs.pop(0)
        decrease = loss - new_loss
        theta, loss, grad = candidate, new_loss, new_grad
        if held_out is not None:
            val = held_out(theta, gradient=False, penalty=False)[0]
            history.append(val)
            if val < best_val - tol:
                best_theta, best_val, best_iteration, no_change = theta, val, iteration, 0
            else:
                no_change += 1
            if verbose:
                print(f"[decoder] iter {iteration:4d}  train loss {loss:.6f}  held-out loss {val:.6f}")
            if no_change >= n_iter_no_change:
                break
        else:
            best_theta, best_iteration = theta, iteration
            if verbose:
                print(f"[decoder] iter {iteration:4d}  train loss {loss:.6f}")
        if decrease <= 1e-12 * max(1.0, abs(loss)):
            break

    Q = best_theta[:-1].astype(xp.float64) / scale[:, None]
    b = best_theta[-1].astype(xp.float64) - mean @ Q
    return DecoderFit(Q.astype(dtype), b.astype(dtype), iteration, best_iteration, history)


def logistic_scores(H: Any, coef: Any, intercept: Any, multiclass: bool, xp: Any) -> tuple[Any, Any]:
    """Logits ``H coef + intercept`` and the softmax / sigmoid probabilities."""
    logits = H @ coef + intercept[None, :]
    if multiclass:
        top = xp.max(logits, axis=1, keepdims=True)
        e = xp.exp(logits - top)
        return logits, e / xp.sum(e, axis=1, keepdims=True)
    return logits, xp.exp(logits - xp.logaddexp(0.0, logits))
