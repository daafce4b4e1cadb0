"""numba twin of the ``tree_grow_subtrees`` kernel of ``kernels/tree_split_small.cu``.

Grows whole subtrees below nodes of at most a given size in one call: each root is
split with the exact node search of :mod:`._node_split`, its samples partitioned in
place, and its children grown depth-first until they are leaves. :func:`launch` is
the registered implementation: it turns the argument records of
:mod:`gpurpo.tree._records` into those of :mod:`._kernel_records` and runs the
compiled kernel :func:`grow_subtrees`.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from gpurpo.backend import cpu_helper
from gpurpo.tree._borrow import borrow_all
from gpurpo.tree._numba._kernel_records import (
    NodeAt,
    NodeBits,
    NodeColumns,
    NodeData,
    SubtreeOut,
    kernel_records,
)
from gpurpo.tree._numba._node_codes import _node_codes_of
from gpurpo.tree._numba._node_split import LISTING_LIMIT, _eval_node
from gpurpo.tree._numba._shared import N_CHUNKS
from gpurpo.tree._numba.tree_split_small import (
    _claim_slots,
    _eval_rules,
    _eval_scratch,
    _release_slots,
    gather_node,
)
from gpurpo.tree._random import child_seed_nb

# A subtree kernel's node of at most this many samples (and at least 64) is grown from a
# private copy of its samples' codes, ``p x size`` bytes (cache resident); larger nodes
# are evaluated on the global codes (see grow_subtrees).
SUBTREE_BLOCK_BYTES = 1 << 19
MAX_BLOCK_SAMPLES = 4096
# Blocks of at least this many samples hold bit sets of their two-valued features
# (_pack_bits): their nodes count a feature's samples by words instead of codes.
BITS_MIN_SAMPLES = 128
# A node of a block with bit sets reads them when it has at least this many samples
# per word its columns span (else its codes: a small node's columns can be spread
# over the whole block).
BITS_PER_WORD = 8


@njit(cache=True)
def _block_limit(p):
    """The largest node grown from a private codes block, for ``p`` features."""
    return min(MAX_BLOCK_SAMPLES, max(64, SUBTREE_BLOCK_BYTES // max(p, 1)))


@njit(cache=True)
def _subtree_chunk(ch, n_chunks, max_ns, codes, sparse, batch, weights, targets, root_weight,
                   edges, rules, out):
    """Grow the subtrees of roots ``ch, ch + n_chunks, ...`` with scratch buffers of this chunk."""
    p = codes.shape[0]
    m = targets.shape[2]
    mp = ((m + 7) // 8) * 8
    n_bins = rules.missing_bin + 1
    n_slots = max(1, min(rules.n_candidates, p))
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
    sparse_columns = big and sparse.col_ptr.shape[0] > 0
    big_scratch = (
        np.empty(max_ns if big else 1, dtype=np.int32),  # a node's samples in position order
        np.empty(max_nb + 2 if big else 1, dtype=np.int64),  # a block's depth-first stack
        np.empty(max_nb if big else 1, dtype=np.int32),  # a block's samples (global ids)
        np.empty(max_nb if big else 1, dtype=np.int32),  # its positions
    )
    # without dense codes (a sparse X), a large node's codes of one feature gathered from
    # its column, by position, read through the identity
    gather_size = max_ns if big and codes.shape[1] == 0 else 1
    columns = NodeColumns(
        sparse.subtracted_bin, sparse.listed, sparse.col_ptr, sparse.col_rows, sparse.col_codes,
        # each row's position in the current node, -1 outside it (read with the columns)
        np.full(targets.shape[0] if sparse_columns else 1, -1, dtype=np.int32),
        np.empty((1, gather_size), dtype=np.uint8),
        np.arange(gather_size).astype(np.int32),
        sparse.row_ptr, sparse.row_features,
        np.empty(0, dtype=np.int32),  # no row map: a large node's columns are its rows
    )
    # a sparse X's nodes list their rows' stored entries (at most n_listing)
    n_listing = min(n_slots, LISTING_LIMIT) if sparse.row_ptr.shape[0] > 0 else 0
    data, scratch = _eval_scratch(max_ns, mp, n_bins, n_slots, n_listing)
    block_data, block_scratch = _eval_scratch(max_nb if big else 1, mp, n_bins, n_slots,
                                              n_listing)
    # the blocks' bit sets, for the best split of 8-channel nodes (_eval_node's
    # one-pass scan of two-valued features)
    n_words = (max_nb + 63) // 64 if mp == 8 and not rules.random_split else 0
    bit_scratch = (
        np.zeros((p, n_words), dtype=np.uint64),  # the bit sets of a block's features
        np.zeros(p, dtype=np.bool_),  # which features have one (all False between blocks)
        np.zeros(n_words, dtype=np.uint64),  # a node's columns
    )
    _subtree_chunk_roots(
        ch, n_chunks, codes, sparse, batch, weights, targets, root_weight, edges, rules, out,
        subtree_scratch, big_scratch, data, scratch, block_data, block_scratch, columns,
        bit_scratch,
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
            codes_f = codes[f]
            block_f = block[f]
            for a in range(np.uint64(ns)):
                block_f[a] = codes_f[np.uint64(gid[a])]


@njit(cache=True)
def _clean_block(block, ns, gid, row_ptr, row_features, z0):
    """Undo :func:`_fill_block`'s stored entries (``one_zero_code``): ``block`` all ``z0`` again."""
    for a in range(ns):
        s = gid[a]
        for e in range(row_ptr[s], row_ptr[s + 1]):
            block[row_features[e], a] = z0


