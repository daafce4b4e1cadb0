"""cuDF frames and series as inputs: GPU data, column names kept, nulls as NaN.

cuDF needs a GPU, so these tests use stand-ins whose types live in a ``cudf``
module and that offer the members the library reads (``to_cupy``, ``isnull``,
``dtypes``/``dtype``, ``columns``, ``shape``), returning host arrays where cuDF
returns CuPy ones; the estimators run on the emulated CUDA backend (which, as
``device="cuda"``, takes host arrays beside GPU data), and their results are
compared with the same estimators fitted on the plain arrays.
"""

from __future__ import annotations

import re

import numpy as np
import pytest

from gpurpo.backend import (
    CUPY,
    device_frame_values,
    is_device_frame,
    is_gpu_array,
    resolve_backend,
)
from gpurpo.ensemble import (
    GradientBoostingClassifier,
    GradientBoostingRegressor,
    RandomForestClassifier,
    RandomForestRegressor,
)
from gpurpo.label_space import LabelSpaceRegressor
from gpurpo.tree import DecisionTreeRegressor


class _Values:
    def __init__(self, values):
        self.values = values


class FakeFrame:
    """A cuDF ``DataFrame`` stand-in (2-D values, named columns, a null mask)."""

    def __init__(self, values, columns=None, nulls=None, dtypes=None):
        self._values = np.asarray(values)
        self.shape = self._values.shape
        self.columns = (list(columns) if columns is not None
                        else [f"c{j}" for j in range(self.shape[1])])
        self._nulls = np.zeros(self.shape, bool) if nulls is None else np.asarray(nulls)
        self.dtypes = _Values(np.array(dtypes if dtypes is not None
                                       else [self._values.dtype] * self.shape[1], dtype=object))
        self.calls = []

    def isnull(self):
        return _Values(self._nulls)

    def to_cupy(self, dtype=None, copy=False, na_value=None):
        self.calls.append((dtype, na_value))
        if self._nulls.any() and na_value is None:
            raise ValueError("Column must have no nulls")
        out = self._values.astype(dtype if dtype is not None else self._values.dtype)
        if self._nulls.any():
            out[self._nulls] = na_value
        return out


class FakeSeries(FakeFrame):
    """A cuDF ``Series`` stand-in (1-D values, one dtype, no columns)."""

    def __init__(self, values, nulls=None):
        self._values = np.asarray(values)
        self.shape = self._values.shape
        self.dtype = self._values.dtype
        self._nulls = np.zeros(self.shape, bool) if nulls is None else np.asarray(nulls)
        self.calls = []


FakeFrame.__module__ = "cudf.core.dataframe"
FakeSeries.__module__ = "cudf.core.series"


def _data(n=120, p=5, m=3, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, p))
    Y = X[:, :m] * 2.0 + 0.1 * rng.standard_normal((n, m))
    return X, Y


def test_frames_are_gpu_inputs():
    X, _ = _data()
    frame, series = FakeFrame(X), FakeSeries(X[:, 0])
    assert is_device_frame(frame) and is_device_frame(series)
    assert is_gpu_array(frame) and is_gpu_array(series)
    assert not is_device_frame(X) and not is_gpu_array(X)
    # a type from a cudf module without to_cupy is not taken for a frame
    assert not is_device_frame(type("Scalar", (), {"__module__": "cudf.core.scalar"})())
    with pytest.raises(ValueError, match="GPU .CuPy or cuDF. data"):
        resolve_backend(frame, device="cpu")
    with pytest.raises(ValueError, match="mix host"):
        resolve_backend(frame, X)
    assert resolve_backend(frame, series) is CUPY


def test_values_keep_their_dtype_and_nulls_become_nan():
    X, _ = _data(n=8, p=3)
    frame = FakeFrame(X.astype(np.float32))
    out = device_frame_values(frame, "X")
    assert out.dtype == np.float32 and frame.calls == [(None, None)]
    np.testing.assert_array_equal(out, X.astype(np.float32))
    nulls = np.zeros(X.shape, bool)
    nulls[2, 1] = nulls[5, 0] = True
    frame = FakeFrame(X, nulls=nulls)
    out = device_frame_values(frame, "X")
    assert out.dtype == np.float64 and np.isnan(out[nulls]).all()
    np.testing.assert_array_equal(out[~nulls], X[~nulls])


