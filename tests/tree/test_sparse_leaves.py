"""Sparse leaf values on the host against SciPy's sparse product and a dense reference."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from gpurpo.backend import NUMPY
from gpurpo.tree._sparse_leaves import stack_csr_arrays
from gpurpo.tree.leaves import leaf_values, stack_leaf_values


def _problem(seed, n=300, d=50, n_leaves=40, dtype=np.float64, layout="canonical"):
    rng = np.random.default_rng(seed)
    Y = sp.random(n, d, density=0.1, format="csr", random_state=seed, dtype=np.float64)
    Y.data = np.round(Y.data * 4) / 4  # exact zeros stored, and sums that cancel
    Y.data[::7] = -Y.data[::7]
    Y = Y.astype(dtype)
    if layout != "canonical":
        # each row's entries in reverse order; "duplicates": each entry split in two
        rows = np.repeat(np.arange(n), np.diff(Y.indptr))
        order = np.lexsort((-Y.indices, rows))
        rows, cols, vals = rows[order], Y.indices[order], Y.data[order]
        if layout == "duplicates":
            rows, cols = np.repeat(rows, 2), np.repeat(cols, 2)
            vals = np.repeat(vals / 2, 2)
        indptr = np.concatenate([[0], np.cumsum(np.bincount(rows, minlength=n))])
        Y = sp.csr_matrix((vals, cols, indptr), shape=(n, d))
        assert not Y.has_canonical_format
    leaf = rng.integers(-1, n_leaves, n).astype(np.int32)
    leaf[leaf == 3] = -1  # an empty leaf
    weights = rng.integers(0, 3, n).astype(np.float64)  # bootstrap counts, zeros included
    return Y, leaf, weights, n_leaves


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("n_leaves", [40, 250])  # 250: mostly leaves of one sample
@pytest.mark.parametrize("layout", ["canonical", "unsorted", "duplicates"])
def test_sparse_leaf_values_equal_scipy_product(seed, dtype, n_leaves, layout):
    Y, leaf, weights, n_leaves = _problem(seed, n_leaves=n_leaves, dtype=dtype, layout=layout)
    got = leaf_values(Y, leaf, weights, n_leaves, NUMPY).values
    # reference: diag(1/W) (A^T diag(w) Y) through SciPy (its product drops exact zeros):
    # the weighted sums, then each leaf's division
    inside = leaf >= 0
    w = np.where(inside, weights, 0.0)
    w_leaf = np.bincount(np.where(inside, leaf, 0), weights=w, minlength=n_leaves)
    inv = np.where(w_leaf > 0, 1.0 / np.where(w_leaf > 0, w_leaf, 1.0), 0.0)
    rows = np.flatnonzero(inside)
    indicator = sp.csr_matrix((w[rows], (leaf[rows], rows)), shape=(n_leaves, Y.shape[0]))
    expected = (indicator @ Y.astype(np.float64)).tocsr()
    expected.sum_duplicates()
    expected.sort_indices()
    expected.data *= np.repeat(inv, np.diff(expected.indptr))
    assert sp.isspmatrix_csr(got) and got.has_sorted_indices
    np.testing.assert_array_equal(got.indptr, expected.indptr)
    np.testing.assert_array_equal(got.indices, expected.indices)
    if layout == "duplicates":
        # SciPy's astype sums each row's duplicates before the product; gpurpo adds them
        # one by one: the same sums up to rounding
        np.testing.assert_allclose(got.data, expected.data, rtol=1e-12, atol=1e-15)
    else:
        np.testing.assert_array_equal(got.data, expected.data)  # same sums, same order
    assert not (got.data == 0).any()
    # and the weighted means themselves, densely
    dense = np.zeros((n_leaves, Y.shape[1]))
    np.add.at(dense, leaf[rows], w[rows, None] * Y.toarray()[rows].astype(np.float64))
    np.testing.assert_allclose(got.toarray(), dense * inv[:, None], rtol=1e-12, atol=1e-12)


def test_sparse_leaf_values_with_a_leaf_of_many_labels():
    # a leaf touching more labels than the small-sort limit (labels sorted by np.sort)
    rng = np.random.default_rng(4)
    Y = sp.random(200, 500, density=0.3, format="csr", random_state=4)
    leaf = np.zeros(200, dtype=np.int32)
    leaf[rng.random(200) < 0.5] = 1
    got = leaf_values(Y, leaf, None, 2, NUMPY).values
    assert got.has_sorted_indices
    expected = np.stack([Y.toarray()[leaf == g].mean(axis=0) for g in (0, 1)])
    np.testing.assert_allclose(got.toarray(), expected, rtol=1e-12)


def test_stacked_sparse_leaf_values_equal_vstack():
    parts = [leaf_values(*_problem(seed)[:3], 40, NUMPY) for seed in range(3)]
    stacked, offsets = stack_leaf_values(parts, NUMPY)
    expected = sp.vstack([p.values for p in parts], format="csr")
    np.testing.assert_array_equal(offsets, [0, 40, 80])
    assert (stacked != expected).nnz == 0 and stacked.shape == expected.shape
    data, indices, indptr = stack_csr_arrays([p.values for p in parts])
    np.testing.assert_array_equal(indptr, expected.indptr)
    np.testing.assert_array_equal(indices, expected.indices)
    np.testing.assert_array_equal(data, expected.data)


def test_device_path_equals_the_cpu_kernel():
    # the namespace path (CuPy's, run here on NumPy arrays by the emulated backend): the
    # same leaf values as the CPU kernel, sums first and each leaf's division after
    from gpurpo.backend import EMULATED

    rng = np.random.default_rng(0)
    n = 300
    Y = sp.random(n, 50, density=0.05, format="csr", random_state=1)
    leaf = rng.integers(-1, 20, size=n).astype(np.int32)
    w = rng.uniform(0.5, 2.0, size=n)
    cpu = leaf_values(Y, leaf, w, 20, NUMPY).values
    device = leaf_values(Y, leaf, w, 20, EMULATED).values
    assert sp.issparse(device) and device.nnz == cpu.nnz
    np.testing.assert_allclose(device.toarray(), cpu.toarray(), rtol=1e-15, atol=0)
    dense_by_density = leaf_values(Y.toarray(), leaf, w, 20, EMULATED, "by_density").values
    np.testing.assert_allclose(dense_by_density.toarray(), cpu.toarray(), rtol=1e-15, atol=0)