@njit(cache=True)
def _pack_bits(block, edge_ptr, words, binary):
    """Bit sets of the two-valued features of a codes block (p x ns) without missing codes.

    ``words[f]`` gets bit ``c`` set where ``block[f, c]`` is 1, for every
    feature ``f`` of one edge whose codes in the block are 0 or 1; ``binary[f]``
    says which (see :func:`gpurpo.tree._numba._feature_scan._scan_bits8`).
    """
    p, ns = block.shape
    n_full = ns // 64
    for f in range(p):
        if edge_ptr[f + 1] - edge_ptr[f] != 1:
            continue
        codes_f = block[f]
        words_f = words[f]
        high = np.uint8(0)
        for k in range(n_full):
            # a loop of constant length over the word's 64 codes (unrolled, vectorised)
            base = k * 64
            word = np.uint64(0)
            for c in range(64):
                code = codes_f[base + c]
                high |= code
                word |= np.uint64(code) << np.uint64(c)
            words_f[k] = word
        if ns > n_full * 64:
            word = np.uint64(0)
            for c in range(n_full * 64, ns):
                code = codes_f[c]
                high |= code
                word |= np.uint64(code) << np.uint64(c - n_full * 64)
            words_f[n_full] = word
        # codes other than 0 and 1 set bits above the lowest of ``high``
        binary[f] = high <= 1


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
    # unsigned positions: no negative-index fix-ups in these hot loops
    codes_f = codes[f]
    nl = 0
    for a in range(np.uint64(a0), np.uint64(a1)):
        if _goes_left(codes_f[np.uint64(columns[a])], b, ml, missing_bin):
            nl += 1
    il = np.uint64(a0)
    ir = np.uint64(a0 + nl)
    for a in range(np.uint64(a0), np.uint64(a1)):
        if _goes_left(codes_f[np.uint64(columns[a])], b, ml, missing_bin):
            cols2[il] = cols[a]
            il += np.uint64(1)
        else:
            cols2[ir] = cols[a]
            ir += np.uint64(1)
    for a in range(np.uint64(a0), np.uint64(a1)):
        cols[a] = cols2[a]
    return nl


