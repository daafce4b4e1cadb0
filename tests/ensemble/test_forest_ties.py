"""Forests on tie-heavy data match scikit-learn's: equal-gain splits are broken at random.

Many real multi-target sets have features that split the training rows in the
same way (counts of correlated, heavy-tailed quantities, duplicated columns,
few-valued integers). Among splits of equal gain scikit-learn picks the first
feature of a fresh random order at every node, so the trees of a forest differ
there; a systematic choice makes them agree where they should not, and the
forest's error grows (most with ``max_features=1.0`` and without bootstrap).
These tests hold gpurpo's forests to scikit-learn's mean error within 1 %
(relative), averaged over seeds and folds, on three such generators. The ratio of
the two errors varies from seed to seed by several percent where the features tie
most, so those cases average enough seeds for the mean to be within a fraction of
the 1 % tolerance.
"""

import numpy as np
import pytest
from sklearn.ensemble import ExtraTreesRegressor as SkExtraTreesRegressor
from sklearn.ensemble import RandomForestClassifier as SkRandomForestClassifier
from sklearn.ensemble import RandomForestRegressor as SkRandomForestRegressor
from sklearn.model_selection import KFold

from gpurpo.datasets import make_correlated_counts, make_duplicated_features, make_few_valued_features
from gpurpo.ensemble import (
    ExtraTreesRegressor,
    RandomForestClassifier,
    RandomForestRegressor,
)

N_TREES = 30


def correlated_counts(seed):
    """The reproducer's correlated counts at a smaller size."""
    return make_correlated_counts(240, 120, 8, 5, random_state=seed)


def duplicated_features(seed):
    return make_duplicated_features(random_state=seed)


def few_valued_integers(seed):
    return make_few_valued_features(random_state=seed)


GENERATORS = [correlated_counts, duplicated_features, few_valued_integers]


def _rrmse(Y_test, predicted, Y_train):
    """aRRMSE: mean over targets of sqrt(SSE / SSE of the training mean)."""
    sse = ((Y_test - predicted) ** 2).sum(axis=0)
    base = ((Y_test - Y_train.mean(axis=0)) ** 2).sum(axis=0)
    return float(np.mean(np.sqrt(sse / base)))


def _brier(Y_test, proba):
    """Mean squared error of the label probabilities."""
    return float(np.mean((Y_test - proba) ** 2))


def _sk_proba(model, X):
    """scikit-learn's multi-label predict_proba (a list of (n, 2)) as an (n, d) matrix."""
    return np.column_stack([p[:, 1] if p.shape[1] == 2 else np.zeros(len(X)) for p in model.predict_proba(X)])


def _mean_errors(generator, task, ours, theirs, params, seeds=range(6), folds=3):
    errors = {"gpurpo": [], "sklearn": []}
    for seed in seeds:
        X, Y = generator(seed)
        if task == "classifier":
            Y = (Y > np.median(Y, axis=0)).astype(np.float64)
        for fold, (train, test) in enumerate(KFold(folds, shuffle=True, random_state=seed).split(X)):
            for name, cls in (("gpurpo", ours), ("sklearn", theirs)):
                model = cls(n_estimators=N_TREES, random_state=100 * seed + fold, **params)
                model.fit(X[train], Y[train])
                if task == "classifier":
                    proba = model.predict_proba(X[test])
                    error = _brier(Y[test], proba if name == "gpurpo" else _sk_proba(model, X[test]))
                else:
                    error = _rrmse(Y[test], model.predict(X[test]), Y[train])
                errors[name].append(error)
    return float(np.mean(errors["gpurpo"])), float(np.mean(errors["sklearn"]))


CASES = [
    ("regressor", RandomForestRegressor, SkRandomForestRegressor, {"max_features": 1.0}),
    ("regressor", RandomForestRegressor, SkRandomForestRegressor, {"max_features": 1.0, "bootstrap": False}),
    ("regressor", ExtraTreesRegressor, SkExtraTreesRegressor, {"max_features": 1.0}),
    ("classifier", RandomForestClassifier, SkRandomForestClassifier, {"max_features": 1.0}),
    ("classifier", RandomForestClassifier, SkRandomForestClassifier, {"max_features": "sqrt"}),
]

#: per-seed ratios of the two errors spread by 1 % to 4 % (standard deviation over 36
#: seeds of 3 folds): these cases average 36 seeds, the others 6
WIDE_SPREAD = {
    ("RandomForestRegressor", "max_features=1.0", "correlated_counts"),
    ("ExtraTreesRegressor", "max_features=1.0", "correlated_counts"),
    ("ExtraTreesRegressor", "max_features=1.0", "duplicated_features"),
}


def _case_id(case):
    return f"{case[1].__name__}-{'-'.join(f'{k}={v}' for k, v in case[3].items())}"


def _params():
    out = []
    for case in CASES:
        for generator in GENERATORS:
            key = (case[1].__name__, "-".join(f"{k}={v}" for k, v in case[3].items()), generator.__name__)
            seeds = range(36) if key in WIDE_SPREAD else range(6)
            out.append(pytest.param(generator, *case, seeds, id=f"{_case_id(case)}-{generator.__name__}"))
    return out


@pytest.mark.parametrize("generator, task, ours, theirs, params, seeds", _params())
def test_forest_error_within_one_percent_of_scikit_learn_on_tie_heavy_data(
        generator, task, ours, theirs, params, seeds):
    ours_error, theirs_error = _mean_errors(generator, task, ours, theirs, params, seeds)
    assert ours_error <= 1.01 * theirs_error, (ours_error, theirs_error)
