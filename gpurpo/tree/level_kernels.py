"""Kernels of device-resident growth (level-wise and best-first): contracts, registration.

The bookkeeping of :mod:`gpurpo.tree.device_grower` (the frontier, the node
table and the leaves of a batch of trees live on the device) in kernels, so
that a level costs a fixed handful of launches and one small copy to the host
whatever the number of nodes and trees. CPU twins in
:mod:`gpurpo.tree._numba.tree_level`, CUDA sources in ``kernels/tree_level.cu``;
the conventions of :mod:`gpurpo.tree.kernels` apply (kernels fill the outputs
their caller allocates).

Notation: ``F`` frontier nodes, the first ``S`` of them subtree roots, the
next ``M`` split by ``tree_split_small``, the last ``L = F - S - M`` by
histograms; ``G`` rows of the node table (fields ``node_*``, one array each:
start, stop int64; tree, depth, feature, bin int32; seed uint64; pos, parent,
left, right int64; missing_left uint8; gain float64). ``pos`` is the first
position of the node's visiting order still to evaluate (continuing nodes of
sampled features), -1 for a node grown by ``tree_grow_subtrees``. A level's
launch batch holds its frontier nodes' ``ranges`` int64 (F, 2) (start, stop),
``tree``, ``seed``, ``depth`` and ``pos``, in frontier order.

Kernel contracts
----------------
``tree_level_large_setup(sample_indices, node_ranges, node_tree, weights, targets, node_done, seed, pos, p, random_split, natural, out_impure, out_q, out_features, out_positions, out_uniforms)``
    The statistics of N large nodes and the candidate features of R >= N rows (the
    large nodes, then the helpers), in one launch.
    sample_indices .. out_q            as ``tree_node_stats`` (:mod:`gpurpo.tree.kernels`,
                                       N = ``node_ranges`` rows; ``node_done``: its
                                       counters, or empty for one block per node)
    seed         uint64  (R,), pos int64 (R,)  the rows' seeds and first positions
    out_features int32   (R, W)        ``feature_at(seed[i], pos[i] + j, p)``
                                       (:mod:`gpurpo.tree._random`), -1 from position p on
    out_positions int64  (R, W)        ``pos[i] + j``
    out_uniforms float64 (R, W)        ``uniform_at(seed[i], out_positions[i, j])`` (written
                                       only with ``random_split``)
    With ``natural`` (W = p, ``pos`` not read): ``out_features[i, j] = j`` and
    ``out_positions[i, j]`` the position at which node i visits feature j (so that
    siblings' histograms share their slots and subtract).

``tree_level_split(codes, row_ptr, row_features, row_codes, zero_code, missing_bin, sample_indices, front, n_sub, n_small, ranges, small_feature, small_bin, small_missing_left, small_gain, large, batch_tree, root_weight, n_scored, min_impurity_decrease, width, node_feature, node_bin, node_missing_left, node_gain, node_pos, out_feature, out_bin, out_missing_left, out_n_left, scratch, parts, part_min, part_left)``
    For ``e < F - S`` (frontier position ``i = S + e``, node ``g = front[i]``), the
    choice of ``tree_split_small`` (``small_*``, (M,)) for ``e < M``, else row
    ``e - M`` of ``large`` float64 (L, 4) (``tree_best_slot``: feature, bin,
    missing_left, gain). Feature -2: ``node_pos[g] += width`` and ``out_feature[e] =
    -2``. Otherwise a split whose ``gain / (n_scored * root_weight[batch_tree[i]]) +
    eps < min_impurity_decrease`` becomes -1 (no split: bin 0, missing_left 0, gain
    -inf), and the choice is written to ``node_*[g]`` and ``out_*[e]`` (F - S,). Then
    the samples of every splitting node (``ranges[i]`` of the launch batch, whose rows
    after the frontier's are not read) are
    partitioned as by ``tree_partition`` (:mod:`gpurpo.tree.kernels`) with
    ``codes`` uint8 (p, n); ``out_n_left`` int64 (F - S,) is its number of samples
    sent left, 0 for the others. ``codes`` of shape (p, 0): a sparse X held as its
    stored rows (``row_ptr`` int64 (n + 1,), ``row_features`` int32, ``row_codes``
    uint8: the rows of its :class:`~gpurpo.tree.binning.SparseCodes`), each
    sample's code looked up in its row, ``zero_code[f]`` (uint8 (p,)) where it
    lists none; with dense codes they are not read.
    scratch      int32   (as sample_indices)  staging of the splitting nodes' samples
    parts, part_min  int               a splitting node of ``c`` samples is partitioned
                                       in ``k = min(parts, max(1, c // part_min))`` parts,
                                       part q its positions ``[c q // k, c (q + 1) // k)``
    part_left    int64   ((F - S) parts,)  for a node of k > 1 parts: the left count of
                                       its part q at ``e * parts + q``; its samples are
                                       then copied to the same range of ``scratch`` and
                                       its ``out_n_left`` is 0, both completed by
                                       ``tree_level_children`` (a CUDA launch shares such
                                       a node among blocks instead of one)

``tree_level_children(front, n_sub, n_small, subtract, ranges, batch_tree, batch_depth, batch_seed, dec_feature, n_left, subtree_size, small_size, min_split, max_depth, first_new, node_start, node_stop, node_tree, node_depth, node_seed, node_pos, node_parent, node_left, node_right, node_feature, node_bin, node_missing_left, node_gain, next_front, next_ranges, next_tree, next_seed, next_depth, next_pos, next_parent_hist, next_sibling, sub_offsets, counts, codes, row_ptr, row_features, row_codes, zero_code, missing_bin, sample_indices, scratch, dec_bin, dec_missing_left, parts, part_min, part_left)``
    ranges, batch_tree, batch_depth, batch_seed  the frontier's launch batch
    dec_feature  int32   (F - S,)      ``tree_level_split``'s ``out_feature``
    n_left       int64   (F - S,)      and its ``out_n_left``
    codes .. missing_bin, sample_indices, scratch, parts, part_min, part_left  as given
                                       to ``tree_level_split``, with its ``out_bin`` and
                                       ``out_missing_left`` as ``dec_bin``,
                                       ``dec_missing_left``
    First every splitting node of k > 1 parts is completed: ``n_left[e]`` becomes the
    sum of its parts' left counts, and its samples are placed from ``scratch``: part
    q's left samples after those of the parts before it, its right samples after the
    node's ``n_left`` left samples and those of the parts before it, each in order
    (the stable partition of the node, as by ``tree_partition``).
    Every splitting node (``dec_feature >= 0``), in frontier order, gets the children
    ``first_new + 2 r`` (left: the first ``n_left`` samples) and ``first_new + 2 r + 1``
    (r: splitting nodes before it): their table rows (seed ``child_seed(seed, side)``,
    no split, pos 0, or -1 for a subtree root) and its ``node_left``/``node_right``.
    A child of ``c`` samples at depth ``d`` is a leaf when ``c < min_split`` or
    ``max_depth >= 0 and d >= max_depth``, else a subtree root (``c <=
    subtree_size``), a small (``c <= small_size``) or a large node. With
    ``subtract`` (the large nodes' histograms of this level are kept, rows in
    frontier order), the larger child of a large node (the right one on equal
    sizes) is DERIVED when it is large: its histogram is its parent's minus its
    sibling's, and a sibling that is not large is a HELPER (its histogram built
    for the subtraction only). Other large children are DIRECT.
    next_front   int64   (2 F,)        the subtree roots, the small nodes, the derived
                                       and the direct large nodes (with the nodes of
                                       ``dec_feature`` -2 under their own id), each group
                                       in frontier order
    next_ranges, next_tree, next_seed, next_depth, next_pos  (3 F, ...) the next
                                       frontier's launch batch (a continuing node's
                                       ``pos`` read from ``node_pos``), then the helpers'
    next_parent_hist int64 (2 F,)      derived node d's parent's row among this level's
                                       large nodes
    next_sibling int64   (2 F,)        its sibling's index among the direct nodes, or
                                       ``-1 - h`` for helper h
    sub_offsets  int64   (2 F + 1,)    0, then the running sum of ``2 c - 1`` over the
                                       subtree roots (the rows of their subtree outputs)
    counts       int64   (7,)          children created, subtree roots, small nodes,
                                       derived and direct large nodes, subtree output
                                       rows, helpers

``tree_level_roots(counts, n_each, seeds, root_weight, sample_indices, weights, subtree_size, small_size, min_split, max_depth, node_start, node_stop, node_tree, node_depth, node_seed, node_pos, node_parent, node_left, node_right, node_feature, node_bin, node_missing_left, node_gain, front, ranges, batch_tree, batch_seed, batch_depth, batch_pos, sub_offsets)``
    counts       int64   (T,) or (0,)  each tree's samples (tree t owns the next
                                       ``counts[t]`` positions of the samples); empty:
                                       ``n_each`` (int) each
    seeds        uint64  (T,)          the trees' root seeds
    root_weight  float64 (T,)          with ``counts`` empty, ``n_each`` for every tree
                                       (the trees' weights with unit weights); else not
                                       written
    sample_indices int32 (T n_each,), weights float32 (T, n_each)  with ``counts`` empty,
                                       every tree's samples ``0 .. n_each - 1`` in order
                                       and their weights, ones; else not written
    Rows 0 .. T - 1 of the table: tree t's root (its range, tree t, depth 0, its seed,
    pos -1 for a subtree root else 0, no parent, children or split). Then the first
    frontier: the roots grouped as by ``tree_level_children`` (subtree roots, small,
    large; leaves left out), each group in tree order, in ``front`` (T,) and its launch
    batch ``ranges`` (T, 2), ``batch_tree``, ``batch_seed``, ``batch_depth``,
    ``batch_pos`` (T,), and ``sub_offsets`` (T + 1,): 0, then the running sum of
    ``2 c - 1`` over the subtree roots.

``tree_level_subtract(hist, n_derived, n_direct, parent_hist, parent_row, sibling)``
    hist         float32 (R, k, B, C)  rows: the derived nodes, the direct nodes, the
                                       helpers (the last two filled)
    parent_hist  float32 (P, k, B, C)  the previous level's large nodes' histograms
    parent_row, sibling  int64 (n_derived,)  ``next_parent_hist`` and ``next_sibling``
    ``hist[d] = parent_hist[parent_row[d]] - hist[n_derived + s]`` with ``s = sibling[d]``,
    or ``n_direct - 1 - sibling[d]`` for a helper (float32, as ``numpy``)

``tree_level_leaf_marks_table(node_feature, node_pos, node_start, mark)``
    mark         int32   (total,)      ZEROED; 1 at ``node_start[g]`` of every node with
                                       ``node_feature[g] < 0`` and ``node_pos[g] >= 0``

``tree_level_leaf_marks_state(node_state, node_start, mark)``
    mark         int32   (total,)      ZEROED; 1 at ``node_start[g]`` of every node of a
                                       best-first table with ``node_state[g] == 1`` (uint8)

``tree_level_leaf_marks_subtrees(roots, offsets, count, feature, start, node_start, mark)``
    roots        int64   (R,)          the subtree roots' node ids, and
    offsets, count, feature, start     their :class:`~gpurpo.tree._records.Subtrees`
    mark         int32   (total,)      1 at ``node_start[roots[r]] + start[row]`` of every
                                       output row of root r with ``feature[row] < 0``

``tree_level_place(mark, cum, sample_indices, root_start, root_stop, weights, out_leaf_of_sample, out_leaf_weight)``
    mark         int32   (total,)      1 at the first position of every leaf
    cum          int64   (total,)      the inclusive running sum of ``mark``
    root_start, root_stop  int64 (T,)  each tree's positions ``root_start[t] ..
                                       root_stop[t] - 1``, increasing with t
    weights      float32 (T, n)
    out_leaf_of_sample int32 (T, n)    for every sample of a leaf of tree t, the leaf's
                                       rank among the leaves of t by position
    out_leaf_weight float64 (L,)       leaf ``cum[q] - 1`` (q its first position): 0.0 +
                                       its samples' weights in position order

``tree_best_first_select(eval_front, n_small, small_feature, small_bin, small_missing_left, small_gain, large, root_weight, n_scored, min_impurity_decrease, base_small, base_large, n_nodes, max_leaves, dummy, node_start, node_stop, node_tree, node_depth, node_seed, node_left, node_right, node_feature, node_bin, node_missing_left, node_gain, node_slot, node_state, heap_gain, heap_order, heap_node, out_front, out_ranges, out_tree, out_depth, out_seed, out_small_feature, out_small_bin, out_small_missing_left, out_small_gain, out_large, pending)``
    One round of best-first growth (:mod:`gpurpo.tree.device_best_first`; CPU twin in
    :mod:`gpurpo.tree._numba.tree_best_first`, CUDA in ``kernels/tree_best_first.cu``).
    eval_front   int64   (E,)          the nodes evaluated last: the first ``n_small`` by
                                       ``tree_split_small`` (``small_*``, (n_small,)),
                                       then row ``e - n_small`` of ``large`` float64 (., 4)
    1. The batch rows are cleared: ``out_front`` = ``dummy`` (a table row that is no
       node), feature -1, gain -inf, zero launch fields.
    2. Every evaluated node's slot: ``node_slot[g] = -2 - (base_small + e)`` (small)
       or ``base_large + e - n_small`` (large). Feature -2 (candidates all constant):
       ``node_feature[g] = -2`` and the node is batched with feature -2. Otherwise the
       choice is written to the table, -1 (bin 0, missing_left 0, gain -inf) when not
       a split or when ``gain / (n_scored * root_weight[node_tree[g]]) + eps <
       min_impurity_decrease``.
    3. ``node_state[:n_nodes] = 0``; then tree t (root: node t, T = heap_gain.shape[0]
       trees) replays best-first growth: a heap of the nodes of feature >= 0 keyed by
       (gain descending, push order), the root first, children left before right;
       while it holds nodes and the tree has fewer than ``max_leaves`` leaves, the
       first node is expanded (``node_state`` 2, a leaf more); if it has children
       (``node_left >= 0``) they are marked leaves (``node_state`` 1) and those of
       feature >= 0 pushed, else the node is batched with its choice. Nodes reached
       and not expanded keep ``node_state`` 1.
    heap_gain, heap_order, heap_node  float64/int64/int64 (T, H), H at least the nodes a
                                       replay may push: min(2 max_leaves, 2 c) - 1 for a
                                       tree of c samples
    A batched node g with slot s goes to row ``r = -2 - s`` (s <= -2: ``out_small_*[r]``
    its feature, bin, missing side and gain) or ``r = S + s`` (``out_large[s]`` the
    same as float64), S = ``out_small_feature.shape[0]``; ``out_front[r] = g``,
    ``out_ranges[r]`` its ``(start, stop)``, ``out_tree``, ``out_depth``, ``out_seed``
    its fields. The batch is the frontier of ``tree_level_split`` and
    ``tree_level_children`` with ``n_sub = 0`` and ``n_small = S``.
    pending      int64   (1,)          the batched rows that may change a tree: those of
                                       feature -2 and the nodes batched while their tree
                                       had fewer than ``max_leaves`` leaves after them.
                                       0: splitting the batch completes every tree, the
                                       children it creates being leaves
"""

