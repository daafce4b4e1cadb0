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
from numba import njit, prange

from gpurpo.tree._random import feature_at_nb, round_keys_nb, uniform_at_nb

__all__ = [
    "histograms",
    "split_small_nodes",
    "accumulate_leaves_dense",
    "accumulate_leaves_csr",
    "apply_trees",
    "sum_leaves_dense",
    "sum_leaves_csr",
    "SORT_LIMIT",
]

# Nodes with at most this many samples sort their codes (insertion sort)
# instead of filling a per-bin table in :func:`split_small_nodes`.
SORT_LIMIT = 32


@njit(parallel=True, cache=True)
def histograms(codes, sample_indices, node_ranges, node_features, node_tree, weights, targets, out):
    n_nodes = node_features.shape[0]
    k = node_features.shape[1]
    n_bins = out.shape[2]
    n_channels = out.shape[3]
    m = targets.shape[2]
    with_count = n_channels == m + 2
    for task in prange(n_nodes * k):
        i = task // k
        j = task - i * k
        f = node_features[i, j]
        if f >= 0:
            t = node_tree[i]
            acc = np.zeros((n_bins, n_channels), dtype=np.float64)
            row = codes[f]
            for e in range(node_ranges[i, 0], node_ranges[i, 1]):
                s = sample_indices[e]
                w = np.float64(weights[t, s])
                b = row[s]
                acc[b, 0] += w
                for c in range(m):
                    acc[b, 1 + c] += w * targets[s, t, c]
                if with_count:
                    acc[b, n_channels - 1] += 1.0
            for b in range(n_bins):
                for c in range(n_channels):
                    out[i, j, b, c] = acc[b, c]


@njit(cache=True)
def _feistel_half(p):
    bits = 2
    while (1 << bits) < p:
        bits += 1
    if bits % 2 == 1:
        bits += 1
    return bits // 2


@njit(cache=True)
def _gain(WL, LS, W, S, m, parent):
    WR = W - WL
    left = 0.0
    right = 0.0
    for c in range(m):
        left += LS[c] * LS[c]
        r = S[c] - LS[c]
        right += r * r
    return left / WL + right / WR - parent


@njit(cache=True)
def _random_cut(thresholds, f, bmin, bmax, u):
    # Largest bin b in [bmin, bmax - 1] with thresholds[f, b] <= lo + u (hi - lo),
    # lo = thresholds[f, bmin], hi = thresholds[f, bmax - 1]; bmax when bmin == bmax.
    if bmin == bmax:
        return bmax
    lo = thresholds[f, bmin]
    hi = thresholds[f, bmax - 1]
    cut_value = lo + u * (hi - lo)
    b = bmin
    while b + 1 <= bmax - 1 and thresholds[f, b + 1] <= cut_value:
        b += 1
    return b