@njit(cache=True)
def _grow_in_block(block, cols, cols2, stack, seeds, data, j_root, count, base, pos0, t, m,
                   root_weight, rules, eval_rules, edges, sparse, columns, scratch, out,
                   row_of_col, bit_scratch):
    """Grow node ``j_root`` (local id; its samples the block's columns ``0 .. ns - 1``,
    at the root's positions ``pos0 ..``) to completion, depth first, in the block.

    ``cols`` starts as the identity and ends in the final order of the samples
    (leaves left to right); their data ``data = (w, wy, y)`` are ``w[cols[a]]``,
    ``wy[cols[a]]``, ``y[cols[a]]``. New nodes take the local ids ``count, count + 1,
    ...``; the node ``j_root``'s start, stop, depth and seed are set by the caller.
    ``rules``, ``edges``, ``sparse`` and ``out`` are the kernel's records,
    ``eval_rules`` and ``scratch`` those of :func:`_eval_node`, ``columns`` the
    ``NodeColumns`` of the large nodes (its gathered-codes buffer and identity).
    ``row_of_col``: the global row of each column of the block (a sparse X's
    nodes read their rows' stored entries, see :func:`_eval_node`).
    ``bit_scratch``: the bit sets of the block's two-valued features, their
    flags and a node's mask (:class:`NodeBits`), made by :func:`_pack_bits`
    for blocks of at least ``BITS_MIN_SAMPLES`` samples (a node's columns are
    increasing: ``cols`` is partitioned stably from the identity); the flags
    are left False.
    Returns the next free local id.
    """
    w, wy, y = borrow_all(data)
    (out_offsets, out_count, out_feature, out_bin, out_missing_left, out_gain, out_left,
     out_right, out_depth, out_start, out_stop) = out
    eps = np.finfo(np.float64).eps
    # the block's nodes read no stored-entry columns (arrays of the columns' types,
    # never read)
    block_columns = NodeColumns(
        sparse.subtracted_bin, sparse.listed, sparse.row_ptr, sparse.row_features,
        sparse.row_codes, cols, columns.node_codes, columns.identity, sparse.row_ptr,
        sparse.row_features, row_of_col,
    )
    block_data = NodeData(block, cols, w, wy, y, cols, m)
    # False, typed as a run-time flag like the small-node kernel's (a literal False
    # would compile a second specialisation of _eval_node)
    no_columns = sparse.row_ptr.shape[0] < 0
    words, binary, mask = borrow_all(bit_scratch)
    packed = words.shape[1] > 0 and block.shape[1] >= BITS_MIN_SAMPLES
    if packed:
        _pack_bits(block, edges[1], words, binary)
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
        if (rules.max_depth >= 0 and depth >= rules.max_depth) or nsj < rules.min_samples_split:
            continue
        w_lo = np.int64(0)
        w_hi = np.int64(-1)
        if packed and nsj >= BITS_PER_WORD * ((np.int64(cols[a1 - 1]) >> 6)
                                              - (np.int64(cols[a0]) >> 6) + 1):
            w_lo = np.int64(cols[a0]) >> 6
            w_hi = np.int64(cols[a1 - 1]) >> 6
            for a in range(a0, a1):
                c = np.uint64(cols[a])
                mask[c >> np.uint64(6)] |= np.uint64(1) << (c & np.uint64(63))
        f, b, ml, g = _eval_node(block_data, NodeAt(a0, nsj, a0, seeds[j], no_columns,
                                                    np.int64(0), np.int64(-1)),
                                 block_columns, edges, eval_rules, scratch,
                                 NodeBits(words, binary, mask, w_lo, w_hi))
        for k in range(w_lo, w_hi + 1):
            mask[k] = np.uint64(0)
        if f < 0 or g / (m * root_weight[t]) + eps < rules.min_impurity_decrease:
            continue
        nl = _partition_positions(block, cols, cols, cols2, a0, a1, f, b, ml, rules.missing_bin)
        _add_children(g_j, j, count, base, f, b, ml, g, pos0 + a0, nl, pos0 + a1, depth, seeds,
                      out_feature, out_bin, out_missing_left, out_gain, out_left, out_right,
                      out_depth, out_start, out_stop)
        stack[sp] = count + 1
        stack[sp + 1] = count
        sp += 2
        count += 2
    if packed:
        for f in range(binary.shape[0]):
            binary[f] = False
    return count


