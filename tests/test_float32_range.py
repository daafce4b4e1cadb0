"""Inputs and outputs beyond float32's range are refused by the tree models.

The trees bin X and store y (and its projections, and boosting's gradients)
in float32: a larger value became infinite there, silently (a feature collapsed
into one bin, outputs that nothing could split: a one-leaf tree, NaN boosting
predictions). scikit-learn's trees refuse such X too.
"""

import numpy as np
import pytest
import scipy.sparse as sp

from gpurpo.ensemble import (
    ExtraTreesClassifier,
    GradientBoostingClassifier,
    GradientBoostingRegressor,
    RandomForestRegressor,
)
from gpurpo.tree import DecisionTreeClassifier, DecisionTreeRegressor

REGRESSORS = [
    lambda: DecisionTreeRegressor(random_state=0),
    lambda: RandomForestRegressor(n_estimators=2, random_state=0),
    lambda: GradientBoostingRegressor(n_estimators=2, random_state=0),
]
CLASSIFIERS = [
    lambda: DecisionTreeClassifier(random_state=0),
    lambda: ExtraTreesClassifier(n_estimators=2, random_state=0),
    lambda: GradientBoostingClassifier(n_estimators=2, random_state=0),
]
FLOAT32_MAX = float(np.finfo(np.float32).max)


def _data(seed=0):
    rng = np.random.default_rng(seed)
    X = rng.random((40, 4))
    Y = rng.random((40, 3))
    return X, Y


@pytest.mark.parametrize("make", REGRESSORS + CLASSIFIERS)
@pytest.mark.parametrize("sparse", [False, True])
@pytest.mark.parametrize("big", [1e39, -1e100])
def test_features_beyond_float32_are_refused_at_fit_and_predict(make, sparse, big):
    X, Y = _data()
    Y = (Y > 0.5).astype(float)
    Xb = X.copy()
    Xb[3, 1] = big
    if sparse:
        Xb = sp.csr_matrix(Xb)
    with pytest.raises(ValueError, match=r"X contains a value of magnitude .* beyond float32"):
        make().fit(Xb, Y)
    model = make().fit(X, Y)
    with pytest.raises(ValueError, match=r"X contains a value of magnitude .* beyond float32"):
        model.predict(Xb)


@pytest.mark.parametrize("make", REGRESSORS)
def test_outputs_beyond_float32_are_refused(make):
    X, Y = _data(1)
    Y[5, 2] = -2 * FLOAT32_MAX
    with pytest.raises(ValueError, match=r"y contains a value of magnitude .* beyond float32"):
        make().fit(X, Y)


@pytest.mark.parametrize("make", REGRESSORS + CLASSIFIERS)
def test_values_at_float32_limits_and_nan_still_fit(make):
    # the largest float32 value itself is fine, and NaN stays a missing value
    X, Y = _data(2)
    Y = (Y > 0.5).astype(float)
    X[0, 0] = FLOAT32_MAX
    X[1, 1] = -FLOAT32_MAX
    X[2, 2] = np.nan
    model = make().fit(X, Y)
    assert np.isfinite(model.predict(X)).all()


def test_infinity_keeps_its_own_message():
    X, Y = _data(3)
    X[0, 0] = np.inf
    with pytest.raises(ValueError, match="X contains infinity; only NaN"):
        DecisionTreeRegressor().fit(X, Y)
    X[0, 0] = np.nan
    X[1, 0] = -np.inf
    with pytest.raises(ValueError, match="X contains infinity; only NaN"):
        RandomForestRegressor(n_estimators=2).fit(X, Y)


def test_projections_that_overflow_float32_are_refused():
    # every output within float32, but a Gaussian projection of 300 of them is not
    X, _ = _data(4)
    signs = np.where(np.arange(40) % 2 == 0, 1.0, -1.0)
    Y = np.full((40, 300), 3e38) * signs[:, None]
    forest = RandomForestRegressor(
        n_estimators=2, projection="gaussian", n_components=2, random_state=0)
    with pytest.warns(RuntimeWarning, match="overflow"):
        with pytest.raises(ValueError, match="overflow float32's range; rescale y"):
            forest.fit(X, Y)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("column_has_nan", [False, True])
@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_a_tree_fit_finds_every_out_of_range_value_while_binning(dtype, column_has_nan, sign):
    # A tree fit on a C-ordered float X checks X's values in its binning pass, from
    # the float32 extremes of each sorted feature (BinMapper.fit_transform with
    # check_range_of): a float64 value just beyond float32's largest rounds to that
    # largest, and a column's NaN sort after its largest value.
    X, Y = _data(5)
    X = X.astype(dtype)
    column = np.arange(40) % 3 == 0
    if column_has_nan:
        X[column, 2] = np.nan
    if dtype == np.float64:
        X[7, 2] = sign * FLOAT32_MAX * (1 + 1e-12)
        message = r"X contains a value of magnitude 3.403e\+38, beyond float32"
    else:
        X[7, 2] = sign * np.inf
        message = "X contains infinity; only NaN"
    assert X.flags.c_contiguous
    with pytest.raises(ValueError, match=message):
        DecisionTreeRegressor(random_state=0).fit(X, Y)
    X[7, 2] = sign * FLOAT32_MAX  # the largest float32 value itself fits
    tree = DecisionTreeRegressor(random_state=0).fit(X, Y)
    assert np.isfinite(tree.predict(X)).all()
