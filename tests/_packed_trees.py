"""Test helper: random trees as the packed node arrays of the traversal kernels."""

from __future__ import annotations

import numpy as np


def random_packed_trees(rng, n_trees=5, p=5, max_splits=8, decimals=None):
    """``(feature, threshold, missing_left, left, right, roots)`` of ``n_trees`` random
    trees over ``p`` features, global node ids; tree 0 is a single leaf, the others
    split a random leaf 1 to ``max_splits`` times (thresholds standard normal, rounded
    to ``decimals`` when given, so that values can equal them)."""
    feature, threshold, missing, left, right, roots = [], [], [], [], [], []
    for t in range(n_trees):
        offset = len(feature)
        nodes = [None]
        leaves = [0]
        for _ in range(0 if t == 0 else int(rng.integers(1, max_splits + 1))):
            g = leaves.pop(int(rng.integers(len(leaves))))
            f = int(rng.integers(p))
            cut = float(rng.normal())
            nodes[g] = (f, cut if decimals is None else round(cut, decimals),
                        int(rng.integers(2)), len(nodes), len(nodes) + 1)
            nodes += [None, None]
            leaves += [len(nodes) - 2, len(nodes) - 1]
        roots.append(offset)
        for nd in nodes:
            f, thr, ml, lc, rc = nd if nd is not None else (-1, 0.0, 0, -1 - offset, -1 - offset)
            feature.append(f)
            threshold.append(thr)
            missing.append(ml)
            left.append(lc + offset)
            right.append(rc + offset)
    a = np.asarray
    return (a(feature, np.int32), a(threshold), a(missing, np.uint8), a(left, np.int32),
            a(right, np.int32), a(roots, np.int32))
