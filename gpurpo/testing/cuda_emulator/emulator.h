// CPU emulation of the CUDA execution model for gpurpo's kernels.
//
// A CUDA C source is compiled as C++20 after this header. Every launch runs
// the threads of a block CONCURRENTLY as real POSIX threads, so that data
// races, barriers and atomics behave as on a GPU:
//
//   * threadIdx / blockIdx / blockDim / gridDim are thread-local variables;
//   * __syncthreads() (and its _count/_and/_or forms) is a barrier over the
//     block's threads (gpurpo_emu::Barrier); a thread that returns from the
//     kernel leaves the barrier, and the launcher reports "barrier
//     divergence" when the threads of a block called __syncthreads a
//     different number of times;
//   * __shared__ variables (rewritten by gpurpo.testing.cuda_emulator._parse into
//     calls of gpurpo_emu::shared_var / gpurpo_emu::dynamic_shared) live in a
//     per-block arena that is filled with 0xFF bytes (NaN for floats, -1 for
//     ints) when a block starts, so a kernel that forgets to initialise its
//     shared memory gives visibly wrong results;
//   * atomics go through std::atomic_ref, warp shuffles/votes through a
//     per-warp exchange buffer and barrier (warps are 32 consecutive linear
//     thread ids, as on NVIDIA hardware);
//   * __trap(), assert() and emulator-detected errors stop the launch and are
//     reported to Python as gpurpo.testing.cuda_emulator.CudaKernelError.
//
// Blocks are taken one at a time by each group of blockDim threads; a launch
// may run several groups (several blocks) at once. The threads come from a
// persistent pool, so a launch costs no thread creation once the pool is warm.

#pragma once

#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <unistd.h>
#if defined(__linux__)
#include <linux/futex.h>
#include <sys/syscall.h>
#endif
#include <time.h>

#include <atomic>
#include <climits>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <memory>
#include <mutex>
#include <new>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#define GPURPO_CUDA_EMULATOR 1

// ---------------------------------------------------------------------------
// CUDA keywords (__global__ and __shared__ are rewritten before compilation)
// ---------------------------------------------------------------------------
#define __device__
#define __host__
#define __constant__
#define __forceinline__ inline __attribute__((always_inline))
#define __noinline__ __attribute__((noinline))
#define __launch_bounds__(...)
#define __align__(n) alignas(n)
#define __grid_constant__

// ---------------------------------------------------------------------------
// Built-in vector types
// ---------------------------------------------------------------------------
struct uint3 {
    unsigned int x, y, z;
};

struct dim3 {
    unsigned int x, y, z;
    constexpr dim3(unsigned int vx = 1, unsigned int vy = 1, unsigned int vz = 1)
        : x(vx), y(vy), z(vz) {}
    constexpr dim3(uint3 v) : x(v.x), y(v.y), z(v.z) {}
    constexpr operator uint3() const { return uint3{x, y, z}; }
};

#define GPURPO_EMU_VEC2(T, N, A)                                              \
    struct alignas(A) N##2 { T x, y; };                                      \
    inline N##2 make_##N##2(T x, T y) { return N##2{x, y}; }
#define GPURPO_EMU_VEC3(T, N)                                                 \
    struct N##3 { T x, y, z; };                                              \
    inline N##3 make_##N##3(T x, T y, T z) { return N##3{x, y, z}; }
#define GPURPO_EMU_VEC4(T, N, A)                                              \
    struct alignas(A) N##4 { T x, y, z, w; };                                \
    inline N##4 make_##N##4(T x, T y, T z, T w) { return N##4{x, y, z, w}; }

GPURPO_EMU_VEC2(signed char, char, 2)
GPURPO_EMU_VEC4(signed char, char, 4)
GPURPO_EMU_VEC2(unsigned char, uchar, 2)
GPURPO_EMU_VEC4(unsigned char, uchar, 4)
GPURPO_EMU_VEC2(short, short, 4)
GPURPO_EMU_VEC4(short, short, 8)
GPURPO_EMU_VEC2(unsigned short, ushort, 4)
GPURPO_EMU_VEC4(unsigned short, ushort, 8)
GPURPO_EMU_VEC2(int, int, 8)
GPURPO_EMU_VEC3(int, int)
GPURPO_EMU_VEC4(int, int, 16)
GPURPO_EMU_VEC2(unsigned int, uint, 8)
GPURPO_EMU_VEC4(unsigned int, uint, 16)
GPURPO_EMU_VEC2(float, float, 8)
GPURPO_EMU_VEC3(float, float)
GPURPO_EMU_VEC4(float, float, 16)
GPURPO_EMU_VEC2(double, double, 16)
GPURPO_EMU_VEC2(long long, longlong, 16)
GPURPO_EMU_VEC2(unsigned long long, ulonglong, 16)
inline uint3 make_uint3(unsigned int x, unsigned int y, unsigned int z) { return uint3{x, y, z}; }

#undef GPURPO_EMU_VEC2
#undef GPURPO_EMU_VEC3
#undef GPURPO_EMU_VEC4

static constexpr int warpSize = 32;

// Thread-local CUDA built-in variables.
static thread_local uint3 threadIdx;
static thread_local uint3 blockIdx;
static thread_local dim3 blockDim;
static thread_local dim3 gridDim;

namespace gpurpo_emu {

// ---------------------------------------------------------------------------
// Errors raised inside a kernel
// ---------------------------------------------------------------------------
struct Trap {
    std::string message;
};

[[noreturn]] inline void trap(std::string message) { throw Trap{std::move(message)}; }

[[noreturn]] inline void assert_fail(const char* expr, const char* file, int line) {
    trap(std::string("device-side assert failed: ") + expr + " (" + file + ":" +
         std::to_string(line) + ")");
}

// ---------------------------------------------------------------------------
// Launch state
// ---------------------------------------------------------------------------
struct BlockCtx;
struct Group;

struct Launch {
    void (*invoke)(void**) = nullptr;
    void** args = nullptr;
    dim3 grid, block;
    unsigned nthreads = 0;
    unsigned long long nblocks = 0;
    std::size_t dyn_size = 0;     // dynamic shared memory of a block (bytes)
    std::size_t smem_limit = 0;   // static + dynamic shared memory limit (bytes)
    std::atomic<unsigned long long> next_block{0};
    std::atomic<bool> failed{false};
    std::mutex err_mu;
    std::string error;
    std::atomic<unsigned> threads_left{0};
    std::mutex done_mu;
    std::condition_variable done_cv;

