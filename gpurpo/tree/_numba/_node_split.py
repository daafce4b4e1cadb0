"""The exact split search of one node on its samples (numba).

Shared by the small-node kernel (:mod:`.tree_split_small`) and the subtree kernel
(:mod:`.tree_grow_subtrees`), the CPU twins of ``kernels/tree_split_small.cu``. A node
with few samples is split exactly on its samples instead of by a scan of 256 bins x k
features: the codes of the node's samples are sorted (small nodes), or filled into a
per-bin table of the occupied bins (larger nodes), and scanned once per candidate
feature for the variance-reduction gain of Joly, Geurts & Wehenkel (2014) on the
projected outputs; features are visited in the node's random order
(:mod:`gpurpo.tree._random`) until ``max_features`` non-constant ones were evaluated,
and ties among equal gains follow the tie rule of :func:`_tie_pick`.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from gpurpo.tree._borrow import borrow_all
from gpurpo.tree._numba._feature_scan import (
    _clear_occupied,
    _derive_occupied8,
    _derive_subtracted_bin,
    _fill_table8,
    _fill_table_columns,
    _fill_table_skipping,
    _gain,
    _keep_better,
    _mark,
    _missing_right_flag,
    _next_marked,
    _scan_binary8,
    _scan_bits8,
    _scan_occupied8,
    _scan_sorted8,
    _scan_table8,
    _unmark,
)
from gpurpo.tree._numba._node_codes import _node_codes_of
from gpurpo.tree._numba._shared import _count_trailing_zeros, _prefetch
from gpurpo.tree._numba._vector_sums import node_totals8
from gpurpo.tree._random import (
    SMALL_P,
    feature_batch_nb,
    feature_position_nb,
    round_keys_nb,
    small_feature_order_nb,
    uniform_at_nb,
)
from gpurpo.tree.binning._edge_lookup import _random_cut

# Nodes with at most SORT_LIMIT samples sort their codes (by ranks up to RANK_LIMIT
# samples, a stable bucket sort over the occupied bins above) and scan the samples in
# that order in one pass, instead of filling and scanning a per-bin table: such nodes
# spread over most of the bins, and the table scan would cost more than the sort.
SORT_LIMIT = 256
# gains within TIE_ROUNDING * Q of each other are equal up to the rounding of float64
# sums of size Q (``kernels/tree_split_small.cu`` defines the same SPLIT_TIE_ROUNDING)
TIE_ROUNDING = 1e-12
RANK_LIMIT = 32
# Nodes of 3 to SUBSET_LIMIT samples bound the gain of every split by the largest
# over all their two-sided partitions (_largest_partition_gain), so that the feature
# loop stops once no later feature can change the tie rule's pick.
SUBSET_LIMIT = 7
# Most stored entries a sparse X's node lists to visit only their features (_eval_node).
LISTING_LIMIT = 4096


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
def _tie_tolerance(tie_rtol, Q, parent):
    """How far below the best gain a gain still ties with it: ``tie_rtol`` of the node's impurity.

    The impurity is the node's weighted sum of squared deviations,
    ``Q - ||S||^2 / W`` (``parent`` is ``||S||^2 / W``), so the tolerance
    follows the node's own scale, not the scale of the targets' mean;
    ``TIE_ROUNDING * Q`` covers the rounding of gains formed from sums of
    size ``Q`` (a few ulps), so equal partitions still tie in a node whose
    impurity is tiny beside its mean.
    """
    impurity = Q - parent
    if impurity < 0.0:
        impurity = 0.0
    return tie_rtol * impurity + TIE_ROUNDING * Q


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
def _settled_with(cand_f, cand_g, cand_b, cand_ml, found, f, gain, b, ml, settled, tol):
    """Store feature ``f``'s best split as candidate ``found - 1``; True when the search
    can stop: the tie rule's pick among the candidates so far reaches ``settled``."""
    cand_f[found - 1] = f
    cand_g[found - 1] = gain
    cand_b[found - 1] = b
    cand_ml[found - 1] = ml
    if not gain >= settled:
        return False
    pick = _tie_pick(cand_g, found, tol)
    return pick >= 0 and cand_g[pick] >= settled


@njit(cache=True)
def searches_every_position(ns, n_candidates, p, min_samples_leaf):
    """Whether :func:`_eval_node` visits every position of a node's order, stopping at
    none: every feature is a candidate, and the node has more than ``SUBSET_LIMIT``
    samples (no early stop once the tie rule's pick is settled) and may split."""
    return n_candidates >= p and ns > SUBSET_LIMIT and ns >= 2 * min_samples_leaf


