// Prediction over packed node arrays (contracts: ``tree_apply``,
// ``tree_sum_leaves_dense`` and ``tree_sum_leaves_csr`` in
// gpurpo/tree/kernels.py).
//
// tree_apply_*: one thread per (row, tree); consecutive threads take
// consecutive rows of the SAME tree, so a warp walks one tree (its first
// levels stay in cache). A row goes left when x <= threshold (compared in
// double, as the CPU kernel does), NaN follows missing_left.
//
// tree_apply_csr: the same for a CSR X, without densifying its rows.
//
// tree_sum_leaves_dense: out[i, c] += sum_t values[leaf_rows[i, t], c]; one
// thread per (row, output) adds the trees in order into a register starting
// from out[i, c] (no atomics: each cell has one writer; the same additions in
// the same order as the CPU kernel).
// tree_sum_leaves_csr: one thread per row adds its trees' stored entries in tree
// order, each leaf's in stored order, into the row (no atomics: the row has one
// writer, so a cell gets the CPU kernel's additions in the CPU kernel's order, and
// sums that tie on the CPU tie on the GPU, run after run).

#include "csr_rows.cuh"

template <typename T>
__device__ void apply_impl(const T* __restrict__ X, const int* __restrict__ feature,
                           const double* __restrict__ threshold,
                           const unsigned char* __restrict__ missing_left,
                           const int* __restrict__ left, const int* __restrict__ right,
                           const int* __restrict__ roots, int* out, long long n, long long p,
                           int n_trees)
{
    const long long total = n * n_trees;
    for (long long q = blockIdx.x * (long long)blockDim.x + threadIdx.x; q < total;
         q += (long long)gridDim.x * blockDim.x) {
        const int t = (int)(q / n);
        const long long i = q - (long long)t * n;
        int node = roots[t];
        const T* row = X + i * p;
        for (int f = feature[node]; f >= 0; f = feature[node]) {
            const double x = (double)row[f];
            const bool go_left = (x != x) ? missing_left[node] != 0 : x <= threshold[node];
            node = go_left ? left[node] : right[node];
        }
        out[i * n_trees + t] = node;
    }
}

extern "C" __global__ void tree_apply_f32(
    const float* __restrict__ X, const int* __restrict__ feature, const double* __restrict__ threshold,
    const unsigned char* __restrict__ missing_left, const int* __restrict__ left,
    const int* __restrict__ right, const int* __restrict__ roots, int* out, long long n, long long p,
    int n_trees)
{
    apply_impl<float>(X, feature, threshold, missing_left, left, right, roots, out, n, p, n_trees);
}

extern "C" __global__ void tree_apply_f64(
    const double* __restrict__ X, const int* __restrict__ feature, const double* __restrict__ threshold,
    const unsigned char* __restrict__ missing_left, const int* __restrict__ left,
    const int* __restrict__ right, const int* __restrict__ roots, int* out, long long n, long long p,
    int n_trees)
{
    apply_impl<double>(X, feature, threshold, missing_left, left, right, roots, out, n, p, n_trees);
}

// tree_apply_csr: tree_apply of a CSR X (column indices sorted, no duplicates); a node's
// value is found by binary search in the row's stored entries, 0.0 when absent.
extern "C" __global__ void tree_apply_csr(
    const long long* __restrict__ indptr, const int* __restrict__ indices,
    const double* __restrict__ data, const int* __restrict__ feature,
    const double* __restrict__ threshold, const unsigned char* __restrict__ missing_left,
    const int* __restrict__ left, const int* __restrict__ right, const int* __restrict__ roots,
    int* out, long long n, int n_trees)
{
    const long long total = n * n_trees;
    for (long long q = blockIdx.x * (long long)blockDim.x + threadIdx.x; q < total;
         q += (long long)gridDim.x * blockDim.x) {
        const int t = (int)(q / n);
        const long long i = q - (long long)t * n;
        const long long a = indptr[i], b = indptr[i + 1];
        int node = roots[t];
        for (int f = feature[node]; f >= 0; f = feature[node]) {
            const double x = csr_value(indices, data, a, b, f);
            const bool go_left = (x != x) ? missing_left[node] != 0 : x <= threshold[node];
            node = go_left ? left[node] : right[node];
        }
        out[i * n_trees + t] = node;
    }
}

extern "C" __global__ void tree_sum_leaves_dense(
    const int* __restrict__ leaf_rows, const double* __restrict__ values, double* out, long long n,
    int n_trees, long long d)
{
    const long long total = n * d;
    for (long long q = blockIdx.x * (long long)blockDim.x + threadIdx.x; q < total;
         q += (long long)gridDim.x * blockDim.x) {
        const long long i = q / d;
        const long long c = q - i * d;
        const int* rows = leaf_rows + i * n_trees;
        double acc = out[q];
        for (int t = 0; t < n_trees; ++t) {
            const int leaf = rows[t];
            if (leaf >= 0) acc += values[(long long)leaf * d + c];
        }
        out[q] = acc;
    }
}

extern "C" __global__ void tree_sum_leaves_csr(
    const int* __restrict__ leaf_rows, const long long* __restrict__ indptr,
    const long long* __restrict__ indices, const double* __restrict__ data, double* out, long long n,
    int n_trees, long long d)
{
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
         i += (long long)gridDim.x * blockDim.x) {
        const int* rows = leaf_rows + i * n_trees;
        double* row = out + i * d;
        for (int t = 0; t < n_trees; ++t) {
            const int leaf = rows[t];
            if (leaf < 0) continue;
            for (long long e = indptr[leaf]; e < indptr[leaf + 1]; ++e) row[indices[e]] += data[e];
        }
    }
}
