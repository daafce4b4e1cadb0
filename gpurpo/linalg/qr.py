"""Thin QR factorisations of tall blocks, written once against ``xp``.

The randomized algorithms orthonormalise tall ``m x l`` blocks (``l`` a few
dozen, ``m`` up to millions) after every product. LAPACK's Householder QR
works column by column on such blocks; Cholesky QR does the same job with two
matrix products, which are much faster on CPUs and GPUs alike:

    G = Y^T Y = L L^T,   Q = Y L^{-T},   R = L^T.

One pass loses orthogonality like ``u cond(Y)^2`` (``u`` the unit roundoff);
a second pass on the result restores it to working precision whenever the
first pass produced a reasonably conditioned block ("CholeskyQR2",
Yamamoto, Nakatsukasa, Yanagisawa & Fukaya, ETNA 44, 2015). The second Gram
matrix ``Q_1^T Q_1`` certifies that: when it is close to the identity the
result is orthonormal, otherwise (and when the Cholesky factorisation breaks
down, e.g. for rank-deficient ``Y``) the block is factorised by Householder QR
(``xp.linalg.qr``), so the result is always an orthonormal basis.

Between power iterations only the span and the conditioning of the block
matter: :func:`normalize_block` accepts a single Cholesky QR pass when the
triangular factor shows ``cond(Y)`` small enough for that pass to be accurate
(orthogonality error about ``u cond(Y)^2 <= 1e-2``), which halves the cost of
each step; any invertible triangular ``R`` keeps ``span(Y R^{-1}) = span(Y)``.

These factorisations are the building block of every range finder: the
single-machine ones of :mod:`gpurpo.linalg` and the distributed ones of
:mod:`gpurpo.dask`, which normalise their small blocks with :func:`normalize_block`.
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["NORMALIZERS", "qr_factor", "orthonormalize", "normalize_block"]

NORMALIZERS = ("QR", "householder", "none", "auto")

#: ||Q_1^T Q_1 - I||_F below this certifies the second Cholesky QR pass.
_GRAM_TOL = 0.5

#: A single Cholesky QR pass is accepted when u * cond(R)^2 is below this.
_ONE_PASS_TOL = 1e-2


def _cholesky_pass(Y: Any, xp: Any) -> tuple[Any, Any, Any] | None:
    """One Cholesky QR pass, or None when the factorisation breaks down.

    Some backends (CuPy by default) return a partial factor instead of
    raising, so the factor is certified by its backward error
    ``||L L^T - G|| <= 64 l u ||G||`` (Cholesky is backward stable with an
    error of order ``l u ||G||``).
    """
    gram = Y.T @ Y
    try:
        lower = xp.linalg.cholesky(gram)
        inv_lower = xp.linalg.inv(lower)
    except np.linalg.LinAlgError:
        return None
    if not bool(xp.isfinite(inv_lower).all()):
        return None
    eps = float(np.finfo(np.dtype(Y.dtype)).eps)
    backward = xp.linalg.norm(lower @ lower.T - gram)
    if not bool(backward <= 64 * gram.shape[0] * eps * xp.linalg.norm(gram)):
        return None
    # (L^{-1} Y^T)^T = Y L^{-T}, laid out column-major: the next product with
    # a row-major matrix (A @ Q, A.T @ Q) runs slightly faster on such blocks
    return (inv_lower @ Y.T).T, lower.T, gram


def _cholesky_qr2(Y: Any, xp: Any) -> tuple[Any, Any] | None:
    first = _cholesky_pass(Y, xp)
    if first is None:
        return None
    Q1, R1, _ = first
    second = _cholesky_pass(Q1, xp)
    if second is None:
        return None
    Q2, R2, gram = second
    eye = xp.eye(gram.shape[0], dtype=gram.dtype)
    if not bool(xp.linalg.norm(gram - eye) < _GRAM_TOL):
        return None
    return Q2, R2 @ R1


def qr_factor(Y: Any, xp: Any) -> tuple[Any, Any]:
    """Thin QR factorisation ``Y = Q R`` of a tall block (``l <= m`` columns).

    Cholesky QR2 when it certifies itself, Householder QR otherwise (see the
    module docstring). ``Q`` has orthonormal columns to working precision.

    Parameters
    ----------
    Y : array, shape (m, l)
        Tall block, ``l <= m``, float32 or float64.
    xp : module
        NumPy or CuPy (the namespace of ``Y``).

    Returns
    -------
    Q : array, shape (m, l)
        Orthonormal columns spanning ``span(Y)`` (when ``Y`` has full rank).
    R : array, shape (l, l)
        Upper triangular, ``Y = Q R``; its diagonal is positive on the
        Cholesky QR2 path and may have either sign on the Householder path.
    """
    result = _cholesky_qr2(Y, xp)
    if result is None:
        result = xp.linalg.qr(Y)
    return result


def orthonormalize(Y: Any, xp: Any, method: str = "QR") -> Any:
    """An orthonormal basis of the columns of ``Y`` (a no-op for ``"none"``).

    Parameters
    ----------
    Y : array, shape (m, l)
        Tall block, ``l <= m``.
    xp : module
        NumPy or CuPy.
    method : {"QR", "auto", "householder", "none"}
        ``"QR"``/``"auto"``: :func:`qr_factor`; ``"householder"``: LAPACK
        Householder QR only; ``"none"``: return ``Y`` unchanged.

    Returns
    -------
    array, shape (m, l)
        ``Q`` of the thin QR factorisation of ``Y`` (``Y`` itself for
        ``"none"``), on ``xp``.
    """
    if method == "none":
        return Y
    if method == "householder":
        return xp.linalg.qr(Y)[0]
    return qr_factor(Y, xp)[0]


def normalize_block(Y: Any, xp: Any, method: str = "QR") -> Any:
    """A well-conditioned basis of ``span(Y)`` for the next power iteration.

    ``"QR"``/``"auto"``: one Cholesky QR pass when ``u cond(R)^2 <= 1e-2``
    (``cond(R)`` from the singular values of the small ``l x l`` factor),
    which makes the columns orthonormal to about ``1e-2`` at most and usually
    to far better; otherwise :func:`qr_factor`. Other methods as in
    :func:`orthonormalize`.
    """
    if method not in ("QR", "auto"):
        return orthonormalize(Y, xp, method)
    first = _cholesky_pass(Y, xp)
    if first is not None:
        Q1, R1, _ = first
        singular = xp.linalg.svd(R1, compute_uv=False)
        eps = float(np.finfo(np.dtype(Y.dtype)).eps)
        if bool(singular[-1] > 0) and bool(
            eps * (singular[0] / singular[-1]) ** 2 <= _ONE_PASS_TOL
        ):
            return Q1
    return qr_factor(Y, xp)[0]
