"""Best-first growth of a batch of trees with its state on the device.

The CUDA path of :func:`gpurpo.tree.grow_tree_best_first` (boosting's trees
of ``max_leaf_nodes`` leaves): the same trees as the host-orchestrated driver
of :mod:`gpurpo.tree.grower`, grown in ROUNDS of a fixed handful of launches
and one small device-to-host copy, whatever the number of nodes and trees.

Best-first growth splits, tree by tree, the leaf of largest gain (ties: the
leaf created first) until the tree has ``max_leaf_nodes`` leaves; a node's
evaluation depends only on its samples and seed, not on when it is
evaluated. A round:

1. ``tree_best_first_select`` records the choices of the nodes evaluated last
   and replays best-first growth on what is known of every tree: the nodes
   split so far and the evaluated leaves. Every node the replay expands that
   is not split yet is batched; the replay goes on as if its children were
   leaves, since they are not evaluated yet.
2. ``tree_level_split`` partitions the batched nodes' samples and
   ``tree_level_children`` creates their children, groups them by the path
   that evaluates them and counts them: the round's one copy to the host.
3. The children are evaluated as the level-wise device grower evaluates a
   level (:mod:`gpurpo.tree.device_grower`): ``tree_split_small`` for small
   nodes, histograms, scores and best slots for large ones.

A round may thus split a node that a later replay, knowing more, leaves a
leaf (its children outrank it); when a replay expands no new node it has run
on complete information, and its marks (``node_state``: 1 a leaf, 2 split, 0
not in the tree) are the trees. Growth also ends with the round whose every
batched node is the last split of its tree (the select kernel's ``pending``
count is 0), or whose children are all leaves by the stopping rules (none to
evaluate): the next replay would expand the same nodes, so the children are
not evaluated and a last replay (no copy) only marks them. A round advances
every open branch by one level, so a tree of depth D takes D rounds, and one
more to confirm it when its deepest nodes could split but the leaf budget
stops them.

The round's copy holds the children's counts, ``pending`` and, in the first
round, the check of the targets (all in the table's ``head``); a table of at
most ``TABLE_COPY_BYTES`` comes whole with it, so that the last round's copy
is also the trees' (the nodes of a tree are its roots and the children of its
split nodes, which every copy knows).

With all ``p`` features the histograms of the large nodes stay on the device
in a pool (one row per large evaluation, rows of a round contiguous) so that
the larger child of a split large node gets its parent's histogram minus its
sibling's, as the host driver derives it (within ``max_histogram_bytes / 2``
for the pair, the host's rule), and the float32 sums are the same.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from gpurpo.backend import Backend, count_device_activity
from gpurpo.tree import histogram, kernels, level_kernels
from gpurpo.tree._params import GrowthParams
from gpurpo.tree.binning import BinnedMatrix
from gpurpo.tree.device_grower import DeviceNodeTable, _DeviceGrower, check_targets
from gpurpo.tree.grower import GrowResult, HostNodeTable, check_binned

__all__ = ["BestFirstNodeTable", "TABLE_COPY_BYTES", "device_best_first_supported",
           "grow_best_first_on_device"]

#: a node table of at most this many bytes comes to the host with every round's counts
TABLE_COPY_BYTES = 64 * 1024


def device_best_first_supported(binned: BinnedMatrix, params: GrowthParams) -> bool:
    """Whether :func:`grow_best_first_on_device` grows these trees: best-first growth
    (``max_leaf_nodes`` set) of the variance criterion, on dense codes or on a sparse
    X's stored entries alone (``binned`` either way)."""
    check_binned(binned)
    return params.max_leaf_nodes is not None and params.criterion == "variance"


class BestFirstNodeTable(DeviceNodeTable):
    """:class:`DeviceNodeTable` with two more fields: ``slot`` (a node's evaluation
    slot: ``-2 - s`` for the s-th small evaluation, s >= 0 for the s-th large one,
    its histogram's row in the pool) and ``state`` (after a round: 0 not in its
    tree, 1 a leaf, 2 split), and a ``head`` of counters: those of
    ``tree_level_children``, ``pending`` of ``tree_best_first_select`` and the
    deferred check of the targets (:meth:`~DeviceNodeTable.write_target_check`)."""

    FIELDS = DeviceNodeTable.FIELDS + (("slot", "int64"), ("state", "uint8"))
    PENDING = level_kernels.N_COUNTERS
    TARGET_CHECK = PENDING + 1
    HEAD = TARGET_CHECK + 1


