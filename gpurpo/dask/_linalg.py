"""Randomized label-space linear algebra on tall Dask arrays.

The algorithms of :mod:`gpurpo.linalg` (Halko, Martinsson & Tropp 2011,
Algorithms 4.4 and 5.1; Bi & Kwok 2013 for the column selection) with the
tall ``m x n`` matrix ``A`` split by rows over the workers:

* ``A Omega`` and ``A Z`` are products of each row block with a small
  ``n x l`` matrix, done where the block lives;
* ``A^T Q`` is a sum over the row blocks of ``A_i^T Q_i``: each worker sends an
  ``n x l`` matrix;
* the tall ``Q`` of each step is orthonormalised by TSQR (Benson, Gleich &
  Demmel 2013; ``dask.array.linalg.tsqr``), and the factorisations and the
  SVD of the small ``l x n`` matrices run on the client.

The Gaussian test matrix is drawn on the client from ``random_state`` exactly
as :mod:`gpurpo.linalg` draws it, so a seed gives the single-machine result
up to rounding, and :func:`cssp_select` then draws the same columns.
"""

from __future__ import annotations

from typing import Any

import dask
import dask.array as da
import numpy as np

from gpurpo._validation import check_choice, check_int, check_numeric_dtype
from gpurpo.backend import check_random_state
from gpurpo.linalg.cssp import METHODS, default_max_trials, select_columns
from gpurpo.linalg.operators import check_n_components, check_n_iter
from gpurpo.linalg.pca import PCAResult
from gpurpo.linalg.qr import NORMALIZERS, normalize_block
from gpurpo.linalg.randomized import flip_signs

__all__ = [
    "column_means",
    "cssp_select",
    "leverage_scores",
    "plst",
    "randomized_pca",
    "randomized_range_finder",
    "randomized_svd",
]


def _check_tall(A: Any, name: str) -> da.Array:
    """A 2-D real Dask array with at least as many rows as columns, one block of columns.

    Everything is checked on the metadata (shape, dtype, chunks), before any
    task runs; several blocks of columns are joined into one (each row block
    must hold whole rows for the products with small matrices).
    """
    if not isinstance(A, da.Array):
        raise TypeError(
            f"{name} must be a dask.array.Array, got {type(A).__name__}; use gpurpo.linalg for "
            "in-memory arrays"
        )
    if A.ndim != 2:
        raise ValueError(f"{name} must be a 2-D dask array, got shape {A.shape}")
    if any(np.isnan(s) for s in A.shape):
        raise ValueError(
            f"{name} has unknown chunk sizes (shape {A.shape}); call {name}.compute_chunk_sizes() "
            "first"
        )
    check_numeric_dtype(A.dtype, name)
    m, n = (int(s) for s in A.shape)
    if m < 1 or n < 1:
        raise ValueError(f"{name} must have at least 1 row and 1 column, got shape {(m, n)}")
    if m < n:
        raise ValueError(
            f"{name} must be tall (rows >= columns) to be split by rows, got shape {(m, n)}; "
            f"pass {name}.T and swap the roles of U and Vt"
        )
    if A.dtype.kind != "f" or A.dtype.itemsize < 4:
        A = A.astype(np.float64)
    if len(A.chunks[1]) > 1:
        A = A.rechunk({1: -1})
    return A


def _times(A: da.Array, M: np.ndarray, mean: np.ndarray | None = None) -> da.Array:
    """``C M`` for the row-split ``C = A - 1 mean^T`` and a small ``n x l`` ``M``.

    One product per row block; ``C`` is never formed (``C M = A M - 1 (mean^T M)``,
    as :func:`gpurpo.linalg.centered`). Works for NumPy and SciPy-sparse blocks
    alike (a sparse block times a dense matrix is dense).
    """
    dtype = np.result_type(A.dtype, M.dtype)
    shift = None if mean is None else np.asarray(mean @ M, dtype=dtype)[None, :]

    def block_times(block: Any) -> np.ndarray:
        out = np.asarray(block @ M, dtype=dtype)
        return out if shift is None else out - shift

    return A.map_blocks(
        block_times, chunks=(A.chunks[0], (M.shape[1],)), dtype=dtype,
        meta=np.empty((0, 0), dtype=dtype),
    )


