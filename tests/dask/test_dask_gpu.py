"""gpurpo.dask forests on CuPy chunks, run with ``pytest -m gpu`` on a machine with a GPU.

One worker per GPU: dask-cuda's ``LocalCUDACluster`` where it is installed, else
one in-process worker sharing the device. The reference is the single-machine
forest fitted on the GPU with the same ``random_state``.
"""

from __future__ import annotations

import numpy as np
import pytest

from gpurpo.backend import cupy_available

da = pytest.importorskip("dask.array")
distributed = pytest.importorskip("distributed")

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not cupy_available(), reason="needs CuPy and a working CUDA device"),
]


@pytest.fixture(scope="module")
def gpu_client():
    try:
        from dask_cuda import LocalCUDACluster
    except ImportError:
        cluster = distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=False,
                                           dashboard_address=None)
    else:
        cluster = LocalCUDACluster(dashboard_address=None)
    with distributed.Client(cluster) as client:
        yield client
    cluster.close()


@pytest.mark.parametrize("mode", ["replicate", "local"])
def test_forest_on_cupy_chunks_is_the_gpu_forest(gpu_client, mode):
    import cupy

    from gpurpo import dask as gdask
    from gpurpo.ensemble import RandomForestRegressor

    rng = np.random.default_rng(0)
    X = rng.normal(size=(4000, 12)).astype(np.float32)
    Y = np.tanh(X[:, :4]) @ rng.normal(size=(4, 6)) + 0.1 * rng.normal(size=(4000, 6))
    kw = dict(n_estimators=8, projection="gaussian", n_components=3, random_state=0)
    Xd = da.from_array(X, chunks=(1000, -1)).map_blocks(cupy.asarray)
    Yd = da.from_array(Y, chunks=(1000, -1)).map_blocks(cupy.asarray)
    fitted = gdask.RandomForestRegressor(**kw, data=mode, client=gpu_client).fit(Xd, Yd).to_local()
    reference = RandomForestRegressor(**kw).fit(cupy.asarray(X), cupy.asarray(Y))
    got = cupy.asnumpy(cupy.asarray(fitted.predict(cupy.asarray(X[:500]))))
    want = cupy.asnumpy(reference.predict(cupy.asarray(X[:500])))
    if mode == "replicate":
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
    else:
        # each worker's trees on its rows: one worker holds every row here
        assert np.corrcoef(got.ravel(), want.ravel())[0, 1] > 0.95


def test_predictions_of_cupy_chunks_declare_cupy_blocks(gpu_client):
    import cupy

    from gpurpo import dask as gdask
    from gpurpo.backend import is_gpu_array

    rng = np.random.default_rng(1)
    X = rng.normal(size=(2000, 6)).astype(np.float32)
    Y = X[:, :3] @ rng.normal(size=(3, 4))
    Xd = da.from_array(X, chunks=(500, -1)).map_blocks(cupy.asarray)
    Yd = da.from_array(Y, chunks=(500, -1)).map_blocks(cupy.asarray)
    model = gdask.RandomForestRegressor(n_estimators=4, random_state=0, client=gpu_client)
    pred = model.fit(Xd, Yd).predict(Xd)
    # the result's meta is of its blocks' kind, so that Dask concatenates them as CuPy
    assert is_gpu_array(pred._meta)
    got = pred.compute()
    assert is_gpu_array(got) and got.shape == (2000, 4)
    np.testing.assert_allclose(cupy.asnumpy(got),
                               cupy.asnumpy(model.to_local().predict(cupy.asarray(X))),
                               rtol=1e-6, atol=1e-6)
