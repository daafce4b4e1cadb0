// Exact best split of small nodes from their samples (contract:
// ``tree_split_small`` in gpurpo/tree/kernels.py; CPU twin:
// ``split_small_nodes`` in gpurpo/tree/_kernels_cpu.py).
//
// One block per node (the launcher uses one warp; blocks loop over nodes;
// at most SPLIT_MAX_THREADS threads). The block
//   1. sums the node's weights W, weighted targets S and Q = sum w ||y||^2
//      (float64, in sample order like the CPU kernel) and detects pure nodes;
//   2. visits candidate features in the node's pseudo-random order
//      (feature_at, the counter-based Feistel permutation of
//      gpurpo/tree/_random.py, ported bit for bit), blockDim positions at a
//      time: each thread tests one position for a constant feature, then the
//      first n_candidates non-constant ones (in position order) are kept
//      (one for two-sample nodes, as in the CPU kernel);
//   3. for each kept feature: counts samples per bin (shared memory), scans
//      the counts in parallel (a span of bins per thread, then a scan over the
//      threads), orders the samples by bin with a stable counting sort done
//      a chunk of blockDim samples at a time (no thread works alone over the
//      bins or the samples), computes the running left sums of every
//      occupied bin in exactly the CPU kernel's summation order with one
//      pass over the sorted samples per channel (threads = channels, plus
//      one for the weights; sorted order for nodes of at most ``sort_limit``
//      samples, per-bin sums otherwise, including the CPU's "LS += MS;
//      LS -= MS" round trip after bins whose missing-left side is scored),
//      then evaluates every candidate bin in parallel (one thread per
//      occupied bin) from those sums, so gains are bit-identical; products
//      and sums use __dmul_rn/__dadd_rn so that no fused multiply-add
//      changes the rounding;
//   4. reduces the best (gain, bin, missing side) of the feature over the
//      block (ties: lowest bin, then missing right), and finally applies the
//      cross-feature tie rule (gains within tie_rtol * Q of the best: the
//      first feature in the visiting order wins).
// Scratch (per block, allocated by the launcher): the node's sample ids sorted
// by the current feature's code and those codes (max_ns each), S (m doubles),
// the running left sums ((SPLIT_MAX_BINS + 1) x m doubles: one row per bin,
// the last for the missing run) and the per-feature candidates (cand_stride
// entries).

#define SPLIT_MAX_THREADS 256
#define SPLIT_MAX_BINS 256

