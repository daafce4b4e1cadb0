"""Accuracy of the random-output forests against the paper's claims and scikit-learn.

* Joly et al. (2014), Theorem 1: a Gaussian projection with m = d preserves the
  variance reductions well, so the forest is as accurate as on the original
  outputs (within the noise of the randomisation);
* section 3.3 / figure 3: a fresh projection per tree (Algorithm 2) is at
  least as accurate as one shared projection (Algorithm 1) on average;
* without projection the forests are Breiman's / Geurts' forests: their test
  LRAP matches scikit-learn's RandomForestRegressor / ExtraTreesRegressor on
  the same data.

Each comparison is on the mean test LRAP over 16 seeds, whose standard error
is about 0.0035 here (the LRAP of one forest varies by about 0.01 between
seeds); the means agree within 0.01, about three standard errors.
"""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.ensemble import ExtraTreesRegressor as SkExtraTrees
from sklearn.ensemble import RandomForestRegressor as SkForest

from gpurpo.datasets import make_multilabel
from gpurpo.ensemble import ExtraTreesRegressor, RandomForestRegressor
from gpurpo.metrics import label_ranking_average_precision

SEEDS = tuple(range(16))
#: Largest gap allowed between two mean LRAPs over SEEDS.
TOLERANCE = 0.01


@pytest.fixture(scope="module")
def data():
    X, Y = make_multilabel(
        900, 8, 24, label_cardinality=2.0, noise=0.0, popularity_skew=0.0,
        sparse_output=False, random_state=5,
    )
    return X[:600], Y[:600], X[600:], Y[600:]


def _close_means(a, b):
    """The mean LRAPs over the seeds differ by less than TOLERANCE."""
    return abs(np.mean(a) - np.mean(b)) < TOLERANCE


def _lrap(forest, data):
    X, Y, Xt, Yt = data
    return label_ranking_average_precision(Yt, forest.fit(X, Y).predict(Xt))


def test_gaussian_projection_with_m_equal_d_is_as_accurate_as_no_projection(data):
    d = data[1].shape[1]
    kwargs = dict(n_estimators=15, max_features="sqrt", min_samples_leaf=3)
    full = [_lrap(RandomForestRegressor(random_state=s, **kwargs), data) for s in SEEDS]
    gauss = [_lrap(RandomForestRegressor(projection="gaussian", n_components=d, random_state=s,
                                         **kwargs), data) for s in SEEDS]
    baseline = label_ranking_average_precision(
        data[3], np.tile(data[1].mean(0), (data[3].shape[0], 1))
    )
    assert np.mean(full) > baseline + 0.1  # the forest learns something
    assert _close_means(gauss, full)


def test_per_tree_projections_at_least_as_accurate_as_a_shared_one(data):
    kwargs = dict(n_estimators=15, max_features="sqrt", min_samples_leaf=3,
                  projection="gaussian", n_components=1)
    per_tree = [_lrap(RandomForestRegressor(random_state=s, **kwargs), data) for s in SEEDS]
    shared = [_lrap(RandomForestRegressor(random_state=s, shared_projection=True, **kwargs), data)
              for s in SEEDS]
    assert np.mean(per_tree) >= np.mean(shared) - 0.005


@pytest.mark.parametrize(
    "ours, theirs",
    [(RandomForestRegressor, SkForest), (ExtraTreesRegressor, SkExtraTrees)],
)
def test_accuracy_close_to_scikit_learn_forests(data, ours, theirs):
    X, Y, Xt, Yt = data
    kwargs = dict(n_estimators=20, max_features="sqrt", min_samples_leaf=3)
    a = [_lrap(ours(random_state=s, **kwargs), data) for s in SEEDS]
    b = [
        label_ranking_average_precision(Yt, theirs(random_state=s, **kwargs).fit(X, Y).predict(Xt))
        for s in SEEDS
    ]
    assert _close_means(a, b)
