// Ordered sums of consecutive segments of a float64 array (contract:
// ``tree_segment_sums`` in gpurpo/tree/kernels.py; CPU twin:
// gpurpo/tree/_numba/tree_segment_sums.py).
//
// One thread per segment, threads striding over the segments: segment s is
// values[bounds[s]:bounds[s + 1]], summed from 0.0 in increasing position, so
// the result is the CPU's sum bit for bit (a tree reduction would not be).
// The segments are the runs of equal (leaf, label) keys of the leaf values of
// a batch of trees: a few entries each.

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
