"""gpurpo.dask's forests on a LocalCluster of 2 worker processes.

References: the gpurpo.ensemble forest with the same parameters and
random_state on the same in-memory data (data="replicate" must grow exactly
its trees; data="local" must rank labels as well), and the local forest of
to_local() for the predictions on Dask arrays.
"""

import os
import pickle
import signal
import threading
import time

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.base import clone

da = pytest.importorskip("dask.array")
distributed = pytest.importorskip("distributed")

from gpurpo import dask as gdask  # noqa: E402
from gpurpo import ensemble  # noqa: E402
from gpurpo.dask._cluster import Cluster  # noqa: E402
from gpurpo.datasets import make_multilabel  # noqa: E402
from gpurpo.metrics import label_ranking_average_precision  # noqa: E402


def _regression(n=240, p=6, d=4, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n + 60, p))
    X[rng.random(X.shape) < 0.4] = 0.0  # zeros, so the CSR blocks hold fewer entries
    Y = np.tanh(X[:, :3]) @ rng.normal(size=(3, d)) + 0.1 * rng.normal(size=(n + 60, d))
    return X[:n], Y[:n], X[n:]


def _rows(A, rows=70):
    return da.from_array(A, chunks=(rows,) + A.shape[1:])


def _same_trees(local, ref, X_test):
    assert type(local) is type(ref)
    np.testing.assert_array_equal(local.bin_mapper_.edge_values_, ref.bin_mapper_.edge_values_)
    assert len(local.estimators_) == len(ref.estimators_)
    for a, b in zip(local.estimators_, ref.estimators_):
        np.testing.assert_array_equal(a.structure.feature, b.structure.feature)
        np.testing.assert_array_equal(a.structure.threshold, b.structure.threshold)
    np.testing.assert_array_equal(local.apply(X_test), ref.apply(X_test))


def test_no_client_runs_on_dask_default_scheduler():
    if Cluster().client is not None:
        pytest.skip("a distributed client is active")
    X, Y, X_test = _regression()
    kw = dict(n_estimators=4, random_state=0, max_depth=4)
    est = gdask.ExtraTreesRegressor(**kw).fit(_rows(X), _rows(Y))
    ref = ensemble.ExtraTreesRegressor(**kw).fit(X, Y)
    np.testing.assert_array_equal(est.predict(X_test), ref.predict(X_test))


@pytest.mark.parametrize("projection", [None, "gaussian"])
@pytest.mark.parametrize("sparse", [False, True], ids=["dense", "csr"])
def test_replicate_grows_the_single_machine_regressor(client, projection, sparse):
    X, Y, X_test = _regression()
    if sparse:
        X, X_test = sp.csr_matrix(X), sp.csr_matrix(X_test)
    kw = dict(n_estimators=6, projection=projection, n_components=2, max_features=0.5,
              random_state=7)
    est = gdask.RandomForestRegressor(**kw).fit(_rows(X), _rows(Y))
    ref = ensemble.RandomForestRegressor(**kw).fit(X, Y)
    _same_trees(est.to_local(), ref, X_test)
    np.testing.assert_array_equal(est.predict(X_test), ref.predict(X_test))
    assert est.n_outputs_ == 4 and est.n_features_in_ == 6


@pytest.mark.parametrize("projection", [None, "gaussian"])
@pytest.mark.parametrize("sparse", [False, True], ids=["dense", "csr"])
def test_replicate_grows_the_single_machine_classifier(client, projection, sparse):
    X, Y, X_test = _regression(seed=1)
    Y01 = (Y > 0.3).astype(np.int64)
    if sparse:
        X, X_test = sp.csr_matrix(X), sp.csr_matrix(X_test)
    kw = dict(n_estimators=6, projection=projection, n_components=2, random_state=3)
    est = gdask.RandomForestClassifier(**kw).fit(_rows(X), _rows(Y01))
    ref = ensemble.RandomForestClassifier(**kw).fit(X, Y01)
    _same_trees(est.to_local(), ref, X_test)
    np.testing.assert_array_equal(est.predict_proba(X_test), ref.predict_proba(X_test))


def test_replicate_single_label_classes_and_sample_weight(client):
    X, Y, X_test = _regression(seed=2)
    y = np.array(["a", "b", "c"])[(Y[:, 0] > 0).astype(int) + (Y[:, 1] > 0.5)]
    w = np.random.default_rng(0).integers(0, 3, size=y.shape[0]).astype(float)
    # batches of one tree: more batches than ranges, grouped into ranges
    kw = dict(n_estimators=10, random_state=11, max_depth=6, batch_size=1)
    est = gdask.ExtraTreesClassifier(**kw).fit(_rows(X), _rows(y), sample_weight=_rows(w))
    ref = ensemble.ExtraTreesClassifier(**kw).fit(X, y, sample_weight=w)
    _same_trees(est.to_local(), ref, X_test)
    np.testing.assert_array_equal(est.classes_, ["a", "b", "c"])
    np.testing.assert_array_equal(est.predict(X_test), ref.predict(X_test))


