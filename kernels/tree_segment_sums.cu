// Ordered sums of consecutive segments (contracts: ``tree_segment_sums`` and
// ``tree_segment_row_sums`` in gpurpo/tree/kernels.py; CPU twins:
// gpurpo/tree/_numba/tree_segment_sums.py).
//
// Every sum starts from 0.0 and adds its segment's entries in increasing
// position, so the result is the CPU's sum bit for bit (a tree reduction or
// atomics would not be). The segments are the leaves of a batch of trees,
// their entries the leaves' samples in sample order: the order in which the
// CPU's leaf-sum kernels visit them.
//
// tree_segment_sums: one thread per segment of a float64 array (the runs of
// equal (leaf, label) keys of sparse leaf values: a few entries each).
//
// tree_segment_row_sums: one thread per (segment, column) of a dense Y,
// threads striding over them column-fastest, so that a warp reads
// consecutive columns of one row of Y: out[s, c] = 0.0 + w[e] * Y[row[e], c]
// + ... over the entries e of segment s. Products and sums are rounded
// separately (__dmul_rn, __dadd_rn: no fused multiply-add), as the CPU
// kernel rounds them.

extern "C" __global__ void tree_segment_sums(
    const double* __restrict__ values,
    const long long* __restrict__ bounds,
    long long n_segments,
    double* __restrict__ out)
{
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (long long s = (long long)blockIdx.x * blockDim.x + threadIdx.x; s < n_segments; s += stride) {
        double acc = 0.0;
        for (long long q = bounds[s]; q < bounds[s + 1]; ++q) acc += values[q];
        out[s] = acc;
    }
}

template <typename T>
__device__ void segment_row_sums(const long long* __restrict__ rows,
                                 const double* __restrict__ row_weights,
                                 const long long* __restrict__ bounds,
                                 const T* __restrict__ Y, long long n_segments, long long d,
                                 double* __restrict__ out)
{
    const long long total = n_segments * d;
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (long long q = (long long)blockIdx.x * blockDim.x + threadIdx.x; q < total; q += stride) {
        const long long s = q / d;
        const long long c = q - s * d;
        double acc = 0.0;
        for (long long e = bounds[s]; e < bounds[s + 1]; ++e)
            acc = __dadd_rn(acc, __dmul_rn(row_weights[e], (double)Y[rows[e] * d + c]));
        out[q] = acc;
    }
}

extern "C" __global__ void tree_segment_row_sums_f32(
    const long long* __restrict__ rows, const double* __restrict__ row_weights,
    const long long* __restrict__ bounds, const float* __restrict__ Y, long long n_segments,
    long long d, double* __restrict__ out)
{
    segment_row_sums<float>(rows, row_weights, bounds, Y, n_segments, d, out);
}

extern "C" __global__ void tree_segment_row_sums_f64(
    const long long* __restrict__ rows, const double* __restrict__ row_weights,
    const long long* __restrict__ bounds, const double* __restrict__ Y, long long n_segments,
    long long d, double* __restrict__ out)
{
    segment_row_sums<double>(rows, row_weights, bounds, Y, n_segments, d, out);
}
