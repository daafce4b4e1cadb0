// Histograms of a batch of tree nodes (contract: ``tree_histograms`` in
// gpurpo/tree/kernels.py).
//
// For node i, candidate slot j with feature f = node_features[i, j] >= 0 and
// every sample s of the node (weight w = weights[t, s], t = node_tree[i],
// bin b = codes[f, s]):
//     out[i, j, b, 0]     += w
//     out[i, j, b, 1 + c] += w * targets[s, t, c]      (c < m)
//     out[i, j, b, m + 1] += 1                         (when C == m + 2)
//
// Sums in fixed point: channel c's value v (formed in double, exact) is added
// as the 64-bit integer rint(v * 2^e_c), and each cell is converted once to
// float32, (float)((double)sum * 2^-e_c). Integer sums are exact, so the
// histograms do not depend on the order of the atomics, the launch plan or
// the run. The exponent e_c = 61 - bitlen(N) - E_c, where N is the number of
// sample positions of the batch (at least any node's size) and 2^E_c > B_c,
// the channel's bound: max|w| for c = 0, max|w| * max|y_c| for a target
// channel, 1 for the count (hist_scale). Every |rint(v * 2^e_c)| is then at
// most 2^(61 - bitlen(N)) and a node's sum of them below 2^62. The maxima
// come from tree_histogram_bounds, one row of partial maxima per block.
//
// tree_histograms_shared: one block per (node, sample chunk, slot tile,
// channel tile). The block privatises the (slot_tile x n_bins x chan_tile)
// histogram of its tile in dynamic SHARED memory as 64-bit integers, each
// added as two native 32-bit atomic adds with the carry passed on (sm_90 has
// native shared-memory atomic adds for 32-bit integers only: float and
// 64-bit ones are compare-and-swap loops). It then writes its cells as
// float32 when it is its tile's only writer (one chunk), or adds them with
// native 64-bit global atomics into ``acc`` (several chunks), and the last
// chunk of the tile to finish (a counter per tile in ``done``) converts the
// tile's sums. Work items are (sample, channel) pairs:
// consecutive threads take consecutive channels of one sample, so target
// loads are coalesced and the threads of a warp hit distinct shared-memory
// cells unless their samples share a bin; each thread keeps its channel and
// strides over the samples (16 to 18 % faster on an H200 than one division
// per work item, measured by bench/gpu_profile.py).
//
// tree_histograms_global: the fallback when not even one (slot, channel)
// column of n_bins cells fits in shared memory: the same work items, with
// atomics straight into ``acc``; the node's last chunk converts its cells.
//
// The launch configuration (tiles, chunks, block size, shared memory) is
// chosen by gpurpo/tree/_kernels_cuda.py from the device attributes.

// Row b of ``partial`` (n_partial rows of m + 1 floats): the largest |w| over
// the block's share of ``weights`` (column 0) and the largest |y_c| over its
// share of the rows of ``targets`` (column 1 + c); and zeroes the ``acc_cells``
// integer sums of ``acc`` and the ``n_done`` counters of ``done`` (those of
// chunked and global launches). Grid-stride: any grid.
extern "C" __global__ void tree_histogram_bounds(
    const float* __restrict__ weights,
    const float* __restrict__ targets,
    long long n_rows,
    int m,
    float* __restrict__ partial,
    unsigned long long* __restrict__ acc,
    long long acc_cells,
    unsigned int* __restrict__ done,
    long long n_done)
{
    __shared__ unsigned int block_max[1024];
    const int tid = threadIdx.x;
    for (long long q = (long long)blockIdx.x * blockDim.x + tid; q < acc_cells;
         q += (long long)gridDim.x * blockDim.x)
        acc[q] = 0ull;
    for (long long q = (long long)blockIdx.x * blockDim.x + tid; q < n_done;
         q += (long long)gridDim.x * blockDim.x)
        done[q] = 0u;
    float* row = partial + (long long)blockIdx.x * (m + 1);
    // the bit patterns of non-negative floats order them as the values
    if (tid == 0) block_max[0] = 0u;
    __syncthreads();
    float wmax = 0.0f;
    for (long long q = (long long)blockIdx.x * blockDim.x + tid; q < n_rows;
         q += (long long)gridDim.x * blockDim.x)
        wmax = fmaxf(wmax, fabsf(weights[q]));
    atomicMax(&block_max[0], __float_as_uint(wmax));
    __syncthreads();
    if (tid == 0) row[0] = __uint_as_float(block_max[0]);
    __syncthreads();
    // channel groups of at most blockDim.x channels; lanes of a group take rows
    for (int c0 = 0; c0 < m; c0 += blockDim.x) {
        const int nc = min((int)blockDim.x, m - c0);
        const int lanes = blockDim.x / nc;
        const int lane = tid / nc;
        const int cc = tid - lane * nc;
        if (tid < nc) block_max[tid] = 0u;
        __syncthreads();
        if (lane < lanes) {
            float ymax = 0.0f;
            for (long long r = (long long)blockIdx.x * lanes + lane; r < n_rows;
                 r += (long long)gridDim.x * lanes)
                ymax = fmaxf(ymax, fabsf(targets[r * m + c0 + cc]));
            atomicMax(&block_max[cc], __float_as_uint(ymax));
        }
        __syncthreads();
        if (tid < nc) row[1 + c0 + tid] = __uint_as_float(block_max[tid]);
        __syncthreads();
    }
}

