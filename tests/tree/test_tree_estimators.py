"""Tree estimators: leaf values, weights, missing values, sparse inputs and
outputs, wide sparse label spaces, pickling, bad input, binning.

References are independent of gpurpo: per-leaf means computed with NumPy from
``apply``, repeated rows, dense/sparse twins, ``numpy.quantile``-free direct
checks of the binning rule, scikit-learn's ``clone``/``get_params``.
"""

from __future__ import annotations

import pickle
import tracemalloc

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.base import clone
from sklearn.utils.estimator_checks import parametrize_with_checks

from gpurpo.backend import NUMPY
from gpurpo.projections import OutputProjection
from gpurpo.tree import BinMapper, DecisionTreeClassifier, DecisionTreeRegressor


def _data(seed=0, n=300, p=6, d=5, missing=0.0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, p))
    if missing:
        X[rng.random(X.shape) < missing] = np.nan
    Y = np.tanh(X[:, :1] * 2) + 0.3 * rng.normal(size=(n, d))
    return X, np.nan_to_num(Y)


# --------------------------------------------------------------------------
# leaf values in the original output space
# --------------------------------------------------------------------------


@pytest.mark.parametrize("projection", [None, "gaussian", "subsample"])
def test_leaf_values_are_per_leaf_means_of_original_outputs(projection):
    X, Y = _data(1, d=12)
    w = np.random.default_rng(1).uniform(0.5, 2, size=X.shape[0])
    est = DecisionTreeRegressor(
        projection=projection, n_components=3, min_samples_leaf=5, random_state=0
    ).fit(X, Y, sample_weight=w)
    leaves = est.apply(X)
    pred = est.predict(X)
    for node in np.unique(leaves):
        rows = leaves == node
        ref = (w[rows, None] * Y[rows]).sum(0) / w[rows].sum()
        np.testing.assert_allclose(pred[rows], np.broadcast_to(ref, pred[rows].shape), rtol=1e-10)
        np.testing.assert_allclose(est.tree_.value[est.tree_.leaf_index[node]], ref, rtol=1e-10)
    assert est.n_projected_outputs_ == (12 if projection is None else 3)


def test_integer_sample_weights_equal_repeated_rows():
    rng = np.random.default_rng(2)
    X = rng.integers(0, 40, size=(200, 4)).astype(float)
    Y = rng.normal(size=(200, 3))
    w = rng.integers(1, 4, size=200)
    a = DecisionTreeRegressor(random_state=0).fit(X, Y, sample_weight=w)
    b = DecisionTreeRegressor(random_state=0).fit(np.repeat(X, w, axis=0), np.repeat(Y, w, axis=0))
    np.testing.assert_array_equal(a.tree_.feature, b.tree_.feature)
    np.testing.assert_array_equal(a.tree_.threshold, b.tree_.threshold)
    np.testing.assert_allclose(a.tree_.weighted_n_node_samples, b.tree_.n_node_samples)
    Xt = rng.integers(0, 40, size=(100, 4)).astype(float)
    np.testing.assert_allclose(a.predict(Xt), b.predict(Xt), rtol=1e-12)


def test_zero_weights_remove_samples():
    X, Y = _data(3)
    X = np.round(X * 5)  # few distinct values: bins are the values in both fits
    w = np.ones(X.shape[0])
    w[::3] = 0
    a = DecisionTreeRegressor(random_state=0, max_depth=5).fit(X, Y, sample_weight=w)
    keep = w > 0
    b = DecisionTreeRegressor(random_state=0, max_depth=5).fit(X[keep], Y[keep])
    # same partitions of the kept samples, same leaf values (bin edges may differ)
    np.testing.assert_array_equal(a.tree_.feature, b.tree_.feature)
    np.testing.assert_allclose(a.predict(X[keep]), b.predict(X[keep]))


# --------------------------------------------------------------------------
# missing values
# --------------------------------------------------------------------------


def test_missing_values_follow_learned_direction_at_predict_time():
    X, Y = _data(4, missing=0.15)
    est = DecisionTreeRegressor(max_depth=6, random_state=0).fit(X, Y)
    t = est.tree_
    # route rows by hand through the raw thresholds and learned NaN directions
    Xt = _data(5, missing=0.3)[0]
    leaves = est.apply(Xt)
    for i in range(Xt.shape[0]):
        g = 0
        while t.feature[g] >= 0:
            x = Xt[i, t.feature[g]]
            left = bool(t.missing_go_left[g]) if np.isnan(x) else x <= t.threshold[g]
            g = t.children_left[g] if left else t.children_right[g]
        assert leaves[i] == g
    # missing values were informative somewhere: at least one node sends them each way
    internal = t.feature >= 0
    assert set(t.missing_go_left[internal].tolist()) == {0, 1}


