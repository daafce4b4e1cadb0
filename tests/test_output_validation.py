"""Outputs with no column are refused with a message naming y, as scikit-learn does."""

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

ESTIMATORS = [
    lambda: DecisionTreeRegressor(random_state=0),
    lambda: DecisionTreeClassifier(random_state=0),
    lambda: RandomForestRegressor(n_estimators=2, random_state=0),
    lambda: ExtraTreesClassifier(n_estimators=2, random_state=0),
    lambda: GradientBoostingRegressor(n_estimators=2, random_state=0),
    lambda: GradientBoostingClassifier(n_estimators=2, random_state=0),
]


@pytest.mark.parametrize("make", ESTIMATORS)
@pytest.mark.parametrize("sparse", [False, True])
def test_outputs_without_columns_are_refused(make, sparse):
    X = np.random.default_rng(0).normal(size=(30, 3))
    Y = np.zeros((30, 0))
    if sparse:
        Y = sp.csr_matrix(Y)
    with pytest.raises(ValueError, match=r"y must have at least one output column, got shape \(30, 0\)"):
        make().fit(X, Y)