// 2^e_c of channel c (header comment) from the partial maxima.
__device__ __forceinline__ double hist_scale(int c, int m, const float* __restrict__ partial,
                                             int n_partial, int count_bits)
{
    double bound = 1.0;
    if (c <= m) {
        float wmax = 0.0f, ymax = 0.0f;
        for (int r = 0; r < n_partial; ++r) {
            wmax = fmaxf(wmax, partial[(long long)r * (m + 1)]);
            if (c > 0) ymax = fmaxf(ymax, partial[(long long)r * (m + 1) + c]);
        }
        bound = c == 0 ? (double)wmax : (double)wmax * (double)ymax;
    }
    if (bound == 0.0) return 1.0;  // every value of the channel is 0
    int exponent;
    frexp(bound, &exponent);  // bound < 2^exponent
    return ldexp(1.0, 61 - count_bits - exponent);
}

// Channel c's value of sample s in fixed point (v * scale rounded to nearest even).
__device__ __forceinline__ long long hist_fixed(int c, int m, float w, const float* __restrict__ y,
                                                double scale)
{
    double v;
    if (c == 0) v = (double)w;
    else if (c <= m) v = (double)w * (double)y[c - 1];
    else v = 1.0;
    return __double2ll_rn(v * scale);
}

// cell += x (mod 2^64) as two 32-bit atomic adds: the low words', whose old value
// tells the carry, then the high words' plus the carry. Exact once every add of
// the block is done (__syncthreads), whatever their order.
__device__ __forceinline__ void hist_add_i64(unsigned int* cell, long long x)
{
    const unsigned long long ux = (unsigned long long)x;
    const unsigned int lo = (unsigned int)ux;
    unsigned int hi = (unsigned int)(ux >> 32);
    const unsigned int old = atomicAdd(&cell[0], lo);
    if (old + lo < old) hi += 1u;
    if (hi) atomicAdd(&cell[1], hi);
}

__device__ __forceinline__ long long hist_read_i64(const unsigned int* cell)
{
    return (long long)(((unsigned long long)cell[1] << 32) | cell[0]);
}

// Whether this block is the last of the ``n_writers`` blocks that add into the
// cells of ``counter``'s unit: each block's adds are made visible device-wide
// before it counts itself, so the last one reads every block's sums.
// ``last`` is the block's flag in shared memory.
__device__ __forceinline__ bool hist_last_writer(unsigned int* counter, int n_writers, int* last)
{
    __threadfence();
    __syncthreads();
    if (threadIdx.x == 0) *last = atomicAdd(counter, 1u) == (unsigned int)(n_writers - 1);
    __syncthreads();
    const bool is_last = *last;
    if (is_last) __threadfence();
    return is_last;
}

