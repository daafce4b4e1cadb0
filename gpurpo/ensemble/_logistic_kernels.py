"""Fused elementwise kernels of the multi-label logistic loss.

With ``d`` labels every boosting iteration evaluates the logistic function on
the whole (n, d) score matrix several times: once for the gradient, once for
the training loss and two or three times per Newton iteration of the step
search (:func:`gpurpo.ensemble._steps.logistic_step`). Written as array
expressions each evaluation makes about ten passes over (n, d) temporaries;
these kernels make one pass and allocate nothing of that size.

Kernel contracts (registered with :func:`gpurpo.backend.register_kernel`)
--------------------------------------------------------------------------
``boost_logistic_gradient(Y, F, out)``
    Y float64 (n, d) labels in {-1, 1}; F float64 (n, d) scores;
    out float32 (n, d): ``out = [y > 0] - sigmoid(F)``.
``boost_logistic_row_loss(Y, F, out)``
    out float64 (n,): ``out[i] = mean_j log(1 + exp(-y_ij F_ij))``.
``boost_logistic_derivatives(Y, F, H, w, rho, columns, first, second)``
    H float64 (n, k) with k = d or k = 1 (one column for every output);
    w float64 (n,); rho float64 (d,); columns uint8 (d,): outputs with 0 are
    skipped (their sums stay 0); first, second float64 (d,) ZEROED by the
    caller. With ``s = F_ij + rho_j h_ij`` and ``p = sigmoid(s)``:
    ``first_j += sum_i w_i h_ij (p - [y_ij > 0])`` and
    ``second_j += sum_i w_i h_ij^2 p (1 - p)``: the first and second
    derivatives in ``rho_j`` of ``sum_i w_i log(1 + exp(-y_ij s))``.

The CPU versions are numba loops (rows dealt to threads, per-thread partial
sums merged at the end). The CUDA-side versions are the same formulas as
``xp`` array expressions, used on CuPy (where each pass runs at memory
bandwidth) and by the emulated backend; tests hold the two against each
other and against plain NumPy references.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from numba import njit, prange

from gpurpo.backend import Backend, register_kernel

__all__ = ["logistic_gradient", "logistic_row_loss", "logistic_derivatives", "sigmoid"]

# Rows per block of the derivative kernel (one partial-sum row per block).
_ROW_BLOCK = 512


def sigmoid(xp: Any, S: Any) -> Any:
    """Logistic function ``1 / (1 + exp(-S))``, without overflow and accurate in both tails."""
    e = xp.exp(-xp.abs(S))
    r = 1.0 / (1.0 + e)
    return xp.where(S >= 0, r, e * r)


# --------------------------------------------------------------------------
# numba (CPU)
# --------------------------------------------------------------------------


@njit(inline="always", cache=True)
def _sigmoid_nb(s: float) -> float:
    # exp(700) is finite: the clamp only removes overflow, not accuracy
    return 1.0 / (1.0 + math.exp(-min(max(s, -700.0), 700.0)))


@njit(inline="always", cache=True)
def _log1pexp_neg_nb(m: float) -> float:
    """``log(1 + exp(-m))`` for any real ``m``."""
    if m >= 0.0:
        return math.log1p(math.exp(-m))
    return -m + math.log1p(math.exp(m))


@njit(parallel=True, cache=True)
def _gradient_cpu(Y, F, out):
    n, d = F.shape
    for i in prange(n):
        for j in range(d):
            t = 1.0 if Y[i, j] > 0 else 0.0
            out[i, j] = np.float32(t - _sigmoid_nb(F[i, j]))


@njit(parallel=True, cache=True)
def _row_loss_cpu(Y, F, out):
    n, d = F.shape
    for i in prange(n):
        acc = 0.0
        for j in range(d):
            acc += _log1pexp_neg_nb(Y[i, j] * F[i, j])
        out[i] = acc / d


@njit(parallel=True, cache=True)
def _derivatives_cpu(Y, F, H, w, rho, columns, first, second):
    n, d = F.shape
    narrow = H.shape[1] == 1
    cols = np.nonzero(columns)[0]
    n_cols = cols.shape[0]
    n_blocks = (n + _ROW_BLOCK - 1) // _ROW_BLOCK
    part1 = np.zeros((n_blocks, n_cols))
    part2 = np.zeros((n_blocks, n_cols))
    for b in prange(n_blocks):
        for i in range(b * _ROW_BLOCK, min(n, (b + 1) * _ROW_BLOCK)):
            wi = w[i]
            if wi == 0.0:
                continue
            if narrow:
                h = H[i, 0]
                wh = wi * h
                whh = wh * h
                for c in range(n_cols):
                    j = cols[c]
                    p = _sigmoid_nb(F[i, j] + rho[j] * h)
                    t = 1.0 if Y[i, j] > 0 else 0.0
                    part1[b, c] += wh * (p - t)
                    part2[b, c] += whh * (p * (1.0 - p))
            else:
                for c in range(n_cols):
                    j = cols[c]
                    h = H[i, j]
                    p = _sigmoid_nb(F[i, j] + rho[j] * h)
                    t = 1.0 if Y[i, j] > 0 else 0.0
                    wh = wi * h
                    part1[b, c] += wh * (p - t)
                    part2[b, c] += wh * h * (p * (1.0 - p))
    for b in range(n_blocks):
        for c in range(n_cols):
            first[cols[c]] += part1[b, c]
            second[cols[c]] += part2[b, c]


# --------------------------------------------------------------------------
# array expressions (CuPy and the emulated backend)
# --------------------------------------------------------------------------


def _gradient_xp(backend: Backend, Y, F, out):
    xp = backend.xp
    out[...] = ((Y > 0).astype(xp.float64) - sigmoid(xp, F)).astype(xp.float32)


def _row_loss_xp(backend: Backend, Y, F, out):
    xp = backend.xp
    out[...] = xp.mean(xp.logaddexp(0.0, -Y * F), axis=1)


def _derivatives_xp(backend: Backend, Y, F, H, w, rho, columns, first, second):
    xp = backend.xp
    P = sigmoid(xp, F + rho[None, :] * H)
    WH = w[:, None] * H
    keep = columns != 0
    first += xp.where(keep, xp.sum(WH * (P - (Y > 0)), axis=0), 0.0)
    second += xp.where(keep, xp.sum(WH * H * (P * (1.0 - P)), axis=0), 0.0)


register_kernel("boost_logistic_gradient", cpu=_gradient_cpu, cuda=_gradient_xp)
register_kernel("boost_logistic_row_loss", cpu=_row_loss_cpu, cuda=_row_loss_xp)
register_kernel("boost_logistic_derivatives", cpu=_derivatives_cpu, cuda=_derivatives_xp)


# --------------------------------------------------------------------------
# allocating wrappers
# --------------------------------------------------------------------------


def _f64(xp: Any, a: Any) -> Any:
    return xp.ascontiguousarray(a, dtype=xp.float64)


def logistic_gradient(backend: Backend, Y: Any, F: Any) -> Any:
    """``[y > 0] - sigmoid(F)``: float32 (n, d)."""
    xp = backend.xp
    out = xp.empty(F.shape, dtype=xp.float32)
    backend.kernel("boost_logistic_gradient")(_f64(xp, Y), _f64(xp, F), out)
    return out


def logistic_row_loss(backend: Backend, Y: Any, F: Any) -> Any:
    """Mean logistic loss of every row: float64 (n,)."""
    xp = backend.xp
    out = xp.empty(F.shape[0], dtype=xp.float64)
    backend.kernel("boost_logistic_row_loss")(_f64(xp, Y), _f64(xp, F), out)
    return out


def logistic_derivatives(
    backend: Backend, Y: Any, F: Any, H: Any, w: Any, rho: Any, columns: Any = None
) -> tuple[Any, Any]:
    """First and second derivatives in ``rho`` of the per-output logistic objective.

    ``columns`` (bool (d,), default all): outputs to compute, the others get 0.
    """
    xp = backend.xp
    d = F.shape[1]
    first = xp.zeros(d, dtype=xp.float64)
    second = xp.zeros(d, dtype=xp.float64)
    mask = xp.ones(d, dtype=xp.uint8) if columns is None else xp.asarray(columns, dtype=xp.uint8)
    backend.kernel("boost_logistic_derivatives")(
        _f64(xp, Y), _f64(xp, F), _f64(xp, H), _f64(xp, w), _f64(xp, rho),
        xp.ascontiguousarray(mask), first, second,
    )
    return first, second
