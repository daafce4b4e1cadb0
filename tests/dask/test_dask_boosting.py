"""gpurpo.dask's gradient boosting on a LocalCluster of 2 worker processes.

References: the single-machine gpurpo estimator with the same random_state on
the same in-memory data (the same draws and split rules, so the same model up
to float rounding of the summed histograms), and NumPy histograms of the whole
data for the partial histograms.
"""

import pickle

import numpy as np
import pytest
import scipy.sparse as sp

da = pytest.importorskip("dask.array")
distributed = pytest.importorskip("distributed")

from gpurpo import dask as gdask  # noqa: E402
from gpurpo.dask._grower import Traffic, Workers  # noqa: E402
from gpurpo.dask._partition import BoostingPartition  # noqa: E402
from gpurpo.ensemble import GradientBoostingClassifier, GradientBoostingRegressor  # noqa: E402
from gpurpo.tree import GrowthParams  # noqa: E402
from gpurpo.tree.binning import BinMapper  # noqa: E402


def _data(n=900, p=8, d=5, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, p))
    X[rng.random(size=X.shape) < 0.02] = np.nan
    Y = np.nan_to_num(X[:, :4]) @ rng.normal(size=(4, d)) + 0.1 * rng.normal(size=(n, d))
    return X, Y


def _sparse(X):
    return sp.csr_matrix(np.where(np.abs(np.nan_to_num(X)) > 0.8, np.nan_to_num(X), 0.0))


def _rows(A, rows=250):
    """Row chunks of an in-memory array or CSR matrix (CSR blocks for the latter)."""
    if sp.issparse(A):
        return da.from_array(A, chunks=(rows, A.shape[1]), asarray=False,
                             meta=sp.csr_matrix((0, 0)))
    return da.from_array(A, chunks=(rows,) + A.shape[1:])


def _splits(structure):
    inner = structure.feature >= 0
    return sorted(zip(structure.feature[inner].tolist(), structure.bin[inner].tolist(),
                      structure.n_node_samples[inner].tolist()))


REGRESSION_CASES = [
    ("dense", dict()),
    ("csr", dict(strategy="relabel_rpo", projection="gaussian", n_components=3)),
    ("dense", dict(strategy="multi_output", max_leaf_nodes=None, max_depth=3,
                   max_features=5, min_samples_leaf=3)),
    ("dense", dict(strategy="single_target", split_criterion="newton")),
]