// Adds sample s's value of channel c0 + cc to the block's histogram of every
// slot of the tile (cells of two 32-bit words, low word first).
__device__ __forceinline__ void hist_add_sample(unsigned int* hist, const int* tile_f, int nj,
                                                int n_bins, int nc, int cc,
                                                const unsigned char* __restrict__ codes, long long n,
                                                long long s, int c0, int m,
                                                const float* __restrict__ wrow,
                                                const float* __restrict__ targets, int n_trees, int t,
                                                double scale)
{
    const long long q = hist_fixed(c0 + cc, m, wrow[s], targets + (s * n_trees + t) * m, scale);
    if (q == 0) return;
    for (int jj = 0; jj < nj; ++jj) {
        const int f = tile_f[jj];
        if (f < 0) continue;
        const int b = codes[(long long)f * n + s];
        hist_add_i64(hist + 2 * (((long long)jj * n_bins + b) * nc + cc), q);
    }
}

extern "C" __global__ void tree_histograms_shared(
    const unsigned char* __restrict__ codes,
    const int* __restrict__ sample_indices,
    const long long* __restrict__ node_ranges,
    const int* __restrict__ node_features,
    const int* __restrict__ node_tree,
    const float* __restrict__ weights,
    const float* __restrict__ targets,
    const float* __restrict__ partial,
    float* out,
    unsigned long long* acc,
    unsigned int* done,
    long long n,
    int k,
    int n_bins,
    int n_channels,
    int m,
    int n_trees,
    int n_partial,
    int count_bits,
    int slot_tile,
    int chan_tile,
    int n_slot_tiles,
    int n_chan_tiles,
    int n_chunks)
{
    // cells (two 32-bit words each), then the tile's scales, its features and the
    // flag of the last chunk
    extern __shared__ unsigned long long smem[];
    // tiles vary fastest: the blocks of one sample chunk run together and read
    // its samples, weights and targets once from DRAM, then from L2
    long long unit = blockIdx.x;
    const int ct_idx = (int)(unit % n_chan_tiles);
    unit /= n_chan_tiles;
    const int st_idx = (int)(unit % n_slot_tiles);
    unit /= n_slot_tiles;
    const int chunk = (int)(unit % n_chunks);
    const long long node = unit / n_chunks;

    const int j0 = st_idx * slot_tile;
    const int nj = min(slot_tile, k - j0);
    const int c0 = ct_idx * chan_tile;
    const int nc = min(chan_tile, n_channels - c0);
    const long long cells = (long long)nj * n_bins * nc;

    unsigned int* hist = (unsigned int*)smem;
    double* tile_scale = (double*)(smem + (long long)slot_tile * n_bins * chan_tile);
    int* tile_f = (int*)(tile_scale + chan_tile);
    int* last_chunk = tile_f + slot_tile;

    for (long long q = threadIdx.x; q < cells; q += blockDim.x) smem[q] = 0ull;
    for (int jj = threadIdx.x; jj < nj; jj += blockDim.x) tile_f[jj] = node_features[node * k + j0 + jj];
    for (int cc = threadIdx.x; cc < nc; cc += blockDim.x)
        tile_scale[cc] = hist_scale(c0 + cc, m, partial, n_partial, count_bits);
    __syncthreads();

    const long long start = node_ranges[2 * node];
    const long long stop = node_ranges[2 * node + 1];
    const long long ns = stop > start ? stop - start : 0;
    const long long per_chunk = (ns + n_chunks - 1) / n_chunks;
    const long long a0 = start + (long long)chunk * per_chunk;
    const long long a1 = min(stop, a0 + per_chunk);
    const int t = node_tree[node];
    const float* wrow = weights + (long long)t * n;

    if (a1 > a0) {
        if (nc <= (int)blockDim.x) {
            // each thread keeps one channel and strides over the samples (lanes
            // samples per pass): no division per work item
            const int lanes = blockDim.x / nc;
            const int lane = threadIdx.x / nc;
            const int cc = threadIdx.x - lane * nc;
            if (lane < lanes) {
                const double scale = tile_scale[cc];
                for (long long a = a0 + lane; a < a1; a += lanes)
                    hist_add_sample(hist, tile_f, nj, n_bins, nc, cc, codes, n,
                                    sample_indices[a], c0, m, wrow, targets, n_trees, t, scale);
            }
        } else {
            // more channels than threads (very large m): threads take channels
            for (int cc = threadIdx.x; cc < nc; cc += blockDim.x)
                for (long long a = a0; a < a1; ++a)
                    hist_add_sample(hist, tile_f, nj, n_bins, nc, cc, codes, n,
                                    sample_indices[a], c0, m, wrow, targets, n_trees, t,
                                    tile_scale[cc]);
        }
    }
    __syncthreads();

    // the tile's only writer stores its cells; the chunks of a node add theirs to
    // ``acc`` and the last of them stores the sums
    for (int pass = n_chunks > 1 ? 0 : 1; pass < 2; ++pass) {
        if (pass == 1 && n_chunks > 1
            && !hist_last_writer(done + (node * n_slot_tiles + st_idx) * n_chan_tiles + ct_idx,
                                 n_chunks, last_chunk))
            break;
        for (long long q = threadIdx.x; q < cells; q += blockDim.x) {
            const int cc = (int)(q % nc);
            const long long rest = q / nc;
            const int b = (int)(rest % n_bins);
            const int jj = (int)(rest / n_bins);
            const long long dst = ((node * k + j0 + jj) * n_bins + b) * n_channels + c0 + cc;
            if (pass == 0) {
                const long long v = hist_read_i64(hist + 2 * q);
                if (v != 0) atomicAdd(acc + dst, (unsigned long long)v);
            } else {
                const long long v = n_chunks > 1 ? (long long)__ldcg(acc + dst)
                                                 : hist_read_i64(hist + 2 * q);
                if (v != 0) out[dst] = (float)((double)v / tile_scale[cc]);
            }
        }
    }
}

