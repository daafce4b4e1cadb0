// Best split of every (node, slot) from its histogram (contract:
// ``tree_score_histograms`` in gpurpo/tree/kernels.py; CPU twin:
// ``score_histograms`` in gpurpo/tree/_kernels_cpu.py; equations in
// gpurpo/tree/splitting.py).
//
// One thread per (node, slot), grid-stride loop. A thread makes one pass
// over its slot's value bins to get the per-channel totals and the occupied
// range, then one scan in increasing bin order with running left sums,
// scoring "missing right" and "missing left" at every occupied bin. Sums
// follow the CPU kernel's order exactly (bins in increasing order per
// channel, channels 1..m in order for squared norms) and every product and
// sum is rounded separately (__dmul_rn/__dadd_rn: no fused multiply-add), so
// gains, and therefore the chosen bins, are bit-identical to the numba
// kernel. The per-thread running sums (3 vectors of C doubles) live in
// global scratch laid out channel-major, ``scratch[(v * C + c) * n_threads +
// thread]``, so that the threads of a warp touch consecutive addresses; the
// launcher caps the number of threads to bound that scratch.

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

extern "C" __global__ void tree_score_histograms(
    const float* __restrict__ hist, const int* __restrict__ node_features,
    const double* __restrict__ uniforms, const double* __restrict__ thresholds,
    long long n_tasks, int n_bins, int n_channels, int m, int min_samples_leaf, int random_split,
    double* __restrict__ scratch, long long n_threads,
    double* __restrict__ out_gain, int* __restrict__ out_bin,
    unsigned char* __restrict__ out_missing_left, unsigned char* __restrict__ out_nonconstant)
{
    const long long thread = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (thread >= n_threads) return;
    const int nvb = n_bins - 1;
    const int cnt = n_channels == m + 2 ? n_channels - 1 : 0;
    const long long stride = n_threads;
    double* tot = scratch + thread;
    double* left = scratch + (long long)n_channels * stride + thread;
    double* left_m = scratch + 2LL * n_channels * stride + thread;
    const double neg_inf = -__longlong_as_double(0x7FF0000000000000LL);
    const double msl = (double)min_samples_leaf;

    for (long long task = thread; task < n_tasks; task += n_threads) {
        const float* h = hist + task * (long long)n_bins * n_channels;
        const int f = node_features[task];
        for (int c = 0; c < n_channels; ++c) tot[c * stride] = 0.0;
        int bmin = -1, bmax = -1, n_occupied = 0;
        for (int b = 0; b < nvb; ++b) {
            const float* hb = h + (long long)b * n_channels;
            for (int c = 0; c < n_channels; ++c)
                tot[c * stride] = __dadd_rn(tot[c * stride], (double)hb[c]);
            if (hb[cnt] > 0.0f) {
                if (bmin < 0) bmin = b;
                bmax = b;
                ++n_occupied;
            }
        }
        const bool any_value = bmin >= 0;
        if (!any_value) {
            bmin = 0;
            bmax = nvb - 1;
        }
        const float* hm = h + (long long)nvb * n_channels;
        const double n_miss = (double)hm[cnt];
        const bool has_miss = n_miss > 0.0;
        for (int c = 0; c < n_channels; ++c)
            tot[c * stride] = __dadd_rn(tot[c * stride], (double)hm[c]);
        const double n_total = tot[cnt * stride];
        const bool nonconstant = f >= 0 && n_occupied + (has_miss ? 1 : 0) >= 2;
        const double w_total = tot[0];
        const double parent = score_sq_norm(tot, stride, m) / (w_total > 0 ? w_total : 1.0);
        for (int c = 0; c < n_channels; ++c) left[c * stride] = 0.0;
        double gain, w_left;
        int best_bin, direction;
        if (!random_split) {
            gain = neg_inf;
            best_bin = 0;
            direction = 0;
            w_left = (double)h[0];
            for (int b = 0; b < nvb; ++b) {
                const float* hb = h + (long long)b * n_channels;
                for (int c = 0; c < n_channels; ++c)
                    left[c * stride] = __dadd_rn(left[c * stride], (double)hb[c]);
                if (!(hb[cnt] > 0.0f)) continue;
                const double n_left = left[cnt * stride];
                const bool below_max = b < bmax;
                if ((below_max || has_miss) && n_left >= msl && __dadd_rn(n_total, -n_left) >= msl) {
                    const double g = score_gain(left, tot, stride, m, parent);
                    if (g > gain) {
                        gain = g;
                        best_bin = b;
                        direction = 0;
                        w_left = left[0];
                    }
                }
                if (has_miss && below_max) {
                    const double n_left_m = __dadd_rn(n_left, n_miss);
                    if (n_left_m >= msl && __dadd_rn(n_total, -n_left_m) >= msl) {
                        for (int c = 0; c < n_channels; ++c)
                            left_m[c * stride] = __dadd_rn(left[c * stride], (double)hm[c]);
                        const double g = score_gain(left_m, tot, stride, m, parent);
                        if (g > gain) {
                            gain = g;
                            best_bin = b;
                            direction = 1;
                            w_left = left[0];
                        }
                    }
                }
            }
        } else {
            const double* thr = thresholds + (long long)(f >= 0 ? f : 0) * nvb;
            double lo = 0.0, hi = 0.0;
            if (bmax > bmin) {
                lo = thr[bmin];
                hi = thr[bmax - 1 > 0 ? bmax - 1 : 0];
            }
            const double cut_value = __dadd_rn(lo, __dmul_rn(uniforms[task], __dadd_rn(hi, -lo)));
            if (bmax > bmin) {
                int steps = 0;
                for (int b = bmin + 1; b < bmax; ++b)
                    if (thr[b] <= cut_value) ++steps;
                best_bin = bmin + steps;
            } else {
                best_bin = bmax;
            }
            for (int b = 0; b <= best_bin; ++b) {
                const float* hb = h + (long long)b * n_channels;
                for (int c = 0; c < n_channels; ++c)
                    left[c * stride] = __dadd_rn(left[c * stride], (double)hb[c]);
            }
            const double n_left = left[cnt * stride];
            const bool below_max = best_bin < bmax;
            double gain_right = neg_inf, gain_left = neg_inf;
            if ((below_max || has_miss) && n_left >= msl && __dadd_rn(n_total, -n_left) >= msl)
                gain_right = score_gain(left, tot, stride, m, parent);
            const double n_left_m = __dadd_rn(n_left, n_miss);
            if (has_miss && below_max && n_left_m >= msl && __dadd_rn(n_total, -n_left_m) >= msl) {
                for (int c = 0; c < n_channels; ++c)
                    left_m[c * stride] = __dadd_rn(left[c * stride], (double)hm[c]);
                gain_left = score_gain(left_m, tot, stride, m, parent);
            }
            direction = gain_left > gain_right ? 1 : 0;
            gain = gain_left > gain_right ? gain_left : gain_right;
            w_left = left[0];
        }
        if (!(nonconstant && any_value)) gain = neg_inf;
        out_gain[task] = gain;
        out_bin[task] = best_bin;
        out_missing_left[task] = has_miss ? (unsigned char)direction
                                          : (unsigned char)(w_left >= __dadd_rn(w_total, -w_left) ? 1 : 0);
        out_nonconstant[task] = nonconstant ? 1 : 0;
    }
}
