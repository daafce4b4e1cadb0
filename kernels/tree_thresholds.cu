// The values on each side of every split of a batch of grown trees (contracts:
// ``tree_neighbour_values`` and ``tree_neighbour_values_csr`` in gpurpo/tree/kernels.py).
//
// One thread per (row, tree), as tree_apply: consecutive threads take consecutive
// rows of the same tree. A row of nonzero weight walks down its tree and, at each
// internal node, records its value on the side it goes to: the largest value sent
// left (``low``) and the smallest sent right (``high``). Rows meet at a node, so the
// updates are atomic max/min on order-preserving 64-bit keys of the doubles (the
// key of x is its bit pattern with the sign bit set when x >= 0, every bit flipped
// when x < 0: unsigned order equals numeric order); the launcher encodes the
// initial values and decodes the result.

#include "csr_rows.cuh"

__device__ __forceinline__ unsigned long long order_key(double x)
{
    const unsigned long long bits = (unsigned long long)__double_as_longlong(x);
    return (bits >> 63) ? ~bits : (bits | 0x8000000000000000ULL);
}

__device__ __forceinline__ int record(double x, int node, const double* __restrict__ threshold,
                                      const unsigned char* __restrict__ missing_left,
                                      const int* __restrict__ left, const int* __restrict__ right,
                                      unsigned long long* low, unsigned long long* high)
{
    if (x != x) return missing_left[node] ? left[node] : right[node];
    if (x <= threshold[node]) {
        atomicMax(low + node, order_key(x));
        return left[node];
    }
    atomicMin(high + node, order_key(x));
    return right[node];
}

template <typename T>
__device__ void neighbour_values_impl(const T* __restrict__ X, const float* __restrict__ weights,
                                      const int* __restrict__ feature,
                                      const double* __restrict__ threshold,
                                      const unsigned char* __restrict__ missing_left,
                                      const int* __restrict__ left, const int* __restrict__ right,
                                      const int* __restrict__ roots, unsigned long long* low,
                                      unsigned long long* high, long long n, long long p,
                                      int n_trees)
{
    const long long total = n * n_trees;
    for (long long q = blockIdx.x * (long long)blockDim.x + threadIdx.x; q < total;
         q += (long long)gridDim.x * blockDim.x) {
        const int t = (int)(q / n);
        const long long i = q - (long long)t * n;
        if (!(weights[t * n + i] > 0.0f)) continue;
        const T* row = X + i * p;
        int node = roots[t];
        for (int f = feature[node]; f >= 0; f = feature[node])
            node = record((double)row[f], node, threshold, missing_left, left, right, low, high);
    }
}

extern "C" __global__ void tree_neighbour_values_f32(
    const float* __restrict__ X, const float* __restrict__ weights, const int* __restrict__ feature,
    const double* __restrict__ threshold, const unsigned char* __restrict__ missing_left,
    const int* __restrict__ left, const int* __restrict__ right, const int* __restrict__ roots,
    unsigned long long* low, unsigned long long* high, long long n, long long p, int n_trees)
{
    neighbour_values_impl<float>(X, weights, feature, threshold, missing_left, left, right, roots,
                                 low, high, n, p, n_trees);
}

extern "C" __global__ void tree_neighbour_values_f64(
    const double* __restrict__ X, const float* __restrict__ weights, const int* __restrict__ feature,
    const double* __restrict__ threshold, const unsigned char* __restrict__ missing_left,
    const int* __restrict__ left, const int* __restrict__ right, const int* __restrict__ roots,
    unsigned long long* low, unsigned long long* high, long long n, long long p, int n_trees)
{
    neighbour_values_impl<double>(X, weights, feature, threshold, missing_left, left, right, roots,
                                  low, high, n, p, n_trees);
}

// tree_neighbour_values_csr: the same for a CSR X (column indices increasing, no
// duplicates); a node's value is found by binary search in the row, 0.0 when absent.
extern "C" __global__ void tree_neighbour_values_csr(
    const long long* __restrict__ indptr, const int* __restrict__ indices,
    const double* __restrict__ data, const float* __restrict__ weights,
    const int* __restrict__ feature, const double* __restrict__ threshold,
    const unsigned char* __restrict__ missing_left, const int* __restrict__ left,
    const int* __restrict__ right, const int* __restrict__ roots, unsigned long long* low,
    unsigned long long* high, long long n, int n_trees)
{
    const long long total = n * n_trees;
    for (long long q = blockIdx.x * (long long)blockDim.x + threadIdx.x; q < total;
         q += (long long)gridDim.x * blockDim.x) {
        const int t = (int)(q / n);
        const long long i = q - (long long)t * n;
        if (!(weights[t * n + i] > 0.0f)) continue;
        const long long a = indptr[i], b = indptr[i + 1];
        int node = roots[t];
        for (int f = feature[node]; f >= 0; f = feature[node])
            node = record(csr_value(indices, data, a, b, f), node, threshold, missing_left, left,
                          right, low, high);
    }
}
