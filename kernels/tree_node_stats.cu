// Purity and Q of a batch of tree nodes (contract: ``tree_node_stats`` in
// gpurpo/tree/kernels.py; CPU twin: gpurpo/tree/_numba/tree_node_stats.py).
//
// One block per node, blocks looping over the nodes. The threads stride over
// the node's samples: each compares its samples' targets with the node's
// first sample (bitwise equality, as the CPU) and sums w * ||y||^2 in
// float64; a barrier-OR gives the purity and a tree reduction Q (the
// contract leaves Q's summation order free: it only scales the tie
// tolerance). The launcher's block size is a power of two, at most
// NODE_STATS_THREADS.

#define NODE_STATS_THREADS 256

extern "C" __global__ void tree_node_stats(
    const int* __restrict__ sample_indices,
    const long long* __restrict__ node_ranges,
    const int* __restrict__ node_tree,
    const float* __restrict__ weights,
    const float* __restrict__ targets,
    long long n,
    int n_trees,
    int m,
    long long n_nodes,
    unsigned char* __restrict__ out_impure,
    double* __restrict__ out_q)
{
    __shared__ double red[NODE_STATS_THREADS];
    const int tid = threadIdx.x;
    const int nthreads = blockDim.x;
    // the launcher never does this: at most NODE_STATS_THREADS, a power of two
    if (nthreads > NODE_STATS_THREADS || (nthreads & (nthreads - 1)) != 0) __trap();
    for (long long node = blockIdx.x; node < n_nodes; node += gridDim.x) {
        const long long start = node_ranges[2 * node];
        const long long stop = node_ranges[2 * node + 1];
        const int t = node_tree[node];
        double q = 0.0;
        int differs = 0;
        if (stop > start) {
            const float* y0 = targets + ((long long)sample_indices[start] * n_trees + t) * m;
            const float* wrow = weights + (long long)t * n;
            for (long long a = start + tid; a < stop; a += nthreads) {
                const long long s = sample_indices[a];
                const float* y = targets + (s * n_trees + t) * m;
                double sq = 0.0;
                for (int c = 0; c < m; ++c) {
                    const float v = y[c];
                    if (v != y0[c]) differs = 1;
                    sq += (double)v * (double)v;
                }
                q += (double)wrow[s] * sq;
            }
        }
        red[tid] = q;
        const int impure = __syncthreads_or(differs);
        for (int half = nthreads / 2; half > 0; half >>= 1) {
            if (tid < half) red[tid] += red[tid + half];
            __syncthreads();
        }
        if (tid == 0) {
            out_impure[node] = impure ? 1 : 0;
            out_q[node] = red[0];
        }
        __syncthreads();  // red is reused by the next node
    }
}