@njit(cache=True)
def _sum_and_square(total, squares, wy, y):
    """One sample's channel added to a node's sum (``w y``) and sum of ``w y^2``."""
    return total + wy, squares + wy * y


@njit(inline="always", cache=True)
def _node_totals8(rows, d0, ns, w, wy, y, S, LS):
    """A node's weight (returned), sums ``S[c]`` and ``LS[c] = sum w y_c^2`` (8 channels).

    Each sum runs over the node's positions in order, in its own register
    (:func:`._vector_sums.node_totals8`: the channels in the lanes of one
    vector): sixteen independent chains, where one sum of ``w ||y||^2`` over
    samples and channels would be a single chain of ``8 ns`` dependent
    additions. The CUDA twin sums the same channels in the same order, and
    ``Q`` adds them in channel order.
    """
    return node_totals8(rows, d0, ns, w, wy, y, S, LS)


@njit(cache=True)
def _list_node_features(entry_ptr, entry_features, row_of_col, cols, c0ff, ns, keys, p,
                        lo_bits, hi_bits, listing):
    """The features of a sparse X's node that can be non-constant, in visiting order.

    A feature without a stored entry in the node's rows has the code of 0.0
    in all of them (the stored entries are those of other codes): it is
    constant, and the visit of its position changes nothing. When the rows
    (global row of column ``c``: ``row_of_col[c]``, or ``c`` when
    ``row_of_col`` is empty) hold at most ``listing.shape[0]`` entries, each
    entry's feature ``f`` is written to ``listing`` as ``(q << 32) | f``,
    ``q`` its position in the node's visiting order (``feature_position_nb``,
    the inverse of the order's permutation),
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
            q = feature_position_nb(keys, f, p, lo_bits, hi_bits)
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
def _eval_node(data, at, columns, edges, rules, scratch, bits):
    """Best split of one node; returns (feature, bin, missing_left, gain), feature -1 if none.

    The arguments are the records of :mod:`._kernel_records`: ``data`` (a
    ``NodeData``), ``at`` (a ``NodeAt``), ``columns`` (a ``NodeColumns``),
    ``edges`` (an ``Edges``), ``rules`` (an ``EvalRules``), ``scratch`` (an
    ``EvalScratch``) and ``bits`` (a ``NodeBits``: where its words
    ``w_lo .. w_hi`` are not empty, a two-valued feature marked ``binary`` is
    scanned over its bit set, :func:`_scan_bits8`, with the same result as the
    one-pass scan; the node's data then at its columns, ``rows`` being
    ``cols``).
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
    (``listed``) than the node has samples, or with a single edge (two value
    codes), instead of sorting the node's codes; without random cuts, a
    two-valued feature of a node with 8 padded channels is scanned in one
    pass (:func:`_scan_binary8`), with the same sums. With ``use_columns`` (a sparse X whose node positions hold
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
    :func:`_prefetch_column`), which matters on text-like X with hundreds of
    thousands of features. Rules: see ``tree_split_small``.

    With ``at.pos_hi >= 0`` only the positions ``pos_lo .. pos_hi - 1`` of the
    visiting order are searched and the result is ``(found, 0, 0, tol)``: the
    range's ``found`` candidates (features not constant in the node, with
    their best splits) in ``cand_f``, ``cand_g``, ``cand_b``, ``cand_ml`` in
    visiting order, and the node's tie tolerance; the tie rule over the
    candidates of consecutive ranges in order (:func:`_tie_pick`) then
    picks what the whole search picks, for a node that visits every
    position without stopping early (:func:`searches_every_position`). A
    node too small or pure returns ``(-1, 0, 0, -inf)`` either way.
    """
    # the caller holds every array for the whole call (see gpurpo.tree._borrow)
    codes, cols, w, wy, y, rows, m = borrow_all(data)
    c0ff, ns, d0, seed, use_columns, pos_lo, pos_hi = at
    # a range of the visiting order: its candidates are the result (see below)
    part = pos_hi >= 0
    (
        subtracted_bin, listed, col_ptr, col_rows, col_codes, slot_of_row, node_codes, identity,
        entry_ptr, entry_features, row_of_col,
    ) = borrow_all(columns)
    edge_values, edge_ptr = borrow_all(edges)
    words, binary, mask, w_lo, w_hi = borrow_all(bits)
    use_bits = w_hi >= w_lo
    n_candidates, min_samples_leaf, random_split, missing_bin, tie_rtol, lo_bits, hi_bits = rules
    (
        S, code_buf, order, hist, bin_pos, LS, MS, keys, perm, cand_f, cand_g, cand_b, cand_ml,
        link, occupied, listing,
    ) = borrow_all(scratch)
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
    # every node visits the features in its own random order, whether it samples
    # n_candidates < p of them or visits all: among splits of equal gain the first
    # visited wins, so ties are broken uniformly at random (scikit-learn's rule)
    small = p <= SMALL_P
    if small:
        small_feature_order_nb(seed, p, perm)
    else:
        round_keys_nb(seed, keys)
    n_perm = perm.shape[0]
    use_sort = ns <= SORT_LIMIT
    # Visiting rule (scikit-learn's): the first n_candidates positions of the order,
    # constant features included, then further positions only until a first
    # non-constant feature is found. Two samples: every split that separates them has
    # the same gain (up to rounding, below the tie tolerance's TIE_ROUNDING * Q), so the
    # tie rule picks the first separating feature visited and the others need not be
    # evaluated.
    need = 1 if ns == 2 else n_candidates
    # Three to SUBSET_LIMIT samples: no feature's gain exceeds U = (the largest over all
    # partitions) + tol / 2, tol the tie tolerance (rounding is some 1e-15 Q, tol at least
    # TIE_ROUNDING * Q = 1e-12 Q).
    # Once the candidate the tie rule picks has a gain of at least U - tol, it is picked
    # whatever the later features give (the best can only rise to U, the tie window's
    # floor to U - tol, and the candidates before it are below the floor already), so the
    # loop stops there with the same result as evaluating every candidate.
    tol = _tie_tolerance(tie_rtol, Q, parent)
    settled = np.inf
    if 3 <= ns and ns <= SUBSET_LIMIT and not random_split:
        settled = _largest_partition_gain(
            rows, d0, ns, w, wy, W, S, m, parent, min_samples_leaf, LS) - 0.5 * tol
    # nodes that may stop after a few features draw their candidates a few at a time
    batch_cap = n_perm if settled == np.inf else 8
    n_listed = -1
    if entry_ptr.shape[0] > 0 and not small:
        n_listed = _list_node_features(entry_ptr, entry_features, row_of_col, cols, c0ff, ns,
                                       keys, p, lo_bits, hi_bits, listing)
    # two-valued features (one edge) of 8-channel nodes take a one-pass scan
    # (_scan_binary8) when the best split is searched
    two_valued = mp == 8 and not random_split
    found = 0
    pos = np.int64(pos_lo if part else 0)
    stop = pos_hi if part else p
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
        elif not (pos < stop and (pos < n_candidates or found == 0)):
            break
        elif small:
            f = perm[pos]
        else:
            # the visiting order in batches (independent hash chains overlap in the
            # CPU) of the positions still to visit
            if slot == n_batch:
                n_batch = min(batch_cap, stop - pos)
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
        # a two-valued feature (one edge) with a subtracted bin takes the table path at
        # every node size too: its table sums the samples of its other code only
        two = edge_ptr[f + 1] - edge_ptr[f] == 1
        sort_f = use_sort and not short and not (two and z >= 0)
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
        if two_valued and two and not columns:
            if use_bits and binary[f]:
                state, best_gain, best_b, best_ml = _scan_bits8(
                    words[f], mask, w_lo, w_hi, ns, w, wy, z == 0 and not sort_f, MS, W, S, m,
                    parent, min_samples_leaf)
            else:
                state, best_gain, best_b, best_ml = _scan_binary8(
                    src, src_f, src_cols, src_c0, ns, rows, d0, w, wy, z == 0 and not sort_f,
                    MS, W, S, m, parent, min_samples_leaf)
            if state == 0:
                continue
            if state == 1:
                found += 1
                if _settled_with(cand_f, cand_g, cand_b, cand_ml, found, f, best_gain, best_b,
                                 best_ml, settled, tol):
                    break
                continue
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
        if _settled_with(cand_f, cand_g, cand_b, cand_ml, found, f, best_gain, best_b, best_ml,
                         settled, tol):
            break
    if part:
        # the range's candidates, in visiting order, are cand_*[:found]
        return found, 0, 0, tol
    # ties across features: gains within tol of the best, the first visited wins
    pick = _tie_pick(cand_g, found, tol)
    if pick < 0:
        return -1, 0, 0, -np.inf
    return cand_f[pick], cand_b[pick], cand_ml[pick], cand_g[pick]
