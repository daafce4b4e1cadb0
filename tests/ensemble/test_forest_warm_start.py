"""Warm starts of the random-output forests (``warm_start=True``).

The reference is one fit with the final ``n_estimators`` and the same
``random_state``: a forest grown in several warm-started fits must be that
forest, tree for tree (the same leaves reached, the same bootstrap samples,
projections, predictions, importances and out-of-bag scores), as
scikit-learn's forests are.
"""

from __future__ import annotations

import pickle
import warnings

import numpy as np
import pytest

from gpurpo.datasets import make_multilabel
from gpurpo.ensemble import (
    ExtraTreesClassifier,
    ExtraTreesRegressor,
    RandomForestClassifier,
    RandomForestRegressor,
)
from gpurpo.projections import OutputProjection


def _regression(seed=0, n=160, p=6, d=5):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, p))
    Y = np.sin(X @ rng.normal(size=(p, d))) + 0.1 * rng.normal(size=(n, d))
    return X, Y


def _labels(seed=0, n=200, p=8, d=15, sparse=True):
    return make_multilabel(n, p, d, label_cardinality=3.0, sparse_output=sparse,
                           random_state=seed)


def _data(Forest, sparse=True):
    if Forest in (RandomForestClassifier, ExtraTreesClassifier):
        return _labels(sparse=sparse)
    return _regression()


def _warm_fit(Forest, X, Y, sizes, **kwargs):
    forest = Forest(n_estimators=sizes[0], warm_start=True, **kwargs)
    for size in sizes:
        forest.set_params(n_estimators=size).fit(X, Y)
    return forest


def _assert_same_forest(a, b, X, rtol=0.0):
    """The same trees; predictions equal (``rtol``: up to the order of the sums)."""
    assert len(a.estimators_) == len(b.estimators_)
    np.testing.assert_array_equal(a.apply(X), b.apply(X))
    predict = "predict_proba" if hasattr(a, "predict_proba") else "predict"
    np.testing.assert_allclose(getattr(a, predict)(X), getattr(b, predict)(X), rtol=rtol,
                               atol=0.0)
    assert len(a.estimators_samples_) == len(b.estimators_samples_) == len(b.estimators_)
    for sa, sb in zip(a.estimators_samples_, b.estimators_samples_):
        np.testing.assert_array_equal(sa, sb)
    np.testing.assert_array_equal(a.feature_importances_, b.feature_importances_)
    for i in range(len(a.estimators_)):
        pa, pb = a.get_projection(i), b.get_projection(i)
        if pa is None:
            assert pb is None
        else:
            pa = pa.toarray() if hasattr(pa, "toarray") else pa
            pb = pb.toarray() if hasattr(pb, "toarray") else pb
            np.testing.assert_array_equal(pa, pb)


@pytest.mark.parametrize(
    "Forest", [RandomForestRegressor, RandomForestClassifier, ExtraTreesRegressor,
               ExtraTreesClassifier]
)
@pytest.mark.parametrize(
    "kwargs",
    [
        dict(projection="gaussian", n_components=3),
        dict(projection="sparse", n_components=3, shared_projection=True),
        dict(projection=None, max_leaf_nodes=9),
        dict(projection=OutputProjection("rademacher", n_components=2), max_depth=4),
    ],
    ids=["per-tree", "shared", "unprojected-best-first", "estimator-projection"],
)
def test_warm_started_forest_is_the_forest_of_one_fit(Forest, kwargs):
    X, Y = _data(Forest)
    cold = Forest(n_estimators=7, random_state=5, max_features="sqrt", **kwargs).fit(X, Y)
    warm = _warm_fit(Forest, X, Y, [2, 3, 7], random_state=5, max_features="sqrt", **kwargs)
    _assert_same_forest(warm, cold, X)


def test_first_trees_do_not_depend_on_n_estimators():
    X, Y = _regression()
    small = RandomForestRegressor(n_estimators=3, projection="gaussian", n_components=2,
                                  random_state=1).fit(X, Y)
    large = RandomForestRegressor(n_estimators=8, projection="gaussian", n_components=2,
                                  random_state=1).fit(X, Y)
    np.testing.assert_array_equal(small.apply(X), large.apply(X)[:, :3])


def test_warm_start_with_threads_and_batches_equals_one_serial_fit():
    X, Y = _labels()
    kwargs = dict(projection="gaussian", n_components=3, random_state=2)
    cold = RandomForestClassifier(n_estimators=9, n_jobs=1, batch_size=9, **kwargs).fit(X, Y)
    warm = _warm_fit(RandomForestClassifier, X, Y, [4, 9], n_jobs=2, batch_size=1, **kwargs)
    _assert_same_forest(warm, cold, X)


