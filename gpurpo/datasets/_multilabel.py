"""Structured synthetic multi-label data with many labels.

The generator is a topic model whose topic proportions are a nonlinear
function of the inputs:

1. Inputs ``X`` are i.i.d. standard normal; ``n_informative`` of the
   ``n_features`` columns (chosen at random) drive the labels.
2. Each of the ``n_latent`` latent factors ("topics") ``k`` has a score

   ``h_k(x) = sum_r a_kr 1[s_r1 (x_f - t_r1) > 0] 1[s_r2 (x_g - t_r2) > 0]
   + b_k tanh(2 w_k . x_S / ||w_k||)``,

   i.e. a few depth-2 axis-aligned rules (conjunctions of two thresholded
   informative features, the kind of interaction a tree must learn) plus one
   smooth oblique term on three informative features. The topic proportions
   of a sample are ``theta(x) = softmax(sharpness * h(x))``.
3. Every label belongs to one topic (a random balanced assignment) and has
   a Zipf popularity ``pi_j ~ (rank_j + 1) ** -popularity_skew`` (ranks in
   a random order). Within topic ``k`` labels are drawn with probability
   proportional to ``pi_j``.
4. Sample ``i`` gets ``T_i`` distinct labels, ``T_i = 1 + Poisson(c - 1)``
   for a label cardinality ``c >= 1`` (``Bernoulli(c)`` for ``c < 1``),
   capped at ``n_labels``. Labels are drawn one after the other: with
   probability ``noise`` from the global popularity distribution (ignoring
   ``x``), otherwise from a topic drawn from ``theta(x_i)``; repeats are
   dropped until ``T_i`` distinct labels are collected (successive sampling
   without replacement). The expected label matrix is therefore of rank at
   most ``n_latent + 1``: labels are correlated through the low-rank latent
   factors, their frequencies are skewed, and which labels a sample carries
   depends nonlinearly on ``x``.

Draws are generated per row as label lists, all rows at once, so the cost is
proportional to the number of labels present (plus ``O(n_labels)`` for the
label tables): a million labels take a few megabytes.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import scipy.sparse as sp

from gpurpo._validation import check_choice, check_float, check_int
from gpurpo.backend import check_random_state

__all__ = ["make_multilabel", "make_delicious_like", "make_mediamill_like"]

_N_RULES = 3
_SHARPNESS = 4.0
_LABELS_PER_TOPIC = 1.5
_MAX_ROUNDS = 40
_AUTO_DENSE_CELLS = 10**8
_AUTO_DENSITY = 0.1


def _default_n_latent(n_labels: int, cardinality: float) -> int:
    """About three times as many labels per topic as labels per sample."""
    k = int(round(n_labels / max(_LABELS_PER_TOPIC * cardinality, 1.0)))
    return int(min(max(k, 2), 50, n_labels))


def _topic_scores(X_inf: np.ndarray, n_latent: int, rng: np.random.Generator) -> np.ndarray:
    """Scores h_k(x) of the latent factors (module docstring, step 2)."""
    n, q = X_inf.shape
    feats = rng.integers(0, q, size=(n_latent, _N_RULES, 2))
    thresholds = rng.uniform(-0.7, 0.7, size=(n_latent, _N_RULES, 2))
    signs = rng.choice(np.array([-1.0, 1.0]), size=(n_latent, _N_RULES, 2))
    weights = rng.uniform(1.0, 2.0, size=(n_latent, _N_RULES))
    obl_feats = rng.integers(0, q, size=(n_latent, 3))
    obl_w = rng.standard_normal((n_latent, 3))
    obl_w /= np.maximum(np.linalg.norm(obl_w, axis=1, keepdims=True), 1e-12)
    obl_b = rng.uniform(0.5, 1.5, size=n_latent)

    H = np.empty((n, n_latent))
    for k in range(n_latent):
        h = obl_b[k] * np.tanh(2.0 * (X_inf[:, obl_feats[k]] @ obl_w[k]))
        for r in range(_N_RULES):
            fired = np.ones(n, dtype=bool)
            for s in range(2):
                col = X_inf[:, feats[k, r, s]]
                fired &= signs[k, r, s] * (col - thresholds[k, r, s]) > 0
            h += weights[k, r] * fired
        H[:, k] = h
    return H


def _softmax_rows(H: np.ndarray) -> np.ndarray:
    Z = H - H.max(axis=1, keepdims=True)
    np.exp(Z, out=Z)
    Z /= Z.sum(axis=1, keepdims=True)
    return Z


class _LabelSampler:
    """Draws labels for given rows from the topic mixture or the noise distribution.

    Topic tables: labels sorted by topic, with the cumulative popularity of
    topic ``k``'s labels rescaled to ``(k, k + 1]``, so that a draw from topic
    ``k`` is ``searchsorted(cdf, k + u)`` with ``u ~ U[0, 1)``. The noise
    distribution is the cumulative popularity of all labels.
    """

    def __init__(
        self,
        theta: np.ndarray,
        topic_of_label: np.ndarray,
        popularity: np.ndarray,
        noise: float,
    ) -> None:
        n, K = theta.shape
        index_dtype = np.int32 if popularity.shape[0] < 2**31 else np.int64
        order = np.argsort(topic_of_label, kind="stable").astype(index_dtype)
        sizes = np.bincount(topic_of_label, minlength=K)
        ends = np.cumsum(sizes)
        cdf = popularity[order]
        start = 0
        for k in range(K):
            block = cdf[start : ends[k]]
            np.cumsum(block, out=block)
            block /= block[-1]
            block += k
            block[-1] = k + 1.0
            start = ends[k]
        noise_cdf = np.cumsum(popularity)
        noise_cdf /= noise_cdf[-1]
        noise_cdf[-1] = 1.0
        self._order = order
        self._cdf = cdf
        self._ends = ends
        self._noise_cdf = noise_cdf
        self._K = K
        self._noise = noise
        theta_cdf = np.cumsum(theta, axis=1)
        theta_cdf[:, -1] = 1.0
        theta_cdf += np.arange(n)[:, None]
        self._theta_flat = theta_cdf.ravel()

    def draw(self, rows: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        K = self._K
        n_draws = rows.shape[0]
        u_topic = rng.random(n_draws)
        u_label = rng.random(n_draws)
        is_noise = rng.random(n_draws) < self._noise
        pos = np.searchsorted(self._theta_flat, rows + u_topic, side="right")
        topic = np.clip(pos - rows * K, 0, K - 1)
        idx = np.searchsorted(self._cdf, topic + u_label, side="right")
        idx = np.minimum(idx, self._ends[topic] - 1)
        labels = self._order[idx].astype(np.int64)
        noisy = np.searchsorted(self._noise_cdf, u_label[is_noise], side="right")
        labels[is_noise] = np.minimum(noisy, self._noise_cdf.shape[0] - 1)
        return labels


def _collect_distinct(
    target: np.ndarray,
    n_labels: int,
    sampler: _LabelSampler,
    rng: np.random.Generator,
) -> tuple[np.ndarray, np.ndarray]:
    """Successive sampling without replacement of ``target[i]`` labels per row.

    Labels are drawn with replacement in rounds; the first occurrence of each
    (row, label) pair in draw order is kept, up to ``target[i]`` per row.
    Returns (rows, labels) sorted by row then label.
    """
    n = target.shape[0]
    rows_kept = np.empty(0, dtype=np.int64)
    labels_kept = np.empty(0, dtype=np.int64)
    order_kept = np.empty(0, dtype=np.int64)
    counter = 0
    need = target.astype(np.int64).copy()
    for r in range(_MAX_ROUNDS):
        active = np.flatnonzero(need > 0)
        if active.size == 0:
            break
        factor = min(1.5 * 2.0**r, 64.0)
        m = np.ceil(need[active] * factor).astype(np.int64)
        new_rows = np.repeat(active, m)
        new_labels = sampler.draw(new_rows, rng)
        new_order = counter + np.arange(new_rows.shape[0], dtype=np.int64)
        counter += new_rows.shape[0]

        rows = np.concatenate([rows_kept, new_rows])
        labels = np.concatenate([labels_kept, new_labels])
        order = np.concatenate([order_kept, new_order])
        key = rows * n_labels + labels
        by_key = np.lexsort((order, key))
        sorted_key = key[by_key]
        first = np.ones(sorted_key.shape[0], dtype=bool)
        first[1:] = sorted_key[1:] != sorted_key[:-1]
        keep = by_key[first]
        keep = keep[np.lexsort((order[keep], rows[keep]))]
        kept_rows = rows[keep]
        counts = np.bincount(kept_rows, minlength=n)
        row_start = np.concatenate([[0], np.cumsum(counts)[:-1]])
        rank = np.arange(keep.shape[0]) - row_start[kept_rows]
        keep = keep[rank < target[kept_rows]]
        rows_kept, labels_kept, order_kept = rows[keep], labels[keep], order[keep]
        need = target - np.bincount(rows_kept, minlength=n)
    final = np.lexsort((labels_kept, rows_kept))
    return rows_kept[final], labels_kept[final]


def make_multilabel(
    n_samples: int = 1000,
    n_features: int = 20,
    n_labels: int = 50,
    *,
    n_informative: int | None = None,
    n_latent: int | None = None,
    label_cardinality: float = 4.0,
    popularity_skew: float = 1.0,
    noise: float = 0.1,
    sparse_output: bool | str = "auto",
    dtype: Any = np.float64,
    random_state: Any = None,
) -> tuple[np.ndarray, Any]:
    """Generate a structured multi-label problem with many labels.

    Labels follow a topic model whose topic proportions depend nonlinearly
    on ``X`` (axis-aligned rule conjunctions and an oblique smooth term on a
    few informative features), labels are correlated through ``n_latent``
    latent factors, label frequencies follow a Zipf law and the mean number
    of labels per sample is controlled. See the module docstring for the
    exact model. Tree ensembles fitted on this data rank labels far better
    than the label-popularity baseline.

    Parameters
    ----------
    n_samples : int, default=1000
        Number of samples n.
    n_features : int, default=20
        Number of input features p.
    n_labels : int, default=50
        Number of labels d (up to millions with sparse output).
    n_informative : int, optional
        Number of features the labels depend on; default ``min(p, 30)``.
    n_latent : int, optional
        Number of latent factors (topics). Default: about
        ``n_labels / (3 * label_cardinality)``, clipped to ``[2, 50]``.
    label_cardinality : float, default=4.0
        Mean number of labels per sample (up to the rare shortfall when a
        sample's labels cannot be completed, e.g. ``noise=0`` and a nearly
        exhausted topic).
    popularity_skew : float, default=1.0
        Zipf exponent of label popularity; 0 gives uniform popularity.
    noise : float, default=0.1
        Fraction of label draws taken from the global popularity
        distribution, independent of ``X``.
    sparse_output : bool or "auto", default="auto"
        Return ``Y`` as a SciPy CSR matrix (True) or a dense array (False).
        ``"auto"``: CSR when the label density ``label_cardinality / n_labels``
        is below 0.1 or a dense ``Y`` would exceed 1e8 entries.
    dtype : {numpy.float64, numpy.float32}, default=numpy.float64
        Data type of ``X``.
    random_state : None, int or numpy Generator
        Seed; the same seed gives the same data.

    Returns
    -------
    X : ndarray of shape (n_samples, n_features)
        Standard normal inputs.
    Y : ndarray or scipy.sparse.csr_matrix of shape (n_samples, n_labels)
        0/1 label matrix (float64 values); CSR rows have sorted indices.
    """
    n = check_int(n_samples, "n_samples", low=1)
    p = check_int(n_features, "n_features", low=1)
    d = check_int(n_labels, "n_labels", low=1)
    c = check_float(label_cardinality, "label_cardinality", low=0.0, low_inclusive=False)
    if c > d:
        raise ValueError(
            f"label_cardinality must be <= n_labels ({d}), got {label_cardinality}"
        )
    q = min(p, 30) if n_informative is None else check_int(
        n_informative, "n_informative", low=1, high=p
    )
    K = _default_n_latent(d, c) if n_latent is None else check_int(
        n_latent, "n_latent", low=1, high=d
    )
    skew = check_float(popularity_skew, "popularity_skew", low=0.0)
    noise = check_float(noise, "noise", low=0.0, high=1.0)
    if not isinstance(sparse_output, bool):
        check_choice(sparse_output, "sparse_output", (True, False, "auto"))
    dtype = np.dtype(dtype)
    if dtype not in (np.dtype(np.float32), np.dtype(np.float64)):
        raise ValueError(f"dtype must be float32 or float64, got {dtype}")
    rng = check_random_state(random_state)

    X = rng.standard_normal((n, p), dtype=dtype)
    informative = rng.choice(p, size=q, replace=False)
    H = _topic_scores(X[:, informative].astype(np.float64), K, rng)
    theta = _softmax_rows(_SHARPNESS * H)

    topic_of_label = rng.permutation(np.arange(d, dtype=np.int32) % K)
    popularity = (rng.permutation(d) + 1.0) ** (-skew)

    if c >= 1.0:
        target = 1 + rng.poisson(c - 1.0, size=n)
    else:
        target = (rng.random(n) < c).astype(np.int64)
    target = np.minimum(target, d).astype(np.int64)

    sampler = _LabelSampler(theta, topic_of_label, popularity, noise)
    rows, labels = _collect_distinct(target, d, sampler, rng)

    indptr = np.concatenate([[0], np.cumsum(np.bincount(rows, minlength=n))])
    index_dtype = np.int32 if max(d, rows.shape[0]) < 2**31 else np.int64
    Y = sp.csr_matrix(
        (np.ones(rows.shape[0]), labels.astype(index_dtype), indptr.astype(index_dtype)),
        shape=(n, d),
    )
    if sparse_output == "auto":
        sparse_output = c / d < _AUTO_DENSITY or n * d > _AUTO_DENSE_CELLS
    if not sparse_output:
        Y = Y.toarray()
    return X, Y


def make_delicious_like(
    random_state: Any = 0, n_samples: int = 12920, **kwargs: Any
) -> tuple[np.ndarray, Any]:
    """A problem shaped like MULAN's delicious: p = 500, d = 983, ~19 labels per row.

    Calls :func:`make_multilabel` with ``n_features=500``, ``n_labels=983``,
    ``label_cardinality=19.02`` (the delicious training set's cardinality);
    other keyword arguments are passed on. ``Y`` is CSR by default.
    """
    params = dict(n_features=500, n_labels=983, label_cardinality=19.02)
    params.update(kwargs)
    return make_multilabel(n_samples, random_state=random_state, **params)


def make_mediamill_like(
    random_state: Any = 0, n_samples: int = 30993, **kwargs: Any
) -> tuple[np.ndarray, Any]:
    """A problem shaped like MULAN's mediamill: p = 120, d = 101, ~4.4 labels per row.

    Calls :func:`make_multilabel` with ``n_features=120``, ``n_labels=101``,
    ``label_cardinality=4.376``; other keyword arguments are passed on.
    ``Y`` is CSR by default.
    """
    params = dict(n_features=120, n_labels=101, label_cardinality=4.376)
    params.update(kwargs)
    return make_multilabel(n_samples, random_state=random_state, **params)

