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

The projection draw, the leaf labels (:func:`leaf_label_sums`,
:func:`leaf_means`) and :class:`StageTreeFitter` are also the boosting
stages that :mod:`gpurpo.dask` runs over row-split data.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from gpurpo.backend import Backend
from gpurpo.ensemble.boosting.round_kernels import leaf_label_means
from gpurpo.projections import dense_times_sparse_t, make_projection
from gpurpo.tree import GrowthParams, kernels
from gpurpo.tree.batch_leaves import ordered_leaf_sums
from gpurpo.tree.binning import BinnedMatrix
from gpurpo.tree.growth import grow_tree_best_first, grow_trees
from gpurpo.tree.predictor import TreeStructure, apply_trees, pack_trees

__all__ = [
    "STRATEGIES", "GatheredProjection", "StageTreeFitter", "draw_projection", "leaf_label_sums", "leaf_means",
    "project_gradient", "squared_projection", "leaves_of",
]

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


@dataclass(frozen=True)
class GatheredProjection:
    """A sparse projection ``Phi`` (q x d) on the device as the columns and values of its
    rows, for a product that gathers the columns it needs.

    Attributes
    ----------
    columns : int64 backend array (q, w)
        Row r's columns, padded with column 0.
    values : float32 backend array (q, w)
        Row r's values, padded with zeros: ``(Phi y)_r = sum_j values[r, j]
        y[columns[r, j]]``.
    """

    columns: Any
    values: Any

    def squared(self) -> GatheredProjection:
        """The projection with every entry squared."""
        return GatheredProjection(self.columns, self.values * self.values)


def project_gradient(backend: Backend, G: Any, projection: Any) -> Any:
    """``G Phi^T`` as a dense float32 (n, q) array, for dense, CSR or gathered ``Phi``."""
    xp = backend.xp
    if isinstance(projection, GatheredProjection):
        gathered = G[:, projection.columns] * projection.values[None, :, :]
        return xp.ascontiguousarray(gathered.sum(axis=2), dtype=xp.float32)
    P = backend.asarray(projection, dtype=xp.float32)
    if backend.issparse(P):
        return dense_times_sparse_t(xp, G, P.tocsr(), xp.float32)
    return xp.ascontiguousarray(G @ P.T, dtype=xp.float32)


def squared_projection(projection: Any) -> Any:
    """The projection with every entry squared (dense array, sparse matrix or
    :class:`GatheredProjection`)."""
    if isinstance(projection, GatheredProjection):
        return projection.squared()
    if hasattr(projection, "multiply") and hasattr(projection, "tocsr"):
        return projection.multiply(projection).tocsr()
    return projection * projection


def leaves_of(structure: TreeStructure, X: Any, backend: Backend) -> Any:
    """Leaf index (row of the tree's leaf values) reached by each row of raw ``X``."""
    xp = backend.xp
    packed = pack_trees([structure])
    nodes = apply_trees(packed, X, backend)[:, 0]
    return packed.on(backend)[6][nodes].astype(xp.int32)


def leaf_label_sums(
    backend: Backend, leaf: Any, weights: Any, label_with: Any, n_leaves: int
) -> tuple[Any, Any]:
    """Per leaf, the weight and the weighted sums of the labelling targets.

    Rows with ``leaf < 0`` (out of the tree) count nowhere. Sums over row
    blocks add up, so a tree whose rows are split over machines labels its
    leaves from the summed pairs (:func:`leaf_means`). Every sum adds its rows
    in increasing order, on a CUDA backend too
    (:func:`gpurpo.tree.batch_leaves.ordered_leaf_sums`, no atomics): the
    same sums run after run, and the CPU's.

    Returns
    -------
    w_leaf : float64 (L,)
    sums : float64 (L, k)
    """
    xp = backend.xp
    if backend.uses_cuda_kernels:
        w_leaf, sums, _ = ordered_leaf_sums(
            xp.asarray(label_with), xp.asarray(leaf)[None],
            xp.asarray(weights, dtype=xp.float64)[None], [int(n_leaves)], backend)
        return w_leaf, sums
    inside = leaf >= 0
    w_in = xp.where(inside, weights, 0.0)
    safe_leaf = xp.where(inside, leaf, 0)
    # scatter-adds into arrays of known size (a bincount reads the largest leaf back)
    w_leaf = xp.zeros(n_leaves, dtype=xp.float64)
    xp.add.at(w_leaf, safe_leaf, w_in)
    if label_with.shape[1] == 1:
        sums = xp.zeros((n_leaves, 1), dtype=xp.float64)
        xp.add.at(sums[:, 0], safe_leaf, w_in * label_with[:, 0].astype(xp.float64))
        return w_leaf, sums
    sums = kernels.accumulate_leaves_dense(
        backend, leaf, w_in, xp.ascontiguousarray(label_with), n_leaves
    )
    return w_leaf, sums


