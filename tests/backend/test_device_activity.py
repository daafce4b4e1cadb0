"""Device-activity counters: hand-counted sequences on the emulated backend, blocks, threads."""

from __future__ import annotations

import threading

import numpy as np
import pytest

import gpurpo.backend as gb
from gpurpo.backend import EMULATED, NUMPY, count_device_activity
from gpurpo.backend._device_arrays import DeviceArray

COUNTERS = ("launches", "d2h", "h2d", "syncs", "d2h_bytes", "h2d_bytes")


def _node_stats_inputs(xp, rng):
    """One node of 8 samples, 1 tree, m = 2: inputs and outputs of ``tree_node_stats``."""
    n, m = 8, 2
    weights = rng.uniform(0.5, 2.0, (1, n)).astype(np.float32)
    targets = rng.standard_normal((n, 1, m)).astype(np.float32)
    args = dict(
        sample_indices=np.arange(n, dtype=np.int32),
        node_ranges=np.array([[0, n]], dtype=np.int64),
        node_tree=np.zeros(1, dtype=np.int32),
        weights=weights,
        targets=targets,
        node_done=np.zeros(0, dtype=np.uint32),
        out_impure=np.zeros(1, dtype=np.uint8),
        out_q=np.zeros(1, dtype=np.float64),
    )
    q = float((weights[0].astype(np.float64) * (targets[:, 0].astype(np.float64) ** 2).sum(1)).sum())
    return args, q


def _counts(activity):
    return {k: getattr(activity, k) for k in COUNTERS}


def test_hand_counted_sequence():
    from gpurpo.tree._kernels_cuda import node_stats

    host = np.arange(12, dtype=np.float64)
    kernel_args, q = _node_stats_inputs(np, np.random.default_rng(0))
    with count_device_activity() as activity:
        xp = EMULATED.xp
        x = EMULATED.asarray(host)  # h2d: 96 bytes
        y = x * 2.0  # launch 1
        z = y + x  # launch 2
        w = xp.sqrt(z)  # launch 3
        total = w.sum()  # launch 4
        idx = EMULATED.asarray(np.array([3, 1, 2]))  # h2d: 24 bytes
        picked = w[idx]  # launch 5 (gather)
        # views, reshapes and allocation without fill start no kernel
        _ = (w[2:5], w.reshape(3, 4), w[None, :].T, xp.empty(4), x.shape, len(x))
        node_stats(EMULATED, **kernel_args)  # launch 6 (tree_node_stats.cu)
        on_host = EMULATED.to_host(picked)  # d2h: 24 bytes
        value = float(total)  # d2h: 8 bytes
    assert _counts(activity) == dict(launches=6, d2h=2, h2d=2, syncs=2, d2h_bytes=32,
                                     h2d_bytes=120)
    expected = np.sqrt(3 * host)
    assert type(on_host) is np.ndarray
    np.testing.assert_allclose(on_host, expected[[3, 1, 2]])
    assert value == pytest.approx(expected.sum())
    np.testing.assert_allclose(kernel_args["out_q"], [q], rtol=1e-6)


def test_conversions_and_data_dependent_sizes_synchronise():
    with count_device_activity() as activity:
        xp = EMULATED.xp
        a = xp.arange(5)  # launch
        assert isinstance(a, DeviceArray)
        assert int(a[1]) == 1 and bool(a[2]) and a[3].item() == 3  # 3 d2h of 8 bytes
        assert a.tolist() == [0, 1, 2, 3, 4]  # d2h of 40 bytes
        assert isinstance(a.get(), np.ndarray)  # d2h of 40 bytes
        assert [0, 1, 2][a[2]] == 2  # operator.index: d2h of 8 bytes
    assert _counts(activity) == dict(launches=1, d2h=6, h2d=0, syncs=6, d2h_bytes=112,
                                     h2d_bytes=0)
    with count_device_activity() as activity:
        xp = EMULATED.xp
        a = xp.arange(6)  # launch
        mask = a > 2  # launch
        (nz,) = xp.nonzero(mask)  # launch, reads the count back
        kept = a[mask]  # launch, reads the count back
        a[mask] = 0  # launch
    assert _counts(activity) == dict(launches=5, d2h=2, h2d=0, syncs=2, d2h_bytes=16,
                                     h2d_bytes=0)
    np.testing.assert_array_equal(nz, [3, 4, 5])
    np.testing.assert_array_equal(kept, [3, 4, 5])
    np.testing.assert_array_equal(a, [0, 1, 2, 0, 0, 0])


