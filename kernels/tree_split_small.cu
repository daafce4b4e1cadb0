// Exact best split of small nodes from their samples, node by node
// (``tree_split_small``) or whole subtrees grown depth first
// (``tree_grow_subtrees``); contracts in gpurpo/tree/kernels.py, CPU twins
// in gpurpo/tree/_numba/tree_split_small.py and tree_grow_subtrees.py.
//
// ``split_node`` is the block-level evaluation of one node, called by every
// thread of the block (the launchers use one warp; at most
// SPLIT_MAX_THREADS threads). The node's samples are seen through a
// ``SplitView``: position a of the node is column ``col[a]`` of the codes
// rows, the weights and the targets, so that the level-wise kernel reads the
// training data in place (columns = sample ids; a sparse X held without
// dense codes: each code looked up in its sample's stored row, csr_rows.cuh)
// and the subtree kernel its private copy (columns = positions in the
// copy). The block
//   1. sums the node's weights W, weighted targets S and Q = sum w ||y||^2
//      (float64, in position order like the CPU kernel: Q channel by channel,
//      then the channels' sums in channel order) and detects pure nodes;
//   2. visits candidate features in the node's pseudo-random order
//      (feature_at of gpurpo/tree/_random.py, ported bit for bit: a sort of
//      per-feature hashes up to 32 features, a counter-based Feistel
//      permutation above), blockDim positions at a
//      time: each thread tests one position for a constant feature, then the
//      non-constant ones among the first n_candidates positions are kept and,
//      if there are none, the first non-constant one after them
//      (scikit-learn's rule: constant features count as visited); one for
//      two-sample nodes, as in the CPU kernel;
//   3. for each kept feature: counts samples per bin (shared memory), scans
//      the counts in parallel (a span of bins per thread, then a scan over the
//      threads), orders the samples by bin with a stable counting sort done
//      a chunk of blockDim samples at a time (no thread works alone over the
//      bins or the samples), computes the running left sums of every
//      occupied bin in exactly the CPU kernel's summation order with one
//      pass over the sorted samples per channel (threads = channels, plus
//      one for the weights; sorted order for nodes of at most ``sort_limit``
//      samples, O(ns) whatever the codes' range, except for a feature with
//      a subtracted bin and fewer other codes (``listed``) than the node has
//      samples, or a single edge (two value codes); per-bin sums otherwise,
//      the sums of the feature's ``subtracted_bin`` then being the node's
//      totals minus the other bins' sums, as the CPU kernel derives them;
//      including the CPU's "LS += MS;
//      LS -= MS" round trip after bins whose missing-left side is scored),
//      then evaluates every candidate bin in parallel (one thread per
//      occupied bin) from those sums, so gains are bit-identical; products
//      and sums use __dmul_rn/__dadd_rn so that no fused multiply-add
//      changes the rounding;
//   4. reduces the best (gain, bin, missing side) of the feature over the
//      block (ties: lowest bin, then missing right), and finally applies the
//      cross-feature tie rule (gains within tie_rtol * (Q - ||S||^2 / W) +
//      SPLIT_TIE_ROUNDING * Q of the best: the first feature in the node's
//      random visiting order wins).
// Scratch (per block, allocated by the launchers): the node's columns sorted
// by the current feature's code, the codes by position and in sorted order
// (max_ns each), S (m doubles),
// the running left sums ((SPLIT_MAX_BINS + 1) x m doubles: one row per bin,
// the last for the missing run) and the per-feature candidates (cand_stride
// entries).
//
// ``tree_grow_subtrees``: one block per subtree root (blocks loop over the
// roots). The block copies the root's samples into its scratch (the codes of
// every feature, feature-major, ``ns`` bytes per feature, except for a sparse
// X given row by row, whose codes it looks up in the samples' rows; weights;
// targets), then grows the subtree depth first exactly as the CPU kernel:
// thread 0 keeps the stack of nodes to visit (left child on top) and numbers
// the children when a node splits; every node is evaluated by
// ``split_node``; a split partitions the node's positions stably, left
// first (``block_stable_partition`` of block_partition.cuh).

