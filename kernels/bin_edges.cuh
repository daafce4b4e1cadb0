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

// The Extra-Trees split "code <= b" of feature f in a node whose codes span [bmin, bmax],
// from the uniform draw u: the candidate edge e(b), b in [bmin, bmax - 1], nearest to
// t = lo + u (hi - lo), [lo, hi] extending [e(bmin), e(bmax - 1)] by half a neighbouring
// gap on each side (evenly spaced edges are drawn with probability 1 / K each). bmax for a
// constant feature. The numba twin is _random_cut in gpurpo/tree/binning/_edge_lookup.py.
__device__ __forceinline__ int random_cut_bin(const double* edge_values, const long long* edge_ptr, int f, int bmin,
                                              int bmax, double u)
{
    if (bmax <= bmin) return bmax;
    if (bmax - bmin == 1) return bmin;
    const double first = bin_edge(edge_values, edge_ptr, f, bmin);
    const double last = bin_edge(edge_values, edge_ptr, f, bmax - 1);
    const double lo = __dadd_rn(first, -__dmul_rn(0.5, __dadd_rn(bin_edge(edge_values, edge_ptr, f, bmin + 1), -first)));
    const double hi = __dadd_rn(last, __dmul_rn(0.5, __dadd_rn(last, -bin_edge(edge_values, edge_ptr, f, bmax - 2))));
    const double t = __dadd_rn(lo, __dmul_rn(u, __dadd_rn(hi, -lo)));
    int b = bmin;
    double below = first;
    while (b + 1 <= bmax - 1) {
        const double above = bin_edge(edge_values, edge_ptr, f, b + 1);
        if (!(__dmul_rn(0.5, __dadd_rn(below, above)) <= t)) break;  // NaN (edges of +inf) stops too
        ++b;
        below = above;
    }
    return b;
}
