"""Metrics for multi-label classification and multi-output regression.

Every metric accepts dense arrays or sparse (CSR) matrices for both
arguments, on NumPy/SciPy or CuPy/cupyx (computed where the data lives, with
the array module of :func:`gpurpo.backend.resolve_backend`), and works over
blocks of rows so that the temporaries stay within a memory budget whatever
the number of labels d: ``chunk_size`` rows at a time, by default as many
rows as fit in about 128 MiB of temporaries. Results are Python floats.

========================================  =====================================
:func:`label_ranking_average_precision`   Joly et al. (2014) eq. 6 (LRAP)
:func:`macro_r2`                          Joly et al. eq. 26 (mean R^2 over outputs)
:func:`micro_auprc`                       area under the micro-averaged
                                          precision-recall curve
:func:`precision_at_k`                    mean precision of the top k labels
:func:`rmse`                              Bi & Kwok (2013) eq. 6
:func:`hamming_loss`                      fraction of wrong label entries
========================================  =====================================

References
----------
A. Joly, P. Geurts, L. Wehenkel. Random forests with random projections of
the output space for high dimensional multi-label classification. ECML PKDD
2014.

W. Bi, J. T. Kwok. Efficient multi-label classification with many labels.
ICML 2013.
"""

from __future__ import annotations

import math
import warnings
from typing import Any

from gpurpo import _ranking_kernels  # noqa: F401  (registers the ranking kernels)
from gpurpo._validation import check_array, check_choice, check_int
from gpurpo.backend import Backend, resolve_backend

__all__ = [
    "label_ranking_average_precision",
    "macro_r2",
    "micro_auprc",
    "precision_at_k",
    "rmse",
    "hamming_loss",
]

_MEMORY_BUDGET = 128 * 2**20
# Bytes of temporaries per (row, label) cell, per metric (see each kernel).
_CELL_BYTES_RANKING = 120
_CELL_BYTES_ELEMENTWISE = 64
# LRAP counts ranks directly (O(nnz d), one boolean per (row, label,
# relevant slot): at most 2 * _FEW_RELEVANT bytes per cell, within the
# ranking budget) when no row of a block has more relevant labels than
# this, and sorts every row of the block (O(d log d) per row) otherwise.
_FEW_RELEVANT = 32


# --------------------------------------------------------------------------
# Validation and row blocks
# --------------------------------------------------------------------------


def _validate(
    y_true: Any,
    other: Any,
    other_name: str,
    *,
    binary_true: bool,
    binary_other: bool = False,
) -> tuple[Backend, Any, Any]:
    backend = resolve_backend(y_true, other)
    yt = _summed_duplicates(check_array(y_true, "y_true", backend), backend)
    yo = _summed_duplicates(check_array(other, other_name, backend), backend)
    if yt.shape != yo.shape:
        raise ValueError(
            f"y_true and {other_name} must have the same shape, got {tuple(yt.shape)} "
            f"and {tuple(yo.shape)}"
        )
    if yt.shape[1] < 1:
        raise ValueError(f"y_true must have at least one column, got shape {tuple(yt.shape)}")
    if binary_true:
        _check_binary(yt, "y_true", backend)
    if binary_other:
        _check_binary(yo, other_name, backend)
    return backend, yt, yo


def _summed_duplicates(a: Any, backend: Backend) -> Any:
    """``a``, or for a sparse matrix with repeated entries a copy with them summed.

    The entries of a repeated position add up (SciPy's meaning), so a 0/1
    check must see their sum: entry by entry, two 1s at one position passed
    as 0/1 labels and counted as a 2 (a precision above 1).
    """
    if backend.issparse(a) and not a.has_canonical_format:
        a = a.copy()
        a.sum_duplicates()
    return a


