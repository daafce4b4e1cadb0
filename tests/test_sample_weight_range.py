"""Sample weights outside float32's range (the precision the tree kernels store) are refused."""

import numpy as np
import pytest

from gpurpo.ensemble import GradientBoostingRegressor, RandomForestRegressor
from gpurpo.tree import DecisionTreeRegressor

ESTIMATORS = [
    lambda: DecisionTreeRegressor(random_state=0),
    lambda: RandomForestRegressor(n_estimators=2, random_state=0),
    lambda: GradientBoostingRegressor(n_estimators=2, random_state=0),
]


def _data():
    rng = np.random.default_rng(0)
    return rng.normal(size=(60, 4)), rng.normal(size=(60, 2))


@pytest.mark.parametrize("make", ESTIMATORS)
@pytest.mark.parametrize(
    "weights, match",
    [
        (np.full(60, 1e-50), "at least 1.175e-38"),  # every weight rounds to 0 in float32
        (np.r_[np.zeros(59), 1e-39], "at least 1.175e-38"),  # the only positive one is subnormal
        (np.r_[np.ones(59), 1e39], "at most 3.403e\\+38"),  # infinite in float32
    ],
)
def test_weights_beyond_float32_are_refused_naming_sample_weight(make, weights, match):
    X, Y = _data()
    with pytest.raises(ValueError, match=f"sample_weight must .*{match}"):
        make().fit(X, Y, sample_weight=weights)


@pytest.mark.parametrize("make", ESTIMATORS)
def test_small_but_normal_float32_weights_fit_like_unit_weights(make):
    # weights of 1e-30 are normal float32 numbers: the same model as unit weights
    # (variance reduction scales with the weights, so the splits are the same)
    X, Y = _data()
    unit = make().fit(X, Y, sample_weight=np.ones(60)).predict(X)
    tiny = make().fit(X, Y, sample_weight=np.full(60, 1e-30)).predict(X)
    np.testing.assert_allclose(tiny, unit, rtol=1e-6, atol=1e-9)