#include "block_partition.cuh"
#include "bin_edges.cuh"
#include "csr_rows.cuh"
#include "tree_random.cuh"

// The launchers use one warp per block (a node's work is mostly serial
// passes); per-thread shared arrays are sized for at most two warps, so that
// a block's static shared memory (about 7 KB) leaves room for many blocks
// per SM.
#define SPLIT_MAX_THREADS 64
#define SPLIT_MAX_BINS 256
// equals TIE_ROUNDING of gpurpo/tree/_numba/_node_split.py
#define SPLIT_TIE_ROUNDING 1e-12

__device__ __forceinline__ double split_neg_inf()
{
    return __longlong_as_double((long long)0xFFF0000000000000ULL);
}

// The weight a gain divides by: 1 for a side whose weight, computed from sums,
// is not positive (its samples weigh less than the rounding error of the node's
// total), as for empty sides in tree_score; the CPU twin's _side_weight.
__device__ __forceinline__ double split_side_weight(double w)
{
    return w > 0 ? w : 1.0;
}

// Is (g, key) better than (g2, key2)? Larger gain; equal gains: smaller key.
__device__ __forceinline__ bool split_better(double g, int key, double g2, int key2)
{
    return g > g2 || (g == g2 && key < key2);
}

struct SplitView {
    const unsigned char* codes;  // feature f's codes: codes + f * code_stride, indexed by column
    long long code_stride;
    int stored;                  // 1: codes looked up in ``rows`` (a sparse X's stored rows),
    StoredRows rows;             // column c being sample col_sample[c] (c when null)
    const int* col_sample;
    const int* col;              // column of each position of the node
    const float* w;              // weight of a column
    const float* y;              // targets of a column: y + column * y_stride
    long long y_stride;
    long long ns;                // positions 0 .. ns - 1
    unsigned long long seed;
};

// Feature f's codes of the view, indexed by column.
__device__ __forceinline__ FeatureCodes split_feature_codes(const SplitView& v, int f)
{
    FeatureCodes row;
    row.codes = v.stored ? nullptr : v.codes + (long long)f * v.code_stride;
    row.rows = v.rows;
    row.feature = f;
    row.sample_of = v.col_sample;
    return row;
}

struct SplitRules {
    const double* edge_values; // the raw upper bin edges, then the bin lows (bin_edges.cuh)
    const long long* edge_ptr; // (p + 1,) feature f's edges start at edge_ptr[f]
    const int* subtracted_bin; // (p,) bin derived from the node's totals in tables, or -1
    const long long* listed;   // (p,) codes other than subtracted_bin in all the data
    int p;
    int m;
    int n_candidates;
    int min_samples_leaf;
    int random_split;
    int missing_bin;
    int sort_limit;
    int feistel_lo;            // Feistel low and high part widths for p
    int feistel_hi;
    double tie_rtol;
};

struct SplitScratch {  // one block's
    int* sorted;
    unsigned char* ccode;  // codes of the current feature by position
    unsigned char* scode;  // the same codes in sorted order
    double* S;
    double* ls;
    int* c_f;
    double* c_g;
    int* c_b;
    unsigned char* c_ml;
};

struct SplitChoice {
    int feature;  // -1: no valid split
    int bin;
    int missing_left;
    double gain;
};

__device__ __forceinline__ double split_wy(const SplitView& v, long long col, int c)
{
    return __dmul_rn((double)v.w[col], (double)v.y[col * v.y_stride + c]);
}

