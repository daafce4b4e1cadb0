"""``tree_neighbour_values``: the emulated CUDA kernel and the numba kernel against a Python walk.

Each internal node's largest value sent left and smallest sent right, over the rows
of nonzero weight of each tree; dense (float32, float64, NaN) and CSR X; negative
values and both zeros exercise the order keys of the CUDA atomics.
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from _packed_trees import random_packed_trees

from gpurpo.backend import EMULATED, NUMPY
from gpurpo.tree import traversal


def _reference(dense, weights, trees):
    feature, threshold, missing, left, right, roots = trees
    low = np.full(feature.shape[0], -np.inf)
    high = np.full(feature.shape[0], np.inf)
    for t, root in enumerate(roots):
        for i in np.flatnonzero(weights[t] > 0):
            node = root
            while feature[node] >= 0:
                x = float(dense[i, feature[node]])
                if np.isnan(x):
                    node = left[node] if missing[node] else right[node]
                elif x <= threshold[node]:
                    low[node] = max(low[node], x)
                    node = left[node]
                else:
                    high[node] = min(high[node], x)
                    node = right[node]
    return low, high


def _problem(seed, dtype, n=120, p=6, n_trees=5):
    rng = np.random.default_rng(seed)
    trees = random_packed_trees(rng, n_trees, p, max_splits=11, decimals=1)
    dense = np.round(rng.normal(size=(n, p)), 1).astype(dtype)
    dense[rng.random(dense.shape) < 0.1] = np.nan
    dense[rng.random(dense.shape) < 0.05] = -0.0
    weights = (rng.integers(0, 3, size=(n_trees, n)) * (rng.random((n_trees, n)) < 0.8))
    return trees, dense, weights.astype(np.float32)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_dense_rows_match_the_python_walk(dtype):
    trees, dense, weights = _problem(0, dtype)
    want = _reference(dense, weights, trees)
    for backend in (NUMPY, EMULATED):
        got = traversal.neighbour_values(backend, dense, weights, *trees)
        for g, w in zip(got, want):
            assert g.dtype == np.float64
            np.testing.assert_array_equal(g, w, err_msg=backend.name)
    # some nodes saw rows on both sides, some on neither
    assert np.isfinite(want[0]).any() and np.isinf(want[0][trees[0] >= 0]).any()


def test_sparse_rows_match_the_densified_rows():
    trees, dense, weights = _problem(1, np.float64, p=9)
    dense[np.random.default_rng(2).random(dense.shape) < 0.6] = 0.0
    X = sp.csr_matrix(dense)
    want = _reference(dense, weights, trees)
    for backend in (NUMPY, EMULATED):
        got = traversal.neighbour_values(backend, X, weights, *trees)
        for g, w in zip(got, want):
            np.testing.assert_array_equal(g, w, err_msg=backend.name)


def test_empty_rows_leave_the_bounds():
    trees, dense, weights = _problem(3, np.float64)
    low, high = traversal.neighbour_values(EMULATED, dense[:0], weights[:, :0], *trees)
    assert np.all(low == -np.inf) and np.all(high == np.inf)
