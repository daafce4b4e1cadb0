"""numba twin of ``kernels/tree_score.cu``: best split of every histogram slot.

Variance reduction of the projected outputs (Joly, Geurts & Wehenkel 2014) or the
second-order (Newton) gain of XGBoost (Chen & Guestrin 2016) from prefix sums over the
bins; Extra-Trees draw one random cut per slot (Geurts, Ernst & Wehenkel 2006).
:func:`launch` is the registered implementation: it unpacks the edge table record of
:mod:`gpurpo.tree._records` into the compiled kernel :func:`score_histograms`.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from gpurpo.backend import cpu_helper
from gpurpo.tree._borrow import borrow_all
from gpurpo.tree._numba._shared import N_CHUNKS, _side_weight
from gpurpo.tree.binning._edge_lookup import _random_cut


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
    best_bin = _random_cut(edge_values, edge_ptr, row, bmin, bmax, u)
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


def launch(hist, node_features, n_outputs, min_samples_leaf, random_split, uniforms, edges,
           newton, reg_lambda, min_child_weight, out_gain, out_bin, out_missing_left,
           out_nonconstant):
    """``tree_score_histograms`` on the CPU: :func:`score_histograms` on the arrays of
    ``edges`` (a typed :class:`~gpurpo.tree._records.EdgeTable`). Inside
    :func:`gpurpo.backend.serial_cpu_kernels` the kernel's single-threaded twin runs."""
    cpu_helper(score_histograms)(
        hist, node_features, n_outputs, min_samples_leaf, random_split, uniforms,
        edges.edge_values, edges.edge_ptr, newton, reg_lambda, min_child_weight, out_gain,
        out_bin, out_missing_left, out_nonconstant,
    )


def launch_best_slot(hist, node_features, n_outputs, min_samples_leaf, random_split, uniforms,
                     edges, newton, reg_lambda, min_child_weight, q, impure, order, node_pos,
                     has_order, has_pos, n_features, tie_rtol, tie_rounding, node_done, out_gain,
                     out_bin, out_missing_left, out_nonconstant, out):
    """``tree_score_best_slot`` on the CPU: :func:`launch`, then :func:`best_slot` on its
    outputs (``node_done``, the CUDA kernel's counters, is not read)."""
    launch(hist, node_features, n_outputs, min_samples_leaf, random_split, uniforms, edges,
           newton, reg_lambda, min_child_weight, out_gain, out_bin, out_missing_left,
           out_nonconstant)
    cpu_helper(best_slot)(hist, q, impure, out_gain, out_bin, out_missing_left, node_features,
                          order, out_nonconstant, node_pos, n_outputs, newton, has_order,
                          has_pos, n_features, tie_rtol, tie_rounding, out)


@njit(parallel=True, cache=True)
def best_slot(hist, q, impure, gain, bins, missing_left, node_features, order, nonconstant,
              node_pos, m, newton, has_order, has_pos, n_features, tie_rtol, tie_rounding, out):
    """The best slot of every node, with its tie tolerance (``kernels/tree_score.cu``'s
    ``tree_best_slot``: the same sums in the same order)."""
    n_nodes, k = gain.shape
    n_bins = hist.shape[2]
    for i in prange(n_nodes):
        qi = q[i]
        if newton:
            tol = tie_rtol * qi
        else:
            w = 0.0
            for b in range(n_bins):
                w += np.float64(hist[i, 0, b, 0])
            parent = 0.0
            for c in range(1, m + 1):
                s = 0.0
                for b in range(n_bins):
                    s += np.float64(hist[i, 0, b, c])
                parent += s * s
            parent = parent / (w if w > 0.0 else 1.0)
            spread = qi - parent
            tol = tie_rtol * (spread if spread > 0.0 else 0.0) + tie_rounding * qi
        gmax = -np.inf
        for j in range(k):
            if gain[i, j] > gmax:
                gmax = gain[i, j]
        pick = -1
        pick_order = 0
        later = False
        first_only = False
        if has_pos and impure[i]:
            any_nonconstant = False
            for j in range(k):
                any_nonconstant = any_nonconstant or nonconstant[i, j] != 0
            later = (not any_nonconstant) and node_pos[i] + k < n_features
            first_only = any_nonconstant and node_pos[i] > 0
        if first_only:
            for j in range(k):
                if not nonconstant[i, j]:
                    continue
                o = order[i, j] if has_order else j
                if pick < 0 or o < pick_order:
                    pick = j
                    pick_order = o
            if pick >= 0 and not (gain[i, pick] > -np.inf):
                pick = -1
        elif impure[i] and gmax > -np.inf:
            bar = gmax - tol
            for j in range(k):
                if not (gain[i, j] >= bar and gain[i, j] > -np.inf):
                    continue
                o = order[i, j] if has_order else j
                if pick < 0 or o < pick_order:
                    pick = j
                    pick_order = o
        if later:
            out[i, 0] = -2.0
            out[i, 1] = 0.0
            out[i, 2] = 0.0
            out[i, 3] = -np.inf
        elif pick < 0:
            out[i, 0] = -1.0
            out[i, 1] = 0.0
            out[i, 2] = 0.0
            out[i, 3] = -np.inf
        else:
            out[i, 0] = node_features[i, pick]
            out[i, 1] = bins[i, pick]
            out[i, 2] = missing_left[i, pick]
            out[i, 3] = gain[i, pick]
