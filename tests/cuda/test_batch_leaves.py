"""Leaf values of a batch of trees on the emulated CUDA backend.

``stacked_leaf_values_csr`` (sort by (leaf, label), ordered segment sums) and
``stacked_leaf_values_dense`` (each leaf's samples in sample order, ordered row sums)
against the CPU's tree-by-tree numba kernels, stacked: the same values bit for bit.
``leaf_values`` of one tree on the emulated backend against the CPU's, every storage.
The ``tree_segment_sums`` and ``tree_segment_row_sums`` kernels against Python loops,
on the numba and emulated backends; forests on the emulated backend (sparse and dense,
0/1 and continuous outputs) against the CPU forest.
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
from gpurpo.tree.batch_leaves import (
    ordered_leaf_sums,
    require_index_room,
    stacked_leaf_values_csr,
    stacked_leaf_values_dense,
)
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


def _dense_per_tree(Y, leaf, weights, n_leaves):
    parts = [
        leaf_values(Y, leaf[t], None if weights is None else weights[t], int(n_leaves[t]), NUMPY,
                    "dense")
        for t in range(len(n_leaves))
    ]
    return stack_leaf_values(parts, NUMPY)


@pytest.mark.parametrize("seed", range(2))
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("weighted", ["none", "counts", "real"])
def test_dense_batch_equals_the_cpu_tree_by_tree(seed, dtype, weighted):
    _, leaf, weights, n_leaves = _batch(seed, 4, np.float64, "canonical", weighted)
    rng = np.random.default_rng(seed + 7)
    n = leaf.shape[1]
    # magnitudes far apart, so that another order of the additions gives other bits
    Y = (rng.standard_normal((n, 9)) * 10.0 ** rng.integers(-6, 7, size=(n, 9))).astype(dtype)
    leaf[1, :] = -1  # a tree without samples: its leaves are zeros
    expected, expected_offsets = _dense_per_tree(Y, leaf, weights, n_leaves)
    got, offsets = stacked_leaf_values_dense(Y, leaf, weights, n_leaves, EMULATED)
    np.testing.assert_array_equal(offsets, expected_offsets)
    assert got.dtype == np.float64 and got.shape == expected.shape
    np.testing.assert_array_equal(np.asarray(got), expected)  # bit for bit
    W, _, _ = ordered_leaf_sums(Y, leaf, weights, n_leaves, EMULATED)
    w = np.ones(leaf.shape) if weights is None else weights.astype(np.float64)
    for t in range(len(n_leaves)):
        inside = leaf[t] >= 0
        np.testing.assert_array_equal(
            np.asarray(W)[offsets[t]: offsets[t] + n_leaves[t]],
            np.bincount(leaf[t][inside], w[t][inside], minlength=n_leaves[t]))


def test_dense_batch_refuses_bad_input():
    Y, leaf, weights, n_leaves = _batch(0, 2, np.float64, "canonical", "counts")
    dense = Y.toarray()
    with pytest.raises(TypeError, match="Y must be a dense 2-D array"):
        stacked_leaf_values_dense(Y, leaf, weights, n_leaves, EMULATED)
    with pytest.raises(TypeError, match="Y must be a dense 2-D array"):
        stacked_leaf_values_dense(dense[:, 0], leaf, weights, n_leaves, EMULATED)
    with pytest.raises(ValueError, match="leaf_of_sample"):
        stacked_leaf_values_dense(dense[:-1], leaf, weights, n_leaves, EMULATED)
    with pytest.raises(ValueError, match="weights"):
        stacked_leaf_values_dense(dense, leaf, weights[:, :-1], n_leaves, EMULATED)
    with pytest.raises(ValueError, match="n_leaves"):
        stacked_leaf_values_dense(dense, leaf, weights, n_leaves[:1], EMULATED)


@pytest.mark.parametrize("storage", ["auto", "dense", "sparse", "by_density"])
@pytest.mark.parametrize("layout", ["dense", "csr"])
@pytest.mark.parametrize("weighted", ["none", "real"])
def test_one_tree_on_the_emulated_backend_has_the_cpu_values(storage, layout, weighted):
    Y, leaf, weights, n_leaves = _batch(5, 1, np.float64, "canonical", weighted)
    if layout == "dense":
        Y = Y.toarray()
    w = None if weights is None else weights[0]
    expected = leaf_values(Y, leaf[0], w, int(n_leaves[0]), NUMPY, storage)
    got = leaf_values(EMULATED.asarray(Y), EMULATED.asarray(leaf[0]),
                      None if w is None else EMULATED.asarray(w), int(n_leaves[0]), EMULATED,
                      storage)
    assert got.is_sparse == expected.is_sparse
    a, b = expected.values, got.values
    if expected.is_sparse:
        np.testing.assert_array_equal(b.indptr, a.indptr)
        np.testing.assert_array_equal(b.indices, a.indices)
        a, b = a.data, b.data
    np.testing.assert_array_equal(np.asarray(b), a)


@pytest.mark.parametrize("backend", [NUMPY, EMULATED], ids=["numba", "emulated"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_segment_row_sums_add_each_segment_in_order(backend, dtype):
    rng = np.random.default_rng(1)
    n, d, entries = 80, 5, 400
    Y = (rng.standard_normal((n, d)) * 10.0 ** rng.integers(-8, 9, size=(n, d))).astype(dtype)
    rows = rng.integers(0, n, size=entries)
    row_weights = rng.uniform(0.5, 2.0, size=entries)
    bounds = np.concatenate([[0, 0], np.sort(rng.choice(np.arange(1, entries), 30, replace=False)),
                             [entries]])
    expected = np.zeros((len(bounds) - 1, d))
    for s in range(len(bounds) - 1):
        for c in range(d):
            acc = 0.0
            for e in range(bounds[s], bounds[s + 1]):
                acc = acc + float(row_weights[e]) * float(Y[rows[e], c])
            expected[s, c] = acc
    got = kernels.segment_row_sums(backend, rows, row_weights, bounds, Y)
    np.testing.assert_array_equal(np.asarray(got), expected)
    assert not np.asarray(got)[0].any()  # the empty first segment
    with pytest.raises(ValueError, match="rows and row_weights"):
        kernels.segment_row_sums(backend, rows[:-1], row_weights, bounds, Y)
    with pytest.raises(ValueError, match="Y must be 2-D"):
        kernels.segment_row_sums(backend, rows, row_weights, bounds, Y[:, 0])


def test_continuous_forest_on_the_emulated_backend_labels_batches_at_once(monkeypatch):
    rng = np.random.default_rng(2)
    X = rng.standard_normal((300, 6))
    Y = rng.standard_normal((300, 5)) * np.array([1e-6, 1.0, 1e3, 10.0, 1e6])
    calls = []
    batch = growth.stacked_leaf_values_dense
    monkeypatch.setattr(growth, "stacked_leaf_values_dense",
                        lambda *args, **kw: calls.append(args[1].shape[0]) or batch(*args, **kw))
    # bootstrap counts as weights
    params = dict(n_estimators=4, max_features=0.5, random_state=0, n_jobs=1)
    cpu = RandomForestRegressor(**params).fit(X, Y)
    emulated = RandomForestRegressor(device="cuda-emulated", **params).fit(X, Y)
    np.testing.assert_array_equal(np.asarray(emulated.predict(X[:80])), cpu.predict(X[:80]))
    assert calls and sum(calls) == 4  # every tree labelled by the batch path


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


def test_more_entries_than_int32_indices_hold_are_refused():
    # CuPy before 14.3 casts a CSR matrix's indices to int32: past 2**31 - 1 entries
    # its index pointers wrap, and the leaf values would be silently wrong
    class Int32Csr:
        indptr = np.zeros(3, dtype=np.int32)

    class Int64Csr:
        indptr = np.zeros(3, dtype=np.int64)

    with pytest.raises(ValueError, match="2,147,483,648 stored entries.*CuPy 14.3"):
        require_index_room(Int32Csr(), 2**31, "the leaf values")
    require_index_room(Int32Csr(), 2**31 - 1, "the leaf values")
    require_index_room(Int64Csr(), 2**31, "the leaf values")
