"""Dense inputs whose codes are mostly zeros (text-like word presence) grow as sparse ones.

On the CPU the bin mapper lists such an X's entries other than 0.0 instead of
keeping its dense codes (:attr:`gpurpo.tree.binning.BinnedMatrix.dense_codes`),
exactly as it lists a sparse X's, so every node is split exactly from its
columns (:func:`gpurpo.tree.grower.default_small_node_size`). The codes are
those of a reference binning, and the trees are those of the histogram path on
the dense codes and of the sparse X.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
import scipy.sparse as sp

from gpurpo.backend import NUMPY
from gpurpo.tree import GrowthParams, grow_trees, kernels
from gpurpo.tree.binning import BinMapper
from gpurpo.tree.binning._sparse import MOSTLY_ZERO_SHARE

SPARSE_FIELDS = ("zero_code", "row_ptr", "row_features", "row_codes", "col_ptr", "col_rows",
                 "col_codes")


def _text_like(rng, n, p, density):
    X = (rng.random((n, p)) < density).astype(np.float64)
    targets = (X[:, :5] @ rng.normal(size=(5, 2 * 4))).reshape(n, 2, 4)
    return X, (targets + 0.5 * rng.normal(size=targets.shape)).astype(np.float32)


def _reference_codes(mapper, X):
    """``#{edges_f < x}`` per feature, NaN in the missing bin: (p, n) uint8."""
    codes = np.empty(X.shape[::-1], dtype=np.uint8)
    for f, edges in enumerate(mapper.edges_):
        codes[f] = np.searchsorted(edges, X[:, f], side="left")
        codes[f][np.isnan(X[:, f])] = mapper.missing_bin_
    return codes


@pytest.mark.parametrize("fused", [True, False], ids=["fit_transform", "transform"])
def test_a_mostly_zero_dense_x_is_binned_as_its_sparse_twin(fused):
    rng = np.random.default_rng(3)
    X = (rng.random((2000, 40)) < 0.04) * rng.exponential(size=(2000, 40))
    X[:, 3] = (rng.random(2000) < 0.02) * -2.0  # negative entries: the code of 0.0 above 0
    X[7, 5] = np.nan
    mapper = BinMapper(max_bins=32).fit(X)
    binned = BinMapper(max_bins=32).fit_transform(X, NUMPY) if fused else mapper.transform(
        X, NUMPY)
    twin = mapper.transform(sp.csr_matrix(X), NUMPY)
    assert binned.dense_codes is None and twin.dense_codes is None
    for name in SPARSE_FIELDS:
        got, want = getattr(binned.sparse_codes, name), getattr(twin.sparse_codes, name)
        assert got.dtype == want.dtype, name
        np.testing.assert_array_equal(got, want, err_msg=name)
    for name in ("subtracted_bin", "listed"):
        np.testing.assert_array_equal(getattr(binned, name), getattr(twin, name))
    np.testing.assert_array_equal(binned.codes, _reference_codes(mapper, X))


def test_only_mostly_zero_codes_are_listed():
    rng = np.random.default_rng(3)
    X, _ = _text_like(rng, 2000, 40, 0.04)
    assert BinMapper().fit_transform(X, NUMPY).dense_codes is None
    assert BinMapper().fit_transform(1.0 - X, NUMPY).dense_codes is not None  # mostly ones
    assert BinMapper().fit_transform(rng.normal(size=(2000, 40)), NUMPY).dense_codes is not None
    X[:, :8] = rng.normal(size=(2000, 8))  # 20 % continuous columns
    assert MOSTLY_ZERO_SHARE < 0.2
    assert BinMapper().fit_transform(X, NUMPY).dense_codes is not None
    # up to the share: 10 % of the codes other than 0.0 in every feature
    X = np.zeros((1000, 6))
    X[:100] = rng.normal(size=(100, 6))
    assert BinMapper().fit_transform(X, NUMPY).dense_codes is None
    X[100] = 1.0
    assert BinMapper().fit_transform(X, NUMPY).dense_codes is not None
    # no codes at all: nothing to list
    assert BinMapper().fit_transform(np.zeros((5, 0)), NUMPY).dense_codes.shape == (0, 5)


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
    listed = mapper.transform(X, NUMPY)
    dense = replace(listed, dense_codes=listed.codes, sparse_codes=None)
    grown = {}
    for name, binned, small in (("default", listed, None), ("histograms", dense, 4096),
                                ("sparse", mapper.transform(sp.csr_matrix(X), NUMPY), None)):
        calls.clear()
        params = GrowthParams(n_candidates=7, small_node_size=small)
        grown[name] = grow_trees(binned, targets, weights, params, np.random.default_rng(1),
                                 NUMPY)
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
