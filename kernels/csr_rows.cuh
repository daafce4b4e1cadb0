// A value of a CSR row by binary search among its stored entries (shared by the tree
// traversal kernels of tree_predict.cu and tree_thresholds.cu).

// X[i, f] of a CSR row whose stored entries are [a, b) (column indices increasing, no
// duplicates): the stored value, 0.0 when the row stores no entry for f.
__device__ __forceinline__ double csr_value(const int* __restrict__ indices,
                                            const double* __restrict__ data, long long a,
                                            long long b, int f)
{
    long long lo = a, hi = b;
    while (lo < hi) {
        const long long mid = (lo + hi) >> 1;
        if (indices[mid] < f) lo = mid + 1;
        else hi = mid;
    }
    return (lo < b && indices[lo] == f) ? data[lo] : 0.0;
}
