"""Two-valued features scanned over bit sets in the subtree kernel's codes blocks.

The blocks of text-like X hold a bit set per two-valued feature
(:func:`gpurpo.tree._numba.tree_grow_subtrees._pack_bits`), which large nodes
count and sum instead of their codes (:func:`gpurpo.tree._numba._feature_scan._scan_bits8`).
The trees are those of level-wise growth on histograms, which read no block.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from gpurpo.backend import NUMPY
from gpurpo.tree import GrowthParams, grow_trees
from gpurpo.tree.binning import BinMapper


def _columns(rng, n):
    """Word presence columns (4 % ones), and two-valued columns of other kinds: balanced
    (no subtracted bin), mostly ones (the ones subtracted), with NaN in a few rows."""
    X = (rng.random((n, 48)) < 0.04).astype(np.float64)
    X[:, 0] = rng.random(n) < 0.5
    X[:, 1] = rng.random(n) < 0.95
    X[:, 2] = np.where(rng.random(n) < 0.01, np.nan, (rng.random(n) < 0.1).astype(float))
    X[:, 3] = 2.0 * (rng.random(n) < 0.5) - 7.0  # values -7 and -5 (the code of 0.0 above both)
    return X


@pytest.mark.parametrize("codes", ["listed", "dense"])
@pytest.mark.parametrize("n_trees, n_outputs", [(1, 8), (2, 3)])
def test_bit_sets_give_the_trees_of_histograms(n_trees, n_outputs, codes):
    rng = np.random.default_rng(5)
    n = 3000
    X = _columns(rng, n)
    signal = np.nan_to_num(X[:, :6]) @ rng.normal(size=(6, n_trees * n_outputs))
    targets = (signal + 0.3 * rng.normal(size=signal.shape)).astype(np.float32)
    targets = targets.reshape(n, n_trees, n_outputs)
    weights = rng.integers(0, 3, size=(n_trees, n)).astype(np.float32)
    binned = BinMapper().fit_transform(X, NUMPY)
    assert binned.dense_codes is None  # mostly zeros: the entries other than 0.0 listed
    if codes == "dense":
        # blocks filled from the dense codes, the histograms built from them
        binned = replace(binned, dense_codes=binned.codes, sparse_codes=None)
    grown = {}
    for name, small, subtree in (("blocks", None, None), ("histograms", 0, 0)):
        params = GrowthParams(n_candidates=9, small_node_size=small, subtree_size=subtree)
        grown[name] = grow_trees(binned, targets, weights, params, np.random.default_rng(2),
                                 NUMPY)
    for a, b in zip(grown["blocks"].structures, grown["histograms"].structures):
        assert a.node_count > 1000
        for field in ("feature", "threshold", "n_node_samples"):
            # the paths number the nodes alike up to the order of the tree's nodes
            np.testing.assert_array_equal(np.sort(getattr(a, field)),
                                          np.sort(getattr(b, field)), err_msg=field)
    for a, b in zip(np.asarray(grown["blocks"].leaf_of_sample),
                    np.asarray(grown["histograms"].leaf_of_sample)):
        np.testing.assert_array_equal(a < 0, b < 0)
        pairs = np.unique(np.stack([a, b]), axis=1)
        assert pairs.shape[1] == np.unique(a).size == np.unique(b).size