@pytest.mark.parametrize("kind,params", REGRESSION_CASES)
def test_regressor_equals_the_single_machine_model(client, kind, params):
    X, Y = _data()
    Xin = _sparse(X) if kind == "csr" else X
    model = gdask.GradientBoostingRegressor(n_estimators=4, random_state=3, **params)
    model.fit(_rows(Xin), _rows(Y))
    ref = GradientBoostingRegressor(n_estimators=4, random_state=3, **params).fit(Xin, Y)
    local = model.to_local()
    assert type(local) is GradientBoostingRegressor
    np.testing.assert_allclose(local.predict(Xin), ref.predict(Xin), rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(model.steps_, ref.steps_, rtol=1e-6, atol=1e-10)
    np.testing.assert_allclose(model.train_loss_, ref.train_loss_, rtol=1e-9)
    for mine, theirs in zip(local._model.stages, ref._model.stages):
        # the same splits (level-wise, the single-machine subtree kernel numbers the nodes
        # depth first)
        assert _splits(mine.structure) == _splits(theirs.structure)
    assert len(model.bytes_moved_per_level_) > 0 and model.bytes_moved_["histograms"] > 0


@pytest.mark.parametrize("kind,target", [("dense", "multilabel"), ("csr", "multiclass"),
                                         ("dense", "binary")])
def test_classifier_equals_the_single_machine_model(client, kind, target):
    X, Y = _data(seed=1)
    Xin = _sparse(X) if kind == "csr" else X
    if target == "multilabel":
        y = (Y > 0.2).astype(np.int64)
        params = dict(strategy="relabel_rpo", projection="gaussian", n_components=2,
                      split_criterion="newton")
    elif target == "multiclass":
        y = np.array(["a", "b", "c"])[np.argmax(Y[:, :3], axis=1)]
        params = dict()
    else:
        y = Y[:, 0] > 0
        params = dict(strategy="multi_output")
    model = gdask.GradientBoostingClassifier(n_estimators=4, random_state=5, **params)
    model.fit(_rows(Xin), _rows(y))
    ref = GradientBoostingClassifier(n_estimators=4, random_state=5, **params).fit(Xin, y)
    np.testing.assert_array_equal(model.classes_, ref.classes_)
    np.testing.assert_allclose(model.to_local().predict_proba(Xin), ref.predict_proba(Xin),
                               rtol=1e-6, atol=1e-9)
    Xd = _rows(Xin)
    np.testing.assert_allclose(model.predict_proba(Xd).compute(), ref.predict_proba(Xin),
                               rtol=1e-6, atol=1e-9)
    np.testing.assert_array_equal(model.predict(Xd).compute(), ref.predict(Xin))
    for method in ("predict", "predict_proba", "decision_function"):
        # the lazy result announces the single-machine result's shape and dtype
        lazy, expected = getattr(model, method)(Xd), getattr(ref, method)(Xin)
        assert (lazy.shape, lazy.dtype) == (expected.shape, expected.dtype), method


def test_to_local_pickles_and_dask_predict_equals_it(client):
    X, Y = _data(seed=2)
    model = gdask.GradientBoostingRegressor(n_estimators=3, random_state=0)
    model.fit(_rows(X), _rows(Y[:, 0]))
    local = pickle.loads(pickle.dumps(model.to_local()))
    assert type(local) is GradientBoostingRegressor
    pred = model.predict(_rows(X, 300))
    assert isinstance(pred, da.Array) and pred.shape == (X.shape[0],)
    np.testing.assert_array_equal(pred.compute(), local.predict(X))


def test_partial_histograms_sum_to_the_histogram_of_all_rows(client):
    """The workers' partial root histograms add up to a NumPy histogram of all rows."""
    X, Y = _data(n=600, p=4, d=3, seed=4)
    X = np.nan_to_num(X)
    mapper = BinMapper(max_bins=16).fit(X)
    template = GradientBoostingRegressor(strategy="multi_output")
    blocks = [(0, 250), (250, 420), (420, 600)]
    actors = [client.submit(BoostingPartition, [X[a:b]], [Y[a:b]], template, mapper,
                            "multi_output", "squared_error", actor=True).result()
              for a, b in blocks]
    workers = Workers(actors, Traffic())
    init = np.zeros(3)
    workers.call("init", "start", init)
    workers.call("tree_setup", "tree_targets", None, None, False)
    mean = np.zeros((1, 3))
    workers.call("tree_setup", "grow_start", mean, GrowthParams(max_leaf_nodes=4))
    feats = np.arange(4, dtype=np.int32)[None, :]
    hist = np.sum(workers.call("histograms", "hist", np.zeros(1, dtype=np.int64), feats),
                  axis=0)[0]
    codes = np.stack([np.searchsorted(e, X[:, f], side="left") for f, e in
                      enumerate(mapper.edges_)], axis=1)
    G = Y.astype(np.float32)
    for f in range(4):
        np.testing.assert_array_equal(hist[f, :, 0], np.bincount(codes[:, f],
                                                                 minlength=hist.shape[1]))
        for c in range(3):
            ref = np.bincount(codes[:, f], weights=G[:, c].astype(np.float64),
                              minlength=hist.shape[1])
            np.testing.assert_allclose(hist[f, :, 1 + c], ref, rtol=1e-5, atol=1e-4)
    assert workers.traffic.by_kind["histograms"] == 3 * hist.nbytes + 3 * (8 + feats.nbytes)


def test_bad_inputs_are_caught_before_any_task(client):
    X, Y = _data(n=200)
    model = gdask.GradientBoostingRegressor(n_estimators=2)
    with pytest.raises(TypeError, match="X must be a dask.array.Array"):
        model.fit(X, _rows(Y))
    with pytest.raises(TypeError, match="y must be a dask.array.Array"):
        model.fit(_rows(X), Y)
    with pytest.raises(ValueError, match="X must be chunked by rows only"):
        model.fit(da.from_array(X, chunks=(100, 4)), _rows(Y))
    with pytest.raises(ValueError, match="y must be chunked by rows only"):
        model.fit(_rows(X), da.from_array(Y, chunks=(250, 2)))
    with pytest.raises(ValueError, match="X and y must have the same row chunks"):
        model.fit(_rows(X, 100), _rows(Y, 150))
    for name, value in [("leaf_step", "per_leaf"), ("subsample", 0.5),
                        ("n_iter_no_change", 3), ("loss", "absolute_error"),
                        ("device", "cuda")]:
        with pytest.raises(ValueError, match=name):
            gdask.GradientBoostingRegressor(**{name: value}).fit(_rows(X), _rows(Y))
    with pytest.raises(ValueError, match="X has 3 features"):
        gdask.GradientBoostingRegressor(n_estimators=1).fit(_rows(X), _rows(Y)).predict(
            _rows(X[:, :3]))
