"""Level-wise growth of a batch of trees with its state on the device.

The CUDA path of :func:`gpurpo.tree.grow_trees`: the same trees as the
host-orchestrated grower of :mod:`gpurpo.tree.grower` (the same evaluation
kernels, node seeds and rules), with the bookkeeping done by the kernels of
:mod:`gpurpo.tree.level_kernels`, so that the host does no work per node and
a level costs a fixed handful of launches and ONE small device-to-host copy
(the sizes of the next frontier) whatever the number of nodes and trees.

State of a batch (all on the device):

* the node table (:class:`DeviceNodeTable`), one array per field, in one
  buffer so that the host reads it back in one copy when growth ends;
* the samples of the nodes in one int32 buffer, every node owning a
  contiguous range that its split partitions stably in place (left first);
* the frontier, a list of node ids grouped by the path that evaluates them:
  nodes of at most ``subtree_size`` samples are grown to completion by
  ``tree_grow_subtrees`` (their outputs stay on the device until the end),
  nodes of at most ``small_node_size`` samples are split exactly by
  ``tree_split_small``, larger ones from histograms of their candidate
  features (drawn on the device by ``tree_level_large_setup``, in the launch
  that sums the nodes' statistics), scored and reduced to each node's best
  slot in one launch by ``tree_score_best_slot``.

With all ``p`` features, the histograms of a level's large nodes are kept
(within ``max_histogram_bytes``, as the host grower keeps them) and the
larger child of a pair of large siblings gets its parent's histogram minus
its sibling's (``tree_level_subtract``), as in the host grower, whose rule
(including the histograms of smaller siblings that are not large) this
follows so that the float32 sums are the same.

With ``k < p`` candidate features a node evaluates positions ``0 .. k - 1``
of its visiting order and, if all were constant in it, continues with the
next ``k`` positions at the next level under its own id (scikit-learn's
rule, the rounds of the host grower spread over levels). A node's seed
depends only on its parent's, so the trees do not depend on when or by which
path a node is evaluated; the node ids (and so the numbering of the
structures' nodes) differ from the host grower's.

When growth ends the host reads the node table and the subtree outputs (two
copies), absorbs the subtrees and builds the structures; the leaves are
numbered within each tree by position of their samples (depth first, left
before right), which ``tree_level_place`` also writes for every sample, with
every leaf's weight (a third copy, unless every weight is 0 or 1: a leaf's
weight is then its number of samples). Without weights the setup copies
nothing: every tree's size is known, and the check that the targets are
finite is written to the table's ``head`` and read with the table.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np

from gpurpo.backend import Backend, bincount, count_device_activity
from gpurpo.tree import histogram, kernels, level_kernels
from gpurpo.tree._node_tables import absorb_subtrees, number_nodes
from gpurpo.tree._pack import pack_structures
from gpurpo.tree._params import GrowthParams
from gpurpo.tree._records import Subtrees, _subtree_layout
from gpurpo.tree.binning import BinnedMatrix
from gpurpo.tree.grower import (
    _SCORE_BYTES_PER_CELL,
    GrowResult,
    HostNodeTable,
    centre_targets,
    check_binned,
    default_small_node_size,
    default_subtree_size,
    draw_root_seeds,
    target_mean,
)
from gpurpo.tree.splitting import TIE_ROUNDING, TIE_RTOL

__all__ = ["DeviceNodeTable", "device_growth_supported", "grow_trees_on_device"]



def device_growth_supported(binned: BinnedMatrix, params: GrowthParams) -> bool:
    """Whether :func:`grow_trees_on_device` grows these trees: level-wise growth
    (no ``max_leaf_nodes``) of the variance criterion, on dense codes or on a sparse
    X's stored entries alone (``binned`` either way)."""
    check_binned(binned)
    return params.max_leaf_nodes is None and params.criterion == "variance"


