"""Shared fixtures of the Dask tests: a LocalCluster (one per module) of 2 worker processes, 1 thread each."""

import pytest


@pytest.fixture(scope="module")
def client():
    distributed = pytest.importorskip("distributed")
    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                       dashboard_address=":0", silence_logs=40)
    with distributed.Client(cluster) as c:
        yield c
    cluster.close()