    void fail(const std::string& msg) {
        std::lock_guard<std::mutex> lk(err_mu);
        if (error.empty()) error = msg;
        failed.store(true);
    }
};

// ---------------------------------------------------------------------------
// Barrier
// ---------------------------------------------------------------------------
struct NoCompletion {
    void operator()() noexcept {}
};

// std::barrier's interface (arrive_and_wait, arrive_and_drop, a completion run by
// the last arrival of a phase before any waiter goes on), for threads that
// outnumber the cores, as a block's threads do. Arrivals count down; the last
// one runs the completion, re-arms the count, bumps the generation and wakes
// every sleeper with one call. A waiter yields the CPU up to SPIN_YIELDS times
// (to the threads that have yet to arrive), then sleeps on the generation word
// (a futex on Linux). libstdc++'s std::barrier sleeps after 4 yields, on a
// table of waiters shared by all barriers: with hundreds of threads on 2 cores
// its sleeps and wake-ups made barrier-heavy launches 1.2-1.7x slower.
template <class Completion = NoCompletion>
class Barrier {
public:
    static constexpr int SPIN_YIELDS = 64;

    explicit Barrier(std::ptrdiff_t count, Completion done = Completion{})
        : remaining_(count), expected_(count), done_(done) {}
    Barrier(const Barrier&) = delete;
    Barrier& operator=(const Barrier&) = delete;

    void arrive_and_wait() noexcept { arrive(false); }
    // Arrives at this phase and leaves the barrier: later phases wait for one
    // thread less.
    void arrive_and_drop() noexcept { arrive(true); }

private:
    void arrive(bool drop) noexcept {
        // read before arriving: the phase cannot complete until this thread arrives
        const int gen = generation_.load(std::memory_order_acquire);
        if (drop) expected_.fetch_sub(1, std::memory_order_relaxed);
        if (remaining_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
            done_();
            remaining_.store(expected_.load(std::memory_order_relaxed), std::memory_order_relaxed);
            generation_.fetch_add(1, std::memory_order_release);
            wake_all();
            return;
        }
        if (!drop) wait(gen);
    }

    void wait(int gen) noexcept {
        for (int i = 0; i < SPIN_YIELDS; ++i) {
            if (generation_.load(std::memory_order_acquire) != gen) return;
            sched_yield();
        }
        while (generation_.load(std::memory_order_acquire) == gen) {
#if defined(__linux__)
            syscall(SYS_futex, reinterpret_cast<int*>(&generation_), FUTEX_WAIT_PRIVATE, gen,
                    nullptr, nullptr, 0);
#else
            generation_.wait(gen, std::memory_order_acquire);
#endif
        }
    }

    void wake_all() noexcept {
#if defined(__linux__)
        syscall(SYS_futex, reinterpret_cast<int*>(&generation_), FUTEX_WAKE_PRIVATE, INT_MAX,
                nullptr, nullptr, 0);
#else
        generation_.notify_all();
#endif
    }

    static_assert(sizeof(std::atomic<int>) == sizeof(int), "the futex word is an int");
    std::atomic<int> generation_{0};
    std::atomic<std::ptrdiff_t> remaining_;
    std::atomic<std::ptrdiff_t> expected_;
    Completion done_;
};

struct ThreadState {
    BlockCtx* ctx = nullptr;
    unsigned tid = 0;
    unsigned lane = 0;
    unsigned warp = 0;
    unsigned long long syncs = 0;
    unsigned long long warp_ops = 0;
};

inline thread_local ThreadState ts;

struct SyncDone {
    BlockCtx* ctx;
    void operator()() noexcept;
};

struct Warp {
    std::unique_ptr<Barrier<>> bar;
    unsigned nlanes = 0;
    unsigned active = 0;  // bit mask of the lanes that exist in this warp
    unsigned long long buf[2][32] = {};
    unsigned long long stamp[2][32] = {};  // index of the warp operation that wrote buf
};

struct BlockCtx {
    Launch* L = nullptr;
    uint3 block_idx{0, 0, 0};
    std::optional<Barrier<SyncDone>> sync;
    std::vector<Warp> warps;
    std::vector<unsigned long long> sync_count;
    std::atomic<int> red_true[2];
    std::atomic<int> red_all[2];
    unsigned long long phase = 0;
    // shared memory arena: static variables from the front, dynamic at the end
    unsigned char* arena = nullptr;
    std::size_t arena_size = 0;
    std::size_t dyn_offset = 0;
    std::size_t static_used = 0;
    std::mutex slot_mu;
    std::vector<std::pair<const void*, void*>> slots;

    void start(Launch* launch, unsigned long long b) {
        L = launch;
        const dim3 g = L->grid;
        block_idx = uint3{unsigned(b % g.x), unsigned((b / g.x) % g.y),
                          unsigned(b / (static_cast<unsigned long long>(g.x) * g.y))};
        sync.reset();
        sync.emplace(static_cast<std::ptrdiff_t>(L->nthreads), SyncDone{this});
        const unsigned nwarps = (L->nthreads + 31) / 32;
        warps.clear();
        warps.resize(nwarps);
        for (unsigned w = 0; w < nwarps; ++w) {
            const unsigned lanes = (w + 1 == nwarps) ? L->nthreads - 32 * w : 32;
            warps[w].nlanes = lanes;
            warps[w].active = lanes == 32 ? 0xffffffffu : ((1u << lanes) - 1u);
            warps[w].bar = std::make_unique<Barrier<>>(static_cast<std::ptrdiff_t>(lanes));
            std::memset(warps[w].stamp, 0xFF, sizeof warps[w].stamp);
        }
        sync_count.assign(L->nthreads, 0);
        for (int i = 0; i < 2; ++i) {
            red_true[i].store(0);
            red_all[i].store(0);
        }
        phase = 0;
        static_used = 0;
        slots.clear();
        if (L->dyn_size > 0) std::memset(arena + dyn_offset, 0xFF, L->dyn_size);
    }

