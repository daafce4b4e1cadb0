"""Randomized PCA with implicit centring, and PLST (PCA of the label matrix)."""

from __future__ import annotations

from typing import Any, NamedTuple

from gpurpo._validation import check_choice, check_int
from gpurpo.backend import check_random_state
from gpurpo.linalg.operators import as_operator, centered, check_n_components, check_n_iter
from gpurpo.linalg.qr import NORMALIZERS
from gpurpo.linalg.randomized import _randomized_svd

__all__ = ["PCAResult", "randomized_pca", "plst"]


class PCAResult(NamedTuple):
    """Result of :func:`randomized_pca` (a named tuple, unpacks as three values).

    Attributes
    ----------
    components : array, shape (k, n)
        Principal axes (orthonormal rows), by decreasing variance.
    explained_variance : array, shape (k,)
        Variance along each axis, ``s_i^2 / (m - 1)``.
    mean : array, shape (n,)
        Column means that were subtracted.
    """

    components: Any
    explained_variance: Any
    mean: Any


def _pca(
    A: Any,
    name: str,
    n_components: int,
    n_oversamples: int,
    n_iter: int | str,
    random_state: Any,
    power_iteration_normalizer: str,
) -> PCAResult:
    op = as_operator(A, name)
    if op.shape[0] < 2:
        raise ValueError(f"{name} must have at least 2 rows for PCA, got shape {op.shape}")
    k = check_n_components(n_components, op.shape, name)
    p = check_int(n_oversamples, "n_oversamples", low=0)
    q = check_n_iter(n_iter, k, op.shape)
    normalizer = check_choice(power_iteration_normalizer, "power_iteration_normalizer", NORMALIZERS)
    rng = check_random_state(random_state)
    mean = op.column_means()
    _, s, Vt = _randomized_svd(centered(op, mean), k, p, q, rng, normalizer)
    variance = s * s / (op.shape[0] - 1)
    return PCAResult(*op.output(Vt, variance, mean))


def randomized_pca(
    A: Any,
    n_components: int,
    n_oversamples: int = 10,
    n_iter: int | str = "auto",
    random_state: Any = None,
    power_iteration_normalizer: str = "QR",
) -> PCAResult:
    """Principal component analysis by randomized SVD of the centred matrix.

    The centred matrix ``C = A - 1 mu^T`` (``mu`` the column means) is never
    formed: it is the operator with ``C B = A B - 1 (mu^T B)`` and
    ``C^T B = A^T B - mu (1^T B)``, so sparse ``A`` stays sparse and costs
    ``O(nnz(A) l + (m + n) l)`` per product. Its rank-``k`` SVD
    ``C ~ U S V^T`` comes from :func:`gpurpo.linalg.randomized_svd` (Halko,
    Martinsson & Tropp 2011, Algorithms 4.4 and 5.1); the principal axes are
    the rows of ``V^T`` and the variances ``S^2 / (m - 1)``.

    Parameters
    ----------
    A : array, sparse matrix or operator, shape (m, n)
        Samples in rows, ``m >= 2``.
    n_components : int
        Number of components ``k``, ``1 <= k <= min(m, n)``.
    n_oversamples, n_iter, random_state, power_iteration_normalizer
        As in :func:`gpurpo.linalg.randomized_svd`.

    Returns
    -------
    PCAResult
        Named tuple ``(components, explained_variance, mean)`` with shapes
        ``(k, n)``, ``(k,)`` and ``(n,)``, in the input's namespace.
    """
    return _pca(A, "A", n_components, n_oversamples, n_iter, random_state, power_iteration_normalizer)


def plst(
    Y: Any,
    n_components: int,
    n_oversamples: int = 10,
    n_iter: int | str = "auto",
    random_state: Any = None,
    power_iteration_normalizer: str = "QR",
) -> tuple[Any, Any]:
    """Principal label space transformation (Tai & Lin, Neural Computation 24(9), 2012).

    PLST encodes a label matrix ``Y`` (``n x d``) by ``Z = (Y - 1 mu^T) V_k``
    with ``V_k`` the top-``k`` principal directions of ``Y`` (Tai & Lin,
    Algorithm 1: shift by the mean label vector, then project onto the top
    right singular vectors) and decodes ``Y ~ Z V_k^T + 1 mu^T``. The
    directions come from :func:`randomized_pca`; sparse ``Y`` is never
    densified.

    Parameters
    ----------
    Y : array, sparse matrix or operator, shape (n, d)
        Label matrix (0/1 or real).
    n_components : int
        Code length ``k``, ``1 <= k <= min(n, d)``.
    n_oversamples, n_iter, random_state, power_iteration_normalizer
        As in :func:`gpurpo.linalg.randomized_svd`.

    Returns
    -------
    components : array, shape (k, d)
        ``V_k^T``, orthonormal rows.
    mean : array, shape (d,)
        The mean label vector ``mu``.
    """
    result = _pca(Y, "Y", n_components, n_oversamples, n_iter, random_state, power_iteration_normalizer)
    return result.components, result.mean