def _t_times(A: da.Array, Q: da.Array, mean: np.ndarray | None = None) -> np.ndarray:
    """``C^T Q`` (n x l) on the client for ``C = A - 1 mean^T``.

    The sum over row blocks of ``A_i^T Q_i``, less ``mean (1^T Q)`` when centred.
    """
    Q = Q.rechunk((A.chunks[0], -1))
    terms = [
        dask.delayed(lambda block, q: (np.asarray(block.T @ q), q.sum(axis=0)))(block, q)
        for block, q in zip(A.to_delayed().ravel(), Q.to_delayed().ravel())
    ]
    products, column_sums = zip(*dask.compute(*terms))
    out = np.asarray(sum(products))
    if mean is not None:
        out = out - np.outer(mean, sum(column_sums)).astype(out.dtype)
    return out


def column_means(A: da.Array) -> np.ndarray:
    """Mean of each column of the row-split ``A`` (n,), in ``A``'s dtype, on the client.

    Partial sums per row block in float64 (sparse blocks without densifying).
    """
    terms = [
        dask.delayed(lambda block: np.asarray(block.sum(axis=0), dtype=np.float64).ravel())(block)
        for block in A.to_delayed().ravel()
    ]
    return (sum(dask.compute(*terms)) / int(A.shape[0])).astype(A.dtype)


def _orthonormal_rows_basis(Y: da.Array) -> da.Array:
    """The orthonormal ``Q`` of the tall ``Y`` by TSQR (one row block of columns)."""
    if len(Y.chunks[1]) > 1:
        Y = Y.rechunk({1: -1})
    return da.linalg.tsqr(Y)[0]


def _range_finder(A: da.Array, size: int, n_iter: int, rng: np.random.Generator, normalizer: str,
                  mean: np.ndarray | None = None) -> da.Array:
    """HMT Algorithm 4.4 on the row-split ``A`` (centred by ``mean`` if given): ``Q`` (m, size).

    The factorisations inside the loop only need a well-conditioned basis of
    the same span: the tall ones by TSQR, the ``n x size`` ones on the client
    (:func:`gpurpo.linalg.qr.normalize_block`).
    """
    omega = rng.standard_normal((int(A.shape[1]), size), dtype=A.dtype)
    Y = _times(A, omega, mean)
    for _ in range(n_iter):
        Q = Y if normalizer == "none" else _orthonormal_rows_basis(Y)
        Z = normalize_block(_t_times(A, Q, mean), np, normalizer)
        Y = _times(A, Z, mean)
    return _orthonormal_rows_basis(Y)


def _randomized_svd(
    A: da.Array, k: int, n_oversamples: int, n_iter: int, rng: np.random.Generator, normalizer: str,
    mean: np.ndarray | None = None,
) -> tuple[da.Array, np.ndarray, np.ndarray]:
    """Stage A (:func:`_range_finder`) and HMT Algorithm 5.1 with ``l = min(k + p, n)``.

    ``B^T = C^T Q`` (n x l, ``C = A - 1 mean^T`` or ``A``) comes to the client,
    ``B^T = W R``, ``R = U_r S V_r^T`` and ``U = Q V_r``, ``Vt = (W U_r)^T``;
    signs as :func:`gpurpo.linalg.randomized_svd` (the largest-magnitude entry
    of each row of ``Vt`` positive).
    """
    size = min(k + n_oversamples, int(A.shape[1]))
    Q = _range_finder(A, size, n_iter, rng, normalizer, mean)
    BT = _t_times(A, Q, mean)
    W, R = np.linalg.qr(BT)
    Ur, s, Vrt = np.linalg.svd(R)
    U, Vt = flip_signs(_times(Q, Vrt[:k].T), (W @ Ur[:, :k]).T, np)
    return U, s[:k], np.ascontiguousarray(Vt)


