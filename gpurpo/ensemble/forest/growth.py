"""Growing a range of trees of a forest from everything its trees share.

A forest's trees share the binned inputs, the outputs (for the projected
targets and the leaf values), the projection plan and the growth
parameters; tree ``t`` adds its own seeds (bootstrap, projection, root),
which :class:`gpurpo.ensemble.forest.base.BaseForest` draws up front. So any
range ``[b0, b1)`` of trees can be grown apart from the others, in any
order, on any machine holding a :class:`TreeGrowth`: the single-machine fit
grows its batches from one, a warm start the new trees, and
:mod:`gpurpo.dask` ranges of trees on Dask workers (a :class:`TreeGrowth`
pickles).

This module is the forest growth stage shared by single-machine and
distributed fitting.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from tqdm.auto import tqdm

from gpurpo.backend import Backend, to_host
from gpurpo.ensemble.forest.batches import out_of_memory_error
from gpurpo.ensemble.forest.projection_plan import ProjectionPlan
from gpurpo.ensemble.forest.tree_chunks import TreeChunk
from gpurpo.ensemble.forest.warm_start import Sampling, draw_counts, draw_counts_on
from gpurpo.tree import GrowthParams, grow_tree_best_first, grow_trees, leaf_values
from gpurpo.tree.batch_leaves import stacked_leaf_values_csr, stacked_leaf_values_dense
from gpurpo.tree.binning import BinnedMatrix
from gpurpo.tree.leaves import DENSE_LEAF_DENSITY
from gpurpo.tree.thresholds import refine_thresholds

__all__ = ["TreeGrowth"]


@dataclass
class TreeGrowth:
    """What the trees of one fit share, and how to grow any range of them.

    Attributes
    ----------
    binned : BinnedMatrix
        The binned inputs (n rows).
    Y_leaves : array or sparse matrix (n, d)
        The outputs the leaves are labelled with
        (:func:`gpurpo.tree.relabelling_outputs`).
    Y_targets : array or sparse matrix (n, d)
        ``Y_leaves`` in float32: what the projections apply to.
    leaf_storage : object
        The leaves' storage (:func:`gpurpo.tree.relabelling_outputs`).
    sample_weight : ndarray (n,) or None
        The fit's sample weights, on the host.
    bootstrap : bool
    sampling : Sampling
        How the trees draw their rows (their draw counts).
    seeds : int64 ndarray (n_trees, 2)
        Every tree's (bootstrap, projection) seeds.
    root_seeds : uint64 ndarray (n_trees,)
        Every tree's root seed (the node seeds of its growth).
    plan : ProjectionPlan
    params : GrowthParams
    backend : Backend
    rng : numpy.random.Generator or None
        Handed to the grower, which draws nothing from it when root seeds
        are given.
    name : str
        The estimator's name, for messages.
    verbose : int
        ``verbose > 1`` prints a line when a batch starts.
    X : array or sparse matrix (n, p) or None
        The raw inputs on ``backend``: with a best splitter, each split then
        moves to the node-local midpoint of its neighbouring values
        (:func:`gpurpo.tree.thresholds.refine_thresholds`); None keeps the
        bin edges.
    """

    binned: BinnedMatrix
    Y_leaves: Any
    Y_targets: Any
    leaf_storage: Any
    sample_weight: np.ndarray | None
    bootstrap: bool
    sampling: Sampling
    seeds: np.ndarray
    root_seeds: np.ndarray
    plan: ProjectionPlan
    params: GrowthParams
    backend: Backend
    rng: np.random.Generator | None = None
    name: str = "forest"
    verbose: int = 0
    X: Any = None
    n_trees: int = field(init=False)

    def __post_init__(self) -> None:
        self.n_trees = int(self.seeds.shape[0])

    def grow(self, b0: int, b1: int) -> tuple[TreeChunk, np.ndarray, float]:
        """Grow trees ``b0`` to ``b1 - 1`` together (one batch).

        Returns
        -------
        chunk : TreeChunk
            The packed trees.
        counts : array (b1 - b0, n)
            Each tree's draw counts (ones without bootstrap): float64 on the host,
            or with bootstrap float32 on ``backend`` (counted there,
            :func:`~gpurpo.ensemble.forest.warm_start.draw_counts_on`).
        seconds : float
            Time spent.

        Raises
        ------
        MemoryError
            Saying which parameters to lower, if the batch runs out of memory.
        """
        start = time.perf_counter()
        backend = self.backend
        sw = self.sample_weight
        # with bootstrap the weights are the draw counts, exact in float32; without
        # bootstrap they are the sample weights, and the leaves average with their
        # float64 values (as the single tree does)
        if self.bootstrap:
            counts = draw_counts_on(self.sampling, self.seeds[b0:b1, 0], backend)
            weights = leaf_weights = counts
        else:
            counts = draw_counts(self.sampling, self.seeds[b0:b1, 0])
            weights = leaf_weights = None
            if sw is not None:
                w_host = counts * sw[None, :]
                weights = backend.asarray(w_host.astype(np.float32))
                leaf_weights = backend.asarray(w_host)
        m = self.plan.n_components
        if self.verbose > 1:
            tqdm.write(
                f"[{self.name}] growing trees {b0 + 1}-{b1} of {self.n_trees} "
                f"together on m={m} outputs"
            )
        grow = grow_tree_best_first if self.params.max_leaf_nodes is not None else grow_trees
        try:
            targets = self.plan.targets(self.Y_targets, self.seeds[b0:b1, 1], backend)
            result = grow(self.binned, targets, weights, self.params, self.rng, backend,
                          self.root_seeds[b0:b1])
            del targets
            if self.X is not None and self.params.splitter == "best":
                # node-local midpoints between the neighbouring values (scikit-learn's rule)
                refine_thresholds(result.structures, self.X, weights, backend,
                                  np.diff(self.binned.edge_ptr_host))
            chunk = self._label(result, leaf_weights)
        except MemoryError as exc:
            n, d = (int(s) for s in self.Y_leaves.shape)
            raise out_of_memory_error(exc, backend, b1 - b0, n, m, d) from exc
        return chunk, counts, time.perf_counter() - start

    def _label(self, result: Any, leaf_weights: Any) -> TreeChunk:
        """The leaf values of a grown batch, packed with its trees.

        On a CUDA backend the leaf values are computed for the whole batch at
        once (:func:`~gpurpo.tree.batch_leaves.stacked_leaf_values_csr` or
        :func:`~gpurpo.tree.batch_leaves.stacked_leaf_values_dense`: the CPU's
        values tree by tree, bit for bit); on the CPU tree by tree.
        """
        backend = self.backend
        structures = result.structures
        sparse_leaves = self.leaf_storage == "by_density" or backend.issparse(self.Y_leaves)
        if backend.uses_cuda_kernels:
            n_leaves = np.array([s.n_leaves for s in structures], dtype=np.int64)
            if not sparse_leaves:
                values, offsets = stacked_leaf_values_dense(
                    self.Y_leaves, result.leaf_of_sample, leaf_weights, n_leaves, backend)
                return TreeChunk.from_stacked(structures, values, offsets, backend)
            values, offsets = stacked_leaf_values_csr(
                self.Y_leaves, result.leaf_of_sample, leaf_weights, n_leaves, backend)
            if self.leaf_storage == "by_density" and _all_dense(values, offsets, n_leaves, backend):
                values = values.toarray()
            return TreeChunk.from_stacked(structures, values, offsets, backend)
        leaves = [
            leaf_values(
                self.Y_leaves,
                result.leaf_of_sample[t],
                None if leaf_weights is None else leaf_weights[t],
                s.n_leaves,
                backend,
                self.leaf_storage,
            )
            for t, s in enumerate(structures)
        ]
        return TreeChunk(structures, leaves, backend)


def _all_dense(values: Any, offsets: np.ndarray, n_leaves: np.ndarray, backend: Backend) -> bool:
    """Whether every tree's leaf values are denser than ``DENSE_LEAF_DENSITY`` (the
    rule by which :func:`~gpurpo.tree.leaf_values` stores a tree's leaves dense)."""
    ends = to_host(values.indptr[backend.asarray(np.stack([offsets, offsets + n_leaves]))])
    nnz = ends[1] - ends[0]
    return bool((nnz > DENSE_LEAF_DENSITY * n_leaves * values.shape[1]).all())
