// Leaf values in the ORIGINAL output space: per-leaf weighted sums of Y
// (contracts: ``tree_accumulate_leaves_dense`` / ``_csr`` in
// gpurpo/tree/kernels.py):
//     out[leaf[i], c] += weights[i] * Y[i, c]      for every i with leaf[i] >= 0
// in float64 (double atomics, sm_60+).
//
// Dense Y: one work item per (sample, output), consecutive threads on
// consecutive outputs of a sample (coalesced loads of Y). When the (L, d)
// result fits in shared memory the block accumulates privately there first
// (boosting trees have few leaves, so global atomics would all hit the same
// few cells) and merges its nonzero cells with global atomics.
// CSR Y: one work item per stored entry; its row is found by binary search in
// indptr.

template <typename T>
__device__ void accumulate_dense_global(const int* __restrict__ leaf_of_sample,
                                        const double* __restrict__ weights,
                                        const T* __restrict__ Y, double* out, long long n, long long d)
{
    const long long total = n * d;
    for (long long q = blockIdx.x * (long long)blockDim.x + threadIdx.x; q < total;
         q += (long long)gridDim.x * blockDim.x) {
        const long long i = q / d;
        const int leaf = leaf_of_sample[i];
        if (leaf < 0) continue;
        const double y = (double)Y[q];
        if (y == 0.0) continue;
        atomicAdd(&out[(long long)leaf * d + (q - i * d)], weights[i] * y);
    }
}

template <typename T>
__device__ void accumulate_dense_shared(const int* __restrict__ leaf_of_sample,
                                        const double* __restrict__ weights,
                                        const T* __restrict__ Y, double* out, long long n, long long d,
                                        long long n_leaves)
{
    extern __shared__ double acc[];
    const long long cells = n_leaves * d;
    for (long long q = threadIdx.x; q < cells; q += blockDim.x) acc[q] = 0.0;
    __syncthreads();
    const long long total = n * d;
    for (long long q = blockIdx.x * (long long)blockDim.x + threadIdx.x; q < total;
         q += (long long)gridDim.x * blockDim.x) {
        const long long i = q / d;
        const int leaf = leaf_of_sample[i];
        if (leaf < 0) continue;
        const double y = (double)Y[q];
        if (y == 0.0) continue;
        atomicAdd(&acc[(long long)leaf * d + (q - i * d)], weights[i] * y);
    }
    __syncthreads();
    for (long long q = threadIdx.x; q < cells; q += blockDim.x) {
        const double v = acc[q];
        if (v != 0.0) atomicAdd(&out[q], v);
    }
}

extern "C" __global__ void tree_accumulate_leaves_dense_f32(
    const int* __restrict__ leaf_of_sample, const double* __restrict__ weights,
    const float* __restrict__ Y, double* out, long long n, long long d)
{
    accumulate_dense_global<float>(leaf_of_sample, weights, Y, out, n, d);
}

extern "C" __global__ void tree_accumulate_leaves_dense_f64(
    const int* __restrict__ leaf_of_sample, const double* __restrict__ weights,
    const double* __restrict__ Y, double* out, long long n, long long d)
{
    accumulate_dense_global<double>(leaf_of_sample, weights, Y, out, n, d);
}

extern "C" __global__ void tree_accumulate_leaves_dense_shared_f32(
    const int* __restrict__ leaf_of_sample, const double* __restrict__ weights,
    const float* __restrict__ Y, double* out, long long n, long long d, long long n_leaves)
{
    accumulate_dense_shared<float>(leaf_of_sample, weights, Y, out, n, d, n_leaves);
}

extern "C" __global__ void tree_accumulate_leaves_dense_shared_f64(
    const int* __restrict__ leaf_of_sample, const double* __restrict__ weights,
    const double* __restrict__ Y, double* out, long long n, long long d, long long n_leaves)
{
    accumulate_dense_shared<double>(leaf_of_sample, weights, Y, out, n, d, n_leaves);
}

extern "C" __global__ void tree_accumulate_leaves_csr(
    const int* __restrict__ leaf_of_sample, const double* __restrict__ weights,
    const long long* __restrict__ indptr, const long long* __restrict__ indices,
    const double* __restrict__ data, double* out, long long n, long long d)
{
    const long long nnz = indptr[n];
    for (long long q = blockIdx.x * (long long)blockDim.x + threadIdx.x; q < nnz;
         q += (long long)gridDim.x * blockDim.x) {
        // row i with indptr[i] <= q < indptr[i + 1] (rows without entries are skipped over)
        long long lo = 0, hi = n;
        while (hi - lo > 1) {
            const long long mid = lo + (hi - lo) / 2;
            if (indptr[mid] <= q) lo = mid; else hi = mid;
        }
        const int leaf = leaf_of_sample[lo];
        if (leaf < 0) continue;
        atomicAdd(&out[(long long)leaf * d + indices[q]], weights[lo] * data[q]);
    }
}