def test_methods_functions_and_host_operands():
    rng = np.random.default_rng(1)
    host = rng.standard_normal(10)
    ones = np.ones(10)
    with count_device_activity() as activity:
        xp = EMULATED.xp
        x = xp.asarray(host.copy())  # h2d of 80 bytes
        order = x.argsort()  # launch
        as32 = x.astype(np.float32)  # launch
        same = x.astype(np.float64, copy=False)  # the array itself: no launch
        contiguous = xp.ascontiguousarray(x, dtype=np.float64)  # the array itself: no launch
        every_other = xp.ascontiguousarray(x[::2])  # a copy: launch
        mean = np.mean(x)  # launch (a NumPy function on a device array)
        cum = xp.cumsum(x)  # launch
        x += 1.0  # launch, in place
        shifted = x - ones  # launch, and host data to the device: h2d of 80 bytes
        zeros = xp.zeros(0)  # an empty result starts no kernel
    assert _counts(activity) == dict(launches=7, d2h=0, h2d=2, syncs=0, d2h_bytes=0,
                                     h2d_bytes=160)
    assert same is x and isinstance(x, DeviceArray)
    assert np.shares_memory(contiguous, x) and not np.shares_memory(every_other, x)
    np.testing.assert_array_equal(every_other, host[::2])
    np.testing.assert_array_equal(order, np.argsort(host))
    np.testing.assert_array_equal(as32, host.astype(np.float32))
    np.testing.assert_allclose([float(mean)], [host.mean()])
    np.testing.assert_allclose(cum, np.cumsum(host))
    np.testing.assert_allclose(shifted, host)
    assert zeros.shape == (0,)


def test_nothing_changes_or_counts_outside_blocks():
    assert EMULATED.xp is np
    assert type(EMULATED.asarray(np.ones(3))) is np.ndarray
    with count_device_activity() as activity:
        leaked = EMULATED.asarray(np.arange(4.0))
    before = _counts(activity)
    # a device array used after every block closed: nothing is counted any more
    assert float((leaked * 2).sum()) == 12.0
    assert type(EMULATED.to_host(leaked)) is np.ndarray
    assert _counts(activity) == before == dict(launches=0, d2h=0, h2d=1, syncs=0, d2h_bytes=0,
                                               h2d_bytes=32)


def test_numpy_backend_is_not_counted():
    with count_device_activity() as activity:
        assert NUMPY.xp is np
        x = NUMPY.asarray(np.arange(5.0))
        assert type(x) is np.ndarray
        float(NUMPY.xp.sqrt(x).sum())
        NUMPY.to_host(x)
    assert _counts(activity) == dict.fromkeys(COUNTERS, 0)


def test_nested_blocks_add_up():
    with count_device_activity() as outer:
        x = EMULATED.asarray(np.arange(3.0))
        with count_device_activity() as inner:
            y = x + 1
        float(y.sum())
    assert (inner.launches, inner.h2d, inner.d2h) == (1, 0, 0)
    assert (outer.launches, outer.h2d, outer.d2h) == (2, 1, 1)


