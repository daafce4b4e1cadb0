"""Random-output forests under scikit-learn's conventions and tools.

scikit-learn's own ``check_estimator`` suite on NumPy input, for the forests
on the original outputs and on random output projections (Gaussian,
Rademacher, row subsampling), the ``predict_proba`` format that the waived
multi-label check also asserts, plus clone, GridSearchCV, Pipeline and
cross_val_score on the multi-label forests.
"""

from __future__ import annotations

import numpy as np
import pytest
from _multilabel_check import multilabel_check_data
from sklearn.base import clone
from sklearn.metrics import r2_score
from sklearn.model_selection import GridSearchCV, KFold, cross_val_score
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.utils import estimator_checks
from sklearn.utils.estimator_checks import parametrize_with_checks

from gpurpo.datasets import make_multilabel
from gpurpo.ensemble import (
    ExtraTreesClassifier,
    ExtraTreesRegressor,
    RandomForestClassifier,
    RandomForestRegressor,
)

_BOOTSTRAP_WEIGHTS = (
    "the bootstrap draws rows in proportion to their weights, so a zero weight removes "
    "a row and an integer weight repeats it only in distribution, not draw for draw "
    "(scikit-learn's own forests are exempted from this check for the same reason)"
)
_MULTILABEL_PROBA = (
    "predict_proba of multi-label Y is an (n, d) matrix of label frequencies, as the "
    "project specifies; fully grown trees give exact 0 and 1, which this check's strict "
    "bounds 0 < p < 1 reject (scikit-learn's forests return a list of (n, 2) arrays)"
)


def _expected_failed(est):
    failed = {}
    if est.bootstrap:
        failed["check_sample_weight_equivalence_on_dense_data"] = _BOOTSTRAP_WEIGHTS
        failed["check_sample_weight_equivalence_on_sparse_data"] = _BOOTSTRAP_WEIGHTS
    if isinstance(est, (RandomForestClassifier, ExtraTreesClassifier)):
        failed["check_classifiers_multilabel_output_format_predict_proba"] = _MULTILABEL_PROBA
    return failed


@parametrize_with_checks(
    [
        RandomForestRegressor(n_estimators=3, random_state=0),
        RandomForestClassifier(n_estimators=3, random_state=0),
        ExtraTreesRegressor(n_estimators=3, random_state=0),
        ExtraTreesClassifier(n_estimators=3, random_state=0),
        RandomForestRegressor(n_estimators=3, projection="gaussian", random_state=0),
        RandomForestClassifier(n_estimators=3, projection="gaussian", random_state=0),
        ExtraTreesRegressor(n_estimators=3, projection="gaussian", random_state=0),
        ExtraTreesClassifier(n_estimators=3, projection="gaussian", random_state=0),
        RandomForestClassifier(n_estimators=3, projection="rademacher", random_state=0),
        ExtraTreesRegressor(n_estimators=3, projection="subsample", random_state=0),
    ],
    expected_failed_checks=_expected_failed,
)
def test_sklearn_compatible_estimator(estimator, check):
    check(estimator)


#: The assertion each waived check fails with, for the reason its waiver gives.
_WAIVED_FAILURE = {
    "check_sample_weight_equivalence_on_dense_data":
        "fitting with `sample_weight` is not equivalent to fitting with removed or repeated",
    "check_sample_weight_equivalence_on_sparse_data":
        "fitting with `sample_weight` is not equivalent to fitting with removed or repeated",
    "check_classifiers_multilabel_output_format_predict_proba":
        "should therefore contain values between 0 and 1",
}


@pytest.mark.parametrize("estimator", [
    RandomForestRegressor(n_estimators=3, random_state=0),
    RandomForestClassifier(n_estimators=3, projection="gaussian", random_state=0),
    ExtraTreesClassifier(n_estimators=3, random_state=0),
], ids=repr)
def test_waived_checks_fail_only_for_the_stated_reason(estimator):
    waived = _expected_failed(estimator)
    assert waived
    for name in waived:
        check = getattr(estimator_checks, name)
        with pytest.raises(AssertionError, match=_WAIVED_FAILURE[name]):
            check(type(estimator).__name__, clone(estimator))


