// The ragged table of bin edges (shared by tree_score.cu and tree_split_small.cu
// through kernel_source, which inlines this header).
//
// Feature f's increasing upper bin edges are edge_values[edge_ptr[f] .. edge_ptr[f + 1] - 1]:
// the split "code <= b" is "x <= bin_edge(f, b)". From the feature's last value bin on
// (b >= its number of edges) the edge is +inf, as in the (p, n_bins - 1) table padded
// with +inf that the kernels read before, without its p x 255 cells. The numba twin is
// _edge in gpurpo/tree/binning/_edge_lookup.py.

__device__ __forceinline__ double bin_edge(const double* edge_values, const long long* edge_ptr, int f, int b)
{
    const long long at = edge_ptr[f] + b;
    return at < edge_ptr[f + 1] ? edge_values[at] : __longlong_as_double(0x7ff0000000000000LL);
}