class DeviceNodeTable:
    """The nodes of a batch of trees on the device: one array per field, all views of
    one byte buffer (read back in one copy by :meth:`to_host`).

    Fields (row ``g`` = node ``g``): ``start``, ``stop`` (its samples' range),
    ``tree``, ``depth``, ``seed``, ``pos`` (first position of its visiting order
    still to evaluate; -1: grown by ``tree_grow_subtrees``), ``parent``,
    ``left``, ``right`` (-1: none), ``feature`` (-1: a leaf), ``bin``,
    ``missing_left``, ``gain``; and a ``head`` of counters before them (the
    deferred check of the targets).
    """

    FIELDS = (
        ("start", "int64"), ("stop", "int64"), ("seed", "uint64"), ("pos", "int64"),
        ("parent", "int64"), ("left", "int64"), ("right", "int64"), ("gain", "float64"),
        ("tree", "int32"), ("depth", "int32"), ("feature", "int32"), ("bin", "int32"),
        ("missing_left", "uint8"),
    )

    def __init__(self, xp: Any, capacity: int) -> None:
        self.xp = xp
        self._allocate(int(capacity))

    #: row of ``head`` holding the deferred check of the targets: the bits of a
    #: float64, finite if and only if every target is (:meth:`write_target_check`)
    TARGET_CHECK = 0
    #: int64 counters at the head of the buffer, before the fields (``head``)
    HEAD = 1

    def write_target_check(self, mean: Any) -> None:
        """Sum the float64 device array ``mean`` (the targets' means, finite if and only
        if the targets are) into the head, in one launch; :meth:`targets_finite` reads
        the sum on the host."""
        check = self.head[self.TARGET_CHECK : self.TARGET_CHECK + 1].view(self.xp.float64)
        # targets that are not finite raise with the check, not a NumPy warning
        with np.errstate(invalid="ignore", over="ignore"):
            self.xp.sum(mean, out=check.reshape(()))

    @classmethod
    def targets_finite(cls, head: np.ndarray) -> bool:
        """The check that :meth:`write_target_check` stored, from a host copy of ``head``."""
        return bool(np.isfinite(head[cls.TARGET_CHECK : cls.TARGET_CHECK + 1].view(np.float64)[0]))

    @classmethod
    def _views(cls, buffer: Any, capacity: int) -> dict[str, Any]:
        """Every field's typed view of ``buffer`` (after the ``HEAD`` counters, fields one
        after the other, 8-byte aligned)."""
        views, at = {"head": buffer[: 8 * cls.HEAD].view("int64")}, 8 * cls.HEAD
        for name, dtype in cls.FIELDS:
            size = capacity * np.dtype(dtype).itemsize
            views[name] = buffer[at : at + size].view(dtype)
            at += -(-size // 8) * 8
        return views

    def _allocate(self, capacity: int) -> None:
        self.capacity = capacity
        n_bytes = 8 * self.HEAD + sum(-(-capacity * np.dtype(d).itemsize // 8) * 8
                                      for _, d in self.FIELDS)
        self.buffer = self.xp.empty(n_bytes, dtype=self.xp.uint8)
        for name, view in self._views(self.buffer, capacity).items():
            setattr(self, name, view)

    def reserve(self, rows: int, used: int) -> None:
        """Room for ``rows`` nodes, keeping the first ``used`` (doubling the capacity)."""
        if rows <= self.capacity:
            return
        old = {name: getattr(self, name) for name, _ in self.FIELDS}
        head = self.head
        self._allocate(max(int(rows), 2 * self.capacity))
        for name, _ in self.FIELDS:
            getattr(self, name)[:used] = old[name][:used]
        self.head[:] = head

    def to_host(self, backend: Backend, used: int) -> dict[str, np.ndarray]:
        """The first ``used`` rows of every field and the ``head`` counters, from one
        device-to-host copy (through pinned memory on CuPy) of those rows only: below
        the capacity, they are first gathered on the device, in the layout of a table
        of capacity ``used``."""
        used = max(0, min(int(used), self.capacity))
        buffer = self.buffer
        if used < self.capacity:
            parts, at = [buffer[: 8 * self.HEAD]], 8 * self.HEAD
            for _, dtype in self.FIELDS:
                size = self.capacity * np.dtype(dtype).itemsize
                parts.append(buffer[at : at + -(-used * np.dtype(dtype).itemsize // 8) * 8])
                at += -(-size // 8) * 8
            buffer = self.xp.concatenate(parts)
        host = np.asarray(backend.to_host(buffer, pinned=True))
        return self._views(host, used)


def check_targets(finite: Any) -> None:
    """Raise the error of targets that are not finite in float32 (``finite`` false)."""
    if not finite:
        raise ValueError(
            "targets must be finite in float32: the outputs (or their projections) "
            "overflow float32's range; rescale y")


class _DeviceGrower:
    """One batch of trees grown level by level on the device (module docstring)."""

    _table_class = DeviceNodeTable

    def __init__(self, binned: BinnedMatrix, targets: Any, weights: Any, params: GrowthParams,
                 rng: np.random.Generator, backend: Backend, root_seeds: Any) -> None:
        xp = backend.xp
        self.xp, self.backend, self.binned = xp, backend, binned
        self.params = params = params.validated()
        self.edges = kernels.EdgeTable(binned.edge_values, binned.edge_ptr)
        n, p = binned.n_samples, binned.n_features
        targets = xp.asarray(targets)
        if targets.ndim != 3 or targets.shape[0] != n:
            raise ValueError(
                f"targets must have shape (n_samples={n}, n_trees, n_outputs), got {targets.shape}")
        n_trees, m = int(targets.shape[1]), int(targets.shape[2])
        unit = weights is None
        if unit:
            # ones, written by tree_level_roots with the samples
            weights = xp.empty((n_trees, n), dtype=xp.float32)
        else:
            weights = xp.ascontiguousarray(xp.asarray(weights, dtype=xp.float32))
            if weights.shape != (n_trees, n):
                raise ValueError(f"weights must have shape (n_trees={n_trees}, n_samples={n}), "
                                 f"got {weights.shape}")
        targets = xp.asarray(targets, dtype=xp.float32)
        if unit:
            # every sample in every tree, no count to read back: tree_level_roots writes
            # each tree's n samples (and their weight n to w_sum)
            sample_idx = xp.empty(n * n_trees, dtype=xp.int32)
            counts = xp.empty(0, dtype=xp.int64)
        else:
            tree_idx, sample_idx = xp.nonzero(weights > 0)
            counts = bincount(xp, tree_idx, n_trees)
        self.target_check = None
        if unit:
            counts_h = np.full(n_trees, n, dtype=np.int64)
            w_sum = xp.empty(n_trees, dtype=xp.float64)
            unit_weights = True
        else:
            w_sum = weights.sum(axis=1, dtype=xp.float64)
            flags = xp.stack([
                xp.isfinite(weights).all() & (weights >= 0).all(),
                ((weights == 0) | (weights == 1)).all(),
                xp.isfinite(targets).all(),
            ]).astype(xp.float64)
            # the checks of the inputs and the trees' sizes and weights in one copy
            facts = backend.to_host(xp.concatenate([flags, counts.astype(xp.float64), w_sum]))
            if not facts[0]:
                raise ValueError("weights must be finite and non-negative")
            check_targets(facts[2])
            counts_h = facts[3 : 3 + n_trees].astype(np.int64)
            if not counts_h.all():
                raise ValueError(
                    "weights must give every tree at least one sample of positive weight; "
                    f"tree {int(np.argmin(counts_h))} has none")
            unit_weights = bool(facts[1])
        self.n, self.p, self.m, self.n_trees = n, p, m, n_trees
        self.weights = weights
        self.w_root = w_sum
        # weights of 0 and 1 only: a node's weight is its number of samples
        self.unit_weights = unit_weights
        self.channels = histogram.n_channels(m, self.unit_weights)
        # targets that are not finite raise with the deferred check, not a NumPy warning
        with np.errstate(invalid="ignore"):
            mean = target_mean(xp, targets, None if unit else weights, w_sum)
            if unit:
                # every tree's size and weight are known: the check of the targets (the
                # sum of the means, finite if and only if every target is) is summed into
                # the node table's head and reaches the host with a copy that growth makes
                # anyway (check_targets)
                self.target_check = mean
            self.targets = centre_targets(xp, targets, mean)
        self.sample_indices = xp.ascontiguousarray(sample_idx.astype(xp.int32, copy=False))
        # where tree_level_split stages the samples of the nodes it partitions
        self.scratch = xp.empty_like(self.sample_indices)
        self.k = p if params.n_candidates is None else min(int(params.n_candidates), p)
        # all features: each slot holds its feature (siblings' histograms subtract)
        self.width = self.k
        self.random_split = params.splitter == "random"
        small = (default_small_node_size(backend, self.k >= p)
                 if params.small_node_size is None else int(params.small_node_size))
        self.small = min(small, n)
        self.subtree = min(self._subtree_size(small), n)
        self.msl = int(params.min_samples_leaf)
        self.min_split = max(2, int(params.min_samples_split), 2 * self.msl)
        self.max_depth = -1 if params.max_depth is None else int(params.max_depth)
        self._init_roots(counts, counts_h, root_seeds, rng)
        large_root = int(counts_h.max()) > self.small
        # the counters of tree_level_large_setup and tree_score_best_slot (left at zero
        # by every launch), for the most large nodes a launch takes: disjoint nodes of
        # more than `small` samples each
        n_score = min(self._chunk_size(), int(counts_h.sum()) // (self.small + 1) + n_trees)
        # the maxima of the histograms' fixed-point scales, read once for all levels when
        # a root is large (a node has no more samples than its parent); its counters,
        # zeroed by the same launch, are also the score counters
        self.hist_scratch = (
            kernels.histogram_scratch(backend, self.weights, self.targets,
                                      int(self.sample_indices.shape[0]), self.width,
                                      binned.n_bins, self.channels, counters=n_score)
            if large_root else None)
        self.subtrees: list[tuple[Any, Subtrees]] = []
        self.score_done = (self.hist_scratch.sums(0, n_score)[1] if self.hist_scratch is not None
                           else kernels.score_counters(backend, n_score) if large_root else None)
        self._typed_sparse = kernels._typed_sparse(
            backend, kernels.SparseColumns(binned.subtracted_bin, binned.kernel_sparse_codes,
                                           binned.listed),
            binned.kernel_codes.shape)

    def _kind(self, size: Any, depth: int) -> Any:
        """The frontier group of nodes of these sizes at ``depth`` (``xp`` or NumPy):
        0 subtree root, 1 small, 2 large, 3 a leaf."""
        lib = np if isinstance(size, np.ndarray) else self.xp
        leaf = (size < self.min_split) | (self.max_depth >= 0 and depth >= self.max_depth)
        return lib.where(leaf, 3, lib.where(size <= self.subtree, 0,
                                            lib.where(size <= self.small, 1, 2)))

    def _subtree_size(self, small: int) -> int:
        """Nodes of at most this many samples are grown by ``tree_grow_subtrees``."""
        if self.params.subtree_size is not None:
            return int(self.params.subtree_size)
        return default_subtree_size(self.backend, self.binned.n_features, small)

    def _initial_capacity(self, total: int) -> int:
        """Rows of the node table at the start, for ``total`` root samples: the nodes
        above the subtrees, about 4 per subtree root of a balanced tree (the table
        grows when a level needs more)."""
        return min(2 * total, max(64, 4 * self.n_trees + 8 * total // max(self.subtree, 1)))

    def _init_roots(self, counts: Any, counts_h: np.ndarray, root_seeds: Any,
                    rng: np.random.Generator) -> None:
        xp, T = self.xp, self.n_trees
        if root_seeds is None:
            root_seeds = draw_root_seeds(rng, T)
            if T == 1:
                # one seed is filled in by a kernel (its argument): no copy to the device
                root_seeds = xp.full(1, root_seeds[0], dtype=xp.uint64)
        root_seeds = xp.asarray(root_seeds, dtype=xp.uint64)
        if root_seeds.shape != (T,):
            raise ValueError(f"root_seeds must have shape (n_trees={T},), got {root_seeds.shape}")
        self.table = t = self._table_class(xp, self._initial_capacity(int(counts_h.sum())))
        kind_h = self._kind(counts_h, 0)
        # subtree roots, small nodes, derived and direct large nodes (none derived)
        self.groups = (int((kind_h == 0).sum()), int((kind_h == 1).sum()), 0,
                       int((kind_h == 2).sum()))
        n_front = sum(self.groups)
        front = xp.empty(T, dtype=xp.int64)
        batch = (xp.empty((T, 2), dtype=xp.int64), xp.empty(T, dtype=xp.int32),
                 xp.empty(T, dtype=xp.uint64), xp.empty(T, dtype=xp.int32),
                 xp.empty(T, dtype=xp.int64))
        sub_offsets = xp.empty(T + 1, dtype=xp.int64)
        level_kernels.launch(
            self.backend, "tree_level_roots", counts, self.n, root_seeds, self.w_root,
            self.sample_indices, self.weights, self.subtree, self.small, self.min_split,
            self.max_depth, t.start, t.stop, t.tree, t.depth, t.seed, t.pos,
            t.parent, t.left, t.right, t.feature, t.bin, t.missing_left, t.gain, front, *batch,
            sub_offsets)
        self.n_helpers = 0
        self.prev_hist = None
        self.derive = (xp.empty(0, dtype=xp.int64), xp.empty(0, dtype=xp.int64))
        self.front = front[:n_front]
        ranges, tree, seed, depth, pos = (a[:n_front] for a in batch)
        self.batch = (ranges, tree, seed, depth, pos)
        self.sub_offsets = sub_offsets[: self.groups[0] + 1]
        self.sub_rows = int((2 * counts_h[kind_h == 0] - 1).sum())
        self.used = T
        if self.target_check is not None:
            t.write_target_check(self.target_check)

    # ------------------------------------------------------------------ levels

    def run(self, level_activity: list | None = None) -> GrowResult:
        while sum(self.groups):
            if level_activity is None:
                self._level()
                continue
            groups = self.groups
            with count_device_activity() as activity:
                self._level()
            level_activity.append((groups, activity))
        return self._finish()

    def _rules(self, max_node_size: int, **kw: Any) -> kernels.SplitRules:
        return kernels.SplitRules(self.k, self.msl, self.random_split, self.binned.missing_bin,
                                  TIE_RTOL, max_node_size=max(1, max_node_size), **kw)

    def _sparse(self) -> kernels.SparseColumns:
        """The split kernels' views of the binned matrix, typed once for all levels."""
        return self._typed_sparse

    def _partition_parts(self, n_eval: int) -> tuple:
        """The partition arguments of a ``tree_level_split`` of ``n_eval`` nodes:
        ``scratch``, ``parts``, ``part_min`` and ``part_left``
        (:func:`gpurpo.tree.level_kernels.partition_parts`)."""
        parts = level_kernels.partition_parts(self.backend, n_eval)
        return (self.scratch, parts, int(level_kernels.PART_MIN_SAMPLES),
                self.xp.empty(n_eval * parts, dtype=self.xp.int64))

    def _placing(self, dec_bin: Any, dec_missing_left: Any, parts: tuple) -> tuple:
        """The arguments of ``tree_level_children`` after ``counts``: what it needs to
        place the samples of the nodes that ``tree_level_split`` partitioned in parts."""
        scratch, n_parts, part_min, part_left = parts
        return (*self._split_codes(), self.binned.missing_bin, self.sample_indices, scratch,
                dec_bin, dec_missing_left, n_parts, part_min, part_left)

    def _split_codes(self) -> tuple[Any, Any, Any, Any, Any]:
        """The ``codes, row_ptr, row_features, row_codes, zero_code`` arguments of
        ``tree_level_split``: the dense codes, or a (p, 0) array and the stored rows of a
        sparse X binned without them."""
        rows = self._typed_sparse.sparse_codes
        return (self.binned.kernel_codes, rows.row_ptr, rows.row_features, rows.row_codes,
                rows.zero_code)

    def _level(self) -> None:
        xp, t = self.xp, self.table
        n_sub, n_small, n_derived, n_direct = self.groups
        n_large = n_derived + n_direct
        n_front = n_sub + n_small + n_large
        t.reserve(self.used + 2 * (n_small + n_large), self.used)
        front = self.front
        ranges, tree, seed, depth, pos = self.batch
        if n_sub:
            self._grow_subtrees(front[:n_sub], ranges[:n_sub], tree[:n_sub], seed[:n_sub],
                                depth[:n_sub])
        n_eval = n_small + n_large
        if n_eval == 0:
            self.groups = (0, 0, 0, 0)
            return
        small = slice(n_sub, n_sub + n_small)
        if n_small:
            small_out = kernels.split_small(
                self.backend, self.binned.kernel_codes,
                kernels.NodeBatch(self.sample_indices, ranges[small], tree[small], seed[small]),
                self.weights, self.targets, self.edges, self._rules(self.small),
                self._sparse())
        else:
            small_out = (xp.empty(0, dtype=xp.int32), xp.empty(0, dtype=xp.int32),
                         xp.empty(0, dtype=xp.uint8), xp.empty(0, dtype=xp.float64))
        keep = False
        if n_large:
            best, keep = self._split_large(n_sub + n_small, n_large, n_derived)
        else:
            best = xp.empty((0, 4), dtype=xp.float64)
        dec_feature = xp.empty(n_eval, dtype=xp.int32)
        dec_bin = xp.empty(n_eval, dtype=xp.int32)
        dec_missing_left = xp.empty(n_eval, dtype=xp.uint8)
        n_left = xp.empty(n_eval, dtype=xp.int64)
        parts = self._partition_parts(n_eval)
        level_kernels.launch(
            self.backend, "tree_level_split", *self._split_codes(), self.binned.missing_bin,
            self.sample_indices, front, n_sub, n_small, ranges, *small_out, best, tree,
            self.w_root, self.m, float(self.params.min_impurity_decrease), self.width,
            t.feature, t.bin, t.missing_left, t.gain, t.pos, dec_feature, dec_bin,
            dec_missing_left, n_left, *parts)
        cap = 2 * n_front  # next frontier; its launch batch also holds up to n_front helpers
        nxt = (xp.empty(cap, dtype=xp.int64), xp.empty((cap + n_front, 2), dtype=xp.int64),
               xp.empty(cap + n_front, dtype=xp.int32), xp.empty(cap + n_front, dtype=xp.uint64),
               xp.empty(cap + n_front, dtype=xp.int32), xp.empty(cap + n_front, dtype=xp.int64))
        derive = (xp.empty(cap, dtype=xp.int64), xp.empty(cap, dtype=xp.int64))
        sub_offsets = xp.empty(cap + 1, dtype=xp.int64)
        counts = xp.empty(level_kernels.N_COUNTERS, dtype=xp.int64)
        level_kernels.launch(
            self.backend, "tree_level_children", front, n_sub, n_small, int(keep), ranges, tree,
            depth, seed, dec_feature, n_left, self.subtree, self.small, self.min_split,
            self.max_depth, self.used, t.start, t.stop, t.tree, t.depth, t.seed, t.pos,
            t.parent, t.left, t.right, t.feature, t.bin, t.missing_left, t.gain, *nxt, *derive,
            sub_offsets, counts, *self._placing(dec_bin, dec_missing_left, parts))
        # the one copy to the host of the level
        created, n_sub, n_small, n_derived, n_direct, rows, n_helpers = (
            int(c) for c in self.backend.to_host(counts))
        self.used += created
        self.groups = (n_sub, n_small, n_derived, n_direct)
        self.n_helpers = n_helpers
        n_next = n_sub + n_small + n_derived + n_direct
        self.front = nxt[0][:n_next]
        self.batch = tuple(a[: n_next + n_helpers] for a in nxt[1:])
        self.derive = tuple(a[:n_derived] for a in derive)
        self.sub_offsets = sub_offsets[: n_sub + 1]
        self.sub_rows = rows

    def _grow_subtrees(self, roots: Any, ranges: Any, tree: Any, seed: Any, depth: Any) -> None:
        params = self.params
        out = kernels.grow_subtrees(
            self.backend, self.binned.kernel_codes,
            kernels.NodeBatch(self.sample_indices, ranges, tree, seed, depth),
            self.weights, self.targets, self.w_root, self.edges,
            self._rules(self.subtree, min_samples_split=max(2, int(params.min_samples_split)),
                        max_depth=params.max_depth,
                        min_impurity_decrease=params.min_impurity_decrease),
            self._sparse(), offsets=self.sub_offsets, total=self.sub_rows)
        self.subtrees.append((roots, out))

    def _chunk_size(self) -> int:
        per_node = _SCORE_BYTES_PER_CELL * self.width * self.binned.n_bins * self.channels
        return max(1, int(self.params.max_histogram_bytes // max(per_node, 1)))

    def _split_large(self, first: int, n_large: int, n_derived: int) -> tuple[Any, bool]:
        """Each large node's best slot among its next ``width`` positions, float64 (L, 4), and
        whether the level's histograms are kept for the next level's subtractions.

        The large nodes are the launch batch's rows ``first .. first + L - 1``, the
        derived ones first, followed by the helpers. With all features, when the
        histograms of the direct nodes, the helpers and the derived nodes fit in
        ``max_histogram_bytes / 2`` together (the host grower's rule, which also
        keeps the parents' histograms), the derived nodes' histograms are
        subtracted from their parents' and the level's are kept; else every large
        node's histogram is built, chunk by chunk.
        """
        xp, backend = self.xp, self.backend
        ranges, tree, seed, _, pos = (a[first:] for a in self.batch)
        all_features = self.k >= self.p
        n_helpers = self.n_helpers if all_features else 0
        n_rows = n_large + n_helpers
        impure, q, feats, positions, uniforms = self._large_setup(
            ranges[:n_large], tree[:n_large], seed[:n_rows], pos[:n_rows], all_features)
        budget = self.params.max_histogram_bytes // (2 * histogram.histogram_bytes(
            1, self.p, self.binned.n_bins, self.channels))
        keep = all_features and n_rows <= budget
        if keep:
            # every cell written: the histograms' kernel, or the subtraction
            hist = xp.empty((n_rows, self.p, self.binned.n_bins, self.channels), dtype=xp.float32)
            direct = slice(n_derived, n_rows)
            histogram.node_histograms(
                self.binned, kernels.NodeBatch(self.sample_indices, ranges[direct], tree[direct]),
                feats[direct], self.weights, self.targets, self.channels, out=hist[direct],
                scratch=self.hist_scratch)
            if n_derived:
                level_kernels.launch(backend, "tree_level_subtract", hist, n_derived,
                                     n_large - n_derived, self.prev_hist, *self.derive)
            self.prev_hist = hist
        else:
            self.prev_hist = None
        chunk = self._chunk_size()
        parts = []
        for c0 in range(0, n_large, chunk):
            c = slice(c0, min(c0 + chunk, n_large))
            if keep:
                h = hist[c]
            else:
                h = histogram.node_histograms(
                    self.binned, kernels.NodeBatch(self.sample_indices, ranges[c], tree[c]),
                    feats[c], self.weights, self.targets, self.channels,
                    scratch=self.hist_scratch)
            parts.append(self._best_slots(h, feats[c], positions[c], pos[c], q[c], impure[c],
                                          uniforms[c] if self.random_split else None))
        return (parts[0] if len(parts) == 1 else xp.concatenate(parts)), keep

    def _large_setup(self, ranges: Any, tree: Any, seed: Any, pos: Any,
                     natural: bool) -> tuple[Any, ...]:
        """``tree_level_large_setup``: (impure, q) of the large nodes of ``ranges`` and
        ``tree``, and (features, positions, uniforms) of the ``width`` slots of the rows
        of ``seed`` and ``pos`` (the large nodes, then the helpers), in one launch."""
        xp = self.xp
        n_large, n_rows = int(ranges.shape[0]), int(seed.shape[0])
        impure = xp.empty(n_large, dtype=xp.uint8)
        q = xp.empty(n_large, dtype=xp.float64)
        feats = xp.empty((n_rows, self.width), dtype=xp.int32)
        positions = xp.empty((n_rows, self.width), dtype=xp.int64)
        uniforms = xp.empty((n_rows, self.width) if self.random_split else (1, 1),
                            dtype=xp.float64)
        node_done = (xp.empty(0, dtype=xp.uint32) if self.score_done is None
                     else self.score_done)
        level_kernels.launch(self.backend, "tree_level_large_setup", self.sample_indices,
                             ranges, tree, self.weights, self.targets, node_done, seed, pos,
                             self.p, int(self.random_split), int(natural), impure, q, feats,
                             positions, uniforms)
        return impure, q, feats, positions, uniforms

    def _best_slots(self, hist: Any, feats: Any, positions: Any, pos: Any, q: Any,
                    impure: Any, uniforms: Any) -> Any:
        """The best slot of every node of ``hist``, float64 (N, 4): its slots scored and
        chosen in one launch (``tree_score_best_slot``), with the growth's counters."""
        self.score_done = kernels.score_counters(self.backend, int(hist.shape[0]),
                                                 self.score_done)
        return kernels.score_best_slots(
            self.backend, hist, feats, self.m, self.msl, self.edges, q, impure, positions,
            TIE_RTOL, TIE_ROUNDING, self.score_done, random_split=self.random_split,
            uniforms=uniforms, node_pos=pos, n_features=self.p)

    # ------------------------------------------------------------------ output

    def _finish(self) -> GrowResult:
        nodes = self._host_nodes()
        leaf_of_sample, leaf_weight = self._place()
        # with weights of 0 and 1 only, a leaf's weight is its number of samples: no copy
        return self._structures(nodes, leaf_of_sample,
                                None if self.unit_weights else leaf_weight)

    def _host_nodes(self) -> HostNodeTable:
        """The node table (with the deferred check of the targets) and the absorbed
        subtree outputs on the host (two copies)."""
        used = self.used
        fields = self.table.to_host(self.backend, used)
        if self.target_check is not None:
            check_targets(self.table.targets_finite(fields["head"]))
            self.target_check = None
        levels = self._subtrees_to_host()
        nodes = HostNodeTable()
        grown = sum(int(out.count.sum()) - len(roots) for roots, out in levels)
        nodes.reserve(used + grown)
        nodes.size = used
        for name, _, _ in HostNodeTable._FIELDS:
            getattr(nodes, name)[:used] = fields[name]
        for roots, out in levels:
            count = out.count.astype(np.int64)
            first = nodes.extend(int(count.sum()) - len(roots))
            added = absorb_subtrees(
                roots, out.offsets, count, out.feature, out.bin, out.missing_left, out.gain,
                out.left, out.right, out.depth, out.start, out.stop, first, nodes.tree,
                nodes.parent, nodes.depth, nodes.start, nodes.stop, nodes.feature, nodes.bin,
                nodes.missing_left, nodes.gain, nodes.left, nodes.right, nodes.seed)
            if added != nodes.size - first:
                raise RuntimeError(f"tree_grow_subtrees reported {nodes.size - first} new nodes, "
                                   f"wrote {added}")
        return nodes

    def _subtrees_to_host(self) -> list[tuple[np.ndarray, Subtrees]]:
        """Every level's subtree roots and outputs, from one device-to-host copy."""
        if not self.subtrees:
            return []
        xp = self.xp
        parts = []
        for roots, out in self.subtrees:
            # the offsets lie outside the buffer (the level's sub_offsets)
            parts += [roots.view(xp.uint8), out.offsets.view(xp.uint8), out.buffer]
        flat = np.asarray(self.backend.to_host(xp.concatenate(parts), pinned=True))
        levels = []
        at = 0
        for roots, out in self.subtrees:
            n_roots = int(roots.shape[0])
            roots_h = flat[at : at + 8 * n_roots].view(np.int64)
            at += 8 * n_roots
            offsets_h = flat[at : at + 8 * (n_roots + 1)].view(np.int64)
            at += 8 * (n_roots + 1)
            layout, size = _subtree_layout(n_roots, int(out.feature.shape[0]))
            host = Subtrees._views(flat[at : at + size], layout)
            levels.append((roots_h, replace(host, offsets=offsets_h)))
            at += size
        return levels

    def _place(self) -> tuple[Any, Any]:
        """The leaf of every sample (int32 (T, n), -1: not in the tree) and every leaf's
        weight (float64 (L,), leaves by position), on the device."""
        xp, backend, t, T = self.xp, self.backend, self.table, self.n_trees
        total = int(self.sample_indices.shape[0])
        mark = xp.zeros(total, dtype=xp.int32)
        self._mark_leaves(mark)
        cum = xp.cumsum(mark, dtype=xp.int64)
        # tree_level_place writes every sample of a tree; -1 for those left out
        leaf_of_sample = (xp.empty((T, self.n), dtype=xp.int32) if total == T * self.n
                          else xp.full((T, self.n), -1, dtype=xp.int32))
        leaf_weight = xp.empty(total, dtype=xp.float64)
        level_kernels.launch(backend, "tree_level_place", mark, cum, self.sample_indices,
                             t.start[:T], t.stop[:T], self.weights, leaf_of_sample, leaf_weight)
        return leaf_of_sample, leaf_weight

    def _mark_leaves(self, mark: Any) -> None:
        """1 in ``mark`` at the first sample position of every leaf: of the table and of
        the subtree outputs."""
        backend, t = self.backend, self.table
        level_kernels.launch(backend, "tree_level_leaf_marks_table", t.feature[: self.used],
                             t.pos[: self.used], t.start[: self.used], mark)
        for roots, out in self.subtrees:
            level_kernels.launch(backend, "tree_level_leaf_marks_subtrees", roots, out.offsets,
                                 out.count, out.feature, out.start, t.start, mark)

    def _structures(self, nodes: HostNodeTable, leaf_of_sample: Any, leaf_weight: Any) -> GrowResult:
        size = nodes.size
        tree = nodes.tree[:size]
        leaf_index = np.empty(size, dtype=np.int32)
        local_id = np.empty(size, dtype=np.int64)
        node_order = np.empty(size, dtype=np.int64)
        tree_counts = np.empty(self.n_trees, dtype=np.int64)
        number_nodes(tree, nodes.left[:size] < 0, leaf_index, local_id, node_order, tree_counts)
        # leaves numbered by position within their tree, as tree_level_place numbers them
        leaf_ids = np.flatnonzero(nodes.left[:size] < 0)
        leaf_ids = leaf_ids[np.argsort(nodes.start[leaf_ids], kind="stable")]
        leaf_tree = tree[leaf_ids]
        per_tree = np.bincount(leaf_tree, minlength=self.n_trees)
        first_leaf = np.concatenate([[0], np.cumsum(per_tree)[:-1]])
        leaf_index[leaf_ids] = (np.arange(len(leaf_ids)) - first_leaf[leaf_tree]).astype(np.int32)
        if leaf_weight is None:
            weights = (nodes.stop[leaf_ids] - nodes.start[leaf_ids]).astype(np.float64)
        else:
            weights = self.backend.to_host(leaf_weight[: len(leaf_ids)])
        structures = pack_structures(nodes, self.binned, leaf_ids, weights, leaf_index,
                                     local_id, node_order, tree_counts)
        return GrowResult(structures=structures, leaf_of_sample=leaf_of_sample)


def grow_trees_on_device(
    binned: BinnedMatrix,
    targets: Any,
    weights: Any,
    params: GrowthParams,
    rng: np.random.Generator,
    backend: Backend,
    root_seeds: Any = None,
    level_activity: list | None = None,
) -> GrowResult:
    """Grow T trees together, level by level, with the state on the device.

    Takes the arguments of :func:`gpurpo.tree.grow_trees` and returns the same
    trees (see the module docstring for what differs: node ids and leaf
    numbering). ``root_seeds`` may lie on the device. Runs on any backend (on
    NumPy through the numba twins of the kernels). With a list
    ``level_activity``, every level appends to it the numbers of subtree roots,
    small and large nodes it evaluated and its device activity
    (:func:`gpurpo.backend.count_device_activity`), as a pair.

    Raises
    ------
    ValueError
        For growth it does not do (:func:`device_growth_supported`), and for
        the invalid inputs :func:`~gpurpo.tree.grow_trees` rejects.
    """
    check_binned(binned)
    if not device_growth_supported(binned, params):
        raise ValueError("grow_trees_on_device grows level-wise trees of the variance criterion: "
                         "params.max_leaf_nodes must be None and "
                         "params.criterion 'variance'")
    grower = _DeviceGrower(binned, targets, weights, params, rng, backend, root_seeds)
    return grower.run(level_activity)
