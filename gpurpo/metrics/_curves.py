"""The area under the micro-averaged precision-recall curve."""

from __future__ import annotations

import warnings
from typing import Any

from gpurpo.metrics._blocks import (
    _CELL_BYTES_ELEMENTWISE,
    _block,
    _chunks,
    _validate,
)


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
