"""Dense inputs whose codes are mostly zeros (text-like word presence) grow as sparse ones.

On the CPU such an X takes no histogram (:func:`gpurpo.tree.grower.mostly_zero`,
:func:`gpurpo.tree.grower.default_small_node_size`): every node is split exactly
from its samples, as for a sparse X. The trees are those of the histogram path
and of the sparse X.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from gpurpo.backend import NUMPY
from gpurpo.tree import GrowthParams, grow_trees, kernels
from gpurpo.tree.binning import BinMapper
from gpurpo.tree.grower import MOSTLY_ZERO_SHARE, mostly_zero


def _text_like(rng, n, p, density):
    X = (rng.random((n, p)) < density).astype(np.float64)
    targets = (X[:, :5] @ rng.normal(size=(5, 2 * 4))).reshape(n, 2, 4)
    return X, (targets + 0.5 * rng.normal(size=targets.shape)).astype(np.float32)


def test_mostly_zero_counts_the_codes_other_than_each_features_zero():
    rng = np.random.default_rng(3)
    X, _ = _text_like(rng, 2000, 40, 0.04)
    assert mostly_zero(BinMapper().fit_transform(X, NUMPY))
    assert not mostly_zero(BinMapper().fit_transform(1.0 - X, NUMPY))  # mostly ones
    dense = rng.normal(size=(2000, 40))
    assert not mostly_zero(BinMapper().fit_transform(dense, NUMPY))
    X[:, :8] = rng.normal(size=(2000, 8))  # 20 % continuous columns
    assert MOSTLY_ZERO_SHARE < 0.2 and not mostly_zero(BinMapper().fit_transform(X, NUMPY))


def test_mostly_zero_dense_x_grows_without_histograms_the_same_trees(monkeypatch):
    rng = np.random.default_rng(8)
    X, targets = _text_like(rng, 9000, 50, 0.05)
    weights = rng.integers(0, 3, size=(2, 9000)).astype(np.float32)
    calls = []
    build = kernels.build_histograms

    def counted(*args, **kwargs):
        calls.append(1)
        return build(*args, **kwargs)

    monkeypatch.setattr(kernels, "build_histograms", counted)
    mapper = BinMapper().fit(X)
    grown = {}
    for name, data, small in (("default", X, None), ("histograms", X, 4096),
                              ("sparse", sp.csr_matrix(X), None)):
        calls.clear()
        params = GrowthParams(n_candidates=7, small_node_size=small)
        grown[name] = grow_trees(mapper.transform(data, NUMPY), targets, weights, params,
                                 np.random.default_rng(1), NUMPY)
        assert bool(calls) == (name == "histograms"), name
    for name in ("histograms", "sparse"):
        for a, b in zip(grown["default"].structures, grown[name].structures):
            assert a.node_count > 500
            for field in ("feature", "threshold", "n_node_samples"):
                # the paths number the nodes alike up to the order of the tree's nodes
                np.testing.assert_array_equal(np.sort(getattr(a, field)),
                                              np.sort(getattr(b, field)), err_msg=field)
        # the same partition of the samples into leaves, whatever the leaves' numbers
        for a, b in zip(np.asarray(grown["default"].leaf_of_sample),
                        np.asarray(grown[name].leaf_of_sample)):
            np.testing.assert_array_equal(a < 0, b < 0)
            pairs = np.unique(np.stack([a, b]), axis=1)
            assert pairs.shape[1] == np.unique(a).size == np.unique(b).size
