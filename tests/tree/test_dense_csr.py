"""The CSR copy of dense outputs equals SciPy's ``csr_matrix``; trees fitted through it."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from gpurpo.backend import NUMPY
from gpurpo.tree import DecisionTreeClassifier, DecisionTreeRegressor
from gpurpo.tree._dense_csr import FAST_DENSITY, dense_to_csr
from gpurpo.tree.leaves import SPARSE_OUTPUT_DENSITY, relabelling_outputs


@pytest.mark.parametrize("density", [0.03, 0.08])  # within the one-pass buffers, and beyond
@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.int64, np.uint8, np.bool_])
def test_dense_to_csr_equals_scipy(dtype, density):
    rng = np.random.default_rng(3)
    Y = ((rng.random((200, 37)) < density) * rng.normal(scale=4.0, size=(200, 37))).astype(dtype)
    Y[5] = 0  # an empty row
    Y = Y[:, ::-1]  # not contiguous
    got = dense_to_csr(Y, 0.5)
    want = sp.csr_matrix(Y)
    assert got.dtype == want.dtype and got.shape == want.shape and got.has_canonical_format
    np.testing.assert_array_equal(got.indptr, want.indptr)
    np.testing.assert_array_equal(got.indices, want.indices)
    np.testing.assert_array_equal(got.data, want.data)


def test_dense_to_csr_declines_dense_arrays_and_checks_the_shape():
    Y = np.zeros((10, 10))
    Y[:, :4] = 1.0
    assert dense_to_csr(Y, 0.5) is not None and dense_to_csr(Y, 0.39) is None
    with pytest.raises(ValueError, match=r"Y must be a 2-D array, got shape \(4,\)"):
        dense_to_csr(np.zeros(4), 0.5)


def test_relabelling_outputs_copies_mostly_zero_labels_once():
    rng = np.random.default_rng(4)
    Y = (rng.random((300, 40)) < 0.1).astype(np.float64)
    copy, storage = relabelling_outputs(Y, NUMPY)
    assert storage == "by_density" and sp.issparse(copy)
    np.testing.assert_array_equal(copy.toarray(), Y)
    Y[:, : int(40 * SPARSE_OUTPUT_DENSITY) + 2] = 1.0
    same, storage = relabelling_outputs(Y, NUMPY)
    assert storage == "auto" and same is Y


def test_dense_to_csr_copies_nan_and_rows_past_the_one_pass_buffers():
    Y = np.zeros((64, 50))
    Y[0, 3] = np.nan
    Y[-6:, :] = 1.0  # the last rows overflow the one-pass buffers
    assert FAST_DENSITY * Y.size + Y.shape[1] < np.count_nonzero(Y) <= 0.5 * Y.size
    got = dense_to_csr(Y, 0.5)
    np.testing.assert_array_equal(got.indptr, sp.csr_matrix(Y).indptr)
    np.testing.assert_array_equal(got.toarray(), Y)


def _text_like(seed, n=400, p=30, d=60):
    rng = np.random.default_rng(seed)
    X = (rng.random((n, p)) < 0.1).astype(np.float64)
    Y = ((rng.random((n, d)) < 0.05) | (X[:, :1] > 0)).astype(np.float64)
    return X, Y


@pytest.mark.parametrize("projection", ["gaussian", None])
@pytest.mark.parametrize("Tree", [DecisionTreeRegressor, DecisionTreeClassifier])
def test_dense_labels_grow_the_tree_of_csr_labels(Tree, projection):
    X, Y = _text_like(5)
    kw = dict(projection=projection, n_components=5, max_features="sqrt", random_state=2)
    a = Tree(**kw).fit(X, Y)
    b = Tree(**kw).fit(X, sp.csr_matrix(Y))
    np.testing.assert_array_equal(a.tree_.feature, b.tree_.feature)
    np.testing.assert_array_equal(a.tree_.threshold, b.tree_.threshold)
    scores = (lambda est: est.predict_proba(X)) if Tree is DecisionTreeClassifier else (
        lambda est: est.predict(X))
    got = scores(a)
    assert not sp.issparse(got) and sp.issparse(scores(b))
    np.testing.assert_array_equal(got, scores(b).toarray())
    # the leaves are the means of the training labels of each leaf
    leaf = a.apply(X)
    for node in np.unique(leaf)[:20]:
        np.testing.assert_allclose(got[leaf == node][0], Y[leaf == node].mean(axis=0))


@pytest.mark.parametrize("dense_share", [0.02, 0.6])  # copied to CSR, kept dense
@pytest.mark.parametrize("bad, match", [
    (np.nan, "y contains NaN or infinity"),
    (np.inf, "y contains NaN or infinity"),
    (1e300, "beyond float32"),
])
def test_values_of_dense_labels_are_checked(dense_share, bad, match):
    X, Y = _text_like(6)
    Y[:, : int(dense_share * Y.shape[1])] = 1.0
    Y[7, -1] = bad
    with pytest.raises(ValueError, match=match):
        DecisionTreeRegressor(projection="gaussian", n_components=3).fit(X, Y)
    with pytest.raises(ValueError, match=match):
        DecisionTreeRegressor().fit(X, Y[:, -1])


def test_classifier_checks_dense_labels_copied_to_csr():
    X, Y = _text_like(7)
    Y[3, 4] = 2.0
    with pytest.raises(ValueError, match="only 0 and 1"):
        DecisionTreeClassifier(projection="gaussian").fit(X, Y)
    Y[3, 4] = np.nan
    with pytest.raises(ValueError, match="y contains NaN or infinity"):
        DecisionTreeClassifier(projection="gaussian").fit(X, Y)