def test_missing_only_at_predict_time_goes_to_the_heavier_child():
    X, Y = _data(6)
    est = DecisionTreeRegressor(max_depth=4, random_state=0).fit(X, Y)
    t = est.tree_
    for g in np.flatnonzero(t.feature >= 0):
        heavier_left = (
            t.weighted_n_node_samples[t.children_left[g]]
            >= t.weighted_n_node_samples[t.children_right[g]]
        )
        assert bool(t.missing_go_left[g]) == bool(heavier_left)
    Xt = X[:20].copy()
    Xt[:, :] = np.nan
    assert np.isfinite(est.predict(Xt)).all()


def test_missing_values_informative_split():
    # y depends only on whether x0 is missing
    rng = np.random.default_rng(7)
    X = rng.normal(size=(400, 3))
    miss = rng.random(400) < 0.3
    X[miss, 0] = np.nan
    Y = np.where(miss, 5.0, -5.0)[:, None] + 0.01 * rng.normal(size=(400, 1))
    est = DecisionTreeRegressor(max_depth=1).fit(X, Y[:, 0])
    assert est.tree_.feature[0] == 0
    pred = est.predict(X)
    np.testing.assert_allclose(pred[miss], Y[miss, 0].mean(), rtol=1e-10)
    np.testing.assert_allclose(pred[~miss], Y[~miss, 0].mean(), rtol=1e-10)


# --------------------------------------------------------------------------
# sparse inputs and outputs
# --------------------------------------------------------------------------


def test_sparse_outputs_equal_dense_outputs():
    rng = np.random.default_rng(8)
    X = rng.normal(size=(300, 5))
    Y = (rng.random((300, 30)) < 0.15).astype(float)
    for proj in (None, "gaussian"):
        kw = dict(projection=proj, n_components=4, random_state=3, min_samples_leaf=2)
        a = DecisionTreeClassifier(**kw).fit(X, Y)
        b = DecisionTreeClassifier(**kw).fit(X, sp.csr_matrix(Y))
        np.testing.assert_array_equal(a.tree_.feature, b.tree_.feature)
        pa, pb = a.predict_proba(X), b.predict_proba(X)
        assert sp.issparse(pb) and not sp.issparse(pa)
        np.testing.assert_allclose(pa, pb.toarray(), rtol=1e-12)
        np.testing.assert_array_equal(a.predict(X), b.predict(X).toarray())


def test_sparse_inputs_equal_dense_inputs():
    rng = np.random.default_rng(9)
    X = rng.normal(size=(250, 8)) * (rng.random((250, 8)) < 0.3)
    Y = rng.normal(size=(250, 2))
    a = DecisionTreeRegressor(random_state=0).fit(X, Y)
    b = DecisionTreeRegressor(random_state=0).fit(sp.csr_matrix(X), Y)
    np.testing.assert_array_equal(a.tree_.threshold, b.tree_.threshold)
    np.testing.assert_allclose(a.predict(X), b.predict(sp.csc_matrix(X)))


def test_hundred_thousand_sparse_labels_fit_in_small_memory():
    rng = np.random.default_rng(10)
    n, p, d = 1500, 10, 100_000
    X = rng.normal(size=(n, p))
    labels_per_row = 5
    # labels depend on the sign pattern of the first 3 features
    group = (X[:, 0] > 0) * 4 + (X[:, 1] > 0) * 2 + (X[:, 2] > 0)
    cols = (group[:, None] * 1000 + rng.integers(0, 20, size=(n, labels_per_row))) % d
    Y = sp.csr_matrix((np.ones(n * labels_per_row), cols.ravel(),
                       np.arange(0, n * labels_per_row + 1, labels_per_row)), shape=(n, d))
    Y.sum_duplicates()
    Y.data[:] = 1.0
    tracemalloc.start()
    est = DecisionTreeClassifier(projection="gaussian", n_components=8, random_state=0,
                                 min_samples_leaf=3).fit(X, Y)
    proba = est.predict_proba(X[:200])
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert peak < 150 * 2**20, peak  # dense leaves alone would need n_leaves * d * 8 bytes
    assert est.tree_.leaves.is_sparse and sp.issparse(proba)
    assert proba.shape == (200, d)
    # each leaf's label frequencies: probabilities in [0, 1], rows sum to the mean label count
    np.testing.assert_allclose(proba.sum(axis=1).A.ravel(), labels_per_row, atol=labels_per_row)
    assert proba.max() <= 1.0 + 1e-12
    # the tree learned the groups: the true labels get probability mass
    hit = proba.multiply(Y[:200]).sum(axis=1).A.ravel()
    assert np.mean(hit) > 0.5


# --------------------------------------------------------------------------
# classifiers
# --------------------------------------------------------------------------