__device__ __forceinline__ unsigned long long split_hash64(unsigned long long x)
{
    unsigned long long z = x + 0x9E3779B97F4A7C15ULL;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

__device__ int split_feature_at(const unsigned long long* keys, long long pos, int p, int half,
                                unsigned long long mask)
{
    if (p == 1) return 0;
    unsigned long long x = (unsigned long long)pos;
    for (;;) {
        unsigned long long left = x >> half;
        unsigned long long right = x & mask;
        for (int r = 0; r < 4; ++r) {
            const unsigned long long next_right = left ^ (split_hash64(keys[r] ^ right) & mask);
            left = right;
            right = next_right;
        }
        x = (left << half) | right;
        if (x < (unsigned long long)p) return (int)x;
    }
}

__device__ __forceinline__ double split_uniform_at(unsigned long long seed, long long pos)
{
    const unsigned long long h =
        split_hash64(split_hash64(seed ^ 0xA0761D6478BD642FULL) + (unsigned long long)pos);
    return (double)(h >> 11) * 0x1p-53;
}

__device__ __forceinline__ double split_neg_inf()
{
    return __longlong_as_double((long long)0xFFF0000000000000ULL);
}

// Largest bin b in [bmin, bmax - 1] with thresholds[f, b] <= lo + u (hi - lo).
__device__ int split_random_cut(const double* thresholds, int n_thr, int f, int bmin, int bmax, double u)
{
    if (bmin == bmax) return bmax;
    const double* row = thresholds + (long long)f * n_thr;
    const double lo = row[bmin];
    const double hi = row[bmax - 1];
    const double cut_value = __dadd_rn(lo, __dmul_rn(u, hi - lo));
    int b = bmin;
    while (b + 1 <= bmax - 1 && row[b + 1] <= cut_value) ++b;
    return b;
}

// Is (g, key) better than (g2, key2)? Larger gain; equal gains: smaller key.
__device__ __forceinline__ bool split_better(double g, int key, double g2, int key2)
{
    return g > g2 || (g == g2 && key < key2);
}

extern "C" __global__ void tree_split_small(
    const unsigned char* __restrict__ codes,
    const int* __restrict__ sample_indices,
    const long long* __restrict__ node_ranges,
    const int* __restrict__ node_tree,
    const unsigned long long* __restrict__ node_seed,
    const float* __restrict__ weights,
    const float* __restrict__ targets,
    const double* __restrict__ thresholds,
    long long n,
    int p,
    int n_trees,
    int m,
    long long n_nodes,
    int n_candidates,
    int min_samples_leaf,
    int random_split,
    int missing_bin,
    double tie_rtol,
    int sort_limit,
    long long max_ns,
    int cand_stride,
    int* order_buf,
    unsigned char* code_buf,
    double* s_buf,
    double* ls_buf,
    int* cand_f,
    double* cand_g,
    int* cand_b,
    unsigned char* cand_ml,
    int* out_feature,
    int* out_bin,
    unsigned char* out_missing_left,
    double* out_gain)
{
    __shared__ int cnt[SPLIT_MAX_BINS];
    __shared__ int run_start[SPLIT_MAX_BINS];
    __shared__ int nl_at[SPLIT_MAX_BINS];
    __shared__ int pos_feature[SPLIT_MAX_THREADS];
    __shared__ int pos_nonconst[SPLIT_MAX_THREADS];
    __shared__ int sel_feature[SPLIT_MAX_THREADS];
    __shared__ int sel_pos[SPLIT_MAX_THREADS];
    __shared__ double red_g[SPLIT_MAX_THREADS];
    __shared__ int red_key[SPLIT_MAX_THREADS];
    __shared__ double wl_at[SPLIT_MAX_BINS];
    __shared__ double sh_W, sh_Q, sh_parent, sh_Wm;
    __shared__ int sh_n_sel, sh_et_bin, sh_cut;
    // the bin scan of step 3a reuses arrays that are idle at that point
    int* scan_cnt = red_key;
    int* scan_min = pos_feature;
    int* scan_max = pos_nonconst;

    const int tid = threadIdx.x;
    const int nthreads = blockDim.x;
    // the launcher never does this: at most SPLIT_MAX_THREADS, a power of two (reduction)
    if (nthreads > SPLIT_MAX_THREADS || (nthreads & (nthreads - 1)) != 0) __trap();
    const double NEG_INF = split_neg_inf();
    const int n_thr = missing_bin;  // thresholds has shape (p, n_bins - 1)
    int half = 1;
    {
        int bits = 2;
        while ((1LL << bits) < (long long)p) ++bits;
        if (bits % 2 == 1) ++bits;
        half = bits / 2;
    }
    const unsigned long long mask = (1ULL << half) - 1ULL;

    int* sorted = order_buf + (long long)blockIdx.x * max_ns;
    unsigned char* ccode = code_buf + (long long)blockIdx.x * max_ns;
    double* S = s_buf + (long long)blockIdx.x * m;
    double* ls = ls_buf + (long long)blockIdx.x * (SPLIT_MAX_BINS + 1) * m;
    int* c_f = cand_f + (long long)blockIdx.x * cand_stride;
    double* c_g = cand_g + (long long)blockIdx.x * cand_stride;
    int* c_b = cand_b + (long long)blockIdx.x * cand_stride;
    unsigned char* c_ml = cand_ml + (long long)blockIdx.x * cand_stride;

    for (long long node = blockIdx.x; node < n_nodes; node += gridDim.x) {
        const long long start = node_ranges[2 * node];
        const long long ns = node_ranges[2 * node + 1] - start;
        if (ns < 2 || ns < 2LL * min_samples_leaf) {  // uniform over the block
            if (tid == 0) {
                out_feature[node] = -1;
                out_bin[node] = 0;
                out_missing_left[node] = 0;
                out_gain[node] = NEG_INF;
            }
            continue;
        }
        const int t = node_tree[node];
        const unsigned long long seed = node_seed[node];
        const int* samples = sample_indices + start;
        const float* wrow = weights + (long long)t * n;
        const long long ystride = (long long)n_trees * m;
        const float* ybase = targets + (long long)t * m;

        // ---- 1. totals (sample order, as the CPU kernel) and purity
        for (int c = tid; c < m; c += nthreads) {
            double acc = 0.0;
            for (long long a = 0; a < ns; ++a) {
                const long long s = samples[a];
                acc = __dadd_rn(acc, __dmul_rn((double)wrow[s], (double)ybase[s * ystride + c]));
            }
            S[c] = acc;
        }
        if (tid == 0) {
            double W = 0.0, Q = 0.0;
            for (long long a = 0; a < ns; ++a) {
                const long long s = samples[a];
                const double wa = (double)wrow[s];
                W = __dadd_rn(W, wa);
                for (int c = 0; c < m; ++c) {
                    const double y = (double)ybase[s * ystride + c];
                    Q = __dadd_rn(Q, __dmul_rn(__dmul_rn(wa, y), y));
                }
            }
            sh_W = W;
            sh_Q = Q;
        }
        for (int b = tid; b < SPLIT_MAX_BINS; b += nthreads) cnt[b] = 0;
        int differs = 0;
        {
            const long long s0 = samples[0];
            const long long total = ns * m;
            for (long long q = tid; q < total && !differs; q += nthreads) {
                const long long a = q / m;
                const int c = (int)(q % m);
                if (ybase[(long long)samples[a] * ystride + c] != ybase[s0 * ystride + c]) differs = 1;
            }
        }
        const int impure = __syncthreads_or(differs);  // also publishes S, W, Q
        if (!impure) {
            if (tid == 0) {
                out_feature[node] = -1;
                out_bin[node] = 0;
                out_missing_left[node] = 0;
                out_gain[node] = NEG_INF;
            }
            __syncthreads();  // S of this node is not read again before it is rewritten
            continue;
        }
        if (tid == 0) {
            double parent = 0.0;
            for (int c = 0; c < m; ++c) parent = __dadd_rn(parent, __dmul_rn(S[c], S[c]));
            sh_parent = parent / sh_W;
        }
        __syncthreads();
        const double W = sh_W;
        const double parent = sh_parent;

        unsigned long long keys[4];
        for (int r = 0; r < 4; ++r) keys[r] = split_hash64(seed ^ (0xD6E8FEB86659FD93ULL * (unsigned long long)(r + 1)));

        // ---- 2. visit positions, blockDim at a time
        int found = 0;
        // two samples: every split that separates them has the same gain (up to
        // rounding far below the tie tolerance), so, as the CPU kernel, stop at
        // the first separating (non-constant) feature visited
        const int need = ns == 2 ? 1 : n_candidates;
        for (long long base = 0; found < need && base < p; base += nthreads) {
            const long long pos = base + tid;
            int f = -1, nonconst = 0;
            if (pos < p) {
                f = n_candidates >= p ? (int)pos : split_feature_at(keys, pos, p, half, mask);
                const unsigned char* row = codes + (long long)f * n;
                const unsigned char first = row[samples[0]];
                for (long long a = 1; a < ns; ++a) {
                    if (row[samples[a]] != first) {
                        nonconst = 1;
                        break;
                    }
                }
            }
            pos_feature[tid] = f;
            pos_nonconst[tid] = nonconst;
            __syncthreads();
            if (tid == 0) {
                int n_sel = 0;
                for (int j = 0; j < nthreads && base + j < p; ++j) {
                    if (pos_nonconst[j] && found + n_sel < need) {
                        sel_feature[n_sel] = pos_feature[j];
                        sel_pos[n_sel] = (int)(base + j);
                        ++n_sel;
                    }
                }
                sh_n_sel = n_sel;
            }
            __syncthreads();
            const int n_sel = sh_n_sel;

            // ---- 3. evaluate the selected features in order (cnt is zero here)
            for (int q = 0; q < n_sel; ++q) {
                const int fq = sel_feature[q];
                const unsigned char* row = codes + (long long)fq * n;
                for (long long a = tid; a < ns; a += nthreads) {
                    const unsigned char code = row[samples[a]];
                    ccode[a] = code;
                    atomicAdd(&cnt[code], 1);
                }
                __syncthreads();
                // 3a. exclusive prefix sums of the bin counts (run_start) and the
                // occupied range [bmin, bmax] of the non-missing bins: each thread
                // takes a span of bins, then an inclusive scan over the threads
                // (Hillis-Steele, in the shared arrays scan_*; exact integers)
                {
                    const int span = (SPLIT_MAX_BINS + nthreads - 1) / nthreads;
                    const int b_lo = min(tid * span, SPLIT_MAX_BINS);
                    const int b_hi = min(b_lo + span, SPLIT_MAX_BINS);
                    int local = 0, lmin = missing_bin, lmax = -1;
                    for (int b = b_lo; b < b_hi; ++b) {
                        local += cnt[b];
                        if (cnt[b] > 0 && b != missing_bin) {
                            lmin = min(lmin, b);
                            lmax = max(lmax, b);
                        }
                    }
                    scan_cnt[tid] = local;
                    scan_min[tid] = lmin;
                    scan_max[tid] = lmax;
                    __syncthreads();
                    for (int off = 1; off < nthreads; off <<= 1) {
                        int vc = 0, vmin = missing_bin, vmax = -1;
                        if (tid >= off) {
                            vc = scan_cnt[tid - off];
                            vmin = scan_min[tid - off];
                            vmax = scan_max[tid - off];
                        }
                        __syncthreads();
                        scan_cnt[tid] += vc;
                        scan_min[tid] = min(scan_min[tid], vmin);
                        scan_max[tid] = max(scan_max[tid], vmax);
                        __syncthreads();
                    }
                    int acc = scan_cnt[tid] - local;
                    for (int b = b_lo; b < b_hi; ++b) {
                        run_start[b] = acc;
                        nl_at[b] = acc;  // the sort's cursor; ends at run_start[b] + cnt[b]
                        acc += cnt[b];
                    }
                }
                __syncthreads();
                const int bmin = scan_min[nthreads - 1];
                const int bmax = scan_max[nthreads - 1];
                // 3b. stable counting sort of the node's samples by code, nthreads
                // samples at a time: a sample's place in its bin's run is the bin's
                // cursor plus the number of earlier samples of the chunk in that bin
                for (long long c0 = 0; c0 < ns; c0 += nthreads) {
                    const long long a = c0 + tid;
                    const long long c1 = min(ns, c0 + (long long)nthreads);
                    int code = 0, rank = 0;
                    bool last = true;
                    if (a < ns) {
                        code = ccode[a];
                        for (long long a2 = c0; a2 < c1; ++a2) {
                            if (a2 != a && ccode[a2] == code) {
                                if (a2 < a) ++rank;
                                else last = false;
                            }
                        }
                        sorted[nl_at[code] + rank] = samples[a];
                    }
                    __syncthreads();
                    if (a < ns && last) nl_at[code] += rank + 1;
                    __syncthreads();
                }
                if (tid == 0) {
                    int cut = -1, et_bin = -1;
                    if (random_split) {
                        cut = split_random_cut(thresholds, n_thr, fq, bmin, bmax,
                                               split_uniform_at(seed, sel_pos[q]));
                        for (int b = bmin; b <= bmax && b <= cut; ++b)
                            if (cnt[b] > 0) et_bin = b;
                    }
                    sh_cut = cut;
                    sh_et_bin = et_bin;
                }
                __syncthreads();
                const int n_miss = cnt[missing_bin];
                const bool use_sort = ns <= sort_limit;
                const int mr0 = run_start[missing_bin], mr1 = mr0 + n_miss;
                // 3c. running left sums in the CPU kernel's order, one pass over the
                // sorted samples per channel (thread c < m: sums of w y_c, with the
                // CPU's "LS += MS; LS -= MS" round trip after every bin whose
                // missing-left side is scored; thread m: the weights). LS of bin b
                // goes to ls[b * m + c] (weights: wl_at[b]); the missing run's
                // sums to ls[SPLIT_MAX_BINS * m + c] (weights: sh_Wm).
                for (int c = tid; c <= m; c += nthreads) {
                    const bool is_w = c == m;
                    double MS = 0.0;
                    for (int r = mr0; r < mr1; ++r) {
                        const long long s = sorted[r];
                        const double w = (double)wrow[s];
                        MS = __dadd_rn(MS, is_w ? w : __dmul_rn(w, (double)ybase[s * ystride + c]));
                    }
                    double LS = 0.0;
                    for (int b = bmin; b <= bmax; ++b) {
                        if (cnt[b] == 0) continue;
                        const int r0 = run_start[b], r1 = r0 + cnt[b];
                        double h = 0.0;
                        for (int r = r0; r < r1; ++r) {
                            const long long s = sorted[r];
                            const double w = (double)wrow[s];
                            const double v = is_w ? w : __dmul_rn(w, (double)ybase[s * ystride + c]);
                            if (use_sort) LS = __dadd_rn(LS, v);
                            else h = __dadd_rn(h, v);
                        }
                        if (!use_sort) LS = __dadd_rn(LS, h);
                        if (is_w) {
                            wl_at[b] = LS;
                        } else {
                            ls[(long long)b * m + c] = LS;
                            if (!random_split && n_miss > 0) {
                                const int nLm = nl_at[b] + n_miss;
                                if (nLm >= min_samples_leaf && ns - nLm >= min_samples_leaf)
                                    LS = __dadd_rn(__dadd_rn(LS, MS), -MS);
                            }
                        }
                    }
                    if (is_w) sh_Wm = MS;
                    else ls[(long long)SPLIT_MAX_BINS * m + c] = MS;
                }
                __syncthreads();
                const double Wm = sh_Wm;
                double my_g = NEG_INF;
                int my_key = 0x7FFFFFFF;
                for (int b = bmin + tid; b <= bmax; b += nthreads) {
                    if (cnt[b] == 0) continue;
                    if (random_split && b != sh_et_bin) continue;
                    const int bin_used = random_split ? sh_cut : b;
                    const bool at_end = bin_used >= bmax;
                    if (at_end && n_miss == 0) continue;
                    const int nL = nl_at[b];
                    const bool eval_mr = nL >= min_samples_leaf && ns - nL >= min_samples_leaf;
                    const int nLm = nL + n_miss;
                    const bool eval_ml =
                        n_miss > 0 && !at_end && nLm >= min_samples_leaf && ns - nLm >= min_samples_leaf;
                    if (!eval_mr && !eval_ml) continue;
                    const double WL = wl_at[b];
                    double left = 0.0, right = 0.0, left_m = 0.0, right_m = 0.0;
                    for (int c = 0; c < m; ++c) {
                        const double LS = ls[(long long)b * m + c];
                        const double MS = ls[(long long)SPLIT_MAX_BINS * m + c];
                        const double Sc = S[c];
                        if (eval_mr) {
                            const double r = __dadd_rn(Sc, -LS);
                            left = __dadd_rn(left, __dmul_rn(LS, LS));
                            right = __dadd_rn(right, __dmul_rn(r, r));
                        }
                        if (eval_ml) {
                            const double lm = __dadd_rn(LS, MS);
                            const double rm = __dadd_rn(Sc, -lm);
                            left_m = __dadd_rn(left_m, __dmul_rn(lm, lm));
                            right_m = __dadd_rn(right_m, __dmul_rn(rm, rm));
                        }
                    }
                    double best = NEG_INF;
                    int best_key = 0x7FFFFFFF;
                    if (eval_mr) {
                        const double g = left / WL + right / (W - WL) - parent;
                        if (g > best) {
                            best = g;
                            const int ml = n_miss == 0 ? (WL >= W - WL ? 1 : 0) : 0;
                            best_key = 2 * bin_used + ml;
                        }
                    }
                    if (eval_ml) {
                        const double WLm = WL + Wm;
                        const double g = left_m / WLm + right_m / (W - WLm) - parent;
                        if (g > best) {
                            best = g;
                            best_key = 2 * bin_used + 1;
                        }
                    }
                    // keys of one thread increase with b: keep the first maximum
                    if (best > my_g) {
                        my_g = best;
                        my_key = best_key;
                    }
                }
                red_g[tid] = my_g;
                red_key[tid] = my_key;
                __syncthreads();
                // cnt is no longer read: clear it for the next feature
                for (int b = tid; b < SPLIT_MAX_BINS; b += nthreads) cnt[b] = 0;
                // tree reduction: (larger gain, then smaller key) is a total order
                for (int half = nthreads / 2; half > 0; half >>= 1) {
                    if (tid < half && split_better(red_g[tid + half], red_key[tid + half],
                                                   red_g[tid], red_key[tid])) {
                        red_g[tid] = red_g[tid + half];
                        red_key[tid] = red_key[tid + half];
                    }
                    __syncthreads();
                }
                if (tid == 0) {
                    const double g = red_g[0];
                    const int key = red_key[0];
                    const int slot = found + q;
                    c_f[slot] = fq;
                    c_g[slot] = g;
                    c_b[slot] = g > NEG_INF ? key / 2 : 0;
                    c_ml[slot] = g > NEG_INF ? (unsigned char)(key % 2) : (unsigned char)0;
                }
                __syncthreads();
            }
            found += n_sel;
        }

        // ---- 4. cross-feature tie rule
        if (tid == 0) {
            double gmax = NEG_INF;
            for (int j = 0; j < found; ++j)
                if (c_g[j] > gmax) gmax = c_g[j];
            int pick = -1;
            if (gmax > NEG_INF) {
                const double floor_g = __dadd_rn(gmax, -__dmul_rn(tie_rtol, sh_Q));
                for (int j = 0; j < found && pick < 0; ++j)
                    if (c_g[j] >= floor_g) pick = j;
            }
            if (pick >= 0) {
                out_feature[node] = c_f[pick];
                out_bin[node] = c_b[pick];
                out_missing_left[node] = c_ml[pick];
                out_gain[node] = c_g[pick];
            } else {
                out_feature[node] = -1;
                out_bin[node] = 0;
                out_missing_left[node] = 0;
                out_gain[node] = NEG_INF;
            }
        }
        __syncthreads();
    }
}