    void* slot(const void* key, std::size_t size, std::size_t align) {
        std::lock_guard<std::mutex> lk(slot_mu);
        for (auto& s : slots)
            if (s.first == key) return s.second;
        if (align < 16) align = 16;
        const std::size_t off = (static_used + align - 1) / align * align;
        if (off + size > dyn_offset) {
            trap("static __shared__ memory (" + std::to_string(off + size) +
                 " bytes) plus dynamic shared memory (" + std::to_string(L->dyn_size) +
                 " bytes) exceeds the limit of " + std::to_string(L->smem_limit) + " bytes");
        }
        void* p = arena + off;
        std::memset(p, 0xFF, size);
        static_used = off + size;
        slots.emplace_back(key, p);
        return p;
    }
};

inline void SyncDone::operator()() noexcept {
    const unsigned next = static_cast<unsigned>((ctx->phase + 1) & 1);
    ctx->red_true[next].store(0);
    ctx->red_all[next].store(0);
    ++ctx->phase;
}

inline BlockCtx& ctx() {
    BlockCtx* c = ts.ctx;
    if (c == nullptr) {
        std::fprintf(stderr, "gpurpo emulator: CUDA built-in used outside a kernel launch\n");
        std::abort();
    }
    return *c;
}

inline std::string coords(uint3 v) {
    return "(" + std::to_string(v.x) + ", " + std::to_string(v.y) + ", " + std::to_string(v.z) + ")";
}

// ---------------------------------------------------------------------------
// Shared memory (targets of the __shared__ rewrite)
// ---------------------------------------------------------------------------
template <class T, std::size_t Align = alignof(T), class Tag>
inline T& shared_var(Tag) {
    static const char key = 0;
    return *static_cast<T*>(ctx().slot(&key, sizeof(T), Align > alignof(T) ? Align : alignof(T)));
}

template <class T>
inline T* dynamic_shared() {
    static_assert(alignof(T) <= 16, "dynamic shared memory is 16-byte aligned");
    BlockCtx& c = ctx();
    return reinterpret_cast<T*>(c.arena + c.dyn_offset);
}

// ---------------------------------------------------------------------------
// Warp exchange
// ---------------------------------------------------------------------------
inline Warp& my_warp(unsigned mask, const char* what) {
    Warp& w = ctx().warps[ts.warp];
    if ((mask & w.active) != w.active) {
        char buf[160];
        std::snprintf(buf, sizeof buf,
                      "%s with mask 0x%08x: the emulator needs every existing lane of the warp "
                      "(mask 0x%08x) to take part",
                      what, mask, w.active);
        trap(buf);
    }
    return w;
}

template <class T>
inline unsigned long long to_bits(T v) {
    static_assert(sizeof(T) <= 8 && std::is_trivially_copyable_v<T>, "warp exchange of 8 bytes at most");
    unsigned long long bits = 0;
    std::memcpy(&bits, &v, sizeof(T));
    return bits;
}

template <class T>
inline T from_bits(unsigned long long bits) {
    T v;
    std::memcpy(&v, &bits, sizeof(T));
    return v;
}

// One warp-wide exchange: every lane publishes a value, then reads others'.
// Lanes that exited, or are at another warp operation, leave a stale stamp.
struct Exchanged {
    const unsigned long long* row;
    const unsigned long long* stamp;
    unsigned long long op;
};

inline Exchanged exchange(Warp& w, unsigned long long bits) {
    const unsigned long long op = ts.warp_ops++;
    const unsigned p = static_cast<unsigned>(op & 1);
    w.buf[p][ts.lane] = bits;
    w.stamp[p][ts.lane] = op;
    w.bar->arrive_and_wait();
    return Exchanged{w.buf[p], w.stamp[p], op};
}

inline unsigned long long lane_value(const Exchanged& x, int src, const char* what) {
    if (x.stamp[src] != x.op) {
        trap(std::string(what) + " reads lane " + std::to_string(src) +
             ", which has exited or is at a different warp operation (every lane of the warp "
             "must make the same warp-level calls)");
    }
    return x.row[src];
}

inline void check_width(int width) {
    if (width < 1 || width > 32 || (width & (width - 1)) != 0)
        trap("warp shuffle width must be a power of 2 in [1, 32], got " + std::to_string(width));
}

enum class Shfl { Idx, Up, Down, Xor };

template <class T>
inline T shfl(unsigned mask, T var, int arg, int width, Shfl mode, const char* what) {
    Warp& w = my_warp(mask, what);
    check_width(width);
    const Exchanged x = exchange(w, to_bits(var));
    const int lane = static_cast<int>(ts.lane);
    const int base = lane & ~(width - 1);
    int src;
    switch (mode) {
        case Shfl::Idx: src = base + (arg & (width - 1)); break;
        case Shfl::Up: src = lane - arg; if (src < base) src = lane; break;
        case Shfl::Down: src = lane + arg; if (src >= base + width) src = lane; break;
        default: src = lane ^ arg; if (src >= base + width) src = lane; break;
    }
    if (src < 0 || src >= static_cast<int>(w.nlanes) || src == lane) return var;
    return from_bits<T>(lane_value(x, src, what));
}

// ---------------------------------------------------------------------------
// Kernel entry points and argument type descriptors
// ---------------------------------------------------------------------------
template <class T>
constexpr char kind_of() {
    using U = std::remove_cv_t<T>;
    if constexpr (std::is_same_v<U, bool>) return 'b';
    else if constexpr (std::is_floating_point_v<U>) return 'f';
    else if constexpr (std::is_integral_v<U> && std::is_signed_v<U>) return 'i';
    else if constexpr (std::is_integral_v<U>) return 'u';
    else if constexpr (std::is_void_v<U>) return 'v';
    else return 'o';
}

template <class T>
inline std::string size_of() {
    if constexpr (std::is_void_v<T> || std::is_function_v<T>) return "0";
    else return std::to_string(sizeof(T));
}

// "s<kind><size>" for a scalar, "p<c|m><kind><size>" for a pointer to a
// const/mutable element, "x" for what the emulator cannot pass.
template <class T>
inline std::string type_code() {
    if constexpr (std::is_reference_v<T>) {
        return "x";
    } else if constexpr (std::is_pointer_v<T>) {
        using P = std::remove_pointer_t<T>;
        if constexpr (std::is_pointer_v<std::remove_cv_t<P>> || std::is_function_v<P>) return "x";
        else return std::string("p") + (std::is_const_v<P> ? "c" : "m") + kind_of<P>() + size_of<P>();
    } else {
        return std::string("s") + kind_of<T>() + size_of<T>();
    }
}

template <class... A>
inline std::string signature_of(void (*)(A...)) {
    std::string out;
    ((out += (out.empty() ? "" : ";") + type_code<A>()), ...);
    return out;
}

template <class... A>
inline void invoke_with(void (*f)(A...), void** args) {
    [&]<std::size_t... I>(std::index_sequence<I...>) {
        f(*static_cast<std::remove_cv_t<std::remove_reference_t<A>>*>(args[I])...);
    }(std::index_sequence_for<A...>{});
}

template <auto F>
inline void invoke(void** args) {
    invoke_with(F, args);
}

struct KernelEntry {
    const char* name;
    void (*invoke)(void**);
    std::string signature;
    const char* param_names;  // ';'-separated, as written in the source
    const char* param_decls;  // ';'-separated declarations, as written
};

// ---------------------------------------------------------------------------
// Running a launch
// ---------------------------------------------------------------------------
struct GroupDone {
    Group* g;
    void operator()() noexcept;
};

struct Group {
    Launch* L = nullptr;
    BlockCtx block;
    std::optional<Barrier<GroupDone>> ctrl;
    bool started = false;
    bool done = false;
    unsigned char* arena = nullptr;

