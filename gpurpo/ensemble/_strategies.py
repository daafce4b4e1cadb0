"""The tree of one boosting iteration, for each multi-output strategy.

Joly, Wehenkel & Geurts (2019) fit, at iteration ``m``, a tree ``h_m`` to the
negative gradient ``g_i`` (n x d) of the loss, in one of four ways:

``"multi_output"`` (gbmort, Algorithm 2)
    one multi-output tree grown on all ``d`` gradient columns, its leaves
    labelled with the mean gradient vector (``k = d``);
``"rpo"`` (gbrt-rpo, Algorithm 3)
    a single-output tree grown on ``phi_m g`` for one random projection row
    ``phi_m`` (1 x d), its leaves labelled with the mean of ``phi_m g``
    (``k = 1``); the per-output step ``rho_m`` then fits it to every output;
``"relabel_rpo"`` (Algorithm 4)
    a tree grown on ``q`` projected gradients ``Phi_m g`` (q x d), its leaves
    relabelled with the mean of the UNPROJECTED gradient (``k = d``);
``"single_target"`` (st-gbrt)
    one single-output model per output: iteration ``m`` grows a tree on the
    gradient of output ``m mod d`` only (round-robin).

:class:`StageTreeFitter` grows that tree with the best-first (or, without
``max_leaf_nodes``, level-wise) grower of :mod:`gpurpo.tree.grower` on the
pre-binned inputs, labels its leaves and returns the leaf of every training
row (rows left out by stochastic subsampling are sent down the tree by raw
traversal), so that the loop can fit ``rho_m`` and update the scores.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from gpurpo.backend import Backend
from gpurpo.projections import dense_times_sparse_t, make_projection
from gpurpo.tree import kernels
from gpurpo.tree._params import GrowthParams
from gpurpo.tree.binning import BinnedMatrix
from gpurpo.tree.grower import grow_tree_best_first, grow_trees
from gpurpo.tree.predictor import TreeStructure, apply_trees, pack_trees

__all__ = ["STRATEGIES", "StageTreeFitter", "draw_projection", "project_gradient", "leaves_of"]

STRATEGIES = ("multi_output", "rpo", "relabel_rpo", "single_target")


def draw_projection(
    strategy: str,
    kind: str | None,
    n_components: int,
    n_outputs: int,
    rng: np.random.Generator,
) -> Any:
    """The host projection matrix of one iteration (None when the strategy uses none).

    ``"rpo"`` draws one row (Algorithm 3), ``"relabel_rpo"`` ``n_components``
    rows (Algorithm 4); ``kind=None`` means the identity (relabel_rpo then
    grows the gbmort tree).
    """
    if strategy == "rpo":
        return make_projection(kind, 1, n_outputs, rng)
    if strategy == "relabel_rpo" and kind is not None:
        return make_projection(kind, n_components, n_outputs, rng)
    return None


def project_gradient(backend: Backend, G: Any, projection: Any) -> Any:
    """``G Phi^T`` as a dense float32 (n, q) array, for dense or CSR ``Phi``."""
    xp = backend.xp
    P = backend.asarray(projection, dtype=xp.float32)
    if backend.issparse(P):
        return dense_times_sparse_t(xp, G, P.tocsr(), xp.float32)
    return xp.ascontiguousarray(G @ P.T, dtype=xp.float32)


def leaves_of(structure: TreeStructure, X: Any, backend: Backend) -> Any:
    """Leaf index (row of the tree's leaf values) reached by each row of raw ``X``."""
    xp = backend.xp
    packed = pack_trees([structure])
    nodes = apply_trees(packed, X, backend)[:, 0]
    return packed.on(backend)[6][nodes].astype(xp.int32)


class StageTreeFitter:
    """Grow and label the tree of one boosting iteration.

    Parameters
    ----------
    backend : Backend
    binned : BinnedMatrix
        Binned training inputs.
    X : backend array or sparse matrix (n, p)
        Raw training inputs (to place rows left out of a tree).
    strategy : str
        One of :data:`STRATEGIES`.
    params : GrowthParams
        Growth parameters (best-first when ``max_leaf_nodes`` is set).
    """

    def __init__(
        self,
        backend: Backend,
        binned: BinnedMatrix,
        X: Any,
        strategy: str,
        params: GrowthParams,
    ) -> None:
        self.backend = backend
        self.binned = binned
        self.X = X
        self.strategy = strategy
        self.params = params

    def split_targets(
        self, G: Any, projection: Any, output: int | None, Z: Any = None
    ) -> tuple[Any, Any]:
        """(targets the tree is grown on, targets its leaves are labelled with)."""
        S = G if Z is None else Z
        if self.strategy == "single_target":
            return S[:, output : output + 1], S[:, output : output + 1]
        if projection is None:
            return S, G
        T = project_gradient(self.backend, S, projection)
        if self.strategy == "rpo":
            return T, T
        return T, G

    def fit(
        self,
        G: Any,
        weights: Any,
        unit_weights: bool,
        projection: Any,
        output: int | None,
        rng: np.random.Generator,
        newton: tuple[Any, Any] | None = None,
    ) -> tuple[TreeStructure, Any, Any]:
        """Grow the tree on the gradient ``G`` and label its leaves.

        Parameters
        ----------
        G : float32 backend array (n, d)
            Negative gradient.
        weights : float64 backend array (n,)
            Sample weights of this iteration (0 for rows left out).
        unit_weights : bool
            True when every weight is 1 (no weights passed to the grower).
        projection : host matrix or None
            From :func:`draw_projection`.
        output : int or None
            The output of a single-target iteration.
        rng : numpy Generator
            Per-node seeds of the grower.
        newton : (Z, a) or None
            Second-order split (:func:`gpurpo.ensemble._newton.newton_split_targets`):
            the tree is grown on ``Z`` (float32 (n, d), projected like ``G``)
            with row weights ``weights * a``; ``"multi_output"`` and
            ``"relabel_rpo"`` leaves keep the mean of ``G``, ``"rpo"`` leaves
            get the ``weights * a``-weighted mean of the projected ``Z`` (the
            Newton step along the projection). None: grown on ``G``.

        Returns
        -------
        structure : TreeStructure
        values : float64 backend array (L, k)
            Weighted mean of the labelling targets in each leaf.
        leaf : int32 backend array (n,)
            Leaf of every training row.
        """
        xp = self.backend.xp
        Z, row_hess = (None, None) if newton is None else newton
        split_on, label_with = self.split_targets(G, projection, output, Z)
        targets = xp.ascontiguousarray(split_on, dtype=xp.float32)[:, None, :]
        if row_hess is not None:
            grow_w = weights * row_hess
            grower_weights = grow_w.astype(xp.float32)[None, :]
        else:
            grow_w = weights
            grower_weights = None if unit_weights else weights.astype(xp.float32)[None, :]
        grow = grow_tree_best_first if self.params.max_leaf_nodes is not None else grow_trees
        result = grow(self.binned, targets, grower_weights, self.params, rng, self.backend)
        structure = result.structures[0]
        leaf = result.leaf_of_sample[0]
        n_leaves = structure.n_leaves
        inside = leaf >= 0
        label_w = grow_w if label_with is not G else weights
        w_in = xp.where(inside, label_w, 0.0)
        safe_leaf = xp.where(inside, leaf, 0)
        w_leaf = xp.bincount(safe_leaf, weights=w_in, minlength=n_leaves)
        inv = 1.0 / xp.where(w_leaf > 0, w_leaf, 1.0)
        if label_with.shape[1] == 1:
            sums = xp.bincount(
                safe_leaf, weights=w_in * label_with[:, 0].astype(xp.float64), minlength=n_leaves
            )
            values = (sums * inv)[:, None]
        else:
            sums = kernels.accumulate_leaves_dense(
                self.backend, leaf, w_in, xp.ascontiguousarray(label_with), n_leaves
            )
            values = sums * inv[:, None]
        if grower_weights is not None:
            outside = xp.nonzero(~inside)[0]
            if int(outside.shape[0]):
                leaf = leaf.copy()
                leaf[outside] = leaves_of(structure, self.X[outside], self.backend)
        return structure, values, leaf