@njit(cache=True)
def _subtree_chunk_roots(ch, n_chunks, codes, sparse, batch, weights, targets, root_weight, edges,
                         rules, out, subtree_scratch, big_scratch, data, scratch, block_data,
                         block_scratch, columns, bit_scratch):
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
    codes, weights, targets, root_weight = borrow_all((codes, weights, targets, root_weight))
    sparse = borrow_all(sparse)
    _, _, zero_code, row_ptr, row_features, row_codes, col_ptr, col_rows, col_codes = sparse
    sample_indices, node_ranges, node_tree, node_seed, node_depth = borrow_all(batch)
    edges = borrow_all(edges)
    edge_values, edge_ptr = edges
    out = borrow_all(out)
    (out_offsets, out_count, out_feature, out_bin, out_missing_left, out_gain, out_left,
     out_right, out_depth, out_start, out_stop) = out
    columns = borrow_all(columns)
    slot_of_row = columns.slot_of_row
    node_codes = columns.node_codes
    identity = columns.identity
    max_depth = rules.max_depth
    min_samples_split = rules.min_samples_split
    min_impurity_decrease = rules.min_impurity_decrease
    missing_bin = rules.missing_bin
    gather = codes.shape[1] == 0
    sparse_rows = row_ptr.shape[0] > 0
    block_buf, gid, cols, cols2, stack, seeds = borrow_all(subtree_scratch)
    node_rows, block_stack, block_gid, block_cols = borrow_all(big_scratch)
    w, wy, y = borrow_all(data)
    scratch = borrow_all(scratch)
    w_b, wy_b, y_b = borrow_all(block_data)
    block_scratch = borrow_all(block_scratch)
    bit_scratch = borrow_all(bit_scratch)
    words, binary, mask = bit_scratch
    n_roots = node_ranges.shape[0]
    p = codes.shape[0]
    m = targets.shape[2]
    limit = _block_limit(p)
    eval_rules = _eval_rules(rules, p)
    # the large nodes' data: the global codes of their rows, by position
    root_data = NodeData(codes, node_rows, w, wy, y, cols, m)
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
            gid[a] = sample_indices[start_r + a]
            cols[a] = a
        gather_node(sample_indices, start_r, ns_r, t, weights, targets, w, wy, y)
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
                block, cols, cols2, stack, seeds, (w, wy, y), zero, one, base, zero, t, m,
                root_weight, rules, eval_rules, edges, sparse, columns, scratch, out, gid,
                bit_scratch,
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
                        block, block_cols, cols2, block_stack, seeds, (w_b, wy_b, y_b), j,
                        count, base, a0, t, m, root_weight, rules, eval_rules, edges, sparse,
                        columns, block_scratch, out, block_gid, bit_scratch,
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
                # the flags are False outside the blocks: no bit sets
                f, b, ml, g = _eval_node(root_data, NodeAt(a0, nsj, a0, seeds[j], use_columns,
                                                           zero, zero - one),
                                         columns, edges, eval_rules, scratch,
                                         NodeBits(words, binary, mask, zero, zero - one))
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
def grow_subtrees(codes, sparse, batch, weights, targets, root_weight, edges, rules, out):
    """``tree_grow_subtrees`` on the records of :mod:`._kernel_records`: ``sparse`` (a
    ``Sparse``), ``batch`` (a ``Batch``), ``edges`` (an ``Edges``), ``rules`` (a
    ``Rules``), ``out`` (a ``SubtreeOut``)."""
    node_ranges = batch.node_ranges
    n_roots = node_ranges.shape[0]
    max_ns = max(np.int64(1), np.int64(np.max(node_ranges[:, 1] - node_ranges[:, 0])))
    n_chunks = min(n_roots, N_CHUNKS)
    for ch in prange(n_chunks):
        _subtree_chunk(np.int64(ch), n_chunks, max_ns, codes, sparse, batch, weights, targets,
                       root_weight, edges, rules, out)


def launch(codes, batch, weights, targets, root_weight, edges, rules, sparse, out):
    """``tree_grow_subtrees`` on the CPU: :func:`grow_subtrees` on the kernel records.

    ``batch``, ``edges``, ``rules`` and ``sparse`` are the typed
    :class:`~gpurpo.tree._records.NodeBatch`, ``EdgeTable``, ``SplitRules`` and
    ``SparseColumns`` of the contract (:mod:`gpurpo.tree.kernels`), ``out`` the
    :class:`~gpurpo.tree._records.Subtrees` to fill. Inside
    :func:`gpurpo.backend.serial_cpu_kernels` the kernel's single-threaded twin runs.
    """
    kernel_batch, kernel_edges, kernel_rules, kernel_sparse = kernel_records(
        batch, edges, rules, sparse)
    cpu_helper(grow_subtrees)(
        codes, kernel_sparse, kernel_batch, weights, targets, root_weight, kernel_edges,
        kernel_rules,
        SubtreeOut(out.offsets, out.count, out.feature, out.bin, out.missing_left, out.gain,
                   out.left, out.right, out.depth, out.start, out.stop),
    )
