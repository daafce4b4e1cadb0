"""The per-feature scans of the exact node split search (numba).

One candidate feature of a node (:func:`._node_split._eval_node`) is scanned for
its best split point "code <= b" by the variance-reduction gain of Joly, Geurts &
Wehenkel (2014) on the projected outputs, with missing values sent to either side:
from the node's samples sorted by code (:func:`_scan_sorted8`), from a per-bin
table of the occupied bins (:func:`_fill_table8`, :func:`_fill_table_skipping`,
:func:`_fill_table_columns`, then :func:`_scan_table8` or, over the bins marked in
a bit set, :func:`_scan_occupied8`), or in one pass for a two-valued feature
(:func:`_scan_binary8`). A table row whose bin holds most samples is derived from
the node's totals (:func:`_derive_subtracted_bin`, :func:`_derive_occupied8`).
The ``8`` variants keep the running sums of nodes with 8 padded channels in
scalars; every path makes the same additions in the same order, so the same bits.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from gpurpo.tree._numba._shared import _count_trailing_zeros, _popcount, _side_weight


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


@njit(inline="always", cache=True)
def _scan_binary8(src, src_f, src_cols, src_c0, ns, rows, d0, w, wy, derive, MS, W, S, m, parent,
                  min_samples_leaf):
    """Best split of a two-valued feature (codes 0 and 1, one edge) of a node with 8 padded
    channels, in one pass over the node's codes instead of a sort or a table.

    Returns ``(state, gain, bin, missing_left)``: state -1 when the node holds
    missing codes of the feature (the caller takes the generic scan), 0 when the
    feature is constant in the node, 1 when its only split point, ``code <= 0``,
    was scored. The left sums are those the generic paths form, with the same
    additions in the same order, so the same bits: the samples coded 0 summed
    in position order (the stable sort's order, and a table row's), or, with
    ``derive`` (the table path of a feature whose subtracted bin is 0), the
    node's totals minus the samples coded 1 summed in position order
    (:func:`_derive_subtracted_bin`), each taken into the scan's running sums
    from 0.0 (:func:`_take_row8`).
    """
    acc = np.int64(1) if derive else np.int64(0)
    r0 = r1 = r2 = r3 = r4 = r5 = r6 = r7 = 0.0
    rw = 0.0
    n_acc = 0
    n_miss = 0
    codes_f = src[src_f]
    for a in range(ns):
        # unsigned positions: no negative-index fix-ups in this hot loop
        b = np.int64(codes_f[np.uint64(src_cols[np.uint64(src_c0 + a)])])
        if b == acc:
            ra = rows[np.uint64(d0 + a)]
            rw += w[ra]
            r0, r1, r2, r3, r4, r5, r6, r7 = _add_row8(r0, r1, r2, r3, r4, r5, r6, r7, wy, ra)
            n_acc += 1
        elif b > 1:
            n_miss += 1
    if n_miss > 0:
        return -1, -np.inf, 0, 0
    if n_acc == 0 or n_acc == ns:
        return 0, -np.inf, 0, 0
    return _binary_split8(n_acc, rw, r0, r1, r2, r3, r4, r5, r6, r7, ns, derive, MS, W, S, m,
                          parent, min_samples_leaf)


@njit(inline="always", cache=True)
def _binary_split8(n_acc, rw, r0, r1, r2, r3, r4, r5, r6, r7, ns, derive, MS, W, S, m, parent,
                   min_samples_leaf):
    """The one split point of a two-valued feature from the sums of its ``n_acc`` samples of
    the summed code (``0 < n_acc < ns``; see :func:`_scan_binary8`); returns ``(1, gain,
    bin, missing_left)``."""
    n_left = n_acc
    if derive:
        n_left = ns - n_acc
        r0 = 0.0 + (S[0] - (0.0 + r0))
        r1 = 0.0 + (S[1] - (0.0 + r1))
        r2 = 0.0 + (S[2] - (0.0 + r2))
        r3 = 0.0 + (S[3] - (0.0 + r3))
        r4 = 0.0 + (S[4] - (0.0 + r4))
        r5 = 0.0 + (S[5] - (0.0 + r5))
        r6 = 0.0 + (S[6] - (0.0 + r6))
        r7 = 0.0 + (S[7] - (0.0 + r7))
        rw = 0.0 + (W - (0.0 + rw))
    best_gain, best_b, best_ml, r0, r1, r2, r3, r4, r5, r6, r7 = _score_point8(
        0, False, n_left, rw, r0, r1, r2, r3, r4, r5, r6, r7, ns, MS, 0.0, 0, W, S, m, parent,
        min_samples_leaf, -np.inf, 0, 0)
    return 1, best_gain, best_b, best_ml


@njit(cache=True)
def _scan_bits8(bits, mask, w_lo, w_hi, ns, w, wy, derive, MS, W, S, m, parent,
                min_samples_leaf):
    """:func:`_scan_binary8` of a two-valued feature without missing codes from bit sets.

    Bit ``c`` of ``bits`` (uint64 words) is set where the feature's code of
    column ``c`` is 1; ``mask`` holds the node's columns (within words
    ``w_lo .. w_hi``), whose data are ``w[c]``, ``wy[c]``, and whose positions
    hold increasing columns (the subtree kernel's codes block: a stable
    partition of the identity keeps each node's columns increasing). The
    summed samples (those coded 1 with ``derive``, else 0) are counted by
    popcount first, so that a feature constant in the node (most of them on
    text-like data) costs the node's words; the others are summed in
    increasing columns, the position order of :func:`_scan_binary8`: the same
    additions in the same order, so the same bits. Returns ``(state, gain,
    bin, missing_left)`` with the states of :func:`_scan_binary8` but -1.
    """
    flip = np.uint64(0) if derive else ~np.uint64(0)
    n_acc = 0
    for k in range(w_lo, w_hi + 1):
        n_acc += _popcount((bits[k] ^ flip) & mask[k])
    if n_acc == 0 or n_acc == ns:
        return 0, -np.inf, 0, 0
    r0 = r1 = r2 = r3 = r4 = r5 = r6 = r7 = 0.0
    rw = 0.0
    for k in range(w_lo, w_hi + 1):
        x = (bits[k] ^ flip) & mask[k]
        while x != np.uint64(0):
            c = np.uint64(k * 64) + _count_trailing_zeros(x)
            x &= x - np.uint64(1)
            rw += w[c]
            r0, r1, r2, r3, r4, r5, r6, r7 = _add_row8(r0, r1, r2, r3, r4, r5, r6, r7, wy, c)
    return _binary_split8(n_acc, rw, r0, r1, r2, r3, r4, r5, r6, r7, ns, derive, MS, W, S, m,
                          parent, min_samples_leaf)


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