@pytest.mark.parametrize("dtypes, shown", [
    ([np.float64, np.dtype(object), np.float64], "object"),
    ([np.float64, np.float64, np.dtype("datetime64[ns]")], "datetime64[ns]"),
    ([np.float64, "category", np.float64], "category"),
])
def test_columns_that_are_not_numbers_are_named(dtypes, shown):
    X, _ = _data(n=8, p=3)
    frame = FakeFrame(X, dtypes=dtypes)
    with pytest.raises(ValueError, match=re.escape(
            f"X must hold numbers, got a cuDF FakeFrame with column dtype(s) {shown}")):
        device_frame_values(frame, "X")
    assert frame.calls == []


def _fitted(make, X, y):
    return make().fit(X, y)


ESTIMATORS = {
    "tree": lambda: DecisionTreeRegressor(max_depth=4, random_state=0, device="cuda-emulated"),
    "forest": lambda: RandomForestRegressor(n_estimators=3, max_depth=4, random_state=0,
                                            device="cuda-emulated"),
    "boosting": lambda: GradientBoostingRegressor(n_estimators=3, random_state=0,
                                                  device="cuda-emulated"),
    "label space": lambda: LabelSpaceRegressor(n_components=2, random_state=0,
                                               device="cuda-emulated"),
}


@pytest.mark.parametrize("kind", sorted(ESTIMATORS))
def test_regressors_fit_and_predict_frames_as_their_arrays(kind):
    X, Y = _data()
    make = ESTIMATORS[kind]
    on_frames = _fitted(make, FakeFrame(X, columns=[f"f{j}" for j in range(5)]), FakeFrame(Y))
    on_arrays = _fitted(make, X, Y)
    np.testing.assert_array_equal(on_frames.feature_names_in_, [f"f{j}" for j in range(5)])
    assert not hasattr(on_arrays, "feature_names_in_")
    expected = np.asarray(on_arrays.predict(X))
    # the same trees (a GPU input's leaf values are summed on the device: the last bits differ)
    np.testing.assert_allclose(
        np.asarray(on_frames.predict(FakeFrame(X, columns=[f"f{j}" for j in range(5)]))),
        expected, rtol=1e-12, atol=1e-12)
    with pytest.raises(ValueError, match="Feature names must be in the same order"):
        on_frames.predict(FakeFrame(X, columns=[f"f{j}" for j in (1, 0, 2, 3, 4)]))


@pytest.mark.parametrize("make", [
    lambda: RandomForestClassifier(n_estimators=3, max_depth=4, random_state=0,
                                   device="cuda-emulated"),
    lambda: GradientBoostingClassifier(n_estimators=3, random_state=0, device="cuda-emulated"),
], ids=["forest", "boosting"])
def test_a_classifier_takes_a_series_of_labels(make):
    X, Y = _data()
    labels = (Y[:, 0] > 0).astype(np.int64) + (Y[:, 1] > 1)
    on_frames = _fitted(make, FakeFrame(X), FakeSeries(labels))
    on_arrays = _fitted(make, X, labels)
    np.testing.assert_array_equal(on_frames.classes_, [0, 1, 2])
    np.testing.assert_allclose(np.asarray(on_frames.predict_proba(FakeFrame(X))),
                               np.asarray(on_arrays.predict_proba(X)), rtol=1e-12, atol=1e-12)


def test_null_features_are_missing_values():
    # a null reads as NaN: the trees send it where they send a NaN of the array
    X, Y = _data()
    nulls = np.random.default_rng(1).random(X.shape) < 0.1
    X_nan = np.where(nulls, np.nan, X)
    on_frames = ESTIMATORS["tree"]().fit(FakeFrame(X, nulls=nulls), Y)
    on_arrays = ESTIMATORS["tree"]().fit(X_nan, Y)
    np.testing.assert_allclose(np.asarray(on_frames.predict(FakeFrame(X, nulls=nulls))),
                               np.asarray(on_arrays.predict(X_nan)), rtol=1e-12, atol=1e-12)


def test_a_label_series_of_strings_is_named():
    X, _ = _data()
    labels = FakeSeries(np.array(["a", "b"] * 60, dtype=object))
    with pytest.raises(ValueError, match="y must hold numbers, got a cuDF FakeSeries"):
        RandomForestClassifier(n_estimators=2, device="cuda-emulated").fit(FakeFrame(X), labels)