def test_local_mode_ranks_labels_as_well_as_the_single_machine_forest(client):
    X, Y = make_multilabel(6000, 4, 8, n_informative=4, noise=0.0, label_cardinality=2.0,
                           random_state=0, sparse_output=False)
    X_train, Y_train, X_test, Y_test = X[:3000], Y[:3000], X[3000:], Y[3000:]
    kw = dict(n_estimators=48, projection="gaussian", n_components=4, min_samples_leaf=10,
              random_state=0)
    est = gdask.RandomForestClassifier(data="local", **kw).fit(
        _rows(X_train, 750), _rows(Y_train, 750))
    ref = ensemble.RandomForestClassifier(**kw).fit(X_train, Y_train)
    lrap = label_ranking_average_precision(Y_test, est.predict_proba(X_test))
    lrap_ref = label_ranking_average_precision(Y_test, ref.predict_proba(X_test))
    assert abs(lrap - lrap_ref) <= 0.01, (lrap, lrap_ref)
    records = est.to_local()._sampling_records
    # each worker's trees drew from its own rows only, and every tree was grown once
    assert sum(r.n_samples for r in records) == 3000
    assert sum(r.stop - r.start for r in records) == 48
    assert sorted((r.start, r.stop) for r in records)[0][0] == 0


def test_to_local_pickles_and_predicts_without_dask(client):
    X, Y, X_test = _regression(seed=3)
    est = gdask.ExtraTreesRegressor(n_estimators=4, random_state=0).fit(_rows(X), _rows(Y))
    local = est.to_local()
    assert type(local) is ensemble.ExtraTreesRegressor
    back = pickle.loads(pickle.dumps(local))
    np.testing.assert_array_equal(back.predict(X_test), local.predict(X_test))
    again = pickle.loads(pickle.dumps(est))  # the client is left out
    assert again.client is None
    np.testing.assert_array_equal(again.predict(X_test), local.predict(X_test))
    # the local forest warm-starts into the single-machine forest with more trees
    back.set_params(warm_start=True, n_estimators=7).fit(X, Y)
    ref = ensemble.ExtraTreesRegressor(n_estimators=7, random_state=0).fit(X, Y)
    np.testing.assert_array_equal(back.predict(X_test), ref.predict(X_test))


def test_predictions_on_dask_arrays_are_the_local_ones(client):
    X, Y, X_test = _regression(seed=4)
    Y01 = (Y > 0).astype(np.int64)
    est = gdask.RandomForestClassifier(n_estimators=5, random_state=0).fit(_rows(X), _rows(Y01))
    local = est.to_local()
    X_dask = _rows(X_test, 25)
    proba = est.predict_proba(X_dask)
    assert isinstance(proba, da.Array) and proba.chunks[0] == X_dask.chunks[0]
    np.testing.assert_array_equal(proba.compute(), local.predict_proba(X_test))
    np.testing.assert_array_equal(est.predict(X_dask).compute(), local.predict(X_test))
    indices, scores = est.predict_top_k(X_dask, k=2)
    want_indices, want_scores = local.predict_top_k(X_test, k=2)
    np.testing.assert_array_equal(indices.compute(), want_indices)
    np.testing.assert_array_equal(scores.compute(), want_scores)
    reg = gdask.RandomForestRegressor(n_estimators=3, random_state=0).fit(_rows(X), _rows(Y[:, 0]))
    pred = reg.predict(X_dask)
    assert pred.shape == (X_test.shape[0],)
    np.testing.assert_array_equal(pred.compute(), reg.to_local().predict(X_test))


def test_progress_bar_counts_the_trees(client, capsys):
    X, Y, _ = _regression(seed=5)
    gdask.ExtraTreesRegressor(n_estimators=7, random_state=0, verbose=1).fit(_rows(X), _rows(Y))
    assert "7/7" in capsys.readouterr().err


def _X():
    return da.ones((20, 3), chunks=(10, 3))


def _y():
    return da.ones((20,), chunks=10)


