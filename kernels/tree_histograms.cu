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
// Every cell of ``out`` is written (0 for slots of feature -1 and empty bins), so
// ``out`` needs no zeroing.
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
// come from tree_histogram_bounds, one row of partial maxima per block, read
// once per growth (gpurpo/tree/_histogram_scratch.py).
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
// tile's sums and sets them and its counter back to zero, so that ``acc`` and
// ``done`` are zero again after the launch: a growth keeps them for all its
// levels, zeroed once. Work items are (sample, channel) pairs:
// consecutive threads take consecutive channels of one sample, so target
// loads are coalesced and the threads of a warp hit distinct shared-memory
// cells unless their samples share a bin; each thread keeps its channel and
// strides over the samples (16 to 18 % faster on an H200 than one division
// per work item, measured by bench/gpu_profile.py).
//
// tree_histograms_global: the fallback when not even one (slot, channel)
// column of n_bins cells fits in shared memory: the same work items, with
// atomics straight into ``acc``; the node's last chunk converts its cells and
// sets them and its counter back to zero.
//
// A sparse X held without dense codes (``stored``: its stored rows, as
// gpurpo.tree.binning.SparseCodes lists them; ``codes`` unused): a block of
// tree_histograms_shared adds each sample's values at the codes its row lists
// for the tile's features (its entries walked against the tile's features,
// sorted in shared memory) and to the channels' totals, then sets each slot's
// cell of its feature's code of 0.0 to the total minus the slot's other cells:
// integer sums, so the same bits as from the dense codes, for work in
// proportion to the stored entries rather than to the samples times the
// features. tree_histograms_global looks every code up in its row.
//
// The launch configuration (tiles, chunks, block size, shared memory) is
// chosen by gpurpo/tree/_kernels_cuda.py from the device attributes.

#include "csr_rows.cuh"

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

// The slots of a block's tile, and for stored rows the same features sorted
// (``sorted_f``, ``n_sorted`` of them) with their slots (``sorted_j``).
struct HistTile {
    const int* f;
    int nj;
    const int* sorted_f;
    const int* sorted_j;
    int n_sorted;
};

// Adds q, sample s's fixed-point value of channel cc of the tile, to the block's
// histogram (cells of two 32-bit words, low word first) of every slot of the
// tile: at the sample's code of the slot's feature in ``codes`` (p, n), or with
// ``stored`` at the codes its row lists (csr_rows.cuh) only, the cells of the
// features' codes of 0.0 being derived from the node's totals afterwards
// (hist_derive_zero_bins). A row is walked entry by entry, or, when it holds
// more entries than the tile's features times the bits of its length (few
// candidate features of a long row), searched for each feature.
__device__ __forceinline__ void hist_add_sample(unsigned int* hist, const HistTile& tile,
                                                int n_bins, int nc, int cc,
                                                const unsigned char* __restrict__ codes,
                                                long long n, int stored, const StoredRows& rows,
                                                long long s, long long q)
{
    if (q == 0) return;
    if (!stored) {
        for (int jj = 0; jj < tile.nj; ++jj) {
            const int f = tile.f[jj];
            if (f < 0) continue;
            const int b = codes[(long long)f * n + s];
            hist_add_i64(hist + 2 * (((long long)jj * n_bins + b) * nc + cc), q);
        }
        return;
    }
    if (tile.n_sorted == 0) return;
    const long long b_end = rows.row_ptr[s + 1];
    long long e = rows.row_ptr[s];
    if ((long long)tile.n_sorted * (64 - __clzll(b_end - e)) < b_end - e) {
        // a row of many more entries than the tile has features: each feature is
        // searched for among the entries after the previous one's
        for (int r = 0; r < tile.n_sorted && e < b_end; ++r) {
            const int f = tile.sorted_f[r];
            e = csr_lower_bound(rows.row_features, e, b_end, f);
            if (e < b_end && rows.row_features[e] == f)
                hist_add_i64(hist + 2 * (((long long)tile.sorted_j[r] * n_bins + rows.row_codes[e])
                                         * nc + cc), q);
        }
        return;
    }
    // else the row's entries within the tile's features: both lists increase, so each
    // entry's feature is searched for after the previous one's
    const int f_last = tile.sorted_f[tile.n_sorted - 1];
    int at = 0;
    for (e = csr_lower_bound(rows.row_features, e, b_end, tile.sorted_f[0]); e < b_end; ++e) {
        const int f = rows.row_features[e];
        if (f > f_last) break;
        at = (int)csr_lower_bound(tile.sorted_f, at, tile.n_sorted, f);
        if (tile.sorted_f[at] != f) continue;
        const int jj = tile.sorted_j[at];
        hist_add_i64(hist + 2 * (((long long)jj * n_bins + rows.row_codes[e]) * nc + cc), q);
    }
}

