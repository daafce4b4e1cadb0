// Best split of every (node, slot) from its histogram (contract:
// ``tree_score_histograms`` in gpurpo/tree/kernels.py; CPU twin:
// ``score_histograms`` in gpurpo/tree/_numba/tree_score.py; equations in
// gpurpo/tree/splitting.py).
//
// One block per (node, slot), blocks looping over the slots:
//   A. one thread per channel runs through the value bins in increasing
//      order, writing the running left sums of every bin (the CPU kernel's
//      running sums, value for value) to the block's scratch, then the
//      channel total (+ the missing bin); the count channel's thread also
//      finds the occupied range and the number of occupied bins;
//   B. one thread per bin scores "missing right" and "missing left" at its
//      bin from those sums (channels summed in order 1..m, as the CPU), and
//      a block reduction keeps the first maximum of the CPU's visiting
//      order (bin ascending, missing right before missing left), i.e. the
//      largest gain with the smallest key 2 * bin + missing_left;
//   Extra-Trees (random_split): thread 0 scores the drawn cut alone.
// Second-order gain (newton != 0; channels 1..m/2 gradient sums, m/2+1..m hessian
// sums): score_newton_gain instead of score_gain, same candidates and rules.
// Every product and sum is rounded separately (__dmul_rn/__dadd_rn/__ddiv_rn: no fused
// multiply-add), so gains, and therefore the chosen bins, are bit-identical
// to the numba kernel. Scratch per block: n_channels totals, then
// (n_bins - 1) x n_channels running sums, bin-major.
//
// ``tree_score_best_slot`` scores the same way and also picks every node's best
// slot (``tree_best_slot``'s rule) in the same launch: the block that scores a
// node's last slot (a counter per node in ``node_done``, left at zero) reads the
// node's k slots, which the other blocks wrote before counting themselves, through
// L2, and its thread 0 picks as tree_best_slot's thread does.

#include "bin_edges.cuh"

#define SCORE_THREADS 128

__device__ __forceinline__ double score_sq_norm(const double* a, long long stride, int m)
{
    double s = __dmul_rn(a[stride], a[stride]);
    for (int c = 2; c <= m; ++c) s = __dadd_rn(s, __dmul_rn(a[c * stride], a[c * stride]));
    return s;
}

__device__ __forceinline__ double score_gain(const double* L, const double* T, long long stride,
                                             int m, double parent)
{
    const double wl = L[0];
    const double wr = __dadd_rn(T[0], -L[0]);
    double sl = __dmul_rn(L[stride], L[stride]);
    double r = __dadd_rn(T[stride], -L[stride]);
    double sr = __dmul_rn(r, r);
    for (int c = 2; c <= m; ++c) {
        const double lc = L[c * stride];
        sl = __dadd_rn(sl, __dmul_rn(lc, lc));
        r = __dadd_rn(T[c * stride], -lc);
        sr = __dadd_rn(sr, __dmul_rn(r, r));
    }
    return __dadd_rn(__dadd_rn(sl / (wl > 0 ? wl : 1.0), sr / (wr > 0 ? wr : 1.0)), -parent);
}

// score_gain with the missing bin added to the left sums: left_m = L + hm
__device__ __forceinline__ double score_gain_missing(const double* L, const float* hm,
                                                     const double* T, int m, double parent)
{
    const double wl = __dadd_rn(L[0], (double)hm[0]);
    const double wr = __dadd_rn(T[0], -wl);
    const double l1 = __dadd_rn(L[1], (double)hm[1]);
    double sl = __dmul_rn(l1, l1);
    double r = __dadd_rn(T[1], -l1);
    double sr = __dmul_rn(r, r);
    for (int c = 2; c <= m; ++c) {
        const double lc = __dadd_rn(L[c], (double)hm[c]);
        sl = __dadd_rn(sl, __dmul_rn(lc, lc));
        r = __dadd_rn(T[c], -lc);
        sr = __dadd_rn(sr, __dmul_rn(r, r));
    }
    return __dadd_rn(__dadd_rn(sl / (wl > 0 ? wl : 1.0), sr / (wr > 0 ? wr : 1.0)), -parent);
}

// G^2 / (H + lambda) of one output on one side, 0 where the output does not count
// (H < mcw or no positive denominator); the numba kernel's _newton_term.
__device__ __forceinline__ double score_newton_term(double g, double h, double lam, double mcw)
{
    const double den = __dadd_rn(h, lam);
    return (h >= mcw && den > 0.0) ? __ddiv_rn(__dmul_rn(g, g), den) : 0.0;
}

