// Row-block partial sums added in block order (shared by boost_round.cu and
// boost_logistic.cu through kernel_source, which inlines this header).
//
// ``block_order_sums`` adds cell ``e`` of two arrays of partial sums, each
// ``n_blocks`` rows of ``cells`` cells (one row per block of rows), to 0 in
// block order, every sum rounded separately: the order the CPU twins sum in.

__device__ __forceinline__ void block_order_sums(const double* __restrict__ a,
                                                 const double* __restrict__ b,
                                                 long long n_blocks, long long cells, long long e,
                                                 double* sum_a, double* sum_b)
{
    double sa = 0.0, sb = 0.0;
    for (long long blk = 0; blk < n_blocks; ++blk) {
        sa = __dadd_rn(sa, a[blk * cells + e]);
        sb = __dadd_rn(sb, b[blk * cells + e]);
    }
    *sum_a = sa;
    *sum_b = sb;
}
