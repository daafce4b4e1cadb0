"""Trees compared across growers: a canonical form, leaf ranks, samples by leaf, problems,
and growth whose partitions are shared in parts.

Node ids and leaf numbers differ between growers of the same trees; these
helpers compare what must not differ.
"""

import numpy as np


def _canonical(s, node=0):
    """The tree below ``node`` depth first: (feature, bin, threshold, missing side, left,
    right) for splits, (samples, weight) for leaves."""
    if s.children_left[node] < 0:
        return ("leaf", int(s.n_node_samples[node]), float(s.weighted_n_node_samples[node]))
    return (int(s.feature[node]), int(s.bin[node]), float(s.threshold[node]),
            bool(s.missing_go_left[node]), _canonical(s, s.children_left[node]),
            _canonical(s, s.children_right[node]))


def _leaf_rank(s):
    """Each leaf index's rank among the tree's leaves depth first, left before right."""
    order = []
    stack = [0]
    while stack:
        node = stack.pop()
        if s.children_left[node] < 0:
            order.append(s.leaf_index[node])
        else:
            stack += [s.children_right[node], s.children_left[node]]
    rank = np.empty(len(order), dtype=np.int64)
    rank[np.asarray(order)] = np.arange(len(order))
    return rank


def _samples_by_leaf(s, leaf_of_sample):
    leaf = np.asarray(leaf_of_sample)
    return np.where(leaf >= 0, _leaf_rank(s)[np.maximum(leaf, 0)], -1)


def _problem(n, p, m, n_trees, seed, weights=True, ties=False):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, p)).astype(np.float32)
    if ties:
        X[:, : p // 2] = np.round(X[:, : p // 2])
        X[:, p // 2] = X[:, 0]
    Y = (np.tanh(X[:, :m]) + 0.3 * rng.standard_normal((n, m))).astype(np.float32)
    W = rng.poisson(1.0, size=(n_trees, n)).astype(np.float32) if weights else None
    return X, np.repeat(Y[:, None, :], n_trees, axis=1), W


def record_partition_parts(monkeypatch):
    """Patch ``level_kernels`` so that nodes of 16 samples or more split in parts (of at
    least 8 samples); return the list to which every ``tree_level_split`` launch then
    appends its ``parts``."""
    from gpurpo.tree import level_kernels

    monkeypatch.setattr(level_kernels, "PART_MIN_SAMPLES", 8)
    calls = []
    launch = level_kernels.launch

    def record(backend, name, *args):
        if name == "tree_level_split":
            calls.append(args[-3])
        launch(backend, name, *args)

    monkeypatch.setattr(level_kernels, "launch", record)
    return calls
