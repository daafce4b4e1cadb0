// Stable partition of the samples of splitting nodes (contract:
// ``tree_partition`` in gpurpo/tree/kernels.py; CPU twin: ``partition`` in
// gpurpo/tree/_kernels_cpu.py).
//
// One block per node, blocks looping over the nodes. The block counts the
// node's left-going samples (shared-memory integer atomics), then walks the
// node's samples blockDim at a time: a warp ballot gives each left-going
// sample its rank among the warp's, the warps' counts (shared memory) give
// the rank within the step, and a running count the rank within the node;
// left samples go to start + rank, right ones after all left ones, both in
// their original order. Samples are read from ``src`` (a copy made by the
// launcher) and written to ``sample_indices``. The launcher's block size is
// a multiple of 32 (the warp size), at most PARTITION_THREADS.

#define PARTITION_THREADS 256

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
    __shared__ int warp_left[PARTITION_THREADS / 32];
    __shared__ int sh_count;
    const int tid = threadIdx.x;
    const int lane = tid & 31;
    const int warp = tid >> 5;
    const int n_warps = blockDim.x >> 5;
    if (blockDim.x > PARTITION_THREADS || (blockDim.x & 31) != 0) __trap();  // never launched so
    for (long long node = blockIdx.x; node < n_nodes; node += gridDim.x) {
        const long long start = node_ranges[2 * node];
        const long long stop = node_ranges[2 * node + 1];
        const unsigned char* row = codes + (long long)node_feature[node] * n;
        const int bin = node_bin[node];
        const bool miss_left = node_missing_left[node] != 0;
        if (tid == 0) sh_count = 0;
        __syncthreads();
        int mine = 0;
        for (long long a = start + tid; a < stop; a += blockDim.x) {
            const int code = row[src[a]];
            mine += (code == missing_bin ? miss_left : code <= bin) ? 1 : 0;
        }
        atomicAdd(&sh_count, mine);
        __syncthreads();
        const long long n_left = sh_count;
        long long placed_left = 0;  // left samples before this step, in the node
        for (long long base = start; base < stop; base += blockDim.x) {
            const long long a = base + tid;
            const bool inside = a < stop;
            int s = 0;
            bool left = false;
            if (inside) {
                s = src[a];
                const int code = row[s];
                left = code == missing_bin ? miss_left : code <= bin;
            }
            const unsigned ballot = __ballot_sync(0xFFFFFFFFu, left ? 1 : 0);
            if (lane == 0) warp_left[warp] = __popc(ballot);
            __syncthreads();
            int before = 0, step_left = 0;
            for (int w = 0; w < n_warps; ++w) {
                if (w < warp) before += warp_left[w];
                step_left += warp_left[w];
            }
            if (inside) {
                const long long left_before =
                    placed_left + before + __popc(ballot & ((1u << lane) - 1u));
                const long long dest =
                    left ? start + left_before : start + n_left + ((a - start) - left_before);
                sample_indices[dest] = s;
            }
            placed_left += step_left;
            __syncthreads();  // warp_left is rewritten by the next step
        }
        if (tid == 0) out_n_left[node] = n_left;
    }
}
