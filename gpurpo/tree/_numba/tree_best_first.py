"""numba twin of ``kernels/tree_best_first.cu``: one round of device-resident best-first growth.

Same arguments, same outputs as the CUDA kernel (contract in
:mod:`gpurpo.tree.level_kernels`). The CUDA kernel runs its phases with the
threads of one block (the replay one thread per tree); here they run one
after the other, the trees of the replay in parallel.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from gpurpo.tree._numba.tree_level import evaluated_choice, kept_choice


@njit(inline="always", cache=True)
def _before(gain_a, order_a, gain_b, order_b):
    """Whether heap entry a pops before b: the larger gain, then the earlier push."""
    return gain_a > gain_b or (gain_a == gain_b and order_a < order_b)


@njit(cache=True)
def _push(heap_gain, heap_order, heap_node, size, gain, order, node):
    """Push onto a binary max-heap of ``size`` entries; returns the new size."""
    at = size
    while at > 0:
        up = (at - 1) // 2
        if not _before(gain, order, heap_gain[up], heap_order[up]):
            break
        heap_gain[at] = heap_gain[up]
        heap_order[at] = heap_order[up]
        heap_node[at] = heap_node[up]
        at = up
    heap_gain[at] = gain
    heap_order[at] = order
    heap_node[at] = node
    return size + 1


@njit(cache=True)
def _pop(heap_gain, heap_order, heap_node, size):
    """The first node of a heap of ``size`` > 0 entries, removed (the new size is size - 1)."""
    top = heap_node[0]
    size -= 1
    gain = heap_gain[size]
    order = heap_order[size]
    node = heap_node[size]
    at = 0
    while True:
        child = 2 * at + 1
        if child >= size:
            break
        if child + 1 < size and _before(heap_gain[child + 1], heap_order[child + 1],
                                        heap_gain[child], heap_order[child]):
            child += 1
        if not _before(heap_gain[child], heap_order[child], gain, order):
            break
        heap_gain[at] = heap_gain[child]
        heap_order[at] = heap_order[child]
        heap_node[at] = heap_node[child]
        at = child
    heap_gain[at] = gain
    heap_order[at] = order
    heap_node[at] = node
    return top


@njit(cache=True)
def _write_row(g, node_start, node_stop, node_tree, node_depth, node_seed, node_slot,
               feature, bin_, missing_left, gain, out_front, out_ranges, out_tree, out_depth,
               out_seed, out_small_feature, out_small_bin, out_small_missing_left,
               out_small_gain, out_large):
    """Node g's row of the round's batch: its choice and launch fields."""
    n_small_rows = out_small_feature.shape[0]
    slot = node_slot[g]
    if slot <= -2:
        row = -2 - slot
        out_small_feature[row] = feature
        out_small_bin[row] = bin_
        out_small_missing_left[row] = missing_left
        out_small_gain[row] = gain
    else:
        row = n_small_rows + slot
        out_large[slot, 0] = feature
        out_large[slot, 1] = bin_
        out_large[slot, 2] = missing_left
        out_large[slot, 3] = gain
    out_front[row] = g
    out_ranges[row, 0] = node_start[g]
    out_ranges[row, 1] = node_stop[g]
    out_tree[row] = node_tree[g]
    out_depth[row] = node_depth[g]
    out_seed[row] = node_seed[g]


@njit(parallel=True, cache=True)
def select(eval_front, n_small, small_feature, small_bin, small_missing_left, small_gain, large,
           root_weight, n_scored, min_impurity_decrease, base_small, base_large, n_nodes,
           max_leaves, dummy, node_start, node_stop, node_tree, node_depth, node_seed, node_left,
           node_right, node_feature, node_bin, node_missing_left, node_gain, node_slot,
           node_state, heap_gain, heap_order, heap_node, out_front, out_ranges, out_tree,
           out_depth, out_seed, out_small_feature, out_small_bin, out_small_missing_left,
           out_small_gain, out_large, pending):
    """Record the last evaluations, replay best-first growth, batch this round's splits
    and count in ``pending[0]`` the batched rows that may change a tree (see
    ``tree_best_first_select``)."""
    n_small_rows = out_small_feature.shape[0]
    n_rows = out_front.shape[0]
    for row in prange(n_rows):
        out_front[row] = dummy
        out_ranges[row, 0] = 0
        out_ranges[row, 1] = 0
        out_tree[row] = 0
        out_depth[row] = 0
        out_seed[row] = 0
        if row < n_small_rows:
            out_small_feature[row] = -1
            out_small_bin[row] = 0
            out_small_missing_left[row] = 0
            out_small_gain[row] = -np.inf
        else:
            r = row - n_small_rows
            out_large[r, 0] = -1.0
            out_large[r, 1] = 0.0
            out_large[r, 2] = 0.0
            out_large[r, 3] = -np.inf
    for e in prange(eval_front.shape[0]):
        g = eval_front[e]
        f, b, ml, gain = evaluated_choice(e, n_small, small_feature, small_bin,
                                          small_missing_left, small_gain, large)
        node_slot[g] = -2 - (base_small + e) if e < n_small else base_large + e - n_small
        if f == -2:
            node_feature[g] = -2
            _write_row(g, node_start, node_stop, node_tree, node_depth, node_seed, node_slot,
                       -2, 0, 0, -np.inf, out_front, out_ranges, out_tree, out_depth, out_seed,
                       out_small_feature, out_small_bin, out_small_missing_left, out_small_gain,
                       out_large)
            continue
        f, b, ml, gain = kept_choice(f, b, ml, gain,
                                     np.float64(n_scored) * root_weight[node_tree[g]],
                                     min_impurity_decrease)
        node_feature[g] = f
        node_bin[g] = b
        node_missing_left[g] = ml
        node_gain[g] = gain
    continuing = 0
    for e in range(eval_front.shape[0]):
        if node_feature[eval_front[e]] == -2:
            continuing += 1
    for g in prange(n_nodes):
        node_state[g] = 0
    short_of_max = 0
    for t in prange(heap_gain.shape[0]):
        short_of_max += _replay(
            t, max_leaves, node_start, node_stop, node_tree, node_depth, node_seed, node_left,
            node_right, node_feature, node_bin, node_missing_left, node_gain, node_slot,
            node_state, heap_gain[t], heap_order[t], heap_node[t], out_front, out_ranges,
            out_tree, out_depth, out_seed, out_small_feature, out_small_bin,
            out_small_missing_left, out_small_gain, out_large)
    pending[0] = continuing + short_of_max


@njit(cache=True)
def _replay(t, max_leaves, node_start, node_stop, node_tree, node_depth, node_seed, node_left,
            node_right, node_feature, node_bin, node_missing_left, node_gain, node_slot,
            node_state, heap_gain, heap_order, heap_node, out_front, out_ranges, out_tree,
            out_depth, out_seed, out_small_feature, out_small_bin, out_small_missing_left,
            out_small_gain, out_large):
    """Best-first growth of tree t (root: node t) replayed on what is known of it; returns
    how many nodes it batched while the tree had fewer than ``max_leaves`` leaves after
    them."""
    node_state[t] = 1
    size = 0
    pushed = 0
    if node_feature[t] >= 0:
        size = _push(heap_gain, heap_order, heap_node, size, node_gain[t], pushed, t)
        pushed += 1
    leaves = 1
    short_of_max = 0
    while size > 0 and leaves < max_leaves:
        g = _pop(heap_gain, heap_order, heap_node, size)
        size -= 1
        leaves += 1
        node_state[g] = 2
        if node_left[g] >= 0:
            for side in range(2):
                c = node_left[g] if side == 0 else node_right[g]
                node_state[c] = 1
                if node_feature[c] >= 0:
                    size = _push(heap_gain, heap_order, heap_node, size, node_gain[c], pushed, c)
                    pushed += 1
        else:
            _write_row(g, node_start, node_stop, node_tree, node_depth, node_seed, node_slot,
                       node_feature[g], node_bin[g], node_missing_left[g], node_gain[g],
                       out_front, out_ranges, out_tree, out_depth, out_seed, out_small_feature,
                       out_small_bin, out_small_missing_left, out_small_gain, out_large)
            if leaves < max_leaves:
                short_of_max += 1
    return short_of_max
