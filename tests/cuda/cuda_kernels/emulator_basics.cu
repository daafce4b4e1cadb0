// Test kernels of the CUDA emulator (tests/test_cuda_emulator.py).
// They are real CUDA: tests/test_nvrtc.py compiles them with NVRTC too.

#ifndef BLOCK
#define BLOCK 128
#endif

// Tree reduction in static shared memory: one partial sum per block.
// blockDim.x must be BLOCK (a power of two).
extern "C" __global__ void block_sum(const float* __restrict__ x, int n, float* __restrict__ partial)
{
    __shared__ float buf[BLOCK];
    float acc = 0.0f;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        acc += x[i];
    }
    buf[threadIdx.x] = acc;
    __syncthreads();
    for (unsigned int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) {
            buf[threadIdx.x] += buf[threadIdx.x + s];
        }
        __syncthreads();
    }
    if (threadIdx.x == 0) {
        partial[blockIdx.x] = buf[0];
    }
}

// Every thread of every block hammers a few global slots with atomics.
extern "C" __global__ void atomic_contention(const int* __restrict__ keys, const float* __restrict__ vals,
                                             int n, int n_slots, unsigned int* counts, float* fsum,
                                             double* dsum, int* imax, int* imin,
                                             unsigned long long* ucount, unsigned int* subtracted)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        const int k = keys[i];
        atomicAdd(&counts[k], 1u);
        atomicAdd(&fsum[k], vals[i]);
        atomicAdd(&dsum[k], (double)vals[i]);
        atomicMax(&imax[k], i);
        atomicMin(&imin[k], i);
        atomicAdd(&ucount[k], 1ull);
        atomicSub(&subtracted[k], 2u);
    }
}

// A counter incremented through an atomicCAS loop, and a block-level
// critical section guarded by an atomicCAS spin lock (one thread per block
// takes the lock; the update inside it is a plain read-modify-write).
extern "C" __global__ void cas_lock(const double* __restrict__ vals, int n, int* lock, double* total,
                                    int* visits, int* cas_counter)
{
    __shared__ double block_total;
    if (threadIdx.x == 0) {
        block_total = 0.0;
    }
    __syncthreads();
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        atomicAdd(&block_total, vals[i]);
        int old = *((volatile int*)cas_counter);
        int assumed;
        do {
            assumed = old;
            old = atomicCAS(cas_counter, assumed, assumed + 1);
        } while (old != assumed);
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        while (atomicCAS(lock, 0, 1) != 0) {
        }
        __threadfence();
        volatile double* vt = total;
        volatile int* vv = visits;
        *vt = *vt + block_total;
        *vv = *vv + 1;
        __threadfence();
        atomicExch(lock, 0);
    }
}

// Dynamic shared memory: each block reverses its chunk of blockDim.x values,
// staging ints and a float copy in two regions of one dynamic buffer.
extern "C" __global__ void dyn_reverse(const int* __restrict__ in, int n, int* __restrict__ out,
                                       float* __restrict__ out_f)
{
    extern __shared__ int stage[];
    float* stage_f = (float*)(stage + blockDim.x);
    const int base = blockIdx.x * blockDim.x;
    const int i = base + threadIdx.x;
    stage[threadIdx.x] = i < n ? in[i] : -1;
    stage_f[threadIdx.x] = i < n ? 0.5f * in[i] : -1.0f;
    __syncthreads();
    const int j = base + (blockDim.x - 1 - threadIdx.x);
    if (j < n) {
        out[j] = stage[threadIdx.x];
        out_f[j] = stage_f[threadIdx.x];
    }
}

// Writes, for each thread of a 3-D grid of 3-D blocks, its coordinates.
extern "C" __global__ void grid_coords(int* out)
{
    const int bx = blockIdx.x, by = blockIdx.y, bz = blockIdx.z;
    const int gx = gridDim.x, gy = gridDim.y;
    const int block_id = bx + gx * (by + gy * bz);
    const int nthreads = blockDim.x * blockDim.y * blockDim.z;
    const int tid = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
    int* row = out + 6 * (block_id * nthreads + tid);
    row[0] = threadIdx.x;
    row[1] = threadIdx.y;
    row[2] = threadIdx.z;
    row[3] = bx;
    row[4] = by;
    row[5] = bz;
}

// Privatised histogram: per-block weighted histograms and counts of
// n_features uint8-binned columns in dynamic shared memory, merged into
// global memory with atomics (the pattern of the tree engine's kernel).
// Rows are given as an index list (the samples of one node).
extern "C" __global__ void hist_shared(const unsigned char* __restrict__ binned, int n_features,
                                       const int* __restrict__ rows, int n_rows,
                                       const float* __restrict__ grad, int n_bins,
                                       float* __restrict__ hist, int* __restrict__ counts)
{
    extern __shared__ float smem[];
    float* s_hist = smem;
    int* s_count = (int*)(smem + n_features * n_bins);
    const int size = n_features * n_bins;
    for (int b = threadIdx.x; b < size; b += blockDim.x) {
        s_hist[b] = 0.0f;
        s_count[b] = 0;
    }
    __syncthreads();
    for (int r = blockIdx.x * blockDim.x + threadIdx.x; r < n_rows; r += gridDim.x * blockDim.x) {
        const int row = rows[r];
        const float g = __ldg(&grad[row]);
        for (int f = 0; f < n_features; ++f) {
            const int bin = binned[(long long)row * n_features + f];
            atomicAdd(&s_hist[f * n_bins + bin], g);
            atomicAdd(&s_count[f * n_bins + bin], 1);
        }
    }
    __syncthreads();
    for (int b = threadIdx.x; b < size; b += blockDim.x) {
        if (s_count[b] != 0) {
            atomicAdd(&hist[b], s_hist[b]);
            atomicAdd(&counts[b], s_count[b]);
        }
    }
}

