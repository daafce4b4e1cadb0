"""Node-local midpoint thresholds: where between its neighbouring values a split is placed.

A split found on bin codes (``code <= b`` goes left) leaves every raw threshold
between the node's largest value on the left and its smallest value on the
right with the same training partition. The grower stores the bin's upper
edge, a global quantity; scikit-learn's best splitter stores the midpoint of
the node's own neighbouring values,

    threshold = (max{x_f : x in left} + min{x_f : x in right}) / 2

(``BestSplitter.node_split``; the left value itself when the midpoint rounds
to the right value). On few-valued and heavy-tailed features the node-local
midpoint predicts better: the node's values often sit far apart inside wide
empty stretches of bins, and the edge hugs one side.

:func:`refine_thresholds` routes the training rows of nonzero weight down a
batch of grown trees with their raw thresholds (the same partition as the
codes) in the ``tree_neighbour_values`` kernels (:mod:`gpurpo.tree.kernels`;
numba on the CPU, ``kernels/tree_thresholds.cu`` on CUDA, dense or CSR ``X``),
which keep per internal node the largest value sent left and the smallest
sent right; each threshold becomes their midpoint. The cost is one step per
row and level of its path, as predicting the training rows. Extra-Trees keep
their drawn thresholds (the point of the method).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from numba import njit

from gpurpo.backend import Backend
from gpurpo.tree import traversal
from gpurpo.tree.predictor import TreeStructure, pack_trees

__all__ = ["refine_thresholds"]


@njit(cache=True, nogil=True)
def _midpoints(low, high, feature, threshold):
    """``threshold[g] = (low[g] + high[g]) / 2`` at every split whose sides both hold rows;
    ``low[g]`` where the midpoint rounds to ``high[g]`` (scikit-learn's guard)."""
    for node in range(feature.shape[0]):
        if feature[node] < 0 or not low[node] < high[node]:
            continue
        mid = low[node] / 2.0 + high[node] / 2.0
        if mid >= high[node] or not np.isfinite(mid):
            mid = low[node]
        threshold[node] = mid


def refine_thresholds(
    structures: Sequence[TreeStructure], X: Any, weights: Any, backend: Backend,
    n_edges: np.ndarray | None = None,
) -> None:
    """Move every split of ``structures`` to its node-local midpoint threshold, in place.

    Parameters
    ----------
    structures : sequence of TreeStructure
        Grown trees; only their ``threshold`` arrays change, and the
        partition of the training rows they encode stays the same.
    X : array or sparse matrix, shape (n, p)
        The training features, on ``backend``.
    weights : array of shape (len(structures), n) or None
        Each tree's training weights (bootstrap counts, sample weights), on
        ``backend``; rows of zero weight were not in the tree's sample and
        are not routed. None: every row in every tree.
    backend : Backend
    n_edges : int array of shape (p,), optional
        Each feature's number of bin edges. The edges are the midpoints of
        consecutive distinct values, so a split on a feature with one edge
        (two values, as bag-of-words features) is at its midpoint already:
        trees that only split on such features are not routed.
    """
    trees = [t for t, s in enumerate(structures) if s.node_count > 1]
    if n_edges is not None:
        trees = [t for t in trees
                 if np.any(n_edges[structures[t].feature[structures[t].feature >= 0]] > 1)]
    if not trees:
        return
    xp = backend.xp
    n = int(X.shape[0])
    if weights is None:
        weights = xp.ones((len(trees), n), dtype=xp.float32)
    elif len(trees) < len(structures):
        weights = weights[backend.asarray(np.asarray(trees))]
    structures = [structures[t] for t in trees]
    packed = pack_trees(structures)
    feature, threshold, missing, left, right, roots, _ = packed.on(backend)
    low, high = traversal.neighbour_values(
        backend, X, weights, feature, threshold, missing, left, right, roots
    )
    low, high = np.asarray(backend.to_host(xp.stack([low, high])))  # one copy
    for t, s in enumerate(structures):
        nodes = slice(int(packed.node_offsets[t]), int(packed.node_offsets[t]) + s.node_count)
        _midpoints(low[nodes], high[nodes], s.feature, s.threshold)
