"""numba CPU implementations of the tree kernels.

The contracts (shapes, dtypes, memory order, meaning) are documented once, in
:mod:`gpurpo.tree.kernels`, which registers these functions with
:func:`gpurpo.backend.register_kernel`. Every kernel only FILLS output arrays
allocated (and, where documented, zeroed) by its caller; none allocates a
result. Compiled with ``fastmath=False`` so results do not depend on
re-association.
"""

from __future__ import annotations

import numpy as np
from llvmlite import ir
from numba import njit, prange, types
from numba.extending import intrinsic

from gpurpo.tree._borrow import borrow, borrow_all
from gpurpo.tree._random import (
    N_ROUNDS,
    SMALL_P,
    child_seed_nb,
    feature_batch_nb,
    feature_position_nb,
    feistel_params,
    round_keys_nb,
    small_feature_order_nb,
    uniform_at_nb,
)

__all__ = [
    "histograms",
    "node_stats",
    "split_small_nodes",
    "score_histograms",
    "grow_subtrees",
    "accumulate_leaves_dense",
    "accumulate_leaves_csr",
    "apply_trees",
    "sum_leaves_dense",
    "sum_leaves_csr",
    "SORT_LIMIT",
    "RANK_LIMIT",
]

# Nodes with at most SORT_LIMIT samples sort their codes (by ranks up to
# RANK_LIMIT samples, a stable bucket sort above) and scan the samples in
# that order, instead of filling and scanning a per-bin table: a node of 33 to 256
# samples spreads over most of the 255 bins, and the table scan cost more than the
# sort (subtree kernel: 32 -> 128, -8 % on the mediamill- and delicious-shaped
# forests; 128 -> 256: 0 % to -10 % in in-process A/B runs of the subtree kernel,
# bench/experiments/subtree_kernel_ab.py; 384 no better). The bucket sort visits
# only the occupied bins, where a counting sort's prefix and clearing passes
# spanned the whole occupied range (A/B, two compiled copies each: subtree kernel
# -6 % on delicious-shaped, -18 % on mediamill-shaped trees). The sorted samples
# are scanned in one pass (_scan_sorted8 up to 8 channels): a three-pass scan with
# vectorised gains, faster before the search ran on borrowed views, was slower at
# every node size after (Xeon, 7 channels: 16 samples 7.9 vs 6.0 us, 256: 113 vs
# 100 us; 12 and 40 channels likewise; subtree kernel about -6 % without it).
SORT_LIMIT = 256
RANK_LIMIT = 32
# Nodes of 3 to SUBSET_LIMIT samples bound the gain of every split by the largest
# over all their two-sided partitions (_largest_partition_gain), so that the feature
# loop stops once no later feature can change the tie rule's pick.
SUBSET_LIMIT = 7
# Nodes of a batch are dealt to this many chunks (each with its own scratch).
N_CHUNKS = 256
# Most stored entries a sparse X's node lists to visit only their features (_eval_node).
LISTING_LIMIT = 4096
# Rows ahead whose lines transpose_block_to_float32 prefetches.
TRANSPOSE_PREFETCH = 32

# Inlining. numba's inline="always" copies a helper's IR into every call site before
# typing, and the compilation of the caller (SSA reconstruction, type inference,
# lowering) grows with the copies: _eval_node, some 130 of them. Helpers of a few
# operations (_add_channel, _side_weight, _keep_better, _add_row8, ...) are plain
# functions, which LLVM inlines all the same (the same speed; subtree kernel,
# delicious-shaped trees, in-process A/B: 0.1488 s, control 0.1505 s): _eval_node's
# compilation 20.4 -> 16.2 s. The scans and _score_point8 stay inline="always": as
# calls, LLVM does not inline them and a split search takes 1.3x to 3x as long.
# Integer arguments of njit calls are run-time values, not literals: numba compiles a
# function again for each literal type it is called with (see _subtree_chunk_roots).


@intrinsic
def _count_trailing_zeros(typingctx, bits):
    """Index of the lowest set bit of a nonzero uint64 (LLVM ``cttz``: one instruction)."""
    if bits != types.uint64:
        return None

    def codegen(context, builder, signature, args):
        return builder.cttz(args[0], ir.Constant(ir.IntType(1), 1))

    return types.uint64(types.uint64), codegen


@intrinsic
def _prefetch(typingctx, flat, index):
    """Hint the CPU to load the cache line of ``flat[index]`` (LLVM ``prefetch``; no fault,
    no effect on the result). ``flat``: a 1-D contiguous array; ``index`` within it."""
    if not isinstance(flat, types.Array) or flat.ndim != 1 or not isinstance(index, types.Integer):
        return None

    def codegen(context, builder, signature, args):
        array = context.make_array(signature.args[0])(context, builder, args[0])
        byte_ptr = ir.IntType(8).as_pointer()
        i32 = ir.IntType(32)
        fn = builder.module.declare_intrinsic(
            "llvm.prefetch", fnty=ir.FunctionType(ir.VoidType(), [byte_ptr, i32, i32, i32]))
        address = builder.bitcast(builder.gep(array.data, [args[1]]), byte_ptr)
        # read, highest temporal locality, data cache
        builder.call(fn, [address, ir.Constant(i32, 0), ir.Constant(i32, 3), ir.Constant(i32, 1)])
        return context.get_dummy_value()

    return types.void(flat, index), codegen


# Features ahead of the one visited whose first reads _eval_node prefetches
# (_prefetch_feature_meta), and whose stored-entry columns it prefetches (their
# column starts, prefetched with the first reads, are in the cache by then).
META_PREFETCH = 8
COLUMN_PREFETCH = 4


@njit(inline="always", cache=True)
def _prefetch_feature_meta(f, subtracted_bin, listed, col_ptr):
    """Prefetch what the visit of feature ``f`` reads first: its subtracted bin, its
    count of listed codes and (sparse X) its column's start."""
    _prefetch(subtracted_bin, f)
    _prefetch(listed, f)
    if col_ptr.shape[0] > 0:
        _prefetch(col_ptr, f)


@njit(inline="always", cache=True)
def _prefetch_column(f, col_ptr, col_rows, col_codes):
    """Prefetch the first stored entries (rows and codes) of feature ``f``'s column."""
    if col_ptr.shape[0] > 0:
        e0 = col_ptr[f]
        if e0 < col_rows.shape[0]:
            _prefetch(col_rows, e0)
            _prefetch(col_codes, e0)


@njit(cache=True)
def _clear_accumulator(acc, n_channels):
    """Zero the first ``n_channels`` columns of a (node, feature) task's accumulator."""
    for b in range(acc.shape[0]):
        for c in range(n_channels):
            acc[b, c] = 0.0


@njit(cache=True)
def _store_accumulator(acc, out, i, j, n_channels):
    """``out[i, j] = acc`` (float64 sums rounded to the float32 cells), ``n_channels`` columns."""
    for b in range(acc.shape[0]):
        for c in range(n_channels):
            out[i, j, b, c] = acc[b, c]


# bytes of the weighted target rows the host histograms gather for a group of nodes
HISTOGRAM_ROWS_BYTES = 1 << 26


@njit(cache=True)
def _gather_weighted_rows(sample_indices, start, stop, t, weights, targets, rows, r0):
    """``rows[r0 + e - start] = (w, w y_1, ..., w y_m)`` of the samples
    ``sample_indices[start:stop]`` of tree ``t`` (``w`` in float64)."""
    m = targets.shape[2]
    for e in range(start, stop):
        s = sample_indices[e]
        w = np.float64(weights[t, s])
        r = r0 + e - start
        rows[r, 0] = w
        for c in range(m):
            rows[r, 1 + c] = w * targets[s, t, c]


@njit(cache=True)
def _node_feature_histogram(row, sample_indices, e0, e1, rows, r0, n_channels, with_count, acc):
    """Adds the samples ``sample_indices[e0:e1]`` to ``acc`` by their code in ``row``: their
    gathered weighted rows (:func:`_gather_weighted_rows`, the node's first at
    ``rows[r0]``) to channels 0 .. m, and one to the last channel (the count) when
    ``with_count``; ``acc`` has ``n_channels`` columns."""
    width = rows.shape[1]
    for e in range(e0, e1):
        b = row[sample_indices[e]]
        r = r0 + e - e0
        for c in range(width):
            acc[b, c] += rows[r, c]
        if with_count:
            acc[b, n_channels - 1] += 1.0


@njit(cache=True)
def _histogram_chunk(ch, n_chunks, codes, sample_indices, node_ranges, node_features, i0, i1,
                     rows, row_start, with_count, acc, out, col_ptr, col_rows, col_codes,
                     edge_values, edge_ptr, row_buf, pos_buf):
    """The (node, feature) tasks ``ch, ch + n_chunks, ...`` of the nodes ``i0 .. i1 - 1`` of
    :func:`histograms_in_groups`, from their gathered weighted rows (node ``i``'s first at
    ``rows[row_start[i - i0]]``).

    On views of its arrays that hold no reference (see :mod:`gpurpo.tree._borrow`);
    ``acc`` is the chunk's accumulator, zeroed for each task. ``codes`` of shape
    ``(p, 0)`` (a sparse X without dense codes, :func:`histograms_columns`): the
    node's codes of the feature are put at their samples in ``row_buf``
    (length n) and summed as a row of the codes, the same sums: the column is
    written over the node's code of 0.0 when it holds at most 8 entries per
    sample of the node, else each sample is looked up in it
    (:func:`_node_codes_of`, into ``pos_buf``).
    """
    (
        codes, sample_indices, node_ranges, node_features, rows, row_start, acc, out, col_ptr,
        col_rows, col_codes, edge_values, edge_ptr, row_buf, pos_buf,
    ) = borrow_all((
        codes, sample_indices, node_ranges, node_features, rows, row_start, acc, out, col_ptr,
        col_rows, col_codes, edge_values, edge_ptr, row_buf, pos_buf,
    ))
    k = node_features.shape[1]
    n_channels = out.shape[3]
    gather = codes.shape[1] == 0
    for task in range(ch, (i1 - i0) * k, n_chunks):
        i = i0 + task // k
        j = task - (i - i0) * k
        f = node_features[i, j]
        if f < 0:
            continue
        _clear_accumulator(acc, n_channels)
        start = node_ranges[i, 0]
        stop = node_ranges[i, 1]
        row = row_buf
        if gather and col_ptr[f + 1] - col_ptr[f] <= 8 * (stop - start):
            # the node's samples at the code of 0.0, then the whole column: its rows
            # outside the node are written too but never read for this task
            zero = _zero_code(edge_values, edge_ptr, f)
            for a in range(start, stop):
                row_buf[sample_indices[a]] = zero
            for e in range(col_ptr[f], col_ptr[f + 1]):
                row_buf[col_rows[e]] = col_codes[e]
        elif gather:
            _node_codes_of(f, sample_indices, start, stop - start, edge_values, edge_ptr, False,
                           col_ptr, col_rows, col_codes, col_rows, pos_buf)
            for a in range(stop - start):
                row_buf[sample_indices[start + a]] = pos_buf[a]
        else:
            row = codes[f]
        _node_feature_histogram(row, sample_indices, start, stop, rows, row_start[i - i0],
                                n_channels, with_count, acc)
        _store_accumulator(acc, out, i, j, n_channels)


