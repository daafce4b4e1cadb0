"""Dense 0/1 labels: the leaves are stored by their own density, as for the same labels in CSR.

Multi-label loaders hand labels over as dense 0/1 arrays; the leaves of fully
grown trees hold a few samples each, so their label frequencies are as sparse as
the labels. A forest fitted on the dense array must cost what the same labels
in CSR cost (model size, memory during fit) and give the same predictions.
"""

import pickle
import tracemalloc

import numpy as np
import pytest
import scipy.sparse as sp

from gpurpo.backend import NUMPY
from gpurpo.ensemble import RandomForestClassifier, RandomForestRegressor
from gpurpo.tree import DecisionTreeClassifier, DecisionTreeRegressor
from gpurpo.tree.leaves import SPARSE_OUTPUT_DENSITY, relabelling_outputs


def _labels(n=1500, p=30, d=400, per_row=6, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, p))
    Y = np.zeros((n, d))
    for i in range(n):
        Y[i, rng.choice(d, per_row, replace=False)] = 1.0
    return X, Y


def _fit_measured(make, X, Y):
    tracemalloc.start()
    model = make().fit(X, Y)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return model, peak


def test_forest_on_dense_labels_costs_what_csr_labels_cost():
    X, Y = _labels()
    make = lambda: RandomForestClassifier(n_estimators=6, projection="gaussian", n_components=8,  # noqa: E731
                                          random_state=0, n_jobs=1)
    make().fit(X[:50], Y[:50])  # one-time allocations (compilation, thread pools) out of the way
    dense, dense_peak = _fit_measured(make, X, Y)
    csr, csr_peak = _fit_measured(make, X, sp.csr_matrix(Y))
    # the same trees and leaf values, whatever the container of the labels
    np.testing.assert_allclose(dense.predict_proba(X[:200]), csr.predict_proba(X[:200]),
                               rtol=1e-12, atol=0)
    assert isinstance(dense.predict(X[:5]), np.ndarray)  # outputs keep the container of y
    dense_size, csr_size = len(pickle.dumps(dense)), len(pickle.dumps(csr))
    assert dense_size <= 1.2 * csr_size, (dense_size, csr_size)
    # the dense labels themselves (n x d float64) are the caller's; beyond them, the fit
    # holds no more than the CSR fit does
    assert dense_peak <= 1.5 * csr_peak + Y.nbytes, (dense_peak, csr_peak, Y.nbytes)


def test_tree_on_dense_labels_stores_sparse_leaves_and_dense_targets_stay_dense():
    X, Y = _labels(n=400, d=200, seed=1)
    tree = DecisionTreeClassifier(random_state=0).fit(X, Y)
    assert tree.tree_.leaves.is_sparse
    reference = DecisionTreeClassifier(random_state=0).fit(X, sp.csr_matrix(Y))
    np.testing.assert_array_equal(tree.predict_proba(X), reference.predict_proba(X).toarray())
    continuous = np.random.default_rng(2).normal(size=Y.shape)
    assert not DecisionTreeRegressor(random_state=0).fit(X, continuous).tree_.leaves.is_sparse
    forest = RandomForestRegressor(n_estimators=2, random_state=0).fit(X, continuous)
    assert not forest.estimators_[0].leaves.is_sparse


def test_leaves_of_shallow_trees_are_dense_when_their_values_are():
    # max_depth=1: two leaves holding hundreds of rows each, so nearly every label occurs
    X, Y = _labels(n=600, d=50, per_row=8, seed=3)
    tree = DecisionTreeClassifier(max_depth=1, random_state=0).fit(X, Y)
    assert not tree.tree_.leaves.is_sparse
    np.testing.assert_allclose(tree.predict_proba(X), DecisionTreeClassifier(max_depth=1, random_state=0)
                               .fit(X, sp.csr_matrix(Y)).predict_proba(X).toarray(), rtol=1e-12)


@pytest.mark.parametrize("density", [0.05, 0.3, 0.4, 0.9])
def test_relabelling_outputs_follow_the_density(density):
    Y = (np.random.default_rng(4).random((300, 100)) < density).astype(np.float64)
    got, storage = relabelling_outputs(Y, NUMPY)
    sparse = np.count_nonzero(Y) <= SPARSE_OUTPUT_DENSITY * Y.size
    assert sparse == (density < SPARSE_OUTPUT_DENSITY)
    assert sp.issparse(got) == sparse == (storage == "by_density")
    np.testing.assert_array_equal(got.toarray() if sparse else got, Y)
    assert relabelling_outputs(sp.csr_matrix(Y), NUMPY)[1] == "auto"
