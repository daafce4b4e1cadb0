"""Tree growth against independent references.

* A plain NumPy reference implementation (below) of the exact multi-output
  variance-reduction tree (Breiman et al. 1984; Joly et al. 2014, eq. 1-2)
  on integer-valued inputs (so that binning is the identity on values),
  with missing values sent to the best side.
* scikit-learn's DecisionTreeRegressor fitted on the same binned features and
  targets (depth 1 to 3, weighted, best-first).
* The consequence of Theorem 1 of Joly et al.: with a Gaussian projection of
  large m, the tree equals the unprojected one when best splits are isolated.
* Internal consistency of the code paths that must give identical trees:
  histogram vs exact small-node splits, with and without histogram
  subtraction, trees grown in one batch vs one by one.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.tree import DecisionTreeRegressor as SkTree

from gpurpo.backend import NUMPY
from gpurpo.tree import (
    BinMapper,
    DecisionTreeRegressor,
    GrowthParams,
    apply_trees,
    grow_tree_best_first,
    grow_trees,
    pack_trees,
)
from gpurpo.tree._random import children_seeds, feature_at
from gpurpo.tree.grower import draw_root_seeds

EPS = np.finfo(np.float64).eps


# --------------------------------------------------------------------------
# NumPy reference tree
# --------------------------------------------------------------------------


TIE_RTOL = 1e-5  # documented tie tolerance between features (gpurpo.tree.splitting)
ROUNDING = 1e-12  # the rounding allowance of gains, times sum(w ||y||^2) (TIE_ROUNDING)


def _best_split(X, Y, w, samples, msl, order):
    """Best (gain, feature, value, missing_left) by brute force.

    Per feature: the largest gain, exact ties to the lowest value then missing
    right. Across features: gains within TIE_RTOL of the node's impurity
    sum(w ||y - mean||^2) of the best tie, and the first feature in the node's
    visiting ``order`` (a permutation of the features) wins.
    """
    x_node = X[samples]
    yw = w[samples, None] * Y[samples]
    W = w[samples].sum()
    S = yw.sum(0)
    Q = (yw * Y[samples]).sum()
    parent = S @ S / W
    per_feature = []
    n = len(samples)
    for f in range(X.shape[1]):
        col = x_node[:, f]
        miss = np.isnan(col)
        values = np.unique(col[~miss])
        if len(values) + miss.any() < 2:
            continue
        best = None
        for v in values:
            for ml in (False, True):
                if ml and not miss.any():
                    continue
                left = (col <= v) & ~miss
                if ml:
                    left |= miss
                nl = left.sum()
                if nl < msl or n - nl < msl:
                    continue
                SL = yw[left].sum(0)
                WL = w[samples][left].sum()
                SR = S - SL
                gain = SL @ SL / WL + SR @ SR / (W - WL) - parent
                if best is None or gain > best[0]:
                    direction = ml if miss.any() else bool(WL >= W - WL)
                    best = (gain, f, v, direction)
        if best is not None:
            per_feature.append(best)
    if not per_feature:
        return None
    gmax = max(c[0] for c in per_feature)
    tied = [c for c in per_feature if c[0] >= gmax - TIE_RTOL * (Q - parent) - ROUNDING * Q]
    rank = {int(f): i for i, f in enumerate(order)}
    return min(tied, key=lambda c: rank[c[1]])


def reference_tree(X, Y, w=None, max_depth=None, min_samples_split=2, min_samples_leaf=1,
                   min_impurity_decrease=0.0, seed=0):
    """Exact multi-output variance-reduction tree, grown depth first.

    Each node visits the features in the order ``feature_at(node seed, i, p)``,
    the root's seed drawn from ``default_rng(seed)`` as the grower draws it and a
    child's derived from its parent's (the documented hashes of
    ``gpurpo.tree._random``): the tie rule's order.

    Returns a list of nodes: dicts with "samples" and, for internal nodes,
    "feature", "value" (go left when x <= value), "missing_left", "left", "right".
    """
    p = X.shape[1]
    root_seed = draw_root_seeds(np.random.default_rng(seed), 1)[0]
    n, d = Y.shape
    w = np.ones(n) if w is None else np.asarray(w, dtype=np.float64)
    W_root = w.sum()
    # centred on the root mean: gains are unchanged, the tie scale sum(w ||y||^2) is the
    # documented one (gpurpo centres each tree's targets)
    Y = Y - (w[:, None] * Y).sum(0) / W_root
    nodes = []

    def build(samples, depth, node_seed):
        idx = len(nodes)
        nodes.append({"samples": samples, "seed": node_seed})
        y = Y[samples]
        if (max_depth is not None and depth >= max_depth) or len(samples) < max(
            min_samples_split, 2 * min_samples_leaf, 2
        ) or (y == y[0]).all():
            return idx
        order = feature_at(np.full(p, node_seed, dtype=np.uint64), np.arange(p), p)
        best = _best_split(X, Y, w, samples, min_samples_leaf, order)
        if best is None or best[0] / (d * W_root) + EPS < min_impurity_decrease:
            return idx
        gain, f, v, ml = best
        col = X[samples, f]
        left = np.where(np.isnan(col), ml, col <= v)
        nodes[idx].update(feature=f, value=v, missing_left=ml)
        left_seed, right_seed = children_seeds(np.array([node_seed], dtype=np.uint64))
        nodes[idx]["left"] = build(samples[left], depth + 1, left_seed)
        nodes[idx]["right"] = build(samples[~left], depth + 1, right_seed)
        return idx

    build(np.arange(n), 0, root_seed)
    return nodes


def assert_same_tree(tree, ref, X):
    """Walk both trees together: same features, same partitions, same missing sides."""
    def walk(g, r):
        node = ref[r]
        samples = node["samples"]
        if "feature" not in node:
            assert tree.feature[g] == -1, f"gpurpo splits where the reference has a leaf ({r})"
            return
        assert tree.feature[g] == node["feature"], (g, r)
        col = X[samples, node["feature"]]
        go_left = np.where(np.isnan(col), tree.missing_go_left[g] == 1, col <= tree.threshold[g])
        ref_left = np.where(np.isnan(col), node["missing_left"], col <= node["value"])
        np.testing.assert_array_equal(go_left, ref_left)
        assert bool(tree.missing_go_left[g]) == bool(node["missing_left"])
        walk(tree.children_left[g], node["left"])
        walk(tree.children_right[g], node["right"])

    walk(0, 0)
    assert tree.node_count == len(ref)


def preorder(tree):
    """(feature, bin, missing side, n samples) of every node in preorder: numbering-free."""
    out = []

    def walk(g):
        internal = tree.feature[g] >= 0
        out.append((int(tree.feature[g]), int(tree.bin[g]) if internal else 0,
                    int(tree.missing_go_left[g]) if internal else 0, int(tree.n_node_samples[g])))
        if internal:
            walk(tree.children_left[g])
            walk(tree.children_right[g])

    walk(0)
    return out


def _integer_data(seed, n=250, p=5, d=3, levels=25, missing=0.0):
    rng = np.random.default_rng(seed)
    X = rng.integers(0, levels, size=(n, p)).astype(np.float64)
    if missing:
        X[rng.random(X.shape) < missing] = np.nan
    Y = rng.normal(size=(n, d))
    return X, Y


def _grow(X, Y, w=None, seed=0, **params):
    mapper = BinMapper(max_bins=255).fit(X)
    binned = mapper.transform(X, NUMPY)
    targets = np.asarray(Y, dtype=np.float32)[:, None, :]
    weights = None if w is None else np.asarray(w, dtype=np.float32)[None, :]
    grow = grow_tree_best_first if params.get("max_leaf_nodes") else grow_trees
    result = grow(binned, targets, weights, GrowthParams(**params), np.random.default_rng(seed),
                  NUMPY)
    return result


# --------------------------------------------------------------------------
# identical to the NumPy reference
# --------------------------------------------------------------------------


# (small_node_size, subtree_size): histograms only; per-node exact kernel below 40
# samples; subtrees below 60 samples; defaults (the whole tree in the subtree kernel)
PATHS = [(0, 0), (40, 0), (0, 60), (None, None)]


@pytest.mark.parametrize("small_node_size, subtree_size", PATHS)
@pytest.mark.parametrize("missing", [0.0, 0.1])
def test_fully_grown_tree_equals_reference(small_node_size, subtree_size, missing):
    X, Y = _integer_data(1, missing=missing)
    # float32 targets on both sides
    Y = Y.astype(np.float32).astype(np.float64)
    ref = reference_tree(X, Y)
    res = _grow(X, Y, small_node_size=small_node_size, subtree_size=subtree_size)
    assert_same_tree(res.structures[0], ref, X)


@pytest.mark.parametrize(
    "params",
    [
        dict(max_depth=3),
        dict(min_samples_leaf=7),
        dict(min_samples_split=30, max_depth=6),
        dict(min_impurity_decrease=0.01),
    ],
)
@pytest.mark.parametrize("small_node_size, subtree_size", PATHS)
def test_stopping_rules_equal_reference(params, small_node_size, subtree_size):
    X, Y = _integer_data(2, missing=0.05)
    Y = Y.astype(np.float32).astype(np.float64)
    ref = reference_tree(X, Y, **params)
    res = _grow(X, Y, small_node_size=small_node_size, subtree_size=subtree_size, **params)
    assert_same_tree(res.structures[0], ref, X)


def test_weighted_tree_equals_reference():
    X, Y = _integer_data(3)
    Y = Y.astype(np.float32).astype(np.float64)
    w = np.random.default_rng(3).uniform(0.2, 3.0, size=X.shape[0]).astype(np.float32)
    ref = reference_tree(X, Y, w=w.astype(np.float64), min_samples_leaf=2)
    for small, subtree in PATHS:
        res = _grow(X, Y, w=w, small_node_size=small, subtree_size=subtree, min_samples_leaf=2)
        assert_same_tree(res.structures[0], ref, X)


def test_leaf_of_sample_matches_traversal_of_raw_inputs():
    X, Y = _integer_data(4, missing=0.1)
    for small, subtree in PATHS:
        res = _grow(X, Y, small_node_size=small, subtree_size=subtree)
        tree = res.structures[0]
        leaves = apply_trees(pack_trees([tree]), X, NUMPY)[:, 0]
        np.testing.assert_array_equal(tree.leaf_index[leaves], res.leaf_of_sample[0])


def _grown_on_paths(X, Y, w=None, **params):
    """The same tree grown level-wise to the leaves and by the subtree kernel from the
    roots of up to 4,096 samples: (preorder, leaf_of_sample) of each."""
    import scipy.sparse as sparse

    mapper = BinMapper(max_bins=255).fit(X)
    binned = mapper.transform(X, NUMPY)
    assert (binned.sparse_codes is not None) == sparse.issparse(X)
    targets = np.asarray(Y, dtype=np.float32)[:, None, :]
    weights = None if w is None else np.asarray(w, dtype=np.float32)[None, :]
    out = []
    for subtree in (0, 4096):
        res = grow_trees(binned, targets, weights, GrowthParams(subtree_size=subtree, **params),
                         np.random.default_rng(0), NUMPY)
        tree = res.structures[0]
        # each sample's leaf as that leaf's rank in preorder (numbering-free)
        rank = np.empty(tree.n_leaves, dtype=np.int64)
        stack, seen = [0], 0
        while stack:
            g = stack.pop()
            if tree.feature[g] >= 0:
                stack += [tree.children_right[g], tree.children_left[g]]
            else:
                rank[tree.leaf_index[g]] = seen
                seen += 1
        out.append((preorder(tree), rank[res.leaf_of_sample[0]]))
    return out


@pytest.mark.parametrize("params", [
    dict(n_candidates=40),
    dict(n_candidates=40, min_samples_leaf=3, max_depth=14),
    dict(n_candidates=9000, min_impurity_decrease=1e-3, min_samples_split=9),
])
def test_subtree_kernel_grows_roots_above_its_block_size_as_levels_do(params):
    """With 9,000 features a subtree kernel's codes block holds 64 samples: a root of
    700 samples is grown on the global codes, its nodes evaluated as the small-node
    kernel does, until a node fits a block, whose subtree is grown in it. The same
    trees (structure in preorder, leaf of every sample) as level-wise growth, with
    missing values, weights, and the stopping rules."""
    from gpurpo.tree._numba.tree_grow_subtrees import _block_limit

    assert _block_limit(9000) == 64
    rng = np.random.default_rng(11)
    n, p = 700, 9000
    X = rng.integers(0, 40, size=(n, p)).astype(np.float64)
    X[rng.random(X.shape) < 0.02] = np.nan
    Y = rng.normal(size=(n, 3)) + 3.0 * (X[:, :1] > 20)
    w = rng.integers(1, 4, n)
    (level_tree, level_leaves), (kernel_tree, kernel_leaves) = _grown_on_paths(X, Y, w, **params)
    assert len(level_tree) > 50 and level_tree[0][3] == n
    assert kernel_tree == level_tree
    np.testing.assert_array_equal(kernel_leaves, level_leaves)


@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_subtree_kernel_reads_a_sparse_x_by_columns_above_its_block_size(sign):
    """A text-like CSR X (1 % stored): roots above the block size are evaluated with the
    features' stored-entry columns (nodes above 256 samples whose rows increase), as the
    small-node kernel does; the same trees as level-wise growth. Nonnegative X: the
    samples without the split feature go left (the large child starts where its
    parent does); nonpositive X: they go right, after the few samples peeled off."""
    import scipy.sparse as sparse

    rng = np.random.default_rng(12)
    n, p = 1500, 9000
    X = sparse.random(n, p, density=0.01, format="csr", random_state=12)
    X.data = sign * np.ceil(X.data * 8)
    signal = sign * np.asarray(X[:, :50].sum(axis=1)).ravel()
    Y = np.column_stack([signal, rng.normal(size=n), signal > 1.0])
    for params in (dict(n_candidates=95), dict(n_candidates=95, min_samples_leaf=2)):
        (level_tree, level_leaves), (kernel_tree, kernel_leaves) = _grown_on_paths(X, Y, **params)
        assert len(level_tree) > 100
        assert kernel_tree == level_tree
        np.testing.assert_array_equal(kernel_leaves, level_leaves)


# --------------------------------------------------------------------------
# scikit-learn on the same binned features
# --------------------------------------------------------------------------


def _sk_walk(sk, ours, Xb_sk, X_raw):
    """Compare node by node: feature, training partition, leaf values."""
    t = sk.tree_

    def walk(a, b, samples):
        if t.children_left[a] == -1:
            assert ours.tree_.feature[b] == -1
            np.testing.assert_allclose(
                ours.tree_.value[ours.tree_.leaf_index[b]], t.value[a][:, 0], rtol=1e-9
            )
            return
        assert ours.tree_.feature[b] == t.feature[a]
        sk_left = Xb_sk[samples, t.feature[a]] <= t.threshold[a]
        our_left = X_raw[samples, t.feature[a]] <= ours.tree_.threshold[b]
        np.testing.assert_array_equal(sk_left, our_left)
        walk(t.children_left[a], ours.tree_.children_left[b], samples[sk_left])
        walk(t.children_right[a], ours.tree_.children_right[b], samples[~sk_left])

    walk(0, 0, np.arange(X_raw.shape[0]))
    assert ours.tree_.node_count == t.node_count


@pytest.mark.parametrize("depth", [1, 2, 3])
@pytest.mark.parametrize("weighted", [False, True])
def test_shallow_trees_match_sklearn_on_binned_features(depth, weighted):
    rng = np.random.default_rng(10 + depth)
    X = rng.normal(size=(400, 6))
    Y = rng.normal(size=(400, 4)).astype(np.float32).astype(np.float64)
    w = rng.uniform(0.1, 2, size=400).astype(np.float32).astype(np.float64) if weighted else None
    ours = DecisionTreeRegressor(max_depth=depth, max_bins=64, random_state=0)
    ours.fit(X, Y, sample_weight=w)
    codes = ours.bin_mapper_.transform(X, NUMPY).codes.T.astype(np.float64)
    sk = SkTree(max_depth=depth, random_state=0).fit(codes, Y, sample_weight=w)
    _sk_walk(sk, ours, codes, X)


def test_min_samples_leaf_and_best_first_match_sklearn():
    rng = np.random.default_rng(7)
    X = rng.normal(size=(500, 5))
    Y = rng.normal(size=(500, 2)).astype(np.float32).astype(np.float64)
    for kwargs in (dict(max_depth=3, min_samples_leaf=20), dict(max_leaf_nodes=9)):
        ours = DecisionTreeRegressor(max_bins=50, random_state=0, **kwargs).fit(X, Y)
        codes = ours.bin_mapper_.transform(X, NUMPY).codes.T.astype(np.float64)
        sk = SkTree(random_state=0, **kwargs).fit(codes, Y)
        _sk_walk(sk, ours, codes, X)


# --------------------------------------------------------------------------
# Theorem 1: large Gaussian projections preserve isolated best splits
# --------------------------------------------------------------------------


def test_gaussian_projection_of_large_m_gives_the_unprojected_tree():
    rng = np.random.default_rng(5)
    n, p, d = 600, 6, 40
    X = rng.uniform(size=(n, p))
    # piecewise-constant outputs with well separated effects along a few features
    centers = rng.normal(scale=3.0, size=(8, d))
    cell = (X[:, 0] > 0.5) * 4 + (X[:, 1] > 0.3) * 2 + (X[:, 2] > 0.7)
    Y = centers[cell] + 0.05 * rng.normal(size=(n, d))
    exact = DecisionTreeRegressor(max_depth=3, random_state=0).fit(X, Y)
    proj = DecisionTreeRegressor(
        max_depth=3, projection="gaussian", n_components=2000, random_state=0
    ).fit(X, Y)
    np.testing.assert_array_equal(proj.tree_.feature, exact.tree_.feature)
    np.testing.assert_array_equal(proj.tree_.threshold, exact.tree_.threshold)
    np.testing.assert_allclose(proj.predict(X), exact.predict(X))


# --------------------------------------------------------------------------
# code paths that must agree
# --------------------------------------------------------------------------


@pytest.mark.parametrize("max_leaf_nodes", [None, 12])
@pytest.mark.parametrize("splitter", ["best", "random"])
@pytest.mark.parametrize("k, sparse_like", [(None, False), (3, False), (3, True)])
def test_histogram_and_small_node_paths_grow_identical_trees(
    splitter, k, sparse_like, max_leaf_nodes
):
    """Level-wise and best-first (nodes two at a time: cached histograms scored in
    place, sibling subtraction in place, buffers reused) give the same trees on every path.

    Sparse-like inputs (40 features, 95 % zeros) make most features constant in the
    nodes, so that nodes often find all k drawn features constant and draw on."""
    rng = np.random.default_rng(8)
    if sparse_like:
        X = rng.normal(size=(250, 40)) * (rng.random((250, 40)) < 0.05)
    else:
        X = rng.normal(size=(250, 6))
    X[rng.random(X.shape) < 0.05] = np.nan
    Y = rng.normal(size=(250, 3))
    trees = []
    variants = [
        (0, 0, 1 << 30),  # histograms, with subtraction when k = p
        (0, 0, 1),  # histograms, no subtraction (budget too small to keep parents)
        (10**9, 0, 1 << 30),  # per-node exact kernel everywhere
        (50, 0, 1 << 30),
        (0, 10**9, 1 << 30),  # the whole tree in one subtree kernel call
        (80, 30, 1 << 30),
    ]
    for small, subtree, budget in variants:
        res = _grow(X, Y, seed=4, small_node_size=small, subtree_size=subtree, n_candidates=k,
                    splitter=splitter, max_histogram_bytes=budget, max_leaf_nodes=max_leaf_nodes)
        trees.append(res.structures[0])
    for t in trees[1:]:
        assert preorder(t) == preorder(trees[0])


def test_trees_grown_in_one_batch_equal_trees_grown_alone():
    rng = np.random.default_rng(9)
    n, T, m = 300, 4, 3
    X = rng.normal(size=(n, 5))
    targets = rng.normal(size=(n, T, m)).astype(np.float32)
    weights = rng.multinomial(n, np.ones(n) / n, size=T).astype(np.float32)  # bootstrap counts
    binned = BinMapper().fit(X).transform(X, NUMPY)
    params = GrowthParams(small_node_size=40, subtree_size=20, min_samples_leaf=2)
    batch = grow_trees(binned, targets, weights, params, np.random.default_rng(0), NUMPY)
    # each tree's root seed (its visiting orders) as the batch drew it
    seeds = draw_root_seeds(np.random.default_rng(0), T)
    for t in range(T):
        alone = grow_trees(binned, targets[:, t : t + 1], weights[t : t + 1], params,
                           np.random.default_rng(1), NUMPY, root_seeds=seeds[t : t + 1])
        a, b = batch.structures[t], alone.structures[0]
        assert preorder(a) == preorder(b)
        np.testing.assert_allclose(np.sort(a.weighted_n_node_samples),
                                   np.sort(b.weighted_n_node_samples))
        np.testing.assert_array_equal(batch.leaf_of_sample[t], alone.leaf_of_sample[0])
        assert (batch.leaf_of_sample[t][weights[t] == 0] == -1).all()
        assert (batch.leaf_of_sample[t][weights[t] > 0] >= 0).all()


def test_best_first_respects_max_leaf_nodes_and_greedy_order():
    rng = np.random.default_rng(11)
    X = rng.normal(size=(400, 4))
    Y = rng.normal(size=(400, 2))
    for leaves in (2, 5, 17):
        res = _grow(X, Y, max_leaf_nodes=leaves)
        assert res.structures[0].n_leaves == leaves
    # growing one more leaf keeps the previous splits (greedy best-first)
    a = _grow(X, Y, max_leaf_nodes=6).structures[0]
    b = _grow(X, Y, max_leaf_nodes=7).structures[0]
    assert set(zip(a.feature[a.feature >= 0], a.bin[a.feature >= 0])) <= set(
        zip(b.feature[b.feature >= 0], b.bin[b.feature >= 0])
    )


# --------------------------------------------------------------------------
# Extra-Trees mode and max_features
# --------------------------------------------------------------------------


def test_extra_trees_thresholds_lie_within_the_node_range():
    rng = np.random.default_rng(12)
    X = rng.normal(size=(500, 6))
    Y = rng.normal(size=(500, 2))
    est = DecisionTreeRegressor(splitter="random", max_features=2, random_state=3).fit(X, Y)
    t = est.tree_

    def walk(g, samples):
        if t.feature[g] < 0:
            return
        col = X[samples, t.feature[g]]
        assert col.min() <= t.threshold[g] < col.max()
        left = col <= t.threshold[g]
        walk(t.children_left[g], samples[left])
        walk(t.children_right[g], samples[~left])

    walk(0, np.arange(500))
    # random cuts: not the best split at the root (with overwhelming probability)
    best = DecisionTreeRegressor(max_features=None, max_depth=1).fit(X, Y)
    assert t.threshold[0] != best.tree_.threshold[0]


def test_max_features_counts_only_nonconstant_features():
    # 40 constant features and 2 informative ones: with max_features=1 every node still
    # finds a split on an informative feature, as in scikit-learn
    rng = np.random.default_rng(13)
    n = 200  # fewer distinct values than bins: every sample can be isolated
    X = np.zeros((n, 42))
    X[:, 17] = rng.normal(size=n)
    X[:, 33] = rng.normal(size=n)
    Y = rng.normal(size=(n, 2))
    est = DecisionTreeRegressor(max_features=1, random_state=0).fit(X, Y)
    used = set(est.tree_.feature[est.tree_.feature >= 0].tolist())
    assert used == {17, 33}
    assert est.get_n_leaves() == n


def test_max_features_counts_constant_features_as_scikit_learn():
    # 98 constant features, a strong and a weak one, k = 2: the k drawn features are
    # mostly both constant, so the node draws on up to the first non-constant one, the
    # weak one about half the time (scikit-learn's rule). Counting only non-constant
    # features would evaluate both informative ones and always pick the strong one.
    rng = np.random.default_rng(0)
    n = 200
    X = np.zeros((n, 100))
    X[:, 0] = rng.normal(size=n)
    X[:, 1] = rng.normal(size=n)
    y = 5 * X[:, 0] + 0.1 * X[:, 1]
    seeds = range(200)
    ours = [DecisionTreeRegressor(max_features=2, max_depth=1, random_state=s).fit(X, y)
            .tree_.feature[0] for s in seeds]
    theirs = [SkTree(max_features=2, max_depth=1, random_state=s).fit(X, y).tree_.feature[0]
              for s in seeds]
    weak_ours, weak_theirs = ours.count(1), theirs.count(1)
    assert set(ours) == {0, 1}
    # both near 100 of 200 (binomial sd 7); the two counts within 4 sd of each other
    assert 70 <= weak_ours <= 130 and 70 <= weak_theirs <= 130
    assert abs(weak_ours - weak_theirs) <= 40


@pytest.mark.parametrize("splitter", ["best", "random"])
def test_determinism_with_random_state(splitter):
    rng = np.random.default_rng(14)
    X = rng.normal(size=(300, 10))
    Y = rng.normal(size=(300, 20))
    kw = dict(splitter=splitter, max_features="sqrt", projection="gaussian", n_components=3)
    a = DecisionTreeRegressor(random_state=5, **kw).fit(X, Y)
    b = DecisionTreeRegressor(random_state=5, **kw).fit(X, Y)
    c = DecisionTreeRegressor(random_state=6, **kw).fit(X, Y)
    np.testing.assert_array_equal(a.tree_.feature, b.tree_.feature)
    np.testing.assert_array_equal(a.tree_.threshold, b.tree_.threshold)
    np.testing.assert_array_equal(a.predict(X), b.predict(X))
    assert a.tree_.node_count != c.tree_.node_count or not np.array_equal(
        a.tree_.feature, c.tree_.feature
    )


def test_ties_between_features_do_not_favour_low_indices():
    """Four copies of one feature, k = 2 per node: every copy is chosen about as often.

    Copies induce the same partition, so each node's candidates tie; the first
    feature in the node's random visiting order wins (lowest index would never pick
    the last copy: it is the largest index among any two visited).
    """
    from gpurpo.tree import DecisionTreeRegressor

    rng = np.random.default_rng(0)
    x = rng.random(3000)
    X = np.repeat(x[:, None], 4, axis=1)
    y = np.sin(6 * x) + 0.1 * rng.standard_normal(3000)
    counts = np.zeros(4)
    for seed in range(3):
        tree = DecisionTreeRegressor(max_features=2, max_depth=8, random_state=seed).fit(X, y)
        feature = tree.tree_.structure.feature
        counts += np.bincount(feature[feature >= 0], minlength=4)
    share = counts / counts.sum()
    assert counts.sum() > 300
    assert share.min() > 0.15, share


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_binning_transpose_helper_equals_numpy(dtype):
    """The block float32 transpose used by BinMapper (odd sizes, NaN, inf, overflow),
    each feature's smallest and largest non-NaN value, and whether float32 holds
    its values exactly (NaN excluded).

    1,100 rows; blocks of 7 features (groups of 1), 8, 16 and 27 (16, 8, then
    3 of 1) from features 0, 3 and the last ones of 70; a feature of NaN only.
    """
    from gpurpo.tree.binning._sorted_edges import transpose_block_to_float32

    rng = np.random.default_rng(0)
    X = rng.standard_normal((1100, 70)).astype(dtype) * 10.0
    X[rng.random(X.shape) < 0.05] = np.nan
    X[0, 0], X[1, 1] = np.inf, -np.inf
    if dtype == np.float64:
        X[2, 2] = 1e300  # beyond float32: inf, as numpy's cast
    X[:, 5] = np.nan
    X[:, 9] = np.round(X[:, 9])  # values float32 holds exactly, and NaN
    X[:, 68] = 0.5
    X[:, 69] = np.round(X[:, 0])
    for width in (7, 8, 16, 27):
        for f0 in (0, 3, 70 - width):
            out = np.empty((width, 1100), dtype=np.float32)
            lo = np.empty(width, dtype=np.float32)
            hi = np.empty(width, dtype=np.float32)
            exact = np.empty(width, dtype=np.bool_)
            transpose_block_to_float32(X, f0, out, lo, hi, exact)
            with np.errstate(over="ignore"):
                expected = np.array(X[:, f0 : f0 + width].T, dtype=np.float32)
            np.testing.assert_array_equal(out, expected)
            with np.errstate(invalid="ignore"), warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)  # the feature of NaN only
                smallest = np.nanmin(expected, axis=1)
                largest = np.nanmax(expected, axis=1)
            np.testing.assert_array_equal(lo, np.where(np.isnan(smallest), np.inf, smallest))
            np.testing.assert_array_equal(hi, np.where(np.isnan(largest), -np.inf, largest))
            columns = X[:, f0 : f0 + width].T.astype(np.float64)
            # NaN counts as a value float32 does not hold
            np.testing.assert_array_equal(exact, (expected.astype(np.float64) == columns).all(axis=1))


def _binning_columns(rng, n):
    """Columns that stress the float32 shortcut of BinMapper.fit_transform."""
    # adjacent float32 numbers u (odd last bit) < v (even): their midpoint, a float64,
    # rounds UP to v in float32, below the edge placed at that very midpoint
    u = np.nextafter(np.float32(1.5), np.float32(2.0))
    v = np.nextafter(u, np.float32(2.0))
    tie = 0.5 * (np.float64(u) + np.float64(v))
    assert np.float32(tie) == v
    return np.column_stack([
        rng.normal(size=n),
        rng.standard_cauchy(n),
        # integers above 2**24 with halves: distinct float64, float32 neighbours
        2.0**24 + rng.integers(0, n // 3, n) + 0.5 * rng.integers(0, 2, n),
        rng.choice([np.float64(u), tie, np.float64(v), 3.0], n),
        np.where(rng.random(n) < 0.1, -1e39, rng.normal(size=n) * 1e38),  # beyond float32
        np.where(rng.random(n) < 0.2, np.nan, rng.normal(size=n)),
        np.full(n, 2.0),
        rng.normal(size=n) * 1e-42,  # float32 subnormals and zero
        rng.integers(0, 4, n).astype(float),
        np.full(n, 1e39),  # one value, infinite in float32: no edge
    ])


def _codes_by_searchsorted(mapper, X):
    out = np.empty((X.shape[1], X.shape[0]), dtype=np.int64)
    for f in range(X.shape[1]):
        e = mapper.thresholds_[f, : mapper.n_value_bins_[f] - 1]
        x = X[:, f].astype(np.float64)
        out[f] = np.where(np.isnan(x), mapper.missing_bin_, np.searchsorted(e, x, side="left"))
    return out


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_fit_transform_bins_as_fit_then_transform(dtype):
    """The float32 shortcut of fit_transform gives the codes "#edges < x" in float64."""
    rng = np.random.default_rng(5)
    with np.errstate(over="ignore"):
        X = np.ascontiguousarray(_binning_columns(rng, 4000).astype(dtype))
    fused = BinMapper()
    assert fused._fuses(X, NUMPY, None)
    binned = fused.fit_transform(X, NUMPY)
    reference = BinMapper().fit(X)
    np.testing.assert_array_equal(fused.thresholds_, reference.thresholds_)
    np.testing.assert_array_equal(binned.codes, reference.transform(X, NUMPY).codes)
    np.testing.assert_array_equal(binned.codes, _codes_by_searchsorted(fused, X))
    assert binned.n_bins == reference.n_bins_ and binned.missing_bin == reference.missing_bin_


def test_fit_transform_without_the_shortcut_equals_fit_then_transform():
    """Weights, a subsample, sparse or Fortran-ordered X take fit + transform."""
    import scipy.sparse as sparse

    rng = np.random.default_rng(6)
    X = _binning_columns(rng, 600)
    weights = rng.integers(0, 3, 600).astype(float)
    cases = [
        (BinMapper(), np.asfortranarray(X), None),
        (BinMapper(), X, weights),
        (BinMapper(subsample=100, random_state=0), X, None),
        (BinMapper(), sparse.csr_matrix(np.nan_to_num(X[:, :4])), None),
    ]
    for mapper, data, w in cases:
        assert not mapper._fuses(data, NUMPY, w)
        binned = mapper.fit_transform(data, NUMPY, w)
        reference = BinMapper(subsample=mapper.subsample, random_state=0).fit(data, w)
        np.testing.assert_array_equal(mapper.thresholds_, reference.thresholds_)
        np.testing.assert_array_equal(binned.codes, reference.transform(data, NUMPY).codes)


@pytest.mark.parametrize("n_rows", [3000, 70_000])
def test_binning_by_blocks_on_two_threads_equals_one(n_rows, monkeypatch):
    """BinMapper deals blocks of features to numba's thread count of Python threads:
    the same edges and codes on two threads as on one, for blocks of 80 features
    (3,000 rows) and of 8 (70,000 rows), 83 features in all (a last block of 3),
    and the codes of "#edges < x" (searchsorted) and NaN in the missing bin."""
    import numba

    rng = np.random.default_rng(8)
    X = rng.normal(size=(n_rows, 83))
    X[rng.random(X.shape) < 0.01] = np.nan
    X[:, 5] = rng.integers(0, 3, n_rows)
    monkeypatch.setattr("gpurpo.tree.binning._mapper._BLOCK_BYTES", 1 << 20)
    previous = numba.get_num_threads()
    for max_bins, missing_bin in ((255, 255), (16, 16)):  # NaN coded 255, then recoded
        results = []
        try:
            for threads in (1, min(2, numba.config.NUMBA_NUM_THREADS)):
                numba.set_num_threads(threads)
                mapper = BinMapper(max_bins=max_bins)
                results.append((mapper, mapper.fit_transform(X, NUMPY)))
        finally:
            numba.set_num_threads(previous)
        (one, binned_one), (two, binned_two) = results
        np.testing.assert_array_equal(one.thresholds_, two.thresholds_)
        np.testing.assert_array_equal(binned_one.codes, binned_two.codes)
        np.testing.assert_array_equal(binned_one.codes, _codes_by_searchsorted(one, X))
        assert one.missing_bin_ == missing_bin and one.n_value_bins_[5] == 3


@pytest.mark.parametrize("n_nan", [0, 1, 7, 40])
def test_edges_count_the_values_before_the_nans_of_each_sorted_row(n_nan):
    """The edge fit finds the non-NaN prefix of each row sorted by NumPy (NaN last,
    whatever their sign: arithmetic on x86 makes negative NaN): the same edges as a fit
    on the non-NaN values alone, for rows of no, some and only NaN."""
    from gpurpo.tree.binning._mapper import _fit_edges_sorted
    from gpurpo.tree.binning._sorted_edges import _count_below_nan

    rng = np.random.default_rng(n_nan)
    X = rng.normal(size=(40, 3))
    nans = np.full(n_nan, np.nan)
    nans[::2] = np.copysign(np.nan, -1.0)
    for f in range(3):
        X[: min(n_nan, 40), f] = nans[:40]
    row = np.sort(X[:, 0].astype(np.float32))
    assert _count_below_nan(row) == 40 - min(n_nan, 40)
    edges = _fit_edges_sorted(X, 16)
    for f in range(3):
        kept = X[~np.isnan(X[:, f]), f]
        want = _fit_edges_sorted(kept[:, None], 16)[0] if kept.size else np.empty(0)
        np.testing.assert_array_equal(edges[f], want)


def test_codes_of_features_with_few_edges_past_the_first_block_of_tables():
    """bin_codes holds the tables of 256 features at a time: a constant or binary
    feature past the first block must not see the table left by feature f - 256."""
    rng = np.random.default_rng(7)
    X = rng.normal(size=(1500, 300))
    X[:, 260] = 1.0
    X[:, 270] = rng.integers(0, 2, 1500)
    X[:, 280] = np.where(rng.random(1500) < 0.5, np.nan, 3.0)
    mapper = BinMapper().fit(X)
    assert mapper.n_value_bins_[260] == 1 and mapper.n_value_bins_[270] == 2
    expected = _codes_by_searchsorted(mapper, X)
    np.testing.assert_array_equal(mapper.transform(X, NUMPY).codes, expected)
    np.testing.assert_array_equal(BinMapper().fit_transform(X, NUMPY).codes, expected)


def test_codes_when_the_span_of_the_edges_loses_the_top_edges():
    # edges -3.6e16, 0.25, ..., 3.5: edge_last - edge_0 rounds to 3.6e16, so every
    # edge above 0 lies beyond the last point of the lookup grid; 4.0 was coded 5
    # (one edge missed) instead of 6 before the grid counted those edges
    X = np.array([0.0, 1.0, 2.0, 3.0, 4.0, 0.5, -7.205759189044429e16]).reshape(-1, 1)
    mapper = BinMapper(max_bins=7)
    binned = mapper.fit_transform(X, NUMPY)
    expected = _codes_by_searchsorted(mapper, X)
    np.testing.assert_array_equal(expected, [[1, 3, 4, 5, 6, 2, 0]])
    np.testing.assert_array_equal(binned.codes, expected)
    np.testing.assert_array_equal(mapper.transform(X, NUMPY).codes, expected)


@settings(max_examples=60, deadline=None)
@given(
    values=st.lists(
        st.one_of(
            st.floats(allow_nan=True, allow_infinity=False),
            st.floats(width=32, allow_nan=False, allow_infinity=False),
            st.integers(-(2**26), 2**26).map(float),
            st.sampled_from([1.5000001192092896, 1.5000001788139343, 1.500000238418579, 0.0, -0.0]),
        ),
        min_size=1,
        max_size=300,
    ),
    max_bins=st.integers(2, 255),
)
def test_fit_transform_codes_follow_the_edges_on_fuzzed_columns(values, max_bins):
    X = np.array(values, dtype=np.float64).reshape(-1, 1)
    mapper = BinMapper(max_bins=max_bins)
    binned = mapper.fit_transform(X, NUMPY)
    np.testing.assert_array_equal(binned.codes, _codes_by_searchsorted(mapper, X))
    np.testing.assert_array_equal(binned.codes, BinMapper(max_bins=max_bins).fit(X).transform(
        X, NUMPY).codes)


# --------------------------------------------------------------------------
# criterion="newton": the second-order gain on gradient + hessian channels
# --------------------------------------------------------------------------


def _newton_score(g, h, lam):
    G, H = g.sum(axis=0), h.sum(axis=0)
    return float(np.sum(G**2 / (H + lam)))


def test_newton_level_wise_tree_splits_every_node_at_the_brute_force_optimum():
    """Each split maximises sum_j G_Lj^2/(H_Lj+l) + G_Rj^2/(H_Rj+l) over the node's splits."""
    rng = np.random.default_rng(3)
    n, p, q, lam = 300, 3, 2, 0.5
    X = rng.integers(0, 10, size=(n, p)).astype(float)
    g = rng.normal(size=(n, q)) + (X[:, :1] > 4) * np.array([1.0, -0.5])
    h = rng.uniform(0.05, 1.0, size=(n, q)) * (1.0 + (X[:, 1:2] > 6))
    result = _grow(X, np.hstack([g, h]), max_depth=2, criterion="newton", reg_lambda=lam)
    tree = result.structures[0]
    checked = 0
    stack = [(0, np.ones(n, dtype=bool))]
    while stack:
        node, rows = stack.pop()
        f = tree.feature[node]
        if f < 0:
            continue
        best = max(
            _newton_score(g[rows & left], h[rows & left], lam)
            + _newton_score(g[rows & ~left], h[rows & ~left], lam)
            for feat in range(p)
            for v in np.unique(X[rows, feat])[:-1]
            for left in [X[:, feat] <= v]
        )
        go_left = X[:, f] <= tree.threshold[node]
        got = (_newton_score(g[rows & go_left], h[rows & go_left], lam)
               + _newton_score(g[rows & ~go_left], h[rows & ~go_left], lam))
        np.testing.assert_allclose(got, best, rtol=1e-5)
        stack += [(tree.children_left[node], rows & go_left),
                  (tree.children_right[node], rows & ~go_left)]
        checked += 1
    assert checked == 3
    # the variance criterion grows a different tree on the same columns
    variance = _grow(X, np.hstack([g, h]), max_depth=2).structures[0]
    assert not np.array_equal(variance.threshold, tree.threshold) or not np.array_equal(
        variance.feature, tree.feature
    )


def test_newton_criterion_validation():
    X, Y = _integer_data(0, n=40, d=3)
    with pytest.raises(ValueError, match="even n_outputs"):
        _grow(X, Y, max_depth=2, criterion="newton")
    with pytest.raises(ValueError, match="criterion must be"):
        _grow(X, Y, max_depth=2, criterion="hessian")
    with pytest.raises(ValueError, match="reg_lambda"):
        _grow(X, Y[:, :2], max_depth=2, criterion="newton", reg_lambda=-1.0)