@pytest.mark.parametrize(
    "X, y, params, error, match",
    [
        (lambda: np.ones((20, 3)), _y, {}, TypeError, "X must be a dask.array.Array, got ndarray"),
        (_X, lambda: np.ones(20), {}, TypeError, "y must be a dask.array.Array, got ndarray"),
        (lambda: da.ones(20, chunks=10), _y, {}, ValueError, r"X must be a 2-D dask array"),
        (_X, lambda: da.ones((20, 2, 2), chunks=10), {}, ValueError, "y must be a 1-D or 2-D"),
        (lambda: da.ones((20, 3), chunks=(10, 2)), _y, {}, ValueError,
         "X must be chunked by rows only"),
        (_X, lambda: da.ones((20, 4), chunks=(10, 2)), {}, ValueError,
         "y must be chunked by rows only"),
        (_X, lambda: da.ones(20, chunks=5), {}, ValueError,
         "X and y must have the same row chunks"),
        (lambda: da.ones((20, 3), chunks=(10, 3), dtype=complex), _y, {}, ValueError,
         "Complex data not supported: X"),
        (_X, lambda: da.ones(20, chunks=10, dtype=complex), {}, ValueError,
         "Complex data not supported: y"),
        (_X, _y, {"data": "everywhere"}, ValueError, "data must be one of"),
        (_X, _y, {"warm_start": True}, ValueError, "warm_start"),
        (_X, _y, {"oob_score": True}, ValueError, "oob_score"),
        (_X, _y, {"projection": "nope"}, ValueError, "projection must be None"),
        (_X, _y, {"max_depth": 0}, ValueError, "max_depth must be >= 1"),
        (_X, _y, {"max_binned_bytes": 0}, ValueError, "max_binned_bytes must be >= 1"),
    ],
)
def test_bad_input_is_caught_from_the_metadata(X, y, params, error, match):
    with pytest.raises(error, match=match):
        gdask.RandomForestRegressor(n_estimators=2, **params).fit(_untouchable(X()),
                                                                  _untouchable(y()))


def _never(block):
    raise AssertionError("a task ran")


def _untouchable(a):
    """``a`` whose blocks fail when computed: the errors must come from the metadata."""
    if not isinstance(a, da.Array):
        return a
    return a.map_blocks(_never, dtype=a.dtype, meta=np.empty((0,) * a.ndim, dtype=a.dtype))


def test_bad_sample_weight_and_prediction_inputs_are_named(client):
    with pytest.raises(ValueError, match=r"sample_weight must have shape \(n_samples,\) = \(20,\)"):
        gdask.RandomForestRegressor(2).fit(_X(), _y(), sample_weight=da.ones(12, chunks=6))
    est = gdask.RandomForestRegressor(2, random_state=0).fit(_X(), _y())
    with pytest.raises(ValueError, match="X must be chunked by rows only"):
        est.predict(da.ones((20, 3), chunks=(10, 2)))
    with pytest.raises(ValueError, match="X has 4 features, but RandomForestRegressor"):
        est.predict(da.ones((20, 4), chunks=(10, 4)))


def test_parameters_are_those_of_the_local_estimator_plus_client_and_data(client):
    local = ensemble.RandomForestClassifier().get_params()
    params = gdask.RandomForestClassifier(n_estimators=3, data="local").get_params()
    assert set(params) == set(local) | {"client", "data"}
    assert params["n_estimators"] == 3 and params["data"] == "local" and params["client"] is None
    copy = clone(gdask.ExtraTreesRegressor(max_depth=3, client=client))
    assert copy.max_depth == 3 and copy.client is client  # the client is shared, not copied


def test_a_lost_worker_costs_only_its_ranges():
    X, Y, X_test = _regression(n=1500, p=10, d=6, seed=6)
    kw = dict(n_estimators=24, projection="gaussian", n_components=3, random_state=5)
    ref = ensemble.RandomForestRegressor(**kw).fit(X, Y)
    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                       dashboard_address=":0", silence_logs=50)
    with cluster, distributed.Client(cluster, set_as_default=False) as client:
        est = gdask.RandomForestRegressor(client=client, **kw)
        failure = []

        def fit():
            try:
                est.fit(_rows(X, 300), _rows(Y, 300))
            except BaseException as exc:  # handed to the test thread
                failure.append(exc)

        thread = threading.Thread(target=fit)
        thread.start()
        victim = None
        deadline = time.monotonic() + 60
        while victim is None and thread.is_alive() and time.monotonic() < deadline:
            for worker, keys in client.processing().items():
                if any("grow_range" in str(key) for key in keys):
                    victim = worker
                    break
            time.sleep(0.01)
        assert victim is not None, "no range of trees was seen running"
        pid = client.run(os.getpid, workers=[victim])[victim]
        os.kill(pid, signal.SIGKILL)  # the worker process dies; its nanny starts a new one
        thread.join(120)
        assert not thread.is_alive() and not failure, failure
        assert victim not in client.scheduler_info()["workers"]  # the worker was lost
    _same_trees(est.to_local(), ref, X_test)
    np.testing.assert_array_equal(est.to_local().predict(X_test), ref.predict(X_test))