def test_single_label_classifier():
    rng = np.random.default_rng(11)
    X = rng.normal(size=(300, 4))
    y = np.where(X[:, 0] > 0.3, "b", np.where(X[:, 1] > 0, "a", "c"))
    est = DecisionTreeClassifier(max_depth=3, random_state=0).fit(X, y)
    assert list(est.classes_) == ["a", "b", "c"]
    proba = est.predict_proba(X)
    assert proba.shape == (300, 3)
    np.testing.assert_allclose(proba.sum(1), 1.0)
    np.testing.assert_array_equal(est.predict(X), est.classes_[proba.argmax(1)])
    assert est.score(X, y) > 0.95


def test_multilabel_predict_thresholds_probabilities():
    rng = np.random.default_rng(12)
    X = rng.normal(size=(300, 4))
    Y = np.stack([X[:, 0] > 0, X[:, 1] > 0.5, (X[:, 0] + X[:, 2]) > 0], axis=1).astype(int)
    est = DecisionTreeClassifier(max_depth=4, random_state=0).fit(X, Y)
    proba = est.predict_proba(X)
    np.testing.assert_array_equal(est.predict(X), (proba > 0.5).astype(int))
    assert est.n_outputs_ == 3


def test_output_projection_instance_and_clone():
    X, Y = _data(13, d=20)
    proj = OutputProjection(kind="rademacher", n_components=5, random_state=1)
    est = DecisionTreeRegressor(projection=proj, random_state=0, max_depth=4).fit(X, Y)
    assert est.projection_.shape == (5, 20)
    c = clone(est)
    assert c.get_params()["projection"] is not proj  # cloned deeply
    np.testing.assert_allclose(c.fit(X, Y).predict(X), est.predict(X))


def test_pickle_round_trip():
    X, Y = _data(14, missing=0.1)
    est = DecisionTreeRegressor(projection="gaussian", n_components=3, random_state=0).fit(X, Y)
    clone_ = pickle.loads(pickle.dumps(est))
    np.testing.assert_array_equal(clone_.predict(X), est.predict(X))
    assert clone_.get_depth() == est.get_depth() and clone_.get_n_leaves() == est.get_n_leaves()
    Ys = sp.csr_matrix((Y > 0.5).astype(float))
    cls = DecisionTreeClassifier(projection="sparse", n_components=3, random_state=0).fit(X, Ys)
    again = pickle.loads(pickle.dumps(cls))
    np.testing.assert_array_equal(again.predict_proba(X).toarray(), cls.predict_proba(X).toarray())


def test_inspection_attributes():
    X, Y = _data(15)
    est = DecisionTreeRegressor(max_depth=3).fit(X, Y)
    t = est.tree_
    assert est.get_depth() == 3 == t.max_depth
    assert t.n_leaves == est.get_n_leaves() == t.node_count - (t.feature >= 0).sum()
    assert t.n_node_samples[0] == X.shape[0]
    internal = np.flatnonzero(t.feature >= 0)
    np.testing.assert_array_equal(
        t.n_node_samples[internal],
        t.n_node_samples[t.children_left[internal]] + t.n_node_samples[t.children_right[internal]],
    )
    imp = est.feature_importances_
    assert imp.shape == (X.shape[1],) and abs(imp.sum() - 1) < 1e-12 and imp.argmax() == 0
    assert est.predict(X).shape == Y.shape
    assert DecisionTreeRegressor(max_depth=2).fit(X, Y[:, 0]).predict(X).shape == (X.shape[0],)
    stump = DecisionTreeRegressor().fit(np.ones_like(X), Y)  # no split: float zeros
    assert stump.feature_importances_.dtype == np.float64
    np.testing.assert_array_equal(stump.feature_importances_, np.zeros(X.shape[1]))


# --------------------------------------------------------------------------
# bad input
# --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(max_bins=1), "max_bins"),
        (dict(max_bins=256), "max_bins"),
        (dict(max_features=0), "max_features"),
        (dict(max_features=7), "max_features"),
        (dict(max_features=1.5), "max_features"),
        (dict(max_features="half"), "max_features"),
        (dict(min_samples_leaf=0), "min_samples_leaf"),
        (dict(min_samples_split=1), "min_samples_split"),
        (dict(max_depth=0), "max_depth"),
        (dict(max_leaf_nodes=1), "max_leaf_nodes"),
        (dict(splitter="fast"), "splitter"),
        (dict(min_impurity_decrease=-1.0), "min_impurity_decrease"),
        (dict(projection="nope"), "projection"),
    ],
)
def test_bad_parameters_raise_value_errors_naming_them(kwargs, match):
    X, Y = _data(16)
    with pytest.raises(ValueError, match=match):
        DecisionTreeRegressor(**kwargs).fit(X, Y)