// Warp-level reduction with shuffles, then across warps through shared memory.
// Also records a ballot, __syncthreads_count and warp-wide reductions.
extern "C" __global__ void warp_sum(const float* __restrict__ x, int n, float* __restrict__ out,
                                    unsigned int* __restrict__ ballots, int* __restrict__ positives,
                                    int* __restrict__ lane_max, float* __restrict__ shuffled)
{
    __shared__ float warp_totals[32];
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    const float v = i < n ? x[i] : 0.0f;
    const unsigned int lane = threadIdx.x % 32;
    const unsigned int warp = threadIdx.x / 32;
    float s = v;
    for (int offset = 16; offset > 0; offset >>= 1) {
        s += __shfl_down_sync(0xffffffffu, s, offset);
    }
    const unsigned int ballot = __ballot_sync(0xffffffffu, v > 0.5f);
    const int wmax = __reduce_max_sync(0xffffffffu, i < n ? i : -1);
    const float from_xor = __shfl_xor_sync(0xffffffffu, v, 1);
    if (i < n) {
        shuffled[i] = from_xor;
    }
    if (lane == 0) {
        warp_totals[warp] = s;
        const int w = (blockIdx.x * blockDim.x) / 32 + warp;
        ballots[w] = ballot;
        lane_max[w] = wmax;
    }
    const int count = __syncthreads_count(v > 0.5f);
    if (warp == 0) {
        const int nwarps = (blockDim.x + 31) / 32;
        float t = lane < nwarps ? warp_totals[lane] : 0.0f;
        for (int offset = 16; offset > 0; offset >>= 1) {
            t += __shfl_down_sync(0xffffffffu, t, offset);
        }
        if (lane == 0) {
            out[blockIdx.x] = t;
            positives[blockIdx.x] = count;
        }
    }
}

// Every supported scalar and pointer type: out_* get in_* scaled by the scalars.
extern "C" __global__ void all_types(const unsigned char* u8, const signed char* i8, const short* i16,
                                     const unsigned short* u16, const int* i32, const unsigned int* u32,
                                     const long long* i64, const unsigned long long* u64, const float* f32,
                                     const double* f64, const bool* flags, long long n, int si, unsigned int su,
                                     long long sll, float sf, double sd, bool sb, unsigned char su8,
                                     double* out)
{
    const long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i < n) {
        double acc = (double)u8[i] + i8[i] + i16[i] + u16[i] + i32[i] + (double)u32[i] + (double)i64[i] + (double)u64[i];
        acc += f32[i] + f64[i] + (flags[i] ? 1000.0 : 0.0);
        acc += si + (double)su + (double)sll + sf + sd + (sb ? 0.25 : 0.0) + su8;
        out[i] = acc;
    }
}

// File-scope shared declarations (static and dynamic).
__shared__ int file_scope_total;
extern __shared__ float file_scope_dyn[];

extern "C" __global__ void file_scope_shared(const float* __restrict__ x, int n, float* out, int* totals)
{
    if (threadIdx.x == 0) {
        file_scope_total = 0;
    }
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    file_scope_dyn[threadIdx.x] = i < n ? 2.0f * x[i] : 0.0f;
    __syncthreads();
    atomicAdd(&file_scope_total, 1);
    __syncthreads();
    if (i < n) {
        out[i] = file_scope_dyn[(threadIdx.x + 1) % blockDim.x];
    }
    if (threadIdx.x == 0) {
        totals[blockIdx.x] = file_scope_total;
    }
}

// Reads shared memory that nobody initialised: the emulator fills it with
// 0xFF bytes, so the result is NaN (a GPU would return arbitrary bytes).
extern "C" __global__ void uninitialised_shared(float* out)
{
    __shared__ float never_written[64];
    out[blockIdx.x * blockDim.x + threadIdx.x] = never_written[threadIdx.x % 64];
}

// ``rounds`` barrier phases in a row: every round each thread publishes its value,
// waits, adds its right neighbour's (mod blockDim.x), waits again; the count of
// threads holding an odd value after each round comes from __syncthreads_count
// into counts[round] (block 0); sums wrap modulo 2^64. A thread that ran ahead
// of a barrier, or one released before the last arrival, would read a stale value.
extern "C" __global__ void barrier_rounds(unsigned long long* values, int rounds, int* counts)
{
    __shared__ unsigned long long s[1024];
    const int t = threadIdx.x;
    unsigned long long v = values[blockIdx.x * blockDim.x + t];
    for (int r = 0; r < rounds; ++r) {
        s[t] = v;
        __syncthreads();
        v += s[(t + 1) % blockDim.x];
        const int odd = __syncthreads_count((int)(v & 1));
        if (blockIdx.x == 0 && t == 0) counts[r] = odd;
    }
    values[blockIdx.x * blockDim.x + t] = v;
}
