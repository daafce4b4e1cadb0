// Stable partition of a block's columns by one split (shared by
// tree_partition.cu and tree_split_small.cu through kernel_source, which
// inlines this header).
//
// ``block_stable_partition`` is called by every thread of the block
// (blockDim a multiple of 32, at most BLOCK_PARTITION_MAX_THREADS). Column
// ``src[a]`` (a < ns) goes left when its code ``code_of(src[a])`` is
// ``<= bin``, or is the missing bin and ``miss_left`` is set (``code_of`` a
// row of codes indexed by column, or any functor of a column: the stored
// rows of a sparse X, csr_rows.cuh). The block
// counts the left-going columns (shared-memory integer atomics), then walks
// the columns blockDim at a time: a warp ballot gives each left-going
// column its rank among the warp's, the warps' counts (shared memory) its
// rank within the step, and a running count its rank overall; left columns
// go to ``dst[rank]``, right ones after all left ones, both in their
// original order. Returns the number of left columns.

#define BLOCK_PARTITION_MAX_THREADS 256

__device__ __forceinline__ int partition_code(const unsigned char* row, long long s)
{
    return row[s];
}

__device__ __forceinline__ int partition_code(unsigned char* row, long long s)
{
    return row[s];
}

template <class CodeOf>
__device__ __forceinline__ int partition_code(const CodeOf& code_of, long long s)
{
    return code_of(s);
}

template <class CodeOf>
__device__ long long block_stable_partition(const CodeOf& code_of, const int* src, int* dst,
                                            long long ns, int bin, int miss_left, int missing_bin)
{
    __shared__ int warp_left[BLOCK_PARTITION_MAX_THREADS / 32];
    __shared__ int sh_n_left;
    const int tid = threadIdx.x;
    const int lane = tid & 31;
    const int warp = tid >> 5;
    const int n_warps = blockDim.x >> 5;
    if (blockDim.x > BLOCK_PARTITION_MAX_THREADS || (blockDim.x & 31) != 0) __trap();  // never launched so
    if (tid == 0) sh_n_left = 0;
    __syncthreads();
    int mine = 0;
    for (long long a = tid; a < ns; a += blockDim.x) {
        const int code = partition_code(code_of, src[a]);
        mine += (code == missing_bin ? miss_left != 0 : code <= bin) ? 1 : 0;
    }
    atomicAdd(&sh_n_left, mine);
    __syncthreads();
    const long long n_left = sh_n_left;
    long long placed_left = 0;  // left columns before this step
    for (long long base = 0; base < ns; base += blockDim.x) {
        const long long a = base + tid;
        const bool inside = a < ns;
        int s = 0;
        bool left = false;
        if (inside) {
            s = src[a];
            const int code = partition_code(code_of, s);
            left = code == missing_bin ? miss_left != 0 : code <= bin;
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
            const long long left_before = placed_left + before + __popc(ballot & ((1u << lane) - 1u));
            dst[left ? left_before : n_left + (a - left_before)] = s;
        }
        placed_left += step_left;
        __syncthreads();  // warp_left and sh_n_left are rewritten by the next step or call
    }
    return n_left;
}