    void finish_block() {
        unsigned long long lo = ~0ull, hi = 0;
        unsigned tlo = 0, thi = 0;
        for (unsigned t = 0; t < L->nthreads; ++t) {
            const unsigned long long c = block.sync_count[t];
            if (c < lo) { lo = c; tlo = t; }
            if (c > hi) { hi = c; thi = t; }
        }
        if (lo != hi) {
            const dim3 b = L->block;
            auto tcoords = [&](unsigned t) {
                return coords(uint3{t % b.x, (t / b.x) % b.y, t / (b.x * b.y)});
            };
            L->fail("barrier divergence in block " + coords(block.block_idx) + ": thread " +
                    tcoords(tlo) + " called __syncthreads " + std::to_string(lo) +
                    " time(s) but thread " + tcoords(thi) + " called it " + std::to_string(hi) +
                    " time(s) (every thread of a block must reach the same barriers; "
                    "do not return before a __syncthreads)");
        }
    }

    void advance() noexcept {
        if (started) finish_block();
        if (L->failed.load()) { done = true; return; }
        const unsigned long long b = L->next_block.fetch_add(1);
        if (b >= L->nblocks) { done = true; return; }
        started = true;
        block.start(L, b);
    }
};

inline void GroupDone::operator()() noexcept { g->advance(); }

struct Worker {
    Group* g;
    unsigned tid;
};

inline void finish_thread(Launch* L) {
    // Decrement under the lock: once the launcher sees zero it frees L.
    std::lock_guard<std::mutex> lk(L->done_mu);
    if (L->threads_left.fetch_sub(1) == 1) L->done_cv.notify_all();
}

inline void run_worker(void* p) {
    Worker* w = static_cast<Worker*>(p);
    Group* g = w->g;
    Launch* L = g->L;
    const unsigned tid = w->tid;
    const dim3 b = L->block;
    threadIdx = uint3{tid % b.x, (tid / b.x) % b.y, tid / (b.x * b.y)};
    blockDim = L->block;
    gridDim = L->grid;
    ts = ThreadState{};
    ts.ctx = &g->block;
    ts.tid = tid;
    ts.lane = tid % 32;
    ts.warp = tid / 32;
    g->ctrl->arrive_and_wait();
    while (!g->done) {
        blockIdx = g->block.block_idx;
        ts.syncs = 0;
        ts.warp_ops = 0;
        try {
            L->invoke(L->args);
        } catch (const Trap& t) {
            L->fail(t.message + " [block " + coords(blockIdx) + ", thread " + coords(threadIdx) + "]");
        } catch (const std::exception& e) {
            L->fail(std::string("C++ exception in kernel: ") + e.what());
        } catch (...) {
            L->fail("unknown exception in kernel");
        }
        g->block.sync_count[tid] = ts.syncs;
        g->block.sync->arrive_and_drop();
        g->block.warps[ts.warp].bar->arrive_and_drop();
        g->ctrl->arrive_and_wait();
    }
    ts.ctx = nullptr;
    finish_thread(L);
}

// ---------------------------------------------------------------------------
// Persistent pool of host threads (creating hundreds of threads per launch
// would dominate the cost of small launches). Threads stuck in a launch that
// timed out never come back; the pool then creates new ones.
// ---------------------------------------------------------------------------
struct PoolThread {
    std::atomic<unsigned> seq{0};
    void (*fn)(void*) = nullptr;
    void* arg = nullptr;
};

struct Pool {
    std::mutex mu;
    std::vector<PoolThread*> idle;
    pid_t pid = 0;
};

inline Pool*& pool_slot() {
    static Pool* pool = nullptr;  // never destroyed: idle threads may outlive static destructors
    return pool;
}

inline std::mutex& pool_init_mu() {
    static std::mutex mu;
    return mu;
}

inline Pool& pool() {
    std::lock_guard<std::mutex> lk(pool_init_mu());
    Pool*& p = pool_slot();
    if (p == nullptr || p->pid != getpid()) {  // first use, or a forked child without the threads
        p = new Pool();
        p->pid = getpid();
    }
    return *p;
}

inline void* pool_thread_main(void* arg) {
    PoolThread* t = static_cast<PoolThread*>(arg);
    Pool* owner = &pool();
    unsigned seen = 0;
    for (;;) {
        unsigned s;
        while ((s = t->seq.load(std::memory_order_acquire)) == seen) t->seq.wait(seen);
        seen = s;
        t->fn(t->arg);
        std::lock_guard<std::mutex> lk(owner->mu);
        owner->idle.push_back(t);
    }
    return nullptr;
}

// Take n idle threads (creating what is missing); false if threads cannot be created.
inline bool acquire_threads(std::vector<PoolThread*>& out, std::size_t n) {
    Pool& P = pool();
    {
        std::lock_guard<std::mutex> lk(P.mu);
        while (out.size() < n && !P.idle.empty()) {
            out.push_back(P.idle.back());
            P.idle.pop_back();
        }
    }
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 1u << 20);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    bool ok = true;
    while (out.size() < n) {
        auto* t = new PoolThread();
        pthread_t th;
        if (pthread_create(&th, &attr, pool_thread_main, t) != 0) {
            delete t;
            ok = false;
            break;
        }
        out.push_back(t);
    }
    pthread_attr_destroy(&attr);
    if (!ok) {
        std::lock_guard<std::mutex> lk(P.mu);
        for (PoolThread* t : out) P.idle.push_back(t);
        out.clear();
    }
    return ok;
}

