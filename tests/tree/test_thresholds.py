"""Node-local midpoint thresholds, against scikit-learn's best splitter and a NumPy reference."""

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.tree import DecisionTreeRegressor as SkTree

from gpurpo.ensemble import ExtraTreesRegressor, RandomForestRegressor
from gpurpo.tree import DecisionTreeRegressor


def _reference_thresholds(structure, X, weights):
    """Midpoint of the largest value sent left and the smallest sent right, node by node (pure Python)."""
    X = X.toarray() if sp.issparse(X) else np.asarray(X, dtype=np.float64)
    rows = range(X.shape[0]) if weights is None else np.flatnonzero(weights > 0)
    left_values = {}
    right_values = {}
    for r in rows:
        node = 0
        while structure.feature[node] >= 0:
            v = X[r, structure.feature[node]]
            if v <= structure.threshold[node]:
                left_values.setdefault(node, []).append(v)
                node = structure.children_left[node]
            else:
                right_values.setdefault(node, []).append(v)
                node = structure.children_right[node]
    out = {}
    for node in np.flatnonzero(structure.feature >= 0):
        low, high = max(left_values[node]), min(right_values[node])
        mid = low / 2 + high / 2
        out[int(node)] = low if mid >= high else mid
    return out


def test_thresholds_are_the_node_local_midpoints_of_scikit_learn():
    # group 0 holds the values {1, 3} of x1 only, group 1 all of 0..9: the edge between
    # the global values 1 and 2 is 1.5, the node's own neighbours give 2.0
    rng = np.random.default_rng(0)
    n = 200
    group = np.repeat([0, 1], n // 2)
    x1 = np.where(group == 0, rng.choice([1, 3], n), rng.integers(0, 10, n)).astype(float)
    X = np.column_stack([group, x1])
    y = 100.0 * group + 10.0 * np.where(group == 0, x1 >= 2, x1 >= 5)
    ours = DecisionTreeRegressor(max_depth=2, random_state=0).fit(X, y).tree_
    theirs = SkTree(max_depth=2, random_state=0).fit(X, y).tree_
    splits = lambda t: sorted(  # noqa: E731
        (int(f), float(v)) for f, v, c in zip(t.feature, t.threshold, t.children_left) if c >= 0
    )
    assert splits(ours) == splits(theirs) == [(0, 0.5), (1, 2.0), (1, 4.5)]


@pytest.mark.parametrize("sparse", [False, True])
def test_forest_thresholds_equal_the_reference_and_keep_the_partition(sparse):
    rng = np.random.default_rng(1)
    X = np.round(rng.exponential(3.0, size=(300, 6))) * (rng.random((300, 6)) < 0.5)
    y = X @ rng.normal(size=(6, 3)) + rng.normal(size=(300, 3))
    Xin = sp.csr_matrix(X) if sparse else X
    forest = RandomForestRegressor(n_estimators=3, max_features=0.5, random_state=0).fit(Xin, y)
    for tree, counts in zip(forest.estimators_, forest._tree_counts(forest._samplings(), 0, 3)):
        s = tree.structure
        want = _reference_thresholds(s, X, counts)
        np.testing.assert_array_equal([s.threshold[i] for i in want], list(want.values()))
    # training rows still reach leaves whose values they made: a fully grown forest without
    # bootstrap reproduces its training targets
    exact = RandomForestRegressor(n_estimators=2, bootstrap=False, random_state=0).fit(Xin, y)
    group = np.unique(X, axis=0, return_inverse=True)[1].ravel()
    keep = np.bincount(group)[group] == 1
    assert keep.sum() > 200
    np.testing.assert_allclose(exact.predict(Xin)[keep], y[keep], atol=1e-9)


def test_extra_trees_keep_their_drawn_thresholds():
    rng = np.random.default_rng(2)
    X = rng.integers(0, 20, size=(200, 4)).astype(float)
    y = X[:, :2] + rng.normal(size=(200, 2))
    forest = ExtraTreesRegressor(n_estimators=2, random_state=0).fit(X, y)
    edges = forest.bin_mapper_
    for tree in forest.estimators_:
        s = tree.structure
        inner = s.feature >= 0
        # every drawn threshold is a bin edge of its feature, not a node-local midpoint
        for f, v in zip(s.feature[inner], s.threshold[inner]):
            assert np.any(np.isclose(edges.edges_[f], v)), (f, v)


def test_trees_on_two_valued_features_skip_the_routing_with_the_same_thresholds():
    import copy

    from gpurpo.backend import NUMPY
    from gpurpo.tree.thresholds import refine_thresholds

    rng = np.random.default_rng(3)
    X = (rng.random((300, 8)) < 0.3).astype(float)  # two values each: one edge, their midpoint
    y = X @ rng.normal(size=(8, 2)) + 0.1 * rng.normal(size=(300, 2))
    forest = RandomForestRegressor(n_estimators=4, max_features=0.5, random_state=0).fit(X, y)
    n_edges = np.diff(forest.bin_mapper_.edge_ptr_)
    counts = forest._tree_counts(forest._samplings(), 0, 4).astype(np.float32)
    grown = [copy.deepcopy(t.structure) for t in forest.estimators_]
    for s in grown:  # back to the bin edges of their splits
        inner = s.feature >= 0
        s.threshold[inner] = [forest.bin_mapper_.edges_[f][b] for f, b in zip(s.feature[inner], s.bin[inner])]
    routed, skipped = copy.deepcopy(grown), copy.deepcopy(grown)
    refine_thresholds(routed, X, counts, NUMPY)
    refine_thresholds(skipped, X, counts, NUMPY, n_edges)
    assert all(n_edges == 1)
    for a, b, fitted in zip(routed, skipped, forest.estimators_):
        assert (a.feature >= 0).sum() > 5
        np.testing.assert_array_equal(a.threshold, b.threshold)
        np.testing.assert_array_equal(a.threshold, fitted.structure.threshold)