def _common(A: Any, name: str, k: Any, k_name: str, n_oversamples: Any, n_iter: Any,
            normalizer: Any) -> tuple[da.Array, int, int, int, str]:
    A = _check_tall(A, name)
    shape = (int(A.shape[0]), int(A.shape[1]))
    k = check_n_components(k, shape, name, name=k_name)
    p = check_int(n_oversamples, "n_oversamples", low=0)
    q = check_n_iter(n_iter, k, shape)
    normalizer = check_choice(normalizer, "power_iteration_normalizer", NORMALIZERS)
    return A, k, p, q, normalizer


def randomized_range_finder(
    A: Any,
    size: int,
    n_iter: int,
    random_state: Any = None,
    power_iteration_normalizer: str = "QR",
) -> da.Array:
    """Orthonormal basis ``Q`` (m, size) of the range of the tall Dask array ``A``.

    :func:`gpurpo.linalg.randomized_range_finder` (HMT Algorithm 4.4) with
    ``A`` split by rows; see the module docstring for what each worker does.

    Parameters
    ----------
    A : dask.array.Array, shape (m, n), m >= n
        Row-chunked (a block of columns is joined); real numbers.
    size : int
        Columns of ``Q``, ``1 <= size <= m``.
    n_iter : int
        Power iterations.
    random_state : None, int, numpy Generator or RandomState
        Seed of the Gaussian test matrix (drawn on the client).
    power_iteration_normalizer : {"QR", "auto", "householder", "none"}

    Returns
    -------
    Q : dask.array.Array, shape (m, size)
        Lazy; chunked by rows like ``A``.
    """
    A = _check_tall(A, "A")
    size = check_int(size, "size")
    if not 1 <= size <= int(A.shape[0]):
        raise ValueError(f"size must be between 1 and the number of rows of A ({A.shape[0]}), got {size}")
    n_iter = check_int(n_iter, "n_iter", low=0)
    normalizer = check_choice(power_iteration_normalizer, "power_iteration_normalizer", NORMALIZERS)
    return _range_finder(A, size, n_iter, check_random_state(random_state), normalizer)


def randomized_svd(
    A: Any,
    n_components: int,
    n_oversamples: int = 10,
    n_iter: int | str = "auto",
    random_state: Any = None,
    power_iteration_normalizer: str = "QR",
) -> tuple[da.Array, np.ndarray, np.ndarray]:
    """Truncated SVD ``A ~ U diag(s) Vt`` of the tall Dask array ``A``.

    :func:`gpurpo.linalg.randomized_svd` with ``A`` split by rows: the same
    parameters and, for the same ``random_state``, the same result up to
    rounding.

    Returns
    -------
    U : dask.array.Array, shape (m, k)
        Lazy, chunked by rows like ``A``.
    s : ndarray, shape (k,)
    Vt : ndarray, shape (k, n)
        The largest-magnitude entry of each row is positive.
    """
    A, k, p, q, normalizer = _common(A, "A", n_components, "n_components", n_oversamples, n_iter,
                                     power_iteration_normalizer)
    return _randomized_svd(A, k, p, q, check_random_state(random_state), normalizer)


def leverage_scores(
    A: Any,
    k: int,
    n_oversamples: int = 10,
    n_iter: int | str = "auto",
    random_state: Any = None,
    power_iteration_normalizer: str = "QR",
) -> np.ndarray:
    """Rank-``k`` column leverage scores ``||(V_k^T)_{:, j}||^2`` of the tall Dask array ``A``.

    :func:`gpurpo.linalg.leverage_scores` with ``A`` split by rows; one score
    per column, on the client.
    """
    A, k, p, q, normalizer = _common(A, "A", k, "k", n_oversamples, n_iter, power_iteration_normalizer)
    Vt = _randomized_svd(A, k, p, q, check_random_state(random_state), normalizer)[2]
    return np.sum(Vt * Vt, axis=0)