@njit(parallel=True, cache=True)
def split_small_nodes(
    codes,
    sample_indices,
    node_ranges,
    node_tree,
    node_seed,
    weights,
    targets,
    thresholds,
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
    p = codes.shape[0]
    m = targets.shape[2]
    n_bins = missing_bin + 1
    half = _feistel_half(p)
    mask = (1 << half) - 1
    for i in prange(n_nodes):
        out_feature[i] = -1
        out_bin[i] = 0
        out_missing_left[i] = 0
        out_gain[i] = -np.inf
        start = node_ranges[i, 0]
        ns = node_ranges[i, 1] - start
        if ns < 2 or ns < 2 * min_samples_leaf:
            continue
        t = node_tree[i]
        seed = node_seed[i]
        w = np.empty(ns, dtype=np.float64)
        wy = np.empty((ns, m), dtype=np.float64)
        S = np.zeros(m, dtype=np.float64)
        W = 0.0
        Q = 0.0
        s0 = sample_indices[start]
        pure = True
        for a in range(ns):
            s = sample_indices[start + a]
            wa = np.float64(weights[t, s])
            w[a] = wa
            W += wa
            for c in range(m):
                y = targets[s, t, c]
                if y != targets[s0, t, c]:
                    pure = False
                v = wa * y
                wy[a, c] = v
                S[c] += v
                Q += v * y
        if pure:
            continue
        parent = 0.0
        for c in range(m):
            parent += S[c] * S[c]
        parent /= W
        keys = np.empty(4, dtype=np.uint64)
        round_keys_nb(seed, keys)
        use_sort = ns <= SORT_LIMIT
        code_buf = np.empty(ns, dtype=np.int64)
        order = np.empty(ns, dtype=np.int64)
        hist = np.zeros((n_bins, m + 2), dtype=np.float64)
        LS = np.empty(m, dtype=np.float64)
        MS = np.empty(m, dtype=np.float64)
        n_slots = min(n_candidates, p)
        cand_f = np.full(n_slots, -1, dtype=np.int64)
        cand_g = np.full(n_slots, -np.inf, dtype=np.float64)
        cand_b = np.zeros(n_slots, dtype=np.int64)
        cand_ml = np.zeros(n_slots, dtype=np.int64)
        found = 0
        pos = 0
        while found < n_candidates and pos < p:
            if n_candidates >= p:
                f = pos
            else:
                f = feature_at_nb(keys, pos, p, half, mask)
            u = uniform_at_nb(seed, pos) if random_split else 0.0
            pos += 1
            row = codes[f]
            # ---- per-feature statistics: missing part and occupied range
            Wm = 0.0
            n_miss = 0
            for c in range(m):
                MS[c] = 0.0
            if use_sort:
                for a in range(ns):
                    code_buf[a] = np.int64(row[sample_indices[start + a]])
                    order[a] = a
                for a in range(1, ns):
                    cur = order[a]
                    key = code_buf[cur]
                    z = a - 1
                    while z >= 0 and code_buf[order[z]] > key:
                        order[z + 1] = order[z]
                        z -= 1
                    order[z + 1] = cur
                if code_buf[order[0]] == code_buf[order[ns - 1]]:
                    continue
                nn = ns
                while nn > 0 and code_buf[order[nn - 1]] == missing_bin:
                    nn -= 1
                for a in range(nn, ns):
                    idx = order[a]
                    Wm += w[idx]
                    for c in range(m):
                        MS[c] += wy[idx, c]
                n_miss = ns - nn
                bmin = code_buf[order[0]] if nn > 0 else missing_bin
                bmax = code_buf[order[nn - 1]] if nn > 0 else missing_bin
            else:
                bmin = missing_bin
                bmax = -1
                for a in range(ns):
                    b = np.int64(row[sample_indices[start + a]])
                    hist[b, 0] += w[a]
                    for c in range(m):
                        hist[b, 1 + c] += wy[a, c]
                    hist[b, m + 1] += 1.0
                    if b != missing_bin:
                        if b < bmin:
                            bmin = b
                        if b > bmax:
                            bmax = b
                n_miss = np.int64(hist[missing_bin, m + 1])
                Wm = hist[missing_bin, 0]
                for c in range(m):
                    MS[c] = hist[missing_bin, 1 + c]
                nn = ns - n_miss
                if (nn == 0) or (bmin == bmax and n_miss == 0):
                    for b in range(bmin, bmax + 1):
                        for c in range(m + 2):
                            hist[b, c] = 0.0
                    for c in range(m + 2):
                        hist[missing_bin, c] = 0.0
                    continue
            found += 1
            best_gain = -np.inf
            best_b = 0
            best_ml = 0
            cut = -1
            if random_split:
                cut = _random_cut(thresholds, f, bmin, bmax, u)
            # ---- scan the split points "code <= b" of this feature
            WL = 0.0
            nL = 0
            for c in range(m):
                LS[c] = 0.0
            a_first = 0 if use_sort else bmin
            a_last = nn - 1 if use_sort else bmax
            for a in range(a_first, a_last + 1):
                if use_sort:
                    idx = order[a]
                    b = code_buf[idx]
                    WL += w[idx]
                    nL += 1
                    for c in range(m):
                        LS[c] += wy[idx, c]
                    next_code = code_buf[order[a + 1]] if a < nn - 1 else bmax + 1
                    if next_code == b:
                        continue
                    if random_split:
                        if not (b <= cut and cut < next_code):
                            continue
                        b = cut
                else:
                    b = a
                    cnt = np.int64(hist[b, m + 1])
                    if cnt > 0:
                        WL += hist[b, 0]
                        nL += cnt
                        for c in range(m):
                            LS[c] += hist[b, 1 + c]
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
                    if g > best_gain:
                        best_gain = g
                        best_b = b
                        if n_miss == 0:
                            best_ml = 1 if WL >= W - WL else 0
                        else:
                            best_ml = 0
                # missing values to the left
                if n_miss > 0 and not at_end:
                    nLm = nL + n_miss
                    if nLm >= min_samples_leaf and ns - nLm >= min_samples_leaf:
                        for c in range(m):
                            LS[c] += MS[c]
                        g = _gain(WL + Wm, LS, W, S, m, parent)
                        for c in range(m):
                            LS[c] -= MS[c]
                        if g > best_gain:
                            best_gain = g
                            best_b = b
                            best_ml = 1
            if not use_sort:
                for b in range(bmin, bmax + 1):
                    for c in range(m + 2):
                        hist[b, c] = 0.0
                for c in range(m + 2):
                    hist[missing_bin, c] = 0.0
            cand_f[found - 1] = f
            cand_g[found - 1] = best_gain
            cand_b[found - 1] = best_b
            cand_ml[found - 1] = best_ml
        # ties across features: gains within tie_rtol * Q of the best, lowest feature wins
        gmax = -np.inf
        for j in range(found):
            if cand_g[j] > gmax:
                gmax = cand_g[j]
        if gmax > -np.inf:
            floor = gmax - tie_rtol * Q
            pick = -1
            for j in range(found):
                if cand_g[j] >= floor and (pick < 0 or cand_f[j] < cand_f[pick]):
                    pick = j
            out_feature[i] = cand_f[pick]
            out_bin[i] = cand_b[pick]
            out_missing_left[i] = cand_ml[pick]
            out_gain[i] = cand_g[pick]


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
                x = X[i, feature[node]]
                if np.isnan(x):
                    go_left = missing_left[node] != 0
                else:
                    go_left = x <= threshold[node]
                node = left[node] if go_left else right[node]
            out[i, t] = node


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
