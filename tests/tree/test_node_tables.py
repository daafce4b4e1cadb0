"""The host node-table helpers (grower, tree packing) against NumPy formulations."""

from __future__ import annotations

import numpy as np
import pytest

from gpurpo.tree._node_tables import (
    absorb_subtrees,
    leaf_table,
    number_nodes,
    sum_internal_weights,
)
from gpurpo.tree.predictor import TreeStructure, pack_trees


def _random_forest_tables(rng, n_trees=3, n_splits=40):
    """Node tables of random trees grown by appending children (ids above parents)."""
    tree, left, right = [], [], []
    for t in range(n_trees):
        tree.append(t)
        left.append(-1)
        right.append(-1)
    for _ in range(n_splits):
        leaves = [g for g in range(len(tree)) if left[g] < 0]
        g = int(rng.choice(leaves))
        left[g], right[g] = len(tree), len(tree) + 1
        tree += [tree[g], tree[g]]
        left += [-1, -1]
        right += [-1, -1]
    return (np.array(tree, dtype=np.int32), np.array(left, dtype=np.int64),
            np.array(right, dtype=np.int64))


@pytest.mark.parametrize("seed", range(4))
def test_number_nodes_equals_stable_sort_ranks(seed):
    rng = np.random.default_rng(seed)
    tree, left, _ = _random_forest_tables(rng, n_trees=4)
    is_leaf = left < 0
    size, T = len(tree), 4
    leaf_index = np.empty(size, dtype=np.int32)
    local_id = np.empty(size, dtype=np.int64)
    order = np.empty(size, dtype=np.int64)
    counts = np.empty(T, dtype=np.int64)
    number_nodes(tree, is_leaf, leaf_index, local_id, order, counts)
    np.testing.assert_array_equal(order, np.argsort(tree, kind="stable"))
    np.testing.assert_array_equal(counts, np.bincount(tree, minlength=T))
    for t in range(T):
        ids = np.flatnonzero(tree == t)
        np.testing.assert_array_equal(local_id[ids], np.arange(len(ids)))
        leaves = ids[is_leaf[ids]]
        np.testing.assert_array_equal(leaf_index[leaves], np.arange(len(leaves)))
    assert (leaf_index[~is_leaf] == -1).all()


def test_sum_internal_weights_equals_subtree_sums():
    rng = np.random.default_rng(5)
    tree, left, right = _random_forest_tables(rng)
    is_leaf = left < 0
    weighted = np.where(is_leaf, rng.uniform(0.5, 2.0, size=len(tree)), 0.0)
    leaf_w = weighted.copy()
    assert sum_internal_weights(is_leaf, left, right, weighted)

    def subtree(g):
        return leaf_w[g] if is_leaf[g] else subtree(left[g]) + subtree(right[g])

    for g in range(len(tree)):
        np.testing.assert_allclose(weighted[g], subtree(g), rtol=1e-14)
    # a child numbered below its parent is refused
    bad_left = left.copy()
    g = int(np.flatnonzero(~is_leaf)[-1])
    bad_left[g] = g - 1
    assert not sum_internal_weights(is_leaf, bad_left, right, weighted.copy())


