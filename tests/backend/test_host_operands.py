"""NumPy arrays among a device operation's operands, refused as CuPy refuses them.

CuPy raises ``TypeError`` when a NumPy array meets a CuPy array in a function or
an operator; the emulated device counts it as a copy instead, so code that mixes
them passes on the CPU and fails on a GPU. Inside
:func:`gpurpo.backend.refuse_host_operands` the emulated device refuses them too,
and the estimators' dense CUDA paths run there without a NumPy operand.
"""

from __future__ import annotations

import numpy as np
import pytest

from gpurpo.backend import EMULATED, count_device_activity, refuse_host_operands
from gpurpo.ensemble import (
    ExtraTreesRegressor,
    GradientBoostingClassifier,
    GradientBoostingRegressor,
    RandomForestClassifier,
    RandomForestRegressor,
)
from gpurpo.label_space import LabelSpaceClassifier, LabelSpaceRegressor
from gpurpo.tree import DecisionTreeRegressor


def test_host_operands_are_refused_inside_the_block_only():
    host = np.arange(6.0)
    with count_device_activity() as activity:
        xp = EMULATED.xp
        x = xp.asarray(host.copy())  # an upload: allowed
        with refuse_host_operands():
            with pytest.raises(TypeError, match=r"subtract: NumPy array\(s\) of shape \[\(6,\)\]"):
                x - host
            with pytest.raises(TypeError, match="concatenate"):
                xp.concatenate([x, host])
            y = x * np.float64(2.0) + np.asarray(1.0)  # scalars and 0-d arrays pass
            picked = x[np.array([1, 3])]  # indexing with a host array: CuPy copies it
            x[np.array([0])] = np.array([5.0])
            again = xp.asarray(host)
        z = x - host  # outside the block: counted as a copy to the device
    assert activity.h2d >= 3
    np.testing.assert_array_equal(y, 2 * host + 1)
    np.testing.assert_array_equal(picked, host[[1, 3]])
    np.testing.assert_array_equal(again, host)
    np.testing.assert_array_equal(z, np.where(np.arange(6) == 0, 5.0, host) - host)


def _data(n=240, p=8, d=5, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, p))
    Y = X[:, :d] + 0.1 * rng.standard_normal((n, d))
    return X, Y, (Y > 0).astype(float)


DEVICE = {"device": "cuda-emulated", "random_state": 0}
FITS = {
    "tree": lambda X, Y, Yb: DecisionTreeRegressor(max_depth=5, **DEVICE).fit(X, Y).predict(X),
    "forest": lambda X, Y, Yb: RandomForestRegressor(n_estimators=3, **DEVICE).fit(X, Y)
    .predict(X),
    "forest, multi-label top k": lambda X, Y, Yb: RandomForestClassifier(
        n_estimators=3, **DEVICE).fit(X, Yb).predict_top_k(X, 2),
    "extra trees": lambda X, Y, Yb: ExtraTreesRegressor(n_estimators=3, **DEVICE).fit(X, Y)
    .predict(X),
    "boosting, multi_output": lambda X, Y, Yb: GradientBoostingRegressor(
        strategy="multi_output", n_estimators=3, **DEVICE).fit(X, Y).predict(X),
    "boosting, relabel_rpo": lambda X, Y, Yb: GradientBoostingRegressor(
        strategy="relabel_rpo", n_estimators=3, **DEVICE).fit(X, Y).predict(X),
    "boosting, absolute error": lambda X, Y, Yb: GradientBoostingRegressor(
        loss="absolute_error", n_estimators=3, **DEVICE).fit(X, Y).predict(X),
    "boosting, log loss, newton": lambda X, Y, Yb: GradientBoostingClassifier(
        n_estimators=3, split_criterion="newton", **DEVICE).fit(X, Yb).predict_proba(X),
    "label space": lambda X, Y, Yb: LabelSpaceRegressor(n_components=3, **DEVICE).fit(X, Y)
    .predict(X),
    "label space classifier": lambda X, Y, Yb: LabelSpaceClassifier(
        n_components=3, **DEVICE).fit(X, Yb).predict_proba(X),
}


@pytest.mark.parametrize("fit", sorted(FITS))
def test_dense_cuda_paths_pass_no_numpy_operand(fit):
    # (sparse paths are left out: the emulated device's sparse matrices are SciPy's,
    # whose index arrays are NumPy where cupyx's are CuPy)
    X, Y, Yb = _data()
    with count_device_activity(), refuse_host_operands():
        out = FITS[fit](X, Y, Yb)
    assert np.all(np.isfinite(np.asarray(out[0] if isinstance(out, tuple) else out)))