// Stored rows: the tile's slots of the sorted features (``sorted_f``, ``sorted_j``,
// ``*n_sorted``), by each slot's rank among them (the slots' features are distinct).
// Every thread of the block calls it.
__device__ __forceinline__ void hist_sort_tile(const int* tile_f, int nj, int* sorted_f,
                                               int* sorted_j, int* n_sorted)
{
    if (threadIdx.x == 0) *n_sorted = 0;
    __syncthreads();
    for (int jj = threadIdx.x; jj < nj; jj += blockDim.x) {
        const int f = tile_f[jj];
        if (f < 0) continue;
        int rank = 0;
        for (int g = 0; g < nj; ++g) rank += (tile_f[g] >= 0 && tile_f[g] < f) ? 1 : 0;
        sorted_f[rank] = f;
        sorted_j[rank] = jj;
        atomicAdd(n_sorted, 1);
    }
    __syncthreads();
}

// Stored rows: the cell of each slot's code of 0.0 is the node's total of the
// channel (``totals``: the block's samples) minus the slot's other cells, exact in
// 64-bit integers (mod 2^64; no listed entry has that code). Every thread calls it
// after the block's adds.
__device__ __forceinline__ void hist_derive_zero_bins(unsigned int* hist, const HistTile& tile,
                                                      int n_bins, int nc,
                                                      const unsigned int* totals,
                                                      const unsigned char* __restrict__ zero_code)
{
    for (int q = threadIdx.x; q < tile.nj * nc; q += blockDim.x) {
        const int jj = q / nc;
        const int cc = q - jj * nc;
        const int f = tile.f[jj];
        if (f < 0) continue;
        const int z = zero_code[f];
        unsigned long long rest = (unsigned long long)hist_read_i64(totals + 2 * cc);
        for (int b = 0; b < n_bins; ++b)
            if (b != z) rest -= (unsigned long long)hist_read_i64(
                hist + 2 * (((long long)jj * n_bins + b) * nc + cc));
        unsigned int* cell = hist + 2 * (((long long)jj * n_bins + z) * nc + cc);
        cell[0] = (unsigned int)rest;
        cell[1] = (unsigned int)(rest >> 32);
    }
    __syncthreads();
}