def _check_binary(a: Any, name: str, backend: Backend) -> None:
    """Raise unless every value of ``a`` is 0 or 1; dense input in row blocks.

    The comparisons make boolean temporaries of the checked rows: in blocks
    of about ``_MEMORY_BUDGET / 4`` cells they stay within the metrics'
    memory budget whatever the number of labels.
    """
    xp = backend.xp
    if backend.issparse(a):
        blocks = [a.data]
    else:
        step = max(1, _MEMORY_BUDGET // (4 * max(1, int(a.shape[1]))))
        blocks = (a[r0 : r0 + step] for r0 in range(0, int(a.shape[0]), step))
    for values in blocks:
        if values.size and not bool(xp.all((values == 0) | (values == 1))):
            bad = values[(values != 0) & (values != 1)]
            raise ValueError(
                f"{name} must be a 0/1 label indicator matrix, got the value {float(bad[0])!r}"
            )


def _chunks(n: int, d: int, chunk_size: int | None, cell_bytes: int) -> list[tuple[int, int]]:
    """Row blocks ``(start, stop)``: ``chunk_size`` rows, or what fits the budget."""
    if chunk_size is None:
        size = max(1, _MEMORY_BUDGET // max(1, d * cell_bytes))
    else:
        size = check_int(chunk_size, "chunk_size", low=1)
    return [(start, min(n, start + size)) for start in range(0, n, size)]


def _dense_rows(a: Any, start: int, stop: int, backend: Backend) -> Any:
    """Rows start:stop of ``a`` as a dense array (float32 kept, other types float64)."""
    rows = a[start:stop]
    if backend.issparse(rows):
        rows = rows.toarray()
    if rows.dtype not in (backend.xp.float32, backend.xp.float64):
        rows = rows.astype(backend.xp.float64)
    return rows


def _block(a: Any, start: int, stop: int, backend: Backend) -> Any:
    """Rows start:stop of ``a`` as a dense float64 array."""
    return _dense_rows(a, start, stop, backend).astype(backend.xp.float64, copy=False)


# --------------------------------------------------------------------------
# Ranking metrics
# --------------------------------------------------------------------------


def _ranking_counts(T: Any, S: Any, xp: Any) -> tuple[Any, Any]:
    """Per row: sum over relevant j of L_ij / R_ij, and the number of relevant labels.

    ``R_ij = #{k : s_ik >= s_ij}`` and ``L_ij = #{k relevant : s_ik >= s_ij}``
    (ties count as ranked above, as in scikit-learn's ``rankdata(.., "max")``).
    Scores are sorted once per row; tie groups get global ids so that group
    sizes come from one ``bincount`` for the whole block.
    """
    c, d = S.shape
    order = xp.argsort(-S, axis=1)
    s_sorted = xp.take_along_axis(S, order, axis=1)
    rel = xp.take_along_axis(T, order, axis=1)
    new_group = xp.ones((c, d), dtype=bool)
    new_group[:, 1:] = s_sorted[:, 1:] != s_sorted[:, :-1]
    group = xp.cumsum(new_group, axis=1) - 1
    flat = (group + (xp.arange(c) * d)[:, None]).ravel()
    size = xp.bincount(flat, minlength=c * d).reshape(c, d)
    rel_size = xp.bincount(flat, weights=rel.ravel(), minlength=c * d).reshape(c, d)
    R = xp.take_along_axis(xp.cumsum(size, axis=1), group, axis=1)
    L = xp.take_along_axis(xp.cumsum(rel_size, axis=1), group, axis=1)
    return (rel * (L / R)).sum(axis=1), rel.sum(axis=1)


def _ranking_counts_few(T: Any, S: Any, xp: Any) -> tuple[Any, Any]:
    """Same as :func:`_ranking_counts` by direct counting, for few relevant labels.

    The relevant scores of each row are packed into a (rows, width) matrix
    ``P``; ``R_ij`` compares each of them with the whole row and ``L_ij``
    with the row's own relevant scores: work ``O(nnz * d)`` instead of
    sorting every row. Padding is +inf where it is compared against (no
    score reaches it, so padded slots get ``R = 0`` and are dropped) and
    -inf where it is counted (it never counts).
    """
    c = S.shape[0]
    rows, cols = xp.nonzero(T)
    n_rel = xp.bincount(rows, minlength=c)
    if rows.shape[0] == 0:
        return xp.zeros(c), n_rel.astype(xp.float64)
    width = int(n_rel.max())
    first = xp.cumsum(n_rel) - n_rel
    slot = xp.arange(rows.shape[0]) - first[rows]
    P = xp.full((c, width), xp.inf)
    P[rows, slot] = S[rows, cols]
    P_counted = xp.where(xp.isinf(P), -xp.inf, P)
    R = xp.count_nonzero(S[:, None, :] >= P[:, :, None], axis=2)
    L = xp.count_nonzero(P_counted[:, None, :] >= P[:, :, None], axis=2)
    ratio = xp.where(R > 0, L / xp.maximum(R, 1), 0.0)
    return ratio.sum(axis=1), n_rel.astype(xp.float64)


def ranking_counts_xp(T: Any, S: Any, xp: Any) -> tuple[Any, Any]:
    """The LRAP counts of a block with array operations (the kernel ``lrap_row_counts``
    on CUDA backends, :mod:`gpurpo._ranking_kernels`): by direct counting when no row
    has more than ``_FEW_RELEVANT`` relevant labels, else by sorting every row."""
    few = int(T.sum(axis=1).max()) <= _FEW_RELEVANT
    return (_ranking_counts_few if few else _ranking_counts)(T, S, xp)


def label_ranking_average_precision(
    y_true: Any,
    y_score: Any,
    *,
    no_relevant: str = "skip",
    chunk_size: int | None = None,
) -> float:
    """Label ranking average precision (LRAP), Joly et al. (2014) eq. 6.

    ``LRAP = 1/|S| sum_{i in S} 1/|y_i| sum_{j : y_ij = 1} |L_ij| / |R_ij|``
    with ``R_ij = {k : s_ik >= s_ij}`` (labels ranked at or above label j)
    and ``L_ij = {k in R_ij : y_ik = 1}``. A label tied with label j counts
    as ranked above it, exactly as in scikit-learn's
    ``label_ranking_average_precision_score``.

    Parameters
    ----------
    y_true : array or sparse matrix of shape (n_samples, n_labels)
        0/1 relevance.
    y_score : array or sparse matrix of shape (n_samples, n_labels)
        Scores; higher means more relevant.
    no_relevant : {"skip", "one"}, default="skip"
        Samples without any relevant label: ``"skip"`` leaves them out of
        ``S`` (the paper's definition); ``"one"`` scores them 1 and keeps
        them, which is scikit-learn's convention (its result is then
        reproduced exactly).
    chunk_size : int, optional
        Rows per block (default: from a ~128 MiB memory budget).

    Returns
    -------
    float
        LRAP in (0, 1]; NaN (with a RuntimeWarning) when ``no_relevant="skip"``
        and no sample has a relevant label.
    """
    check_choice(no_relevant, "no_relevant", ("skip", "one"))
    backend, yt, ys = _validate(y_true, y_score, "y_score", binary_true=True)
    xp = backend.xp
    n, d = yt.shape
    total = 0.0
    counted = 0
    # the CPU kernel holds no temporaries of the block's size (a sparse y_score is made
    # dense); the array version of CUDA backends about _CELL_BYTES_RANKING per cell
    cell_bytes = _CELL_BYTES_RANKING if backend.uses_cuda_kernels else 8
    for start, stop in _chunks(n, d, chunk_size, cell_bytes):
        # the kernel reads a sparse y_true's stored entries and the scores' own precision
        T = yt[start:stop]
        S = _dense_rows(ys, start, stop, backend)
        ratio_sum = xp.empty(stop - start, dtype=xp.float64)
        n_rel = xp.empty(stop - start, dtype=xp.float64)
        backend.kernel("lrap_row_counts")(T, S, ratio_sum, n_rel)
        has = n_rel > 0
        total += float(xp.sum(ratio_sum[has] / n_rel[has]))
        n_has = int(xp.count_nonzero(has))
        counted += n_has
        if no_relevant == "one":
            total += (stop - start) - n_has
    if no_relevant == "one":
        return total / n
    if counted == 0:
        warnings.warn(
            "label_ranking_average_precision: no sample of y_true has a relevant label; "
            "returning NaN",
            RuntimeWarning,
            stacklevel=2,
        )
        return math.nan
    return total / counted


def precision_at_k(
    y_true: Any, y_score: Any, k: int = 1, *, chunk_size: int | None = None
) -> float:
    """Precision at k: mean over samples of ``|top_k(s_i) ∩ y_i| / k``.

    ``top_k(s_i)`` holds the k labels with the highest scores of sample i;
    among labels tied at the k-th score the ones with the lowest indices are
    taken (the order of a stable descending sort). Every sample counts,
    including those with fewer than k (or no) relevant labels.

    Parameters
    ----------
    y_true : array or sparse matrix of shape (n_samples, n_labels)
        0/1 relevance.
    y_score : array or sparse matrix of shape (n_samples, n_labels)
        Scores.
    k : int, default=1
        Number of top-ranked labels, ``1 <= k <= n_labels``.
    chunk_size : int, optional
        Rows per block.

    Returns
    -------
    float
        Precision at k in [0, 1].
    """
    backend, yt, ys = _validate(y_true, y_score, "y_score", binary_true=True)
    n, d = yt.shape
    k = check_int(k, "k", low=1, high=d)
    hits = 0.0
    # the CPU kernel reads the scores as they are and y_true at the chosen columns only
    cell_bytes = _CELL_BYTES_ELEMENTWISE if backend.uses_cuda_kernels else 8
    hits_of = backend.kernel("top_k_hits")
    for start, stop in _chunks(n, d, chunk_size, cell_bytes):
        hits += hits_of(yt[start:stop], _dense_rows(ys, start, stop, backend), k)
    return hits / (n * k)


def micro_auprc(y_true: Any, y_score: Any, *, chunk_size: int | None = None) -> float:
    """Area under the micro-averaged precision-recall curve (average precision).

    All (sample, label) pairs are pooled. With the distinct scores ``t`` in
    decreasing order as thresholds,
    ``AUPRC = sum_t (R(t) - R(t_prev)) P(t)`` where ``P(t)`` and ``R(t)`` are
    the precision and recall of predicting every pair scored ``>= t``: pairs
    with equal scores enter together (no interpolation), which is exactly
    scikit-learn's ``average_precision_score(average="micro")``. Only
    thresholds at positive pairs' scores change R, so the sum runs over the
    distinct scores of the positives, and the number of pairs scored
    ``>= t`` is counted block by block: memory stays O(nnz(y_true)) plus
    one block.

    Parameters
    ----------
    y_true : array or sparse matrix of shape (n_samples, n_labels)
        0/1 relevance.
    y_score : array or sparse matrix of shape (n_samples, n_labels)
        Scores; higher means more relevant.
    chunk_size : int, optional
        Rows per block (default: from a ~128 MiB memory budget).

    Returns
    -------
    float
        Micro-averaged AUPRC in (0, 1]; 0.0 with a RuntimeWarning when
        ``y_true`` has no positive (scikit-learn's value).
    """
    backend, yt, ys = _validate(y_true, y_score, "y_score", binary_true=True)
    xp = backend.xp
    n, d = yt.shape
    blocks = _chunks(n, d, chunk_size, _CELL_BYTES_ELEMENTWISE)
    positive_scores = []
    for start, stop in blocks:
        T = _block(yt, start, stop, backend)
        S = _block(ys, start, stop, backend)
        positive_scores.append(S[T > 0])
    scores = xp.concatenate(positive_scores)
    n_pos = int(scores.shape[0])
    if n_pos == 0:
        warnings.warn(
            "micro_auprc: y_true has no positive entry; returning 0.0",
            RuntimeWarning,
            stacklevel=2,
        )
        return 0.0
    thresholds, pos_count = xp.unique(scores, return_counts=True)
    # n_above[k] = #{scores >= thresholds[k]}: each block's scores are sorted and the
    # (fewer) thresholds searched in them, where searching every score among the
    # thresholds cost a cache miss per step (12,920 x 983 scores: 2.5 -> 0.9 s)
    n_above = xp.zeros(int(thresholds.shape[0]), dtype=xp.int64)
    for start, stop in blocks:
        S = xp.sort(_block(ys, start, stop, backend).ravel())
        n_above += S.shape[0] - xp.searchsorted(S, thresholds, side="left")
    tp_above = xp.cumsum(pos_count[::-1])[::-1]
    return float(xp.sum(pos_count * (tp_above / n_above))) / n_pos


# --------------------------------------------------------------------------
# Regression and 0/1 metrics
# --------------------------------------------------------------------------


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
