// Variants of the histogram loop of tree_histograms_shared
// (kernels/tree_histograms.cu), timed against it by bench/gpu_profile.py on a
// GPU. Not part of the library: a variant that wins moves into kernels/ with
// its emulator and parity tests.
//
// The library kernel's launch plan (one block per node x sample chunk x slot
// tile x channel tile; n_chan_tiles must be 1 and the channel tile at most
// blockDim.x here), with float32 cells and float32 output and none of the
// library kernel's fixed-point arguments (bounds, 64-bit sums, counters).
//
// hist_sample_major: one thread per sample, looping over slots and channels;
//   shared histogram channel-major ([slot][channel][bin]) so the threads of a
//   warp (different samples) spread over banks by bin; float atomics.
// hist_lanes_int_ceiling: the library's loop with ONE 32-bit integer shared
//   atomic per value (the library adds 64-bit sums as two); its sums are not
//   exact: it only measures how fast the shared atomics could be with
//   32-bit fixed-point cells.

__device__ __forceinline__ float variant_value(int c, int m, float w, const float* __restrict__ y)
{
    if (c == 0) return w;
    if (c <= m) return w * y[c - 1];
    return 1.0f;
}

struct Tile {
    long long node;
    int j0, nj, c0, nc, t;
    long long a0, a1, cells;
};

__device__ __forceinline__ Tile variant_tile(const long long* __restrict__ node_ranges,
                                             const int* __restrict__ node_tree, int k,
                                             int n_bins, int n_channels, int slot_tile,
                                             int chan_tile, int n_slot_tiles, int n_chan_tiles,
                                             int n_chunks)
{
    Tile tl;
    long long unit = blockIdx.x;
    const int ct_idx = (int)(unit % n_chan_tiles);
    unit /= n_chan_tiles;
    const int st_idx = (int)(unit % n_slot_tiles);
    unit /= n_slot_tiles;
    const int chunk = (int)(unit % n_chunks);
    tl.node = unit / n_chunks;
    tl.j0 = st_idx * slot_tile;
    tl.nj = min(slot_tile, k - tl.j0);
    tl.c0 = ct_idx * chan_tile;
    tl.nc = min(chan_tile, n_channels - tl.c0);
    tl.cells = (long long)tl.nj * n_bins * tl.nc;
    const long long start = node_ranges[2 * tl.node];
    const long long stop = node_ranges[2 * tl.node + 1];
    const long long ns = stop > start ? stop - start : 0;
    const long long per_chunk = (ns + n_chunks - 1) / n_chunks;
    tl.a0 = start + (long long)chunk * per_chunk;
    tl.a1 = min(stop, tl.a0 + per_chunk);
    tl.t = node_tree[tl.node];
    return tl;
}

#define VARIANT_PARAMS                                                                    \
    const unsigned char* __restrict__ codes, const int* __restrict__ sample_indices,      \
        const long long* __restrict__ node_ranges, const int* __restrict__ node_features, \
        const int* __restrict__ node_tree, const float* __restrict__ weights,             \
        const float* __restrict__ targets, float* out, long long n, int k, int n_bins,    \
        int n_channels, int m, int n_trees, int slot_tile, int chan_tile,                 \
        int n_slot_tiles, int n_chan_tiles, int n_chunks

extern "C" __global__ void hist_sample_major(VARIANT_PARAMS)
{
    extern __shared__ float smem[];
    const Tile tl = variant_tile(node_ranges, node_tree, k, n_bins, n_channels, slot_tile,
                                 chan_tile, n_slot_tiles, n_chan_tiles, n_chunks);
    float* hist = smem;
    int* tile_f = (int*)(smem + (long long)slot_tile * n_bins * chan_tile);
    for (long long q = threadIdx.x; q < tl.cells; q += blockDim.x) hist[q] = 0.0f;
    for (int jj = threadIdx.x; jj < tl.nj; jj += blockDim.x)
        tile_f[jj] = node_features[tl.node * k + tl.j0 + jj];
    __syncthreads();
    const float* wrow = weights + (long long)tl.t * n;
    for (long long a = tl.a0 + threadIdx.x; a < tl.a1; a += blockDim.x) {
        const long long s = sample_indices[a];
        const float w = wrow[s];
        const float* y = targets + (s * n_trees + tl.t) * m;
        for (int jj = 0; jj < tl.nj; ++jj) {
            const int f = tile_f[jj];
            if (f < 0) continue;
            const int b = codes[(long long)f * n + s];
            float* col = hist + (long long)jj * tl.nc * n_bins + b;
            for (int cc = 0; cc < tl.nc; ++cc) {
                const float v = variant_value(tl.c0 + cc, m, w, y);
                if (v != 0.0f) atomicAdd(col + cc * n_bins, v);
            }
        }
    }
    __syncthreads();
    for (long long q = threadIdx.x; q < tl.cells; q += blockDim.x) {
        const float v = hist[q];
        if (v == 0.0f) continue;
        const int b = (int)(q % n_bins);
        const long long rest = q / n_bins;
        const int cc = (int)(rest % tl.nc);
        const int jj = (int)(rest / tl.nc);
        atomicAdd(out + (((tl.node * k + tl.j0 + jj) * n_bins + b) * n_channels + tl.c0 + cc), v);
    }
}

extern "C" __global__ void hist_lanes_int_ceiling(VARIANT_PARAMS)
{
    extern __shared__ float smem[];
    const Tile tl = variant_tile(node_ranges, node_tree, k, n_bins, n_channels, slot_tile,
                                 chan_tile, n_slot_tiles, n_chan_tiles, n_chunks);
    int* hist = (int*)smem;
    int* tile_f = (int*)(smem + (long long)slot_tile * n_bins * chan_tile);
    for (long long q = threadIdx.x; q < tl.cells; q += blockDim.x) hist[q] = 0;
    for (int jj = threadIdx.x; jj < tl.nj; jj += blockDim.x)
        tile_f[jj] = node_features[tl.node * k + tl.j0 + jj];
    __syncthreads();
    const int lanes = blockDim.x / tl.nc;
    const int lane = threadIdx.x / tl.nc;
    const int cc = threadIdx.x - lane * tl.nc;
    const int c = tl.c0 + cc;
    const float* wrow = weights + (long long)tl.t * n;
    if (lane < lanes) {
        for (long long a = tl.a0 + lane; a < tl.a1; a += lanes) {
            const long long s = sample_indices[a];
            const float v = variant_value(c, m, wrow[s], targets + (s * n_trees + tl.t) * m);
            if (v == 0.0f) continue;
            const int iv = __float2int_rn(v * 1024.0f);
            for (int jj = 0; jj < tl.nj; ++jj) {
                const int f = tile_f[jj];
                if (f < 0) continue;
                const int b = codes[(long long)f * n + s];
                atomicAdd(&hist[(jj * n_bins + b) * tl.nc + cc], iv);
            }
        }
    }
    __syncthreads();
    for (long long q = threadIdx.x; q < tl.cells; q += blockDim.x) {
        const int v = hist[q];
        if (v == 0) continue;
        const int qc = (int)(q % tl.nc);
        const long long rest = q / tl.nc;
        const int b = (int)(rest % n_bins);
        const int jj = (int)(rest / n_bins);
        atomicAdd(out + (((tl.node * k + tl.j0 + jj) * n_bins + b) * n_channels + tl.c0 + qc),
                  v * (1.0f / 1024.0f));
    }
}
