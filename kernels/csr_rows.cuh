// A value or a bin code of a CSR row by binary search among its stored entries
// (shared by the tree traversal kernels of tree_predict.cu and tree_thresholds.cu,
// and by the growth kernels that read a sparse X's codes row by row).

// The first position in [a, b) of the increasing ``indices`` whose index is >= f
// (b when there is none).
__device__ __forceinline__ long long csr_lower_bound(const int* __restrict__ indices,
                                                     long long a, long long b, int f)
{
    long long lo = a, hi = b;
    while (lo < hi) {
        const long long mid = (lo + hi) >> 1;
        if (indices[mid] < f) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

// X[i, f] of a CSR row whose stored entries are [a, b) (column indices increasing, no
// duplicates): the stored value, 0.0 when the row stores no entry for f.
__device__ __forceinline__ double csr_value(const int* __restrict__ indices,
                                            const double* __restrict__ data, long long a,
                                            long long b, int f)
{
    const long long lo = csr_lower_bound(indices, a, b, f);
    return (lo < b && indices[lo] == f) ? data[lo] : 0.0;
}

// The codes of a sparse X held as its stored entries row by row
// (gpurpo.tree.binning.SparseCodes: ``row_ptr``, ``row_features``, ``row_codes``,
// ``zero_code``): every code is its feature's code of 0.0 but at the listed entries.
struct StoredRows {
    const long long* row_ptr;        // (n + 1,): row s owns entries row_ptr[s] .. row_ptr[s + 1] - 1
    const int* row_features;         // feature of each entry, increasing within a row
    const unsigned char* row_codes;  // code of each entry
    const unsigned char* zero_code;  // (p,) code of 0.0 of each feature
};

__device__ __forceinline__ StoredRows stored_rows(const long long* row_ptr, const int* row_features,
                                                 const unsigned char* row_codes,
                                                 const unsigned char* zero_code)
{
    StoredRows r;
    r.row_ptr = row_ptr;
    r.row_features = row_features;
    r.row_codes = row_codes;
    r.zero_code = zero_code;
    return r;
}

// The code of feature f of row s.
__device__ __forceinline__ int stored_code(const StoredRows& r, long long s, int f)
{
    const long long b = r.row_ptr[s + 1];
    const long long e = csr_lower_bound(r.row_features, r.row_ptr[s], b, f);
    return (e < b && r.row_features[e] == f) ? r.row_codes[e] : r.zero_code[f];
}

// The codes of one feature for a kernel, indexed by column: dense (``codes`` a row of
// codes) when ``codes`` is set, else looked up in the stored rows, column c being
// sample ``sample_of[c]`` (c itself when ``sample_of`` is null).
struct FeatureCodes {
    const unsigned char* codes;
    StoredRows rows;
    int feature;
    const int* sample_of;
    __device__ __forceinline__ int operator()(long long c) const
    {
        if (codes) return (int)codes[c];
        return stored_code(rows, sample_of ? (long long)sample_of[c] : c, feature);
    }
};