inline void dispatch(PoolThread* t, void (*fn)(void*), void* arg) {
    t->fn = fn;
    t->arg = arg;
    t->seq.fetch_add(1, std::memory_order_release);
    t->seq.notify_one();
}

inline void write_error(char* err, std::size_t errlen, const std::string& msg) {
    if (err == nullptr || errlen == 0) return;
    std::snprintf(err, errlen, "%s", msg.c_str());
}

// Returns 0 on success, 1 for a kernel error, 2 for a launch error, 3 for a timeout.
inline int launch(const KernelEntry& k, void** args, const unsigned* grid3, const unsigned* block3,
                  unsigned long long dyn_size, unsigned long long smem_limit, int concurrent_blocks,
                  double timeout_s, char* err, unsigned long long errlen) {
    const dim3 grid(grid3[0], grid3[1], grid3[2]);
    const dim3 block(block3[0], block3[1], block3[2]);
    const unsigned long long nthreads = 1ull * block.x * block.y * block.z;
    const unsigned long long nblocks = 1ull * grid.x * grid.y * grid.z;
    if (nthreads == 0 || nthreads > 1024 || nblocks == 0) {
        write_error(err, errlen, "invalid launch configuration");
        return 2;
    }
    if (dyn_size > smem_limit) {
        write_error(err, errlen, "dynamic shared memory exceeds the limit");
        return 2;
    }
    auto* L = new Launch();
    L->invoke = k.invoke;
    L->args = args;
    L->grid = grid;
    L->block = block;
    L->nthreads = static_cast<unsigned>(nthreads);
    L->nblocks = nblocks;
    L->dyn_size = dyn_size;
    L->smem_limit = smem_limit;
    unsigned long long ngroups = concurrent_blocks < 1 ? 1 : concurrent_blocks;
    if (ngroups > nblocks) ngroups = nblocks;
    const std::size_t arena_size = (smem_limit + 63) / 64 * 64 + 64;
    const std::size_t dyn_rounded = (dyn_size + 15) / 16 * 16;

    auto* groups = new std::vector<std::unique_ptr<Group>>();
    for (unsigned long long gi = 0; gi < ngroups; ++gi) {
        auto g = std::make_unique<Group>();
        g->L = L;
        g->arena = static_cast<unsigned char*>(std::aligned_alloc(64, arena_size));
        if (g->arena == nullptr) {
            write_error(err, errlen, "out of host memory for shared memory");
            for (auto& h : *groups) std::free(h->arena);
            delete groups;
            delete L;
            return 2;
        }
        g->block.arena = g->arena;
        g->block.arena_size = smem_limit;
        g->block.dyn_offset = dyn_rounded > smem_limit ? 0 : (smem_limit - dyn_rounded) / 16 * 16;
        g->ctrl.emplace(static_cast<std::ptrdiff_t>(nthreads), GroupDone{g.get()});
        groups->push_back(std::move(g));
    }

    const unsigned long long total = ngroups * nthreads;
    std::vector<PoolThread*> threads;
    if (!acquire_threads(threads, total)) {
        for (auto& g : *groups) std::free(g->arena);
        delete groups;
        delete L;
        write_error(err, errlen, "could not create " + std::to_string(total) + " host threads for the launch");
        return 2;
    }
    auto* workers = new std::vector<Worker>(total);
    L->threads_left.store(static_cast<unsigned>(total));
    for (unsigned long long i = 0; i < total; ++i) {
        (*workers)[i] = Worker{(*groups)[i / nthreads].get(), static_cast<unsigned>(i % nthreads)};
        dispatch(threads[i], run_worker, &(*workers)[i]);
    }

    bool finished;
    {
        std::unique_lock<std::mutex> lk(L->done_mu);
        auto pred = [&] { return L->threads_left.load() == 0; };
        if (timeout_s > 0) {
            finished = L->done_cv.wait_for(lk, std::chrono::duration<double>(timeout_s), pred);
        } else {
            L->done_cv.wait(lk, pred);
            finished = true;
        }
    }
    std::fflush(stdout);
    if (!finished) {
        // Threads stuck in a barrier cannot be stopped: leave them, and the
        // state they use, behind and report the hang.
        write_error(err, errlen,
                    "kernel did not finish within " + std::to_string(timeout_s) +
                        " s: threads are stuck (a barrier or warp operation that not every "
                        "thread reaches, or a spin loop waiting on another block)");
        return 3;
    }
    for (auto& g : *groups) std::free(g->arena);
    delete groups;
    delete workers;
    int rc = 0;
    if (L->failed.load()) {
        write_error(err, errlen, L->error);
        rc = 1;
    }
    delete L;
    return rc;
}

}  // namespace gpurpo_emu

// ---------------------------------------------------------------------------
// Synchronisation and memory fences
// ---------------------------------------------------------------------------
inline void __syncthreads() {
    ++gpurpo_emu::ts.syncs;
    gpurpo_emu::ctx().sync->arrive_and_wait();
}

namespace gpurpo_emu {
inline int sync_reduce(int pred, bool want_all_count) {
    BlockCtx& c = ctx();
    const unsigned p = static_cast<unsigned>(ts.syncs & 1);
    if (pred) c.red_true[p].fetch_add(1);
    c.red_all[p].fetch_add(1);
    ++ts.syncs;
    c.sync->arrive_and_wait();
    const int n_true = c.red_true[p].load();
    if (want_all_count) return n_true == c.red_all[p].load();
    return n_true;
}
}  // namespace gpurpo_emu

