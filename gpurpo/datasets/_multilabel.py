"""Structured synthetic multi-label data with many labels.

The generator is a topic model whose topic proportions are a nonlinear
function of the inputs:

1. Inputs ``X`` are standard normal. ``r = min(n_informative, 8)`` of the
   ``n_informative`` informative columns (chosen at random) are the hidden
   inputs ``u`` that drive the labels; the other informative columns are
   noisy copies ``sqrt(1 - s^2) u_g + s e`` (``s ~ U[0.2, 0.5]``) of them, as
   correlated real features are; the remaining columns are pure noise.
2. The topic proportions ``theta(x)`` over the ``n_latent`` latent factors
   ("topics") come from a random *soft* decision tree on ``u`` of depth
   ``ceil(log2 n_latent) + 1``: each internal node splits on one hidden input
   (or, for a quarter of the nodes, on an oblique direction of two) at a
   threshold in ``[-0.5, 0.5]``, sending a sample right with probability
   ``sigmoid((w . u - t) / 0.08)``; a sample's weight on each leaf is the
   product along the path, and each leaf holds one main topic (every topic
   owns at least one leaf) mixed with a share ``U[0, 0.3]`` of another topic.
   So ``theta`` is a smoothed piecewise-constant, interaction-rich function
   of a few inputs: learnable by trees, not by a linear model.
3. Every label belongs to one topic (a random balanced assignment; by
   default topics hold about ``1.5 * label_cardinality`` labels) and has a
   Zipf popularity ``pi_j ~ (rank_j + 1) ** -popularity_skew`` (ranks in a
   random order). Within topic ``k`` labels are drawn with probability
   proportional to ``pi_j``.
4. Sample ``i`` gets ``T_i`` distinct labels, ``T_i = 1 + Poisson(c - 1)``
   for a label cardinality ``c >= 1`` (``Bernoulli(c)`` for ``c < 1``),
   capped at ``n_labels``. Labels are drawn one after the other: with
   probability ``noise`` from the global popularity distribution (ignoring
   ``x``), otherwise from a topic drawn from ``theta(x_i)``; repeats are
   dropped until ``T_i`` distinct labels are collected (successive sampling
   without replacement). The label distribution of a sample is therefore a
   mixture of ``n_latent + 1`` fixed distributions: labels are correlated
   through the low-rank latent factors, their frequencies are skewed, and
   which labels a sample carries depends nonlinearly on ``x``.

With ``features="text"`` the inputs are instead binary bag-of-words
presence features, as text multi-label sets carry them (the labels are the
same as with continuous inputs for the same seed): every sample is a
document of ``Poisson`` word counts whose rates mix a background word
distribution with the topic-word distributions of its topics,

5. ``lambda_ij = L g_i ((1 - a) b_j + a sum_k theta_ik phi_kj)``, with a
   Zipf background ``b_j ~ (rank_j + 1) ** -0.7`` over all ``p`` words, a
   topical share ``a = 0.5``, a document length factor ``g_i ~ Gamma(2, 1/2)``
   (mean 1) and topic-word distributions ``phi_k`` over the ``n_informative``
   informative words only (each informative word belongs to one topic, a
   random balanced assignment, and every topic gets at least 5 words, adding
   random other informative words where needed; weights ``U[0.5, 1.5]``).
   ``X_ij = 1`` when word ``j`` occurs, with probability
   ``1 - exp(-lambda_ij)``; the scale ``L`` is solved for so that the
   expected fraction of ones is ``feature_density``. The informative words
   reveal the topic proportions ``theta(x)``, noisily; the other words carry
   only the background.

Draws are generated per row as label lists, all rows at once, so the cost is
proportional to the number of labels present (plus ``O(n_labels)`` for the
label tables): a million labels take a few tens of megabytes.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import scipy.sparse as sp

from gpurpo._validation import check_choice, check_float, check_int
from gpurpo.backend import check_random_state

__all__ = ["make_multilabel", "make_delicious_like", "make_mediamill_like"]

_N_HIDDEN = 8
_COPY_NOISE = (0.2, 0.5)
_OBLIQUE_FRACTION = 0.25
_THRESHOLD_RANGE = 0.5
_SOFTNESS = 0.08
_SECONDARY_SHARE = 0.3
_LABELS_PER_TOPIC = 1.5
_MAX_ROUNDS = 40
_AUTO_DENSE_CELLS = 10**8
_AUTO_DENSITY = 0.1
_FEATURE_KINDS = ("continuous", "text")
_WORD_SKEW = 0.7
_TOPICAL_SHARE = 0.5
_LENGTH_SHAPE = 2.0
_MIN_TOPIC_WORDS = 5
_TOPIC_WORD_WEIGHTS = (0.5, 1.5)
_CALIBRATION_ROWS = 4096
_TEXT_BLOCK_ROWS = 8192


def _default_n_latent(n_labels: int, cardinality: float) -> int:
    """About 1.5 times as many labels per topic as labels per sample, in [2, 50]."""
    k = int(round(n_labels / max(_LABELS_PER_TOPIC * cardinality, 1.0)))
    return int(min(max(k, 2), 50, n_labels))


def _topic_proportions(
    X_inf: np.ndarray, n_latent: int, rng: np.random.Generator
) -> np.ndarray:
    """Topic proportions theta(x) from a random soft decision tree (step 2)."""
    n, q = X_inf.shape
    depth = int(math.ceil(math.log2(n_latent))) + 1
    membership = np.ones((n, 1))
    for level in range(depth):
        width = 2**level
        directions = np.zeros((q, width))
        first = rng.integers(0, q, size=width)
        second = rng.integers(0, q, size=width)
        oblique = rng.random(width) < _OBLIQUE_FRACTION
        angle = rng.uniform(0.0, 2.0 * math.pi, size=width)
        cols = np.arange(width)
        directions[first, cols] = np.where(oblique, np.cos(angle), 1.0)
        directions[second[oblique], cols[oblique]] += np.sin(angle[oblique])
        directions /= np.maximum(np.linalg.norm(directions, axis=0), 1e-12)
        thresholds = rng.uniform(-_THRESHOLD_RANGE, _THRESHOLD_RANGE, size=width)
        z = (X_inf @ directions - thresholds) / _SOFTNESS
        right = 0.5 * (1.0 + np.tanh(0.5 * z))
        children = np.empty((n, 2 * width))
        children[:, 0::2] = membership * (1.0 - right)
        children[:, 1::2] = membership * right
        membership = children
    n_leaves = membership.shape[1]
    main = rng.permutation(np.arange(n_leaves) % n_latent)
    other = (main + rng.integers(1, max(n_latent, 2), size=n_leaves)) % n_latent
    share = rng.uniform(0.0, _SECONDARY_SHARE, size=n_leaves)
    phi = np.zeros((n_leaves, n_latent))
    phi[np.arange(n_leaves), main] += 1.0 - share
    phi[np.arange(n_leaves), other] += share
    theta = membership @ phi
    theta /= theta.sum(axis=1, keepdims=True)
    return theta


def _word_rates(
    theta: np.ndarray, n_features: int, informative: np.ndarray, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Background word distribution, topic-word distributions and document lengths (step 5)."""
    n, K = theta.shape
    q = informative.shape[0]
    background = (rng.permutation(n_features) + 1.0) ** (-_WORD_SKEW)
    background /= background.sum()
    phi = np.zeros((K, n_features))
    topic_of_word = rng.permutation(np.arange(q) % K)
    low, high = _TOPIC_WORD_WEIGHTS
    phi[topic_of_word, informative] = rng.uniform(low, high, size=q)
    need = min(_MIN_TOPIC_WORDS, q)
    for k in range(K):
        short = need - np.count_nonzero(phi[k])
        if short > 0:
            free = informative[phi[k, informative] == 0.0]
            extra = rng.choice(free, size=short, replace=False)
            phi[k, extra] = rng.uniform(low, high, size=short)
    phi /= phi.sum(axis=1, keepdims=True)
    length = rng.gamma(_LENGTH_SHAPE, 1.0 / _LENGTH_SHAPE, size=n)
    return background, phi, length