extern "C" __global__ void tree_histograms_shared(
    const unsigned char* __restrict__ codes,
    const long long* __restrict__ row_ptr,
    const int* __restrict__ row_features,
    const unsigned char* __restrict__ row_codes,
    const unsigned char* __restrict__ zero_code,
    int stored,
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
    // cells (two 32-bit words each), the channels' totals (stored rows), then the
    // tile's scales, its features, the sorted features and their slots (stored rows),
    // the flag of the last chunk and the number of sorted features
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
    unsigned int* totals = (unsigned int*)(smem + (long long)slot_tile * n_bins * chan_tile);
    double* tile_scale = (double*)(smem + (long long)slot_tile * n_bins * chan_tile
                                   + (stored ? chan_tile : 0));
    int* tile_f = (int*)(tile_scale + chan_tile);
    int* sorted_f = tile_f + slot_tile;
    int* sorted_j = sorted_f + (stored ? slot_tile : 0);
    int* last_chunk = sorted_j + (stored ? slot_tile : 0);
    int* n_sorted = last_chunk + 1;

    for (long long q = threadIdx.x; q < cells + (stored ? nc : 0); q += blockDim.x)
        smem[q < cells ? q : (long long)slot_tile * n_bins * chan_tile + (q - cells)] = 0ull;
    for (int jj = threadIdx.x; jj < nj; jj += blockDim.x) tile_f[jj] = node_features[node * k + j0 + jj];
    for (int cc = threadIdx.x; cc < nc; cc += blockDim.x)
        tile_scale[cc] = hist_scale(c0 + cc, m, partial, n_partial, count_bits);
    __syncthreads();
    HistTile tile;
    tile.f = tile_f;
    tile.nj = nj;
    tile.sorted_f = sorted_f;
    tile.sorted_j = sorted_j;
    tile.n_sorted = 0;
    if (stored) {
        hist_sort_tile(tile_f, nj, sorted_f, sorted_j, n_sorted);
        tile.n_sorted = *n_sorted;
    }
    const StoredRows rows = stored_rows(row_ptr, row_features, row_codes, zero_code);

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
                long long total = 0;
                for (long long a = a0 + lane; a < a1; a += lanes) {
                    const long long s = sample_indices[a];
                    const long long q = hist_fixed(c0 + cc, m, wrow[s],
                                                   targets + (s * n_trees + t) * m, scale);
                    total += q;
                    hist_add_sample(hist, tile, n_bins, nc, cc, codes, n, stored, rows, s, q);
                }
                if (stored) hist_add_i64(totals + 2 * cc, total);
            }
        } else {
            // more channels than threads (very large m): threads take channels
            for (int cc = threadIdx.x; cc < nc; cc += blockDim.x) {
                long long total = 0;
                for (long long a = a0; a < a1; ++a) {
                    const long long s = sample_indices[a];
                    const long long q = hist_fixed(c0 + cc, m, wrow[s],
                                                   targets + (s * n_trees + t) * m,
                                                   tile_scale[cc]);
                    total += q;
                    hist_add_sample(hist, tile, n_bins, nc, cc, codes, n, stored, rows, s, q);
                }
                if (stored) hist_add_i64(totals + 2 * cc, total);
            }
        }
    }
    __syncthreads();
    if (stored) hist_derive_zero_bins(hist, tile, n_bins, nc, totals, zero_code);

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
                long long v;
                if (n_chunks > 1) {
                    // read, then left at zero for the next launch on the same scratch
                    v = (long long)__ldcg(acc + dst);
                    acc[dst] = 0ull;
                } else {
                    v = hist_read_i64(hist + 2 * q);
                }
                out[dst] = (float)((double)v / tile_scale[cc]);
            }
        }
        if (pass == 1 && n_chunks > 1 && threadIdx.x == 0)
            done[(node * n_slot_tiles + st_idx) * n_chan_tiles + ct_idx] = 0u;
    }
}

extern "C" __global__ void tree_histograms_global(
    const unsigned char* __restrict__ codes,
    const long long* __restrict__ row_ptr,
    const int* __restrict__ row_features,
    const unsigned char* __restrict__ row_codes,
    const unsigned char* __restrict__ zero_code,
    int stored,
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
    const StoredRows rows = stored_rows(row_ptr, row_features, row_codes, zero_code);
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
            // stored rows: every code looked up (the fallback derives no bins)
            const int b = stored ? stored_code(rows, s, f) : codes[(long long)f * n + s];
            atomicAdd(acc + ((node * k + j) * n_bins + b) * n_channels + c, (unsigned long long)q);
        }
    }
    // the last chunk of the node stores its cells
    __shared__ int last_chunk;
    if (!hist_last_writer(done + node, n_chunks, &last_chunk)) return;
    const long long cells = (long long)k * n_bins * n_channels;
    for (long long q = threadIdx.x; q < cells; q += blockDim.x) {
        const long long v = (long long)__ldcg(acc + node * cells + q);
        acc[node * cells + q] = 0ull;  // left at zero for the next launch on the scratch
        out[node * cells + q] = (float)((double)v / hist_scale((int)(q % n_channels), m, partial,
                                                               n_partial, count_bits));
    }
    if (threadIdx.x == 0) done[node] = 0u;
}
