"""Column subset selection of a label matrix (ML-CSSP).

Bi & Kwok, "Efficient multi-label classification with many labels", ICML 2013,
Algorithm 1: pick ``k`` of the ``d`` labels by sampling columns of ``Y`` with
probabilities proportional to their rank-``k`` leverage scores; the other
labels are later decoded from the selected ones by ``Y_C^+ Y``. The
``"sample_qr"`` variant is the two-stage algorithm of Boutsidis, Mahoney &
Drineas, "An improved approximation algorithm for the column subset selection
problem", SODA 2009: a randomized oversampling stage followed by a
deterministic rank-revealing (pivoted) QR stage that keeps exactly ``k``.
"""

from __future__ import annotations

import math
import warnings
from typing import Any

import numpy as np
import scipy.linalg

from gpurpo._validation import check_choice, check_int
from gpurpo.backend import check_random_state
from gpurpo.linalg.operators import as_operator, check_n_components, check_n_iter
from gpurpo.linalg.qr import NORMALIZERS
from gpurpo.linalg.randomized import _randomized_svd

__all__ = ["cssp_select", "sample_until_distinct", "select_columns"]

METHODS = ("sample", "sample_qr")


def default_max_trials(k: int) -> int:
    """Generous cap on the number of draws.

    Leverage scores are at most 1 and sum to ``k``, so while ``j < k`` columns
    are chosen the others keep a total probability ``>= (k - j)/k``: the
    expected number of draws is at most ``k H_k ~ k ln k``. The cap is 100
    times that (plus slack for small ``k``); it only guards against
    probabilities corrupted by rounding.
    """
    harmonic = sum(1.0 / j for j in range(1, k + 1))
    return int(math.ceil(100 * k * harmonic)) + 1000


def sample_until_distinct(
    p: np.ndarray,
    k: int,
    rng: np.random.Generator,
    max_trials: int,
    min_trials: int = 0,
) -> tuple[np.ndarray, int, bool]:
    """Draw column indices i.i.d. from ``p`` (with replacement).

    Stops at the draw that completes ``k`` distinct indices, but not before
    ``min_trials`` draws, and never after ``max_trials`` draws (Bi & Kwok,
    Algorithm 1, lines 4-8). Draws are made in batches from ``rng.choice``,
    which consumes the generator exactly like one call per draw.

    Returns
    -------
    draws : ndarray of int64
        Every draw, in order (``len(draws)`` is the number of trials).
    n_trials : int
    complete : bool
        False when ``max_trials`` was reached before ``k`` distinct indices.
    """
    d = p.shape[0]
    chunks: list[np.ndarray] = []
    total = 0
    batch = max(2 * k, min_trials, 16)
    while total < max_trials:
        size = min(batch, max_trials - total)
        chunks.append(rng.choice(d, size=size, p=p))
        total += size
        draws = np.concatenate(chunks)
        unique, first = np.unique(draws, return_index=True)
        if unique.shape[0] >= k:
            completed_at = int(np.sort(first)[k - 1]) + 1
            n_trials = max(completed_at, min_trials)
            if n_trials <= total:
                return draws[:n_trials].astype(np.int64), n_trials, True
        batch *= 2
    draws = np.concatenate(chunks).astype(np.int64) if chunks else np.zeros(0, np.int64)
    return draws, total, False


