// Kernels with bugs that the CUDA emulator must report (tests/test_cuda_emulator.py).
// They are valid CUDA C (tests/test_nvrtc.py compiles them with NVRTC).

extern "C" __global__ void axpy(float a, const float* __restrict__ x, float* __restrict__ y, int n)
{
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        y[i] += a * x[i];
    }
}

// Calls __trap() in one thread.
extern "C" __global__ void traps(int* out, int bad)
{
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i == bad) {
        __trap();
    }
    out[i] = i;
}

// A device-side assert that fails for negative values.
extern "C" __global__ void asserts_positive(const int* values, int n)
{
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        assert(values[i] >= 0);
    }
}

// Threads past n return before the barrier the others wait at: undefined
// behaviour in CUDA ("barrier divergence").
extern "C" __global__ void early_return_before_sync(const float* x, int n, float* out)
{
    __shared__ float buf[256];
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) {
        return;
    }
    buf[threadIdx.x] = x[i];
    __syncthreads();
    out[i] = buf[(threadIdx.x + 1) % blockDim.x];
}

// Off-by-one: the last thread writes one element past the end of out.
extern "C" __global__ void writes_past_end(float* out, int n)
{
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i <= n) {
        out[i] = 1.0f;
    }
}

// Writes before the start of out.
extern "C" __global__ void writes_before_start(float* out, int n)
{
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        out[i - 1] = 1.0f;
    }
}

// 32 KiB of static shared memory: together with more than 16 KiB of dynamic
// shared memory the block exceeds the 48 KiB a launch may use.
extern "C" __global__ void big_static_shared(float* out, int n)
{
    __shared__ float big[8192];
    extern __shared__ float dyn[];
    big[threadIdx.x] = 1.0f;
    dyn[threadIdx.x] = 2.0f;
    __syncthreads();
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        out[i] = big[threadIdx.x] + dyn[threadIdx.x];
    }
}

// Lane 0 waits at the block barrier while lanes 1..31 wait at the warp
// barrier: undefined behaviour in CUDA, a deadlock in the emulator.
extern "C" __global__ void deadlocks(int* out)
{
    if (threadIdx.x == 0) {
        __syncthreads();
    } else {
        __syncwarp();
    }
    out[threadIdx.x] = 1;
}

// A shuffle with a mask that leaves out lanes (unsupported by the emulator).
extern "C" __global__ void partial_mask_shuffle(int* out)
{
    int v = threadIdx.x;
    if (threadIdx.x < 16) {
        v = __shfl_down_sync(0x0000ffffu, v, 1);
    }
    out[threadIdx.x] = v;
}

// Threads past n return, then the others reduce with full-warp shuffles that
// read the exited lanes: undefined behaviour in CUDA.
extern "C" __global__ void shuffle_after_early_return(const float* x, int n, float* out)
{
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) {
        return;
    }
    float v = x[i];
    for (int offset = 16; offset > 0; offset >>= 1) {
        v += __shfl_down_sync(0xffffffffu, v, offset);
    }
    if (threadIdx.x % 32 == 0) {
        out[i / 32] = v;
    }
}
