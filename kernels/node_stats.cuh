// Purity and Q of a batch of tree nodes, the task loop of ``tree_node_stats``
// (tree_node_stats.cu, whose comment describes it) and of ``tree_level_large_setup``
// (tree_level.cu), called by every thread of the block.

#ifndef GPURPO_NODE_STATS_CUH
#define GPURPO_NODE_STATS_CUH

#define NODE_STATS_THREADS 256

__device__ __forceinline__ void node_stats_tasks(
    const int* __restrict__ sample_indices,
    const long long* __restrict__ node_ranges,
    const int* __restrict__ node_tree,
    const float* __restrict__ weights,
    const float* __restrict__ targets,
    long long n,
    int n_trees,
    int m,
    long long n_nodes,
    int blocks_per_node,
    double* partial_q,
    int* partial_differs,
    unsigned int* __restrict__ node_done,
    unsigned char* __restrict__ out_impure,
    double* __restrict__ out_q)
{
    __shared__ double red[NODE_STATS_THREADS];
    __shared__ int sh_last;
    const int tid = threadIdx.x;
    const int nthreads = blockDim.x;
    // the launcher never does this: at most NODE_STATS_THREADS, a power of two
    if (nthreads > NODE_STATS_THREADS || (nthreads & (nthreads - 1)) != 0) __trap();
    const long long n_tasks = n_nodes * blocks_per_node;
    const long long step = (long long)nthreads * blocks_per_node;
    for (long long task = blockIdx.x; task < n_tasks; task += gridDim.x) {
        const long long node = task / blocks_per_node;
        const long long part = task - node * blocks_per_node;
        const long long start = node_ranges[2 * node];
        const long long stop = node_ranges[2 * node + 1];
        const int t = node_tree[node];
        double q = 0.0;
        int differs = 0;
        if (stop > start) {
            const float* y0 = targets + ((long long)sample_indices[start] * n_trees + t) * m;
            const float* wrow = weights + (long long)t * n;
            for (long long a = start + part * nthreads + tid; a < stop; a += step) {
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
        if (blocks_per_node == 1) {
            if (tid == 0) {
                out_impure[node] = impure ? 1 : 0;
                out_q[node] = red[0];
            }
        } else {
            if (tid == 0) {
                partial_q[task] = red[0];
                partial_differs[task] = impure ? 1 : 0;
                __threadfence();
                sh_last = atomicAdd(node_done + node, 1u) == (unsigned int)(blocks_per_node - 1);
            }
            __syncthreads();
            if (sh_last && tid == 0) {
                node_done[node] = 0u;
                __threadfence();
                double total = 0.0;
                int any = 0;
                for (long long b = node * blocks_per_node; b < (node + 1) * blocks_per_node; ++b) {
                    total += __ldcg(partial_q + b);
                    any |= __ldcg(partial_differs + b);
                }
                out_impure[node] = any ? 1 : 0;
                out_q[node] = total;
            }
        }
        __syncthreads();  // red is reused by the next task
    }
}

#endif  // GPURPO_NODE_STATS_CUH