// Best split of the node seen through ``v``; called by all threads of the
// block, returns the same choice to each of them.
__device__ SplitChoice split_node(const SplitView& v, const SplitRules& r, const SplitScratch& sc)
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
    __shared__ double sh_W, sh_Q, sh_parent, sh_Wm, sh_gain;
    __shared__ int sh_n_sel, sh_et_bin, sh_cut, sh_feature, sh_bin, sh_ml;
    __shared__ unsigned long long small_hash[SPLIT_SMALL_P];
    __shared__ int small_order[SPLIT_SMALL_P];
    // the bin scan of step 3a reuses arrays that are idle at that point
    int* scan_cnt = red_key;
    int* scan_min = pos_feature;
    int* scan_max = pos_nonconst;

    const int tid = threadIdx.x;
    const int nthreads = blockDim.x;
    // the launchers never do this: at most SPLIT_MAX_THREADS, a power of two (reduction)
    if (nthreads > SPLIT_MAX_THREADS || (nthreads & (nthreads - 1)) != 0) __trap();
    const double NEG_INF = split_neg_inf();
    const SplitChoice none = {-1, 0, 0, NEG_INF};
    const long long ns = v.ns;
    const int m = r.m;
    const int missing_bin = r.missing_bin;
    const int min_samples_leaf = r.min_samples_leaf;
    const int random_split = r.random_split;
    if (ns < 2 || ns < 2LL * min_samples_leaf) return none;  // uniform over the block
    const unsigned long long seed = v.seed;
    const int* col = v.col;
    int* sorted = sc.sorted;
    unsigned char* ccode = sc.ccode;
    unsigned char* scode = sc.scode;
    double* S = sc.S;
    double* ls = sc.ls;
    __syncthreads();  // the shared state of the previous call has been read

    // ---- 1. totals (position order, as the CPU kernel) and purity; each channel's
    // sum of w y^2 waits in ls[c] until Q adds them in channel order
    for (int c = tid; c < m; c += nthreads) {
        double acc = 0.0, q = 0.0;
        for (long long a = 0; a < ns; ++a) {
            const long long s = col[a];
            const double wy = split_wy(v, s, c);
            acc = __dadd_rn(acc, wy);
            q = __dadd_rn(q, __dmul_rn(wy, (double)v.y[s * v.y_stride + c]));
        }
        S[c] = acc;
        ls[c] = q;
    }
    if (tid == 0) {
        double W = 0.0;
        for (long long a = 0; a < ns; ++a) W = __dadd_rn(W, (double)v.w[col[a]]);
        sh_W = W;
    }
    for (int b = tid; b < SPLIT_MAX_BINS; b += nthreads) cnt[b] = 0;
    int differs = 0;
    {
        const float* y0 = v.y + (long long)col[0] * v.y_stride;
        const long long total = ns * m;
        for (long long q = tid; q < total && !differs; q += nthreads) {
            const long long a = q / m;
            const int c = (int)(q % m);
            if (v.y[(long long)col[a] * v.y_stride + c] != y0[c]) differs = 1;
        }
    }
    const int impure = __syncthreads_or(differs);  // also publishes S, W and Q's channels
    if (!impure) return none;
    if (tid == 0) {
        double Q = 0.0;
        for (int c = 0; c < m; ++c) Q = __dadd_rn(Q, ls[c]);
        sh_Q = Q;
        double parent = 0.0;
        for (int c = 0; c < m; ++c) parent = __dadd_rn(parent, __dmul_rn(S[c], S[c]));
        sh_parent = parent / sh_W;
    }
    __syncthreads();
    const double W = sh_W;
    const double parent = sh_parent;

    // ---- 2. visit positions, blockDim at a time
    const int p = r.p;
    const int n_candidates = r.n_candidates;
    // up to SPLIT_SMALL_P features, the order sorts hash64(round_key(seed, 0) ^ f):
    // each feature's rank is the number of smaller hashes (all distinct); above,
    // the Feistel network's round keys
    // (the order is random whether or not the node samples features: ties among
    // equal gains go to the first visited, uniformly at random)
    const int small = p <= SPLIT_SMALL_P;
    unsigned long long keys[SPLIT_N_ROUNDS];
    if (!small)
        for (int k = 0; k < SPLIT_N_ROUNDS; ++k) keys[k] = split_round_key(seed, k);
    if (small) {
        const unsigned long long key = split_round_key(seed, 0);
        for (int f = tid; f < p; f += nthreads) small_hash[f] = split_hash64(key ^ (unsigned long long)f);
        __syncthreads();
        for (int f = tid; f < p; f += nthreads) {
            int rank = 0;
            for (int g = 0; g < p; ++g) rank += small_hash[g] < small_hash[f] ? 1 : 0;
            small_order[rank] = f;
        }
        __syncthreads();
    }
    int found = 0;
    // two samples: every split that separates them has the same gain (up to
    // rounding far below the tie tolerance), so, as the CPU kernel, stop at
    // the first separating (non-constant) feature visited
    const int need = ns == 2 ? 1 : n_candidates;
    for (long long base = 0; found < need && base < p && (base < n_candidates || found == 0);
         base += nthreads) {
        const long long pos = base + tid;
        int f = -1, nonconst = 0;
        if (pos < p) {
            f = small ? small_order[pos] : split_feature_at(keys, pos, p, r.feistel_lo, r.feistel_hi);
            const FeatureCodes row = split_feature_codes(v, f);
            const int first = row(col[0]);
            for (long long a = 1; a < ns; ++a) {
                if (row(col[a]) != first) {
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
                const bool visited = base + j < n_candidates || found + n_sel == 0;
                if (pos_nonconst[j] && visited && found + n_sel < need) {
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
            const FeatureCodes row = split_feature_codes(v, fq);
            for (long long a = tid; a < ns; a += nthreads) {
                const unsigned char code = (unsigned char)row(col[a]);
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
            // 3b. stable counting sort of the node's columns by code, nthreads
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
                    sorted[nl_at[code] + rank] = col[a];
                    scode[nl_at[code] + rank] = (unsigned char)code;
                }
                __syncthreads();
                if (a < ns && last) nl_at[code] += rank + 1;
                __syncthreads();
            }
            if (tid == 0) {
                int cut = -1, et_bin = -1;
                if (random_split) {
                    cut = random_cut_bin(r.edge_values, r.edge_ptr, r.p, fq, bmin, bmax,
                                           split_uniform_at(seed, sel_pos[q]));
                    for (int b = bmin; b <= bmax && b <= cut; ++b)
                        if (cnt[b] > 0) et_bin = b;
                }
                sh_cut = cut;
                sh_et_bin = et_bin;
            }
            __syncthreads();
            const int n_miss = cnt[missing_bin];
            // a feature with fewer codes of other bins than the node has samples is
            // summed as a larger node's (the CPU kernel reads its column of entries),
            // and so is a two-valued one (one edge: the CPU kernel sums its other code)
            const bool use_sort = ns <= r.sort_limit &&
                !(r.subtracted_bin[fq] >= 0 &&
                  (r.listed[fq] < ns || r.edge_ptr[fq + 1] - r.edge_ptr[fq] == 1));
            const int mr0 = run_start[missing_bin], mr1 = mr0 + n_miss;
            // 3c. running left sums in the CPU kernel's order, one pass over the
            // sorted samples per channel (thread c < m: sums of w y_c, with the
            // CPU's "LS += MS; LS -= MS" round trip after every bin whose
            // missing-left side is scored; thread m: the weights). LS of bin b
            // goes to ls[b * m + c] (weights: wl_at[b]); the missing run's
            // sums to ls[SPLIT_MAX_BINS * m + c] (weights: sh_Wm).
            const int zb = use_sort ? -1 : r.subtracted_bin[fq];
            const bool derive_z = zb >= 0 && cnt[zb] > 0;
            for (int c = tid; c <= m; c += nthreads) {
                const bool is_w = c == m;
                double MS = 0.0;
                for (int k = mr0; k < mr1; ++k) {
                    const long long s = sorted[k];
                    MS = __dadd_rn(MS, is_w ? (double)v.w[s] : split_wy(v, s, c));
                }
                // the subtracted bin's sum: the node's total minus the other bins' sums,
                // added in increasing bin order, the missing run last
                double hz = 0.0;
                if (derive_z) {
                    double others = 0.0;
                    for (int b = bmin; b <= bmax; ++b) {
                        if (b == zb || cnt[b] == 0) continue;
                        const int r0 = run_start[b], r1 = r0 + cnt[b];
                        double h = 0.0;
                        for (int z = r0; z < r1; ++z) {
                            const long long s = sorted[z];
                            h = __dadd_rn(h, is_w ? (double)v.w[s] : split_wy(v, s, c));
                        }
                        others = __dadd_rn(others, h);
                    }
                    if (n_miss > 0) others = __dadd_rn(others, MS);
                    hz = __dadd_rn(is_w ? W : S[c], -others);
                }
                double LS = 0.0;
                // sorted order: one pass over the non-missing samples (the missing
                // run is last), a bin's sums stored at the end of its run; per-bin
                // order: the occupied bins, each bin's sum added to LS
                const int n_runs = use_sort ? mr0 : bmax - bmin + 1;
                for (int k = 0; k < n_runs; ++k) {
                    int b;
                    if (use_sort) {
                        const long long s = sorted[k];
                        LS = __dadd_rn(LS, is_w ? (double)v.w[s] : split_wy(v, s, c));
                        b = scode[k];
                        if (k + 1 < mr0 && scode[k + 1] == b) continue;
                    } else {
                        b = bmin + k;
                        if (cnt[b] == 0) continue;
                        double h = 0.0;
                        if (derive_z && b == zb) {
                            h = hz;
                        } else {
                            const int r0 = run_start[b], r1 = r0 + cnt[b];
                            for (int z = r0; z < r1; ++z) {
                                const long long s = sorted[z];
                                h = __dadd_rn(h, is_w ? (double)v.w[s] : split_wy(v, s, c));
                            }
                        }
                        LS = __dadd_rn(LS, h);
                    }
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
                        const double rr = __dadd_rn(Sc, -LS);
                        left = __dadd_rn(left, __dmul_rn(LS, LS));
                        right = __dadd_rn(right, __dmul_rn(rr, rr));
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
                    const double g = left / WL + right / split_side_weight(W - WL) - parent;
                    if (g > best) {
                        best = g;
                        const int ml = n_miss == 0 ? (WL >= W - WL ? 1 : 0) : 0;
                        best_key = 2 * bin_used + ml;
                    }
                }
                if (eval_ml) {
                    const double WLm = WL + Wm;
                    const double g = left_m / WLm + right_m / split_side_weight(W - WLm) - parent;
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
                sc.c_f[slot] = fq;
                sc.c_g[slot] = g;
                sc.c_b[slot] = g > NEG_INF ? key / 2 : 0;
                sc.c_ml[slot] = g > NEG_INF ? (unsigned char)(key % 2) : (unsigned char)0;
            }
            __syncthreads();
        }
        found += n_sel;
    }

    // ---- 4. cross-feature tie rule
    if (tid == 0) {
        double gmax = NEG_INF;
        for (int j = 0; j < found; ++j)
            if (sc.c_g[j] > gmax) gmax = sc.c_g[j];
        int pick = -1;
        if (gmax > NEG_INF) {
            // the tolerance: tie_rtol of the node's impurity Q - ||S||^2 / W, plus
            // the rounding of sums of size Q (_tie_tolerance of the CPU kernel)
            double impurity = __dadd_rn(sh_Q, -sh_parent);
            if (impurity < 0.0) impurity = 0.0;
            const double tol = __dadd_rn(__dmul_rn(r.tie_rtol, impurity), __dmul_rn(SPLIT_TIE_ROUNDING, sh_Q));
            const double floor_g = __dadd_rn(gmax, -tol);
            for (int j = 0; j < found && pick < 0; ++j)
                if (sc.c_g[j] >= floor_g) pick = j;
        }
        sh_feature = pick >= 0 ? sc.c_f[pick] : -1;
        sh_bin = pick >= 0 ? sc.c_b[pick] : 0;
        sh_ml = pick >= 0 ? (int)sc.c_ml[pick] : 0;
        sh_gain = pick >= 0 ? sc.c_g[pick] : NEG_INF;
    }
    __syncthreads();
    const SplitChoice choice = {sh_feature, sh_bin, sh_ml, sh_gain};
    return choice;
}

__device__ __forceinline__ SplitScratch split_scratch(
    long long blk, long long max_ns, int m, int cand_stride, int* order_buf, unsigned char* code_buf,
    double* s_buf, double* ls_buf, int* cand_f, double* cand_g, int* cand_b, unsigned char* cand_ml)
{
    SplitScratch sc;
    sc.sorted = order_buf + blk * max_ns;
    sc.ccode = code_buf + 2 * blk * max_ns;
    sc.scode = sc.ccode + max_ns;
    sc.S = s_buf + blk * m;
    sc.ls = ls_buf + blk * (SPLIT_MAX_BINS + 1) * m;
    sc.c_f = cand_f + blk * cand_stride;
    sc.c_g = cand_g + blk * cand_stride;
    sc.c_b = cand_b + blk * cand_stride;
    sc.c_ml = cand_ml + blk * cand_stride;
    return sc;
}

__device__ __forceinline__ SplitRules split_rules(
    const double* edge_values, const long long* edge_ptr, const int* subtracted_bin, const long long* listed, int p,
    int m, int n_candidates,
    int min_samples_leaf, int random_split, int missing_bin, double tie_rtol, int sort_limit)
{
    SplitRules r;
    r.edge_values = edge_values;
    r.edge_ptr = edge_ptr;
    r.subtracted_bin = subtracted_bin;
    r.listed = listed;
    r.p = p;
    r.m = m;
    r.n_candidates = n_candidates;
    r.min_samples_leaf = min_samples_leaf;
    r.random_split = random_split;
    r.missing_bin = missing_bin;
    r.sort_limit = sort_limit;
    r.tie_rtol = tie_rtol;
    split_feistel_params(p, &r.feistel_lo, &r.feistel_hi);
    return r;
}

extern "C" __global__ void tree_split_small(
    const unsigned char* __restrict__ codes,
    const long long* __restrict__ row_ptr,
    const int* __restrict__ row_features,
    const unsigned char* __restrict__ row_codes,
    const unsigned char* __restrict__ zero_code,
    int stored,
    const int* __restrict__ subtracted_bin,
    const long long* __restrict__ listed,
    const int* __restrict__ sample_indices,
    const long long* __restrict__ node_ranges,
    const int* __restrict__ node_tree,
    const unsigned long long* __restrict__ node_seed,
    const float* __restrict__ weights,
    const float* __restrict__ targets,
    const double* __restrict__ edge_values,
    const long long* __restrict__ edge_ptr,
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
    const SplitRules rules = split_rules(edge_values, edge_ptr, subtracted_bin, listed, p, m, n_candidates, min_samples_leaf, random_split,
                                         missing_bin, tie_rtol, sort_limit);
    const SplitScratch sc = split_scratch(blockIdx.x, max_ns, m, cand_stride, order_buf, code_buf, s_buf,
                                          ls_buf, cand_f, cand_g, cand_b, cand_ml);
    for (long long node = blockIdx.x; node < n_nodes; node += gridDim.x) {
        const long long start = node_ranges[2 * node];
        const int t = node_tree[node];
        SplitView v;
        v.codes = codes;
        v.code_stride = n;
        v.stored = stored;
        v.rows = stored_rows(row_ptr, row_features, row_codes, zero_code);
        v.col_sample = nullptr;
        v.col = sample_indices + start;
        v.w = weights + (long long)t * n;
        v.y = targets + (long long)t * m;
        v.y_stride = (long long)n_trees * m;
        v.ns = node_ranges[2 * node + 1] - start;
        v.seed = node_seed[node];
        const SplitChoice choice = split_node(v, rules, sc);
        if (threadIdx.x == 0) {
            out_feature[node] = choice.feature;
            out_bin[node] = choice.bin;
            out_missing_left[node] = (unsigned char)choice.missing_left;
            out_gain[node] = choice.gain;
        }
    }
}

extern "C" __global__ void tree_grow_subtrees(
    const unsigned char* __restrict__ codes,
    const int* __restrict__ subtracted_bin,
    const long long* __restrict__ listed,
    const unsigned char* __restrict__ zero_code,
    const long long* __restrict__ row_ptr,
    const int* __restrict__ row_features,
    const unsigned char* __restrict__ row_codes,
    long long n_row_ptr,
    int* __restrict__ sample_indices,
    const long long* __restrict__ node_ranges,
    const int* __restrict__ node_tree,
    const unsigned long long* __restrict__ node_seed,
    const int* __restrict__ node_depth,
    const float* __restrict__ weights,
    const float* __restrict__ targets,
    const double* __restrict__ edge_values,
    const long long* __restrict__ edge_ptr,
    long long n,
    int p,
    int n_trees,
    int m,
    long long n_roots,
    int n_candidates,
    int min_samples_leaf,
    int min_samples_split,
    int max_depth,
    double min_impurity_decrease,
    const double* __restrict__ root_weight,
    int random_split,
    int missing_bin,
    double tie_rtol,
    int sort_limit,
    long long max_ns,
    int cand_stride,
    unsigned char* block_buf,
    int* col_buf,
    int* col2_buf,
    int* gid_buf,
    float* w_buf,
    float* y_buf,
    int* stack_buf,
    unsigned long long* seed_buf,
    int* order_buf,
    unsigned char* code_buf,
    double* s_buf,
    double* ls_buf,
    int* cand_f,
    double* cand_g,
    int* cand_b,
    unsigned char* cand_ml,
    const long long* __restrict__ out_offsets,
    int* out_count,
    int* out_feature,
    int* out_bin,
    unsigned char* out_missing_left,
    double* out_gain,
    int* out_left,
    int* out_right,
    int* out_depth,
    long long* out_start,
    long long* out_stop)
{
    __shared__ int sh_j, sh_eval, sh_sp, sh_count;
    __shared__ long long sh_a0, sh_a1;
    const int tid = threadIdx.x;
    const int nthreads = blockDim.x;
    const long long blk = blockIdx.x;
    const SplitRules rules = split_rules(edge_values, edge_ptr, subtracted_bin, listed, p, m, n_candidates, min_samples_leaf, random_split,
                                         missing_bin, tie_rtol, sort_limit);
    const SplitScratch sc = split_scratch(blk, max_ns, m, cand_stride, order_buf, code_buf, s_buf,
                                          ls_buf, cand_f, cand_g, cand_b, cand_ml);
    // stored rows: no copy of the codes, each looked up in its sample's row
    const int stored = n_row_ptr > 0;
    unsigned char* blk_codes = stored ? nullptr : block_buf + blk * (long long)p * max_ns;
    const StoredRows rows = stored_rows(row_ptr, row_features, row_codes, zero_code);
    int* cols = col_buf + blk * max_ns;
    int* cols2 = col2_buf + blk * max_ns;
    int* gid = gid_buf + blk * max_ns;
    float* wl = w_buf + blk * max_ns;
    float* yl = y_buf + blk * max_ns * m;
    int* stack = stack_buf + blk * (max_ns + 2);
    unsigned long long* seeds = seed_buf + blk * 2 * max_ns;
    const double eps = 0x1p-52;  // float64 machine epsilon

    for (long long root = blockIdx.x; root < n_roots; root += gridDim.x) {
        const long long start_r = node_ranges[2 * root];
        const long long ns_r = node_ranges[2 * root + 1] - start_r;
        const int t = node_tree[root];
        const long long base = out_offsets[root];
        const double scale = __dmul_rn((double)m, root_weight[t]);
        // gather the subtree's samples: codes (feature-major), weights, targets
        for (long long a = tid; a < ns_r; a += nthreads) {
            const long long s = sample_indices[start_r + a];
            gid[a] = (int)s;
            cols[a] = (int)a;
            wl[a] = weights[(long long)t * n + s];
            for (int c = 0; c < m; ++c) yl[a * m + c] = targets[(s * n_trees + t) * m + c];
        }
        if (!stored) {
            for (long long q = tid; q < (long long)p * ns_r; q += nthreads) {
                const long long f = q / ns_r;
                const long long a = q - f * ns_r;
                blk_codes[q] = codes[f * n + sample_indices[start_r + a]];
            }
        }
        if (tid == 0) {
            out_start[base] = 0;
            out_stop[base] = ns_r;
            out_depth[base] = node_depth[root];
            seeds[0] = node_seed[root];
            stack[0] = 0;
            sh_sp = 1;
            sh_count = 1;
        }
        __syncthreads();
        for (;;) {
            if (tid == 0) {
                int j = -1, evaluate = 0;
                if (sh_sp > 0) {
                    j = stack[--sh_sp];
                    const long long g = base + j;
                    sh_a0 = out_start[g];
                    sh_a1 = out_stop[g];
                    const int depth = out_depth[g];
                    out_feature[g] = -1;
                    out_bin[g] = 0;
                    out_missing_left[g] = 0;
                    out_gain[g] = 0.0;
                    out_left[g] = -1;
                    out_right[g] = -1;
                    evaluate = !((max_depth >= 0 && depth >= max_depth) ||
                                 sh_a1 - sh_a0 < (long long)min_samples_split);
                }
                sh_j = j;
                sh_eval = evaluate;
            }
            __syncthreads();
            const int j = sh_j;
            const int evaluate = sh_eval;
            const long long a0 = sh_a0, a1 = sh_a1;
            __syncthreads();  // thread 0 rewrites them on the next turn
            if (j < 0) break;
            if (!evaluate) continue;
            SplitView v;
            v.codes = blk_codes;
            v.code_stride = ns_r;
            v.stored = stored;
            v.rows = rows;
            v.col_sample = gid;
            v.col = cols + a0;
            v.w = wl;
            v.y = yl;
            v.y_stride = m;
            v.ns = a1 - a0;
            v.seed = seeds[j];
            const SplitChoice choice = split_node(v, rules, sc);
            if (choice.feature < 0 ||
                __dadd_rn(__ddiv_rn(choice.gain, scale), eps) < min_impurity_decrease)
                continue;
            const long long nl = block_stable_partition(
                split_feature_codes(v, choice.feature), cols + a0, cols2 + a0, a1 - a0,
                choice.bin, choice.missing_left, missing_bin);
            for (long long a = a0 + tid; a < a1; a += nthreads) cols[a] = cols2[a];
            if (tid == 0) {
                const long long g = base + j;
                const int left = sh_count;
                const int right = left + 1;
                sh_count = left + 2;
                const int depth = out_depth[g];
                out_feature[g] = choice.feature;
                out_bin[g] = choice.bin;
                out_missing_left[g] = (unsigned char)choice.missing_left;
                out_gain[g] = choice.gain;
                out_left[g] = left;
                out_right[g] = right;
                out_start[base + left] = a0;
                out_stop[base + left] = a0 + nl;
                out_start[base + right] = a0 + nl;
                out_stop[base + right] = a1;
                out_depth[base + left] = depth + 1;
                out_depth[base + right] = depth + 1;
                seeds[left] = split_child_seed(seeds[j], 0);
                seeds[right] = split_child_seed(seeds[j], 1);
                stack[sh_sp] = right;
                stack[sh_sp + 1] = left;
                sh_sp += 2;
            }
            __syncthreads();
        }
        if (tid == 0) out_count[root] = sh_count;
        for (long long a = tid; a < ns_r; a += nthreads) sample_indices[start_r + a] = gid[cols[a]];
        __syncthreads();
    }
}