def test_threads_in_one_block_are_all_counted():
    n_threads, rounds = 4, 200
    barrier = threading.Barrier(n_threads)

    def work() -> None:
        xp = EMULATED.xp
        a = xp.arange(8, dtype=xp.float32)  # one launch
        barrier.wait()
        for _ in range(rounds):
            a = a + 1.0  # one launch
            float(a[0])  # one d2h of 4 bytes

    with count_device_activity() as activity:
        threads = [threading.Thread(target=work) for _ in range(n_threads)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert activity.launches == n_threads * (rounds + 1)
    assert activity.d2h == activity.syncs == n_threads * rounds
    assert activity.d2h_bytes == 4 * n_threads * rounds


class _FakeKernel:
    """Stands in for a ``cupy.RawKernel``: records its calls."""

    def __init__(self):
        self.calls = []
        self.max_dynamic_shared_size_bytes = 48 * 1024

    def __call__(self, grid, block, args, shared_mem=0):
        self.calls.append((grid, block, args, shared_mem))


class _FakeModule:
    def __init__(self):
        self.kernels = {}
        self.code = "source"

    def get_function(self, name):
        return self.kernels.setdefault(name, _FakeKernel())


def test_counted_cupy_modules_count_launches_and_keep_attributes():
    from gpurpo.backend._sources import CountedModule

    module = CountedModule(_FakeModule())
    kernel = module.get_function("k")
    kernel.max_dynamic_shared_size_bytes = 100 * 1024
    assert module.code == "source"
    assert module._module.kernels["k"].max_dynamic_shared_size_bytes == 100 * 1024
    kernel((1,), (32,), (1, 2))
    with count_device_activity() as activity:
        kernel((2,), (64,), (3,), shared_mem=16)
        module.get_function("k")((1,), (32,), ())
    assert activity.launches == 2
    assert module._module.kernels["k"].calls[1] == ((2,), (64,), (3,), 16)


def _regression_data(n=160, p=8, m=3, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, p)).astype(np.float32)
    Y = (X[:, :m] * X[:, m : 2 * m] + 0.2 * rng.standard_normal((n, m))).astype(np.float32)
    return X, Y


@pytest.mark.parametrize("kind", ["forest", "boosting", "sparse forest"])
def test_a_fit_inside_a_block_is_the_fit_outside(kind):
    # inside a block the emulated backend's xp is not numpy itself, so code written
    # ``if xp is np`` takes its CuPy branch there (the sparse binning, segment helpers)
    import scipy.sparse as sp

    from gpurpo.ensemble import (
        GradientBoostingRegressor,
        RandomForestClassifier,
        RandomForestRegressor,
    )

    X, Y = _regression_data()
    if kind == "forest":
        def make():
            return RandomForestRegressor(n_estimators=2, max_features=4, random_state=0,
                                         device="cuda-emulated")
    elif kind == "boosting":
        def make():
            return GradientBoostingRegressor(strategy="relabel_rpo", n_estimators=2,
                                             random_state=0, device="cuda-emulated")
    else:
        X = sp.random(160, 30, density=0.1, format="csr", random_state=1, dtype=np.float32)
        Y = (Y > 0).astype(np.float64)

        def make():
            return RandomForestClassifier(n_estimators=2, max_features=6, random_state=0,
                                          device="cuda-emulated")

    def predict(model):
        return model.predict_proba(X) if kind == "sparse forest" else model.predict(X)

    plain = predict(make().fit(X, Y))
    with count_device_activity() as activity:
        counted = make().fit(X, Y)
    assert activity.launches > 0 and activity.d2h > 0 and activity.h2d > 0
    assert activity.syncs >= activity.d2h
    predicted = predict(counted)
    assert type(predicted) is np.ndarray
    np.testing.assert_array_equal(predicted, plain)


# --------------------------------------------------------------------------
# the CuPy backend (pytest -m gpu)
# --------------------------------------------------------------------------


@pytest.mark.gpu
@pytest.mark.skipif(not gb.cupy_available(),
                    reason=f"needs CuPy and a working CUDA device: {gb._cupy._cupy_status()[1]}")
def test_cupy_counts_kernels_namespace_calls_and_copies():
    from gpurpo.tree._kernels_cuda import node_stats

    cupy = pytest.importorskip("cupy")
    host_args, q = _node_stats_inputs(np, np.random.default_rng(3))
    dev_args = {k: cupy.asarray(v) for k, v in host_args.items()}
    host = np.arange(12, dtype=np.float64)
    with count_device_activity() as activity:
        x = gb.CUPY.asarray(host)  # h2d: 96 bytes
        z = gb.CUPY.xp.zeros(4)  # launch 1 (a namespace call)
        s = gb.CUPY.xp.sum(x)  # launch 2
        node_stats(gb.CUPY, **dev_args)  # launch 3 (tree_node_stats.cu)
        back = gb.CUPY.to_host(x)  # d2h: 96 bytes
    assert _counts(activity) == dict(launches=3, d2h=1, h2d=1, syncs=1, d2h_bytes=96,
                                     h2d_bytes=96)
    np.testing.assert_array_equal(back, host)
    assert float(s) == host.sum() and z.shape == (4,)
    np.testing.assert_allclose(dev_args["out_q"].get(), [q], rtol=1e-6)