def _first_appearance(draws: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Distinct values in order of first appearance, and how often each was drawn."""
    unique, first, counts = np.unique(draws, return_index=True, return_counts=True)
    order = np.argsort(first, kind="stable")
    return unique[order], counts[order]


def cssp_select(
    Y: Any,
    k: int,
    random_state: Any = None,
    method: str = "sample",
    n_oversamples: int = 10,
    n_iter: int | str = "auto",
    max_trials: int | None = None,
    power_iteration_normalizer: str = "QR",
) -> tuple[Any, int]:
    """Select ``k`` columns (labels) of ``Y`` by leverage-score sampling (ML-CSSP).

    Bi & Kwok (2013), Algorithm 1: compute the top-``k`` right singular
    vectors ``V_k`` of ``Y`` (line 2, here by
    :func:`gpurpo.linalg.randomized_svd`), set
    ``p_i = ||(V_k^T)_{(i)}||^2 / k`` (line 3, the squared column norms of
    ``V_k^T``, i.e. leverage scores over ``k``), then sample columns with
    replacement with probabilities ``p_i`` until ``k`` DISTINCT columns are
    chosen (lines 4-8).

    ``method="sample_qr"`` follows Boutsidis, Mahoney & Drineas (2009): draw
    ``c = max(k, ceil(2 k ln k))`` columns i.i.d. from ``p`` (more if fewer
    than ``k`` distinct columns came up), scale each sampled column of ``V_k^T``
    by ``1/sqrt(c p_i)`` (a column drawn ``t`` times counts once with weight
    ``sqrt(t / (c p_i))``, which leaves ``S D D^T S^T`` unchanged), and keep
    the ``k`` columns chosen first by column-pivoted QR of that ``k x c``
    matrix (``scipy.linalg.qr`` with pivoting, on the host).

    Parameters
    ----------
    Y : array, sparse matrix or operator, shape (n, d)
        Label matrix; sparse ``Y`` is never densified.
    k : int
        Number of labels to keep, ``1 <= k <= min(n, d)``.
    random_state : None, int, numpy Generator or RandomState
        Seeds both the randomized SVD and the sampling.
    method : {"sample", "sample_qr"}
    n_oversamples, n_iter, power_iteration_normalizer
        Parameters of the randomized SVD giving ``V_k``
        (see :func:`gpurpo.linalg.randomized_svd`).
    max_trials : int, optional
        Cap on the number of draws (at least ``k``); default
        :func:`default_max_trials`. If it is reached before ``k`` distinct
        columns were drawn (which needs leverage scores corrupted by
        rounding, or a tiny explicit cap), the selection is completed with the
        not-yet-chosen columns of largest leverage score, in decreasing order,
        and a ``RuntimeWarning`` is issued.

    Returns
    -------
    indices : array of int64, shape (k,)
        The selected columns, distinct. Order: for ``"sample"`` the order in
        which they were first drawn (then any completion); for
        ``"sample_qr"`` the pivot order of the QR stage. In the input's
        namespace.
    n_trials : int
        Number of draws made.
    """
    op = as_operator(Y, "Y")
    k = check_n_components(k, op.shape, "Y", name="k")
    method = check_choice(method, "method", METHODS)
    p_over = check_int(n_oversamples, "n_oversamples", low=0)
    q = check_n_iter(n_iter, k, op.shape)
    normalizer = check_choice(power_iteration_normalizer, "power_iteration_normalizer", NORMALIZERS)
    if max_trials is None:
        max_trials = default_max_trials(k)
    max_trials = check_int(max_trials, "max_trials", low=k)
    rng = check_random_state(random_state)

    Vt = _randomized_svd(op, k, p_over, q, rng, normalizer)[2]
    Vt_host = np.asarray(op.backend.to_host(Vt), dtype=np.float64)
    indices, n_trials = select_columns(Vt_host, k, method, rng, max_trials)
    return op.output(op.backend.asarray(indices)), n_trials


def select_columns(
    Vt: np.ndarray, k: int, method: str, rng: np.random.Generator, max_trials: int
) -> tuple[np.ndarray, int]:
    """The ``k`` columns :func:`cssp_select` picks from the top-``k`` right singular vectors ``Vt``.

    Draws by the leverage scores of ``Vt`` (host, (k, n)) with ``rng``, after the
    draws of the SVD; shared by :func:`cssp_select` and its Dask namesake.
    Returns the int64 indices and the number of draws.
    """
    scores = np.sum(Vt * Vt, axis=0)
    probabilities = scores / scores.sum()

    min_trials = 0
    if method == "sample_qr":
        min_trials = min(max(k, math.ceil(2 * k * math.log(k))), max_trials)
    draws, n_trials, complete = sample_until_distinct(
        probabilities, k, rng, max_trials, min_trials
    )
    chosen, counts = _first_appearance(draws)
    if not complete:
        warnings.warn(
            f"cssp_select drew max_trials={max_trials} columns but only {chosen.shape[0]} "
            f"distinct ones (k={k}); completing the selection with the columns of largest "
            "leverage score",
            RuntimeWarning,
            stacklevel=3,
        )
        rest = np.argsort(-scores, kind="stable")
        rest = rest[~np.isin(rest, chosen)]
        indices = np.concatenate([chosen, rest[: k - chosen.shape[0]]])
    elif method == "sample":
        indices = chosen
    else:
        weights = np.sqrt(counts / (n_trials * probabilities[chosen]))
        _, pivots = scipy.linalg.qr(Vt[:, chosen] * weights[None, :], mode="r", pivoting=True)
        indices = chosen[pivots[:k]]
    return indices.astype(np.int64), int(n_trials)