@njit(parallel=True, cache=True)
def _histograms_grouped(codes, col_ptr, col_rows, col_codes, edge_values, edge_ptr,
                        sample_indices, node_ranges, node_features, node_tree, weights, targets,
                        out, rows_bytes):
    """``tree_histograms`` on the host from the dense ``codes``, or from a sparse X's
    stored-entry columns (``codes`` of shape ``(p, 0)``), by groups of nodes whose
    gathered rows fit ``rows_bytes`` (at least one node a group).

    Each node's weights and weighted targets are gathered once, in the order
    of its samples (:func:`_gather_weighted_rows`, float64 rows of ``m + 1``
    values), and its ``k`` features add those rows by their codes: the
    products were formed again for every feature, and the targets read at
    the samples' scattered rows (the three calls of a delicious-shaped tree,
    nodes of 12,920, 6,688 + 6,232 and 4,103 samples, 22 features each, one
    thread, in one process: 4.0 / 4.5 -> 2.75 / 2.6 ms; the same sums, bit for
    bit).
    """
    n_nodes = node_features.shape[0]
    k = node_features.shape[1]
    n_bins = out.shape[2]
    n_channels = out.shape[3]
    m = targets.shape[2]
    with_count = n_channels == m + 2
    gather = codes.shape[1] == 0
    budget = max(1, rows_bytes // (8 * (m + 1)))
    i0 = 0
    while i0 < n_nodes:
        i1 = i0 + 1
        total = node_ranges[i0, 1] - node_ranges[i0, 0]
        max_ns = total
        while i1 < n_nodes and total + node_ranges[i1, 1] - node_ranges[i1, 0] <= budget:
            total += node_ranges[i1, 1] - node_ranges[i1, 0]
            max_ns = max(max_ns, node_ranges[i1, 1] - node_ranges[i1, 0])
            i1 += 1
        row_start = np.zeros(i1 - i0 + 1, dtype=np.int64)
        for i in range(i0, i1):
            row_start[i - i0 + 1] = row_start[i - i0] + node_ranges[i, 1] - node_ranges[i, 0]
        rows = np.empty((total, m + 1), dtype=np.float64)
        for i in prange(i0, i1):
            _gather_weighted_rows(sample_indices, node_ranges[i, 0], node_ranges[i, 1],
                                  node_tree[i], weights, targets, rows, row_start[i - i0])
        n_chunks = min((i1 - i0) * k, N_CHUNKS)
        for ch in prange(n_chunks):
            _histogram_chunk(ch, n_chunks, codes, sample_indices, node_ranges, node_features,
                             i0, i1, rows, row_start, with_count,
                             np.empty((n_bins, n_channels), dtype=np.float64), out, col_ptr,
                             col_rows, col_codes, edge_values, edge_ptr,
                             np.empty(targets.shape[0] if gather else 1, dtype=np.uint8),
                             np.empty(max(max_ns, 1) if gather else 1, dtype=np.uint8))
        i0 = i1


def histograms_in_groups(codes, sample_indices, node_ranges, node_features, node_tree, weights,
                         targets, out, rows_bytes):
    """``tree_histograms`` on the host from dense codes, by groups of nodes whose gathered
    rows fit ``rows_bytes`` (:func:`_histograms_grouped`)."""
    # no stored-entry columns: arrays of their types, never read
    no_ptr = np.zeros(1, dtype=np.int64)
    _histograms_grouped(codes, no_ptr, np.empty(0, dtype=np.int32), np.empty(0, dtype=np.uint8),
                        np.empty(0, dtype=np.float64), no_ptr, sample_indices, node_ranges,
                        node_features, node_tree, weights, targets, out, rows_bytes)


def histograms(codes, sample_indices, node_ranges, node_features, node_tree, weights, targets, out):
    """``tree_histograms`` on the host (see kernels.py): :func:`histograms_in_groups` with
    groups of ``HISTOGRAM_ROWS_BYTES``."""
    histograms_in_groups(codes, sample_indices, node_ranges, node_features, node_tree, weights,
                         targets, out, HISTOGRAM_ROWS_BYTES)


def histograms_columns(col_ptr, col_rows, col_codes, edge_values, edge_ptr, sample_indices,
                       node_ranges, node_features, node_tree, weights, targets, out):
    """:func:`histograms` of a sparse X held without its dense codes: each (node,
    feature) reads the feature's codes from its stored-entry column. Same sums."""
    no_codes = np.empty((edge_ptr.shape[0] - 1, 0), dtype=np.uint8)
    _histograms_grouped(no_codes, col_ptr, col_rows, col_codes, edge_values, edge_ptr,
                        sample_indices, node_ranges, node_features, node_tree, weights, targets,
                        out, HISTOGRAM_ROWS_BYTES)


@njit(parallel=True, cache=True)
def partition(codes, sample_indices, node_ranges, node_feature, node_bin, node_missing_left,
              missing_bin, out_n_left):
    for i in prange(node_ranges.shape[0]):
        start = node_ranges[i, 0]
        stop = node_ranges[i, 1]
        f = node_feature[i]
        b = node_bin[i]
        miss_left = node_missing_left[i] != 0
        right = np.empty(stop - start, dtype=sample_indices.dtype)
        w = start
        r = 0
        for a in range(start, stop):
            s = sample_indices[a]
            code = codes[f, s]
            if (miss_left if code == missing_bin else code <= b):
                sample_indices[w] = s  # w <= a: not read again
                w += 1
            else:
                right[r] = s
                r += 1
        for j in range(r):
            sample_indices[w + j] = right[j]
        out_n_left[i] = w - start


@njit(parallel=True, cache=True)
def partition_columns(col_ptr, col_rows, col_codes, edge_values, edge_ptr, sample_indices,
                      node_ranges, node_feature, node_bin, node_missing_left, missing_bin,
                      out_n_left):
    """:func:`partition` of a sparse X held without its dense codes: each sample's code
    of the node's feature is looked up in the feature's stored-entry column (binary
    search; rows absent from it take the feature's code of 0.0). Same result."""
    for i in prange(node_ranges.shape[0]):
        start = node_ranges[i, 0]
        ns = node_ranges[i, 1] - start
        f = node_feature[i]
        codes = np.empty((1, ns), dtype=np.uint8)
        _node_codes_of(f, sample_indices, start, ns, edge_values, edge_ptr, False, col_ptr,
                       col_rows, col_codes, col_rows, codes[0])
        samples = sample_indices[start : start + ns]
        out_n_left[i] = _partition_positions(
            codes, np.arange(ns).astype(np.int32), samples, np.empty_like(samples), 0, ns, 0,
            node_bin[i], node_missing_left[i], missing_bin)


@njit(parallel=True, cache=True)
def node_stats(sample_indices, node_ranges, node_tree, weights, targets, out_impure, out_q):
    n_nodes = node_ranges.shape[0]
    m = targets.shape[2]
    for i in prange(n_nodes):
        start = node_ranges[i, 0]
        stop = node_ranges[i, 1]
        t = node_tree[i]
        s0 = sample_indices[start] if stop > start else 0
        impure = False
        q = 0.0
        for a in range(start, stop):
            s = sample_indices[a]
            sq = 0.0
            for c in range(m):
                v = targets[s, t, c]
                if v != targets[s0, t, c]:
                    impure = True
                v64 = np.float64(v)
                sq += v64 * v64
            q += np.float64(weights[t, s]) * sq
        out_impure[i] = 1 if impure else 0
        out_q[i] = q


@njit(cache=True)
def _side_weight(weight):
    """The weight a gain divides by: 1 for a side whose weight is not positive.

    Empty sides of a histogram scan have weight 0; a right side ``W - W_L``
    of an exact scan, computed from sums, can be zero or negative when its
    samples weigh less than the rounding error of the node's total (weights
    differing by more than 2^53). Its gain term is then the squared norm (the
    rounding residue of ``S - L``) over 1, instead of a division by zero.
    """
    return weight if weight > 0 else 1.0


@njit(inline="always", cache=True)
def _gain(WL, LS, W, S, m, parent):
    # sequential sums over the m real channels (the padding channels are zero and
    # would add exact zeros): two dependency chains, the order of the CUDA twin
    WR = _side_weight(W - WL)
    left = 0.0
    right = 0.0
    for c in range(m):
        left += LS[c] * LS[c]
        r = S[c] - LS[c]
        right += r * r
    return left / WL + right / WR - parent


@njit(cache=True)
def _random_cut(edge_values, edge_ptr, f, bmin, bmax, u):
    # Largest bin b in [bmin, bmax - 1] with edge(f, b) <= lo + u (hi - lo),
    # lo = edge(f, bmin), hi = edge(f, bmax - 1); bmax when bmin == bmax (_edge).
    if bmin == bmax:
        return bmax
    lo = _edge(edge_values, edge_ptr, f, bmin)
    hi = _edge(edge_values, edge_ptr, f, bmax - 1)
    cut_value = lo + u * (hi - lo)
    b = bmin
    while b + 1 <= bmax - 1 and _edge(edge_values, edge_ptr, f, b + 1) <= cut_value:
        b += 1
    return b


@njit(cache=True)
def _add_channel(left, right, total, partial):
    # one channel's terms of _gain: the left sum squared, then the right one
    r = total - partial
    return left + partial * partial, right + r * r


@njit(inline="always", cache=True)
def _gain8(WL, l0, l1, l2, l3, l4, l5, l6, l7, W, S, m, parent):
    """``_gain`` with the left sums of the (at most 8) channels in scalars."""
    left, right = _add_channel(0.0, 0.0, S[0], l0)
    if m > 1:
        left, right = _add_channel(left, right, S[1], l1)
    if m > 2:
        left, right = _add_channel(left, right, S[2], l2)
    if m > 3:
        left, right = _add_channel(left, right, S[3], l3)
    if m > 4:
        left, right = _add_channel(left, right, S[4], l4)
    if m > 5:
        left, right = _add_channel(left, right, S[5], l5)
    if m > 6:
        left, right = _add_channel(left, right, S[6], l6)
    if m > 7:
        left, right = _add_channel(left, right, S[7], l7)
    return left / WL + right / _side_weight(W - WL) - parent


@njit(cache=True)
def _add_row8(l0, l1, l2, l3, l4, l5, l6, l7, wy, idx):
    """Eight running sums (kept in registers by the caller) plus row ``idx`` of ``wy``."""
    return (l0 + wy[idx, 0], l1 + wy[idx, 1], l2 + wy[idx, 2], l3 + wy[idx, 3],
            l4 + wy[idx, 4], l5 + wy[idx, 5], l6 + wy[idx, 6], l7 + wy[idx, 7])


@njit(cache=True)
def _missing_right_flag(WL, W, n_miss):
    """``missing_left`` of a split point whose missing values (if any) go right.

    Without missing values in the node, missing values met at prediction
    follow the heavier side.
    """
    if n_miss == 0:
        return 1 if WL >= W - WL else 0
    return 0


@njit(cache=True)
def _keep_better(g, b, missing_left, best_gain, best_b, best_ml):
    """The split point ``(g, b, missing_left)`` if its gain is strictly larger, else the best.

    Strictly: among equal gains of one feature, the first scanned stays.
    """
    if g > best_gain:
        return g, b, missing_left
    return best_gain, best_b, best_ml


@njit(inline="always", cache=True)
def _score_point8(b, at_end, nL, WL, l0, l1, l2, l3, l4, l5, l6, l7, ns, MS, Wm, n_miss, W, S,
                  m, parent, min_samples_leaf, best_gain, best_b, best_ml):
    """Score split point ``code <= b`` from the left sums in scalars (missing values right, then left).

    Keeps the better of the best and each valid side choice (:func:`_keep_better`).
    The missing-left gain adds ``MS`` to the left sums and subtracts it again, the
    round trip of the generic scan, so the sums carry the same rounding. Returns the
    best, then the eight left sums.
    """
    if nL >= min_samples_leaf and ns - nL >= min_samples_leaf:
        g = _gain8(WL, l0, l1, l2, l3, l4, l5, l6, l7, W, S, m, parent)
        best_gain, best_b, best_ml = _keep_better(
            g, b, _missing_right_flag(WL, W, n_miss), best_gain, best_b, best_ml)
    if n_miss > 0 and not at_end:
        nLm = nL + n_miss
        if nLm >= min_samples_leaf and ns - nLm >= min_samples_leaf:
            l0 += MS[0]
            l1 += MS[1]
            l2 += MS[2]
            l3 += MS[3]
            l4 += MS[4]
            l5 += MS[5]
            l6 += MS[6]
            l7 += MS[7]
            g = _gain8(WL + Wm, l0, l1, l2, l3, l4, l5, l6, l7, W, S, m, parent)
            l0 -= MS[0]
            l1 -= MS[1]
            l2 -= MS[2]
            l3 -= MS[3]
            l4 -= MS[4]
            l5 -= MS[5]
            l6 -= MS[6]
            l7 -= MS[7]
            best_gain, best_b, best_ml = _keep_better(g, b, 1, best_gain, best_b, best_ml)
    return best_gain, best_b, best_ml, l0, l1, l2, l3, l4, l5, l6, l7


@njit(inline="always", cache=True)
def _scan_sorted8(order, code_buf, nn, ns, rows, d0, w, wy, MS, Wm, n_miss, bmax, W, S, m, parent,
                  min_samples_leaf, random_split, cut):
    """Best split point of one feature of a sorted node whose targets have 8 padded channels.

    The scan of ``_eval_node`` over the samples in code order (``order``,
    ``code_buf``; the first ``nn`` are not missing; data rows
    ``rows[d0 + order[a]]``), with the running left
    sums in eight scalars instead of an array, which the compiler must keep
    in memory: the same additions in the same order, so the same bits
    (including the ``LS += MS; LS -= MS`` round trip of the missing-left
    side). Returns (gain, bin, missing_left).
    """
    l0 = l1 = l2 = l3 = l4 = l5 = l6 = l7 = 0.0
    WL = 0.0
    nL = 0
    best_gain = -np.inf
    best_b = 0
    best_ml = 0
    for a in range(nn):
        idx = rows[d0 + order[a]]
        b = code_buf[a]
        WL += w[idx]
        nL += 1
        l0, l1, l2, l3, l4, l5, l6, l7 = _add_row8(l0, l1, l2, l3, l4, l5, l6, l7, wy, idx)
        next_code = code_buf[a + 1] if a < nn - 1 else bmax + 1
        if next_code == b:
            continue
        if random_split:
            if not (b <= cut and cut < next_code):
                continue
            b = cut
        at_end = b >= bmax
        if at_end and n_miss == 0:
            continue
        best_gain, best_b, best_ml, l0, l1, l2, l3, l4, l5, l6, l7 = _score_point8(
            b, at_end, nL, WL, l0, l1, l2, l3, l4, l5, l6, l7, ns, MS, Wm, n_miss, W, S, m,
            parent, min_samples_leaf, best_gain, best_b, best_ml)
    return best_gain, best_b, best_ml


@njit(cache=True)
def _widen_range(b, missing_bin, bmin, bmax):
    """``(bmin, bmax)`` widened to the code ``b`` unless it is the missing bin."""
    if b != missing_bin:
        return min(bmin, b), max(bmax, b)
    return bmin, bmax


@njit(inline="always", cache=True)
def _fill_table8(codes, f, cols, c0ff, ns, rows, d0, w, wy, hist, missing_bin):
    """The per-bin table of feature ``f`` of a node with 8 padded channels; returns (bmin, bmax).

    ``hist[b]`` receives the sums of the samples coded ``b`` (8 channels, weight,
    count), added in position order; ``bmin``/``bmax`` bound the non-missing
    codes. The bin of the node's first sample (for a sparse feature, the zero
    code of most samples) is summed in registers and stored once, instead of a
    chain of loads and stores through its table row: the same additions in the
    same order, so the same bits as :func:`_fill_table_skipping` with ``z = -1``.
    """
    bmin = missing_bin
    bmax = -1
    bz = np.int64(codes[f, cols[c0ff]])
    z0 = z1 = z2 = z3 = z4 = z5 = z6 = z7 = 0.0
    zw = 0.0
    zn = 0.0
    for a in range(ns):
        b = np.int64(codes[f, cols[c0ff + a]])
        ra = rows[d0 + a]
        if b == bz:
            zw += w[ra]
            z0, z1, z2, z3, z4, z5, z6, z7 = _add_row8(z0, z1, z2, z3, z4, z5, z6, z7, wy, ra)
            zn += 1.0
            continue
        hist[b, 8] += w[ra]
        for c in range(8):
            hist[b, c] += wy[ra, c]
        hist[b, 9] += 1.0
        bmin, bmax = _widen_range(b, missing_bin, bmin, bmax)
    hist[bz, 0] = z0
    hist[bz, 1] = z1
    hist[bz, 2] = z2
    hist[bz, 3] = z3
    hist[bz, 4] = z4
    hist[bz, 5] = z5
    hist[bz, 6] = z6
    hist[bz, 7] = z7
    hist[bz, 8] = zw
    hist[bz, 9] = zn
    return _widen_range(bz, missing_bin, bmin, bmax)


@njit(inline="always", cache=True)
def _fill_table_skipping(codes, f, cols, c0ff, ns, rows, d0, w, wy, hist, missing_bin, z):
    """The per-bin table of feature ``f`` of a node, without the samples coded ``z``.

    ``hist[b]`` receives the sums of the samples coded ``b != z`` (``mp``
    channels, weight, count), added in position order. Returns (bmin, bmax,
    n_z): the range of the non-missing codes other than ``z`` and the number of
    samples coded ``z`` (``z = -1``: every sample is added).
    """
    mp = wy.shape[1]
    bmin = missing_bin
    bmax = -1
    n_z = 0
    for a in range(ns):
        b = np.int64(codes[f, cols[c0ff + a]])
        if b == z:
            n_z += 1
            continue
        ra = rows[d0 + a]
        hist[b, mp] += w[ra]
        for c0 in range(0, mp, 8):
            for c in range(c0, c0 + 8):
                hist[b, c] += wy[ra, c]
        hist[b, mp + 1] += 1.0
        bmin, bmax = _widen_range(b, missing_bin, bmin, bmax)
    return bmin, bmax, n_z


@njit(cache=True)
def _mark(bits, b):
    """Set bit ``b`` of the bit set ``bits`` (uint64 words)."""
    bits[b >> 6] |= np.uint64(1) << np.uint64(b & 63)


@njit(cache=True)
def _unmark(bits, b):
    """Clear bit ``b`` of the bit set ``bits`` (uint64 words)."""
    bits[b >> 6] &= ~(np.uint64(1) << np.uint64(b & 63))


@njit(inline="always", cache=True)
def _next_marked(marks, word, bits, clear):
    """The next set bit of the bit set ``marks``, in increasing order.

    ``(word, bits)`` is the walk's state: start from ``(-1, 0)``; returns
    ``(b, word, bits)``, ``b = -1`` at the end. With ``clear``, each word is
    zeroed when the walk enters it (the walk leaves the set empty).
    """
    while bits == np.uint64(0):
        word += 1
        if word >= marks.shape[0]:
            return -1, word, bits
        bits = marks[word]
        if clear:
            marks[word] = np.uint64(0)
    b = word * 64 + np.int64(_count_trailing_zeros(bits))
    return b, word, bits & (bits - np.uint64(1))


@njit(inline="always", cache=True)
def _fill_table_columns(col_ptr, col_rows, col_codes, f, slot_of_row, rows, d0, w, wy, hist,
                        missing_bin, mark, occupied):
    """:func:`_fill_table_skipping` from feature ``f``'s stored entries (sparse X).

    The column lists, in increasing row order, the rows whose code is not the
    feature's subtracted bin; ``slot_of_row[r]`` is the position of row ``r``
    in the node (-1 outside it), whose data are ``w[rows[d0 + a]]`` and
    ``wy[rows[d0 + a]]``. For a node whose positions hold increasing rows,
    each bin's samples are added in position order, as the plain fill adds
    them: the same bits. With ``mark``, each filled bin is also marked in
    the bit set ``occupied`` (for :func:`_derive_occupied8` and
    :func:`_scan_occupied8`). Returns (bmin, bmax, number of the node's rows
    listed).
    """
    mp = hist.shape[1] - 2
    bmin = missing_bin
    bmax = -1
    listed = 0
    for e in range(col_ptr[f], col_ptr[f + 1]):
        a = np.int64(slot_of_row[col_rows[e]])
        if a < 0:
            continue
        b = np.int64(col_codes[e])
        ra = rows[d0 + a]
        row = hist[b]
        row[mp] += w[ra]
        for c0 in range(0, mp, 8):
            for c in range(c0, c0 + 8):
                row[c] += wy[ra, c]
        row[mp + 1] += 1.0
        listed += 1
        if mark:
            _mark(occupied, b)
        bmin, bmax = _widen_range(b, missing_bin, bmin, bmax)
    return bmin, bmax, listed


@njit(inline="always", cache=True)
def _derive_subtracted_bin(hist, z, n_z, bmin, bmax, missing_bin, S, W):
    """Sums of bin ``z`` (``n_z > 0`` samples) as the node's totals minus the other bins.

    ``hist[z] = (S, W) - sum of the occupied rows b != z``, the rows added in
    increasing ``b`` over ``bmin .. bmax``, then the missing row; count ``n_z``.
    A sparse feature's table then costs its nonzeros in the node.
    """
    mp = hist.shape[1] - 2
    row = hist[z]
    for c in range(mp + 1):
        row[c] = 0.0
    for b in range(bmin, bmax + 1):
        if b != z and hist[b, mp + 1] > 0.0:
            for c in range(mp + 1):
                row[c] += hist[b, c]
    if hist[missing_bin, mp + 1] > 0.0:
        for c in range(mp + 1):
            row[c] += hist[missing_bin, c]
    for c in range(mp):
        row[c] = S[c] - row[c]
    row[mp] = W - row[mp]
    row[mp + 1] = np.float64(n_z)


@njit(inline="always", cache=True)
def _derive_occupied8(hist, occupied, z, n_z, S, W):
    """:func:`_derive_subtracted_bin` over the marked bins, 8 channels; marks ``z``.

    The marked bins are exactly the occupied rows other than ``z`` (the
    missing bin, the largest code, among them), visited in increasing order
    and summed in registers: the same additions in the same order, so the
    same bits, without walking the empty bins of ``bmin .. bmax``.
    """
    r0 = r1 = r2 = r3 = r4 = r5 = r6 = r7 = 0.0
    rw = 0.0
    word, bits = -1, np.uint64(0)
    while True:
        b, word, bits = _next_marked(occupied, word, bits, False)
        if b < 0:
            break
        row = hist[b]
        r0 += row[0]
        r1 += row[1]
        r2 += row[2]
        r3 += row[3]
        r4 += row[4]
        r5 += row[5]
        r6 += row[6]
        r7 += row[7]
        rw += row[8]
    row = hist[z]
    row[0] = S[0] - r0
    row[1] = S[1] - r1
    row[2] = S[2] - r2
    row[3] = S[3] - r3
    row[4] = S[4] - r4
    row[5] = S[5] - r5
    row[6] = S[6] - r6
    row[7] = S[7] - r7
    row[8] = W - rw
    row[9] = np.float64(n_z)
    _mark(occupied, z)


@njit(inline="always", cache=True)
def _clear_occupied(hist, occupied):
    """Zero the marked rows of ``hist`` and the bit set."""
    word, bits = -1, np.uint64(0)
    while True:
        b, word, bits = _next_marked(occupied, word, bits, True)
        if b < 0:
            break
        for c in range(hist.shape[1]):
            hist[b, c] = 0.0


@njit(cache=True)
def _take_row8(row, WL, nL, l0, l1, l2, l3, l4, l5, l6, l7):
    """Add a table row (8 sums, weight, count) to the running left sums in scalars; zero it."""
    WL += row[8]
    nL += np.int64(row[9])
    l0 += row[0]
    l1 += row[1]
    l2 += row[2]
    l3 += row[3]
    l4 += row[4]
    l5 += row[5]
    l6 += row[6]
    l7 += row[7]
    for c in range(10):
        row[c] = 0.0
    return WL, nL, l0, l1, l2, l3, l4, l5, l6, l7


@njit(inline="always", cache=True)
def _scan_occupied8(hist, occupied, bmax, ns, MS, Wm, n_miss, W, S, m, parent,
                    min_samples_leaf):
    """:func:`_scan_table8` (best split) over the marked bins only; clears them.

    The missing bin must be unmarked. Empty bins add nothing and score no
    split point in the best-split scan, so visiting the marked bins in
    increasing order makes the same additions and comparisons: the same bits.
    """
    l0 = l1 = l2 = l3 = l4 = l5 = l6 = l7 = 0.0
    WL = 0.0
    nL = 0
    best_gain = -np.inf
    best_b = 0
    best_ml = 0
    word, bits = -1, np.uint64(0)
    while True:
        b, word, bits = _next_marked(occupied, word, bits, True)
        if b < 0:
            break
        WL, nL, l0, l1, l2, l3, l4, l5, l6, l7 = _take_row8(
            hist[b], WL, nL, l0, l1, l2, l3, l4, l5, l6, l7)
        at_end = b >= bmax
        if at_end and n_miss == 0:
            continue
        best_gain, best_b, best_ml, l0, l1, l2, l3, l4, l5, l6, l7 = _score_point8(
            b, at_end, nL, WL, l0, l1, l2, l3, l4, l5, l6, l7, ns, MS, Wm, n_miss, W, S, m,
            parent, min_samples_leaf, best_gain, best_b, best_ml)
    return best_gain, best_b, best_ml


@njit(inline="always", cache=True)
def _scan_table8(hist, bmin, bmax, ns, MS, Wm, n_miss, W, S, m, parent, min_samples_leaf,
                 random_split, cut):
    """Best split point of one feature from the per-bin table of a node with 8 padded channels.

    The table scan of ``_eval_node`` (bins ``bmin .. bmax`` of ``hist``: 8
    sums, then weight and count; each visited row is zeroed) with the running
    left sums in eight scalars, as :func:`_scan_sorted8` does for sorted
    samples: the same additions in the same order, so the same bits. Returns
    (gain, bin, missing_left).
    """
    l0 = l1 = l2 = l3 = l4 = l5 = l6 = l7 = 0.0
    WL = 0.0
    nL = 0
    best_gain = -np.inf
    best_b = 0
    best_ml = 0
    for b in range(bmin, bmax + 1):
        row = hist[b]
        cnt = np.int64(row[9])
        if cnt > 0:
            WL, nL, l0, l1, l2, l3, l4, l5, l6, l7 = _take_row8(
                row, WL, nL, l0, l1, l2, l3, l4, l5, l6, l7)
        if random_split:
            if b != cut:
                continue
        elif cnt == 0:
            continue
        at_end = b >= bmax
        if at_end and n_miss == 0:
            continue
        best_gain, best_b, best_ml, l0, l1, l2, l3, l4, l5, l6, l7 = _score_point8(
            b, at_end, nL, WL, l0, l1, l2, l3, l4, l5, l6, l7, ns, MS, Wm, n_miss, W, S, m,
            parent, min_samples_leaf, best_gain, best_b, best_ml)
    return best_gain, best_b, best_ml


@njit(cache=True)
def _largest_partition_gain(rows, d0, ns, w, wy, W, S, m, parent, min_samples_leaf, LS):
    """Largest gain over every split of a small node into two sides, up to rounding.

    The node's ``ns`` samples (rows ``rows[d0:d0 + ns]``, at most 63) are
    split into a left side ``L`` and its complement in every way that leaves
    ``min_samples_leaf`` samples on both sides, whatever the features: the
    sides ``L`` without the last sample are visited in Gray-code order (one
    sample added or removed per step) and the gain is symmetric in its sides.
    The sums are formed in another order than a feature's scan forms them, so
    a scan's gain of the same split may differ by rounding, of the order of
    ``ns`` float64 epsilons of ``sum(w ||y||^2)`` (each term of the gain is at
    most that, by Cauchy-Schwarz). Returns +inf (no bound) when a left side
    has no positive weight. ``LS`` is scratch.
    """
    mp = wy.shape[1]
    for c in range(mp):
        LS[c] = 0.0
    WL = 0.0
    size = 0
    previous = 0
    best = -np.inf
    for i in range(1, 1 << (ns - 1)):
        gray = i ^ (i >> 1)
        flip = gray ^ previous
        previous = gray
        r = rows[d0 + np.int64(_count_trailing_zeros(np.uint64(flip)))]
        if gray & flip:
            WL += w[r]
            size += 1
            for c in range(mp):
                LS[c] += wy[r, c]
        else:
            WL -= w[r]
            size -= 1
            for c in range(mp):
                LS[c] -= wy[r, c]
        if size < min_samples_leaf or ns - size < min_samples_leaf:
            continue
        if not WL > 0.0:
            return np.inf
        g = _gain(WL, LS, W, S, m, parent)
        if g > best:
            best = g
    return best


@njit(inline="always", cache=True)
def _tie_pick(cand_g, found, tol):
    """The candidate the tie rule picks: the first whose gain is within ``tol`` of the best.

    -1 when every gain is -inf (no valid split).
    """
    gmax = -np.inf
    for j in range(found):
        if cand_g[j] > gmax:
            gmax = cand_g[j]
    if gmax == -np.inf:
        return -1
    floor = gmax - tol
    for j in range(found):
        if cand_g[j] >= floor:
            return j
    return -1


@njit(inline="always", cache=True)
def _node_codes_of(f, cols, c0ff, ns, edge_values, edge_ptr, use_columns, col_ptr, col_rows,
                   col_codes, slot_of_row, out):
    """``out[a]`` = the code of feature ``f`` of row ``cols[c0ff + a]``, ``a < ns``, for a
    sparse X held without its dense codes: its column's stored entries (increasing rows,
    codes other than the feature's code of 0.0) over that code.

    With ``use_columns`` (the node's rows claimed in ``slot_of_row``) and a column of at
    most 8 entries per sample of the node, the column is scanned once; otherwise each
    row is found by binary search in the column.
    """
    zero = _zero_code(edge_values, edge_ptr, f)
    e0 = col_ptr[f]
    e1 = col_ptr[f + 1]
    if use_columns and e1 - e0 <= 8 * ns:
        for a in range(ns):
            out[a] = zero
        for e in range(e0, e1):
            slot = slot_of_row[col_rows[e]]
            if slot >= 0:
                out[slot] = col_codes[e]
        return
    column = col_rows[e0:e1]
    for a in range(ns):
        r = cols[c0ff + a]
        at = _count_below(column, e1 - e0, r)
        out[a] = col_codes[e0 + at] if at < e1 - e0 and column[at] == r else zero


@njit(cache=True)
def _sum_and_square(total, squares, wy, y):
    """One sample's channel added to a node's sum (``w y``) and sum of ``w y^2``."""
    return total + wy, squares + wy * y


@njit(inline="always", cache=True)
def _node_totals8(rows, d0, ns, w, wy, y, S, LS):
    """A node's weight (returned), sums ``S[c]`` and ``LS[c] = sum w y_c^2`` (8 channels).

    Each sum runs over the node's positions in order, in its own register:
    sixteen independent chains, where one sum of ``w ||y||^2`` over samples
    and channels was a single chain of ``8 ns`` dependent additions
    (delicious-shaped 30-tree forest, one thread, alternating processes:
    2.04 -> 1.91 s of CPU time, medians; text-like forests unchanged). The
    CUDA twin sums the same channels in the same order, and ``Q`` adds them
    in channel order.
    """
    W = 0.0
    s0 = s1 = s2 = s3 = s4 = s5 = s6 = s7 = 0.0
    q0 = q1 = q2 = q3 = q4 = q5 = q6 = q7 = 0.0
    for a in range(d0, d0 + ns):
        ra = rows[a]
        W += w[ra]
        s0, q0 = _sum_and_square(s0, q0, wy[ra, 0], y[ra, 0])
        s1, q1 = _sum_and_square(s1, q1, wy[ra, 1], y[ra, 1])
        s2, q2 = _sum_and_square(s2, q2, wy[ra, 2], y[ra, 2])
        s3, q3 = _sum_and_square(s3, q3, wy[ra, 3], y[ra, 3])
        s4, q4 = _sum_and_square(s4, q4, wy[ra, 4], y[ra, 4])
        s5, q5 = _sum_and_square(s5, q5, wy[ra, 5], y[ra, 5])
        s6, q6 = _sum_and_square(s6, q6, wy[ra, 6], y[ra, 6])
        s7, q7 = _sum_and_square(s7, q7, wy[ra, 7], y[ra, 7])
    S[0], S[1], S[2], S[3], S[4], S[5], S[6], S[7] = s0, s1, s2, s3, s4, s5, s6, s7
    LS[0], LS[1], LS[2], LS[3], LS[4], LS[5], LS[6], LS[7] = q0, q1, q2, q3, q4, q5, q6, q7
    return W


@njit(cache=True)
def _list_node_features(entry_ptr, entry_features, row_of_col, cols, c0ff, ns, sampled, keys, p,
                        lo_bits, hi_bits, listing):
    """The features of a sparse X's node that can be non-constant, in visiting order.

    A feature without a stored entry in the node's rows has the code of 0.0
    in all of them (the stored entries are those of other codes): it is
    constant, and the visit of its position changes nothing. When the rows
    (global row of column ``c``: ``row_of_col[c]``, or ``c`` when
    ``row_of_col`` is empty) hold at most ``listing.shape[0]`` entries, each
    entry's feature ``f`` is written to ``listing`` as ``(q << 32) | f``,
    ``q`` its position in the node's visiting order (``feature_position_nb``,
    the inverse of the order's permutation; ``q = f`` without sampling),
    sorted and made distinct. Returns their number, or -1 for more entries
    (the order is then walked position by position).
    """
    cap = listing.shape[0]
    identity = row_of_col.shape[0] == 0
    total = 0
    for a in range(ns):
        c = cols[c0ff + a]
        r = c if identity else row_of_col[c]
        total += entry_ptr[r + 1] - entry_ptr[r]
        if total > cap:
            return -1
    k = 0
    for a in range(ns):
        c = cols[c0ff + a]
        r = c if identity else row_of_col[c]
        for e in range(entry_ptr[r], entry_ptr[r + 1]):
            f = np.int64(entry_features[e])
            q = feature_position_nb(keys, f, p, lo_bits, hi_bits) if sampled else f
            listing[k] = (q << 32) | f
            k += 1
    listing[:k].sort()
    n_listed = 0
    for i in range(k):
        if n_listed == 0 or listing[i] != listing[n_listed - 1]:
            listing[n_listed] = listing[i]
            n_listed += 1
    return n_listed


@njit(cache=True)
def _eval_node(
    codes, cols, c0ff, ns, w, wy, y, rows, d0, seed, n_candidates, min_samples_leaf, random_split,
    missing_bin,
    tie_rtol, edge_values, edge_ptr, lo_bits, hi_bits, S, code_buf, order, hist, bin_pos, LS, MS,
    keys, perm,
    cand_f, cand_g, cand_b, cand_ml, link, occupied, m, subtracted_bin, listed, use_columns,
    col_ptr,
    col_rows, col_codes, slot_of_row, node_codes, identity, entry_ptr, entry_features, row_of_col,
    listing,
):
    """Best split of one node; returns (feature, bin, missing_left, gain), feature -1 if none.

    The node's samples are ``cols[c0ff:c0ff + ns]`` (columns of ``codes``) with
    weights ``w[i]``, weighted targets ``wy[i]`` and targets ``y[i]`` for the rows
    ``i`` in ``rows[d0:d0 + ns]``, in the same order (the subtree kernel passes its
    ``cols`` as ``rows``, so that a partition moves the column indices only; the
    small-node kernel gathers each node's data contiguously and passes the
    identity); their columns padded with zeros to a multiple ``mp`` of 8 (so that
    the inner loops vectorise; gains sum the ``m`` real channels only); ``hist`` is
    (n_bins, mp + 2): sums, then weight (column mp) and count (mp + 1).
    Nodes above SORT_LIMIT samples derive the table row of each feature's
    ``subtracted_bin`` (when >= 0) from the node's totals, and so does a
    smaller node for a feature with fewer other codes in all the data
    (``listed``) than the node has samples, instead of sorting the node's
    codes. With ``use_columns`` (a sparse X whose node positions hold
    increasing rows; ``slot_of_row``: each row's position in the node, -1
    outside it) the other rows of such a feature come from its column of
    stored entries (``listed[f]`` entries), with the same sums.
    ``codes`` with no columns (a sparse X held without its dense codes, rows
    ``cols[c0ff + a]``): a feature's codes in the node are gathered from its
    stored-entry column into ``node_codes[0, :ns]`` (:func:`_node_codes_of`) and
    read there through ``identity`` (``identity[a] = a``), the same codes.
    ``entry_ptr``, ``entry_features`` (a sparse X's stored entries by row,
    empty for none) and ``row_of_col`` (the global row of each column of
    ``codes``; empty: the column itself): a node whose rows hold at most
    ``listing.shape[0]`` entries visits only their features, in the order's
    positions (:func:`_list_node_features`), where a walk of the order
    would visit every position (the deep, small nodes of text-like data
    find few non-constant features among thousands), with the same result.
    The first reads of each feature (its entries of ``subtracted_bin``,
    ``listed`` and ``col_ptr``, random accesses into arrays of p entries)
    are prefetched ``META_PREFETCH`` features ahead, and a sparse feature's
    column ``COLUMN_PREFETCH`` ahead (:func:`_prefetch_feature_meta`,
    :func:`_prefetch_column`): Zipf-like text, subtree kernel in one
    process, 20,000 x 20,000: 1.21 -> 1.15 s; 20,000 x 200,000: 3.75 ->
    3.05 s; a 50,000 x 200,000 text-like forest 12.4 -> 9.7 s (means of two
    alternating processes), the same trees. Rules: see ``tree_split_small``.
    """
    # the caller holds every array for the whole call (see gpurpo.tree._borrow)
    (
        codes, cols, w, wy, y, rows, edge_values, edge_ptr, S, code_buf, order, hist, bin_pos, LS,
        MS, keys,
        perm, cand_f, cand_g, cand_b, cand_ml, link, occupied, subtracted_bin, listed, col_ptr,
        col_rows,
        col_codes, slot_of_row, node_codes, identity, entry_ptr, entry_features, row_of_col, listing,
    ) = borrow_all((
        codes, cols, w, wy, y, rows, edge_values, edge_ptr, S, code_buf, order, hist, bin_pos, LS,
        MS, keys,
        perm, cand_f, cand_g, cand_b, cand_ml, link, occupied, subtracted_bin, listed, col_ptr,
        col_rows,
        col_codes, slot_of_row, node_codes, identity, entry_ptr, entry_features, row_of_col, listing,
    ))
    p = codes.shape[0]
    gather = codes.shape[1] == 0
    mp = wy.shape[1]
    cw = mp
    cn = mp + 1
    if ns < 2 or ns < 2 * min_samples_leaf:
        return -1, 0, 0, -np.inf
    pure = True
    r0 = rows[d0]
    for a in range(d0 + 1, d0 + ns):
        ra = rows[a]
        for c in range(mp):
            if y[ra, c] != y[r0, c]:
                pure = False
                break
        if not pure:
            break
    if pure:
        return -1, 0, 0, -np.inf
    # totals: weight, sums S and Q = sum w ||y||^2 by channel (LS holds the channels'
    # sums until Q is formed)
    if mp == 8:
        W = _node_totals8(rows, d0, ns, w, wy, y, S, LS)
    else:
        for c in range(mp):
            S[c] = 0.0
            LS[c] = 0.0
        W = 0.0
        for a in range(d0, d0 + ns):
            ra = rows[a]
            W += w[ra]
            for c0 in range(0, mp, 8):
                for c in range(c0, c0 + 8):
                    S[c], LS[c] = _sum_and_square(S[c], LS[c], wy[ra, c], y[ra, c])
    Q = 0.0
    for c in range(m):
        Q += LS[c]
    parent = 0.0
    for c in range(m):
        parent += S[c] * S[c]
    parent /= W
    sampled = n_candidates < p
    small = p <= SMALL_P
    if sampled and small:
        small_feature_order_nb(seed, p, perm)
    elif sampled:
        round_keys_nb(seed, keys)
    n_perm = perm.shape[0]
    use_sort = ns <= SORT_LIMIT
    # Visiting rule (scikit-learn's): the first n_candidates positions of the order,
    # constant features included, then further positions only until a first
    # non-constant feature is found. Two samples: every split that separates them has
    # the same gain (up to rounding, far below the tie tolerance tie_rtol * Q), so the
    # tie rule picks the first separating feature visited and the others need not be
    # evaluated.
    need = 1 if ns == 2 else n_candidates
    # Three to SUBSET_LIMIT samples: no feature's gain exceeds U = (the largest over all
    # partitions) + tol / 2, tol = tie_rtol * Q (rounding is some 1e-15 Q, tol 1e-5 Q).
    # Once the candidate the tie rule picks has a gain of at least U - tol, it is picked
    # whatever the later features give (the best can only rise to U, the tie window's
    # floor to U - tol, and the candidates before it are below the floor already), so the
    # loop stops there with the same result as evaluating every candidate.
    tol = tie_rtol * Q
    settled = np.inf
    if 3 <= ns and ns <= SUBSET_LIMIT and not random_split:
        settled = _largest_partition_gain(
            rows, d0, ns, w, wy, W, S, m, parent, min_samples_leaf, LS) - 0.5 * tol
    # nodes that may stop after a few features draw their candidates a few at a time
    batch_cap = n_perm if settled == np.inf else 8
    n_listed = -1
    if entry_ptr.shape[0] > 0 and not (sampled and small):
        n_listed = _list_node_features(entry_ptr, entry_features, row_of_col, cols, c0ff, ns,
                                       sampled, keys, p, lo_bits, hi_bits, listing)
    found = 0
    pos = np.int64(0)  # not a literal: the calls taking it would be compiled twice
    slot = 0
    n_batch = 0
    at = 0
    while found < need:
        if n_listed >= 0:
            # the next listed feature; the positions between hold constant features
            if at == n_listed:
                break
            q = listing[at] >> 32
            if not (q < n_candidates or found == 0):
                break
            f = listing[at] & 0xFFFFFFFF
            if at + META_PREFETCH < n_listed:
                ahead = listing[at + META_PREFETCH] & 0xFFFFFFFF
                _prefetch_feature_meta(ahead, subtracted_bin, listed, col_ptr)
            at += 1
            u = uniform_at_nb(seed, q) if random_split else 0.0
        elif not (pos < p and (pos < n_candidates or found == 0)):
            break
        elif sampled and small:
            f = perm[pos]
        elif sampled:
            # the visiting order in batches (independent hash chains overlap in the
            # CPU) of the positions still to visit
            if slot == n_batch:
                n_batch = min(batch_cap, p - pos)
                if pos < n_candidates:
                    n_batch = min(n_batch, n_candidates - pos)
                feature_batch_nb(keys, pos, n_batch, p, lo_bits, hi_bits, perm)
                # the features' first reads are random accesses into arrays of p
                # entries (and their columns): requested a few features ahead
                for j in range(min(n_batch, META_PREFETCH)):
                    _prefetch_feature_meta(perm[j], subtracted_bin, listed, col_ptr)
                slot = 0
            f = perm[slot]
            if slot + META_PREFETCH < n_batch:
                _prefetch_feature_meta(perm[slot + META_PREFETCH], subtracted_bin, listed,
                                       col_ptr)
            if slot + COLUMN_PREFETCH < n_batch:
                _prefetch_column(perm[slot + COLUMN_PREFETCH], col_ptr, col_rows, col_codes)
            slot += 1
        else:
            f = pos
        if n_listed < 0:
            u = uniform_at_nb(seed, pos) if random_split else 0.0
            pos += 1
        # ---- per-feature statistics: missing part and occupied range
        # marked: a sparse feature's table bins are marked in ``occupied``, and only
        # they are visited afterwards
        marked = False
        Wm = 0.0
        n_miss = 0
        for c in range(mp):
            MS[c] = 0.0
        z = np.int64(subtracted_bin[f])
        # a feature with fewer codes other than its subtracted bin (in all the data) than
        # the node has samples takes the table path at every node size: sorting would
        # cost the node's samples times its channels, for the few codes of other bins
        # (a sparse X reads them from the feature's column of stored entries)
        short = z >= 0 and listed[f] < ns
        columns = short and use_columns
        sort_f = use_sort and not short
        # where the node's codes of f are read: the codes, or a gathered copy
        src = codes
        src_f = f
        src_cols = cols
        src_c0 = c0ff
        if gather and not columns:
            _node_codes_of(f, cols, c0ff, ns, edge_values, edge_ptr, use_columns, col_ptr, col_rows,
                           col_codes, slot_of_row, node_codes[0])
            src = node_codes
            src_f = 0
            src_cols = identity
            src_c0 = 0
        if sort_f:
            # constant features (common for sparse or discrete inputs) skip the sort
            c_first = src[src_f, src_cols[src_c0]]
            constant = True
            for a in range(1, ns):
                if src[src_f, src_cols[src_c0 + a]] != c_first:
                    constant = False
                    break
            if constant:
                continue
            if ns <= RANK_LIMIT:
                # (code, position) pairs packed in one integer are distinct; each one's
                # rank is the number of smaller keys (a branch-free loop that
                # vectorises, where an insertion sort mispredicts once per sample)
                for a in range(ns):
                    order[a] = (np.int64(src[src_f, src_cols[src_c0 + a]]) << 20) | a
                for a in range(ns):
                    key = order[a]
                    rank = 0
                    for z in range(ns):
                        rank += np.int64(order[z] < key)
                    code_buf[rank] = key
                for a in range(ns):
                    order[a] = code_buf[a] & 0xFFFFF
                    code_buf[a] = code_buf[a] >> 20
            else:
                # stable bucket sort: one list per bin in position order (heads in
                # bin_pos as position + 1, 0 = empty, left zeroed), the occupied bins
                # marked in a bit set and visited in increasing order, so that the
                # 255-bin range is never scanned
                for a in range(ns - 1, -1, -1):
                    b = np.int64(src[src_f, src_cols[src_c0 + a]])
                    link[a] = bin_pos[b]
                    bin_pos[b] = a + 1
                    _mark(occupied, b)
                k = 0
                word, bits = -1, np.uint64(0)
                while True:
                    b, word, bits = _next_marked(occupied, word, bits, True)
                    if b < 0:
                        break
                    e = bin_pos[b]
                    bin_pos[b] = 0
                    while e != 0:
                        order[k] = e - 1
                        code_buf[k] = b
                        k += 1
                        e = link[e - 1]
            nn = ns
            while nn > 0 and code_buf[nn - 1] == missing_bin:
                nn -= 1
            for a in range(nn, ns):
                idx = rows[d0 + order[a]]
                Wm += w[idx]
                for c0 in range(0, mp, 8):
                    for c in range(c0, c0 + 8):
                        MS[c] += wy[idx, c]
            n_miss = ns - nn
            bmin = code_buf[0] if nn > 0 else missing_bin
            bmax = code_buf[nn - 1] if nn > 0 else missing_bin
        else:
            n_z = 0
            if columns:
                marked = mp == 8 and not random_split
                bmin, bmax, n_in_node = _fill_table_columns(
                    col_ptr, col_rows, col_codes, f, slot_of_row, rows, d0, w, wy, hist,
                    missing_bin, marked, occupied)
                n_z = ns - n_in_node
            elif z < 0 and mp == 8:
                bmin, bmax = _fill_table8(src, src_f, src_cols, src_c0, ns, rows, d0, w, wy,
                                          hist, missing_bin)
            else:
                bmin, bmax, n_z = _fill_table_skipping(src, src_f, src_cols, src_c0, ns, rows, d0,
                                                       w, wy, hist, missing_bin, z)
            if n_z > 0:
                if marked:
                    _derive_occupied8(hist, occupied, z, n_z, S, W)
                else:
                    _derive_subtracted_bin(hist, z, n_z, bmin, bmax, missing_bin, S, W)
                bmin = min(bmin, z)
                bmax = max(bmax, z)
            n_miss = np.int64(hist[missing_bin, cn])
            Wm = hist[missing_bin, cw]
            for c in range(mp):
                MS[c] = hist[missing_bin, c]
            for c in range(mp + 2):
                hist[missing_bin, c] = 0.0
            if marked:
                _unmark(occupied, missing_bin)
            nn = ns - n_miss
            if (nn == 0) or (bmin == bmax and n_miss == 0):
                if marked:
                    _clear_occupied(hist, occupied)
                else:
                    for b in range(bmin, bmax + 1):
                        for c in range(mp + 2):
                            hist[b, c] = 0.0
                continue
        found += 1
        best_gain = -np.inf
        best_b = 0
        best_ml = 0
        cut = -1
        if random_split:
            cut = _random_cut(edge_values, edge_ptr, f, bmin, bmax, u)
        # ---- scan the split points "code <= b" of this feature
        if marked:
            best_gain, best_b, best_ml = _scan_occupied8(
                hist, occupied, bmax, ns, MS, Wm, n_miss, W, S, m, parent, min_samples_leaf)
        elif not sort_f and mp == 8:
            best_gain, best_b, best_ml = _scan_table8(
                hist, bmin, bmax, ns, MS, Wm, n_miss, W, S, m, parent, min_samples_leaf,
                random_split, cut,
            )
        elif sort_f and mp == 8:
            best_gain, best_b, best_ml = _scan_sorted8(
                order, code_buf, nn, ns, rows, d0, w, wy, MS, Wm, n_miss, bmax, W, S, m, parent,
                min_samples_leaf, random_split, cut,
            )
        else:
            WL = 0.0
            nL = 0
            for c in range(mp):
                LS[c] = 0.0
            a_first = 0 if sort_f else bmin
            a_last = nn - 1 if sort_f else bmax
            for a in range(a_first, a_last + 1):
                if sort_f:
                    idx = rows[d0 + order[a]]
                    b = code_buf[a]
                    WL += w[idx]
                    nL += 1
                    for c0 in range(0, mp, 8):
                        for c in range(c0, c0 + 8):
                            LS[c] += wy[idx, c]
                    next_code = code_buf[a + 1] if a < nn - 1 else bmax + 1
                    if next_code == b:
                        continue
                    if random_split:
                        if not (b <= cut and cut < next_code):
                            continue
                        b = cut
                else:
                    b = a
                    cnt = np.int64(hist[b, cn])
                    if cnt > 0:
                        WL += hist[b, cw]
                        nL += cnt
                        for c0 in range(0, mp, 8):
                            for c in range(c0, c0 + 8):
                                LS[c] += hist[b, c]
                                hist[b, c] = 0.0
                        hist[b, cw] = 0.0
                        hist[b, cn] = 0.0
                    if random_split:
                        if b != cut:
                            continue
                    elif cnt == 0:
                        continue
                at_end = b >= bmax
                if at_end and n_miss == 0:
                    continue
                # missing values to the right
                if nL >= min_samples_leaf and ns - nL >= min_samples_leaf:
                    g = _gain(WL, LS, W, S, m, parent)
                    best_gain, best_b, best_ml = _keep_better(
                        g, b, _missing_right_flag(WL, W, n_miss), best_gain, best_b, best_ml)
                # missing values to the left
                if n_miss > 0 and not at_end:
                    nLm = nL + n_miss
                    if nLm >= min_samples_leaf and ns - nLm >= min_samples_leaf:
                        for c in range(mp):
                            LS[c] += MS[c]
                        g = _gain(WL + Wm, LS, W, S, m, parent)
                        for c in range(mp):
                            LS[c] -= MS[c]
                        best_gain, best_b, best_ml = _keep_better(
                            g, b, 1, best_gain, best_b, best_ml)
        cand_f[found - 1] = f
        cand_g[found - 1] = best_gain
        cand_b[found - 1] = best_b
        cand_ml[found - 1] = best_ml
        if best_gain >= settled:
            pick = _tie_pick(cand_g, found, tol)
            if pick >= 0 and cand_g[pick] >= settled:
                break
    # ties across features: gains within tie_rtol * Q of the best, the first visited wins
    pick = _tie_pick(cand_g, found, tol)
    if pick < 0:
        return -1, 0, 0, -np.inf
    return cand_f[pick], cand_b[pick], cand_ml[pick], cand_g[pick]


@njit(inline="always", cache=True)
def _sq_norm(a, m):
    # channels 1..m, summed in channel order (the order of the NumPy reference)
    s = a[1] * a[1]
    for c in range(2, m + 1):
        s += a[c] * a[c]
    return s


@njit(inline="always", cache=True)
def _gain_from_sums(L, T, m, parent):
    # ||L||^2 / W_L + ||T - L||^2 / W_R - parent, empty sides divided by 1
    wl = L[0]
    wr = T[0] - L[0]
    sl = L[1] * L[1]
    r = T[1] - L[1]
    sr = r * r
    for c in range(2, m + 1):
        sl += L[c] * L[c]
        r = T[c] - L[c]
        sr += r * r
    return sl / _side_weight(wl) + sr / _side_weight(wr) - parent


@njit(inline="always", cache=True)
def _newton_term(g, h, lam, mcw):
    # G^2 / (H + lam) of one output on one side, 0 where the output does not count
    # (H < mcw or no positive denominator: 0 / 1); the selects act on the operands, so
    # that loops over bins have no branch around the division and vectorise
    den = h + lam
    ok = (h >= mcw) & (den > 0)
    return (g * g if ok else 0.0) / (den if ok else 1.0)


@njit(inline="always", cache=True)
def _newton_score(a, q, lam, mcw):
    # sum over j = 1..q of the terms of G_j = a[j], H_j = a[q + j], in output order
    s = 0.0
    for j in range(1, q + 1):
        s += _newton_term(a[j], a[q + j], lam, mcw)
    return s


@njit(inline="always", cache=True)
def _newton_gain_from_sums(L, T, q, lam, mcw, parent):
    # Newton score of L plus that of T - L, minus the parent's, in output order
    sl = 0.0
    sr = 0.0
    for j in range(1, q + 1):
        sl += _newton_term(L[j], L[q + j], lam, mcw)
        sr += _newton_term(T[j] - L[j], T[q + j] - L[q + j], lam, mcw)
    return sl + sr - parent


@njit(inline="always", cache=True)
def _parent_score(tot, m, newton, lam, mcw):
    # the node's own score, subtracted from every gain
    if newton:
        return _newton_score(tot, m // 2, lam, mcw)
    w_total = tot[0]
    return _sq_norm(tot, m) / _side_weight(w_total)


@njit(inline="always", cache=True)
def _slot_gain(L, T, m, parent, newton, lam, mcw):
    if newton:
        return _newton_gain_from_sums(L, T, m // 2, lam, mcw, parent)
    return _gain_from_sums(L, T, m, parent)


@njit(cache=True)
def _prefix_at_occupied(h, cnt, tot, Lt, occ):
    # Running sums of every channel over the value bins in increasing order (float64),
    # stored channel-major at each occupied bin: Lt[c, i] = sum of h[0..occ[i], c].
    # tot gets the sums over all value bins (the missing bin is added by the caller).
    # Returns the number of occupied bins.
    n_channels = h.shape[1]
    nvb = h.shape[0] - 1
    for c in range(n_channels):
        tot[c] = 0.0
    n_occ = 0
    for b in range(nvb):
        for c in range(n_channels):
            tot[c] += np.float64(h[b, c])
        if h[b, cnt] > 0:
            for c in range(n_channels):
                Lt[c, n_occ] = tot[c]
            occ[n_occ] = b
            n_occ += 1
    return n_occ


@njit(cache=True)
def _variance_sides(Lt, tot, hm, with_missing, n_occ, m, sl, sr):
    # sl[i] = ||L_i||^2, sr[i] = ||T - L_i||^2 over channels 1..m in order, vectorised
    # over the occupied bins i; L_i gets the missing bin hm added when with_missing
    for i in range(n_occ):
        sl[i] = 0.0
        sr[i] = 0.0
    for c in range(1, m + 1):
        t = tot[c]
        row = Lt[c]
        if with_missing:
            extra = np.float64(hm[c])
            for i in range(n_occ):
                lv = row[i] + extra
                r = t - lv
                sl[i] += lv * lv
                sr[i] += r * r
        else:
            for i in range(n_occ):
                lv = row[i]
                r = t - lv
                sl[i] += lv * lv
                sr[i] += r * r


@njit(cache=True)
def _newton_sides(Lt, tot, hm, with_missing, n_occ, q, lam, mcw, sl, sr):
    # sl[i], sr[i]: second-order scores (_newton_score) of L_i and T - L_i, outputs in
    # order, vectorised over the occupied bins i; L_i gets the missing bin hm added when
    # with_missing
    for i in range(n_occ):
        sl[i] = 0.0
        sr[i] = 0.0
    for j in range(1, q + 1):
        tg = tot[j]
        th = tot[q + j]
        rg = Lt[j]
        rh = Lt[q + j]
        if with_missing:
            eg = np.float64(hm[j])
            eh = np.float64(hm[q + j])
            for i in range(n_occ):
                gl = rg[i] + eg
                hl = rh[i] + eh
                sl[i] += _newton_term(gl, hl, lam, mcw)
                sr[i] += _newton_term(tg - gl, th - hl, lam, mcw)
        else:
            for i in range(n_occ):
                gl = rg[i]
                hl = rh[i]
                sl[i] += _newton_term(gl, hl, lam, mcw)
                sr[i] += _newton_term(tg - gl, th - hl, lam, mcw)


@njit(cache=True)
def _score_slot_best(h, f, m, cnt, msl, tot, Lt, occ, sl, sr, slm, srm, newton, lam, mcw):
    # The best split of one (node, slot) over all bins ("best" splitter; the rules of
    # tree_score_histograms), with the side scores of all occupied bins computed in vector loops
    # (the same operations per bin, hence the same gains bit for bit).
    nvb = h.shape[0] - 1
    n_channels = h.shape[1]
    n_occ = _prefix_at_occupied(h, cnt, tot, Lt, occ)
    hm = h[nvb]
    for c in range(n_channels):
        tot[c] += np.float64(hm[c])
    any_value = n_occ > 0
    bmax = occ[n_occ - 1] if any_value else nvb - 1
    n_miss = np.float64(hm[cnt])
    has_miss = n_miss > 0
    n_total = tot[cnt]
    nonconstant = f >= 0 and n_occ + (1 if has_miss else 0) >= 2
    w_total = tot[0]
    q = m // 2
    parent = _parent_score(tot, m, newton, lam, mcw)
    if newton:
        _newton_sides(Lt, tot, hm, False, n_occ, q, lam, mcw, sl, sr)
        if has_miss:
            _newton_sides(Lt, tot, hm, True, n_occ, q, lam, mcw, slm, srm)
    else:
        _variance_sides(Lt, tot, hm, False, n_occ, m, sl, sr)
        if has_miss:
            _variance_sides(Lt, tot, hm, True, n_occ, m, slm, srm)
    best = -np.inf
    best_bin = 0
    direction = 0
    w_left = np.float64(h[0, 0])
    for i in range(n_occ):
        b = occ[i]
        n_left = Lt[cnt, i]
        wl = Lt[0, i]
        below_max = b < bmax
        if (below_max or has_miss) and n_left >= msl and n_total - n_left >= msl:
            if newton:
                g = sl[i] + sr[i] - parent
            else:
                wr = w_total - wl
                g = sl[i] / _side_weight(wl) + sr[i] / _side_weight(wr) - parent
            if g > best:
                best = g
                best_bin = b
                direction = 0
                w_left = wl
        if has_miss and below_max:
            n_left_m = n_left + n_miss
            if n_left_m >= msl and n_total - n_left_m >= msl:
                if newton:
                    g = slm[i] + srm[i] - parent
                else:
                    wlm = wl + np.float64(hm[0])
                    wrm = w_total - wlm
                    g = (slm[i] / _side_weight(wlm) + srm[i] / _side_weight(wrm)
                         - parent)
                if g > best:
                    best = g
                    best_bin = b
                    direction = 1
                    w_left = wl
    gain = best if (nonconstant and any_value) else -np.inf
    if has_miss:
        missing_left = direction
    else:
        missing_left = 1 if w_left >= w_total - w_left else 0
    return gain, best_bin, missing_left, nonconstant


@njit(cache=True)
def _score_slot_random(h, f, m, cnt, msl, u, edge_values, edge_ptr, tot, left, left_m, newton,
                       lam, mcw):
    # One (node, slot) of the Extra-Trees splitter: the cut drawn from u, scored with
    # missing values on either side; returns (gain, bin, missing_left, nonconstant), see
    # tree_score_histograms (the "best" splitter is _score_slot_best).
    n_channels = h.shape[1]
    nvb = h.shape[0] - 1
    for c in range(n_channels):
        tot[c] = 0.0
    bmin = -1
    bmax = -1
    n_occupied = 0
    for b in range(nvb):
        for c in range(n_channels):
            tot[c] += np.float64(h[b, c])
        if h[b, cnt] > 0:
            if bmin < 0:
                bmin = b
            bmax = b
            n_occupied += 1
    any_value = bmin >= 0
    if not any_value:
        bmin = 0
        bmax = nvb - 1
    n_miss = np.float64(h[nvb, cnt])
    has_miss = n_miss > 0
    for c in range(n_channels):
        tot[c] += np.float64(h[nvb, c])
    n_total = tot[cnt]
    nonconstant = f >= 0 and n_occupied + (1 if has_miss else 0) >= 2
    w_total = tot[0]
    parent = _parent_score(tot, m, newton, lam, mcw)
    neg_inf = -np.inf
    for c in range(n_channels):
        left[c] = 0.0
    row = f if f >= 0 else 0
    lo = 0.0
    hi = 0.0
    if bmax > bmin:
        lo = _edge(edge_values, edge_ptr, row, bmin)
        hi = _edge(edge_values, edge_ptr, row, max(bmax - 1, 0))
    cut_value = lo + u * (hi - lo)
    if bmax > bmin:
        steps = 0
        for b in range(bmin + 1, bmax):
            if _edge(edge_values, edge_ptr, row, b) <= cut_value:
                steps += 1
        best_bin = bmin + steps
    else:
        best_bin = bmax
    for b in range(best_bin + 1):
        for c in range(n_channels):
            left[c] += np.float64(h[b, c])
    n_left = left[cnt]
    below_max = best_bin < bmax
    gain_right = neg_inf
    if (below_max or has_miss) and n_left >= msl and n_total - n_left >= msl:
        gain_right = _slot_gain(left, tot, m, parent, newton, lam, mcw)
    gain_left = neg_inf
    n_left_m = n_left + n_miss
    if has_miss and below_max and n_left_m >= msl and n_total - n_left_m >= msl:
        for c in range(n_channels):
            left_m[c] = left[c] + np.float64(h[nvb, c])
        gain_left = _slot_gain(left_m, tot, m, parent, newton, lam, mcw)
    direction = 1 if gain_left > gain_right else 0
    gain = max(gain_right, gain_left)
    w_left = left[0]
    if not (nonconstant and any_value):
        gain = neg_inf
    if has_miss:
        missing_left = direction
    else:
        missing_left = 1 if w_left >= w_total - w_left else 0
    return gain, best_bin, missing_left, nonconstant


@njit(parallel=True, cache=True)
def score_histograms(
    hist, node_features, n_outputs, min_samples_leaf, random_split, uniforms, edge_values, edge_ptr,
    newton, reg_lambda, min_child_weight, out_gain, out_bin, out_missing_left, out_nonconstant,
):
    n_nodes = hist.shape[0]
    k = hist.shape[1]
    n_channels = hist.shape[3]
    m = n_outputs
    cnt = n_channels - 1 if n_channels == m + 2 else 0
    n_tasks = n_nodes * k
    n_chunks = min(n_tasks, N_CHUNKS)
    nvb = hist.shape[2] - 1
    for ch in prange(n_chunks):
        _score_chunk(
            ch, n_chunks, hist, node_features, m, cnt, min_samples_leaf, random_split, uniforms,
            edge_values, edge_ptr, newton != 0, reg_lambda, min_child_weight, out_gain, out_bin,
            out_missing_left, out_nonconstant,
            (np.empty(n_channels, dtype=np.float64), np.empty(n_channels, dtype=np.float64),
             np.empty(n_channels, dtype=np.float64), np.empty((n_channels, nvb), dtype=np.float64),
             np.empty(nvb, dtype=np.int64), np.empty((4, nvb), dtype=np.float64)),
        )


@njit(cache=True)
def _score_chunk(
    ch, n_chunks, hist, node_features, m, cnt, min_samples_leaf, random_split, uniforms,
    edge_values, edge_ptr, newton, reg_lambda, min_child_weight, out_gain, out_bin,
    out_missing_left, out_nonconstant, scratch,
):
    """The (node, feature) slots ``ch, ch + n_chunks, ...`` of :func:`score_histograms`.

    On views of its arrays that hold no reference (see :mod:`gpurpo.tree._borrow`).
    """
    (
        hist, node_features, uniforms, edge_values, edge_ptr, out_gain, out_bin, out_missing_left,
        out_nonconstant,
    ) = borrow_all((
        hist, node_features, uniforms, edge_values, edge_ptr, out_gain, out_bin, out_missing_left,
        out_nonconstant,
    ))
    tot, left, left_m, Lt, occ, sides = borrow_all(scratch)
    k = hist.shape[1]
    for task in range(ch, hist.shape[0] * k, n_chunks):
        i = task // k
        j = task - i * k
        if random_split:
            g, b, ml, nc = _score_slot_random(
                hist[i, j], node_features[i, j], m, cnt, min_samples_leaf, uniforms[i, j],
                edge_values, edge_ptr, tot, left, left_m, newton, reg_lambda, min_child_weight,
            )
        else:
            g, b, ml, nc = _score_slot_best(
                hist[i, j], node_features[i, j], m, cnt, min_samples_leaf, tot, Lt, occ,
                sides[0], sides[1], sides[2], sides[3], newton, reg_lambda, min_child_weight,
            )
        out_gain[i, j] = g
        out_bin[i, j] = b
        out_missing_left[i, j] = ml
        out_nonconstant[i, j] = 1 if nc else 0


# positions of the visiting order computed at once; holds a whole order of SMALL_P features
PERM_BATCH = max(32, SMALL_P)


@njit(cache=True)
def _eval_scratch(max_ns, mp, n_bins, n_slots, n_listing):
    """Scratch buffers of ``_eval_node`` for nodes of up to ``max_ns`` samples.

    Returns (w, wy, y, S, code_buf, order, hist, bin_pos, LS, MS, keys, perm, cand_f,
    cand_g, cand_b, cand_ml, link, occupied, listing), ``listing`` of
    ``n_listing`` entries (:func:`_list_node_features`); ``wy`` and ``y`` are zeroed
    (their padding channels stay zero), ``hist``, the bucket sort's list heads
    ``bin_pos`` and its bit set ``occupied`` too (``_eval_node`` leaves them
    zeroed); ``link`` holds the bucket sort's list links.
    """
    return (
        np.empty(max_ns, dtype=np.float64),
        np.zeros((max_ns, mp), dtype=np.float64),
        np.zeros((max_ns, mp), dtype=np.float32),
        np.empty(mp, dtype=np.float64),
        np.empty(min(max_ns, SORT_LIMIT), dtype=np.int64),
        np.empty(min(max_ns, SORT_LIMIT), dtype=np.int64),
        np.zeros((n_bins, mp + 2), dtype=np.float64),
        np.zeros(n_bins, dtype=np.int64),
        np.empty(mp, dtype=np.float64),
        np.empty(mp, dtype=np.float64),
        np.empty(N_ROUNDS, dtype=np.uint64),
        np.empty(PERM_BATCH, dtype=np.int64),
        np.empty(n_slots, dtype=np.int64),
        np.empty(n_slots, dtype=np.float64),
        np.empty(n_slots, dtype=np.int64),
        np.empty(n_slots, dtype=np.int64),
        np.empty(min(max_ns, SORT_LIMIT), dtype=np.int64),
        np.zeros((n_bins + 63) // 64, dtype=np.uint64),
        np.empty(n_listing, dtype=np.int64),
    )


@njit(inline="always", cache=True)
def _claim_slots(node_rows, start, ns, allowed, slot_of_row):
    """Whether a node may read the stored-entry columns, and if so its rows' slots.

    The column lists give each bin's samples in row order: the node's position
    order when its rows ``node_rows[start:start + ns]`` increase (the stable
    partitions keep them so), when columns exist (``allowed``): at every node
    size, a feature whose column (``listed``) is shorter than the node takes
    its table from the column (see :func:`_eval_node`). Sets ``slot_of_row[row]`` to the row's
    position in the node; undo with :func:`_release_slots`.
    """
    if not allowed:
        return False
    for a in range(start + 1, start + ns):
        if node_rows[a] <= node_rows[a - 1]:
            return False
    for a in range(ns):
        slot_of_row[node_rows[start + a]] = a
    return True


@njit(inline="always", cache=True)
def _release_slots(node_rows, start, ns, slot_of_row):
    """Reset the slots that :func:`_claim_slots` set (-1: outside the node)."""
    for a in range(start, start + ns):
        slot_of_row[node_rows[a]] = -1


@njit(cache=True)
def _split_chunk(
    ch, n_chunks, max_ns, codes, subtracted_bin, listed, col_ptr, col_rows, col_codes,
    sample_indices,
    node_ranges, node_tree, node_seed, weights, targets, edge_values, edge_ptr, n_candidates,
    min_samples_leaf, random_split, missing_bin, tie_rtol, out_feature, out_bin,
    out_missing_left, out_gain,
):
    """Split the nodes ``ch, ch + n_chunks, ...`` with scratch buffers of this chunk."""
    p = codes.shape[0]
    m = targets.shape[2]
    mp = ((m + 7) // 8) * 8
    n_bins = missing_bin + 1
    n_slots = max(1, min(n_candidates, p))
    identity = np.empty(max_ns, dtype=np.int32)
    for a in range(max_ns):
        identity[a] = a
    # each row's position in the current node, -1 outside it (read with the column lists)
    slot_of_row = np.full(targets.shape[0] if col_ptr.shape[0] > 0 else 1, -1, dtype=np.int32)
    # a node's codes of one feature, gathered from its column when there are no dense codes
    node_codes = np.empty((1, max_ns if codes.shape[1] == 0 else 1), dtype=np.uint8)
    _split_chunk_nodes(
        ch, n_chunks, codes, subtracted_bin, listed, col_ptr, col_rows, col_codes, sample_indices,
        node_ranges, node_tree, node_seed, weights, targets, edge_values, edge_ptr, n_candidates,
        min_samples_leaf, random_split, missing_bin, tie_rtol, out_feature, out_bin,
        out_missing_left, out_gain, identity, slot_of_row, node_codes,
        _eval_scratch(max_ns, mp, n_bins, n_slots, 0),
        # no stored entries by row: nodes walk the visiting order
        np.empty(0, dtype=np.int64), np.empty(0, dtype=np.int32), np.empty(0, dtype=np.int32),
    )


@njit(cache=True)
def _split_chunk_nodes(
    ch, n_chunks, codes, subtracted_bin, listed, col_ptr, col_rows, col_codes, sample_indices,
    node_ranges, node_tree, node_seed, weights, targets, edge_values, edge_ptr, n_candidates,
    min_samples_leaf, random_split, missing_bin, tie_rtol, out_feature, out_bin,
    out_missing_left, out_gain, identity, slot_of_row, node_codes, scratch, entry_ptr,
    entry_features, row_of_col,
):
    """The loop of :func:`_split_chunk` on views of its arrays that hold no reference."""
    (
        codes, subtracted_bin, listed, col_ptr, col_rows, col_codes, sample_indices, node_ranges,
        node_tree, node_seed, weights, targets, edge_values, edge_ptr, out_feature, out_bin,
        out_missing_left, out_gain, identity, slot_of_row, node_codes, entry_ptr, entry_features,
        row_of_col,
    ) = borrow_all((
        codes, subtracted_bin, listed, col_ptr, col_rows, col_codes, sample_indices, node_ranges,
        node_tree, node_seed, weights, targets, edge_values, edge_ptr, out_feature, out_bin,
        out_missing_left, out_gain, identity, slot_of_row, node_codes, entry_ptr, entry_features,
        row_of_col,
    ))
    (w, wy, y, S, code_buf, order, hist, bin_pos, LS, MS, keys, perm,
     cand_f, cand_g, cand_b, cand_ml, link, occupied, listing) = borrow_all(scratch)
    n_nodes = node_ranges.shape[0]
    m = targets.shape[2]
    lo_bits, hi_bits = feistel_params(codes.shape[0])
    zero = np.int64(0)
    for i in range(ch, n_nodes, n_chunks):
        start = node_ranges[i, 0]
        ns = node_ranges[i, 1] - start
        t = node_tree[i]
        for a in range(ns):
            s = sample_indices[start + a]
            wa = np.float64(weights[t, s])
            w[a] = wa
            for c in range(m):
                yv = targets[s, t, c]
                y[a, c] = yv
                wy[a, c] = wa * yv
        use_columns = _claim_slots(sample_indices, start, ns, col_ptr.shape[0] > 0,
                                   slot_of_row)
        f, b, ml, g = _eval_node(
            codes, sample_indices, start, ns, w, wy, y, identity, zero, node_seed[i],
            n_candidates, min_samples_leaf, random_split, missing_bin, tie_rtol, edge_values,
            edge_ptr, lo_bits, hi_bits, S, code_buf, order, hist, bin_pos, LS, MS, keys, perm,
            cand_f, cand_g, cand_b, cand_ml, link, occupied, m, subtracted_bin, listed, use_columns,
            col_ptr, col_rows, col_codes, slot_of_row, node_codes, identity, entry_ptr,
            entry_features, row_of_col, listing,
        )
        if use_columns:
            _release_slots(sample_indices, start, ns, slot_of_row)
        out_feature[i] = f
        out_bin[i] = b
        out_missing_left[i] = ml
        out_gain[i] = g


@njit(parallel=True, cache=True)
def split_small_nodes(
    codes,
    subtracted_bin,
    listed,
    col_ptr,
    col_rows,
    col_codes,
    sample_indices,
    node_ranges,
    node_tree,
    node_seed,
    weights,
    targets,
    edge_values, edge_ptr,
    n_candidates,
    min_samples_leaf,
    random_split,
    missing_bin,
    tie_rtol,
    out_feature,
    out_bin,
    out_missing_left,
    out_gain,
):
    n_nodes = node_ranges.shape[0]
    max_ns = max(np.int64(1), np.int64(np.max(node_ranges[:, 1] - node_ranges[:, 0])))
    # nodes are dealt to a few chunks (strided, for balance); each chunk owns scratch
    # buffers, so nothing is allocated per node
    n_chunks = min(n_nodes, N_CHUNKS)
    for ch in prange(n_chunks):
        _split_chunk(
            np.int64(ch), n_chunks, max_ns, codes, subtracted_bin, listed, col_ptr, col_rows,
            col_codes,
            sample_indices, node_ranges, node_tree, node_seed, weights, targets, edge_values,
            edge_ptr,
            n_candidates, min_samples_leaf, random_split, missing_bin, tie_rtol, out_feature,
            out_bin, out_missing_left, out_gain,
        )


# A subtree kernel's node of at most this many samples (and at least 64) is grown from a
# private copy of its samples' codes, ``p x size`` bytes (cache resident); larger nodes
# are evaluated on the global codes (see grow_subtrees).
SUBTREE_BLOCK_BYTES = 1 << 19
MAX_BLOCK_SAMPLES = 4096


@njit(cache=True)
def _block_limit(p):
    """The largest node grown from a private codes block, for ``p`` features."""
    return min(MAX_BLOCK_SAMPLES, max(64, SUBTREE_BLOCK_BYTES // max(p, 1)))


@njit(cache=True)
def _subtree_chunk(
    ch, n_chunks, max_ns, codes, subtracted_bin, listed, zero_code, row_ptr, row_features,
    row_codes,
    col_ptr, col_rows, col_codes, sample_indices, node_ranges, node_tree, node_seed, node_depth,
    weights, targets, edge_values, edge_ptr, n_candidates, min_samples_leaf, min_samples_split,
    max_depth, min_impurity_decrease, root_weight, random_split, missing_bin, tie_rtol, out_offsets,
    out_count, out_feature, out_bin, out_missing_left, out_gain, out_left, out_right, out_depth,
    out_start, out_stop,
):
    """Grow the subtrees of roots ``ch, ch + n_chunks, ...`` with scratch buffers of this chunk."""
    p = codes.shape[0]
    m = targets.shape[2]
    mp = ((m + 7) // 8) * 8
    n_bins = missing_bin + 1
    n_slots = max(1, min(n_candidates, p))
    max_nb = min(max_ns, _block_limit(p))
    subtree_scratch = (
        np.empty(p * max_nb, dtype=np.uint8),  # a codes block
        np.empty(max_ns, dtype=np.int32),  # the root's samples (global ids)
        np.empty(max_ns, dtype=np.int32),  # positions in node order
        np.empty(max_ns, dtype=np.int32),  # partition buffer
        np.empty(max_ns + 2, dtype=np.int64),  # depth-first stack
        np.empty(2 * max_ns, dtype=np.uint64),  # node seeds
    )
    big = max_ns > max_nb  # roots above the block size: nodes evaluated on the global codes
    sparse_columns = big and col_ptr.shape[0] > 0
    big_scratch = (
        np.empty(max_ns if big else 1, dtype=np.int32),  # a node's samples in position order
        np.empty(max_nb + 2 if big else 1, dtype=np.int64),  # a block's depth-first stack
        np.empty(max_nb if big else 1, dtype=np.int32),  # a block's samples (global ids)
        np.empty(max_nb if big else 1, dtype=np.int32),  # its positions
        # each row's position in the current node, -1 outside it (read with the columns)
        np.full(targets.shape[0] if sparse_columns else 1, -1, dtype=np.int32),
        np.empty(0, dtype=np.int32),  # no row map: a large node's columns are its rows
    )
    # without dense codes (a sparse X), a large node's codes of one feature gathered from
    # its column, by position, read through the identity
    gather_size = max_ns if big and codes.shape[1] == 0 else 1
    node_codes = np.empty((1, gather_size), dtype=np.uint8)
    identity = np.arange(gather_size).astype(np.int32)
    # a sparse X's nodes list their rows' stored entries (at most n_listing)
    n_listing = min(n_slots, LISTING_LIMIT) if row_ptr.shape[0] > 0 else 0
    block_scratch = _eval_scratch(max_nb if big else 1, mp, n_bins, n_slots, n_listing)
    _subtree_chunk_roots(
        ch, n_chunks, codes, subtracted_bin, listed, zero_code, row_ptr, row_features, row_codes,
        col_ptr, col_rows, col_codes, sample_indices, node_ranges, node_tree, node_seed,
        node_depth, weights, targets, edge_values, edge_ptr, n_candidates, min_samples_leaf,
        min_samples_split, max_depth, min_impurity_decrease, root_weight, random_split,
        missing_bin, tie_rtol, out_offsets, out_count, out_feature, out_bin, out_missing_left,
        out_gain, out_left, out_right, out_depth, out_start, out_stop, subtree_scratch,
        big_scratch, _eval_scratch(max_ns, mp, n_bins, n_slots, n_listing), block_scratch,
        node_codes,
        identity,
    )


@njit(cache=True)
def _fill_block(block_buf, block, p, ns, gid, codes, zero_code, row_ptr, row_features,
                row_codes, one_zero_code):
    """``block[f, a] = codes[f, gid[a]]`` (p x ns, feature-major): from the codes, or
    from the samples' stored entries over each feature's code of 0.0 (sparse X).

    With ``one_zero_code`` (every feature's code of 0.0 is ``zero_code[0]``),
    ``block_buf`` must hold that code everywhere (whatever ``ns``, the
    block's layout): only the samples' stored entries are written, and
    :func:`_clean_block` restores the buffer after use. Text-like 50,000 x
    200,000 (blocks of 64 samples are 12.8 MB), this replaced a memset of
    the block per subtree root.
    """
    if row_ptr.shape[0] > 0:
        # each feature's code of 0.0 (already there with one_zero_code), then the
        # samples' stored entries: read instead of p scattered codes per sample
        if not one_zero_code and ns <= 8:
            # a pass over the features per sample: long loops that vectorise, where
            # a loop of ns stores per feature costs about 3 ns per feature
            for a in range(ns):
                for f in range(p):
                    block_buf[f * ns + a] = zero_code[f]
        elif not one_zero_code:
            for f in range(p):
                z = zero_code[f]
                for a in range(ns):
                    block[f, a] = z
        for a in range(ns):
            s = gid[a]
            for e in range(row_ptr[s], row_ptr[s + 1]):
                block[row_features[e], a] = row_codes[e]
    else:
        for f in range(p):
            for a in range(ns):
                block[f, a] = codes[f, gid[a]]


@njit(cache=True)
def _clean_block(block, ns, gid, row_ptr, row_features, z0):
    """Undo :func:`_fill_block`'s stored entries (``one_zero_code``): ``block`` all ``z0`` again."""
    for a in range(ns):
        s = gid[a]
        for e in range(row_ptr[s], row_ptr[s + 1]):
            block[row_features[e], a] = z0


@njit(inline="always", cache=True)
def _clear_node(g, out_feature, out_bin, out_missing_left, out_gain, out_left, out_right):
    out_feature[g] = -1
    out_bin[g] = 0
    out_missing_left[g] = 0
    out_gain[g] = 0.0
    out_left[g] = -1
    out_right[g] = -1


@njit(inline="always", cache=True)
def _add_children(g_j, j, count, base, f, b, ml, gain, a0, nl, a1, depth, seeds, out_feature,
                  out_bin, out_missing_left, out_gain, out_left, out_right, out_depth,
                  out_start, out_stop):
    """Record node ``j``'s split and its children ``count`` (left), ``count + 1``."""
    left = count
    right = count + 1
    out_feature[g_j] = f
    out_bin[g_j] = b
    out_missing_left[g_j] = ml
    out_gain[g_j] = gain
    out_left[g_j] = left
    out_right[g_j] = right
    out_start[base + left] = a0
    out_stop[base + left] = a0 + nl
    out_start[base + right] = a0 + nl
    out_stop[base + right] = a1
    out_depth[base + left] = depth + 1
    out_depth[base + right] = depth + 1
    seeds[left] = child_seed_nb(seeds[j], 0)
    seeds[right] = child_seed_nb(seeds[j], 1)


@njit(inline="always", cache=True)
def _goes_left(code, b, ml, missing_bin):
    """Whether a sample of bin ``code`` goes left at the split "code <= b" (missing
    values left when ``ml == 1``)."""
    if np.int64(code) == missing_bin:
        return ml == 1
    return np.int64(code) <= b


@njit(inline="always", cache=True)
def _partition_positions(codes, columns, cols, cols2, a0, a1, f, b, ml, missing_bin):
    """Stable partition of the positions ``a0 .. a1 - 1`` of ``cols`` (left child first)
    by the split (f, b, ml) of the codes ``codes[f, columns[a]]``; ``cols2`` is the
    buffer. Returns the number of positions that go left."""
    nl = 0
    for a in range(a0, a1):
        if _goes_left(codes[f, columns[a]], b, ml, missing_bin):
            nl += 1
    il = a0
    ir = a0 + nl
    for a in range(a0, a1):
        if _goes_left(codes[f, columns[a]], b, ml, missing_bin):
            cols2[il] = cols[a]
            il += 1
        else:
            cols2[ir] = cols[a]
            ir += 1
    for a in range(a0, a1):
        cols[a] = cols2[a]
    return nl


@njit(cache=True)
def _grow_in_block(
    block, cols, cols2, stack, seeds, w, wy, y, j_root, count, base, pos0, t, n_candidates,
    min_samples_leaf, min_samples_split, max_depth, min_impurity_decrease, root_weight,
    random_split, missing_bin, tie_rtol, edge_values, edge_ptr, lo_bits, hi_bits, m,
    subtracted_bin, listed,
    row_ptr, row_features, row_codes, node_codes, identity, scratch, out_feature, out_bin,
    out_missing_left, out_gain, out_left, out_right, out_depth, out_start, out_stop, row_of_col,
):
    """Grow node ``j_root`` (local id; its samples the block's columns ``0 .. ns - 1``,
    at the root's positions ``pos0 ..``) to completion, depth first, in the block.

    ``cols`` starts as the identity and ends in the final order of the samples
    (leaves left to right); their data are ``w[cols[a]]``, ``wy[cols[a]]``,
    ``y[cols[a]]``. New nodes take the local ids ``count, count + 1, ...``; the
    node ``j_root``'s start, stop, depth and seed are set by the caller.
    ``row_of_col``: the global row of each column of the block (a sparse X's
    nodes read their rows' stored entries, see :func:`_eval_node`).
    Returns the next free local id.
    """
    (w_s, wy_s, y_s, S, code_buf, order, hist, bin_pos, LS, MS, keys, perm,
     cand_f, cand_g, cand_b, cand_ml, link, occupied, listing) = borrow_all(scratch)
    eps = np.finfo(np.float64).eps
    # False, typed as a run-time flag like the small-node kernel's (a literal False
    # would compile a second specialisation of _eval_node)
    no_columns = row_ptr.shape[0] < 0
    stack[0] = j_root
    sp = 1
    while sp > 0:
        sp -= 1
        j = stack[sp]
        g_j = base + j
        a0 = out_start[g_j] - pos0
        a1 = out_stop[g_j] - pos0
        nsj = a1 - a0
        depth = out_depth[g_j]
        _clear_node(g_j, out_feature, out_bin, out_missing_left, out_gain, out_left, out_right)
        if (max_depth >= 0 and depth >= max_depth) or nsj < min_samples_split:
            continue
        f, b, ml, g = _eval_node(
            block, cols, a0, nsj, w, wy, y, cols, a0, seeds[j],
            n_candidates, min_samples_leaf, random_split, missing_bin, tie_rtol,
            edge_values, edge_ptr, lo_bits, hi_bits, S, code_buf, order, hist, bin_pos, LS, MS,
            keys, perm,
            cand_f, cand_g, cand_b, cand_ml, link, occupied, m, subtracted_bin, listed, no_columns,
            # no stored-entry columns here: arrays of the columns' types, never read
            row_ptr, row_features, row_codes, cols, node_codes, identity,
            row_ptr, row_features, row_of_col, listing,
        )
        if f < 0 or g / (m * root_weight[t]) + eps < min_impurity_decrease:
            continue
        nl = _partition_positions(block, cols, cols, cols2, a0, a1, f, b, ml, missing_bin)
        _add_children(g_j, j, count, base, f, b, ml, g, pos0 + a0, nl, pos0 + a1, depth, seeds,
                      out_feature, out_bin, out_missing_left, out_gain, out_left, out_right,
                      out_depth, out_start, out_stop)
        stack[sp] = count + 1
        stack[sp + 1] = count
        sp += 2
        count += 2
    return count


@njit(cache=True)
def _subtree_chunk_roots(
    ch, n_chunks, codes, subtracted_bin, listed, zero_code, row_ptr, row_features, row_codes,
    col_ptr, col_rows, col_codes, sample_indices, node_ranges, node_tree, node_seed,
    node_depth, weights, targets, edge_values, edge_ptr, n_candidates, min_samples_leaf,
    min_samples_split,
    max_depth, min_impurity_decrease, root_weight, random_split, missing_bin, tie_rtol,
    out_offsets, out_count, out_feature, out_bin, out_missing_left, out_gain, out_left,
    out_right, out_depth, out_start, out_stop, subtree_scratch, big_scratch, scratch,
    block_scratch, node_codes, identity,
):
    """The loop of :func:`_subtree_chunk` on views of its arrays that hold no reference.

    A root of at most ``_block_limit(p)`` samples is grown in a codes block of
    its samples (:func:`_grow_in_block`). A larger root is grown depth first
    on the global codes, as the small-node kernel evaluates its nodes (with
    the stored-entry columns of a sparse X, where its rows increase) from the
    root's gathered data, until a node fits a block: that node's samples are
    gathered again into the block and grown there. Without dense codes
    (``codes`` with no columns: a sparse X), a large node reads each feature's
    codes gathered from its stored-entry column into ``node_codes`` (see
    :func:`_eval_node`), and so does its partition.
    """
    (
        codes, subtracted_bin, listed, zero_code, row_ptr, row_features, row_codes, col_ptr,
        col_rows,
        col_codes, sample_indices, node_ranges, node_tree, node_seed, node_depth, weights,
        targets, edge_values, edge_ptr, root_weight, out_offsets, out_count, out_feature, out_bin,
        out_missing_left, out_gain, out_left, out_right, out_depth, out_start, out_stop,
    ) = borrow_all((
        codes, subtracted_bin, listed, zero_code, row_ptr, row_features, row_codes, col_ptr,
        col_rows,
        col_codes, sample_indices, node_ranges, node_tree, node_seed, node_depth, weights,
        targets, edge_values, edge_ptr, root_weight, out_offsets, out_count, out_feature, out_bin,
        out_missing_left, out_gain, out_left, out_right, out_depth, out_start, out_stop,
    ))
    node_codes, identity = borrow_all((node_codes, identity))
    gather = codes.shape[1] == 0
    sparse_rows = row_ptr.shape[0] > 0
    block_buf, gid, cols, cols2, stack, seeds = borrow_all(subtree_scratch)
    node_rows, block_stack, block_gid, block_cols = borrow_all(big_scratch[:4])
    slot_of_row = borrow(big_scratch[4])
    columns_are_rows = borrow(big_scratch[5])
    (w, wy, y, S, code_buf, order, hist, bin_pos, LS, MS, keys, perm,
     cand_f, cand_g, cand_b, cand_ml, link, occupied, listing) = borrow_all(scratch)
    w_b, wy_b, y_b = borrow_all(block_scratch[:3])
    n_roots = node_ranges.shape[0]
    p = codes.shape[0]
    m = targets.shape[2]
    limit = _block_limit(p)
    lo_bits, hi_bits = feistel_params(p)
    eps = np.finfo(np.float64).eps
    use_slots = slot_of_row.shape[0] == targets.shape[0]
    # one code of 0.0 for every feature (all of a nonnegative X's): a block starts as
    # one fill of memory
    one_zero_code = sparse_rows
    for f in range(1, p if sparse_rows else 0):
        if zero_code[f] != zero_code[0]:
            one_zero_code = False
            break
    if one_zero_code:
        # the blocks' clean state (_fill_block, _clean_block): one fill per call
        z0 = zero_code[0]
        for i in range(block_buf.shape[0]):
            block_buf[i] = z0
    zero = np.int64(0)
    one = np.int64(1)
    for r in range(ch, n_roots, n_chunks):
        start_r = node_ranges[r, 0]
        ns_r = node_ranges[r, 1] - start_r
        t = node_tree[r]
        base = out_offsets[r]
        # gather the root's samples: global ids, weights, targets (data by local id)
        for a in range(ns_r):
            s = sample_indices[start_r + a]
            gid[a] = s
            cols[a] = a
            wa = np.float64(weights[t, s])
            w[a] = wa
            for c in range(m):
                yv = targets[s, t, c]
                y[a, c] = yv
                wy[a, c] = wa * yv
        out_start[base] = 0
        out_stop[base] = ns_r
        out_depth[base] = node_depth[r]
        seeds[0] = node_seed[r]
        if ns_r <= limit:
            # the codes block (feature-major, ns_r bytes per feature, so that a small
            # root touches little memory)
            block = block_buf[: p * ns_r].reshape((p, ns_r))
            _fill_block(block_buf, block, p, ns_r, gid, codes, zero_code, row_ptr,
                        row_features, row_codes, one_zero_code)
            # run-time integers, as at the call below: literal ones would compile
            # _grow_in_block (and link _eval_node into it) once more
            count = _grow_in_block(
                block, cols, cols2, stack, seeds, w, wy, y, zero, one, base, zero, t,
                n_candidates,
                min_samples_leaf, min_samples_split, max_depth, min_impurity_decrease,
                root_weight, random_split, missing_bin, tie_rtol, edge_values, edge_ptr, lo_bits,
                hi_bits, m, subtracted_bin, listed, row_ptr, row_features, row_codes,
                node_codes, identity, scratch, out_feature, out_bin, out_missing_left, out_gain,
                out_left, out_right, out_depth, out_start, out_stop, gid,
            )
            if one_zero_code:
                _clean_block(block, ns_r, gid, row_ptr, row_features, zero_code[0])
        else:
            count = one
            stack[0] = 0
            sp = 1
            while sp > 0:
                sp -= 1
                j = stack[sp]
                g_j = base + j
                a0 = out_start[g_j]
                a1 = out_stop[g_j]
                nsj = a1 - a0
                depth = out_depth[g_j]
                _clear_node(g_j, out_feature, out_bin, out_missing_left, out_gain, out_left,
                            out_right)
                if (max_depth >= 0 and depth >= max_depth) or nsj < min_samples_split:
                    continue
                if nsj <= limit:
                    # gather the node's samples into a block (positions 0 .. nsj - 1)
                    for a in range(nsj):
                        la = cols[a0 + a]
                        block_gid[a] = gid[la]
                        block_cols[a] = a
                        w_b[a] = w[la]
                        for c in range(m):
                            y_b[a, c] = y[la, c]
                            wy_b[a, c] = wy[la, c]
                    block = block_buf[: p * nsj].reshape((p, nsj))
                    _fill_block(block_buf, block, p, nsj, block_gid, codes, zero_code,
                                row_ptr, row_features, row_codes, one_zero_code)
                    count = _grow_in_block(
                        block, block_cols, cols2, block_stack, seeds, w_b, wy_b, y_b, j, count,
                        base, a0, t, n_candidates, min_samples_leaf, min_samples_split,
                        max_depth, min_impurity_decrease, root_weight, random_split,
                        missing_bin, tie_rtol, edge_values, edge_ptr, lo_bits, hi_bits, m,
                        subtracted_bin, listed,
                        row_ptr, row_features, row_codes, node_codes, identity, block_scratch,
                        out_feature, out_bin, out_missing_left, out_gain, out_left, out_right,
                        out_depth, out_start, out_stop, block_gid,
                    )
                    if one_zero_code:
                        _clean_block(block, nsj, block_gid, row_ptr, row_features,
                                     zero_code[0])
                    # the block's final order, as local ids of the root
                    for a in range(nsj):
                        cols2[a] = cols[a0 + block_cols[a]]
                    for a in range(nsj):
                        cols[a0 + a] = cols2[a]
                    continue
                for a in range(a0, a1):
                    node_rows[a] = gid[cols[a]]
                use_columns = _claim_slots(node_rows, a0, nsj, use_slots, slot_of_row)
                f, b, ml, g = _eval_node(
                    codes, node_rows, a0, nsj, w, wy, y, cols, a0, seeds[j], n_candidates,
                    min_samples_leaf, random_split, missing_bin, tie_rtol, edge_values, edge_ptr,
                    lo_bits, hi_bits, S, code_buf, order, hist, bin_pos, LS, MS, keys, perm, cand_f,
                    cand_g, cand_b, cand_ml, link, occupied, m, subtracted_bin, listed, use_columns,
                    col_ptr, col_rows, col_codes, slot_of_row, node_codes, identity, row_ptr,
                    row_features, columns_are_rows, listing,
                )
                if f >= 0 and gather:
                    # the split feature's codes of the node, at positions a0 .. a1 - 1
                    _node_codes_of(f, node_rows, a0, nsj, edge_values, edge_ptr, use_columns,
                                   col_ptr, col_rows, col_codes, slot_of_row, node_codes[0, a0:a1])
                if use_columns:
                    _release_slots(node_rows, a0, nsj, slot_of_row)
                if f < 0 or g / (m * root_weight[t]) + eps < min_impurity_decrease:
                    continue
                if gather:
                    nl = _partition_positions(node_codes, identity, cols, cols2, a0, a1, 0, b,
                                              ml, missing_bin)
                else:
                    nl = _partition_positions(codes, node_rows, cols, cols2, a0, a1, f, b, ml,
                                              missing_bin)
                _add_children(g_j, j, count, base, f, b, ml, g, a0, nl, a1, depth, seeds,
                              out_feature, out_bin, out_missing_left, out_gain, out_left,
                              out_right, out_depth, out_start, out_stop)
                stack[sp] = count + 1
                stack[sp + 1] = count
                sp += 2
                count += 2
        out_count[r] = count
        for a in range(ns_r):
            sample_indices[start_r + a] = gid[cols[a]]


@njit(parallel=True, cache=True)
def grow_subtrees(
    codes, subtracted_bin, listed, zero_code, row_ptr, row_features, row_codes, col_ptr, col_rows,
    col_codes, sample_indices, node_ranges, node_tree, node_seed, node_depth, weights, targets,
    edge_values, edge_ptr, n_candidates, min_samples_leaf, min_samples_split, max_depth,
    min_impurity_decrease, root_weight, random_split, missing_bin, tie_rtol, out_offsets,
    out_count, out_feature, out_bin, out_missing_left, out_gain, out_left, out_right, out_depth,
    out_start, out_stop,
):
    n_roots = node_ranges.shape[0]
    max_ns = max(np.int64(1), np.int64(np.max(node_ranges[:, 1] - node_ranges[:, 0])))
    n_chunks = min(n_roots, N_CHUNKS)
    for ch in prange(n_chunks):
        _subtree_chunk(
            np.int64(ch), n_chunks, max_ns, codes, subtracted_bin, listed, zero_code, row_ptr,
            row_features, row_codes, col_ptr, col_rows, col_codes, sample_indices, node_ranges,
            node_tree, node_seed, node_depth, weights, targets, edge_values, edge_ptr, n_candidates,
            min_samples_leaf, min_samples_split, max_depth, min_impurity_decrease, root_weight,
            random_split, missing_bin, tie_rtol, out_offsets, out_count, out_feature, out_bin,
            out_missing_left, out_gain, out_left, out_right, out_depth, out_start, out_stop,
        )


@njit(parallel=True, cache=True)
def accumulate_leaves_dense(leaf_of_sample, weights, Y, out):
    n = Y.shape[0]
    d = Y.shape[1]
    block = 64
    n_blocks = (d + block - 1) // block
    for blk in prange(n_blocks):
        c0 = blk * block
        c1 = min(d, c0 + block)
        for i in range(n):
            leaf = leaf_of_sample[i]
            if leaf >= 0:
                w = np.float64(weights[i])
                for c in range(c0, c1):
                    out[leaf, c] += w * Y[i, c]


@njit(cache=True)
def accumulate_leaves_csr(leaf_of_sample, weights, indptr, indices, data, out):
    n = leaf_of_sample.shape[0]
    for i in range(n):
        leaf = leaf_of_sample[i]
        if leaf >= 0:
            w = np.float64(weights[i])
            for q in range(indptr[i], indptr[i + 1]):
                out[leaf, indices[q]] += w * data[q]


@njit(parallel=True, cache=True)
def apply_trees(X, feature, threshold, missing_left, left, right, roots, out):
    n = X.shape[0]
    n_trees = roots.shape[0]
    for i in prange(n):
        for t in range(n_trees):
            node = roots[t]
            while feature[node] >= 0:
                node = _child(X[i, feature[node]], node, threshold, missing_left, left, right)
            out[i, t] = node


@njit(inline="always", cache=True)
def _child(x, node, threshold, missing_left, left, right):
    """The child of internal ``node`` that a row whose value of its feature is ``x``
    goes to: left when ``x <= threshold[node]``, NaN to the side of ``missing_left``."""
    go_left = missing_left[node] != 0 if np.isnan(x) else x <= threshold[node]
    return left[node] if go_left else right[node]


# rows that apply_trees_csr walks down a tree together
APPLY_LANES = 8


@njit(parallel=True, cache=True)
def apply_trees_csr(indptr, indices, data, feature, threshold, missing_left, left, right, roots,
                    out):
    """:func:`apply_trees` of a CSR X (sorted column indices, no duplicates), without
    densifying a row: a node's value is 0.0 unless the row stores its feature, which a
    bitmap of the row's features tells (p bits: 125 KB at a million features,
    cache-resident), and a stored value is found by binary search among the row's
    entries. Text-like trees are thousands of nodes deep along their chains of all-zero
    sides, so the bitmap answers most nodes in one read.

    Each node step waits for the previous one's loads, so ``APPLY_LANES`` rows (each
    with its bitmap) walk a tree together, one step each in turn: their independent
    steps overlap. 1,000 rows through 2 text-like trees 10,000 levels deep (200,000
    features): 0.052 -> 0.034 s.
    """
    n = indptr.shape[0] - 1
    n_trees = roots.shape[0]
    p_words = 1
    for e in range(indices.shape[0]):
        p_words = max(p_words, (indices[e] >> 6) + 1)
    for g in range(feature.shape[0]):
        p_words = max(p_words, (feature[g] >> 6) + 1)
    n_groups = (n + APPLY_LANES - 1) // APPLY_LANES
    n_chunks = min(n_groups, N_CHUNKS)
    for ch in prange(n_chunks):
        stored = np.zeros((APPLY_LANES, p_words), dtype=np.uint64)
        nodes = np.empty(APPLY_LANES, dtype=np.int64)
        for group in range(ch, n_groups, n_chunks):
            i0 = group * APPLY_LANES
            lanes = min(APPLY_LANES, n - i0)
            for lane in range(lanes):
                for e in range(indptr[i0 + lane], indptr[i0 + lane + 1]):
                    stored[lane, indices[e] >> 6] |= np.uint64(1) << np.uint64(indices[e] & 63)
            for t in range(n_trees):
                for lane in range(lanes):
                    nodes[lane] = roots[t]
                walking = lanes
                while walking > 0:
                    walking = 0
                    for lane in range(lanes):
                        node = nodes[lane]
                        f = feature[node]
                        if f < 0:
                            continue
                        walking += 1
                        x = 0.0
                        if (stored[lane, f >> 6] >> np.uint64(f & 63)) & np.uint64(1):
                            a = indptr[i0 + lane]
                            x = data[a + _count_below(indices[a:], indptr[i0 + lane + 1] - a, f)]
                        nodes[lane] = _child(x, node, threshold, missing_left, left, right)
                for lane in range(lanes):
                    out[i0 + lane, t] = nodes[lane]
            for lane in range(lanes):
                for e in range(indptr[i0 + lane], indptr[i0 + lane + 1]):
                    stored[lane, indices[e] >> 6] = np.uint64(0)


@njit(parallel=True, cache=True)
def sum_leaves_dense(leaf_rows, values, out):
    n = leaf_rows.shape[0]
    n_trees = leaf_rows.shape[1]
    d = values.shape[1]
    for i in prange(n):
        for t in range(n_trees):
            leaf = leaf_rows[i, t]
            if leaf >= 0:
                for c in range(d):
                    out[i, c] += values[leaf, c]


@njit(parallel=True, cache=True)
def sum_leaves_csr(leaf_rows, indptr, indices, data, out):
    n = leaf_rows.shape[0]
    n_trees = leaf_rows.shape[1]
    for i in prange(n):
        for t in range(n_trees):
            leaf = leaf_rows[i, t]
            if leaf >= 0:
                for q in range(indptr[leaf], indptr[leaf + 1]):
                    out[i, indices[q]] += data[q]


@njit(parallel=True, cache=True)
def gather_tree_arrays(order, is_leaf, feature, bin_, missing_left, left, right, local_id,
                       leaf_index, start, stop, weighted, gain, depth, edge_values, edge_ptr,
                       out_left, out_right, out_feature, out_threshold, out_bin,
                       out_missing_left, out_leaf_index, out_n_samples, out_weighted,
                       out_gain, out_depth):
    """Per-tree node arrays in one pass (host helper of the grower's ``finish``).

    Position j describes node ``g = order[j]``: children as local ids
    (``local_id``), the split's feature, bin, threshold ``_edge(edge_values, edge_ptr, f, bin)``,
    missing side and gain for internal nodes; -1 / NaN / 0 for leaves.
    """
    for j in prange(order.shape[0]):
        g = order[j]
        if is_leaf[g]:
            out_left[j] = -1
            out_right[j] = -1
            out_feature[j] = -1
            out_threshold[j] = np.nan
            out_bin[j] = 0
            out_missing_left[j] = 0
            out_gain[j] = 0.0
        else:
            f = feature[g]
            b = bin_[g]
            out_left[j] = local_id[left[g]]
            out_right[j] = local_id[right[g]]
            out_feature[j] = f
            out_threshold[j] = _edge(edge_values, edge_ptr, f, b)
            out_bin[j] = b
            out_missing_left[j] = missing_left[g]
            out_gain[j] = gain[g]
        out_leaf_index[j] = leaf_index[g]
        out_n_samples[j] = stop[g] - start[g]
        out_weighted[j] = weighted[g]
        out_depth[j] = depth[g]


@njit(inline="always", cache=True)
def _transpose_group(X, flat, f0, g, width, ahead, out, out_lo, out_hi):
    """:func:`transpose_block_to_float32` for the ``width`` (a constant) features from ``f0 + g``."""
    n = X.shape[0]
    stride = X.shape[1]
    lo = np.full(width, np.inf, dtype=np.float32)
    hi = np.full(width, -np.inf, dtype=np.float32)
    for i in range(n):
        if i + ahead < n:
            # the group's values can straddle a line more than their own
            for c in range(0, width, 8):
                _prefetch(flat, (i + ahead) * stride + f0 + g + c)
            _prefetch(flat, (i + ahead) * stride + f0 + g + width - 1)
        for j in range(width):
            v = np.float32(X[i, f0 + g + j])
            out[g + j, i] = v
            lo[j] = v if v < lo[j] else lo[j]
            hi[j] = v if v > hi[j] else hi[j]
    for j in range(width):
        out_lo[g + j] = lo[j]
        out_hi[g + j] = hi[j]


@njit(nogil=True, cache=True)
def transpose_block_to_float32(X, f0, out, out_lo, out_hi):
    """``out[j, i] = float32(X[i, f0 + j])`` for the ``out.shape[0]`` features from ``f0``,
    and ``out_lo[j]``, ``out_hi[j]`` the smallest and largest non-NaN of ``out[j]``
    (+inf and -inf for none; NaN compare false and are skipped).

    ``X``: C-ordered. Host helper of BinMapper (a block of features, see
    :func:`gpurpo.tree.binning._bin_by_blocks`). Groups of 16 features, then
    of 8, row by row: the values of a row (one or two 64-byte lines of a
    float64 ``X``) are converted at once (a loop of constant length,
    unrolled and vectorised), written to as many rows of ``out``, each filled
    sequentially, and folded into the group's running minima and maxima (the
    ranges of :mod:`gpurpo.tree._bucket_edges`, at no extra pass). The lines of the row
    ``TRANSPOSE_PREFETCH`` rows ahead are prefetched (:func:`_prefetch`):
    rows further apart than 2 KiB defeat the hardware's stride prefetcher.
    Delicious-shaped X (12,920 x 500 float64), blocks of 16 features, one
    thread, AMD EPYC (Zen 4), medians of 9 in-process runs: 10.4 ms by groups
    of 8 prefetched 64 rows ahead, without the ranges; 7.0 ms by groups of 16
    prefetched 32 rows ahead, with them.
    """
    nb = out.shape[0]
    flat = X.reshape(-1)
    ahead = TRANSPOSE_PREFETCH
    g = 0
    while g + 16 <= nb:
        _transpose_group(X, flat, f0, g, 16, ahead, out, out_lo, out_hi)
        g += 16
    while g + 8 <= nb:
        _transpose_group(X, flat, f0, g, 8, ahead, out, out_lo, out_hi)
        g += 8
    while g < nb:
        _transpose_group(X, flat, f0, g, 1, ahead, out, out_lo, out_hi)
        g += 1


@njit(cache=True)
def _count_below_nan(v):
    """The number of non-NaN values of ``v``, sorted with NaN last (binary search)."""
    lo = 0
    hi = v.shape[0]
    while lo < hi:
        mid = (lo + hi) >> 1
        if np.isnan(v[mid]):
            hi = mid
        else:
            lo = mid + 1
    return lo


@njit(nogil=True, cache=True)
def edges_from_sorted(sorted_values, max_bins, out_edges, out_n_edges, out_float32_ok):
    """Quantile bin edges of each row of ``sorted_values`` (host helper of BinMapper.fit).

    Row f holds the feature's sample values sorted increasingly, NaN last (as
    NumPy sorts them; the non-NaN prefix is found by binary search). With at
    most ``max_bins`` distinct values the edges are the midpoints between
    consecutive distinct values; otherwise the midpoints after the distinct
    values holding the ``j / max_bins`` quantiles (j = 1 .. max_bins - 1),
    deduplicated (a rank inside the run of ties of the previous one gives its
    edge again and is skipped: a feature half zero walked its run of zeros
    for each of its ranks, 0.4 ms a feature of 12,920 values). Fills
    ``out_edges[f, :out_n_edges[f]]``, and ``out_float32_ok[f]`` with
    :func:`float32_codes_agree` of the pairs of values the edges lie between.
    """
    p = sorted_values.shape[0]
    for f in range(p):
        v = sorted_values[f]
        n = _count_below_nan(v)
        ok = True
        n_distinct = 0
        for i in range(n):
            if i == 0 or v[i] != v[i - 1]:
                n_distinct += 1
        if n_distinct <= max_bins:
            e = 0
            for i in range(1, n):
                if v[i] != v[i - 1]:
                    out_edges[f, e] = 0.5 * (np.float64(v[i - 1]) + np.float64(v[i]))
                    ok = ok and float32_codes_agree(v[i - 1], v[i])
                    e += 1
            out_n_edges[f] = e
            out_float32_ok[f] = ok
            continue
        e = 0
        last = -1  # position of the last distinct value used for an edge
        run_end = -1  # end of the last run of ties walked: its ranks give its edge again
        for j in range(1, max_bins):
            # distinct value holding the sample of rank ceil(j n / max_bins)
            rank = (j * n + max_bins - 1) // max_bins - 1
            if rank < 0:
                rank = 0
            if rank <= run_end:
                continue
            # end of its run of ties
            i = rank
            while i + 1 < n and v[i + 1] == v[i]:
                i += 1
            run_end = i
            if i + 1 >= n:
                # the quantile falls in the largest value: edge below its run
                i = rank
                while i > 0 and v[i - 1] == v[i]:
                    i -= 1
                i -= 1
            if i < 0 or i <= last:
                continue
            out_edges[f, e] = 0.5 * (np.float64(v[i]) + np.float64(v[i + 1]))
            ok = ok and float32_codes_agree(v[i], v[i + 1])
            e += 1
            last = i
        out_n_edges[f] = e
        out_float32_ok[f] = ok


# Codes "#{edges < x}" of one feature come from a table of equal cells over
# [edge_0, edge_last] holding at most one edge each (_cells_of, _fill_cells): a
# value's cell gives the number of edges in the cells before it, and one comparison
# with the edge of its own cell finishes the count. Features whose edges lie closer
# together than their range / MAX_CELLS take a binary search.
MAX_CELLS = 1 << 16
# table entries held at once by bin_codes (a block of features)
_BLOCK_CELLS = 1 << 20


@njit(cache=True)
def _count_below(edges, n_edges, x):
    """``#{edges[:n_edges] < x}`` by binary search (increasing edges)."""
    lo_e = 0
    hi_e = n_edges
    while lo_e < hi_e:
        mid = (lo_e + hi_e) >> 1
        if edges[mid] < x:
            lo_e = mid + 1
        else:
            hi_e = mid
    return lo_e


@njit(inline="always", cache=True)
def _edge(edge_values, edge_ptr, f, b):
    """The upper edge of value bin ``b`` of feature ``f`` in the ragged edge table
    (``edge_values[edge_ptr[f]:edge_ptr[f + 1]]``, increasing): the split "code <= b"
    is "x <= edge". ``+inf`` from the feature's last value bin on (its number of
    edges), as the ``(p, n_bins - 1)`` table padded with ``+inf`` that the kernels
    read before, without its ``p x 255`` cells (2 GB at a million features)."""
    at = edge_ptr[f] + b
    return edge_values[at] if at < edge_ptr[f + 1] else np.inf


@njit(inline="always", cache=True)
def _zero_code(edge_values, edge_ptr, f):
    """The code of 0.0 of feature ``f``: its number of negative edges (uint8)."""
    e0 = edge_ptr[f]
    return np.uint8(_count_below(edge_values[e0:], edge_ptr[f + 1] - e0, 0.0))


@njit(cache=True)
def _cells_of(edges, n_edges, max_cells):
    """The number of cells of one feature's table (:func:`_fill_cells`); 0: a binary search.

    One cell for fewer than two edges. Otherwise the power of two at least
    twice ``(edge_last - edge_0) / smallest gap``: consecutive edges are then
    two cells apart or more, and the rounding of a cell position (a relative
    error of a few units of 2**-53) cannot put two edges in one cell. 0 when
    that exceeds ``max_cells``, when an edge is infinite (values beyond
    float32's range in the fit) or the edges do not increase.
    """
    if n_edges < 2:
        return 1 if n_edges == 0 or np.isfinite(edges[0]) else 0
    span = edges[n_edges - 1] - edges[0]
    if not np.isfinite(span):
        return 0
    gap = np.inf
    for j in range(1, n_edges):
        gap = min(gap, edges[j] - edges[j - 1])
    if not gap > 0.0:
        return 0
    need = 2.0 * (span / gap)
    if not need <= max_cells:
        return 0
    cells = 1
    while cells < need:
        cells *= 2
    return cells if np.isfinite(cells / span) else 0


@njit(inline="always", cache=True)
def _cell(x, lo, scale, cells):
    """The cell ``floor((x - lo) * scale)`` of ``x``, clamped to ``[0, cells]`` (NaN: ``cells``).

    Monotone in ``x`` (each rounded step is), so a value below an edge never
    lands in a later cell than the edge, nor a value above it in an earlier one.
    Two selects, NaN-safe by their order (numba's ``max`` passes NaN through):
    the codes of a delicious-shaped X from given tables 12.5 -> 10.9 ms.
    """
    g = (x - lo) * scale
    g = g if g < cells else np.float64(cells)  # NaN: cells
    g = g if g > 0.0 else 0.0
    return np.uint64(g)


@njit(cache=True)
def _fill_cells(edges, n_edges, cells, base, cut):
    """Fill one feature's table of ``cells + 1`` cells for ``#{edges < x}``.

    ``cut[g]`` is the edge lying in cell ``g`` (:func:`_cell`; NaN: none) and
    ``base[g]`` the number of edges in the cells before ``g``. By the
    monotonicity of :func:`_cell`, a non-NaN ``x`` in cell ``g`` has
    ``#{edges < x} = base[g] + (x > cut[g])``: the edges of earlier cells are
    below ``x``, those of later cells above it. For fewer than two edges, one
    cell of width 1 from the edge (0 without edges): the table then needs no
    division by the span.

    Returns ``(ok, lo, scale)``; ``ok`` is False if two edges share a cell
    (:func:`_cells_of` rules it out), and the caller then searches.
    """
    lo = edges[0] if n_edges > 0 else 0.0
    scale = cells / (edges[n_edges - 1] - lo) if n_edges > 1 else 1.0
    for g in range(cells + 1):
        cut[g] = np.nan
    for j in range(n_edges):
        g = _cell(edges[j], lo, scale, cells)
        if not np.isnan(cut[g]):
            return False, lo, scale
        cut[g] = edges[j]
    run = 0
    for g in range(cells + 1):
        base[g] = run
        if not np.isnan(cut[g]):
            run += 1
    return True, lo, scale


@njit(inline="always", cache=True)
def _code_in_cells(x, lo, scale, cells, base, cut):
    """``#{edges < x}`` for a non-NaN ``x`` from the table of :func:`_fill_cells`."""
    g = _cell(x, lo, scale, cells)
    return np.int64(base[g]) + np.int64(x > cut[g])


@njit(inline="always", cache=True)
def float32_codes_agree(a, b):
    """Whether every value's code is fixed by its float32 rounding at the edge between ``a < b``.

    ``a`` and ``b`` are consecutive distinct float32 values of a sorted
    sample and the edge is ``e = (a + b) / 2`` in float64. For a value ``x``
    OF THAT SAMPLE, ``v = float32(x)`` is itself a sample value, so ``v <= a``
    or ``v >= b``, and round to nearest keeps ``x`` within half a float32
    spacing of ``v``: ``e < x`` and ``e < v`` then agree, except when ``a``
    and ``b`` are adjacent float32 numbers and ``x`` is exactly ``e``, rounded
    up to ``b`` (a tie). False in that case, and when ``e`` is infinite
    (values beyond float32's range).
    """
    e = 0.5 * (np.float64(a) + np.float64(b))
    return np.isfinite(e) and np.nextafter(a, np.float32(np.inf)) != b


@njit(cache=True)
def _float32_cuts(edges, n_edges, lo, scale, cells, above):
    """``above[g]``: the least float32 greater than the edge of cell ``g``; NaN for none.

    For a float32 ``x``, ``x >= above[g]`` if and only if ``x > cut[g]``
    (compared in float64; :func:`_fill_cells`): a float32 comparison with the
    cell tables (the codes of a delicious-shaped X from given tables, one
    thread: 14.1 -> 12.5 ms).
    """
    for g in range(cells + 1):
        above[g] = np.nan
    for j in range(n_edges):
        e = edges[j]
        u = np.float32(e)
        if np.float64(u) <= e:
            u = np.nextafter(u, np.float32(np.inf))
        above[_cell(e, lo, scale, cells)] = u


@njit(cache=True)
def _tie_uppers(edges, n_edges, out):
    """``out[k]``: the upper float32 ``b`` of edge ``k`` when the edge is the midpoint
    of two adjacent float32 numbers ``a < b`` (the tie of :func:`float32_codes_agree`),
    else +inf.

    A float32 value lies just above such an edge exactly when it equals
    ``out[k]``. A value of +inf matches the +inf of the other edges: it is then
    compared with the edge in float64 too, which keeps its code (that
    comparison is exact for any value). +inf rather than NaN: comparisons
    with NaN cost some 5 ns each here (features with a tie, 4.6 % of a
    delicious-shaped X, 66 -> 9 us each for their tie pass, AMD Zen 4).
    """
    for k in range(n_edges):
        e = edges[k]
        a = np.float32(e)
        if np.float64(a) > e:
            a = np.nextafter(a, np.float32(-np.inf))
        b = np.nextafter(a, np.float32(np.inf))
        tie = (np.float64(a) < e and e < np.float64(b)
               and 0.5 * (np.float64(a) + np.float64(b)) == e)
        out[k] = b if tie else np.float32(np.inf)


@njit(cache=True)
def _codes_of_feature(v, X, f, e_f, ne, float32_ok, missing_bin, o):
    """The codes of feature ``f`` (row ``v`` of the float32 copy) for :func:`bin_codes_fitted`."""
    n = v.shape[0]
    cells = _cells_of(e_f, ne, MAX_CELLS)
    base = np.empty(cells + 1, dtype=np.uint8)
    cut = np.empty(cells + 1)
    ok, lo, scale = _fill_cells(e_f, ne, cells, base, cut) if cells > 0 else (False, 0.0, 0.0)
    if not ok:
        for i in range(n):
            x = np.float64(X[i, f])
            o[i] = missing_bin if np.isnan(x) else _count_below(e_f, ne, x)
        return
    above = np.empty(cells + 1, dtype=np.float32)
    _float32_cuts(e_f, ne, lo, scale, cells, above)
    missing = np.uint8(missing_bin)
    for i in range(n):
        x = v[i]
        g = _cell(np.float64(x), lo, scale, cells)
        code = base[g] + np.uint8(x >= above[g])
        o[i] = missing if np.isnan(x) else code
    if not float32_ok:
        _fix_tie_codes(v, X, f, e_f, ne, o)


@njit(cache=True)
def _fix_tie_codes(v, X, f, e_f, ne, o):
    """Codes of the float32 values ``v`` of feature ``f`` compared in float32, made those
    of the float64 values of ``X``: the values just above a tie edge
    (:func:`_tie_uppers`) are compared with it in float64."""
    n = v.shape[0]
    tie_upper = np.empty(max(ne, 1), dtype=np.float32)
    _tie_uppers(e_f, ne, tie_upper)
    for i in range(n):
        code = np.int64(o[i])
        if 0 < code and code <= ne and v[i] == tie_upper[code - 1]:
            if not e_f[code - 1] < np.float64(X[i, f]):
                o[i] = np.uint8(code - 1)


@njit(nogil=True, cache=True)
def bin_codes_fitted(values, X, f0, edges, n_edges, float32_ok, missing_bin, coded, out,
                     out_n_zero):
    """Codes of the very values the edges were fitted on (host helper of BinMapper).

    ``values`` (q, n) is the float32, feature-major copy of the ``q``
    features of ``X`` (n, p) from ``f0`` (:func:`transpose_block_to_float32`),
    whose sorted copy gave the edges (:func:`edges_from_sorted`) and
    ``float32_ok``, its verdict of :func:`float32_codes_agree` over each
    feature's edges; ``edges``, ``n_edges``, ``float32_ok`` and ``out`` are
    the rows of those ``q`` features. The codes are those of
    :func:`bin_codes` (``#{edges < x}`` compared in float64, NaN to
    ``missing_bin``), read from the contiguous float32 rows through the
    cell table of :func:`_fill_cells`. A feature without a table (infinite
    edges, or edges too close for :data:`MAX_CELLS` cells) takes a binary
    search over the float64 values of ``X``. Where ``float32_ok`` is False, a
    value whose float32 rounding lies just above an edge at the midpoint of
    two adjacent float32 numbers (the tie of :func:`float32_codes_agree`) is
    compared in float64 with that edge.

    Where ``coded[j]`` is True, ``out[j]`` already holds those float32 codes
    (:func:`gpurpo.tree._bucket_edges.bucket_edges_rows`): only the float64
    comparisons next to tie edges and the count below are made.

    ``out_n_zero[j]``: how many of feature ``j``'s codes are the code of 0.0
    (``#{edges < 0.0}``; NaN codes excluded when ``missing_bin`` is above
    every value code), counted while the codes are in the cache (the
    subtracted bins of :class:`gpurpo.tree.binning.BinnedMatrix`).
    """
    for j in range(values.shape[0]):
        o = out[j]
        if not coded[j]:
            _codes_of_feature(values[j], X, f0 + j, edges[j], n_edges[j], float32_ok[j],
                              missing_bin, o)
        elif not float32_ok[j]:
            _fix_tie_codes(values[j], X, f0 + j, edges[j], n_edges[j], o)
        zero = np.uint8(_count_below(edges[j], n_edges[j], 0.0))
        count = 0
        for i in range(o.shape[0]):
            count += o[i] == zero
        out_n_zero[j] = count


@njit(parallel=True, cache=True)
def bin_codes(X, edges, n_edges, missing_bin, out):
    """``out[f, i] = #{edges[f, :n_edges[f]] < X[i, f]}``, ``missing_bin`` for NaN (see kernels.py).

    Blocks of features (at most 256, whose cell tables of :func:`_fill_cells`
    hold at most ``_BLOCK_CELLS`` entries together) get their tables at once,
    then tasks of consecutive rows (contiguous slabs of a C-order ``X``) code
    them. Features without a table take a binary search.
    """
    n = X.shape[0]
    p = X.shape[1]
    rblock = 256  # rows per task
    n_tasks = (n + rblock - 1) // rblock
    cells = np.empty(p, dtype=np.int64)
    for f in prange(p):
        cells[f] = _cells_of(edges[f], n_edges[f], MAX_CELLS)
    f0 = 0
    while f0 < p:
        f1 = f0 + 1
        total = cells[f0] + 1
        while f1 < p and f1 - f0 < 256 and total + cells[f1] + 1 <= _BLOCK_CELLS:
            total += cells[f1] + 1
            f1 += 1
        nf = f1 - f0
        start = np.zeros(nf + 1, dtype=np.int64)
        for j in range(nf):
            start[j + 1] = start[j] + cells[f0 + j] + 1
        base = np.empty(total, dtype=np.uint8)
        cut = np.empty(total)
        ok = np.zeros(nf, dtype=np.bool_)
        lo = np.zeros(nf)
        scale = np.zeros(nf)
        for j in prange(nf):
            f = f0 + j
            if cells[f] > 0:
                ok[j], lo[j], scale[j] = _fill_cells(
                    edges[f], n_edges[f], cells[f], base[start[j]:start[j + 1]],
                    cut[start[j]:start[j + 1]])
        for task in prange(n_tasks):
            i0 = task * rblock
            i1 = min(n, i0 + rblock)
            for f in range(f0, f1):
                ne = n_edges[f]
                j = f - f0
                if not ok[j]:
                    e_f = edges[f]
                    for i in range(i0, i1):
                        x = np.float64(X[i, f])
                        out[f, i] = missing_bin if np.isnan(x) else _count_below(e_f, ne, x)
                    continue
                cells_j = cells[f]
                base_j = base[start[j]:start[j + 1]]
                cut_j = cut[start[j]:start[j + 1]]
                lo_j = lo[j]
                scale_j = scale[j]
                for i in range(i0, i1):
                    x = np.float64(X[i, f])
                    if np.isnan(x):
                        out[f, i] = missing_bin
                        continue
                    out[f, i] = _code_in_cells(x, lo_j, scale_j, cells_j, base_j, cut_j)
        f0 = f1