inline int __syncthreads_count(int pred) { return gpurpo_emu::sync_reduce(pred, false); }
inline int __syncthreads_and(int pred) { return gpurpo_emu::sync_reduce(pred, true); }
inline int __syncthreads_or(int pred) { return gpurpo_emu::sync_reduce(pred, false) > 0; }

inline void __threadfence() { std::atomic_thread_fence(std::memory_order_seq_cst); }
inline void __threadfence_block() { std::atomic_thread_fence(std::memory_order_seq_cst); }
inline void __threadfence_system() { std::atomic_thread_fence(std::memory_order_seq_cst); }

[[noreturn]] inline void __trap() { gpurpo_emu::trap("__trap() called"); }

inline void __nanosleep(unsigned ns) {
    struct timespec t{0, static_cast<long>(ns)};
    nanosleep(&t, nullptr);
}

inline long long clock64() {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
}

#undef assert
#define assert(e) ((e) ? (void)0 : ::gpurpo_emu::assert_fail(#e, __FILE__, __LINE__))

// ---------------------------------------------------------------------------
// Warp-level primitives (all existing lanes of the warp must take part)
// ---------------------------------------------------------------------------
inline void __syncwarp(unsigned mask = 0xffffffffu) {
    gpurpo_emu::my_warp(mask, "__syncwarp").bar->arrive_and_wait();
}

inline unsigned __activemask() { return gpurpo_emu::ctx().warps[gpurpo_emu::ts.warp].active; }

template <class T>
inline T __shfl_sync(unsigned mask, T var, int src_lane, int width = warpSize) {
    return gpurpo_emu::shfl(mask, var, src_lane, width, gpurpo_emu::Shfl::Idx, "__shfl_sync");
}
template <class T>
inline T __shfl_up_sync(unsigned mask, T var, unsigned delta, int width = warpSize) {
    return gpurpo_emu::shfl(mask, var, static_cast<int>(delta), width, gpurpo_emu::Shfl::Up, "__shfl_up_sync");
}
template <class T>
inline T __shfl_down_sync(unsigned mask, T var, unsigned delta, int width = warpSize) {
    return gpurpo_emu::shfl(mask, var, static_cast<int>(delta), width, gpurpo_emu::Shfl::Down,
                            "__shfl_down_sync");
}
template <class T>
inline T __shfl_xor_sync(unsigned mask, T var, int lane_mask, int width = warpSize) {
    return gpurpo_emu::shfl(mask, var, lane_mask, width, gpurpo_emu::Shfl::Xor, "__shfl_xor_sync");
}

inline unsigned __ballot_sync(unsigned mask, int pred) {
    gpurpo_emu::Warp& w = gpurpo_emu::my_warp(mask, "__ballot_sync");
    const gpurpo_emu::Exchanged x = gpurpo_emu::exchange(w, pred != 0);
    unsigned out = 0;
    for (unsigned l = 0; l < w.nlanes; ++l)
        if (gpurpo_emu::lane_value(x, static_cast<int>(l), "__ballot_sync")) out |= 1u << l;
    return out & mask;
}
inline int __any_sync(unsigned mask, int pred) { return __ballot_sync(mask, pred) != 0; }
inline int __all_sync(unsigned mask, int pred) {
    const unsigned active = gpurpo_emu::ctx().warps[gpurpo_emu::ts.warp].active;
    return __ballot_sync(mask, pred) == (mask & active);
}

namespace gpurpo_emu {
template <class T, class Op>
inline T warp_reduce(unsigned mask, T value, Op op, const char* what) {
    Warp& w = my_warp(mask, what);
    const Exchanged x = exchange(w, to_bits(value));
    T acc = from_bits<T>(lane_value(x, 0, what));
    for (unsigned l = 1; l < w.nlanes; ++l) acc = op(acc, from_bits<T>(lane_value(x, static_cast<int>(l), what)));
    return acc;
}
}  // namespace gpurpo_emu

inline unsigned __reduce_add_sync(unsigned mask, unsigned v) {
    return gpurpo_emu::warp_reduce(mask, v, [](unsigned a, unsigned b) { return a + b; }, "__reduce_add_sync");
}
inline int __reduce_add_sync(unsigned mask, int v) {
    return gpurpo_emu::warp_reduce(mask, v, [](int a, int b) { return int(unsigned(a) + unsigned(b)); },
                                   "__reduce_add_sync");
}
inline unsigned __reduce_min_sync(unsigned mask, unsigned v) {
    return gpurpo_emu::warp_reduce(mask, v, [](unsigned a, unsigned b) { return a < b ? a : b; }, "__reduce_min_sync");
}
inline int __reduce_min_sync(unsigned mask, int v) {
    return gpurpo_emu::warp_reduce(mask, v, [](int a, int b) { return a < b ? a : b; }, "__reduce_min_sync");
}
inline unsigned __reduce_max_sync(unsigned mask, unsigned v) {
    return gpurpo_emu::warp_reduce(mask, v, [](unsigned a, unsigned b) { return a > b ? a : b; }, "__reduce_max_sync");
}
inline int __reduce_max_sync(unsigned mask, int v) {
    return gpurpo_emu::warp_reduce(mask, v, [](int a, int b) { return a > b ? a : b; }, "__reduce_max_sync");
}
inline unsigned __reduce_and_sync(unsigned mask, unsigned v) {
    return gpurpo_emu::warp_reduce(mask, v, [](unsigned a, unsigned b) { return a & b; }, "__reduce_and_sync");
}
inline unsigned __reduce_or_sync(unsigned mask, unsigned v) {
    return gpurpo_emu::warp_reduce(mask, v, [](unsigned a, unsigned b) { return a | b; }, "__reduce_or_sync");
}
inline unsigned __reduce_xor_sync(unsigned mask, unsigned v) {
    return gpurpo_emu::warp_reduce(mask, v, [](unsigned a, unsigned b) { return a ^ b; }, "__reduce_xor_sync");
}

// ---------------------------------------------------------------------------
// Atomics (relaxed, as CUDA's), overloads as in the CUDA runtime
// ---------------------------------------------------------------------------
namespace gpurpo_emu {
template <class T>
inline std::atomic_ref<T> aref(T* p) {
    return std::atomic_ref<T>(*p);
}
constexpr auto relaxed = std::memory_order_relaxed;

template <class T, class F>
inline T cas_loop(T* p, F update) {
    auto a = aref(p);
    T old = a.load(relaxed);
    while (!a.compare_exchange_weak(old, update(old), relaxed, relaxed)) {
    }
    return old;
}
}  // namespace gpurpo_emu

