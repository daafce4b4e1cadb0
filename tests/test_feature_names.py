"""Feature names of data-frame inputs (scikit-learn's ``feature_names_in_`` convention).

The reference is scikit-learn's own ``check_dataframe_column_names_consistency``
(run on every public estimator), plus the behaviour a user relies on: a frame
whose columns are reordered or renamed is refused instead of being predicted
silently wrong.
"""

from __future__ import annotations

import pickle
import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.base import clone
from sklearn.utils.estimator_checks import check_dataframe_column_names_consistency

from gpurpo._input_features import input_feature_names
from gpurpo.ensemble import (
    ExtraTreesClassifier,
    ExtraTreesRegressor,
    GradientBoostingClassifier,
    GradientBoostingRegressor,
    RandomForestClassifier,
    RandomForestRegressor,
)
from gpurpo.label_space import LabelSpaceClassifier, LabelSpaceRegressor, RembrandtClassifier
from gpurpo.label_space._feature_maps import RandomFourierFeatures
from gpurpo.label_space._ridge_estimator import RidgeRegression
from gpurpo.tree import DecisionTreeClassifier, DecisionTreeRegressor

pd = pytest.importorskip("pandas")

ESTIMATORS = [
    RandomForestRegressor(n_estimators=3, random_state=0),
    RandomForestClassifier(n_estimators=3, random_state=0),
    ExtraTreesRegressor(n_estimators=3, projection="gaussian", random_state=0),
    ExtraTreesClassifier(n_estimators=3, random_state=0),
    GradientBoostingRegressor(n_estimators=3, random_state=0),
    GradientBoostingClassifier(n_estimators=3, random_state=0),
    DecisionTreeRegressor(random_state=0),
    DecisionTreeClassifier(random_state=0),
    LabelSpaceRegressor(n_components=2, random_state=0),
    LabelSpaceClassifier(n_components=2, reducer="cssp", random_state=0),
    RembrandtClassifier(n_components=2, random_state=0),
    RidgeRegression(),
    RandomFourierFeatures(n_components=8, random_state=0),
]

# estimators whose predictions are compared on frames and arrays below
PREDICTORS = [e for e in ESTIMATORS if hasattr(e, "predict")]


def _ids(est):
    return type(est).__name__


@pytest.mark.parametrize("estimator", ESTIMATORS, ids=_ids)
def test_sklearn_column_names_check(estimator):
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        check_dataframe_column_names_consistency(type(estimator).__name__, estimator)


def _data(seed=0, n=120, p=5, d=4):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, p))
    Y = (X[:, :d] + 0.3 * rng.normal(size=(n, d)) > 0).astype(np.float64)
    frame = pd.DataFrame(X, columns=[f"x{j}" for j in range(p)])
    return X, Y, frame


@pytest.mark.parametrize("estimator", PREDICTORS, ids=_ids)
def test_frame_predictions_equal_array_predictions(estimator):
    X, Y, frame = _data()
    from_frame = clone(estimator).fit(frame, Y)
    from_array = clone(estimator).fit(X, Y)
    assert list(from_frame.feature_names_in_) == list(frame.columns)
    assert not hasattr(from_array, "feature_names_in_")
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        predicted = from_frame.predict(frame)
    # a frame converts to a Fortran-ordered array: BLAS products may differ in the last bit
    np.testing.assert_allclose(predicted, from_array.predict(X), rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("estimator", PREDICTORS, ids=_ids)
def test_reordered_or_renamed_columns_are_refused(estimator):
    X, Y, frame = _data()
    est = clone(estimator).fit(frame, Y)
    with pytest.raises(ValueError, match="same order as they were in fit"):
        est.predict(frame[frame.columns[::-1]])
    renamed = frame.rename(columns={"x1": "y1"})
    with pytest.raises(ValueError, match="(?s)unseen at fit time:\n- y1\n.*yet now missing:\n- x1\n"):
        est.predict(renamed)


def test_names_on_one_side_only_warn():
    X, Y, frame = _data()
    est = RandomForestRegressor(n_estimators=2, random_state=0).fit(frame, Y)
    with pytest.warns(UserWarning, match="X does not have valid feature names, but "
                                         "RandomForestRegressor was fitted with feature names"):
        est.predict(X)
    est = RandomForestRegressor(n_estimators=2, random_state=0).fit(X, Y)
    with pytest.warns(UserWarning, match="X has feature names, but RandomForestRegressor "
                                         "was fitted without feature names"):
        est.predict(frame)


def test_refit_without_names_forgets_them():
    X, Y, frame = _data()
    est = DecisionTreeRegressor(random_state=0).fit(frame, Y)
    assert hasattr(est, "feature_names_in_")
    est.fit(X, Y)
    assert not hasattr(est, "feature_names_in_")
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        est.predict(X)


def test_names_survive_pickling():
    X, Y, frame = _data()
    est = pickle.loads(pickle.dumps(ExtraTreesRegressor(n_estimators=2).fit(frame, Y)))
    with pytest.raises(ValueError, match="Feature names must be in the same order as they were in fit"):
        est.predict(frame[frame.columns[::-1]])


def test_boosting_checks_eval_set_and_warm_start_names():
    X, Y, frame = _data()
    swapped = frame[["x1", "x0", "x2", "x3", "x4"]]
    gb = GradientBoostingRegressor(n_estimators=2, random_state=0)
    with pytest.raises(ValueError, match="Feature names must be in the same order as they were in fit"):
        gb.fit(frame, Y, eval_set=(swapped, Y))
    gb = GradientBoostingRegressor(n_estimators=2, warm_start=True, random_state=0).fit(frame, Y)
    gb.set_params(n_estimators=3)
    with pytest.raises(ValueError, match="Feature names must be in the same order as they were in fit"):
        gb.fit(swapped, Y)
    gb.fit(frame, Y)
    assert gb.n_estimators_ == 3


def test_which_column_names_count():
    X, _, frame = _data()
    assert input_feature_names(X) is None
    assert input_feature_names(sp.csr_matrix(X)) is None
    assert input_feature_names(pd.DataFrame(X)) is None  # integer column names are ignored
    names = input_feature_names(frame)
    assert names.dtype == object and list(names) == list(frame.columns)
    mixed = pd.DataFrame(X, columns=["a", 1, "c", "d", "e"])
    with pytest.raises(TypeError, match="all input features have string names"):
        input_feature_names(mixed)
    mixed_types = r"all input features have string names, but your input has \['int', 'str'\]"
    with pytest.raises(TypeError, match=mixed_types):
        RandomForestRegressor(n_estimators=2).fit(mixed, X[:, :2])


def test_many_names_are_elided():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(40, 8))
    est = DecisionTreeRegressor(random_state=0).fit(pd.DataFrame(X, columns=list("abcdefgh")), X[:, 0])
    other = pd.DataFrame(X, columns=list("stuvwxyz"))
    with pytest.raises(ValueError) as err:
        est.predict(other)
    message = str(err.value)
    assert "- s\n- t\n- u\n- v\n- w\n- ...\n" in message
    assert "- a\n- b\n- c\n- d\n- e\n- ...\n" in message