// Second-order score of one side: sum over outputs j = 1..q of the terms of
// G_j = a[j * stride], H_j = a[(q + j) * stride], in output order.
__device__ __forceinline__ double score_newton(const double* a, long long stride, int q,
                                               double lam, double mcw)
{
    double s = 0.0;
    for (int j = 1; j <= q; ++j)
        s = __dadd_rn(s, score_newton_term(a[j * stride], a[(q + j) * stride], lam, mcw));
    return s;
}

// Second-order gain of the left sums L (plus the missing bin hm when hm != nullptr)
// against the totals T: score(left) + score(T - left) - parent.
__device__ __forceinline__ double score_newton_gain(const double* L, const float* hm,
                                                    const double* T, int q, double lam,
                                                    double mcw, double parent)
{
    double sl = 0.0, sr = 0.0;
    for (int j = 1; j <= q; ++j) {
        const double gl = hm ? __dadd_rn(L[j], (double)hm[j]) : L[j];
        const double hl = hm ? __dadd_rn(L[q + j], (double)hm[q + j]) : L[q + j];
        sl = __dadd_rn(sl, score_newton_term(gl, hl, lam, mcw));
        sr = __dadd_rn(sr, score_newton_term(__dadd_rn(T[j], -gl), __dadd_rn(T[q + j], -hl),
                                             lam, mcw));
    }
    return __dadd_rn(__dadd_rn(sl, sr), -parent);
}

// Is (g, key) better than (g2, key2)? Larger gain; equal gains: smaller key.
__device__ __forceinline__ bool score_better(double g, int key, double g2, int key2)
{
    return g > g2 || (g == g2 && key < key2);
}

// A value that another block of the launch wrote (``coherent``): read through L2.
template <typename T>
__device__ __forceinline__ T score_load(const T* p, int coherent)
{
    return coherent ? __ldcg(p) : *p;
}

// The best slot of node i (tree_best_slot's rule: see tree_best_slot below), written to
// out[4 i .. 4 i + 3]; ``coherent``: gain, bins, missing_left and nonconstant were
// written by other blocks of this launch.
__device__ void best_slot_node(
    long long i, const float* hist, const double* q, const unsigned char* impure,
    const double* gain, const int* bins, const unsigned char* missing_left,
    const int* node_features, const long long* order, const unsigned char* nonconstant,
    const long long* node_pos, int k, int n_bins, int n_channels, int m, int newton,
    int has_order, int has_pos, int n_features, double tie_rtol, double tie_rounding,
    int coherent, double* out)
{
    const double neg_inf = -__longlong_as_double(0x7FF0000000000000LL);
    const double qi = q[i];
    double tol;
    if (newton) {
        tol = __dmul_rn(tie_rtol, qi);
    } else {
        const float* h = hist + i * (long long)k * n_bins * n_channels;  // slot 0
        double w = 0.0;
        for (int b = 0; b < n_bins; ++b) w = __dadd_rn(w, (double)h[(long long)b * n_channels]);
        double parent = 0.0;
        for (int c = 1; c <= m; ++c) {
            double s = 0.0;
            for (int b = 0; b < n_bins; ++b) s = __dadd_rn(s, (double)h[(long long)b * n_channels + c]);
            parent = __dadd_rn(parent, __dmul_rn(s, s));
        }
        parent = __ddiv_rn(parent, w > 0.0 ? w : 1.0);
        const double spread = __dadd_rn(qi, -parent);
        tol = __dadd_rn(__dmul_rn(tie_rtol, spread > 0.0 ? spread : 0.0), __dmul_rn(tie_rounding, qi));
    }
    const double* g = gain + i * (long long)k;
    const unsigned char* nc = nonconstant + i * (long long)k;
    double gmax = neg_inf;
    for (int j = 0; j < k; ++j) {
        const double gj = score_load(g + j, coherent);
        gmax = gj > gmax ? gj : gmax;
    }
    int pick = -1;
    long long pick_order = 0;
    bool later = false;  // a node that continues at node_pos + k
    bool first_only = false;
    if (has_pos && impure[i]) {
        bool any = false;
        for (int j = 0; j < k; ++j) any = any || score_load(nc + j, coherent) != 0;
        later = !any && node_pos[i] + k < n_features;
        first_only = any && node_pos[i] > 0;
    }
    if (first_only) {
        for (int j = 0; j < k; ++j) {
            if (!score_load(nc + j, coherent)) continue;
            const long long o = has_order ? order[i * (long long)k + j] : (long long)j;
            if (pick < 0 || o < pick_order) {
                pick = j;
                pick_order = o;
            }
        }
        if (pick >= 0 && !(score_load(g + pick, coherent) > neg_inf)) pick = -1;
    } else if (impure[i] && gmax > neg_inf) {
        const double bar = __dadd_rn(gmax, -tol);
        for (int j = 0; j < k; ++j) {
            const double gj = score_load(g + j, coherent);
            if (!(gj >= bar && gj > neg_inf)) continue;
            const long long o = has_order ? order[i * (long long)k + j] : (long long)j;
            if (pick < 0 || o < pick_order) {
                pick = j;
                pick_order = o;
            }
        }
    }
    double* o = out + 4 * i;
    if (later) {
        o[0] = -2.0;
        o[1] = 0.0;
        o[2] = 0.0;
        o[3] = neg_inf;
    } else if (pick < 0) {
        o[0] = -1.0;
        o[1] = 0.0;
        o[2] = 0.0;
        o[3] = neg_inf;
    } else {
        const long long at = i * (long long)k + pick;
        o[0] = (double)node_features[at];
        o[1] = (double)score_load(bins + at, coherent);
        o[2] = (double)score_load(missing_left + at, coherent);
        o[3] = score_load(gain + at, coherent);
    }
}

