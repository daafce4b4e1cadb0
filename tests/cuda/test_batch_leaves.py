"""Sparse leaf values of a batch of trees on the emulated CUDA backend.

``stacked_leaf_values_csr`` (sort by (leaf, label), ordered segment sums) against the
CPU's tree-by-tree numba kernel, stacked: the same CSR arrays bit for bit. The
``tree_segment_sums`` kernel against a Python loop, on the numba and emulated
backends; a forest on the emulated backend against the CPU forest.
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from test_sparse_leaves import _problem

from gpurpo.backend import EMULATED, NUMPY
from gpurpo.ensemble import RandomForestClassifier, RandomForestRegressor
from gpurpo.ensemble.forest import growth
from gpurpo.tree import kernels
from gpurpo.tree.batch_leaves import stacked_leaf_values_csr
from gpurpo.tree.leaves import leaf_values, stack_leaf_values


def _batch(seed, n_trees, dtype, layout, weighted):
    """A batch of trees' leaf assignments over the rows of one problem."""
    Y, _, _, _ = _problem(seed, dtype=dtype, layout=layout)
    rng = np.random.default_rng(seed + 100)
    n = Y.shape[0]
    n_leaves = rng.integers(1, 200, size=n_trees)
    leaf = np.stack([rng.integers(-1, count, size=n) for count in n_leaves]).astype(np.int32)
    for t, count in enumerate(n_leaves):
        leaf[t, rng.permutation(n)[:count]] = np.arange(count)  # no empty leaf
    weights = None
    if weighted == "counts":
        weights = rng.integers(1, 4, size=(n_trees, n)).astype(np.float32)
    elif weighted == "real":
        weights = rng.uniform(0.1, 3.0, size=(n_trees, n))
    return Y, leaf, weights, n_leaves


def _per_tree(Y, leaf, weights, n_leaves):
    parts = [
        leaf_values(Y, leaf[t], None if weights is None else weights[t], int(n_leaves[t]), NUMPY,
                    "sparse")
        for t in range(len(n_leaves))
    ]
    return stack_leaf_values(parts, NUMPY)


@pytest.mark.parametrize("seed", range(2))
@pytest.mark.parametrize("layout", ["canonical", "unsorted", "duplicates"])
@pytest.mark.parametrize("weighted", ["none", "counts", "real"])
@pytest.mark.parametrize("max_entries", [1 << 26, 700])  # one group; a group per tree or two
def test_batch_equals_the_cpu_tree_by_tree(seed, layout, weighted, max_entries):
    Y, leaf, weights, n_leaves = _batch(seed, 4, np.float64, layout, weighted)
    expected, expected_offsets = _per_tree(Y, leaf, weights, n_leaves)
    got, offsets = stacked_leaf_values_csr(Y, leaf, weights, n_leaves, EMULATED, max_entries)
    np.testing.assert_array_equal(offsets, expected_offsets)
    assert got.shape == expected.shape
    np.testing.assert_array_equal(got.indptr, expected.indptr)
    np.testing.assert_array_equal(got.indices, expected.indices)
    np.testing.assert_array_equal(got.data, expected.data)  # bit for bit


def test_float32_outputs_and_empty_rows():
    Y, leaf, weights, n_leaves = _batch(3, 3, np.float32, "canonical", "counts")
    Y = Y.tolil()
    Y[:40] = 0  # rows without labels
    Y = Y.tocsr()
    expected, _ = _per_tree(Y, leaf, weights, n_leaves)
    got, _ = stacked_leaf_values_csr(Y, leaf, weights, n_leaves, EMULATED)
    np.testing.assert_array_equal(got.toarray(), expected.toarray())
    assert got.nnz == expected.nnz


def test_bad_input_is_refused():
    Y, leaf, weights, n_leaves = _batch(0, 2, np.float64, "canonical", "counts")
    with pytest.raises(TypeError, match="Y must be a sparse"):
        stacked_leaf_values_csr(Y.toarray(), leaf, weights, n_leaves, EMULATED)
    with pytest.raises(ValueError, match="leaf_of_sample"):
        stacked_leaf_values_csr(Y, leaf[:, :-1], weights, n_leaves, EMULATED)
    with pytest.raises(ValueError, match="weights"):
        stacked_leaf_values_csr(Y, leaf, weights[:1], n_leaves, EMULATED)
    with pytest.raises(ValueError, match="n_leaves"):
        stacked_leaf_values_csr(Y, leaf, weights, n_leaves[:1], EMULATED)
    with pytest.raises(ValueError, match="max_entries"):
        stacked_leaf_values_csr(Y, leaf, weights, n_leaves, EMULATED, max_entries=0)


@pytest.mark.parametrize("backend", [NUMPY, EMULATED], ids=["numba", "emulated"])
def test_segment_sums_add_each_segment_in_order(backend):
    rng = np.random.default_rng(0)
    # magnitudes far apart, so that another order of the additions gives other bits
    values = rng.standard_normal(500) * 10.0 ** rng.integers(-8, 9, size=500)
    bounds = np.concatenate([[0], np.sort(rng.choice(np.arange(1, 500), 60, replace=False)), [500, 500]])
    expected = []
    for s in range(len(bounds) - 1):
        acc = 0.0
        for v in values[bounds[s]:bounds[s + 1]]:
            acc += float(v)
        expected.append(acc)
    got = kernels.segment_sums(backend, values, bounds)
    np.testing.assert_array_equal(got, np.array(expected))
    assert got[-1] == 0.0  # the empty last segment


@pytest.mark.parametrize("labels", ["csr", "dense"])
def test_forest_on_the_emulated_backend_labels_batches_at_once(labels, monkeypatch):
    rng = np.random.default_rng(0)
    X = rng.standard_normal((300, 6))
    Y = (rng.random((300, 25)) < 0.15).astype(np.float64)
    if labels == "csr":
        Y = sp.csr_matrix(Y)
    calls = []
    batch = growth.stacked_leaf_values_csr
    monkeypatch.setattr(growth, "stacked_leaf_values_csr",
                        lambda *args, **kw: calls.append(args[1].shape[0]) or batch(*args, **kw))
    for cls in (RandomForestRegressor, RandomForestClassifier):
        params = dict(n_estimators=6, max_features=0.5, random_state=0, n_jobs=1)
        cpu = cls(**params).fit(X, Y)
        emulated = cls(device="cuda-emulated", **params).fit(X, Y)
        expected = cpu.predict_proba(X[:60]) if cls is RandomForestClassifier else cpu.predict(X[:60])
        got = emulated.predict_proba(X[:60]) if cls is RandomForestClassifier else emulated.predict(X[:60])
        if sp.issparse(expected):
            expected, got = expected.toarray(), got.toarray()
        np.testing.assert_array_equal(np.asarray(got), np.asarray(expected))
    assert calls and sum(calls) == 12  # every tree labelled by the batch path, none by the CPU's