#define GPURPO_EMU_ATOMIC_ADD(T)                                                                \
    inline T atomicAdd(T* p, T v) { return gpurpo_emu::aref(p).fetch_add(v, gpurpo_emu::relaxed); } \
    inline T atomicAdd_block(T* p, T v) { return atomicAdd(p, v); }                            \
    inline T atomicAdd_system(T* p, T v) { return atomicAdd(p, v); }
GPURPO_EMU_ATOMIC_ADD(int)
GPURPO_EMU_ATOMIC_ADD(unsigned int)
GPURPO_EMU_ATOMIC_ADD(unsigned long long)
GPURPO_EMU_ATOMIC_ADD(float)
GPURPO_EMU_ATOMIC_ADD(double)
#undef GPURPO_EMU_ATOMIC_ADD

inline int atomicSub(int* p, int v) { return gpurpo_emu::aref(p).fetch_sub(v, gpurpo_emu::relaxed); }
inline unsigned int atomicSub(unsigned int* p, unsigned int v) {
    return gpurpo_emu::aref(p).fetch_sub(v, gpurpo_emu::relaxed);
}

#define GPURPO_EMU_ATOMIC_EXCH(T) \
    inline T atomicExch(T* p, T v) { return gpurpo_emu::aref(p).exchange(v, gpurpo_emu::relaxed); }
GPURPO_EMU_ATOMIC_EXCH(int)
GPURPO_EMU_ATOMIC_EXCH(unsigned int)
GPURPO_EMU_ATOMIC_EXCH(unsigned long long)
GPURPO_EMU_ATOMIC_EXCH(float)
#undef GPURPO_EMU_ATOMIC_EXCH

#define GPURPO_EMU_ATOMIC_MINMAX(T)                                                                 \
    inline T atomicMin(T* p, T v) { return gpurpo_emu::cas_loop(p, [v](T o) { return v < o ? v : o; }); } \
    inline T atomicMax(T* p, T v) { return gpurpo_emu::cas_loop(p, [v](T o) { return v > o ? v : o; }); }
GPURPO_EMU_ATOMIC_MINMAX(int)
GPURPO_EMU_ATOMIC_MINMAX(unsigned int)
GPURPO_EMU_ATOMIC_MINMAX(long long)
GPURPO_EMU_ATOMIC_MINMAX(unsigned long long)
#undef GPURPO_EMU_ATOMIC_MINMAX

#define GPURPO_EMU_ATOMIC_CAS(T)                                                    \
    inline T atomicCAS(T* p, T compare, T v) {                                      \
        gpurpo_emu::aref(p).compare_exchange_strong(compare, v, gpurpo_emu::relaxed, \
                                                    gpurpo_emu::relaxed);           \
        return compare;                                                             \
    }
GPURPO_EMU_ATOMIC_CAS(int)
GPURPO_EMU_ATOMIC_CAS(unsigned int)
GPURPO_EMU_ATOMIC_CAS(unsigned long long)
GPURPO_EMU_ATOMIC_CAS(unsigned short)
#undef GPURPO_EMU_ATOMIC_CAS

#define GPURPO_EMU_ATOMIC_BITS(T)                                                                   \
    inline T atomicAnd(T* p, T v) { return gpurpo_emu::aref(p).fetch_and(v, gpurpo_emu::relaxed); } \
    inline T atomicOr(T* p, T v) { return gpurpo_emu::aref(p).fetch_or(v, gpurpo_emu::relaxed); }   \
    inline T atomicXor(T* p, T v) { return gpurpo_emu::aref(p).fetch_xor(v, gpurpo_emu::relaxed); }
GPURPO_EMU_ATOMIC_BITS(int)
GPURPO_EMU_ATOMIC_BITS(unsigned int)
GPURPO_EMU_ATOMIC_BITS(unsigned long long)
#undef GPURPO_EMU_ATOMIC_BITS

inline unsigned int atomicInc(unsigned int* p, unsigned int v) {
    return gpurpo_emu::cas_loop(p, [v](unsigned int o) { return o >= v ? 0u : o + 1u; });
}
inline unsigned int atomicDec(unsigned int* p, unsigned int v) {
    return gpurpo_emu::cas_loop(p, [v](unsigned int o) { return (o == 0u || o > v) ? v : o - 1u; });
}

// ---------------------------------------------------------------------------
// Math and bit intrinsics
// ---------------------------------------------------------------------------
template <class A, class B,
          std::enable_if_t<std::is_arithmetic_v<A> && std::is_arithmetic_v<B>, int> = 0>
inline std::common_type_t<A, B> min(A a, B b) {
    using C = std::common_type_t<A, B>;
    if constexpr (std::is_floating_point_v<C>) return std::fmin(C(a), C(b));
    else return C(a) < C(b) ? C(a) : C(b);
}
template <class A, class B,
          std::enable_if_t<std::is_arithmetic_v<A> && std::is_arithmetic_v<B>, int> = 0>
inline std::common_type_t<A, B> max(A a, B b) {
    using C = std::common_type_t<A, B>;
    if constexpr (std::is_floating_point_v<C>) return std::fmax(C(a), C(b));
    else return C(a) > C(b) ? C(a) : C(b);
}

inline float rsqrtf(float x) { return 1.0f / sqrtf(x); }
inline double rsqrt(double x) { return 1.0 / sqrt(x); }
inline float __saturatef(float x) { return x != x ? 0.0f : (x < 0.0f ? 0.0f : (x > 1.0f ? 1.0f : x)); }
inline float __fdividef(float a, float b) { return a / b; }
inline float __fdiv_rn(float a, float b) { return a / b; }
inline float __frcp_rn(float a) { return 1.0f / a; }
inline float __fsqrt_rn(float a) { return sqrtf(a); }
inline float __fadd_rn(float a, float b) { return a + b; }
inline float __fsub_rn(float a, float b) { return a - b; }
inline float __fmul_rn(float a, float b) { return a * b; }
inline float __fmaf_rn(float a, float b, float c) { return fmaf(a, b, c); }
inline double __dadd_rn(double a, double b) { return a + b; }
inline double __dmul_rn(double a, double b) { return a * b; }
inline double __ddiv_rn(double a, double b) { return a / b; }
inline double __dsub_rn(double a, double b) { return a - b; }
inline double __fma_rn(double a, double b, double c) { return fma(a, b, c); }
inline float __expf(float x) { return expf(x); }
inline float __exp10f(float x) { return powf(10.0f, x); }
inline float __logf(float x) { return logf(x); }
inline float __log2f(float x) { return log2f(x); }
inline float __log10f(float x) { return log10f(x); }
inline float __powf(float a, float b) { return powf(a, b); }
inline float __sinf(float x) { return sinf(x); }
inline float __cosf(float x) { return cosf(x); }
inline float __tanf(float x) { return tanf(x); }

