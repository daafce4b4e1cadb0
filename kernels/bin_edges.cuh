// The ragged table of bin edges (shared by tree_score.cu and tree_split_small.cu
// through kernel_source, which inlines this header).
//
// Feature f's increasing upper bin edges are edge_values[edge_ptr[f] .. edge_ptr[f + 1] - 1]:
// the split "code <= b" is "x <= bin_edge(f, b)". From the feature's last value bin on
// (b >= its number of edges) the edge is +inf: the values of a (p, n_bins - 1) table padded
// with +inf, without its p x 255 cells. The numba twin is _edge in
// gpurpo/tree/binning/_edge_lookup.py.

__device__ __forceinline__ double bin_edge(const double* edge_values, const long long* edge_ptr, int f, int b)
{
    const long long at = edge_ptr[f] + b;
    return at < edge_ptr[f + 1] ? edge_values[at] : __longlong_as_double(0x7ff0000000000000LL);
}

// The smallest fitted value of value bin b of feature f (of p): the bin lows follow the
// edges in edge_values, bin b of f at edge_ptr[p] + edge_ptr[f] + f + b; +inf beyond the
// feature's last value bin, as bin_edge. The numba twin is _bin_low in
// gpurpo/tree/binning/_edge_lookup.py.
__device__ __forceinline__ double bin_low(const double* edge_values, const long long* edge_ptr, int p, int f, int b)
{
    if (b > edge_ptr[f + 1] - edge_ptr[f]) return __longlong_as_double(0x7ff0000000000000LL);
    return edge_values[edge_ptr[p] + edge_ptr[f] + f + b];
}

// The Extra-Trees split "code <= b" of feature f (of p) in a node whose codes span
// [bmin, bmax], from the uniform draw u: t = lo + u (hi - lo) between the smallest fitted
// values lo, hi of bins bmin and bmax (bin_low), and the cut is the largest
// bin b in [bmin, bmax - 1] whose low is at most t (binary search): scikit-learn's uniform
// threshold between the node's smallest and largest value. bmax for a constant feature.
// The numba twin is _random_cut in gpurpo/tree/binning/_edge_lookup.py.
__device__ __forceinline__ int random_cut_bin(const double* edge_values, const long long* edge_ptr, int p, int f,
                                              int bmin, int bmax, double u)
{
    if (bmax <= bmin) return bmax;
    if (bmax - bmin == 1) return bmin;
    const double lo = bin_low(edge_values, edge_ptr, p, f, bmin);
    const double hi = bin_low(edge_values, edge_ptr, p, f, bmax);
    const double t = __dadd_rn(lo, __dmul_rn(u, __dadd_rn(hi, -lo)));
    // the largest b in [first, last] with low(b) <= t (lows increase; NaN: first)
    int first = bmin, last = bmax - 1;
    while (first < last) {
        const int mid = (first + last + 1) >> 1;
        if (bin_low(edge_values, edge_ptr, p, f, mid) <= t)
            first = mid;
        else
            last = mid - 1;
    }
    return first;
}
