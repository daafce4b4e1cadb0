"""The CPU emulation of the CUDA execution model (gpurpo.testing.cuda_emulator).

Every kernel here is real CUDA C (tests/cuda/cuda_kernels/*.cu, also compiled with
NVRTC by tests/cuda/test_nvrtc.py); results are compared with NumPy references
written in this file.
"""

from __future__ import annotations

import itertools
import os
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from gpurpo import backend
from gpurpo.backend import _sources as backend_sources
from gpurpo.testing.cuda_emulator import (
    CudaKernelError,
    EmulatedModule,
    EmulatorCompileError,
    _build,
    _parse,
    raw_kernel,
)

pytestmark = pytest.mark.skipif(
    shutil.which("g++") is None, reason="the CUDA emulator needs g++ (C++20) on PATH"
)

KDIR = Path(__file__).parent / "cuda_kernels"


@pytest.fixture(scope="module")
def basics() -> EmulatedModule:
    return EmulatedModule(path=KDIR / "emulator_basics.cu")


@pytest.fixture(scope="module", params=[1, 3], ids=["one-block-at-a-time", "3-blocks-at-once"])
def basics_any(request) -> EmulatedModule:
    """The basic kernels, running one block at a time or three at once."""
    return EmulatedModule(path=KDIR / "emulator_basics.cu", concurrent_blocks=request.param)


@pytest.fixture(scope="module")
def errors() -> EmulatedModule:
    return EmulatedModule(path=KDIR / "emulator_errors.cu", timeout=3.0)


@pytest.fixture(scope="module")
def syntax() -> EmulatedModule:
    return EmulatedModule(path=KDIR / "emulator_syntax.cu")


def _i32(v: int) -> np.int32:
    return np.int32(v)


# ---------------------------------------------------------------------------
# Execution model
# ---------------------------------------------------------------------------


