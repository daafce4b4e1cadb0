"""Growing multi-output regression trees on (projected) outputs, driven by the host.

The host-orchestrated drivers of tree growth: :class:`HostGrower` holds a
batch of trees' state on the host, :func:`run_level_wise` and
:func:`run_best_first` drive it. The entry points :func:`gpurpo.tree.grow_trees`
and :func:`gpurpo.tree.grow_tree_best_first` (:mod:`gpurpo.tree.growth`) use
them on the CPU, and the device drivers on CUDA backends.

How a batch of nodes is evaluated
---------------------------------
Three paths, chosen by node size, give identical trees (up to float
rounding in near-ties, see the tie rule in :mod:`gpurpo.tree.kernels`):

* large nodes get histograms (``tree_histograms``) scored by
  :mod:`gpurpo.tree.splitting` in ``xp`` code; when every node uses all
  features (``max_features`` = p) only the smaller child of a pair is built
  and the larger one is its parent's histogram minus it;
* nodes with at most ``small_node_size`` samples are split exactly from
  their samples by ``tree_split_small`` (no histogram: a node of 3 samples
  does not scan ``n_bins x k`` bins);
* in level-wise growth, a node with at most ``subtree_size`` samples is
  grown to completion, depth first, by one ``tree_grow_subtrees`` call that
  works on a cache-resident copy of its samples' codes (on CUDA, one block
  per subtree, in the block's scratch; on the CPU, a node too large for a
  copy is evaluated on the global codes until its descendants fit one, so
  the CPU default hands over every node the small-node kernel would split);
  this is where a fully grown tree spends most of its nodes, and it replaces
  one round of host bookkeeping and kernel launches per remaining level by
  one call.

On the CPU, a sparse X (stored entries listed by column) takes no histogram
path by default: every node is split from its samples, where a mostly-zero
feature costs its column's stored entries (:func:`default_small_node_size`).
It has no dense codes either (``BinnedMatrix.dense_codes`` is None): the
kernels gather a node's codes of a feature from its column, and the
partition reads the columns (``kernels.partition_columns``).

With ``k < p`` a node visits the features in a pseudo-random order
(:mod:`gpurpo.tree._random`) until ``k`` features that are not constant in
the node have been evaluated, as scikit-learn does; the histogram path does
this in rounds over the nodes still short of ``k``. Only each tree's root
seed is drawn from ``rng``; a child's seed is a hash of its parent's, so a
node's randomness does not depend on which path evaluates it. The
histograms in memory at once (and their scoring temporaries) are kept under
``params.max_histogram_bytes`` by processing the batch in chunks.

Samples of the frontier nodes live in one int32 buffer in which every node
owns a contiguous range; splitting a node stably partitions its range in
place (left child first), so children's ranges are sub-ranges of their
parent's and sample order is preserved.

A node is a leaf when it is at ``max_depth``, has fewer than
``min_samples_split`` or ``2 * min_samples_leaf`` samples, all its samples
have identical targets, no candidate split leaves ``min_samples_leaf``
samples on each side, or its best split decreases the impurity by less than
``min_impurity_decrease`` (see :class:`~gpurpo.tree._params.GrowthParams`).
Targets are centred per tree (weighted mean) before growth, which leaves the
gains unchanged and keeps float32 sums accurate.

With ``params.criterion == "newton"`` the targets are m / 2 gradient columns
followed by their hessian columns, the split gain is the second-order gain
(see :class:`~gpurpo.tree._params.GrowthParams`), every node is split from
histograms and the targets are not centred (the gain is not invariant to a
shift of the gradients).
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass
from typing import Any

import numpy as np

from gpurpo.backend import Backend, bincount, registered_kernels, segment_positions
from gpurpo.tree import histogram, kernels
from gpurpo.tree._node_tables import (
    absorb_subtrees,
    leaf_table,
    number_nodes,
    place_leaf_samples,
)
from gpurpo.tree._pack import pack_structures
from gpurpo.tree._params import GrowthParams
from gpurpo.tree._random import children_seeds, feature_table, feistel_params, uniform_at
from gpurpo.tree.binning import BinnedMatrix
from gpurpo.tree.predictor import TreeStructure
from gpurpo.tree.splitting import TIE_ROUNDING, TIE_RTOL, best_slot_per_node, score_histograms

__all__ = [
    "GrowResult",
    "HostGrower",
    "HostNodeTable",
    "check_binned",
    "draw_root_seeds",
    "default_small_node_size",
    "run_best_first",
    "run_level_wise",
]

_EPSILON = np.finfo(np.float64).eps
_SCORE_BYTES_PER_CELL = 4 + 8 * 6
# frontiers of at most this many nodes have their cached histograms scored one by one
_UNSTACKED_NODES = 4
# a node size limit that every node meets (the sample lists are indexed by int32)
UNLIMITED_NODE_SIZE = np.iinfo(np.int32).max


def _has_kernel(backend: Backend, name: str) -> bool:
    impls = registered_kernels().get(name, ())
    return ("cuda" if backend.uses_cuda_kernels else "cpu") in impls


def default_small_node_size(
    backend: Backend, all_features: bool = False, stored_columns: bool = False
) -> int:
    """Largest node split exactly from its samples (``tree_split_small``) by default.

    When every node uses all features, histograms are built for only one child
    of each pair (subtraction), so they win from smaller nodes on.

    With ``stored_columns`` (a sparse X, whose stored entries are listed by
    column: :class:`~gpurpo.tree.binning._sparse.SparseCodes`) the CPU splits
    nodes of every size from their samples: a mostly-zero feature then costs
    the stored entries of its column instead of every sample of the node (its
    zero bin is derived from the node's totals), where a histogram reads all
    the node's codes. Trees on text-like X are deep and unbalanced (a split on
    a rare word peels off the few rows holding it), so histograms of nodes
    above 4,096 samples made their fit grow about as n^2: a text-like 2-tree
    forest (20,000 x 20,000 CSR, 0.5 % nonzero, ``max_features="sqrt"``, one
    thread) took 9.4 s with the 4,096 limit and 1.4 s without, with the same
    predictions. A dense X whose codes are mostly their feature's code of 0.0
    (word presence features) is binned as its stored entries alone
    (:attr:`~gpurpo.tree.binning.BinnedMatrix.dense_codes`), so it is grown the
    same way, from its columns.
    """
    if not _has_kernel(backend, "tree_split_small"):
        return 0
    if backend.name == "numpy":
        if stored_columns:
            return UNLIMITED_NODE_SIZE
        return 512 if all_features else 4096
    return 256


def default_subtree_size(backend: Backend, n_features: int, small_node_size: int = 0) -> int:
    """Largest node whose subtree is grown in one ``tree_grow_subtrees`` call by default.

    On the CPU, every node that the small-node kernel would split
    (``small_node_size``): the kernel grows a root depth first, evaluating
    its nodes as the small-node kernel does, and copies a node's codes into
    a cache-resident block (``n_features x size`` bytes, about 512 KiB) once
    it fits one; so the deep levels of a tree cost no host round trip each
    (a text-like 10-tree forest, trees 750 levels deep, would otherwise take
    about 1,400 levels of host work). On CUDA one thread block grows a whole
    subtree node after node, so large subtrees serialise work that level-wise
    growth spreads over the device: on an H100, 100-tree forests on a million
    rows (p = 100) fitted in 27.9 s with subtrees of up to 128 samples against
    33.1 s with 1024, and 4-tree forests were fastest between 64 and 256
    (``bench/gpu_subtree_sweep.py``). The root's codes copied into
    the block's scratch (``n_features x size`` bytes) stay within 256 KiB.
    """
    if not _has_kernel(backend, "tree_grow_subtrees"):
        return 0
    if backend.name == "numpy":
        return int(max(small_node_size, min(4096, max(64, (1 << 19) // max(n_features, 1)))))
    return int(min(128, max(64, (1 << 18) // max(n_features, 1))))


@dataclass
class GrowResult:
    """Trees grown together: host structures and per-sample leaves."""

    structures: list[TreeStructure]
    leaf_of_sample: Any


class HostNodeTable:
    """Growable host arrays describing every node created so far."""

    _FIELDS = (
        ("tree", np.int32, 0),
        ("parent", np.int64, -1),
        ("depth", np.int32, 0),
        ("start", np.int64, 0),
        ("stop", np.int64, 0),
        ("feature", np.int32, -1),
        ("bin", np.int32, 0),
        ("missing_left", np.uint8, 0),
        ("gain", np.float64, -np.inf),
        ("left", np.int64, -1),
        ("right", np.int64, -1),
        ("seed", np.uint64, 0),
    )

    def __init__(self) -> None:
        self.size = 0
        self.capacity = 0
        for name, dtype, fill in self._FIELDS:
            setattr(self, name, np.full(0, fill, dtype=dtype))

    def reserve(self, capacity: int) -> None:
        """Make room for ``capacity`` nodes in all (so that growth never copies).

        The room is left uninitialised (an upper bound on the nodes of fully
        grown trees is several times what they use); :meth:`add` writes every
        field of the nodes it creates.
        """
        if capacity <= self.capacity:
            return
        for name, dtype, _ in self._FIELDS:
            arr = np.empty(capacity, dtype=dtype)
            arr[: self.size] = getattr(self, name)[: self.size]
            setattr(self, name, arr)
        self.capacity = capacity

    def add(
        self, tree: Any, parent: Any, depth: Any, start: Any, stop: Any, seed: Any = 0
    ) -> np.ndarray:
        count = len(tree)
        first = self.extend(count)
        new = slice(first, first + count)
        given = {"tree": tree, "parent": parent, "depth": depth, "start": start, "stop": stop,
                 "seed": seed}
        for name, _, fill in self._FIELDS:
            getattr(self, name)[new] = given.get(name, fill)
        return np.arange(first, first + count, dtype=np.int64)

    def extend(self, count: int) -> int:
        """Append ``count`` nodes whose fields the caller writes; returns the first new id."""
        first = self.size
        needed = first + count
        if needed > self.capacity:
            self.reserve(max(needed, 2 * self.capacity, 64))
        self.size = needed
        return first


def target_mean(xp: Any, targets: Any, weights: Any, w_sum: Any) -> Any:
    """float64 (T, m): every tree's weighted mean of its targets (``w_sum``: each
    tree's total weight), the centre of growth.

    ``weights`` None: every sample has weight 1 in every tree (``w_sum`` is
    then unused), and the mean is one reduction.
    """
    if weights is None:
        return xp.mean(targets, axis=0, dtype=xp.float64)
    safe = xp.where(w_sum > 0, w_sum, 1.0)
    mean = xp.einsum("tn,ntc->tc", weights.astype(xp.float64), targets.astype(xp.float64))
    return mean / safe[:, None]


def centre_targets(xp: Any, targets: Any, mean: Any) -> Any:
    """float32 (n, T, m): the targets of every tree minus ``mean`` (T, m).

    The gains do not change, and float32 sums of centred targets stay accurate.
    """
    return xp.ascontiguousarray(xp.subtract(targets, mean[None, :, :], dtype=xp.float32))


class HostGrower:
    """State shared by the level-wise and best-first drivers.

    Extension API: the steps that read the samples are methods that a
    subclass may override -- :meth:`target_centre`, :meth:`node_statistics`,
    :meth:`node_histograms`, :meth:`partition_nodes` and
    :meth:`place_samples`. Everything else (split scoring, the tie rule, the
    features' visiting order, histogram subtraction between siblings, the
    stopping rules, the node table) is computed from what they return. The
    distributed grower of :mod:`gpurpo.dask` overrides them to sum the
    partial results of workers that each hold some of the rows (the
    data-parallel histograms of Chen & Guestrin 2016, section 4.1).
    """

    def __init__(
        self,
        binned: BinnedMatrix,
        targets: Any,
        weights: Any,
        params: GrowthParams,
        rng: np.random.Generator,
        backend: Backend,
        root_seeds: Any = None,
    ) -> None:
        xp = backend.xp
        self.xp = xp
        self.backend = backend
        self.binned = binned
        # the ragged edge table of the binned features, as the kernels take it
        self.edges = kernels.EdgeTable(binned.edge_values, binned.edge_ptr)
        self.params = params.validated()
        self.rng = rng
        n = binned.n_samples
        p = binned.n_features
        targets = xp.asarray(targets)
        if targets.ndim != 3 or targets.shape[0] != n:
            raise ValueError(
                f"targets must have shape (n_samples={n}, n_trees, n_outputs), got {targets.shape}"
            )
        n_trees = int(targets.shape[1])
        self.m = int(targets.shape[2])
        self.newton = self.params.criterion == "newton"
        if self.newton and self.m % 2:
            raise ValueError(
                "targets must hold as many hessian as gradient columns with "
                f"criterion='newton' (an even n_outputs), got shape {targets.shape}"
            )
        #: no weights given: every sample has weight 1 in every tree
        self.unweighted = weights is None
        if weights is None:
            weights = xp.ones((n_trees, n), dtype=xp.float32)
            unit = True
        else:
            weights = xp.ascontiguousarray(xp.asarray(weights, dtype=xp.float32))
            if weights.shape != (n_trees, n):
                raise ValueError(
                    f"weights must have shape (n_trees={n_trees}, n_samples={n}), "
                    f"got {weights.shape}"
                )
            if not bool(xp.isfinite(weights).all()) or bool((weights < 0).any()):
                raise ValueError("weights must be finite and non-negative")
            unit = bool(((weights == 0) | (weights == 1)).all())
        self.n_trees = n_trees
        self.n = n
        self.p = p
        self.weights = weights
        self.channels = histogram.n_channels(self.m, unit)
        self.k = p if params.n_candidates is None else min(int(params.n_candidates), p)
        self.all_features = self.k >= p
        self.random_split = params.splitter == "random"
        self.small = (
            default_small_node_size(backend, self.all_features,
                                    binned.sparse_codes is not None)
            if params.small_node_size is None
            else int(params.small_node_size)
        )
        self.subtree = (
            default_subtree_size(backend, p, self.small)
            if params.subtree_size is None
            else int(params.subtree_size)
        )
        if self.newton:
            # the exact small-node and subtree kernels score variance only
            self.small = self.subtree = 0
        self.msl = int(params.min_samples_leaf)

        targets = xp.asarray(targets, dtype=xp.float32)
        if not bool(xp.isfinite(targets).all()):
            raise ValueError(
                "targets must be finite in float32: the outputs (or their projections, or the "
                "gradients of boosting) overflow float32's range; rescale y (or, for "
                "boosting, lower learning_rate)"
            )
        w_sum = weights.sum(axis=1, dtype=xp.float64)
        self.w_root = backend.to_host(w_sum).astype(np.float64)
        if self.newton:
            # gradient and hessian sums enter the gain as they are
            self.targets = xp.ascontiguousarray(targets)
        else:
            self.targets = centre_targets(xp, targets, self.target_centre(targets, weights, w_sum))

        # Root sample lists: samples with a positive weight, tree by tree.
        tree_idx, sample_idx = xp.nonzero(weights > 0)
        self.sample_indices = xp.ascontiguousarray(sample_idx.astype(xp.int32))
        counts = backend.to_host(bincount(xp, tree_idx, n_trees)).astype(np.int64)
        if not counts.all():
            raise ValueError(
                "weights must give every tree at least one sample of positive weight; "
                f"tree {int(np.argmin(counts))} has none"
            )
        starts = np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(np.int64)
        self.nodes = HostNodeTable()
        # a binary tree on c samples has at most 2c - 1 nodes (one leaf per sample),
        # or 2 L - 1 with at most L leaves
        max_nodes = 2 * np.maximum(counts, 1) - 1
        if params.max_leaf_nodes is not None:
            max_nodes = np.minimum(max_nodes, 2 * int(params.max_leaf_nodes) - 1)
        self.nodes.reserve(int(max_nodes.sum()))
        if root_seeds is None:
            root_seeds = draw_root_seeds(rng, n_trees)
        # seeds drawn on the device (boosting's blocks of draws) come to the host
        root_seeds = np.asarray(backend.to_host(root_seeds), dtype=np.uint64)
        if root_seeds.shape != (n_trees,):
            raise ValueError(
                f"root_seeds must have shape (n_trees={n_trees},), got {root_seeds.shape}"
            )
        self.roots = self.nodes.add(
            np.arange(n_trees), np.full(n_trees, -1), np.zeros(n_trees), starts, starts + counts,
            root_seeds,
        )
        self.cache: dict[int, Any] = {}
        self.node_bytes = histogram.histogram_bytes(1, self.k, binned.n_bins, self.channels)

    def target_centre(self, targets: Any, weights: Any, w_sum: Any) -> Any:
        """The centre of growth: the value subtracted from every tree's targets.

        Hook of the extension API (class docstring), called once by
        ``__init__`` (not with ``criterion="newton"``, whose targets are not
        centred). Any centre gives the same gains; the weighted mean
        (:func:`target_mean`) keeps float32 sums accurate.

        Parameters
        ----------
        targets : float32 array (n, T, m)
            The targets, on the backend.
        weights : float32 array (T, n)
            Every tree's sample weights, on the backend.
        w_sum : float64 array (T,)
            Every tree's total weight, on the backend.

        Returns
        -------
        float64 array (T, m) on the backend
        """
        return target_mean(self.xp, targets, None if self.unweighted else weights, w_sum)

    # ------------------------------------------------------------------ utils

    def _ranges(self, ids: np.ndarray) -> np.ndarray:
        """int64 (len(ids), 2): the ``[start, stop)`` sample ranges of the nodes ``ids``."""
        out = np.empty((len(ids), 2), dtype=np.int64)
        out[:, 0] = self.nodes.start[ids]
        out[:, 1] = self.nodes.stop[ids]
        return out

    def _dev(self, a: np.ndarray, dtype: Any) -> Any:
        if not self.backend.is_gpu:
            return np.ascontiguousarray(a, dtype=dtype)
        return self.backend.asarray(np.ascontiguousarray(a), dtype=dtype)

    def node_statistics(self, ids: np.ndarray, on_host: bool = True) -> tuple[Any, Any]:
        """(impure, Q) of the nodes ``ids``: targets not all identical; ``Q = sum w ||y||^2``.

        Hook of the extension API (class docstring): :meth:`evaluate` calls it
        for the nodes it splits from histograms; a pure node becomes a leaf and
        ``Q`` enters the impurity decrease.

        Parameters
        ----------
        ids : int64 array (N,)
            Node ids of the node table (:attr:`nodes`).
        on_host : bool, default=True
            Whether the caller needs host arrays. With False it also accepts
            arrays on the backend (the ``tree_node_stats`` kernel's outputs,
            uint8 and float64, where they lie); on the NumPy backend both are
            host arrays.

        Returns
        -------
        impure, Q : arrays (N,)
            Whether each node's targets are not all identical, and its
            ``sum w ||y||^2``: host bool and float64 arrays, or with
            ``on_host=False`` possibly the backend's.
        """
        xp = self.xp
        if len(ids) == 0:
            return np.zeros(0, dtype=bool), np.zeros(0)
        nodes = self.nodes
        ranges = self._ranges(ids)
        impure, q = kernels.node_stats(
            self.backend,
            self.sample_indices,
            self._dev(ranges, xp.int64),
            self._dev(nodes.tree[ids], xp.int32),
            self.weights,
            self.targets,
        )
        if not on_host:
            return impure, q
        return self.backend.to_host(impure).astype(bool), self.backend.to_host(q)

    def drop_cached(self, ids: np.ndarray) -> None:
        """Forget the cached histograms of the nodes ``ids`` (most have none).

        Deep levels hold millions of nodes and the cache a few large ones:
        the cheaper side of the two is iterated.
        """
        if not self.cache or len(ids) == 0:
            return
        if len(ids) > len(self.cache):
            keys = np.fromiter(self.cache.keys(), dtype=np.int64, count=len(self.cache))
            for g in keys[np.isin(keys, ids)].tolist():
                del self.cache[g]
        else:
            for g in np.asarray(ids).tolist():
                self.cache.pop(g, None)

    # ------------------------------------------------------------ evaluation

    def evaluate(self, ids: np.ndarray) -> None:
        """Find the best split of the nodes ``ids``; store it (feature -1: leaf)."""
        nodes = self.nodes
        params = self.params
        ns = nodes.stop[ids] - nodes.start[ids]
        seeds = nodes.seed[ids]
        ok = (ns >= params.min_samples_split) & (ns >= 2 * self.msl) & (ns >= 2)
        if params.max_depth is not None:
            ok &= nodes.depth[ids] < params.max_depth
        small = ok & (ns <= self.small)
        large = ok & ~small
        feature = np.full(len(ids), -1, dtype=np.int32)
        best_bin = np.zeros(len(ids), dtype=np.int32)
        missing_left = np.zeros(len(ids), dtype=np.uint8)
        gain = np.full(len(ids), -np.inf)
        if small.any():
            sel = np.flatnonzero(small)
            out = self._split_small(ids[sel], seeds[sel])
            feature[sel], best_bin[sel], missing_left[sel], gain[sel] = out
        if large.any():
            sel = np.flatnonzero(large)
            if self.all_features:
                # purity and Q stay on the device: the best-slot kernel reads them
                out = self._split_large_all_features(ids[sel], seeds[sel],
                                                     *self.node_statistics(ids[sel], on_host=False))
                feature[sel], best_bin[sel], missing_left[sel], gain[sel] = out
            else:
                impure, q = self.node_statistics(ids[sel])
                sel, q = sel[impure], q[impure]
                if len(sel):
                    out = self._split_large_sampled(ids[sel], seeds[sel], q)
                    feature[sel], best_bin[sel], missing_left[sel], gain[sel] = out
        # min_impurity_decrease, scikit-learn's normalisation (per output, over the root weight)
        n_scored = self.m // 2 if self.newton else self.m
        improvement = gain / (n_scored * self.w_root[nodes.tree[ids]])
        keep = (feature >= 0) & (improvement + _EPSILON >= params.min_impurity_decrease)
        feature[~keep] = -1
        nodes.feature[ids] = feature
        nodes.bin[ids] = best_bin
        nodes.missing_left[ids] = missing_left
        nodes.gain[ids] = np.where(keep, gain, -np.inf)

    def _split_small(self, ids: np.ndarray, seeds: np.ndarray) -> tuple[np.ndarray, ...]:
        xp = self.xp
        nodes = self.nodes
        ranges = self._ranges(ids)
        out = kernels.split_small(
            self.backend,
            self.binned.kernel_codes,
            kernels.NodeBatch(
                self.sample_indices,
                self._dev(ranges, xp.int64),
                self._dev(nodes.tree[ids], xp.int32),
                self._dev(seeds, xp.uint64),
            ),
            self.weights,
            self.targets,
            self.edges,
            kernels.SplitRules(self.k, self.msl, self.random_split, self.binned.missing_bin,
                               TIE_RTOL),
            kernels.SparseColumns(self.binned.subtracted_bin, self.binned.kernel_sparse_codes,
                                  self.binned.listed),
        )
        return tuple(self.backend.to_host(a) for a in out)

    def _chunk_size(self, k: int) -> int:
        per_node = _SCORE_BYTES_PER_CELL * k * self.binned.n_bins * self.channels
        return max(1, int(self.params.max_histogram_bytes // max(per_node, 1)))

    def _tie_tolerance(self, hist: Any, q: np.ndarray) -> np.ndarray:
        """The cross-feature tie tolerance of each node of ``hist`` (N, k, B, C), on the host.

        ``TIE_RTOL`` of the node's impurity ``Q - ||S||^2 / W`` (``W`` and ``S``
        summed over the bins of the first slot, which hold all the node's
        samples), plus ``TIE_ROUNDING * Q``: the rule of the exact kernels
        (``tree_split_small``). Second-order (Newton) gains keep ``TIE_RTOL * Q``.
        """
        if self.newton:
            return TIE_RTOL * q
        xp = self.xp
        totals = self.backend.to_host(hist[:, 0].sum(axis=1, dtype=xp.float64))
        weight = totals[:, 0]
        sums = totals[:, 1 : self.m + 1]
        parent = (sums * sums).sum(axis=1) / np.where(weight > 0, weight, 1.0)
        return TIE_RTOL * np.maximum(q - parent, 0.0) + TIE_ROUNDING * q

    def _score(
        self, hist: Any, feats: Any, seeds: np.ndarray, positions: np.ndarray
    ) -> Any:
        """Score the histograms; Extra-Trees cut draws for (node seed, position) pairs.

        ``seeds`` (n_nodes,) and ``positions`` (broadcastable to (n_nodes, k))
        are host arrays: the draws are made on the host and copied once.
        """
        xp = self.xp
        uniforms = None
        if self.random_split:
            uniforms = self._dev(uniform_at(seeds[:, None], positions, np), xp.float64)
        return score_histograms(
            self.backend,
            hist,
            feats,
            self.m,
            self.msl,
            self.edges,
            random_split=self.random_split,
            uniforms=uniforms,
            newton=self.newton,
            reg_lambda=self.params.reg_lambda,
            min_child_weight=self.params.min_child_weight,
        )

    def node_histograms(self, ids: np.ndarray, feats: Any) -> Any:
        """The histograms of the nodes ``ids`` over the features ``feats``.

        Hook of the extension API (class docstring): every split chosen from
        histograms is scored on what it returns (directly, or by subtraction
        from a parent's cached histogram).

        Parameters
        ----------
        ids : int64 array (N,)
            Node ids of the node table (:attr:`nodes`).
        feats : int32 array (N, k) on the backend
            The features of each node's histograms, -1 for an unused slot.

        Returns
        -------
        float32 array (N, k, n_bins, channels) on the backend
            Per node, feature slot and bin, the sums of the layout of
            :func:`gpurpo.tree.histogram.node_histograms` (``channels`` is
            :attr:`channels`); zeros in unused slots.
        """
        xp = self.xp
        nodes = self.nodes
        ranges = self._ranges(ids)
        return histogram.node_histograms(
            self.binned,
            kernels.NodeBatch(self.sample_indices, self._dev(ranges, xp.int64),
                              self._dev(nodes.tree[ids], xp.int32)),
            feats,
            self.weights,
            self.targets,
            self.channels,
        )

    def _split_large_all_features(
        self, ids: np.ndarray, seeds: np.ndarray, impure: Any, q: Any
    ) -> tuple[np.ndarray, ...]:
        """All p features per node: histogram subtraction between siblings.

        Every slot is scored; among gains that tie, the feature that comes first
        in the node's random visiting order wins (as in ``tree_split_small``).
        ``impure`` and ``q`` (``tree_node_stats``'s outputs, on the backend) go
        to the ``tree_best_slot`` kernel, which makes pure nodes leaves and
        returns each chunk's choices in one array.
        """
        xp = self.xp
        nodes = self.nodes
        p = self.p
        feats_one = xp.arange(p, dtype=xp.int32)[None, :]
        ns = nodes.stop - nodes.start
        # Which histograms to build directly and which to derive.
        direct: list[int] = []
        derive: list[tuple[int, int, int]] = []  # (node, parent, sibling)
        wanted = set(int(g) for g in ids)
        seen_parent: set[int] = set()
        for g in ids:
            g = int(g)
            parent = int(nodes.parent[g])
            if parent < 0 or parent not in self.cache:
                direct.append(g)
                continue
            if parent in seen_parent:
                continue
            seen_parent.add(parent)
            left, right = int(nodes.left[parent]), int(nodes.right[parent])
            small_child, big_child = (left, right) if ns[left] <= ns[right] else (right, left)
            direct.append(small_child)
            if big_child in wanted:
                derive.append((big_child, parent, small_child))
        chunk = self._chunk_size(p)
        budget_nodes = max(0, int(self.params.max_histogram_bytes // (2 * self.node_bytes)))
        fits = len(direct) + len(derive) <= budget_nodes
        out_f = np.full(len(ids), -1, dtype=np.int32)
        out_b = np.zeros(len(ids), dtype=np.int32)
        out_m = np.zeros(len(ids), dtype=np.uint8)
        out_g = np.full(len(ids), -np.inf)
        hists: dict[int, Any] = {}
        if fits:
            direct_arr = np.asarray(direct, dtype=np.int64)
            for c0 in range(0, len(direct_arr), chunk):
                part = direct_arr[c0 : c0 + chunk]
                h = self.node_histograms(part, xp.broadcast_to(feats_one, (len(part), p)))
                for r, g in enumerate(part):
                    hists[int(g)] = h[r]
            for g, parent, sibling in derive:
                # the parent's histogram is dropped below: overwrite it
                hists[g] = histogram.subtract(self.cache[parent], hists[sibling], in_place=True)
        for parent in seen_parent:
            self.cache.pop(parent, None)
        # each feature's position in its node's visiting order: the tie rule's
        # order and the Extra-Trees draws' index
        order = np.empty((len(ids), p), dtype=np.int32)
        feature_table(
            np.ascontiguousarray(seeds, dtype=np.uint64),
            np.ascontiguousarray(np.broadcast_to(np.arange(p, dtype=np.int64), (len(ids), p))),
            p, *feistel_params(p), order,
        )
        positions = np.empty((len(ids), p), dtype=np.int64)
        np.put_along_axis(positions, order.astype(np.int64), np.arange(p, dtype=np.int64)[None, :], axis=1)
        if fits and len(ids) <= _UNSTACKED_NODES:
            # a few nodes (best-first growth): each cached histogram is scored where it
            # lies rather than copied into one stacked array
            chunk = 1
        for c0 in range(0, len(ids), chunk):
            part = ids[c0 : c0 + chunk]
            feats = xp.broadcast_to(feats_one, (len(part), p))
            if fits and len(part) == 1:
                h = hists[int(part[0])][None]
            elif fits:
                h = xp.stack([hists[int(g)] for g in part])
            else:
                h = self.node_histograms(part, feats)
            at = positions[c0 : c0 + chunk]
            slots = self._score(h, feats, seeds[c0 : c0 + chunk], at)
            best = self.backend.to_host(kernels.best_slots(
                self.backend, h, q[c0 : c0 + chunk], impure[c0 : c0 + chunk], slots, feats,
                self._dev(at, xp.int64), self.m, self.newton,
                TIE_RTOL, TIE_ROUNDING,
            ))
            out_f[c0 : c0 + chunk] = best[:, 0]
            out_b[c0 : c0 + chunk] = best[:, 1]
            out_m[c0 : c0 + chunk] = best[:, 2]
            out_g[c0 : c0 + chunk] = best[:, 3]
        if fits:
            for r, g in enumerate(ids):
                if out_f[r] >= 0:
                    self.cache[int(g)] = hists[int(g)]
        return out_f, out_b, out_m, out_g

    def _split_large_sampled(
        self, ids: np.ndarray, seeds: np.ndarray, q: np.ndarray
    ) -> tuple[np.ndarray, ...]:
        """k < p: evaluate the non-constant features among the first k of each node's
        random order; a node without any visits further, up to its first non-constant
        feature (scikit-learn's rule)."""
        xp = self.xp
        n_nodes = len(ids)
        k, p = self.k, self.p
        pos = np.zeros(n_nodes, dtype=np.int64)
        found = np.zeros(n_nodes, dtype=np.int64)
        # per node, the best split of every evaluated feature (host), filled round by round
        cand_g = np.full((n_nodes, k), -np.inf)
        cand_f = np.full((n_nodes, k), -1, dtype=np.int32)
        cand_b = np.zeros((n_nodes, k), dtype=np.int32)
        cand_m = np.zeros((n_nodes, k), dtype=np.uint8)
        tie_tol = np.zeros(n_nodes)
        active = np.arange(n_nodes)
        first_round = True
        while len(active):
            # first round: positions 0..k-1; then k more at a time
            take = np.minimum(k, p - pos[active])
            width = int(take.max())
            chunk = self._chunk_size(width)
            for c0 in range(0, len(active), chunk):
                rows = active[c0 : c0 + chunk]
                tk = take[c0 : c0 + chunk]
                slot = np.arange(width)[None, :]
                positions = pos[rows][:, None] + slot
                # the visiting order on the host: a few small arrays, where a device
                # evaluation would be dozens of tiny kernel launches per round
                feats_h = np.empty(positions.shape, dtype=np.int32)
                feature_table(
                    np.ascontiguousarray(seeds[rows], dtype=np.uint64),
                    np.ascontiguousarray(positions, dtype=np.int64), p, *feistel_params(p),
                    feats_h,
                )
                feats_h[slot >= tk[:, None]] = -1
                feats = self._dev(feats_h, xp.int32)
                h = self.node_histograms(ids[rows], feats)
                if first_round:
                    tie_tol[rows] = self._tie_tolerance(h, q[rows])
                slots = self._score(h, feats, seeds[rows], positions)
                nonconst = self.backend.to_host(slots.nonconstant)
                gains = self.backend.to_host(slots.gain)
                bins = self.backend.to_host(slots.bin)
                mls = self.backend.to_host(slots.missing_left)
                # keep the non-constant slots, in visiting order, after those found so far:
                # all of them among the first k positions, else only a node's first one
                rank = np.cumsum(nonconst, axis=1) - 1 + found[rows][:, None]
                nonconst = nonconst.astype(bool) & ((positions < k) | (rank == 0))
                r_idx, s_idx = np.nonzero(nonconst)
                dest = rank[r_idx, s_idx]
                node_rows = rows[r_idx]
                cand_g[node_rows, dest] = gains[r_idx, s_idx]
                cand_f[node_rows, dest] = feats_h[r_idx, s_idx]
                cand_b[node_rows, dest] = bins[r_idx, s_idx]
                cand_m[node_rows, dest] = mls[r_idx, s_idx]
                found[rows] += nonconst.sum(axis=1)
            pos[active] += take
            active = active[(found[active] == 0) & (pos[active] < p)]
            first_round = False
        f, b, ml, g = best_slot_per_node(np, cand_g, cand_b, cand_m, cand_f, tie_tol)
        return f, b, ml, g

    # ----------------------------------------------------------- partition

    def split(self, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Partition the samples of the (splitting) nodes ``ids``; create children."""
        nodes = self.nodes
        ranges = self._ranges(ids)
        starts, stops = ranges[:, 0], ranges[:, 1]
        n_left = self.partition_nodes(ids, ranges)
        mid = starts + n_left
        count = len(ids)
        tree = np.repeat(nodes.tree[ids], 2)
        parent = np.repeat(ids, 2)
        depth = np.repeat(nodes.depth[ids] + 1, 2)
        child_start = np.empty(2 * count, dtype=np.int64)
        child_stop = np.empty(2 * count, dtype=np.int64)
        child_start[0::2], child_stop[0::2] = starts, mid
        child_start[1::2], child_stop[1::2] = mid, stops
        children = nodes.add(tree, parent, depth, child_start, child_stop,
                             children_seeds(nodes.seed[ids]))
        nodes.left[ids] = children[0::2]
        nodes.right[ids] = children[1::2]
        return children[0::2], children[1::2]

    def partition_nodes(self, ids: np.ndarray, ranges: np.ndarray) -> np.ndarray:
        """Stably partition the samples of the nodes ``ids`` by their splits (left first).

        Hook of the extension API (class docstring): :meth:`split` calls it
        once the splits (``nodes.feature``, ``nodes.bin``,
        ``nodes.missing_left``) of ``ids`` are set, then creates the children
        (left then right, in the order of ``ids``) on the sample ranges it
        reports.

        Parameters
        ----------
        ids : int64 array (N,)
            Node ids of the splitting nodes.
        ranges : int64 array (N, 2)
            Their ``[start, stop)`` ranges in :attr:`sample_indices`.

        Returns
        -------
        int64 host array (N,)
            The number of samples each node sends left (the left child's range
            is ``[start, start + n_left)``).
        """
        xp = self.xp
        nodes = self.nodes
        split_at = (
            kernels.NodeBatch(self.sample_indices, self._dev(ranges, xp.int64), None),
            kernels.NodeSplits(self._dev(nodes.feature[ids], xp.int32),
                               self._dev(nodes.bin[ids], xp.int32),
                               self._dev(nodes.missing_left[ids], xp.uint8)),
            self.binned.missing_bin,
        )
        if self.binned.dense_codes is None:
            n_left_dev = kernels.partition_columns(
                self.backend, self.binned.sparse_codes, self.edges, *split_at)
        else:
            n_left_dev = kernels.partition(self.backend, self.binned.codes, *split_at)
        return self.backend.to_host(n_left_dev).astype(np.int64)

    # ------------------------------------------------------------- subtrees

    def grow_subtrees(self, ids: np.ndarray) -> None:
        """Grow the nodes ``ids`` to completion with the ``tree_grow_subtrees`` kernel."""
        xp = self.xp
        nodes = self.nodes
        params = self.params
        ranges = self._ranges(ids)
        out = kernels.grow_subtrees(
            self.backend,
            self.binned.kernel_codes,
            kernels.NodeBatch(
                self.sample_indices,
                self._dev(ranges, xp.int64),
                self._dev(nodes.tree[ids], xp.int32),
                self._dev(nodes.seed[ids], xp.uint64),
                self._dev(nodes.depth[ids], xp.int32),
            ),
            self.weights,
            self.targets,
            self._dev(self.w_root, xp.float64),
            self.edges,
            kernels.SplitRules(
                self.k, self.msl, self.random_split, self.binned.missing_bin, TIE_RTOL,
                min_samples_split=max(2, int(params.min_samples_split)),
                max_depth=params.max_depth,
                min_impurity_decrease=params.min_impurity_decrease,
            ),
            kernels.SparseColumns(self.binned.subtracted_bin, self.binned.kernel_sparse_codes,
                                  self.binned.listed),
        )
        out = out.to_host(self.backend)  # one device-to-host copy
        count = out.count.astype(np.int64)
        first = nodes.extend(int(count.sum()) - len(ids))
        added = absorb_subtrees(
            np.ascontiguousarray(ids, dtype=np.int64), out.offsets, count, out.feature,
            out.bin, out.missing_left, out.gain, out.left, out.right, out.depth, out.start,
            out.stop, first, nodes.tree, nodes.parent, nodes.depth, nodes.start, nodes.stop,
            nodes.feature, nodes.bin, nodes.missing_left, nodes.gain, nodes.left, nodes.right,
            nodes.seed,
        )
        if added != nodes.size - first:
            raise RuntimeError(f"tree_grow_subtrees reported {nodes.size - first} new nodes, "
                               f"wrote {added}")

    # -------------------------------------------------------------- output

    def finish(self) -> GrowResult:
        nodes = self.nodes
        size = nodes.size
        is_leaf = nodes.left[:size] < 0
        tree = nodes.tree[:size]
        # Leaf and node numbering per tree, in node order; nodes grouped by tree.
        leaf_index = np.empty(size, dtype=np.int32)
        local_id = np.empty(size, dtype=np.int64)
        node_order = np.empty(size, dtype=np.int64)
        tree_counts = np.empty(self.n_trees, dtype=np.int64)
        number_nodes(tree, is_leaf, leaf_index, local_id, node_order, tree_counts)
        # the leaves (their feature set to -1) with their sample ranges, in one pass
        leaf_ids, leaf_start, leaf_length, leaf_tree, leaf_rank = leaf_table(
            nodes.left[:size], nodes.feature[:size], tree, nodes.start[:size],
            nodes.stop[:size], leaf_index,
        )
        leaf_of_sample, leaf_weight = self.place_samples(
            leaf_ids, leaf_start, leaf_length, leaf_tree, leaf_rank)
        structures = pack_structures(nodes, self.binned, leaf_ids, leaf_weight, leaf_index,
                                     local_id, node_order, tree_counts)
        return GrowResult(structures=structures, leaf_of_sample=leaf_of_sample)

    def place_samples(
        self, leaf_ids: np.ndarray, leaf_start: np.ndarray, leaf_length: np.ndarray,
        leaf_tree: np.ndarray, leaf_rank: np.ndarray,
    ) -> tuple[Any, np.ndarray | None]:
        """The leaf of every sample and each leaf's weighted sample count.

        Hook of the extension API (class docstring): :meth:`finish` calls it
        once the trees are grown.

        Parameters
        ----------
        leaf_ids : int64 array (L,)
            Node ids of the leaves, grouped by tree.
        leaf_start, leaf_length : int64 arrays (L,)
            Their sample ranges in :attr:`sample_indices`.
        leaf_tree : int64 array (L,)
            The tree of each leaf.
        leaf_rank : int32 array (L,)
            Each leaf's index among its tree's leaves.

        Returns
        -------
        leaf_of_sample : int32 array (T, n) on the backend, or None
            The leaf (index among its tree's leaves) of every sample, -1 where
            the sample is not in the tree; an override may keep it elsewhere
            and return None.
        leaf_weight : float64 host array (L,), or None without leaves
        """
        xp = self.xp
        leaf_of_sample = xp.full((self.n_trees, self.n), -1, dtype=xp.int32)
        if not len(leaf_ids):
            return leaf_of_sample, None
        if xp is np:
            leaf_weight = np.empty(len(leaf_ids), dtype=np.float64)
            place_leaf_samples(self.sample_indices, self.weights, leaf_start, leaf_length,
                               leaf_tree, leaf_rank, leaf_of_sample, leaf_weight)
            return leaf_of_sample, leaf_weight
        pos, node_of = segment_positions(
            xp, self._dev(leaf_start, xp.int64), self._dev(leaf_length, xp.int64),
            int(leaf_length.sum()),
        )
        samples = self.sample_indices[pos].astype(xp.int64)
        t_of = self._dev(leaf_tree, xp.int64)[node_of]
        leaf_of_sample[t_of, samples] = self._dev(leaf_rank, xp.int32)[node_of]
        w_leaf = self.weights[t_of, samples].astype(xp.float64)
        # each leaf's weights added in buffer order (the CPU's bits; no atomics)
        bounds = np.concatenate([[0], np.cumsum(leaf_length)]).astype(np.int64)
        leaf_weight = self.backend.to_host(
            kernels.segment_sums(self.backend, w_leaf, self._dev(bounds, xp.int64)))
        return leaf_of_sample, leaf_weight


def check_binned(binned: Any) -> None:
    """TypeError unless ``binned`` is a :class:`~gpurpo.tree.binning.BinnedMatrix`."""
    if not isinstance(binned, BinnedMatrix):
        raise TypeError(
            f"binned must be a BinnedMatrix (from BinMapper.transform), got {type(binned).__name__}"
        )


def draw_root_seeds(rng: np.random.Generator, n_trees: int) -> np.ndarray:
    """The root seeds of ``n_trees`` trees: one full-range uint64 draw each.

    Drawing them for all trees at once gives the same seeds as drawing them
    batch by batch (each consumes one 64-bit output of ``rng``), so batches
    grown on concurrent threads can be given their seeds in advance.
    """
    return rng.integers(0, np.iinfo(np.uint64).max, size=n_trees, dtype=np.uint64, endpoint=True)


def run_level_wise(grower: HostGrower) -> GrowResult:
    """Level-wise growth (:func:`gpurpo.tree.grow_trees`) driven on a prepared grower."""
    frontier = grower.roots
    while len(frontier):
        nodes = grower.nodes
        small = (nodes.stop[frontier] - nodes.start[frontier]) <= grower.subtree
        if small.any():
            grower.grow_subtrees(frontier[small])
            grower.drop_cached(frontier[small])
            frontier = frontier[~small]
            if not len(frontier):
                break
        grower.evaluate(frontier)
        splitting = frontier[grower.nodes.feature[frontier] >= 0]
        # Histograms of parents that are not split are never used again.
        grower.drop_cached(frontier[grower.nodes.feature[frontier] < 0])
        if len(splitting) == 0:
            break
        left, right = grower.split(splitting)
        frontier = np.stack([left, right], axis=1).reshape(-1)
    grower.cache.clear()
    return grower.finish()


def run_best_first(grower: HostGrower) -> GrowResult:
    """Best-first growth (:func:`gpurpo.tree.grow_tree_best_first`) driven on a prepared grower whose
    ``params.max_leaf_nodes`` is set."""
    nodes = grower.nodes
    max_leaves = int(grower.params.max_leaf_nodes)
    n_leaves = np.ones(grower.n_trees, dtype=np.int64)
    heap: list[tuple[float, int]] = []

    def push(ids: np.ndarray) -> None:
        grower.evaluate(ids)
        for g in ids:
            if nodes.feature[g] >= 0:
                heapq.heappush(heap, (-float(nodes.gain[g]), int(g)))

    push(grower.roots)
    while heap:
        _, g = heapq.heappop(heap)
        t = nodes.tree[g]
        if n_leaves[t] >= max_leaves:
            nodes.feature[g] = -1
            grower.cache.pop(g, None)
            continue
        left, right = grower.split(np.array([g], dtype=np.int64))
        n_leaves[t] += 1
        push(np.concatenate([left, right]))
        grower.cache.pop(g, None)
    grower.cache.clear()
    return grower.finish()
