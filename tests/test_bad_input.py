"""Bad inputs found by an audit of the estimators: each gets an error naming the argument."""

import numpy as np
import pytest
import scipy.sparse as sp

from gpurpo.ensemble import (
    GradientBoostingRegressor,
    RandomForestClassifier,
    RandomForestRegressor,
)
from gpurpo.label_space import LabelSpaceClassifier
from gpurpo.tree import DecisionTreeClassifier


def _data(seed=0):
    rng = np.random.default_rng(seed)
    return rng.random((40, 3)), rng.random((40, 2))


def test_a_scalar_sample_weight_is_refused_by_name():
    X, Y = _data()
    with pytest.raises(ValueError, match=r"sample_weight must be an array, got a scalar"):
        GradientBoostingRegressor(n_estimators=2).fit(X, Y, sample_weight=2.0)
    with pytest.raises(ValueError, match=r"sample_weight must have shape \(n_samples,\)"):
        RandomForestRegressor(n_estimators=2).fit(X, Y, sample_weight=2.0)


def test_a_sparse_or_non_numeric_forest_sample_weight_is_refused_by_name():
    X, Y = _data(1)
    with pytest.raises(TypeError, match="sample_weight must be a dense array"):
        RandomForestRegressor(n_estimators=2).fit(X, Y, sample_weight=sp.csr_matrix(np.ones((1, 40))))
    with pytest.raises(TypeError, match="sample_weight must be an array of numbers"):
        RandomForestRegressor(n_estimators=2).fit(X, Y, sample_weight=["a"] * 40)


@pytest.mark.parametrize("make", [
    lambda: RandomForestClassifier(n_estimators=2, random_state=0),
    lambda: DecisionTreeClassifier(random_state=0),
    lambda: LabelSpaceClassifier(n_components=1),
])
def test_class_labels_mixing_numbers_and_strings_are_refused_by_name(make):
    X, _ = _data(2)
    y = np.array(["a", 1] * 20, dtype=object)
    with pytest.raises(TypeError, match="y's class labels must be of one orderable type.*int, str"):
        make().fit(X, y)
    strings = np.array(["a", "b", "c", "d"] * 10, dtype=object)
    assert set(make().fit(X, strings).predict(X).tolist()) <= {"a", "b", "c", "d"}


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_products_that_overflow_float64_name_what_to_rescale():
    # finite inputs of huge magnitude used to end in numpy's LinAlgError
    from gpurpo.label_space import LabelSpaceRegressor
    from gpurpo.linalg import rembrandt

    X, Y = _data(3)
    with pytest.raises(ValueError, match="Gram matrix X.T X overflows float64.*rescale X"):
        LabelSpaceRegressor(n_components=2).fit(X * 1e300, Y)
    with pytest.raises(ValueError, match="Gram matrix X.T X overflows float64.*rescale X"):
        LabelSpaceRegressor(n_components=2).fit(sp.csr_matrix(X * 1e300), Y)
    for method in ("auto", "precomputed", "factored"):
        with pytest.raises(ValueError, match="overflows float64.*rescale X and Y"):
            rembrandt(X, Y * 1e200, 1, method=method)
        with pytest.raises(ValueError, match="overflows float64.*rescale X and Y"):
            rembrandt(X, sp.csr_matrix(Y * 1e200), 1, method=method)


@pytest.mark.parametrize("make", [
    lambda c: GradientBoostingRegressor(n_estimators=2, strategy="multi_output", n_components=c),
    lambda c: RandomForestRegressor(n_estimators=2, projection=None, n_components=c),
    lambda c: __import__("gpurpo.tree", fromlist=["x"]).DecisionTreeRegressor(n_components=c),
])
@pytest.mark.parametrize("bad, message", [
    ("bad", r"n_components must be an int >= 1, a float in \(0, 1\] or one of .* got 'bad'"),
    (0, "n_components must be >= 1, got 0"),
    (-1, "n_components must be >= 1, got -1"),
    (float("nan"), r"n_components given as a float .* must be in \(0, 1\].* got nan"),
    (True, "n_components must be an int >= 1, got the bool True"),
    (1.5, r"n_components given as a float .* must be in \(0, 1\].* got 1.5"),
])
def test_n_components_is_validated_even_when_unused(make, bad, message):
    X, Y = _data(4)
    with pytest.raises(ValueError, match=message):
        make(bad).fit(X, Y)
    make(3).fit(X, Y)


def test_pandas_missing_values_in_nullable_columns_are_nan():
    pd = pytest.importorskip("pandas")
    rng = np.random.default_rng(5)
    frame = pd.DataFrame({
        "a": pd.array([1.5, None, 3.0] * 10, dtype="Float64"),
        "b": pd.array([1, 2, None] * 10, dtype="Int64"),
        "c": pd.array([True, False, None] * 10, dtype="boolean"),
    })
    dense = np.array([[1.5, 1.0, 1.0], [np.nan, 2.0, 0.0], [3.0, np.nan, np.nan]] * 10)
    Y = rng.random((30, 2))
    from_frame = RandomForestRegressor(n_estimators=3, random_state=0).fit(frame, Y)
    from_array = RandomForestRegressor(n_estimators=3, random_state=0).fit(dense, Y)
    np.testing.assert_array_equal(from_frame.predict(frame), from_array.predict(dense))
    assert list(from_frame.feature_names_in_) == ["a", "b", "c"]
    with pytest.raises(ValueError, match="y contains NaN"):
        RandomForestRegressor(n_estimators=2).fit(
            frame, pd.Series(pd.array([1.0, None] * 15, dtype="Float64")))


