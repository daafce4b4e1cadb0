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
// original order. Returns the number of left columns. Its two passes are
// ``block_count_left`` and ``block_place`` (which takes the destinations of
// the left and the right columns apart: a node partitioned in parts places
// each part after the parts before it).

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

// Whether column s goes left: its code <= bin, or the missing bin when miss_left.
template <class CodeOf>
__device__ __forceinline__ bool partition_goes_left(const CodeOf& code_of, long long s, int bin,
                                                    int miss_left, int missing_bin)
{
    const int code = partition_code(code_of, s);
    return code == missing_bin ? miss_left != 0 : code <= bin;
}

// The number of left-going columns among src[0 .. ns - 1], returned to every thread
// of the block (shared-memory integer atomics).
template <class CodeOf>
__device__ long long block_count_left(const CodeOf& code_of, const int* src, long long ns,
                                      int bin, int miss_left, int missing_bin)
{
    __shared__ int sh_n_left;
    const int tid = threadIdx.x;
    if (blockDim.x > BLOCK_PARTITION_MAX_THREADS || (blockDim.x & 31) != 0) __trap();  // never launched so
    if (tid == 0) sh_n_left = 0;
    __syncthreads();
    int mine = 0;
    for (long long a = tid; a < ns; a += blockDim.x)
        mine += partition_goes_left(code_of, src[a], bin, miss_left, missing_bin) ? 1 : 0;
    atomicAdd(&sh_n_left, mine);
    __syncthreads();
    const long long n_left = sh_n_left;
    __syncthreads();  // sh_n_left is rewritten by the next call
    return n_left;
}

// Left-going columns of src[0 .. ns - 1] to dst_left[0, 1, ...], right-going ones to
// dst_right[0, 1, ...], both in their order in src (the ballot walk described above).
template <class CodeOf>
__device__ void block_place(const CodeOf& code_of, const int* src, int* dst_left,
                            int* dst_right, long long ns, int bin, int miss_left, int missing_bin)
{
    __shared__ int warp_left[BLOCK_PARTITION_MAX_THREADS / 32];
    const int tid = threadIdx.x;
    const int lane = tid & 31;
    const int warp = tid >> 5;
    const int n_warps = blockDim.x >> 5;
    long long placed_left = 0;  // left columns before this step
    for (long long base = 0; base < ns; base += blockDim.x) {
        const long long a = base + tid;
        const bool inside = a < ns;
        int s = 0;
        bool left = false;
        if (inside) {
            s = src[a];
            left = partition_goes_left(code_of, s, bin, miss_left, missing_bin);
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
            if (left) dst_left[left_before] = s;
            else dst_right[a - left_before] = s;
        }
        placed_left += step_left;
        __syncthreads();  // warp_left is rewritten by the next step or call
    }
}

template <class CodeOf>
__device__ long long block_stable_partition(const CodeOf& code_of, const int* src, int* dst,
                                            long long ns, int bin, int miss_left, int missing_bin)
{
    const long long n_left = block_count_left(code_of, src, ns, bin, miss_left, missing_bin);
    block_place(code_of, src, dst, dst + n_left, ns, bin, miss_left, missing_bin);
    return n_left;
}