extern "C" __global__ void tree_histograms_global(
    const unsigned char* __restrict__ codes,
    const int* __restrict__ sample_indices,
    const long long* __restrict__ node_ranges,
    const int* __restrict__ node_features,
    const int* __restrict__ node_tree,
    const float* __restrict__ weights,
    const float* __restrict__ targets,
    const float* __restrict__ partial,
    float* out,
    unsigned long long* acc,
    unsigned int* done,
    long long n,
    int k,
    int n_bins,
    int n_channels,
    int m,
    int n_trees,
    int n_partial,
    int count_bits,
    int n_chunks)
{
    const long long node = blockIdx.x / n_chunks;
    const int chunk = (int)(blockIdx.x % n_chunks);
    const long long start = node_ranges[2 * node];
    const long long stop = node_ranges[2 * node + 1];
    const long long ns = stop > start ? stop - start : 0;
    const long long per_chunk = (ns + n_chunks - 1) / n_chunks;
    const long long a0 = start + (long long)chunk * per_chunk;
    const long long a1 = min(stop, a0 + per_chunk);
    const int t = node_tree[node];
    const float* wrow = weights + (long long)t * n;
    const int* feats = node_features + node * k;
    const long long n_items = a1 > a0 ? (a1 - a0) * n_channels : 0;
    for (long long it = threadIdx.x; it < n_items; it += blockDim.x) {
        const long long a = a0 + it / n_channels;
        const int c = (int)(it % n_channels);
        const long long s = sample_indices[a];
        // the fallback of a launch with too little shared memory: each work item
        // derives its channel's scale
        const long long q = hist_fixed(c, m, wrow[s], targets + (s * n_trees + t) * m,
                                       hist_scale(c, m, partial, n_partial, count_bits));
        if (q == 0) continue;
        for (int j = 0; j < k; ++j) {
            const int f = feats[j];
            if (f < 0) continue;
            const int b = codes[(long long)f * n + s];
            atomicAdd(acc + ((node * k + j) * n_bins + b) * n_channels + c, (unsigned long long)q);
        }
    }
    // the last chunk of the node stores its cells
    __shared__ int last_chunk;
    if (!hist_last_writer(done + node, n_chunks, &last_chunk)) return;
    const long long cells = (long long)k * n_bins * n_channels;
    for (long long q = threadIdx.x; q < cells; q += blockDim.x) {
        const long long v = (long long)__ldcg(acc + node * cells + q);
        if (v != 0)
            out[node * cells + q] = (float)((double)v / hist_scale((int)(q % n_channels), m,
                                                                    partial, n_partial,
                                                                    count_bits));
    }
}
