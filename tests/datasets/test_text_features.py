"""Text-like inputs of the multi-label generators: binary word presence features."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.ensemble import RandomForestRegressor
from sklearn.metrics import label_ranking_average_precision_score

from gpurpo.datasets import make_delicious_like, make_mediamill_like, make_multilabel


def _digest(a):
    a = a.toarray() if sp.issparse(a) else a
    return hashlib.sha256(np.ascontiguousarray(a).tobytes()).hexdigest()


# SHA-256 of X and of the dense Y that the continuous generator gives for these arguments
_CONTINUOUS_DIGESTS = [
    (
        dict(n_samples=300, n_features=12, n_labels=40, random_state=7),
        "294e50473dcfb6fbfe1a4f5a533894d2106dc9aea6ef12c5b42b73e963335cd1",
        "20dc342eaed48c0f91b72585a6d944888d80f081327a272d5b2471b647cc92ac",
    ),
    (
        dict(n_samples=200, n_features=30, n_labels=200, label_cardinality=6.5, dtype=np.float32,
             random_state=3),
        "c392130391c73e5e5ebbfd812993ade04c31d26be40c9b914b8a66bfadc4ec94",
        "f19b44ce458f874f0c7472ee81c12e0026710a955237c4316898cdc94afe1ad7",
    ),
]


@pytest.mark.parametrize("kwargs,x_digest,y_digest", _CONTINUOUS_DIGESTS)
def test_continuous_default_is_unchanged(kwargs, x_digest, y_digest):
    X, Y = make_multilabel(**kwargs)
    assert _digest(X) == x_digest
    assert _digest(Y) == y_digest
    X2, Y2 = make_multilabel(**kwargs, features="continuous", feature_density=0.2)
    np.testing.assert_array_equal(X, X2)
    assert _digest(Y2) == y_digest


def test_text_features_are_dense_binary_and_keep_the_labels():
    X, Y = make_multilabel(500, 60, 40, features="text", random_state=4)
    assert isinstance(X, np.ndarray) and X.shape == (500, 60) and X.dtype == np.float64
    assert set(np.unique(X)) <= {0.0, 1.0}
    # the labels are those of the continuous inputs with the same seed
    _, Yc = make_multilabel(500, 60, 40, random_state=4)
    np.testing.assert_array_equal(np.asarray(Y), np.asarray(Yc))
    X32, _ = make_multilabel(500, 60, 40, features="text", dtype=np.float32, random_state=4)
    assert X32.dtype == np.float32 and set(np.unique(X32)) <= {0.0, 1.0}
    again, _ = make_multilabel(500, 60, 40, features="text", random_state=4)
    np.testing.assert_array_equal(again, X)


@pytest.mark.parametrize("density", [0.01, 0.04, 0.15])
def test_density_follows_the_parameter(density):
    X, _ = make_multilabel(3000, 100, 50, features="text", feature_density=density, random_state=0)
    assert abs(X.mean() - density) < 0.05 * density + 0.001
    # word frequencies are skewed, as in real vocabularies, and documents differ in length
    freq = X.mean(axis=0)
    assert freq.max() > 3 * np.median(freq)
    assert X.sum(axis=1).std() > 0


def test_benchmark_shapes_with_text_features():
    # more rows than the density calibration uses
    X, Y = make_delicious_like(n_samples=6000, features="text")
    assert X.shape == (6000, 500) and sp.issparse(Y)
    assert abs(X.mean() - 0.04) < 0.003
    assert abs(Y.nnz / 6000 - 19.02) < 0.5
    X, Y = make_mediamill_like(n_samples=2000, features="text", feature_density=0.1)
    assert X.shape == (2000, 120) and Y.shape == (2000, 101)
    assert abs(X.mean() - 0.1) < 0.006


def test_labels_are_learnable_from_text_features():
    X, Y = make_mediamill_like(n_samples=2000, features="text", sparse_output=False, random_state=1)
    Xtr, Ytr, Xte, Yte = X[:1500], Y[:1500], X[1500:], Y[1500:]
    baseline = label_ranking_average_precision_score(Yte, np.tile(Ytr.mean(axis=0), (500, 1)))
    forest = RandomForestRegressor(
        30, max_features="sqrt", min_samples_leaf=3, random_state=0, n_jobs=1
    ).fit(Xtr, Ytr)
    lrap_forest = label_ranking_average_precision_score(Yte, forest.predict(Xte))
    assert lrap_forest > baseline + 0.05


def test_only_informative_words_carry_the_topics():
    X, Y = make_multilabel(6000, 40, 30, n_informative=10, features="text", feature_density=0.1,
                           sparse_output=False, random_state=2)
    # correlation of each word with its best-correlated label: the 10 topic words stand out,
    # the 30 background words are at the level of sampling noise
    C = np.corrcoef(X.T, Y.T)[:40, 40:]
    best = np.sort(np.nanmax(np.abs(C), axis=1))
    assert best[-10:].min() > best[:30].max()
    assert best[:30].max() < 0.07


@pytest.mark.parametrize(
    "kwargs,error,match",
    [
        (dict(features="words"), ValueError, "features must be one of"),
        (dict(features=None), ValueError, "features must be one of"),
        (dict(features="text", feature_density=0), ValueError, "feature_density must be > 0"),
        (dict(features="text", feature_density=1.0), ValueError, "feature_density must be < 1"),
        (dict(features="text", feature_density=-0.5), ValueError, "feature_density must be > 0"),
        (dict(features="text", feature_density=float("nan")), ValueError, "feature_density must be finite"),
        (dict(features="text", feature_density="4%"), TypeError, "feature_density must be a real"),
    ],
)
def test_bad_feature_options_are_rejected(kwargs, error, match):
    with pytest.raises(error, match=match):
        make_multilabel(20, 10, 50, **kwargs)


@pytest.mark.parametrize("maker", [make_delicious_like, make_mediamill_like])
def test_benchmark_shapes_reject_bad_feature_options(maker):
    with pytest.raises(ValueError, match="features must be one of"):
        maker(n_samples=10, features="bag-of-words")
    with pytest.raises(ValueError, match="feature_density must be < 1"):
        maker(n_samples=10, features="text", feature_density=2.0)