def leaf_means(xp: Any, w_leaf: Any, sums: Any) -> Any:
    """The leaf values ``sums / w_leaf`` of :func:`leaf_label_sums` (float64 (L, k))."""
    inv = 1.0 / xp.where(w_leaf > 0, w_leaf, 1.0)
    return sums * inv[:, None]


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
    reg_lambda, min_child_weight : float
        Of the second-order gain, for the iterations given a hessian.
    """

    def __init__(
        self,
        backend: Backend,
        binned: BinnedMatrix,
        X: Any,
        strategy: str,
        params: GrowthParams,
        reg_lambda: float = 1.0,
        min_child_weight: float = 0.0,
    ) -> None:
        self.backend = backend
        self.binned = binned
        self.X = X
        self.strategy = strategy
        self.params = params
        self.newton_params = replace(
            params, criterion="newton", reg_lambda=float(reg_lambda),
            min_child_weight=float(min_child_weight),
        ).validated()

    def split_targets(
        self, G: Any, projection: Any, output: int | None, hessian: Any = None
    ) -> tuple[Any, Any]:
        """(targets the tree is grown on, targets its leaves are labelled with).

        With a ``hessian`` (second-order split), the targets grown on are the
        (projected) gradient columns followed by the matching hessian
        columns: the curvature of the loss along a projection row ``phi``
        is ``sum_j phi_j^2 h_ij``, so the hessian is projected by the
        squared projection (for a subsampling projection, the sampled
        outputs' own hessians; for the identity, ``h`` itself).
        """
        xp = self.backend.xp
        if self.strategy == "single_target":
            S = G[:, output : output + 1]
            label_with = S
            curvature = None if hessian is None else hessian[:, output : output + 1]
        elif projection is None:
            S, label_with = G, G
            curvature = hessian
        else:
            S = project_gradient(self.backend, G, projection)
            label_with = S if self.strategy == "rpo" else G
            curvature = (
                None if hessian is None
                else project_gradient(self.backend, hessian, squared_projection(projection))
            )
        if curvature is None:
            return S, label_with
        split_on = xp.concatenate(
            [xp.asarray(S, dtype=xp.float32), xp.asarray(curvature, dtype=xp.float32)], axis=1
        )
        return split_on, label_with

    def fit(
        self,
        G: Any,
        weights: Any,
        unit_weights: bool,
        projection: Any,
        output: int | None,
        rng: np.random.Generator,
        hessian: Any = None,
        root_seed: Any = None,
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
        projection : host matrix, backend array, GatheredProjection or None
            From :func:`draw_projection`, or its device form.
        output : int or None
            The output of a single-target iteration.
        rng : numpy Generator
            Per-node seeds of the grower.
        hessian : float32 backend array (n, d) or None
            Second derivatives of the loss: the tree is grown with the
            second-order gain (``newton_params``) on the (projected)
            gradient and hessian (:meth:`split_targets`). None: the
            variance of the (projected) gradient. The leaves are labelled
            the same way in both cases.
        root_seed : uint64 array (1,) or None
            The tree's root seed (None: drawn from ``rng``).

        Returns
        -------
        structure : TreeStructure
        values : float64 backend array (L, k)
            Weighted mean of the labelling targets in each leaf.
        leaf : int32 backend array (n,)
            Leaf of every training row.
        """
        xp = self.backend.xp
        split_on, label_with = self.split_targets(G, projection, output, hessian)
        targets = xp.ascontiguousarray(split_on, dtype=xp.float32)[:, None, :]
        grower_weights = None if unit_weights else weights.astype(xp.float32)[None, :]
        params = self.params if hessian is None else self.newton_params
        grow = grow_tree_best_first if self.params.max_leaf_nodes is not None else grow_trees
        result = grow(self.binned, targets, grower_weights, params, rng, self.backend,
                      root_seed)
        structure = result.structures[0]
        leaf = result.leaf_of_sample[0]
        values = leaf_label_means(self.backend, leaf, weights, label_with, structure.n_leaves)
        if grower_weights is not None:
            # samples of weight 0 are in no leaf (-1): they take the leaf they fall into
            outside = xp.nonzero(leaf < 0)[0]
            if int(outside.shape[0]):
                leaf = leaf.copy()
                leaf[outside] = leaves_of(structure, self.X[outside], self.backend)
        return structure, values, leaf