def _rates(theta, background, phi, length):
    """Word rates per unit length, ``g_i ((1 - a) b_j + a (theta phi)_ij)``, for a block of rows."""
    rates = theta @ phi
    rates *= _TOPICAL_SHARE
    rates += (1.0 - _TOPICAL_SHARE) * background
    rates *= length[:, None]
    return rates


def _text_features(
    theta: np.ndarray,
    n_features: int,
    informative: np.ndarray,
    density: float,
    dtype: np.dtype,
    rng: np.random.Generator,
) -> np.ndarray:
    """Binary word presence features whose expected density is ``density`` (step 5)."""
    n = theta.shape[0]
    background, phi, length = _word_rates(theta, n_features, informative, rng)
    # the scale L solves mean(1 - exp(-L R)) = density on up to _CALIBRATION_ROWS rows (rows
    # are independent given the model, so their mean estimates the expected density); the
    # left side is increasing and concave in L, so Newton's method from L = 0 climbs to the
    # root without overshooting it
    sample = rng.choice(n, size=min(n, _CALIBRATION_ROWS), replace=False)
    rates = _rates(theta[sample], background, phi, length[sample])
    scale = 0.0
    for _ in range(100):
        decay = np.exp(-scale * rates)
        gap = density - (1.0 - decay.mean())
        step = gap / (rates * decay).mean()
        scale += step
        if step <= 1e-12 * scale:
            break
    X = np.empty((n, n_features), dtype=dtype)
    for start in range(0, n, _TEXT_BLOCK_ROWS):
        stop = min(start + _TEXT_BLOCK_ROWS, n)
        rates = _rates(theta[start:stop], background, phi, length[start:stop])
        absent = np.exp(-scale * rates)
        X[start:stop] = rng.random(absent.shape) >= absent
    return X


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
    features: str = "continuous",
    feature_density: float = 0.04,
    sparse_output: bool | str = "auto",
    dtype: Any = np.float64,
    random_state: Any = None,
) -> tuple[np.ndarray, Any]:
    """Generate a structured multi-label problem with many labels.

    Labels follow a topic model whose topic proportions depend nonlinearly
    on ``X`` (a random soft decision tree with some oblique splits on a few
    hidden inputs, which informative features copy with noise), labels are
    correlated through ``n_latent`` latent factors, label frequencies follow
    a Zipf law and the mean number of labels per sample is controlled. See
    the module docstring for the exact model. Tree ensembles fitted on this
    data rank labels far better than the label-popularity baseline and than
    a linear model.

    ``features="text"`` gives text-like inputs instead: binary word presence
    features (bag of words) at about ``feature_density`` ones, whose presence
    probabilities depend on the same latent factors as the labels; the labels
    are the same as with continuous inputs for the same seed.

    Parameters
    ----------
    n_samples : int, default=1000
        Number of samples n.
    n_features : int, default=20
        Number of input features p.
    n_labels : int, default=50
        Number of labels d (up to millions with sparse output).
    n_informative : int, optional
        Number of features that carry information on the labels (8 hidden
        inputs and noisy copies of them; with ``features="text"``, the words
        of the topics); default ``min(p, max(8, p // 4))``.
    n_latent : int, optional
        Number of latent factors (topics). Default: about
        ``n_labels / (1.5 * label_cardinality)``, clipped to ``[2, 50]``.
    label_cardinality : float, default=4.0
        Mean number of labels per sample (up to the rare shortfall when a
        sample's labels cannot be completed, e.g. ``noise=0`` and a nearly
        exhausted topic).
    popularity_skew : float, default=1.0
        Zipf exponent of label popularity; 0 gives uniform popularity.
    noise : float, default=0.1
        Fraction of label draws taken from the global popularity
        distribution, independent of ``X``.
    features : {"continuous", "text"}, default="continuous"
        Kind of inputs: standard normal columns (``"continuous"``) or binary
        0/1 word presence features (``"text"``), as text multi-label data
        sets store them.
    feature_density : float, default=0.04
        With ``features="text"``, the expected fraction of ones in ``X``, in
        (0, 1); real bag-of-words multi-label sets have a few percent.
        Ignored for continuous inputs.
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
        Inputs: each column standard normal, or with ``features="text"``
        0/1 values (a dense array, as text data sets are usually stored).
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
    q = min(p, max(_N_HIDDEN, p // 4)) if n_informative is None else check_int(
        n_informative, "n_informative", low=1, high=p
    )
    K = _default_n_latent(d, c) if n_latent is None else check_int(
        n_latent, "n_latent", low=1, high=d
    )
    skew = check_float(popularity_skew, "popularity_skew", low=0.0)
    noise = check_float(noise, "noise", low=0.0, high=1.0)
    check_choice(features, "features", _FEATURE_KINDS)
    density = check_float(feature_density, "feature_density", low=0.0, high=1.0,
                          low_inclusive=False, high_inclusive=False)
    if not isinstance(sparse_output, bool):
        check_choice(sparse_output, "sparse_output", (True, False, "auto"))
    dtype = np.dtype(dtype)
    if dtype not in (np.dtype(np.float32), np.dtype(np.float64)):
        raise ValueError(f"dtype must be float32 or float64, got {dtype}")
    rng = check_random_state(random_state)

    X = rng.standard_normal((n, p), dtype=dtype)
    informative = rng.choice(p, size=q, replace=False)
    r = min(q, _N_HIDDEN)
    hidden = X[:, informative[:r]].astype(np.float64)
    copy_noise = rng.uniform(_COPY_NOISE[0], _COPY_NOISE[1], size=q - r)
    for j, f in enumerate(informative[r:]):
        s = copy_noise[j]
        X[:, f] = math.sqrt(1.0 - s * s) * hidden[:, j % r] + s * X[:, f]
    theta = _topic_proportions(hidden, K, rng)

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
    if features == "text":
        X = _text_features(theta, p, informative, density, dtype, rng)
    return X, Y


def make_delicious_like(
    random_state: Any = 0,
    n_samples: int = 12920,
    *,
    features: str = "continuous",
    feature_density: float = 0.04,
    **kwargs: Any,
) -> tuple[np.ndarray, Any]:
    """A problem shaped like MULAN's delicious: p = 500, d = 983, ~19 labels per row.

    Calls :func:`make_multilabel` with ``n_features=500``, ``n_labels=983``,
    ``label_cardinality=19.02`` (the delicious training set's cardinality);
    other keyword arguments are passed on. ``Y`` is CSR by default.

    Parameters
    ----------
    random_state : None, int or numpy Generator, default=0
        Seed, as in :func:`make_multilabel`.
    n_samples : int, default=12920
        Number of samples (the size of delicious's training set).
    features : {"continuous", "text"}, default="continuous"
        Kind of inputs, as in :func:`make_multilabel`: standard normal
        columns or binary word presence features.
    feature_density : float, default=0.04
        Expected fraction of ones in ``X`` with ``features="text"``.
    **kwargs
        Other keyword arguments of :func:`make_multilabel`; they may also
        override ``n_features``, ``n_labels`` and ``label_cardinality``.

    Returns
    -------
    X : ndarray of shape (n_samples, 500)
        Inputs (float64 unless ``dtype`` is given): continuous, or binary
        word presence features with ``features="text"``.
    Y : scipy.sparse.csr_matrix or ndarray of shape (n_samples, 983)
        0/1 label matrix, as in :func:`make_multilabel`.
    """
    params = dict(n_features=500, n_labels=983, label_cardinality=19.02)
    params.update(kwargs)
    return make_multilabel(n_samples, random_state=random_state, features=features,
                           feature_density=feature_density, **params)


def make_mediamill_like(
    random_state: Any = 0,
    n_samples: int = 30993,
    *,
    features: str = "continuous",
    feature_density: float = 0.04,
    **kwargs: Any,
) -> tuple[np.ndarray, Any]:
    """A problem shaped like MULAN's mediamill: p = 120, d = 101, ~4.4 labels per row.

    Calls :func:`make_multilabel` with ``n_features=120``, ``n_labels=101``,
    ``label_cardinality=4.376``; other keyword arguments are passed on.
    ``Y`` is CSR by default.

    Parameters
    ----------
    random_state : None, int or numpy Generator, default=0
        Seed, as in :func:`make_multilabel`.
    n_samples : int, default=30993
        Number of samples (the size of mediamill's training set).
    features : {"continuous", "text"}, default="continuous"
        Kind of inputs, as in :func:`make_multilabel`: standard normal
        columns or binary word presence features.
    feature_density : float, default=0.04
        Expected fraction of ones in ``X`` with ``features="text"``.
    **kwargs
        Other keyword arguments of :func:`make_multilabel`; they may also
        override ``n_features``, ``n_labels`` and ``label_cardinality``.

    Returns
    -------
    X : ndarray of shape (n_samples, 120)
        Inputs (float64 unless ``dtype`` is given): continuous, or binary
        word presence features with ``features="text"``.
    Y : scipy.sparse.csr_matrix or ndarray of shape (n_samples, 101)
        0/1 label matrix, as in :func:`make_multilabel`.
    """
    params = dict(n_features=120, n_labels=101, label_cardinality=4.376)
    params.update(kwargs)
    return make_multilabel(n_samples, random_state=random_state, features=features,
                           feature_density=feature_density, **params)

