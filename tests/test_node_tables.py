"""The grower's host node-table helpers against NumPy formulations."""

from __future__ import annotations

import numpy as np
import pytest

from gpurpo.tree._node_tables import absorb_subtrees, number_nodes, sum_internal_weights


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