// Scores the slots task = blockIdx.x, blockIdx.x + gridDim.x, ... (tree_score_histograms);
// with ``node_done`` also the best slot of every node (k slots each) whose last slot this
// block scores (tree_score_best_slot).
__device__ void score_tasks(
    const float* hist, const int* node_features, const double* uniforms,
    const double* edge_values, const long long* edge_ptr, int p, long long n_tasks, int n_bins,
    int n_channels, int m, int min_samples_leaf, int random_split, int newton,
    double reg_lambda, double min_child_weight, double* scratch, double* out_gain,
    int* out_bin, unsigned char* out_missing_left, unsigned char* out_nonconstant,
    unsigned int* node_done, int k, const double* node_q, const unsigned char* impure,
    const long long* order, const long long* node_pos, int has_order, int has_pos,
    int n_features, double tie_rtol, double tie_rounding, double* out_best)
{
    __shared__ double red_g[SCORE_THREADS];
    __shared__ int red_key[SCORE_THREADS];
    __shared__ int sh_bmin, sh_bmax, sh_occupied;
    __shared__ int sh_last;
    const int tid = threadIdx.x;
    const int nthreads = blockDim.x;
    // the launcher never does this: at most SCORE_THREADS, a power of two (reduction)
    if (nthreads > SCORE_THREADS || (nthreads & (nthreads - 1)) != 0) __trap();
    const int nvb = n_bins - 1;
    const int C = n_channels;
    const int cnt = C == m + 2 ? C - 1 : 0;
    double* tot = scratch + (long long)blockIdx.x * (long long)(C + (long long)nvb * C);
    double* L = tot + C;  // L[b * C + c]: sum of channel c over bins 0..b
    const double neg_inf = -__longlong_as_double(0x7FF0000000000000LL);
    const double msl = (double)min_samples_leaf;

    for (long long task = blockIdx.x; task < n_tasks; task += gridDim.x) {
        const float* h = hist + task * (long long)n_bins * C;
        const float* hm = h + (long long)nvb * C;
        const int f = node_features[task];
        // ---- A. running sums per channel, in bin order
        for (int c = tid; c < C; c += nthreads) {
            double acc = 0.0;
            int bmin = -1, bmax = -1, occupied = 0;
            for (int b = 0; b < nvb; ++b) {
                const float v = h[(long long)b * C + c];
                acc = __dadd_rn(acc, (double)v);
                L[(long long)b * C + c] = acc;
                if (c == cnt && v > 0.0f) {
                    if (bmin < 0) bmin = b;
                    bmax = b;
                    ++occupied;
                }
            }
            tot[c] = __dadd_rn(acc, (double)hm[c]);
            if (c == cnt) {
                sh_bmin = bmin;
                sh_bmax = bmax;
                sh_occupied = occupied;
            }
        }
        __syncthreads();
        const bool any_value = sh_bmin >= 0;
        const int bmin = any_value ? sh_bmin : 0;
        const int bmax = any_value ? sh_bmax : nvb - 1;
        const double n_miss = (double)hm[cnt];
        const bool has_miss = n_miss > 0.0;
        const double n_total = tot[cnt];
        const bool nonconstant = f >= 0 && sh_occupied + (has_miss ? 1 : 0) >= 2;
        const double w_total = tot[0];
        const int q = m / 2;
        const double parent = newton
            ? score_newton(tot, 1, q, reg_lambda, min_child_weight)
            : score_sq_norm(tot, 1, m) / (w_total > 0 ? w_total : 1.0);
        double gain = neg_inf, w_left = (double)h[0];
        int best_bin = 0, direction = 0;
        if (!random_split) {
            // ---- B. one thread per bin, then the first maximum over the block
            double my_g = neg_inf;
            int my_key = 0x7FFFFFFF;
            for (int b = tid; b < nvb; b += nthreads) {
                if (!(h[(long long)b * C + cnt] > 0.0f)) continue;
                const double* Lb = L + (long long)b * C;
                const double n_left = Lb[cnt];
                const bool below_max = b < bmax;
                if ((below_max || has_miss) && n_left >= msl && __dadd_rn(n_total, -n_left) >= msl) {
                    const double g = (newton ? score_newton_gain(Lb, nullptr, tot, q, reg_lambda, min_child_weight, parent) : score_gain(Lb, tot, 1, m, parent));
                    if (g > my_g) {
                        my_g = g;
                        my_key = 2 * b;
                    }
                }
                if (has_miss && below_max) {
                    const double n_left_m = __dadd_rn(n_left, n_miss);
                    if (n_left_m >= msl && __dadd_rn(n_total, -n_left_m) >= msl) {
                        const double g = (newton ? score_newton_gain(Lb, hm, tot, q, reg_lambda, min_child_weight, parent) : score_gain_missing(Lb, hm, tot, m, parent));
                        if (g > my_g) {
                            my_g = g;
                            my_key = 2 * b + 1;
                        }
                    }
                }
            }
            red_g[tid] = my_g;
            red_key[tid] = my_key;
            __syncthreads();
            for (int half = nthreads / 2; half > 0; half >>= 1) {
                if (tid < half && score_better(red_g[tid + half], red_key[tid + half], red_g[tid], red_key[tid])) {
                    red_g[tid] = red_g[tid + half];
                    red_key[tid] = red_key[tid + half];
                }
                __syncthreads();
            }
            if (red_g[0] > neg_inf) {
                gain = red_g[0];
                best_bin = red_key[0] / 2;
                direction = red_key[0] % 2;
                w_left = L[(long long)best_bin * C];
            }
        } else if (tid == 0) {
            const int row = f >= 0 ? f : 0;
            best_bin = random_cut_bin(edge_values, edge_ptr, p, row, bmin, bmax, uniforms[task]);
            const double* Lb = L + (long long)best_bin * C;
            const double n_left = Lb[cnt];
            const bool below_max = best_bin < bmax;
            double gain_right = neg_inf, gain_left = neg_inf;
            if ((below_max || has_miss) && n_left >= msl && __dadd_rn(n_total, -n_left) >= msl)
                gain_right = (newton ? score_newton_gain(Lb, nullptr, tot, q, reg_lambda, min_child_weight, parent) : score_gain(Lb, tot, 1, m, parent));
            const double n_left_m = __dadd_rn(n_left, n_miss);
            if (has_miss && below_max && n_left_m >= msl && __dadd_rn(n_total, -n_left_m) >= msl)
                gain_left = (newton ? score_newton_gain(Lb, hm, tot, q, reg_lambda, min_child_weight, parent) : score_gain_missing(Lb, hm, tot, m, parent));
            direction = gain_left > gain_right ? 1 : 0;
            gain = gain_left > gain_right ? gain_left : gain_right;
            w_left = Lb[0];
        }
        if (tid == 0) {
            if (!(nonconstant && any_value)) gain = neg_inf;
            out_gain[task] = gain;
            out_bin[task] = best_bin;
            out_missing_left[task] = has_miss ? (unsigned char)direction
                                              : (unsigned char)(w_left >= __dadd_rn(w_total, -w_left) ? 1 : 0);
            out_nonconstant[task] = nonconstant ? 1 : 0;
        }
        if (node_done) {
            // count this slot after writing it; the node's last slot picks its best
            const long long node = task / k;
            if (tid == 0) {
                __threadfence();
                sh_last = atomicAdd(node_done + node, 1u) == (unsigned int)(k - 1);
            }
            __syncthreads();
            if (sh_last && tid == 0) {
                node_done[node] = 0u;
                __threadfence();
                best_slot_node(node, hist, node_q, impure, out_gain, out_bin, out_missing_left,
                               node_features, order, out_nonconstant, node_pos, k, n_bins,
                               n_channels, m, newton, has_order, has_pos, n_features, tie_rtol,
                               tie_rounding, 1, out_best);
            }
        }
        __syncthreads();  // the scratch and the reduction arrays are reused by the next slot
    }
}