from __future__ import annotations

from typing import Any

from gpurpo.backend import Backend, register_kernel
from gpurpo.tree import _level_cuda as _cuda
from gpurpo.tree._numba import tree_best_first, tree_level

__all__ = ["LEVEL_KERNEL_NAMES", "N_COUNTERS", "PART_MIN_SAMPLES", "partition_parts"]

LEVEL_KERNEL_NAMES = (
    "tree_level_large_setup",
    "tree_level_split",
    "tree_level_children",
    "tree_level_roots",
    "tree_level_subtract",
    "tree_level_leaf_marks_table",
    "tree_level_leaf_marks_state",
    "tree_level_leaf_marks_subtrees",
    "tree_level_place",
    "tree_best_first_select",
)

#: length of ``tree_level_children``'s ``counts``
N_COUNTERS = tree_level.N_COUNTERS
#: the fewest samples of a part of a node partitioned in parts (``tree_level_split``):
#: a 256-thread block places 4,096 samples in 16 steps
PART_MIN_SAMPLES = 4096

register_kernel("tree_level_large_setup", cpu=tree_level.large_setup, cuda=_cuda.large_setup)
register_kernel("tree_level_split", cpu=tree_level.split, cuda=_cuda.split)
register_kernel("tree_level_children", cpu=tree_level.children, cuda=_cuda.children)
register_kernel("tree_level_roots", cpu=tree_level.roots, cuda=_cuda.roots)
register_kernel("tree_level_subtract", cpu=tree_level.subtract, cuda=_cuda.subtract)
register_kernel("tree_level_leaf_marks_table", cpu=tree_level.leaf_marks_table,
                cuda=_cuda.leaf_marks_table)