def cssp_select(
    Y: Any,
    k: int,
    random_state: Any = None,
    method: str = "sample",
    n_oversamples: int = 10,
    n_iter: int | str = "auto",
    max_trials: int | None = None,
    power_iteration_normalizer: str = "QR",
) -> tuple[np.ndarray, int]:
    """ML-CSSP column selection (Bi & Kwok 2013) of the tall Dask label matrix ``Y``.

    :func:`gpurpo.linalg.cssp_select` with ``Y`` split by rows: the leverage
    scores come from the distributed SVD, the draws are made on the client
    with the same generator, so a seed selects the same columns.

    Returns
    -------
    indices : ndarray of int64, shape (k,)
    n_trials : int
    """
    Y, k, p, q, normalizer = _common(Y, "Y", k, "k", n_oversamples, n_iter, power_iteration_normalizer)
    method = check_choice(method, "method", METHODS)
    max_trials = check_int(default_max_trials(k) if max_trials is None else max_trials, "max_trials", low=k)
    rng = check_random_state(random_state)
    Vt = _randomized_svd(Y, k, p, q, rng, normalizer)[2]
    return select_columns(Vt, k, method, rng, max_trials)


def _pca(A: Any, name: str, n_components: Any, n_oversamples: Any, n_iter: Any, random_state: Any,
         normalizer: Any) -> PCAResult:
    A, k, p, q, normalizer = _common(A, name, n_components, "n_components", n_oversamples, n_iter,
                                     normalizer)
    if int(A.shape[0]) < 2:
        raise ValueError(f"{name} must have at least 2 rows for PCA, got shape {A.shape}")
    mean = column_means(A)
    _, s, Vt = _randomized_svd(A, k, p, q, check_random_state(random_state), normalizer, mean)
    return PCAResult(Vt, s * s / (int(A.shape[0]) - 1), mean)


def randomized_pca(
    A: Any,
    n_components: int,
    n_oversamples: int = 10,
    n_iter: int | str = "auto",
    random_state: Any = None,
    power_iteration_normalizer: str = "QR",
) -> PCAResult:
    """PCA of the tall Dask array ``A`` by randomized SVD of the implicitly centred matrix.

    :func:`gpurpo.linalg.randomized_pca` with ``A`` split by rows: the column
    means are summed over the row blocks, and ``C = A - 1 mu^T`` is never formed
    (each block product is shifted by ``mu^T M`` and each ``C^T Q`` by
    ``mu (1^T Q)``), so sparse blocks stay sparse.

    Returns
    -------
    PCAResult
        ``(components, explained_variance, mean)``, NumPy arrays of shapes
        ``(k, n)``, ``(k,)`` and ``(n,)``.
    """
    return _pca(A, "A", n_components, n_oversamples, n_iter, random_state, power_iteration_normalizer)


def plst(
    Y: Any,
    n_components: int,
    n_oversamples: int = 10,
    n_iter: int | str = "auto",
    random_state: Any = None,
    power_iteration_normalizer: str = "QR",
) -> tuple[np.ndarray, np.ndarray]:
    """Principal label space transformation (Tai & Lin 2012) of the tall Dask label matrix ``Y``.

    :func:`gpurpo.linalg.plst` with ``Y`` split by rows (:func:`randomized_pca`).

    Returns
    -------
    components : ndarray, shape (k, d)
        ``V_k^T``, orthonormal rows.
    mean : ndarray, shape (d,)
        The mean label vector.
    """
    result = _pca(Y, "Y", n_components, n_oversamples, n_iter, random_state,
                  power_iteration_normalizer)
    return result.components, result.mean