def test_without_bootstrap_the_sample_weight_checks_pass():
    """The sample-weight waivers are due to the bootstrap alone."""
    forest = RandomForestRegressor(n_estimators=3, bootstrap=False, random_state=0)
    assert _expected_failed(forest) == {}
    estimator_checks.check_sample_weight_equivalence_on_dense_data("RandomForestRegressor", forest)
    estimator_checks.check_sample_weight_equivalence_on_sparse_data("RandomForestRegressor", forest)


@pytest.mark.parametrize("forest", [RandomForestClassifier, ExtraTreesClassifier])
@pytest.mark.parametrize("projection", [None, "gaussian"])
def test_multilabel_predict_proba_is_an_n_by_d_float_matrix(forest, projection):
    """What check_classifiers_multilabel_output_format_predict_proba asserts, but the open bounds.

    That check is waived above only because exact 0 and 1 occur; its data and its shape and dtype
    assertions are repeated here so that a failure of those cannot hide behind the waiver.
    """
    X_train, Y_train, X_test = multilabel_check_data()
    model = forest(n_estimators=3, projection=projection, random_state=0).fit(X_train, Y_train)
    proba = model.predict_proba(X_test)
    assert isinstance(proba, np.ndarray)
    assert proba.shape == (25, 5)
    assert proba.dtype.kind == "f"
    assert np.all((proba >= 0) & (proba <= 1))
    # The probabilities are label frequencies: predict thresholds them at one half.
    np.testing.assert_array_equal(model.predict(X_test), (proba > 0.5).astype(Y_train.dtype))


def _data():
    return make_multilabel(240, 8, 15, label_cardinality=3.0, sparse_output=False, random_state=0)


def test_clone_keeps_parameters_untouched():
    forest = RandomForestClassifier(
        n_estimators=4, projection="sparse", n_components=0.5, shared_projection=True,
        batch_size=2, random_state=3,
    )
    twin = clone(forest)
    assert twin.get_params() == forest.get_params()
    X, Y = _data()
    forest.fit(X, Y)
    assert clone(forest).get_params() == twin.get_params()
    assert not hasattr(clone(forest), "n_outputs_")


def test_grid_search_and_pipeline_on_multilabel_outputs():
    X, Y = _data()
    pipe = make_pipeline(
        StandardScaler(),
        RandomForestClassifier(n_estimators=4, projection="gaussian", random_state=0),
    )
    grid = GridSearchCV(
        pipe,
        {"randomforestclassifier__n_components": [1, 3],
         "randomforestclassifier__shared_projection": [False, True]},
        cv=KFold(2),
    )
    grid.fit(X, Y)
    assert set(grid.best_params_) == {
        "randomforestclassifier__n_components", "randomforestclassifier__shared_projection"
    }
    assert grid.predict(X).shape == Y.shape
    assert grid.predict_proba(X).shape == Y.shape
    # The refitted best pipeline is the pipeline fitted directly with the best parameters.
    best = clone(pipe).set_params(**grid.best_params_).fit(X, Y)
    np.testing.assert_array_equal(grid.predict_proba(X), best.predict_proba(X))
    np.testing.assert_array_equal(grid.predict(X), best.predict(X))
    forest = ExtraTreesRegressor(n_estimators=4, projection="gaussian", random_state=0)
    scores = cross_val_score(forest, X, Y, cv=KFold(2), scoring="r2")
    expected = [
        r2_score(Y[test], clone(forest).fit(X[train], Y[train]).predict(X[test]))
        for train, test in KFold(2).split(X)
    ]
    assert scores.shape == (2,)
    np.testing.assert_allclose(scores, expected, rtol=1e-12)