register_kernel("tree_level_leaf_marks_state", cpu=tree_level.leaf_marks_state,
                cuda=_cuda.leaf_marks_state)
register_kernel("tree_level_leaf_marks_subtrees", cpu=tree_level.leaf_marks_subtrees,
                cuda=_cuda.leaf_marks_subtrees)
register_kernel("tree_level_place", cpu=tree_level.place, cuda=_cuda.place)
register_kernel("tree_best_first_select", cpu=tree_best_first.select,
                cuda=_cuda.best_first_select)


def launch(backend: Backend, name: str, *args: Any) -> None:
    """Run the level kernel ``name`` (one of ``LEVEL_KERNEL_NAMES``) on ``args``.

    The arrays must already have the contract's dtypes and be C-contiguous
    (the device grower allocates them so); nothing is copied here.
    """
    if name not in LEVEL_KERNEL_NAMES:
        raise ValueError(f"name must be one of {LEVEL_KERNEL_NAMES}, got {name!r}")
    backend.kernel(name)(*args)


def partition_parts(backend: Backend, n_eval: int) -> int:
    """The ``parts`` of a level's ``tree_level_split`` and ``tree_level_children`` for
    ``n_eval`` evaluated nodes: on CUDA backends as many as fill the device with blocks
    when the nodes are few (the large nodes at the top of a tree, each then read by many
    multiprocessors), 1 from as many nodes as blocks on; 1 on the CPU (the partition is
    the same whatever the parts)."""
    if not backend.uses_cuda_kernels or n_eval <= 0:
        return 1
    return max(1, _cuda.partition_blocks(backend.device_attributes()) // int(n_eval))