class _DeviceBestFirst(_DeviceGrower):
    """One batch of trees grown best first on the device (module docstring)."""

    _table_class = BestFirstNodeTable

    def __init__(self, binned: BinnedMatrix, targets: Any, weights: Any, params: GrowthParams,
                 rng: np.random.Generator, backend: Backend, root_seeds: Any) -> None:
        super().__init__(binned, targets, weights, params, rng, backend, root_seeds)
        xp = self.xp
        self.max_leaves = int(self.params.max_leaf_nodes)
        # a replay pushes at most 2 max_leaves - 1 nodes, and no more than the tree has
        heap = (self.n_trees, min(2 * self.max_leaves, 2 * self.largest_tree))
        self.heap = (xp.empty(heap, dtype=xp.float64), xp.empty(heap, dtype=xp.int64),
                     xp.empty(heap, dtype=xp.int64))
        # the host driver derives a pair's larger child when both histograms of the
        # pair fit in half of max_histogram_bytes
        node_bytes = histogram.histogram_bytes(1, self.p, binned.n_bins, self.channels)
        self.subtract = (self.k >= self.p
                         and self.params.max_histogram_bytes // (2 * node_bytes) >= 2)
        self.pool = None
        self.base_small = self.base_large = 0
        self.evaluated: tuple = ()
        self.pending = 1
        # the table as the last round's copy left it (None: not copied with the counts)
        self.host_fields: dict | None = None

    def _subtree_size(self, small: int) -> int:
        return 0

    def _initial_capacity(self, total: int) -> int:
        # the trees' nodes (2 max_leaves - 1 each), those split in rounds that a later
        # replay does not keep and the dummy row; the table grows when a round needs more
        return min(2 * total + 1, 8 * int(self.params.max_leaf_nodes) * self.n_trees + 8)

    def _init_roots(self, counts: Any, counts_h: np.ndarray, root_seeds: Any,
                    rng: np.random.Generator) -> None:
        super()._init_roots(counts, counts_h, root_seeds, rng)
        self.largest_tree = int(counts_h.max())
        t, T = self.table, self.n_trees
        t.reserve(T + 1, T)
        # row T names no node: the rows of a round's batch without a node point to it
        # (only tree_level_split writes to it). No field needs a value before the
        # first round: a node's slot is written when it is evaluated, every state
        # by every round's replay.
        self.dummy = T
        self.used = T + 1

    # ------------------------------------------------------------------ rounds

    def run(self, level_activity: list | None = None) -> GrowResult:
        self._record_activity(level_activity, self._evaluate)
        while True:
            self._record_activity(level_activity, self._round)
            if not self.created and not sum(self.groups):
                # the replay batched nothing: it ran on complete information
                break
            if not self.pending or not sum(self.groups):
                # every batched node was the last split of its tree, or their children
                # are all leaves by the stopping rules: the next replay would expand
                # what this one did; it marks the new leaves (no copy)
                self._record_activity(level_activity, self._mark_last_children)
                break
            self._record_activity(level_activity, self._evaluate)
        return self._finish()

    def _record_activity(self, level_activity: list | None, step: Any) -> None:
        if level_activity is None:
            step()
            return
        groups = self.groups
        with count_device_activity() as activity:
            step()
        level_activity.append((groups, activity))

    def _evaluate(self) -> None:
        """The choices of the frontier's nodes (kept for the next round's record)."""
        xp = self.xp
        _, n_small, n_derived, n_direct = self.groups
        n_large = n_derived + n_direct
        ranges, tree, seed, _, _ = self.batch
        if n_small:
            small_out = kernels.split_small(
                self.backend, self.binned.kernel_codes,
                kernels.NodeBatch(self.sample_indices, ranges[:n_small], tree[:n_small],
                                  seed[:n_small]),
                self.weights, self.targets, self.edges, self._rules(self.small), self._sparse())
        else:
            small_out = (xp.empty(0, dtype=xp.int32), xp.empty(0, dtype=xp.int32),
                         xp.empty(0, dtype=xp.uint8), xp.empty(0, dtype=xp.float64))
        rows = 0
        if not n_large:
            best = xp.empty((0, 4), dtype=xp.float64)
        elif self.subtract:
            rows = n_large + self.n_helpers
            best = self._split_large_pooled(n_small, n_large, n_derived)
        else:
            rows = n_large
            best, _ = self._split_large(n_small, n_large, n_derived)
        self.evaluated = (self.front, n_small, small_out, best, self.base_small, self.base_large)
        self.base_small += n_small
        self.base_large += rows

    def _split_large_pooled(self, first: int, n_large: int, n_derived: int) -> Any:
        """All features: each large node's best slot, float64 (L, 4), its histogram (and
        the helpers') built into the pool or derived from its parent's there."""
        xp, backend = self.xp, self.backend
        ranges, tree, seed, _, pos = (a[first:] for a in self.batch)
        n_rows = n_large + self.n_helpers
        hist = self._pool_rows(n_rows)
        impure, q, feats, positions, uniforms = self._large_setup(
            ranges[:n_large], tree[:n_large], seed[:n_rows], pos[:n_rows], True)
        direct = slice(n_derived, n_rows)
        histogram.node_histograms(
            self.binned, kernels.NodeBatch(self.sample_indices, ranges[direct], tree[direct]),
            feats[direct], self.weights, self.targets, self.channels, out=hist[direct],
            scratch=self.hist_scratch)
        if n_derived:
            level_kernels.launch(backend, "tree_level_subtract", hist, n_derived,
                                 n_large - n_derived, self.pool, *self.derive)
        chunk = self._chunk_size()
        parts = []
        for c0 in range(0, n_large, chunk):
            c = slice(c0, min(c0 + chunk, n_large))
            parts.append(self._best_slots(hist[c], feats[c], positions[c], pos[c], q[c],
                                          impure[c], uniforms[c] if self.random_split else None))
        return parts[0] if len(parts) == 1 else xp.concatenate(parts)

    def _pool_rows(self, n_rows: int) -> Any:
        """The pool's next ``n_rows`` rows (not zeroed: the histograms' kernel and the
        subtraction write every cell).

        The first pool holds the large nodes of whole trees (2 ``max_leaf_nodes``
        rows per tree) within half of ``max_histogram_bytes``. A full pool is first
        compacted (:meth:`_compact_pool`), then doubled if still too small.
        """
        xp = self.xp
        if self.pool is not None and self.base_large + n_rows > self.pool.shape[0]:
            self._compact_pool()
        need = self.base_large + n_rows
        shape = (self.p, self.binned.n_bins, self.channels)
        if self.pool is None or self.pool.shape[0] < need:
            node_bytes = histogram.histogram_bytes(1, self.p, self.binned.n_bins, self.channels)
            first = min(2 * self.max_leaves * self.n_trees,
                        self.params.max_histogram_bytes // (2 * node_bytes))
            capacity = max(need, first if self.pool is None else 2 * self.pool.shape[0])
            pool = xp.empty((capacity, *shape), dtype=xp.float32)
            if self.pool is not None:
                pool[: self.base_large] = self.pool[: self.base_large]
            self.pool = pool
        return self.pool[self.base_large : need]

    def _compact_pool(self) -> None:
        """Keep only the histograms that a later subtraction may read: those of the leaves
        that may still split (large, feature >= 0, not split) and of the parents of the
        frontier's derived nodes; renumber their slots from 0."""
        xp, t, used = self.xp, self.table, self.used
        slot = t.slot[:used]
        open_large = (slot >= 0) & (t.feature[:used] >= 0) & (t.left[:used] < 0)
        keep = xp.zeros(self.base_large, dtype=bool)
        keep[slot[open_large]] = True
        keep[self.derive[0]] = True
        new_slot = xp.cumsum(keep, dtype=xp.int64) - 1
        rows = xp.flatnonzero(keep)
        n_live = int(rows.shape[0])
        self.pool[:n_live] = self.pool[rows]
        t.slot[:used] = xp.where(open_large, new_slot[xp.where(open_large, slot, 0)],
                                 xp.where(slot >= 0, -1, slot))
        self.derive = (new_slot[self.derive[0]], self.derive[1])
        self.base_large = n_live

    def _round(self) -> None:
        """Record, replay, split the batched nodes and create their children (one copy)."""
        xp, t = self.xp, self.table
        front, n_small, small_out, best, base_small, base_large = self.evaluated
        n_small_rows, n_large_rows = self.base_small, self.base_large
        n_rows = n_small_rows + n_large_rows
        # a round splits at most max_leaves - 1 nodes per tree
        t.reserve(self.used + 2 * min(n_rows, self.n_trees * (self.max_leaves - 1)), self.used)
        batch, choices = self._select(front, n_small, small_out, best, base_small, base_large)
        out_front, ranges, tree, depth, seed = batch
        dec_feature = xp.empty(n_rows, dtype=xp.int32)
        dec_bin = xp.empty(n_rows, dtype=xp.int32)
        dec_missing_left = xp.empty(n_rows, dtype=xp.uint8)
        n_left = xp.empty(n_rows, dtype=xp.int64)
        parts = self._partition_parts(n_rows)
        level_kernels.launch(
            self.backend, "tree_level_split", *self._split_codes(), self.binned.missing_bin,
            self.sample_indices, out_front, 0, n_small_rows, ranges, *choices, tree,
            self.w_root, self.m, float(self.params.min_impurity_decrease), self.width,
            t.feature, t.bin, t.missing_left, t.gain, t.pos, dec_feature, dec_bin,
            dec_missing_left, n_left, *parts)
        cap = 2 * n_rows
        nxt = (xp.empty(cap, dtype=xp.int64), xp.empty((cap + n_rows, 2), dtype=xp.int64),
               xp.empty(cap + n_rows, dtype=xp.int32), xp.empty(cap + n_rows, dtype=xp.uint64),
               xp.empty(cap + n_rows, dtype=xp.int32), xp.empty(cap + n_rows, dtype=xp.int64))
        derive = (xp.empty(cap, dtype=xp.int64), xp.empty(cap, dtype=xp.int64))
        sub_offsets = xp.empty(cap + 1, dtype=xp.int64)
        level_kernels.launch(
            self.backend, "tree_level_children", out_front, 0, n_small_rows, int(self.subtract),
            ranges, tree, depth, seed, dec_feature, n_left, 0, self.small, self.min_split,
            self.max_depth, self.used, t.start, t.stop, t.tree, t.depth, t.seed, t.pos,
            t.parent, t.left, t.right, t.feature, t.bin, t.missing_left, t.gain, *nxt, *derive,
            sub_offsets, t.head[: level_kernels.N_COUNTERS],
            *self._placing(dec_bin, dec_missing_left, parts))
        head = self._copy_head()
        created, _, n_small, n_derived, n_direct, _, n_helpers = (
            int(c) for c in head[: level_kernels.N_COUNTERS])
        self.pending = int(head[BestFirstNodeTable.PENDING])
        self.used += created
        self.created = created
        self.groups = (0, n_small, n_derived, n_direct)
        self.n_helpers = n_helpers
        n_next = n_small + n_derived + n_direct
        self.front = nxt[0][:n_next]
        self.batch = tuple(a[: n_next + n_helpers] for a in nxt[1:])
        self.derive = tuple(a[:n_derived] for a in derive)

    def _select(self, front: Any, n_small: int, small_out: tuple, best: Any, base_small: int,
                base_large: int) -> tuple[tuple, tuple]:
        """``tree_best_first_select`` on the table: the round's batch and its rows' choices
        (``pending`` into the table's head)."""
        xp, t = self.xp, self.table
        n_small_rows, n_large_rows = self.base_small, self.base_large
        n_rows = n_small_rows + n_large_rows
        batch = (xp.empty(n_rows, dtype=xp.int64), xp.empty((n_rows, 2), dtype=xp.int64),
                 xp.empty(n_rows, dtype=xp.int32), xp.empty(n_rows, dtype=xp.int32),
                 xp.empty(n_rows, dtype=xp.uint64))
        choices = (xp.empty(n_small_rows, dtype=xp.int32), xp.empty(n_small_rows, dtype=xp.int32),
                   xp.empty(n_small_rows, dtype=xp.uint8),
                   xp.empty(n_small_rows, dtype=xp.float64),
                   xp.empty((n_large_rows, 4), dtype=xp.float64))
        pending = t.head[BestFirstNodeTable.PENDING : BestFirstNodeTable.PENDING + 1]
        level_kernels.launch(
            self.backend, "tree_best_first_select", front, n_small, *small_out, best,
            self.w_root, self.m, float(self.params.min_impurity_decrease), base_small,
            base_large, self.used, self.max_leaves, self.dummy, t.start, t.stop, t.tree,
            t.depth, t.seed, t.left, t.right, t.feature, t.bin, t.missing_left, t.gain, t.slot,
            t.state, *self.heap, *batch, *choices, pending)
        return batch, choices

    def _copy_head(self) -> np.ndarray:
        """The round's one copy to the host: the table's head, with the whole table when it
        is small (``host_fields``); checks the targets on the first."""
        t = self.table
        if t.buffer.nbytes <= TABLE_COPY_BYTES:
            self.host_fields = t.to_host(self.backend, t.capacity)
            head = self.host_fields["head"]
        else:
            self.host_fields = None
            head = np.asarray(self.backend.to_host(t.head))
        if self.target_check is not None:
            check_targets(t.targets_finite(head))
            self.target_check = None
        return head

    def _mark_last_children(self) -> None:
        """The last replay: marks the leaves created by the round that completed the trees
        (no evaluation to record)."""
        xp = self.xp
        empty = (xp.empty(0, dtype=xp.int32), xp.empty(0, dtype=xp.int32),
                 xp.empty(0, dtype=xp.uint8), xp.empty(0, dtype=xp.float64))
        self._select(xp.empty(0, dtype=xp.int64), 0, empty, xp.empty((0, 4), dtype=xp.float64),
                     self.base_small, self.base_large)

    # ------------------------------------------------------------------ output

    def _host_nodes(self) -> HostNodeTable:
        """The nodes in the trees, renumbered in id order: the roots and the children of
        the split nodes (``state`` 2), from the last round's copy of the table, else one
        copy."""
        fields = self.host_fields
        if fields is None:
            fields = self.table.to_host(self.backend, self.used)
        fields = {name: view[: self.used] for name, view in fields.items() if name != "head"}
        # split: expanded by the replay and given children
        is_split = (fields["state"] == 2) & (fields["left"] >= 0)
        split_nodes = np.flatnonzero(is_split)
        in_tree = np.zeros(self.used, dtype=bool)
        in_tree[: self.n_trees] = True
        in_tree[fields["left"][split_nodes]] = True
        in_tree[fields["right"][split_nodes]] = True
        live = np.flatnonzero(in_tree)
        new_id = np.full(self.used, -1, dtype=np.int64)
        new_id[live] = np.arange(len(live))
        nodes = HostNodeTable()
        nodes.reserve(len(live))
        nodes.size = len(live)
        for name, _, _ in HostNodeTable._FIELDS:
            getattr(nodes, name)[: len(live)] = fields[name][live]
        split = is_split[live]
        for name in ("left", "right"):
            getattr(nodes, name)[: len(live)] = np.where(
                split, new_id[np.maximum(fields[name][live], 0)], -1)
        parent = fields["parent"][live]
        nodes.parent[: len(live)] = np.where(parent >= 0, new_id[np.maximum(parent, 0)], -1)
        leaf = ~split
        nodes.feature[: len(live)][leaf] = -1
        nodes.bin[: len(live)][leaf] = 0
        nodes.missing_left[: len(live)][leaf] = 0
        return nodes

    def _mark_leaves(self, mark: Any) -> None:
        """1 in ``mark`` at the first sample position of every leaf of the trees (the last
        replay's ``state`` 1)."""
        level_kernels.launch(self.backend, "tree_level_leaf_marks_state",
                             self.table.state[: self.used], self.table.start[: self.used], mark)


def grow_best_first_on_device(
    binned: BinnedMatrix,
    targets: Any,
    weights: Any,
    params: GrowthParams,
    rng: np.random.Generator,
    backend: Backend,
    root_seeds: Any = None,
    level_activity: list | None = None,
) -> GrowResult:
    """Grow T trees best first, with the state on the device.

    Takes the arguments of :func:`gpurpo.tree.grow_tree_best_first` and returns
    the same trees (node ids differ; leaves are numbered depth first by
    position, as :func:`gpurpo.tree.device_grower.grow_trees_on_device` numbers
    them). ``root_seeds`` may lie on the device. Runs on any backend (on NumPy
    through the numba twins of the kernels). With a list ``level_activity``,
    every step (an evaluation or a round) appends to it the numbers of subtree
    roots (none), small and large nodes of the frontier it started from and its
    device activity (:func:`gpurpo.backend.count_device_activity`), as a pair.

    Raises
    ------
    ValueError
        For growth it does not do (:func:`device_best_first_supported`), and for
        the invalid inputs :func:`~gpurpo.tree.grow_tree_best_first` rejects.
    """
    check_binned(binned)
    if not device_best_first_supported(binned, params):
        raise ValueError("grow_best_first_on_device grows best-first trees of the variance "
                         "criterion: params.max_leaf_nodes must be set and "
                         "params.criterion 'variance'")
    return _DeviceBestFirst(binned, targets, weights, params, rng, backend, root_seeds).run(
        level_activity)