def test_absorb_subtrees_numbers_and_links_the_new_nodes():
    # two roots (ids 1 and 0) in a table of 3 nodes; root 1 grows a 5-node subtree
    # (local: 0 -> (1, 2), 2 -> (3, 4)), root 0 stays a leaf
    cap = 8
    tables = {
        "tree": np.array([0, 1, 1] + [9] * 5, dtype=np.int32),
        "parent": np.array([-1, -1, 1] + [-7] * 5, dtype=np.int64),
        "depth": np.array([0, 2, 3] + [-7] * 5, dtype=np.int32),
        "start": np.array([0, 10, 30] + [-7] * 5, dtype=np.int64),
        "stop": np.array([10, 20, 35] + [-7] * 5, dtype=np.int64),
        "feature": np.full(cap, -7, dtype=np.int32),
        "bin": np.full(cap, -7, dtype=np.int32),
        "missing_left": np.full(cap, 7, dtype=np.uint8),
        "gain": np.full(cap, -7.0),
        "left": np.full(cap, -7, dtype=np.int64),
        "right": np.full(cap, -7, dtype=np.int64),
        "seed": np.full(cap, 7, dtype=np.uint64),
    }
    offsets = np.array([0, 19, 28], dtype=np.int64)  # root 1 first, then root 0
    count = np.array([5, 1], dtype=np.int64)
    rows = 28
    out = {name: np.full(rows, -9, dtype=dt) for name, dt in (
        ("feature", np.int32), ("bin", np.int32), ("left", np.int32), ("right", np.int32),
        ("depth", np.int32), ("start", np.int64), ("stop", np.int64))}
    out["missing_left"] = np.zeros(rows, dtype=np.uint8)
    out["gain"] = np.zeros(rows)
    for j, (f, b, lo, hi, dep, s0, s1, g) in enumerate([
        (4, 2, 1, 2, 2, 0, 10, 1.5), (-1, 0, -1, -1, 3, 0, 4, 0.0),
        (0, 7, 3, 4, 3, 4, 10, 0.5), (-1, 0, -1, -1, 4, 4, 5, 0.0), (-1, 0, -1, -1, 4, 5, 10, 0.0),
    ]):
        for name, v in zip(("feature", "bin", "left", "right", "depth", "start", "stop", "gain"),
                           (f, b, lo, hi, dep, s0, s1, g)):
            out[name][j] = v
    out["feature"][19] = -1  # root 0: a leaf
    out["depth"][19], out["start"][19], out["stop"][19] = 0, 0, 10
    added = absorb_subtrees(
        np.array([1, 0], dtype=np.int64), offsets, count, out["feature"], out["bin"],
        out["missing_left"], out["gain"], out["left"], out["right"], out["depth"], out["start"],
        out["stop"], 3, *(tables[k] for k in ("tree", "parent", "depth", "start", "stop",
                                              "feature", "bin", "missing_left", "gain", "left",
                                              "right", "seed")),
    )
    assert added == 4
    T = tables
    # root 1 -> new nodes 3 (leaf) and 4; node 4 -> new nodes 5 and 6
    assert (T["feature"][1], T["left"][1], T["right"][1], T["gain"][1]) == (4, 3, 4, 1.5)
    assert (T["feature"][4], T["bin"][4], T["left"][4], T["right"][4]) == (0, 7, 5, 6)
    np.testing.assert_array_equal(T["parent"][3:7], [1, 1, 4, 4])
    np.testing.assert_array_equal(T["tree"][3:7], [1, 1, 1, 1])
    np.testing.assert_array_equal(T["depth"][3:7], [3, 3, 4, 4])
    np.testing.assert_array_equal(T["start"][3:7], [10, 14, 14, 15])  # root 1 starts at 10
    np.testing.assert_array_equal(T["stop"][3:7], [14, 20, 15, 20])
    for g in (0, 3, 5, 6):
        assert T["feature"][g] == -1 and T["left"][g] == T["right"][g] == -1
        assert T["gain"][g] == -np.inf
    np.testing.assert_array_equal(T["seed"][3:7], 0)
    assert T["tree"][7] == 9  # untouched room