def test_block_tree_reduction_in_shared_memory(basics_any):
    rng = np.random.default_rng(0)
    n, grid, block = 5000, 6, 128
    x = rng.random(n, dtype=np.float32)
    partial = np.zeros(grid, dtype=np.float32)
    basics_any.get_function("block_sum")((grid,), (block,), (x, _i32(n), partial))
    # thread t of block b reads x[b*block + t + k*grid*block] (grid-stride loop)
    owner = (np.arange(n) // block) % grid
    expected = np.array([x[owner == b].astype(np.float64).sum() for b in range(grid)])
    np.testing.assert_allclose(partial, expected, rtol=1e-5)
    np.testing.assert_allclose(partial.sum(dtype=np.float64), x.sum(dtype=np.float64), rtol=1e-5)


@pytest.mark.parametrize("block", [256, 80])
def test_many_barrier_phases_keep_the_threads_in_step(basics_any, block):
    # 2 barriers a round, 150 rounds: a thread that passed a barrier early, or one
    # released before the last arrival, reads a stale neighbour and every later value
    # differs (80 threads: a partial last warp)
    rng = np.random.default_rng(3)
    grid, rounds = 3, 150
    values = rng.integers(0, 1000, size=grid * block, dtype=np.uint64)
    counts = np.full(rounds, -1, dtype=np.int32)
    expected = values.reshape(grid, block).copy()
    odd = []
    for _ in range(rounds):
        expected = expected + np.roll(expected, -1, axis=1)
        odd.append(int((expected[0] & 1).sum()))
    basics_any.get_function("barrier_rounds")((grid,), (block,), (values, _i32(rounds), counts))
    np.testing.assert_array_equal(values.reshape(grid, block), expected)
    np.testing.assert_array_equal(counts, odd)


def test_compile_options_define_macros():
    mod = EmulatedModule(path=KDIR / "emulator_basics.cu", options=("--std=c++17", "-DBLOCK=256"))
    x = np.arange(3000, dtype=np.float32)
    partial = np.zeros(2, dtype=np.float32)
    mod.get_function("block_sum")(2, 256, (x, 3000, partial))
    owner = (np.arange(3000) // 256) % 2
    np.testing.assert_allclose(partial, [x[owner == b].sum() for b in range(2)], rtol=1e-6)


def test_atomics_under_contention(basics_any):
    rng = np.random.default_rng(1)
    n, n_slots = 20000, 5
    keys = rng.integers(0, n_slots, n).astype(np.int32)
    vals = rng.random(n, dtype=np.float32)
    counts = np.zeros(n_slots, np.uint32)
    fsum = np.zeros(n_slots, np.float32)
    dsum = np.zeros(n_slots, np.float64)
    imax = np.full(n_slots, -1, np.int32)
    imin = np.full(n_slots, n, np.int32)
    ucount = np.zeros(n_slots, np.uint64)
    subtracted = np.full(n_slots, 10**6, np.uint32)
    basics_any.get_function("atomic_contention")(
        (8,), (256,), (keys, vals, n, n_slots, counts, fsum, dsum, imax, imin, ucount, subtracted)
    )
    ref_counts = np.bincount(keys, minlength=n_slots)
    np.testing.assert_array_equal(counts, ref_counts)
    np.testing.assert_array_equal(ucount, ref_counts)
    np.testing.assert_array_equal(subtracted, 10**6 - 2 * ref_counts)
    ref_sum = np.bincount(keys, weights=vals.astype(np.float64), minlength=n_slots)
    np.testing.assert_allclose(dsum, ref_sum, rtol=1e-12)
    np.testing.assert_allclose(fsum, ref_sum, rtol=1e-4)
    idx = np.arange(n)
    np.testing.assert_array_equal(imax, [idx[keys == k].max() for k in range(n_slots)])
    np.testing.assert_array_equal(imin, [idx[keys == k].min() for k in range(n_slots)])


def test_atomic_cas_counter_and_spin_lock(basics_any):
    rng = np.random.default_rng(2)
    n, grid = 3000, 5
    vals = rng.standard_normal(n)
    lock = np.zeros(1, np.int32)
    total = np.zeros(1, np.float64)
    visits = np.zeros(1, np.int32)
    cas_counter = np.zeros(1, np.int32)
    basics_any.get_function("cas_lock")((grid,), (64,), (vals, n, lock, total, visits, cas_counter))
    assert cas_counter[0] == n
    assert visits[0] == grid
    assert lock[0] == 0
    np.testing.assert_allclose(total[0], vals.sum(), rtol=1e-10, atol=1e-10)


def test_dynamic_shared_memory(basics_any):
    n, block = 1000, 128
    grid = -(-n // block)
    data = np.arange(n, dtype=np.int32) * 3 + 1
    out = np.zeros(n, np.int32)
    out_f = np.zeros(n, np.float32)
    basics_any.get_function("dyn_reverse")(
        (grid,), (block,), (data, n, out, out_f), shared_mem=2 * block * 4
    )
    expected = np.empty(n, np.int32)
    for b in range(grid):
        chunk = np.full(block, -1, np.int32)
        part = data[b * block : (b + 1) * block]
        chunk[: part.size] = part
        expected[b * block : (b + 1) * block] = chunk[::-1][: part.size]
    np.testing.assert_array_equal(out, expected)
    np.testing.assert_array_equal(out_f, 0.5 * expected.astype(np.float32) * (expected >= 0) - (expected < 0))


@pytest.mark.parametrize(
    "grid, block", [((2, 3, 2), (4, 2, 3)), ((3, 2), (8, 4)), (5, (2, 1, 4))], ids=["3d", "2d", "1d-grid"]
)
def test_multidimensional_grids_and_blocks(basics, grid, block):
    g = tuple(grid) + (1,) * (3 - len(grid)) if isinstance(grid, tuple) else (grid, 1, 1)
    b = tuple(block) + (1,) * (3 - len(block))
    nthreads, nblocks = int(np.prod(b)), int(np.prod(g))
    out = np.full((nblocks * nthreads, 6), -1, np.int32)
    basics.get_function("grid_coords")(grid, block, (out,))
    expected = np.empty_like(out)
    for bz, by, bx in itertools.product(range(g[2]), range(g[1]), range(g[0])):
        block_id = bx + g[0] * (by + g[1] * bz)
        for tz, ty, tx in itertools.product(range(b[2]), range(b[1]), range(b[0])):
            tid = tx + b[0] * (ty + b[1] * tz)
            expected[block_id * nthreads + tid] = (tx, ty, tz, bx, by, bz)
    np.testing.assert_array_equal(out, expected)


def test_privatised_shared_memory_histogram(basics_any):
    rng = np.random.default_rng(3)
    n, n_features, n_bins = 3000, 5, 32
    binned = rng.integers(0, n_bins, (n, n_features)).astype(np.uint8)
    rows = np.sort(rng.choice(n, 1700, replace=False)).astype(np.int32)
    grad = rng.standard_normal(n).astype(np.float32)
    hist = np.zeros((n_features, n_bins), np.float32)
    counts = np.zeros((n_features, n_bins), np.int32)
    smem = n_features * n_bins * (4 + 4)
    basics_any.get_function("hist_shared")(
        (4,), (128,), (binned, n_features, rows, rows.size, grad, n_bins, hist, counts), shared_mem=smem
    )
    ref_hist = np.zeros((n_features, n_bins))
    ref_counts = np.zeros((n_features, n_bins), np.int64)
    for f in range(n_features):
        np.add.at(ref_hist[f], binned[rows, f], grad[rows].astype(np.float64))
        ref_counts[f] = np.bincount(binned[rows, f], minlength=n_bins)
    np.testing.assert_array_equal(counts, ref_counts)
    np.testing.assert_allclose(hist, ref_hist, rtol=1e-4, atol=1e-4)


def test_warp_shuffles_votes_and_syncthreads_count(basics_any):
    rng = np.random.default_rng(4)
    n, block, grid = 300, 96, 4
    x = rng.random(n, dtype=np.float32)
    nwarps = grid * block // 32
    out = np.zeros(grid, np.float32)
    ballots = np.zeros(nwarps, np.uint32)
    positives = np.zeros(grid, np.int32)
    lane_max = np.zeros(nwarps, np.int32)
    shuffled = np.zeros(n, np.float32)
    basics_any.get_function("warp_sum")(
        (grid,), (block,), (x, n, out, ballots, positives, lane_max, shuffled)
    )
    padded = np.zeros(grid * block, np.float32)
    padded[:n] = x
    np.testing.assert_allclose(out, padded.reshape(grid, block).sum(axis=1), rtol=1e-5)
    bits = (padded > 0.5).reshape(nwarps, 32)
    np.testing.assert_array_equal(ballots, (bits * (1 << np.arange(32, dtype=np.uint64))).sum(axis=1))
    np.testing.assert_array_equal(positives, (padded > 0.5).reshape(grid, block).sum(axis=1))
    idx = np.where(np.arange(grid * block) < n, np.arange(grid * block), -1)
    np.testing.assert_array_equal(lane_max, idx.reshape(nwarps, 32).max(axis=1))
    np.testing.assert_array_equal(shuffled, padded[np.arange(n) ^ 1])


def test_every_scalar_and_pointer_type(basics):
    rng = np.random.default_rng(5)
    n = 10
    arrays = {
        "u8": rng.integers(0, 255, n).astype(np.uint8),
        "i8": rng.integers(-128, 127, n).astype(np.int8),
        "i16": rng.integers(-30000, 30000, n).astype(np.int16),
        "u16": rng.integers(0, 60000, n).astype(np.uint16),
        "i32": rng.integers(-(2**31), 2**31 - 1, n).astype(np.int32),
        "u32": rng.integers(0, 2**32 - 1, n).astype(np.uint32),
        "i64": rng.integers(-(2**40), 2**40, n).astype(np.int64),
        "u64": rng.integers(0, 2**40, n).astype(np.uint64),
        "f32": rng.standard_normal(n).astype(np.float32),
        "f64": rng.standard_normal(n),
        "flags": rng.random(n) < 0.5,
    }
    scalars = (n, np.int32(-7), np.uint32(4_000_000_000), 2**40 + 3, np.float32(0.5), 1.25, True, 200)
    out = np.zeros(n)
    basics.get_function("all_types")(1, 32, (*arrays.values(), *scalars, out))
    expected = sum(a.astype(np.float64) for k, a in arrays.items() if k != "flags")
    expected = expected + np.where(arrays["flags"], 1000.0, 0.0)
    expected += -7 + 4_000_000_000 + (2**40 + 3) + 0.5 + 1.25 + 0.25 + 200
    np.testing.assert_allclose(out, expected, rtol=1e-12)


def test_file_scope_shared_declarations(basics_any):
    rng = np.random.default_rng(6)
    n, block, grid = 200, 64, 4
    x = rng.random(n, dtype=np.float32)
    out = np.zeros(n, np.float32)
    totals = np.zeros(grid, np.int32)
    basics_any.get_function("file_scope_shared")((grid,), (block,), (x, n, out, totals), shared_mem=block * 4)
    padded = np.zeros(grid * block, np.float32)
    padded[:n] = 2 * x
    t = np.arange(n) % block
    np.testing.assert_array_equal(out, padded[np.arange(n) - t + (t + 1) % block])
    np.testing.assert_array_equal(totals, block)


def test_uninitialised_shared_memory_is_poisoned(basics):
    out = np.zeros(2 * 64, np.float32)
    basics.get_function("uninitialised_shared")(2, 64, (out,))
    assert np.isnan(out).all()


def test_source_forms_macros_extern_c_blocks_and_shared_in_device_functions(syntax):
    assert set(syntax.kernel_names) == {"fill_f32", "fill_f64", "shared_forms", "no_params", "intrinsics"}
    out32, out64 = np.zeros(50, np.float32), np.zeros(50)
    syntax.get_function("fill_f32")(1, 64, (out32, 50, np.float32(0.5)))
    syntax.get_function("fill_f64")(1, 64, (out64, 50, 0.25))
    np.testing.assert_array_equal(out32, np.arange(50) + 0.5)
    np.testing.assert_array_equal(out64, np.arange(50) + 0.25)

    x = np.random.default_rng(7).random(128, dtype=np.float32)
    out = np.zeros(128, np.float32)
    syntax.get_function("shared_forms")(2, 64, (x, out))
    xb = x.reshape(2, 64)
    t = np.arange(64)
    expected = xb[:, (t + 1) % 64] + 2 * xb[:, (t + 2) % 64] + 3 * xb[:, (t + 3) % 64]
    expected += xb.max(axis=1, keepdims=True) + 64
    np.testing.assert_allclose(out, expected.ravel(), rtol=1e-6)
    syntax.get_function("no_params")(3, 32, ())


def test_math_and_bit_intrinsics(syntax):
    x = np.array([-2.5, -0.5, 0.0, 0.3, 0.75, 1.5, np.nan, 7.9], dtype=np.float32)
    n = x.size
    ints = np.zeros((n, 4), np.int32)
    floats = np.zeros((n, 3), np.float32)
    syntax.get_function("intrinsics")(1, n, (x, ints, floats))
    i = np.arange(n)
    with np.errstate(invalid="ignore"):
        np.testing.assert_array_equal(ints[~np.isnan(x), 0], np.floor(x[~np.isnan(x)]).astype(np.int32))
    np.testing.assert_array_equal(ints[:, 1], [bin(k).count("1") for k in range(n)])
    np.testing.assert_array_equal(ints[:, 2], [(k & -k).bit_length() for k in range(n)])
    np.testing.assert_array_equal(ints[:, 3], np.minimum(i, 3) + np.maximum(i, 5))
    np.testing.assert_allclose(floats[:, 0], 1 / np.sqrt(np.abs(x) + 1), rtol=1e-6)
    np.testing.assert_allclose(floats[:, 1], np.fmin(x, 0.25) + x[0], rtol=1e-6)
    np.testing.assert_array_equal(floats[:, 2], np.where(np.isnan(x), -1, np.clip(x, 0, 1)))


def test_backend_emulated_loads_kernels_through_the_emulator(monkeypatch):
    monkeypatch.setattr(backend_sources, "kernel_dir", lambda: KDIR)
    backend_sources._load_emulated_module.cache_clear()
    try:
        mod = backend.Backend("emulated").load_module("emulator_basics.cu")
        assert isinstance(mod, EmulatedModule)
        x = np.ones(1000, np.float32)
        partial = np.zeros(2, np.float32)
        mod.get_function("block_sum")(2, 128, (x, 1000, partial))
        assert partial.sum() == 1000
    finally:
        backend_sources._load_emulated_module.cache_clear()


def test_raw_kernel_counterpart():
    k = raw_kernel(
        'extern "C" __global__ void twice(const int* a, int* b, int n) {'
        " int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) b[i] = 2 * a[i]; }",
        "twice",
    )
    a = np.arange(70, dtype=np.int32)
    b = np.zeros_like(a)
    k((3,), (32,), (a, b, a.size))
    np.testing.assert_array_equal(b, 2 * a)


# ---------------------------------------------------------------------------
# Argument checks and launch limits (what would corrupt memory on a GPU)
# ---------------------------------------------------------------------------


def _axpy_args(n: int = 40):
    return np.float32(2.0), np.ones(n, np.float32), np.zeros(n, np.float32), n


def test_axpy_with_correct_arguments(errors):
    a, x, y, n = _axpy_args()
    x[:] = np.arange(n)
    errors.get_function("axpy")(2, 32, (a, x, y, n))
    np.testing.assert_array_equal(y, 2 * np.arange(n))


@pytest.mark.parametrize(
    "position, value, match",
    [
        (1, np.ones(40, np.float64),
         r"\('x', declared `const float\* __restrict__ x`\).*dtype float32, got dtype float64"),
        (2, np.zeros(40, np.int32), r"\('y'.*dtype float32, got dtype int32"),
        (2, np.zeros(80, np.float32)[::2], r"\('y'.*C-contiguous"),
        (2, np.broadcast_to(np.float32(0), (40,)), r"\('y'.*(C-contiguous|read-only)"),
        (1, [1.0] * 40, r"\('x'.*pointer and needs a NumPy array of dtype float32, got list"),
        (0, 2.0, r"\('a'.*Python float \(CuPy passes it as a double\)"),
        (0, np.float64(2.0), r"\('a'.*needs a scalar of dtype float32, got float64"),
        (0, 2, r"\('a'.*Python int"),
        (3, np.int64(40), r"\('n'.*needs a scalar of dtype int32, got int64"),
        (3, 40.0, r"\('n'.*Python float"),
        (3, True, r"\('n'.*Python bool"),
        (3, np.ones(1, np.int32), r"\('n'.*scalar of type int32, got an array"),
    ],
)
def test_argument_type_errors_name_kernel_parameter_and_dtype(errors, position, value, match):
    args = list(_axpy_args())
    args[position] = value
    with pytest.raises(TypeError, match=rf"kernel 'axpy' argument {position} " + match):
        errors.get_function("axpy")(2, 32, tuple(args))


def test_read_only_output_array_is_refused(errors):
    a, x, y, n = _axpy_args()
    y.flags.writeable = False
    with pytest.raises(TypeError, match="non-const pointer but the array is read-only"):
        errors.get_function("axpy")(2, 32, (a, x, y, n))
    x.flags.writeable = False  # const pointer: fine
    y.flags.writeable = True
    errors.get_function("axpy")(2, 32, (a, x, y, n))
    np.testing.assert_array_equal(y, 2.0)


def test_integer_scalar_range_and_argument_count(errors):
    a, x, y, _ = _axpy_args()
    with pytest.raises(ValueError, match=r"\('n'.*value 1099511627776 is out of range for int32"):
        errors.get_function("axpy")(2, 32, (a, x, y, 2**40))
    with pytest.raises(TypeError, match=r"takes 4 arguments, got 3"):
        errors.get_function("axpy")(2, 32, (a, x, y))


@pytest.mark.parametrize(
    "grid, block, shared_mem, exc, match",
    [
        (1, 1025, 0, ValueError, r"dimension x must be in \[1, 1024\], got 1025"),
        (1, (32, 32, 2), 0, ValueError, r"has 2048 threads; a CUDA block holds at most 1024"),
        (1, (1, 1, 65), 0, ValueError, r"dimension z must be in \[1, 64\]"),
        (0, 32, 0, ValueError, r"grid .* dimension x must be in"),
        ((1, 70000), 32, 0, ValueError, r"dimension y must be in \[1, 65535\]"),
        ((1, 1, 1, 1), 32, 0, TypeError, r"tuple of 1 to 3 ints"),
        (1.0, 32, 0, TypeError, r"grid .* must be an int"),
        (1, 32, 48 * 1024 + 1, ValueError, r"shared_mem .* must be in \[0, 49152\]"),
        (1, 32, -1, ValueError, r"shared_mem"),
    ],
)
def test_launch_configuration_limits(errors, grid, block, shared_mem, exc, match):
    with pytest.raises(exc, match=match):
        errors.get_function("axpy")(grid, block, _axpy_args(), shared_mem=shared_mem)


def test_opt_in_dynamic_shared_memory(basics):
    k = basics.get_function("dyn_reverse")
    data = np.arange(64, dtype=np.int32)
    out, out_f = np.zeros(64, np.int32), np.zeros(64, np.float32)
    with pytest.raises(ValueError, match="max_dynamic_shared_size_bytes"):
        k(1, 64, (data, 64, out, out_f), shared_mem=64 * 1024)
    k.max_dynamic_shared_size_bytes = 64 * 1024
    k(1, 64, (data, 64, out, out_f), shared_mem=64 * 1024)
    np.testing.assert_array_equal(out, data[::-1])
    with pytest.raises(ValueError, match=r"must be in \[0, 232448\]"):
        k.max_dynamic_shared_size_bytes = 300 * 1024


# ---------------------------------------------------------------------------
# Errors while a kernel runs
# ---------------------------------------------------------------------------


def test_trap_reports_block_and_thread(errors):
    out = np.zeros(64, np.int32)
    with pytest.raises(CudaKernelError, match=r"__trap\(\) called \[block \(1, 0, 0\), thread \(5, 0, 0\)\]"):
        errors.get_function("traps")(2, 32, (out, 37))
    errors.get_function("traps")(2, 32, (out, -1))
    np.testing.assert_array_equal(out, np.arange(64))


def test_failed_device_assert(errors):
    values = np.array([3, 1, -4, 1], np.int32)
    with pytest.raises(CudaKernelError, match=r"device-side assert failed: values\[i\] >= 0"):
        errors.get_function("asserts_positive")(1, 32, (values, 4))
    errors.get_function("asserts_positive")(1, 32, (np.abs(values), 4))


def test_barrier_divergence_is_reported(errors):
    x = np.ones(100, np.float32)
    out = np.zeros(100, np.float32)
    with pytest.raises(CudaKernelError, match=r"barrier divergence in block \(1, 0, 0\)"):
        errors.get_function("early_return_before_sync")(2, 64, (x, 100, out))
    errors.get_function("early_return_before_sync")(2, 64, (x, 128, np.zeros(128, np.float32)))


def test_write_past_the_end_is_caught_and_in_bounds_data_kept(errors):
    out = np.zeros(100, np.float32)
    message = r"wrote outside its arrays: up to 4 byte\(s\) past the end of argument 'out'"
    with pytest.raises(CudaKernelError, match=message):
        errors.get_function("writes_past_end")(4, 32, (out, 100))
    np.testing.assert_array_equal(out, 1.0)


def test_write_before_the_start_is_caught(errors):
    out = np.zeros(10, np.float32)
    with pytest.raises(CudaKernelError, match=r"4 byte\(s\) before the start of argument 'out'"):
        errors.get_function("writes_before_start")(1, 32, (out, 10))


def test_aliased_arguments_share_one_guarded_copy(errors):
    buf = np.arange(64, dtype=np.float32)
    expected = buf.copy()
    expected[:32] *= 4
    # x is all of buf, y its first half: thread i reads and writes buf[i]
    errors.get_function("axpy")(1, 32, (np.float32(3), buf, buf[:32], 32))
    np.testing.assert_array_equal(buf, expected)
    same = np.ones(32, np.float32)
    errors.get_function("axpy")(1, 32, (np.float32(1), same, same, 32))
    np.testing.assert_array_equal(same, 2.0)


def test_static_plus_dynamic_shared_memory_limit(errors):
    out = np.zeros(64, np.float32)
    errors.get_function("big_static_shared")(1, 64, (out, 64), shared_mem=4 * 1024)
    np.testing.assert_array_equal(out, 3.0)
    with pytest.raises(CudaKernelError, match=r"static __shared__ memory \(32768 bytes\).*exceeds the limit of 49152"):
        errors.get_function("big_static_shared")(1, 64, (out, 64), shared_mem=20 * 1024)


def test_partial_warp_mask_is_refused(errors):
    out = np.zeros(32, np.int32)
    with pytest.raises(CudaKernelError, match=r"__shfl_down_sync with mask 0x0000ffff"):
        errors.get_function("partial_mask_shuffle")(1, 32, (out,))


def test_warp_shuffle_reading_an_exited_lane_is_reported(errors):
    x = np.ones(64, np.float32)
    out = np.zeros(2, np.float32)
    errors.get_function("shuffle_after_early_return")(1, 64, (x, 64, out))
    np.testing.assert_array_equal(out, 32.0)
    with pytest.raises(CudaKernelError, match=r"__shfl_down_sync reads lane (8|9|1\d|2\d|3[01]), which has exited"):
        errors.get_function("shuffle_after_early_return")(1, 64, (x, 40, out))


def test_deadlock_times_out(errors):
    out = np.zeros(32, np.int32)
    with pytest.raises(CudaKernelError, match=r"did not finish within 3"):
        errors.get_function("deadlocks")(1, 32, (out,))
    a, x, y, n = _axpy_args()
    errors.get_function("axpy")(2, 32, (a, x, y, n))
    np.testing.assert_array_equal(y, 2.0)


# ---------------------------------------------------------------------------
# Building, caching, source translation
# ---------------------------------------------------------------------------


def test_compile_error_reports_file_and_line():
    source = 'extern "C" __global__ void broken(float* a)\n{\n    a[0] = 1.0f\n}\n'
    with pytest.raises(EmulatorCompileError, match=r"broken\.cu:3:") as info:
        EmulatedModule(code=source, name="broken.cu")
    assert "expected" in info.value.log


def test_unknown_kernel_and_option():
    mod = EmulatedModule(path=KDIR / "emulator_syntax.cu")
    with pytest.raises(KeyError) as info:
        mod.get_function("mangled_kernel")
    assert "no extern \"C\" __global__ kernel named 'mangled_kernel'" in info.value.args[0]
    assert "'fill_f32'" in info.value.args[0]
    with pytest.raises(ValueError, match="--bogus"):
        EmulatedModule(code="", options=("--bogus",))


def test_build_is_cached_on_disk(monkeypatch):
    source = (KDIR / "emulator_syntax.cu").read_text()
    first = _build.build(source, "emulator_syntax.cu")
    assert first.is_file() and first.parent == _build.cache_dir()
    version = _build._compiler_version(_build._compiler())

    def no_compiler(*args, **kwargs):
        raise AssertionError("the cached library should have been reused")

    monkeypatch.setattr(subprocess, "run", no_compiler)
    monkeypatch.setattr(_build, "_compiler_version", lambda cxx: version)
    assert _build.build(source, "emulator_syntax.cu") == first
    assert not list(first.parent.glob("build-*"))
    with pytest.raises(AssertionError, match="should have been reused"):
        _build.build(source + "\n// changed\n", "emulator_syntax.cu")


def test_cache_keeps_the_most_recently_used_libraries(tmp_path):
    for age in range(5):
        lib = tmp_path / f"k{age}.so"
        lib.write_bytes(b"")
        os.utime(lib, (1000 - age, 1000 - age))
    (tmp_path / "other.txt").write_text("not a library")
    _build._prune(tmp_path, keep=2)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["k0.so", "k1.so", "other.txt"]


def test_find_kernels_reads_signatures():
    text = """
    // extern "C" __global__ void in_comment(int* x) {}
    extern "C" __global__ void k1(const float* __restrict__ x, int, unsigned long long n) { }
    __global__ void cxx_only(int* x) { }
    extern "C" { __global__ void k2(void) { } }
    """
    kernels = _parse.find_kernels(text)
    assert [k.name for k in kernels] == ["k1", "k2"]
    assert kernels[0].param_names == ("x", "arg1", "n")
    assert kernels[0].param_decls == ("const float* __restrict__ x", "int", "unsigned long long n")
    assert kernels[1].param_names == ()


def test_rewrite_shared_forms():
    text = "void f() { __shared__ float a[4], *p; extern __shared__ double d[]; }"
    out = _parse.rewrite_shared(text)
    assert "float (&a)[4] = ::gpurpo_emu::shared_var<float [4]>([]{});" in out
    assert "float *(&p) = ::gpurpo_emu::shared_var<float *>([]{});" in out
    assert "double * const d = ::gpurpo_emu::dynamic_shared<double >();" in out
    with pytest.raises(_parse.SourceError, match="members of a class"):
        _parse.rewrite_shared("struct S { __shared__ int x; };")
    with pytest.raises(_parse.SourceError, match="initializer"):
        _parse.rewrite_shared("void f() { __shared__ int x = 0; }")
    with pytest.raises(_parse.SourceError, match="unsized array"):
        _parse.rewrite_shared("void f() { extern __shared__ int x[4]; }")
