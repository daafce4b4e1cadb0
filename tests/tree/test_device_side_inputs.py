"""Inputs that live on the device reach the host-orchestrated grower through the backend.

CuPy refuses to turn a device array into a NumPy array implicitly (``np.asarray``
raises TypeError), where the emulated backend's arrays, NumPy arrays, pass. These
tests hand the growers data that refuses it too, as CuPy's would, and check that it
is brought to the host by ``Backend.to_host``.
"""

from __future__ import annotations

import numpy as np
import pytest

from gpurpo.backend import NUMPY, Backend, bincount
from gpurpo.tree import GrowthParams, grow_tree_best_first, grow_trees
from gpurpo.tree.binning import BinMapper
from gpurpo.tree.grower import draw_root_seeds


class _OnDevice:
    """An array that, like a CuPy array, converts to NumPy only through ``to_host``."""

    def __init__(self, array: np.ndarray) -> None:
        self.array = array
        self.shape = array.shape

    def __array__(self, *args, **kwargs):
        raise TypeError("Implicit conversion to a NumPy array is not allowed")


@pytest.fixture
def device_to_host(monkeypatch):
    original = Backend.to_host

    def to_host(self, a, pinned=False):
        return a.array if isinstance(a, _OnDevice) else original(self, a, pinned)

    monkeypatch.setattr(Backend, "to_host", to_host)


@pytest.mark.parametrize("best_first", [False, True])
def test_root_seeds_on_the_device(best_first, device_to_host):
    rng = np.random.default_rng(0)
    n, p, T, m = 300, 6, 2, 4  # gradients and hessians: the newton criterion's targets
    X = rng.normal(size=(n, p))
    targets = np.concatenate([rng.normal(size=(n, T, m // 2)),
                              rng.uniform(0.5, 1.5, size=(n, T, m // 2))], axis=2)
    binned = BinMapper(max_bins=16).fit(X).transform(X, NUMPY)
    seeds = draw_root_seeds(np.random.default_rng(1), T)
    if best_first:
        params, grow = GrowthParams(max_leaf_nodes=8, criterion="newton"), grow_tree_best_first
    else:
        params, grow = GrowthParams(max_depth=4, criterion="newton"), grow_trees
    targets = targets.astype(np.float32)
    weights = np.ones((T, n), np.float32)
    want = grow(binned, targets, weights, params, np.random.default_rng(2), NUMPY,
                root_seeds=seeds)
    got = grow(binned, targets, weights, params, np.random.default_rng(2), NUMPY,
               root_seeds=_OnDevice(seeds))
    np.testing.assert_array_equal(got.leaf_of_sample, want.leaf_of_sample)
    assert [s.node_count for s in got.structures] == [s.node_count for s in want.structures]
    assert sum(s.node_count for s in want.structures) > 2 * T


class _CupyBefore142:
    """The NumPy namespace with CuPy < 14.2's ``bincount``, which reduces ``max(x)`` and so
    raises on an empty ``x`` whatever ``minlength``."""

    def __getattr__(self, name):
        return getattr(np, name)

    @staticmethod
    def bincount(x, weights=None, minlength=0):
        if x.shape[0] == 0:
            raise ValueError("zero-size array to reduction operation which has no identity")
        return np.bincount(x, weights=weights, minlength=minlength)


@pytest.mark.parametrize("weights", [None, np.ones(0)])
def test_bincount_of_nothing_is_zeros(weights):
    xp = _CupyBefore142()
    got = bincount(xp, np.empty(0, np.int64), 4, weights=weights)
    want = np.bincount(np.empty(0, np.int64), weights=weights, minlength=4)
    np.testing.assert_array_equal(got, want)
    assert got.dtype == (np.int64 if weights is None else np.float64)
    np.testing.assert_array_equal(bincount(xp, np.array([2, 0, 2]), 4), [1, 0, 2, 0])