extern "C" __global__ void tree_score_histograms(
    const float* __restrict__ hist, const int* __restrict__ node_features,
    const double* __restrict__ uniforms, const double* __restrict__ edge_values,
    const long long* __restrict__ edge_ptr, int p,
    long long n_tasks, int n_bins, int n_channels, int m, int min_samples_leaf, int random_split,
    int newton, double reg_lambda, double min_child_weight, double* __restrict__ scratch,
    double* __restrict__ out_gain, int* __restrict__ out_bin,
    unsigned char* __restrict__ out_missing_left, unsigned char* __restrict__ out_nonconstant)
{
    score_tasks(hist, node_features, uniforms, edge_values, edge_ptr, p, n_tasks, n_bins,
                n_channels, m, min_samples_leaf, random_split, newton, reg_lambda,
                min_child_weight, scratch, out_gain, out_bin, out_missing_left, out_nonconstant,
                nullptr, 1, nullptr, nullptr, nullptr, nullptr, 0, 0, 0, 0.0, 0.0, nullptr);
}

// tree_score_histograms and tree_best_slot in one launch (contract:
// ``tree_score_best_slot`` in gpurpo/tree/kernels.py): n_tasks = N k slots, k per node.
extern "C" __global__ void tree_score_best_slot(
    const float* __restrict__ hist, const int* __restrict__ node_features,
    const double* __restrict__ uniforms, const double* __restrict__ edge_values,
    const long long* __restrict__ edge_ptr, int p,
    long long n_tasks, int n_bins, int n_channels, int m, int min_samples_leaf, int random_split,
    int newton, double reg_lambda, double min_child_weight, double* __restrict__ scratch,
    const double* __restrict__ q, const unsigned char* __restrict__ impure,
    const long long* __restrict__ order, const long long* __restrict__ node_pos, int k,
    int has_order, int has_pos, int n_features, double tie_rtol, double tie_rounding,
    unsigned int* __restrict__ node_done, double* out_gain, int* out_bin,
    unsigned char* out_missing_left, unsigned char* out_nonconstant,
    double* __restrict__ out_best)
{
    score_tasks(hist, node_features, uniforms, edge_values, edge_ptr, p, n_tasks, n_bins,
                n_channels, m, min_samples_leaf, random_split, newton, reg_lambda,
                min_child_weight, scratch, out_gain, out_bin, out_missing_left, out_nonconstant,
                node_done, k, q, impure, order, node_pos, has_order, has_pos, n_features,
                tie_rtol, tie_rounding, out_best);
}