def _random_structure(rng, n_nodes):
    # a lone root is a leaf; packing does not need the children to form a tree
    leaf = rng.random(n_nodes) < 0.5
    leaf[0] = n_nodes == 1
    children = np.where(leaf[:, None], -1, rng.integers(0, n_nodes, (n_nodes, 2))).astype(np.int32)
    leaf_index = np.full(n_nodes, -1, dtype=np.int32)
    leaf_index[leaf] = rng.permutation(int(leaf.sum()))
    threshold = np.where(leaf, np.nan, rng.standard_normal(n_nodes))
    threshold[rng.random(n_nodes) < 0.05] = np.inf
    threshold[rng.random(n_nodes) < 0.05] = -np.inf
    return TreeStructure(
        children_left=children[:, 0], children_right=children[:, 1],
        feature=np.where(leaf, -1, rng.integers(0, 9, n_nodes)).astype(np.int32),
        threshold=threshold, bin=np.zeros(n_nodes, np.int32),
        missing_go_left=rng.integers(0, 2, n_nodes).astype(np.uint8), leaf_index=leaf_index,
        n_node_samples=np.ones(n_nodes, np.int64), weighted_n_node_samples=np.ones(n_nodes),
        gain=np.zeros(n_nodes), depth=np.zeros(n_nodes, np.int32),
    )


@pytest.mark.parametrize("explicit_leaf_offsets", [False, True])
def test_pack_trees_equals_numpy_concatenation(explicit_leaf_offsets):
    # reference: the trees' arrays concatenated with NumPy, children and leaf rows shifted
    rng = np.random.default_rng(5)
    trees = [_random_structure(rng, n) for n in (1, 7, 40, 301)]
    node_offsets = np.cumsum([0] + [t.node_count for t in trees])[:-1]
    n_leaves = [int((t.feature < 0).sum()) for t in trees]
    leaf_offsets = (np.array([3, 100, 7, 500]) if explicit_leaf_offsets
                    else np.cumsum([0] + n_leaves)[:-1])
    packed = pack_trees(trees, leaf_offsets=leaf_offsets if explicit_leaf_offsets else None)

    def shifted(name, offsets):
        return np.concatenate([np.where(getattr(t, name) >= 0, getattr(t, name) + o, -1)
                               for t, o in zip(trees, offsets)])

    np.testing.assert_array_equal(packed.feature, np.concatenate([t.feature for t in trees]))
    np.testing.assert_array_equal(
        packed.threshold, np.nan_to_num(np.concatenate([t.threshold for t in trees]), nan=0.0))
    np.testing.assert_array_equal(packed.missing_go_left,
                                  np.concatenate([t.missing_go_left for t in trees]))
    np.testing.assert_array_equal(packed.left, shifted("children_left", node_offsets))
    np.testing.assert_array_equal(packed.right, shifted("children_right", node_offsets))
    np.testing.assert_array_equal(packed.leaf_row, shifted("leaf_index", leaf_offsets))
    np.testing.assert_array_equal(packed.roots, node_offsets)
    assert packed.left.dtype == packed.right.dtype == packed.leaf_row.dtype == np.int32
    assert packed.threshold.dtype == np.float64 and packed.missing_go_left.dtype == np.uint8


def test_leaf_table_equals_numpy_selection():
    tree, left, right = _random_forest_tables(np.random.default_rng(8))
    size = len(tree)
    is_leaf = left < 0
    leaf_index = np.empty(size, np.int32)
    number_nodes(tree, is_leaf, leaf_index, np.empty(size, np.int64), np.empty(size, np.int64),
                 np.empty(3, np.int64))
    rng = np.random.default_rng(9)
    start = rng.integers(0, 1000, size)
    stop = start + rng.integers(1, 50, size)
    feature = rng.integers(0, 5, size).astype(np.int32)
    expected_feature = np.where(is_leaf, -1, feature)
    ids, leaf_start, leaf_length, leaf_tree, leaf_rank = leaf_table(
        left, feature, tree, start, stop, leaf_index)
    expected_ids = np.flatnonzero(is_leaf)
    np.testing.assert_array_equal(ids, expected_ids)
    np.testing.assert_array_equal(leaf_start, start[expected_ids])
    np.testing.assert_array_equal(leaf_length, (stop - start)[expected_ids])
    np.testing.assert_array_equal(leaf_tree, tree[expected_ids])
    np.testing.assert_array_equal(leaf_rank, leaf_index[expected_ids])
    np.testing.assert_array_equal(feature, expected_feature)
