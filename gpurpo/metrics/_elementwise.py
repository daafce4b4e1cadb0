"""Element-wise metrics: macro R^2, RMSE and the Hamming loss."""

from __future__ import annotations

import math
from typing import Any

from gpurpo.metrics._blocks import (
    _CELL_BYTES_ELEMENTWISE,
    _block,
    _chunks,
    _validate,
)


def macro_r2(y_true: Any, y_pred: Any, *, chunk_size: int | None = None) -> float:
    """Macro-averaged coefficient of determination, Joly et al. eq. 26.

    ``macro-R2 = 1/d sum_j (1 - sum_i (y_ij - yhat_ij)^2 / sum_i (y_ij - ybar_j)^2)``.
    An output with constant ``y_true`` scores 1 when predicted exactly and 0
    otherwise, as in scikit-learn's ``r2_score(multioutput="uniform_average")``
    (which this equals). Needs at least two samples.

    Parameters
    ----------
    y_true : array or sparse matrix of shape (n_samples, n_outputs)
        True values, ``n_samples >= 2``.
    y_pred : array or sparse matrix of shape (n_samples, n_outputs)
        Predicted values.
    chunk_size : int, optional
        Rows per block (default: from a ~128 MiB memory budget).

    Returns
    -------
    float
        Macro R^2 of eq. 26, at most 1 (unbounded below).

    Raises
    ------
    ValueError
        If ``y_true`` has fewer than two rows.
    """
    backend, yt, yp = _validate(y_true, y_pred, "y_pred", binary_true=False)
    xp = backend.xp
    n, d = yt.shape
    if n < 2:
        raise ValueError(f"macro_r2 needs at least 2 samples, got y_true of shape {(n, d)}")
    blocks = _chunks(n, d, chunk_size, _CELL_BYTES_ELEMENTWISE)
    col_sum = xp.zeros(d)
    ss_res = xp.zeros(d)
    for start, stop in blocks:
        T = _block(yt, start, stop, backend)
        col_sum += T.sum(axis=0)
        ss_res += ((T - _block(yp, start, stop, backend)) ** 2).sum(axis=0)
    mean = col_sum / n
    ss_tot = xp.zeros(d)
    for start, stop in blocks:
        ss_tot += ((_block(yt, start, stop, backend) - mean) ** 2).sum(axis=0)
    ok = ss_tot != 0
    safe = xp.where(ok, ss_tot, 1.0)
    score = xp.where(ok, 1.0 - ss_res / safe, xp.where(ss_res == 0, 1.0, 0.0))
    return float(xp.mean(score))


def rmse(
    y_true: Any, y_pred: Any, *, normalize: bool = True, chunk_size: int | None = None
) -> float:
    """Root mean squared error of label vectors, Bi & Kwok (2013) eq. 6.

    ``RMSE = sqrt( 1/n sum_i 1/d ||y_i - yhat_i||_2^2 )`` with the
    real-valued predictions ``yhat`` (before any thresholding): the root of
    the squared error averaged over labels and samples. With
    ``normalize=False`` the per-sample squared norm is not divided by d,
    ``sqrt(1/n sum_i ||y_i - yhat_i||^2)``.

    Parameters
    ----------
    y_true : array or sparse matrix of shape (n_samples, n_labels)
        True label vectors (any real values).
    y_pred : array or sparse matrix of shape (n_samples, n_labels)
        Real-valued predictions.
    normalize : bool, default=True
        Divide the squared norms by d, as in eq. 6.
    chunk_size : int, optional
        Rows per block (default: from a ~128 MiB memory budget).

    Returns
    -------
    float
        RMSE of eq. 6 (or its unnormalized form), ``>= 0``.

    Raises
    ------
    TypeError
        If ``normalize`` is not a bool.
    """
    if not isinstance(normalize, bool):
        raise TypeError(f"normalize must be a bool, got {type(normalize).__name__}")
    backend, yt, yp = _validate(y_true, y_pred, "y_pred", binary_true=False)
    xp = backend.xp
    n, d = yt.shape
    total = 0.0
    for start, stop in _chunks(n, d, chunk_size, _CELL_BYTES_ELEMENTWISE):
        diff = _block(yt, start, stop, backend) - _block(yp, start, stop, backend)
        total += float(xp.sum(diff * diff))
    return math.sqrt(total / (n * d if normalize else n))


def hamming_loss(y_true: Any, y_pred: Any, *, chunk_size: int | None = None) -> float:
    """Fraction of (sample, label) entries where the 0/1 prediction is wrong.

    ``1/(n d) sum_ij [y_ij != yhat_ij]``, equal to scikit-learn's
    ``hamming_loss`` on label indicator matrices. When both arguments are
    sparse the count works on the sparse difference (memory O(nnz)), never
    densifying.

    Parameters
    ----------
    y_true : array or sparse matrix of shape (n_samples, n_labels)
        0/1 true labels.
    y_pred : array or sparse matrix of shape (n_samples, n_labels)
        0/1 predicted labels (thresholded; other values raise ValueError).
    chunk_size : int, optional
        Rows per block (default: from a ~128 MiB memory budget); not used
        when both arguments are sparse.

    Returns
    -------
    float
        Hamming loss in [0, 1].
    """
    backend, yt, yp = _validate(y_true, y_pred, "y_pred", binary_true=True, binary_other=True)
    xp = backend.xp
    n, d = yt.shape
    blocks = _chunks(n, d, chunk_size, _CELL_BYTES_ELEMENTWISE)
    if backend.issparse(yt) and backend.issparse(yp):
        return int(xp.count_nonzero((yt - yp).data)) / (n * d)
    wrong = 0
    for start, stop in blocks:
        T = _block(yt, start, stop, backend)
        wrong += int(xp.count_nonzero(T != _block(yp, start, stop, backend)))
    return wrong / (n * d)