def test_boosting_classifier_keeps_boolean_labels_and_refuses_a_single_class():
    from gpurpo.ensemble import GradientBoostingClassifier

    X, _ = _data(6)
    y = X[:, 0] > 0.5
    model = GradientBoostingClassifier(n_estimators=3, random_state=0).fit(X, y)
    assert model.classes_.dtype == bool and model.predict(X).dtype == bool
    as_int = GradientBoostingClassifier(n_estimators=3, random_state=0).fit(X, y.astype(int))
    np.testing.assert_array_equal(model.predict(X), as_int.predict(X) == 1)
    for single in (np.zeros(40), np.ones(40), -np.ones(40), np.zeros(40, dtype=bool)):
        with pytest.raises(ValueError, match="y holds one class"):
            GradientBoostingClassifier(n_estimators=2).fit(X, single)


def test_projection_components_and_tree_index_are_checked():
    from gpurpo.projections import project

    Y = np.ones((4, 3))
    with pytest.raises(ValueError, match="components contains NaN or infinity"):
        project(Y, np.array([[1.0, np.nan, 0.0]]))
    with pytest.raises(ValueError, match="components contains NaN or infinity"):
        project(sp.csr_matrix(Y), sp.csr_matrix(np.array([[np.inf, 0.0, 1.0]])))
    X, Yr = _data(7)
    forest = RandomForestRegressor(n_estimators=2, projection="gaussian", n_components=1,
                                   random_state=0).fit(X, Yr)
    assert forest.get_projection(1).shape == (1, 2)
    with pytest.raises(TypeError, match="i must be an int"):
        forest.get_projection(1.0)
    with pytest.raises(ValueError, match=r"i must be in \[0, n_estimators=2\), got 2"):
        forest.get_projection(2)


@pytest.mark.parametrize("name, value", [("max_bins", 31), ("strategy", "multi_output"),
                                         ("loss", "absolute_error")])
def test_a_warm_start_refuses_to_change_what_shaped_the_fitted_stages(name, value):
    X, Y = _data(8)
    model = GradientBoostingRegressor(n_estimators=2, warm_start=True, random_state=0).fit(X, Y)
    model.set_params(n_estimators=3, **{name: value})
    with pytest.raises(ValueError, match=f"warm_start: {name} was .* in the first fit"):
        model.fit(X, Y)
    model.set_params(warm_start=False).fit(X, Y)
    assert len(model.train_loss_) == 3


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_diverging_boosting_says_to_lower_the_learning_rate():
    # it used to return NaN predictions
    X, Y = _data(9)
    with pytest.raises(ValueError, match="lower learning_rate"):
        GradientBoostingRegressor(n_estimators=5, learning_rate=1e300).fit(X, Y)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_a_boosting_loss_that_overflows_is_refused():
    # bounded logistic gradients, but raw scores beyond float64 after a few steps
    from gpurpo.ensemble import GradientBoostingClassifier

    X, Y = _data(10)
    with pytest.raises(ValueError, match=r"training loss overflowed at iteration \d+"):
        # (a draw of the projections whose gradients stay within float32's range)
        GradientBoostingClassifier(
            n_estimators=5, learning_rate=1e308, random_state=17).fit(X, Y > 0.5)


@pytest.mark.parametrize("reducer", ["plst", "random", "cssp"])
def test_every_reducer_checks_its_code_length(reducer):
    # the random reducer accepted k > min(n, d), and all truncated a float k
    from gpurpo.label_space.reducers import make_reducer

    _, Y = _data(11)
    with pytest.raises(ValueError, match=r"n_components must be <= 2"):
        make_reducer(reducer, 3).fit(Y)
    with pytest.raises(TypeError, match="n_components must be an int"):
        make_reducer(reducer, 1.5).fit(Y)
    assert make_reducer(reducer, 2).fit(Y).n_components_ == 2


@pytest.mark.parametrize("make", [
    lambda b: __import__("gpurpo.tree", fromlist=["x"]).DecisionTreeRegressor(max_binned_bytes=b),
    lambda b: RandomForestRegressor(n_estimators=2, max_binned_bytes=b),
    lambda b: GradientBoostingRegressor(n_estimators=2, max_binned_bytes=b),
])
def test_the_binned_size_budget_is_a_parameter(make):
    # the error said "raise the budget", which no estimator let a user do
    X, Y = _data(12)
    with pytest.raises(ValueError, match=r"needs 120 bytes .* or raise max_binned_bytes"):
        make(119).fit(X, Y)
    make(120).fit(X, Y)
    with pytest.raises(TypeError, match="max_binned_bytes must be an int"):
        make(2.5e9).fit(X, Y)