// The best slot of every node (contract: ``tree_best_slot`` in gpurpo/tree/kernels.py;
// CPU twin: ``best_slot`` in gpurpo/tree/_numba/tree_score.py).
//
// One thread per node, threads striding over the nodes. The node's tie tolerance
// comes from its own histogram (slot 0 holds all its samples): W and S summed
// over the bins in increasing order, parent = ||S||^2 / W, tolerance
// tie_rtol * max(Q - parent, 0) + tie_rounding * Q (tie_rtol * Q for second-order
// gains); then the largest gain wins, slots within the tolerance of it tie, and the
// tie of smallest visiting-order position wins (the first such slot without an
// order). Pure nodes (impure == 0) and nodes without a valid slot get feature -1.
// With has_pos (the slots hold positions node_pos .. node_pos + k - 1 of the
// node's visiting order, for growth that samples k of n_features features): a
// node without a non-constant slot gets feature -2 (continue at node_pos + k)
// while positions remain, and a node past its first k positions
// (node_pos > 0) takes its first non-constant slot whatever its gain
// (scikit-learn's rule: constant features count as visited).
extern "C" __global__ void tree_best_slot(
    const float* __restrict__ hist, const double* __restrict__ q,
    const unsigned char* __restrict__ impure, const double* __restrict__ gain,
    const int* __restrict__ bins, const unsigned char* __restrict__ missing_left,
    const int* __restrict__ node_features, const long long* __restrict__ order,
    const unsigned char* __restrict__ nonconstant, const long long* __restrict__ node_pos,
    long long n_nodes, int k, int n_bins, int n_channels, int m, int newton, int has_order,
    int has_pos, int n_features, double tie_rtol, double tie_rounding, double* __restrict__ out)
{
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n_nodes; i += stride)
        best_slot_node(i, hist, q, impure, gain, bins, missing_left, node_features, order,
                       nonconstant, node_pos, k, n_bins, n_channels, m, newton, has_order,
                       has_pos, n_features, tie_rtol, tie_rounding, 0, out);
}