def test_bad_data_raises():
    X, Y = _data(17)
    Ybad = Y.copy()
    Ybad[3, 1] = np.nan
    with pytest.raises(ValueError, match="y contains NaN or infinity"):
        DecisionTreeRegressor().fit(X, Ybad)
    Xbad = X.copy()
    Xbad[2, 2] = np.inf
    with pytest.raises(ValueError, match="X contains infinity"):
        DecisionTreeRegressor().fit(Xbad, Y)
    with pytest.raises(ValueError, match=r"inconsistent numbers of rows: X has 300, y has 299"):
        DecisionTreeRegressor().fit(X, Y[:-1])
    est = DecisionTreeRegressor(max_depth=2).fit(X, Y)
    with pytest.raises(ValueError, match=r"X has 5 features, but DecisionTreeRegressor is expecting 6"):
        est.predict(X[:, :-1])
    with pytest.raises(ValueError, match="sample_weight must be finite and non-negative"):
        DecisionTreeRegressor().fit(X, Y, sample_weight=-np.ones(X.shape[0]))
    with pytest.raises(ValueError, match="multi-label y must contain only 0 and 1"):
        DecisionTreeClassifier().fit(X, (Y > 0) * 2)
    with pytest.raises(TypeError, match="projection must be None, a kind name"):
        DecisionTreeRegressor(projection=3.0).fit(X, Y)


# --------------------------------------------------------------------------
# binning
# --------------------------------------------------------------------------


def test_binning_rule_and_edges():
    rng = np.random.default_rng(18)
    X = np.column_stack([
        rng.normal(size=5000),
        rng.integers(0, 7, size=5000).astype(float),
        np.where(rng.random(5000) < 0.9, 0.0, rng.normal(size=5000)),
    ])
    X[rng.random(5000) < 0.05, 0] = np.nan
    mapper = BinMapper(max_bins=32).fit(X)
    binned = mapper.transform(X, NUMPY)
    codes = binned.codes
    assert codes.dtype == np.uint8 and codes.shape == (3, 5000) and codes.flags.c_contiguous
    assert binned.missing_bin == binned.n_bins - 1 == 32
    np.testing.assert_array_equal(codes[0][np.isnan(X[:, 0])], 32)
    for f in range(3):
        edges = mapper.edges_[f]
        assert len(edges) <= 31 and np.all(np.diff(edges) > 0)
        x = X[:, f]
        ok = ~np.isnan(x)
        # code <= b  <=>  x <= edges[b]
        for b, e in enumerate(edges):
            np.testing.assert_array_equal(codes[f][ok] <= b, x[ok] <= e)
    # 7 distinct values: one bin per value; the heavy zero of feature 2 is one bin
    assert len(mapper.edges_[1]) == 6
    assert np.unique(codes[2][X[:, 2] == 0]).size == 1
    # quantile bins are roughly balanced
    counts = np.bincount(codes[0][~np.isnan(X[:, 0])])
    assert counts.max() < 3 * counts.mean()


def test_binning_memory_budget_error():
    X = np.zeros((1000, 50))
    mapper = BinMapper(max_binned_bytes=10_000).fit(X)
    with pytest.raises(ValueError, match="max_binned_bytes"):
        mapper.transform(X, NUMPY)


# --------------------------------------------------------------------------
# scikit-learn conventions
# --------------------------------------------------------------------------

_EXPECTED_FAILED = {
    # predict_proba of multi-label Y is an (n, d) matrix of label frequencies, as the
    # project specifies; a fully grown tree gives exact 0 and 1, which this check's strict
    # bounds 0 < p < 1 reject (scikit-learn's own tree returns a list of (n, 2) arrays).
    "check_classifiers_multilabel_output_format_predict_proba": "exact 0/1 leaf frequencies",
}


@parametrize_with_checks(
    [DecisionTreeRegressor(random_state=0), DecisionTreeClassifier(random_state=0)],
    expected_failed_checks=lambda est: (
        _EXPECTED_FAILED if isinstance(est, DecisionTreeClassifier) else {}
    ),
)
def test_sklearn_compatible_estimator(estimator, check):
    check(estimator)


def test_multilabel_predict_proba_is_an_n_by_d_matrix_of_leaf_frequencies():
    # what the waived check asserts besides its open interval (0, 1): the shape and dtype
    rng = np.random.default_rng(3)
    X = rng.normal(size=(60, 4))
    Y = (X[:, :3] + 0.3 * rng.normal(size=(60, 3)) > 0).astype(int)
    tree = DecisionTreeClassifier(max_depth=3, random_state=0).fit(X, Y)
    proba = tree.predict_proba(X[:25])
    assert proba.shape == (25, 3) and proba.dtype.kind == "f"
    leaves = tree.apply(X)
    for i, leaf in enumerate(leaves[:25]):
        np.testing.assert_allclose(proba[i], Y[leaves == leaf].mean(axis=0), rtol=1e-12)