@pytest.mark.parametrize("Forest", [RandomForestRegressor, RandomForestClassifier])
def test_out_of_bag_score_covers_every_tree_after_a_warm_start(Forest):
    X, Y = _data(Forest)
    kwargs = dict(projection="gaussian", n_components=3, random_state=4, oob_score=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # a few rows are in every early bag
        cold = Forest(n_estimators=12, **kwargs).fit(X, Y)
        warm = _warm_fit(Forest, X, Y, [3, 12], **kwargs)
    assert warm.oob_score_ == cold.oob_score_
    name = "oob_prediction_" if hasattr(cold, "oob_prediction_") else "oob_decision_function_"
    np.testing.assert_array_equal(getattr(warm, name), getattr(cold, name))


def test_weighted_bootstrap_and_sparse_labels_warm_start():
    X, Y = _labels(sparse=True)
    w = np.random.default_rng(0).integers(0, 4, size=X.shape[0]).astype(float)
    kwargs = dict(projection="gaussian", n_components=3, random_state=6)
    cold = RandomForestClassifier(n_estimators=6, **kwargs).fit(X, Y, sample_weight=w)
    warm = RandomForestClassifier(n_estimators=2, warm_start=True, **kwargs)
    warm.fit(X, Y, sample_weight=w)
    warm.set_params(n_estimators=6).fit(X, Y, sample_weight=w)
    _assert_same_forest(warm, cold, X)
    for drawn in warm.estimators_samples_:
        assert np.all(w[drawn] > 0)  # zero-weight rows are never drawn


def test_no_new_trees_warns_and_keeps_the_forest():
    X, Y = _regression()
    forest = RandomForestRegressor(n_estimators=3, warm_start=True, random_state=0).fit(X, Y)
    before = forest.apply(X)
    with pytest.warns(UserWarning, match="without increasing n_estimators"):
        forest.fit(X, Y)
    assert len(forest.estimators_) == 3
    np.testing.assert_array_equal(forest.apply(X), before)


def test_fewer_trees_than_fitted_is_refused():
    X, Y = _regression()
    forest = RandomForestRegressor(n_estimators=4, warm_start=True, random_state=0).fit(X, Y)
    with pytest.raises(ValueError, match=r"n_estimators=2 must be larger or equal to "
                                         r"len\(estimators_\)=4"):
        forest.set_params(n_estimators=2).fit(X, Y)


@pytest.mark.parametrize(
    "name, value",
    [("projection", "rademacher"), ("n_components", 2), ("shared_projection", True),
     ("max_bins", 16)],
)
def test_a_warm_start_refuses_to_change_what_the_trees_share(name, value):
    X, Y = _regression()
    forest = RandomForestRegressor(n_estimators=2, projection="gaussian", n_components=3,
                                   warm_start=True, random_state=0).fit(X, Y)
    forest.set_params(n_estimators=4, **{name: value})
    with pytest.raises(ValueError, match=f"warm_start: {name} differs"):
        forest.fit(X, Y)


def test_a_warm_start_refuses_a_changed_projection_estimator():
    X, Y = _regression()
    forest = RandomForestRegressor(
        n_estimators=2, projection=OutputProjection("gaussian", n_components=2),
        warm_start=True, random_state=0,
    ).fit(X, Y)
    forest.projection.set_params(n_components=3)
    forest.set_params(n_estimators=3)
    with pytest.raises(ValueError, match="warm_start: projection differs"):
        forest.fit(X, Y)


def test_growth_parameters_may_change_for_the_new_trees():
    X, Y = _regression()
    forest = RandomForestRegressor(n_estimators=2, warm_start=True, random_state=0).fit(X, Y)
    first = forest.apply(X)
    assert all(len(np.unique(first[:, t])) > 4 for t in range(2))  # fully grown
    forest.set_params(n_estimators=4, max_depth=2).fit(X, Y)
    leaves = forest.apply(X)
    np.testing.assert_array_equal(leaves[:, :2], first)
    # the new trees are depth-2 trees: at most 4 leaves each
    assert all(len(np.unique(leaves[:, t])) <= 4 for t in range(2, 4))


def test_a_warm_start_refuses_other_outputs_features_classes_and_devices():
    X, Y = _regression()
    forest = RandomForestRegressor(n_estimators=2, warm_start=True, random_state=0).fit(X, Y)
    forest.set_params(n_estimators=3)
    with pytest.raises(ValueError, match="y must have 5 outputs as in the first fit, got 4"):
        forest.fit(X, Y[:, :4])
    with pytest.raises(ValueError, match="X has 5 features, but RandomForestRegressor is "
                                         "expecting 6 features"):
        forest.fit(X[:, :5], Y)
    with pytest.raises(ValueError, match="fitted on the 'numpy' backend"):
        forest.set_params(device="cuda-emulated").fit(X, Y)

    y = np.where(X[:, 0] > 0, "a", "b")
    clf = RandomForestClassifier(n_estimators=2, warm_start=True, random_state=0).fit(X, y)
    clf.set_params(n_estimators=3)
    with pytest.raises(ValueError, match="y must hold the classes of the first fit"):
        clf.fit(X, np.where(X[:, 0] > 0, "a", "c"))
    with pytest.raises(ValueError, match="the first fit had single-label y"):
        clf.fit(X, np.stack([X[:, 0] > 0, X[:, 1] > 0], axis=1).astype(float))
    Xm, Ym = _labels()
    multi = RandomForestClassifier(n_estimators=2, warm_start=True, random_state=0)
    multi.fit(Xm, Ym).set_params(n_estimators=3)
    with pytest.raises(ValueError, match="multi-label indicators"):
        multi.fit(Xm, np.arange(Ym.shape[0]) % 3)


def test_warm_start_must_be_a_bool():
    X, Y = _regression()
    with pytest.raises(TypeError, match="warm_start must be a bool, got 'yes'"):
        RandomForestRegressor(n_estimators=2, warm_start="yes").fit(X, Y)


def test_without_warm_start_a_fit_starts_over():
    X, Y = _regression()
    forest = RandomForestRegressor(n_estimators=5, random_state=3).fit(X, Y)
    forest.set_params(n_estimators=2).fit(X, Y)
    fresh = RandomForestRegressor(n_estimators=2, random_state=3).fit(X, Y)
    _assert_same_forest(forest, fresh, X)


def test_other_training_rows_grow_the_new_trees_on_them():
    X, Y = _regression(n=160)
    X2, Y2 = _regression(seed=1, n=90)
    forest = RandomForestRegressor(n_estimators=2, warm_start=True, random_state=0).fit(X, Y)
    forest.set_params(n_estimators=4).fit(X2, Y2)
    samples = forest.estimators_samples_
    assert [len(s) for s in samples] == [160, 160, 90, 90]
    assert all(s.max() < 90 for s in samples[2:])
    forest.set_params(n_estimators=5, oob_score=True)
    with pytest.raises(ValueError, match="X has 90 rows, but fitted trees drew their samples "
                                         "from 160"):
        forest.fit(X2, Y2)


def test_a_pickled_forest_warm_starts_as_the_original():
    X, Y = _labels()
    kwargs = dict(projection="gaussian", n_components=3, random_state=8)
    cold = RandomForestClassifier(n_estimators=5, **kwargs).fit(X, Y)
    first = RandomForestClassifier(n_estimators=2, warm_start=True, **kwargs).fit(X, Y)
    restored = pickle.loads(pickle.dumps(first))
    restored.set_params(n_estimators=5).fit(X, Y)
    _assert_same_forest(restored, cold, X)


def test_a_forest_pickled_before_warm_starts_loads_and_asks_for_a_new_fit():
    X, Y = _regression()
    forest = RandomForestRegressor(n_estimators=2, random_state=0).fit(X, Y)
    state = forest.__getstate__()
    for name in ("warm_start", "_tree_seed_state", "_warm_fixed", "_sampling_records",
                 "_backend_name"):
        state.pop(name)
    state.update(_n_samples_fit=X.shape[0], _n_draws=X.shape[0], _draw_p=None,
                 _bootstrap=True)
    old = RandomForestRegressor.__new__(RandomForestRegressor)
    old.__setstate__(state)
    assert old.get_params()["warm_start"] is False
    for a, b in zip(old.estimators_samples_, forest.estimators_samples_):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(old.predict(X), forest.predict(X))
    old.set_params(warm_start=True, n_estimators=3)
    with pytest.raises(ValueError, match="fit it again with warm_start=False"):
        old.fit(X, Y)


def test_emulated_cuda_warm_start_equals_one_fit():
    X, Y = _labels(n=120, p=5, d=8)
    kwargs = dict(projection="gaussian", n_components=2, random_state=9, device="cuda-emulated",
                  max_depth=3)
    cold = RandomForestClassifier(n_estimators=3, **kwargs).fit(X, Y)
    warm = _warm_fit(RandomForestClassifier, X, Y, [1, 3], **kwargs)
    # the CUDA traversal sums the trees of a batch, then adds that sum: batches of
    # 1 and 2 trees round differently from one batch of 3
    _assert_same_forest(warm, cold, X, rtol=1e-14)


def test_a_fit_without_oob_score_drops_the_scores_of_an_earlier_fit():
    X, Y = _regression()
    forest = RandomForestRegressor(n_estimators=8, oob_score=True, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        forest.fit(X, Y)
    assert hasattr(forest, "oob_score_") and hasattr(forest, "oob_prediction_")
    forest.set_params(oob_score=False, warm_start=True, n_estimators=10).fit(X, Y)
    assert not hasattr(forest, "oob_score_") and not hasattr(forest, "oob_prediction_")
    clf = RandomForestClassifier(n_estimators=8, oob_score=True, random_state=0)
    Xl, Yl = _labels()
    clf.fit(Xl, Yl)
    assert hasattr(clf, "oob_decision_function_")
    clf.set_params(oob_score=False).fit(Xl, Yl)
    assert not hasattr(clf, "oob_score_") and not hasattr(clf, "oob_decision_function_")
