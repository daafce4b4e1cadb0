"""Ranking metrics of multi-label scores: LRAP and precision at k."""

from __future__ import annotations

import math
import warnings
from typing import Any

from gpurpo._validation import check_choice, check_int
from gpurpo.metrics import _ranking_kernels  # noqa: F401  (registers the ranking kernels)
from gpurpo.metrics._blocks import (
    _CELL_BYTES_ELEMENTWISE,
    _CELL_BYTES_RANKING,
    _chunks,
    _dense_rows,
    _validate,
)


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