inline int __float2int_rd(float x) { return static_cast<int>(floorf(x)); }
inline int __float2int_ru(float x) { return static_cast<int>(ceilf(x)); }
inline int __float2int_rz(float x) { return static_cast<int>(truncf(x)); }
inline int __float2int_rn(float x) { return static_cast<int>(nearbyintf(x)); }
inline unsigned __float2uint_rd(float x) { return static_cast<unsigned>(floorf(x)); }
inline unsigned __float2uint_ru(float x) { return static_cast<unsigned>(ceilf(x)); }
inline unsigned __float2uint_rz(float x) { return static_cast<unsigned>(truncf(x)); }
inline unsigned __float2uint_rn(float x) { return static_cast<unsigned>(nearbyintf(x)); }
inline long long __float2ll_rd(float x) { return static_cast<long long>(floorf(x)); }
inline long long __float2ll_rz(float x) { return static_cast<long long>(truncf(x)); }
inline long long __float2ll_rn(float x) { return static_cast<long long>(nearbyintf(x)); }
inline int __double2int_rd(double x) { return static_cast<int>(floor(x)); }
inline int __double2int_ru(double x) { return static_cast<int>(ceil(x)); }
inline int __double2int_rz(double x) { return static_cast<int>(trunc(x)); }
inline int __double2int_rn(double x) { return static_cast<int>(nearbyint(x)); }
inline long long __double2ll_rd(double x) { return static_cast<long long>(floor(x)); }
inline long long __double2ll_rz(double x) { return static_cast<long long>(trunc(x)); }
inline long long __double2ll_rn(double x) { return static_cast<long long>(nearbyint(x)); }
inline float __double2float_rn(double x) { return static_cast<float>(x); }
inline float __int2float_rn(int x) { return static_cast<float>(x); }
inline float __uint2float_rn(unsigned x) { return static_cast<float>(x); }
inline float __ll2float_rn(long long x) { return static_cast<float>(x); }
inline double __int2double_rn(int x) { return static_cast<double>(x); }
inline double __ll2double_rn(long long x) { return static_cast<double>(x); }

inline int __float_as_int(float x) { return gpurpo_emu::from_bits<int>(gpurpo_emu::to_bits(x)); }
inline unsigned __float_as_uint(float x) { return gpurpo_emu::from_bits<unsigned>(gpurpo_emu::to_bits(x)); }
inline float __int_as_float(int x) { return gpurpo_emu::from_bits<float>(gpurpo_emu::to_bits(x)); }
inline float __uint_as_float(unsigned x) { return gpurpo_emu::from_bits<float>(gpurpo_emu::to_bits(x)); }
inline long long __double_as_longlong(double x) {
    return gpurpo_emu::from_bits<long long>(gpurpo_emu::to_bits(x));
}
inline double __longlong_as_double(long long x) { return gpurpo_emu::from_bits<double>(gpurpo_emu::to_bits(x)); }

inline int __popc(unsigned x) { return __builtin_popcount(x); }
inline int __popcll(unsigned long long x) { return __builtin_popcountll(x); }
inline int __clz(int x) { return x == 0 ? 32 : __builtin_clz(static_cast<unsigned>(x)); }
inline int __clzll(long long x) { return x == 0 ? 64 : __builtin_clzll(static_cast<unsigned long long>(x)); }
inline int __ffs(int x) { return __builtin_ffs(x); }
inline int __ffsll(long long x) { return __builtin_ffsll(x); }
inline unsigned __brev(unsigned x) {
    unsigned r = 0;
    for (int i = 0; i < 32; ++i) r |= ((x >> i) & 1u) << (31 - i);
    return r;
}
inline unsigned long long __brevll(unsigned long long x) {
    unsigned long long r = 0;
    for (int i = 0; i < 64; ++i) r |= ((x >> i) & 1ull) << (63 - i);
    return r;
}
inline int __mul24(int a, int b) {
    return static_cast<int>((static_cast<long long>(a) << 40 >> 40) * (static_cast<long long>(b) << 40 >> 40));
}
inline unsigned __umul24(unsigned a, unsigned b) { return (a & 0xffffffu) * (b & 0xffffffu); }
inline int __mulhi(int a, int b) { return static_cast<int>((static_cast<long long>(a) * b) >> 32); }
inline unsigned __umulhi(unsigned a, unsigned b) {
    return static_cast<unsigned>((static_cast<unsigned long long>(a) * b) >> 32);
}
inline long long __mul64hi(long long a, long long b) {
    return static_cast<long long>((static_cast<__int128>(a) * b) >> 64);
}
inline unsigned long long __umul64hi(unsigned long long a, unsigned long long b) {
    return static_cast<unsigned long long>((static_cast<unsigned __int128>(a) * b) >> 64);
}

// Cache-hinted loads and stores are plain memory accesses here.
template <class T> inline T __ldg(const T* p) { return *p; }
template <class T> inline T __ldcg(const T* p) { return *p; }
template <class T> inline T __ldca(const T* p) { return *p; }
template <class T> inline T __ldcs(const T* p) { return *p; }
template <class T> inline T __ldlu(const T* p) { return *p; }
template <class T> inline T __ldcv(const T* p) { return *p; }
template <class T> inline void __stwb(T* p, T v) { *p = v; }
template <class T> inline void __stcg(T* p, T v) { *p = v; }
template <class T> inline void __stcs(T* p, T v) { *p = v; }
template <class T> inline void __stwt(T* p, T v) { *p = v; }
