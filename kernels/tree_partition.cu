// Stable partition of the samples of splitting nodes (contract:
// ``tree_partition`` in gpurpo/tree/kernels.py; CPU twin: ``partition`` in
// gpurpo/tree/_numba/tree_partition.py).
//
// One block per node, blocks looping over the nodes (a node of feature < 0 is
// skipped, n_left 0); each splitting node's samples are
// partitioned stably by ``block_stable_partition`` (block_partition.cuh),
// read from ``src`` (a copy made by the launcher) and written to
// ``sample_indices``. The launcher's block size is a multiple of 32 (the
// warp size), at most PARTITION_THREADS.

#include "block_partition.cuh"

#define PARTITION_THREADS BLOCK_PARTITION_MAX_THREADS

extern "C" __global__ void tree_partition(
    const unsigned char* __restrict__ codes,
    const int* __restrict__ src,
    int* __restrict__ sample_indices,
    const long long* __restrict__ node_ranges,
    const int* __restrict__ node_feature,
    const int* __restrict__ node_bin,
    const unsigned char* __restrict__ node_missing_left,
    long long n,
    int missing_bin,
    long long n_nodes,
    long long* __restrict__ out_n_left)
{
    for (long long node = blockIdx.x; node < n_nodes; node += gridDim.x) {
        if (node_feature[node] < 0) {  // not splitting: its samples stay
            if (threadIdx.x == 0) out_n_left[node] = 0;
            continue;
        }
        const long long start = node_ranges[2 * node];
        const long long n_left = block_stable_partition(
            codes + (long long)node_feature[node] * n, src + start, sample_indices + start,
            node_ranges[2 * node + 1] - start, node_bin[node], node_missing_left[node], missing_bin);
        if (threadIdx.x == 0) out_n_left[node] = n_left;
    }
}
