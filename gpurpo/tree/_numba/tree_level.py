"""numba twins of ``kernels/tree_level.cu``: the bookkeeping of device-resident level growth.

Same arguments, same outputs as the CUDA kernels (contracts in
:mod:`gpurpo.tree.level_kernels`); the counting pass and the writing pass of
``children`` are one serial pass here.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from gpurpo.tree._numba.tree_node_stats import launch as node_stats
from gpurpo.tree._numba.tree_partition import partition, partition_rows, stored_code
from gpurpo.tree._random import (
    N_ROUNDS,
    SMALL_P,
    child_seed_nb,
    feature_at_nb,
    feature_position_nb,
    feistel_params,
    round_keys_nb,
    small_feature_order_nb,
    uniform_at_nb,
)

#: the counters of ``children``: created nodes, subtree roots, small nodes, derived and
#: direct large nodes, rows of the subtree outputs, histogram helpers
N_COUNTERS = 7
_EPSILON = np.finfo(np.float64).eps


def large_setup(sample_indices, node_ranges, node_tree, weights, targets, node_done, seed, pos,
                p, random_split, natural, out_impure, out_q, out_features, out_positions,
                out_uniforms):
    """The large nodes' statistics (``tree_node_stats``: ``node_done`` is not read) and
    the candidate features of the rows of ``out_features`` (:func:`features`)."""
    node_stats(sample_indices, node_ranges, node_tree, weights, targets, node_done, out_impure,
               out_q)
    features(seed, pos, p, random_split, natural, out_features, out_positions, out_uniforms)


@njit(parallel=True, cache=True)
def features(seed, pos, p, random_split, natural, out_features, out_positions, out_uniforms):
    """Positions ``pos[i] .. pos[i] + width - 1`` of each node's visiting order; with
    ``natural``, feature j in slot j with its position."""
    n_nodes, width = out_features.shape
    lo, hi = feistel_params(p)
    for i in prange(n_nodes):
        keys = np.empty(N_ROUNDS, dtype=np.uint64)
        order = np.empty(SMALL_P, dtype=np.int64)
        if p <= SMALL_P:
            small_feature_order_nb(seed[i], p, order)
        else:
            round_keys_nb(seed[i], keys)
        for j in range(width):
            if natural:
                f = j
                at = -1
                if p <= SMALL_P:
                    for r in range(p):
                        if order[r] == j:
                            at = r
                else:
                    at = feature_position_nb(keys, j, p, lo, hi)
            else:
                at = pos[i] + j
                f = -1
                if at < p:
                    f = order[at] if p <= SMALL_P else feature_at_nb(keys, at, p, lo, hi)
            out_features[i, j] = f
            out_positions[i, j] = at
            if random_split:
                out_uniforms[i, j] = uniform_at_nb(seed[i], at)


@njit(inline="always", cache=True)
def level_parts(size, parts, part_min):
    """The parts of a splitting node of ``size`` samples (``level_parts`` of the CUDA
    source): one per ``part_min`` samples, at most ``parts``, at least one."""
    k = size // part_min
    return 1 if k < 1 else min(k, parts)


@njit(inline="always", cache=True)
def _goes_left(codes, row_ptr, row_features, row_codes, zero_code, s, f, b, miss_left,
               missing_bin):
    code = (stored_code(row_ptr, row_features, row_codes, zero_code, s, f)
            if codes.shape[1] == 0 else codes[f, s])
    return miss_left if code == missing_bin else code <= b


@njit(cache=True)
def split(codes, row_ptr, row_features, row_codes, zero_code, missing_bin, sample_indices,
          front, n_sub, n_small, ranges, small_feature, small_bin, small_missing_left,
          small_gain, large, batch_tree, root_weight, n_scored, min_impurity_decrease, width,
          node_feature, node_bin, node_missing_left, node_gain, node_pos, out_feature, out_bin,
          out_missing_left, out_n_left, scratch, parts, part_min, part_left):
    """The evaluated frontier nodes' choices into the table, then the stable partition of
    the splitting nodes' samples (see ``tree_level_split``): by their ``codes``, or with
    ``codes`` of shape (p, 0) by their stored rows. A node of several parts is copied to
    ``scratch`` with its parts' left counts in ``part_left`` (``children`` places it)."""
    _decide(front, n_sub, n_small, small_feature, small_bin, small_missing_left, small_gain,
            large, batch_tree, root_weight, n_scored, min_impurity_decrease, width, node_feature,
            node_bin, node_missing_left, node_gain, node_pos, out_feature, out_bin,
            out_missing_left)
    node_ranges = ranges[n_sub : front.shape[0]]
    whole = out_feature.copy()
    for e in range(node_ranges.shape[0]):
        f = out_feature[e]
        start = node_ranges[e, 0]
        size = node_ranges[e, 1] - start
        k = level_parts(size, parts, part_min)
        if f < 0 or k == 1:
            continue
        whole[e] = -1  # left to children
        for a in range(start, start + size):
            scratch[a] = sample_indices[a]
        for q in range(k):
            count = 0
            for a in range(start + size * q // k, start + size * (q + 1) // k):
                if _goes_left(codes, row_ptr, row_features, row_codes, zero_code, scratch[a],
                              f, out_bin[e], out_missing_left[e] != 0, missing_bin):
                    count += 1
            part_left[e * parts + q] = count
    if codes.shape[1] == 0:
        partition_rows(row_ptr, row_features, row_codes, zero_code, sample_indices,
                       node_ranges, whole, out_bin, out_missing_left, missing_bin, out_n_left)
    else:
        partition(codes, sample_indices, node_ranges, whole, out_bin, out_missing_left,
                  missing_bin, out_n_left)


@njit(cache=True)
def _place_parts(codes, row_ptr, row_features, row_codes, zero_code, missing_bin,
                 sample_indices, scratch, n_sub, ranges, dec_feature, dec_bin,
                 dec_missing_left, parts, part_min, part_left, n_left):
    """The left counts of the nodes partitioned in parts, and their samples placed from
    ``scratch`` part by part (see ``tree_level_children``)."""
    for e in range(dec_feature.shape[0]):
        f = dec_feature[e]
        i = n_sub + e
        start = ranges[i, 0]
        size = ranges[i, 1] - start
        k = level_parts(size, parts, part_min)
        if f < 0 or k == 1:
            continue
        total = 0
        for q in range(k):
            total += part_left[e * parts + q]
        n_left[e] = total
        w_left = start
        w_right = start + total
        for a in range(start, start + size):
            s = scratch[a]
            if _goes_left(codes, row_ptr, row_features, row_codes, zero_code, s, f, dec_bin[e],
                          dec_missing_left[e] != 0, missing_bin):
                sample_indices[w_left] = s
                w_left += 1
            else:
                sample_indices[w_right] = s
                w_right += 1


@njit(inline="always", cache=True)
def evaluated_choice(e, n_small, small_feature, small_bin, small_missing_left, small_gain, large):
    """The choice (feature, bin, missing side, gain) of the e-th evaluated node: the first
    ``n_small`` from ``tree_split_small``'s outputs, the others rows of ``large``."""
    if e < n_small:
        return (np.int64(small_feature[e]), np.int64(small_bin[e]),
                np.int64(small_missing_left[e]), small_gain[e])
    r = e - n_small
    return np.int64(large[r, 0]), np.int64(large[r, 1]), np.int64(large[r, 2]), large[r, 3]


@njit(inline="always", cache=True)
def kept_choice(f, b, ml, gain, scale, min_impurity_decrease):
    """An evaluated node's choice (feature, bin, missing side, gain): kept when its
    improvement ``gain / scale`` (scale: n_scored times the tree's root weight,
    scikit-learn's normalisation) is at least ``min_impurity_decrease`` within a
    float64 epsilon, else no split (-1, 0, 0, -inf)."""
    if f >= 0 and not (gain / scale + _EPSILON >= min_impurity_decrease):
        f = -1
    if f < 0:
        return np.int64(-1), np.int64(0), np.int64(0), -np.inf
    return f, b, ml, gain


@njit(cache=True)
def _decide(front, n_sub, n_small, small_feature, small_bin, small_missing_left, small_gain,
            large, batch_tree, root_weight, n_scored, min_impurity_decrease, width,
            node_feature, node_bin, node_missing_left, node_gain, node_pos,
            out_feature, out_bin, out_missing_left):
    """The evaluated frontier nodes' choices into the table and ``out_*``."""
    n_eval = front.shape[0] - n_sub
    for e in range(n_eval):
        i = n_sub + e
        g = front[i]
        f, b, ml, gain = evaluated_choice(e, n_small, small_feature, small_bin,
                                          small_missing_left, small_gain, large)
        if f == -2:
            node_pos[g] += width
            out_feature[e] = -2
            out_bin[e] = 0
            out_missing_left[e] = 0
            continue
        f, b, ml, gain = kept_choice(f, b, ml, gain,
                                     np.float64(n_scored) * root_weight[batch_tree[i]],
                                     min_impurity_decrease)
        node_feature[g] = f
        node_bin[g] = b
        node_missing_left[g] = ml
        node_gain[g] = gain
        out_feature[e] = f
        out_bin[e] = b
        out_missing_left[e] = ml


@njit(inline="always", cache=True)
def _new_node(g, start, stop, tree, depth, seed, pos, parent, node_start, node_stop, node_tree,
              node_depth, node_seed, node_pos, node_parent, node_left, node_right, node_feature,
              node_bin, node_missing_left, node_gain):
    """A new node g of the table: its range, tree, depth, seed, pos and parent; no children,
    no split."""
    node_start[g] = start
    node_stop[g] = stop
    node_tree[g] = tree
    node_depth[g] = depth
    node_seed[g] = seed
    node_pos[g] = pos
    node_parent[g] = parent
    node_left[g] = -1
    node_right[g] = -1
    node_feature[g] = -1
    node_bin[g] = 0
    node_missing_left[g] = 0
    node_gain[g] = -np.inf


@njit(inline="always", cache=True)
def _child_kind(size, depth, subtree_size, small_size, min_split, max_depth):
    """-1 a leaf, 0 a subtree root, 1 a small node, 2 a large node."""
    if size < min_split or (max_depth >= 0 and depth >= max_depth):
        return -1
    if size <= subtree_size:
        return 0
    if size <= small_size:
        return 1
    return 2


@njit(cache=True)
def _children_of(i, e, n_small, subtract, ranges, batch_depth, n_left, subtree_size,
                 small_size, min_split, max_depth):
    """Sizes and groups of the children of frontier node i, and the derived side (-1: none)."""
    size0 = n_left[e]
    size1 = ranges[i, 1] - ranges[i, 0] - n_left[e]
    depth = batch_depth[i] + 1
    kind0 = _child_kind(size0, depth, subtree_size, small_size, min_split, max_depth)
    kind1 = _child_kind(size1, depth, subtree_size, small_size, min_split, max_depth)
    big = 1 if size0 <= size1 else 0
    big_kind = kind1 if big == 1 else kind0
    derived = big if (subtract and e >= n_small and big_kind == 2) else -1
    return size0, size1, kind0, kind1, derived


@njit(cache=True)
def children(front, n_sub, n_small, subtract, ranges, batch_tree, batch_depth, batch_seed,
             dec_feature, n_left, subtree_size, small_size, min_split, max_depth, first_new,
             node_start, node_stop, node_tree, node_depth, node_seed, node_pos, node_parent,
             node_left, node_right, node_feature, node_bin, node_missing_left, node_gain,
             next_front, next_ranges, next_tree, next_seed, next_depth, next_pos,
             next_parent_hist, next_sibling, sub_offsets, counts, codes, row_ptr, row_features,
             row_codes, zero_code, missing_bin, sample_indices, scratch, dec_bin,
             dec_missing_left, parts, part_min, part_left):
    """Children of the splitting nodes and the next frontier (see ``tree_level_children``),
    after the nodes partitioned in parts are placed."""
    _place_parts(codes, row_ptr, row_features, row_codes, zero_code, missing_bin,
                 sample_indices, scratch, n_sub, ranges, dec_feature, dec_bin, dec_missing_left,
                 parts, part_min, part_left, n_left)
    n_front = front.shape[0]
    totals = np.zeros(N_COUNTERS, dtype=np.int64)
    rules = (subtree_size, small_size, min_split, max_depth)
    for i in range(n_sub, n_front):
        e = i - n_sub
        f = dec_feature[e]
        if f == -2:
            totals[4] += 1
            continue
        if f < 0:
            continue
        totals[0] += 2
        size0, size1, kind0, kind1, derived = _children_of(
            i, e, n_small, subtract, ranges, batch_depth, n_left, *rules)
        for side in range(2):
            kind = kind0 if side == 0 else kind1
            size = size0 if side == 0 else size1
            if side == derived:
                totals[3] += 1
            elif kind == 0:
                totals[1] += 1
            elif kind == 1:
                totals[2] += 1
            elif kind == 2:
                totals[4] += 1
            if kind == 0:
                totals[5] += 2 * size - 1
        if derived >= 0 and (kind1 if derived == 0 else kind0) != 2:
            totals[6] += 1
    counts[:] = totals
    sub_offsets[0] = 0
    base_small = totals[1]
    base_derived = base_small + totals[2]
    base_direct = base_derived + totals[3]
    base_helper = base_direct + totals[4]
    at = np.zeros(N_COUNTERS, dtype=np.int64)
    slot = np.empty(2, dtype=np.int64)
    for i in range(n_sub, n_front):
        e = i - n_sub
        f = dec_feature[e]
        g = front[i]
        if f == -2:
            j = base_direct + at[4]
            at[4] += 1
            next_front[j] = g
            next_ranges[j, 0] = ranges[i, 0]
            next_ranges[j, 1] = ranges[i, 1]
            next_tree[j] = batch_tree[i]
            next_seed[j] = batch_seed[i]
            next_depth[j] = batch_depth[i]
            next_pos[j] = node_pos[g]
            continue
        if f < 0:
            continue
        size0, size1, kind0, kind1, derived = _children_of(
            i, e, n_small, subtract, ranges, batch_depth, n_left, *rules)
        start = ranges[i, 0]
        stop = ranges[i, 1]
        mid = start + n_left[e]
        first_child = first_new + at[0]
        at[0] += 2
        node_left[g] = first_child
        node_right[g] = first_child + 1
        depth = batch_depth[i] + 1
        for side in range(2):
            kind = kind0 if side == 0 else kind1
            if side == derived:
                slot[side] = at[3]
                at[3] += 1
            elif kind == 0:
                slot[side] = at[1]
                at[1] += 1
            elif kind == 1:
                slot[side] = at[2]
                at[2] += 1
            elif kind == 2:
                slot[side] = at[4]
                at[4] += 1
            else:
                slot[side] = -1
        helper = -1
        if derived >= 0 and (kind1 if derived == 0 else kind0) != 2:
            helper = at[6]
            at[6] += 1
        for side in range(2):
            h = first_child + side
            cs = start if side == 0 else mid
            ce = mid if side == 0 else stop
            kind = kind0 if side == 0 else kind1
            seed = child_seed_nb(batch_seed[i], side)
            _new_node(h, cs, ce, batch_tree[i], depth, seed, -1 if kind == 0 else 0, g,
                      node_start, node_stop, node_tree, node_depth, node_seed, node_pos,
                      node_parent, node_left, node_right, node_feature, node_bin,
                      node_missing_left, node_gain)
            j = -1
            if side == derived:
                j = base_derived + slot[side]
                next_parent_hist[slot[side]] = e - n_small
                next_sibling[slot[side]] = -1 - helper if helper >= 0 else slot[1 - side]
            elif kind == 0:
                j = slot[side]
                at[5] += 2 * (ce - cs) - 1
                sub_offsets[slot[side] + 1] = at[5]
            elif kind == 1:
                j = base_small + slot[side]
            elif kind == 2:
                j = base_direct + slot[side]
            if j >= 0:
                next_front[j] = h
                next_ranges[j, 0] = cs
                next_ranges[j, 1] = ce
                next_tree[j] = batch_tree[i]
                next_seed[j] = seed
                next_depth[j] = depth
                next_pos[j] = -1 if kind == 0 else 0
            if helper >= 0 and side != derived:
                k = base_helper + helper
                next_ranges[k, 0] = cs
                next_ranges[k, 1] = ce
                next_tree[k] = batch_tree[i]
                next_seed[k] = seed
                next_depth[k] = depth
                next_pos[k] = 0


@njit(cache=True)
def roots(counts, n_each, seeds, root_weight, sample_indices, weights, subtree_size, small_size,
          min_split, max_depth, node_start, node_stop, node_tree, node_depth, node_seed,
          node_pos, node_parent, node_left, node_right, node_feature, node_bin,
          node_missing_left, node_gain, front, ranges, batch_tree, batch_seed, batch_depth,
          batch_pos, sub_offsets):
    """The trees' roots into the table and the first frontier, and without counts the
    samples and unit weights (see ``tree_level_roots``)."""
    n_trees = seeds.shape[0]
    n_counts = counts.shape[0]
    if not n_counts:
        for t in range(n_trees):
            for i in range(n_each):
                sample_indices[t * n_each + i] = i
                weights[t, i] = 1.0
    start = 0
    for t in range(n_trees):
        count = counts[t] if n_counts else n_each
        if not n_counts:
            root_weight[t] = np.float64(n_each)
        kind = _child_kind(count, 0, subtree_size, small_size, min_split, max_depth)
        _new_node(t, start, start + count, t, 0, seeds[t], -1 if kind == 0 else 0, -1,
                  node_start, node_stop, node_tree, node_depth, node_seed, node_pos,
                  node_parent, node_left, node_right, node_feature, node_bin, node_missing_left,
                  node_gain)
        start += count
    j = 0
    rows = 0
    sub_offsets[0] = 0
    for group in range(3):
        for t in range(n_trees):
            count = node_stop[t] - node_start[t]
            if _child_kind(count, 0, subtree_size, small_size, min_split, max_depth) != group:
                continue
            front[j] = t
            ranges[j, 0] = node_start[t]
            ranges[j, 1] = node_stop[t]
            batch_tree[j] = t
            batch_seed[j] = seeds[t]
            batch_depth[j] = 0
            batch_pos[j] = node_pos[t]
            if group == 0:
                rows += 2 * count - 1
                sub_offsets[j + 1] = rows
            j += 1


@njit(parallel=True, cache=True)
def subtract(hist, n_derived, n_direct, parent_hist, parent_row, sibling):
    """Derived histograms: the parent's minus the sibling's (see ``tree_level_subtract``)."""
    for d in prange(n_derived):
        s = sibling[d]
        row = n_derived + (s if s >= 0 else n_direct + (-1 - s))
        hist[d] = parent_hist[parent_row[d]] - hist[row]


@njit(parallel=True, cache=True)
def leaf_marks_table(node_feature, node_pos, node_start, mark):
    """Mark the first position of every table leaf that is not a subtree root."""
    for g in prange(node_feature.shape[0]):
        if node_feature[g] < 0 and node_pos[g] >= 0:
            mark[node_start[g]] = 1


@njit(parallel=True, cache=True)
def leaf_marks_state(node_state, node_start, mark):
    """Mark the first position of every leaf of a best-first table (``state`` 1)."""
    for g in prange(node_state.shape[0]):
        if node_state[g] == 1:
            mark[node_start[g]] = 1


@njit(parallel=True, cache=True)
def leaf_marks_subtrees(roots, offsets, count, feature, start, node_start, mark):
    """Mark the first position of every leaf of the subtree outputs."""
    for r in prange(roots.shape[0]):
        base = node_start[roots[r]]
        for row in range(offsets[r], offsets[r] + count[r]):
            if feature[row] < 0:
                mark[base + start[row]] = 1


@njit(parallel=True, cache=True)
def place(mark, cum, sample_indices, root_start, root_stop, weights, out_leaf_of_sample, out_leaf_weight):
    """Every sample's leaf (rank within its tree) and every leaf's weight, in position order."""
    n_trees = root_start.shape[0]
    for q in prange(mark.shape[0]):
        if not mark[q]:
            continue
        lo = 0
        hi = n_trees - 1
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if root_start[mid] <= q:
                lo = mid
            else:
                hi = mid - 1
        t = lo
        tree_start = root_start[t]
        tree_stop = root_stop[t]
        before = cum[tree_start - 1] if tree_start > 0 else 0
        rank = cum[q] - 1 - before
        acc = 0.0
        a = np.int64(q)
        while a < tree_stop and (a == q or not mark[a]):
            s = sample_indices[a]
            out_leaf_of_sample[t, s] = rank
            acc += np.float64(weights[t, s])
            a += np.int64(1)
        out_leaf_weight[cum[q] - 1] = acc
