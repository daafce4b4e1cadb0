"""The CUDA tree kernels (``kernels/tree_*.cu``) run through the CPU emulation of CUDA.

Every kernel registered by :mod:`gpurpo.tree.kernels` is launched by its CUDA
wrapper (:mod:`gpurpo.tree._kernels_cuda`) on the ``"emulated"`` backend, which
compiles the very same ``.cu`` sources as C++ and runs each block's threads
concurrently, and is compared with plain NumPy references written here and
with the numba kernel: exact for counts, node indices and split choices,
float32 tolerance for float32 sums. The histogram kernel is also driven
through its slot-tiled, channel-tiled, chunked and global-atomics variants.
Finally whole trees grown with the CUDA kernels equal the CPU backend's.
"""

from __future__ import annotations

import shutil

import numpy as np
import pytest
import scipy.sparse as sp
from _edge_table import ragged
from _packed_trees import random_packed_trees
from _sparse_codes import code_rows
from _split_records import histogram_records, split_records
from _visiting import visited_features

from gpurpo.backend import EMULATED, NUMPY, registered_kernels
from gpurpo.tree import GrowthParams, _random, grow_trees, kernels, traversal
from gpurpo.tree import _kernels_cuda as kcuda
from gpurpo.tree._numba._node_split import RANK_LIMIT, SORT_LIMIT, SUBSET_LIMIT
from gpurpo.tree.binning import BinMapper
from gpurpo.tree.predictor import predict_sum

pytestmark = pytest.mark.skipif(
    shutil.which("g++") is None, reason="the CUDA emulator needs g++ (C++20) on PATH"
)

CUDA_KERNELS = (
    "tree_histograms",
    "tree_node_stats",
    "tree_partition",
    "tree_split_small",
    "tree_score_histograms",
    "tree_grow_subtrees",
    "tree_segment_sums",
    "tree_segment_row_sums",
    "tree_apply",
    "tree_apply_csr",
    "tree_sum_leaves_dense",
    "tree_sum_leaves_csr",
)


def test_cuda_implementations_are_registered():
    reg = registered_kernels()
    for name in CUDA_KERNELS:
        assert set(reg[name]) >= {"cpu", "cuda"}, name


# --------------------------------------------------------------------------
# histograms
# --------------------------------------------------------------------------


def _batch(rng, n=400, p=9, n_bins=17, n_trees=3, m=4, sizes=(0, 5, 40, 150, 3, 60), k=5):
    codes = rng.integers(0, n_bins, size=(p, n)).astype(np.uint8)  # includes the missing bin
    weights = rng.integers(0, 4, size=(n_trees, n)).astype(np.float32)  # zeros included
    targets = rng.normal(size=(n, n_trees, m)).astype(np.float32)
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    sample_indices = np.concatenate(
        [rng.choice(n, size=s, replace=False) for s in sizes]
    ).astype(np.int32)
    node_ranges = np.stack([starts, starts + np.asarray(sizes)], axis=1).astype(np.int64)
    node_features = np.stack([rng.choice(p, size=k, replace=False) for _ in sizes]).astype(np.int32)
    node_features[1, 2] = -1  # unused slot
    node_features[4, :] = -1  # node without features
    node_features[5, -2:] = -1
    node_tree = rng.integers(0, n_trees, size=len(sizes)).astype(np.int32)
    return codes, sample_indices, node_ranges, node_features, node_tree, weights, targets


def _histogram_reference(codes, sample_indices, node_ranges, node_features, node_tree,
                         weights, targets, n_bins, channels):
    n_nodes, k = node_features.shape
    m = targets.shape[2]
    out = np.zeros((n_nodes, k, n_bins, channels))
    for i in range(n_nodes):
        t = node_tree[i]
        s = sample_indices[node_ranges[i, 0]:node_ranges[i, 1]]
        w = weights[t, s].astype(np.float64)
        y = targets[s, t].astype(np.float64)
        for j in range(k):
            f = node_features[i, j]
            if f < 0:
                continue
            b = codes[f, s]
            np.add.at(out[i, j, :, 0], b, w)
            for c in range(m):
                np.add.at(out[i, j, :, 1 + c], b, w * y[:, c])
            if channels == m + 2:
                np.add.at(out[i, j, :, m + 1], b, 1.0)
    return out


def _fixed_point_reference(codes, sample_indices, node_ranges, node_features, node_tree,
                           weights, targets, n_bins, channels):
    """The CUDA histograms' fixed-point sums, in exact integers (NumPy int64 wraps
    like the device's), each cell rounded once: channel c's values v (formed in
    float64) are added as rint(v 2^e_c), e_c = 61 - bitlen(N) - E_c with 2^E_c > B_c,
    B_0 = max|w|, B_{1+c} = max|w| max|y_c|, 1 for the count; N the positions."""
    n_nodes, k = node_features.shape
    m = targets.shape[2]
    wmax = float(np.abs(weights).max(initial=0.0))
    bounds = [wmax] + [wmax * float(np.abs(targets[..., c]).max(initial=0.0))
                       for c in range(m)] + [1.0]
    count_bits = int(len(sample_indices)).bit_length()
    exps = [0 if b == 0 else 61 - count_bits - int(np.frexp(b)[1]) for b in bounds]
    sums = np.zeros((n_nodes, k, n_bins, channels), dtype=np.int64)
    for i in range(n_nodes):
        t = node_tree[i]
        s = sample_indices[node_ranges[i, 0]:node_ranges[i, 1]]
        w = weights[t, s].astype(np.float64)
        values = [w] + [w * targets[s, t, c].astype(np.float64) for c in range(m)]
        values.append(np.ones(len(s)))
        for c in range(channels):
            q = np.rint(np.ldexp(values[c], exps[c])).astype(np.int64)
            for j in range(k):
                if node_features[i, j] >= 0:
                    np.add.at(sums[i, j, :, c], codes[node_features[i, j], s], q)
    return np.ldexp(sums.astype(np.float64), -np.asarray(exps)[:channels]).astype(np.float32)


CELL = kcuda.HIST_CELL_BYTES
# (name, overrides, check of the launch plan that proves the path is taken)
_PLANS = {
    "whole-node": ({}, lambda p, k, C: p["variant"] == "shared" and p["n_slot_tiles"] == 1
                   and p["n_chan_tiles"] == 1 and p["chunks"] == 1),
    "slot-tiles": (lambda B, C: {"shared_mem_bytes": 2 * (CELL * B * C + 4) + 8 * C + 4},
                   lambda p, k, C: p["variant"] == "shared" and p["n_slot_tiles"] == 3
                   and p["n_chan_tiles"] == 1),
    "channel-tiles": (lambda B, C: {"shared_mem_bytes": 2 * (CELL * B + 8) + 8},
                      lambda p, k, C: p["variant"] == "shared" and p["slot_tile"] == 1
                      and p["chan_tile"] == 2 and p["n_chan_tiles"] == (C + 1) // 2),
    "global-atomics": (lambda B, C: {"shared_mem_bytes": CELL * B},
                       lambda p, k, C: p["variant"] == "global"),
    "chunked": (lambda B, C: {"samples_per_block": 16},
                lambda p, k, C: p["variant"] == "shared" and p["chunks"] > 1),
}


@pytest.mark.parametrize("plan_name", list(_PLANS))
@pytest.mark.parametrize("with_count", [False, True])
def test_histograms_match_reference_and_numba(plan_name, with_count):
    rng = np.random.default_rng(1)
    batch = _batch(rng)
    n_bins, k, m = 17, batch[3].shape[1], batch[-1].shape[2]
    channels = m + 2 if with_count else m + 1
    overrides, check = _PLANS[plan_name]
    kwargs = overrides(n_bins, channels) if callable(overrides) else overrides
    plan = kcuda.histogram_launch_plan(
        EMULATED.device_attributes(), len(batch[2]), k, n_bins, channels, len(batch[1]), **kwargs
    )
    assert check(plan, k, channels), plan
    # every cell is written: no zeroing needed
    out = np.full((len(batch[2]), k, n_bins, channels), np.nan, dtype=np.float32)
    kcuda.histograms(EMULATED, *histogram_records(*batch), out, **kwargs)
    ref = _histogram_reference(*batch, n_bins, channels)
    cpu = kernels.build_histograms(NUMPY, *histogram_records(*batch), n_bins, channels)
    # fixed-point sums: the same bits whatever the plan
    np.testing.assert_array_equal(out, _fixed_point_reference(*batch, n_bins, channels))
    # integer weights and counts are exact in float32
    np.testing.assert_array_equal(out[..., 0], ref[..., 0])
    np.testing.assert_array_equal(out[..., 0], cpu[..., 0])
    if with_count:
        np.testing.assert_array_equal(out[..., -1], ref[..., -1])
    np.testing.assert_allclose(out[..., 1:m + 1], ref[..., 1:m + 1], rtol=1e-5, atol=2e-5)
    np.testing.assert_allclose(out, cpu, rtol=1e-5, atol=2e-5)
    assert not out[0].any() and not out[4].any() and not out[1, 2].any()


def test_histograms_opt_in_to_the_shared_memory_of_a_whole_node():
    # 5 slots x 256 bins x 6 channels of 8-byte cells: 61 KB, more than a launch gets
    # without opting in (48 KB on the emulated device, 99 KB with it); the emulator
    # refuses such a launch unless the kernel opted in
    rng = np.random.default_rng(5)
    batch = _batch(rng, n_bins=256, m=4, n=1500, sizes=(0, 700, 40, 500, 3, 250))
    n_bins, k, channels = 256, batch[3].shape[1], 6
    attrs = EMULATED.device_attributes()
    plan = kcuda.histogram_launch_plan(attrs, len(batch[2]), k, n_bins, channels, len(batch[1]))
    assert plan["variant"] == "shared" and plan["n_slot_tiles"] == 1
    assert attrs["max_shared_memory_per_block"] < plan["shared_mem"]
    assert plan["shared_mem"] <= attrs["max_shared_memory_per_block_optin"]
    # twice the default shared memory: blocks twice as wide
    assert plan["block"] == 2 * kcuda.HIST_BLOCK
    ref = _histogram_reference(*batch, n_bins, channels)
    without = {"shared_mem_bytes": attrs["max_shared_memory_per_block"]}
    tiled = kcuda.histogram_launch_plan(attrs, len(batch[2]), k, n_bins, channels,
                                        len(batch[1]), **without)
    # the tiles of the 5 slots are balanced: 3 and 2, not 4 and 1
    assert tiled["n_slot_tiles"] == 2 and tiled["slot_tile"] == 3
    assert tiled["block"] == kcuda.HIST_BLOCK
    fixed = _fixed_point_reference(*batch, n_bins, channels)
    for kwargs in ({}, without):
        out = np.zeros((len(batch[2]), k, n_bins, channels), dtype=np.float32)
        kcuda.histograms(EMULATED, *histogram_records(*batch), out, **kwargs)
        np.testing.assert_array_equal(out, fixed)
        np.testing.assert_array_equal(out[..., 0], ref[..., 0])
        np.testing.assert_array_equal(out[..., -1], ref[..., -1])
        np.testing.assert_allclose(out, ref, rtol=1e-5, atol=2e-5)


def test_histogram_blocks_per_multiprocessor_follow_their_shared_memory():
    attrs = dict(EMULATED.device_attributes(), multiprocessor_count=1,
                 max_shared_memory_per_multiprocessor=100 * 1024)
    # one node of 2^20 samples: as many chunks as fill two waves of resident blocks
    small = kcuda.histogram_launch_plan(attrs, 1, 1, 16, 2, 1 << 20)
    large = kcuda.histogram_launch_plan(attrs, 1, 1, 256, 30, 1 << 20)
    assert small["block"] == kcuda.HIST_BLOCK and small["chunks"] == 2 * 2048 // small["block"]
    # 61 KB a block: one block of 512 threads resident per multiprocessor
    assert large["block"] == 512 and large["chunks"] == 2


def test_histograms_with_more_channels_than_threads(monkeypatch):
    # the shared-memory kernel's fallback: threads take channels, not samples
    monkeypatch.setattr(kcuda, "HIST_BLOCK", 32)
    rng = np.random.default_rng(3)
    batch = _batch(rng, m=40, k=3, n_bins=5)
    channels = 42
    plan = kcuda.histogram_launch_plan(EMULATED.device_attributes(), len(batch[2]), 3, 5,
                                       channels, len(batch[1]))
    assert plan["variant"] == "shared" and plan["block"] == 32 and plan["chan_tile"] > 32
    out = np.zeros((len(batch[2]), 3, 5, channels), dtype=np.float32)
    kcuda.histograms(EMULATED, *histogram_records(*batch), out)
    ref = _histogram_reference(*batch, 5, channels)
    np.testing.assert_array_equal(out, _fixed_point_reference(*batch, 5, channels))
    np.testing.assert_array_equal(out[..., 0], ref[..., 0])
    np.testing.assert_array_equal(out[..., -1], ref[..., -1])
    np.testing.assert_allclose(out, ref, rtol=1e-5, atol=2e-5)


@pytest.mark.parametrize("plan_name", ["whole-node", "chunked", "global-atomics"])
def test_fixed_point_histograms_of_extreme_values(plan_name):
    # channels of 1e30 and 1e-30, an all-zero channel, a channel of one huge outlier among
    # small values, fractional weights up to 1e4 and a channel group per 256 channels
    # of the bounds kernel (300 channels): exact integer sums, no overflow
    rng = np.random.default_rng(11)
    batch = list(_batch(rng, n=2500, m=300, k=3, n_bins=5, sizes=(0, 300, 7, 2000, 3, 60)))
    weights = rng.uniform(0, 1e4, size=batch[5].shape).astype(np.float32)
    targets = rng.normal(size=batch[6].shape).astype(np.float32)
    targets[..., 0] *= 1e30
    targets[..., 1] *= 1e-30
    targets[..., 2] = 0.0
    targets[3, :, 3] = 1e33
    batch[5], batch[6] = weights, targets
    channels = 302
    overrides, check = _PLANS[plan_name]
    kwargs = overrides(5, channels) if callable(overrides) else overrides
    plan = kcuda.histogram_launch_plan(EMULATED.device_attributes(), len(batch[2]), 3, 5,
                                       channels, len(batch[1]), **kwargs)
    assert check(plan, 3, channels), plan
    out = np.zeros((len(batch[2]), 3, 5, channels), dtype=np.float32)
    kcuda.histograms(EMULATED, *histogram_records(*batch), out, **kwargs)
    np.testing.assert_array_equal(out, _fixed_point_reference(*batch, 5, channels))
    ref = _histogram_reference(*batch, 5, channels)
    # channel 1 + c holds target c
    assert np.isfinite(out).all() and not out[..., 3].any() and out[..., 4].any()
    np.testing.assert_allclose(out[..., :4], ref[..., :4], rtol=1e-5)
    # the outlier's channel keeps an absolute precision of 2^-e_c a value: the values
    # 1e29 times smaller than the outlier are lost to its scale, within that bound
    bound = float(weights.max()) * 1e33
    quantum = 2.0 ** (np.frexp(bound)[1] - 61 + len(batch[1]).bit_length())
    err = np.abs(out[..., 4].astype(np.float64) - ref[..., 4])
    assert (err <= ref[..., -1] * quantum / 2 + 1e-6 * np.abs(ref[..., 4])).all()
    assert (np.abs(out[..., 4]) < quantum).any()
    np.testing.assert_array_equal(out[..., -1], ref[..., -1])


def test_histograms_through_the_dispatch():
    rng = np.random.default_rng(2)
    batch = _batch(rng, n_bins=256, m=2, k=3)
    got = kernels.build_histograms(EMULATED, *histogram_records(*batch), 256, 3)
    ref = _histogram_reference(*batch, 256, 3)
    assert got.dtype == np.float32 and got.shape == ref.shape
    np.testing.assert_array_equal(got[..., 0], ref[..., 0])
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=2e-5)


# --------------------------------------------------------------------------
# exact split of small nodes
# --------------------------------------------------------------------------


def _seed_order(seed, p):
    """The node's visiting order of all p features: ``feature_at(seed, 0..p-1)``."""
    return _random.feature_at(np.full(p, seed, dtype=np.uint64), np.arange(p), p)


def _split_reference(codes, samples, w, y, features, msl, missing_bin, tie_rtol):
    """Brute force over features, bins and missing side (float64), rules of the contract."""
    none = (-1, 0, 0, -np.inf)
    if len(samples) < max(2, 2 * msl) or (y == y[0]).all():
        return none
    W, S, Q = w.sum(), w @ y, (w[:, None] * y * y).sum()
    parent = S @ S / W
    cands = []
    for f in features:
        c = codes[f, samples].astype(np.int64)
        if (c == c[0]).all():
            continue
        miss = c == missing_bin
        best = None
        for b in np.unique(c[~miss]):
            for ml in (0, 1) if miss.any() else (0,):
                left = ((c <= b) & ~miss) | (miss & bool(ml))
                nl = int(left.sum())
                if nl < msl or len(samples) - nl < msl or (not miss.any() and nl == len(samples)):
                    continue
                WL = w[left].sum()
                SL = w[left] @ y[left]
                g = SL @ SL / WL + (S - SL) @ (S - SL) / (W - WL) - parent
                if best is None or g > best[3]:
                    side = ml if miss.any() else int(WL >= W - WL)
                    best = (int(f), int(b), side, g)
        if best is not None:
            cands.append(best)
    if not cands:
        return none
    gmax = max(cand[3] for cand in cands)
    # ties: gains within tie_rtol of the node's impurity (plus the rounding of sums of size
    # Q); the first feature in the visiting order (the order of ``features``) wins
    return next(cand for cand in cands if cand[3] >= gmax - tie_rtol * (Q - parent) - 1e-12 * Q)


def _split_problem(rng, sizes, p=7, n_bins=12, n_trees=2, m=3, missing=0.15, integer=False):
    n = max(400, int(np.sum(sizes)))
    codes = rng.integers(0, n_bins - 1, size=(p, n)).astype(np.uint8)
    codes[rng.random((p, n)) < missing] = n_bins - 1
    codes[3] = 2  # a constant feature
    codes[5, rng.random(n) < 0.5] = n_bins - 1  # many missing values
    if integer:
        weights = rng.integers(1, 3, size=(n_trees, n)).astype(np.float32)
        targets = rng.integers(0, 2, size=(n, n_trees, m)).astype(np.float32)
    else:
        weights = rng.uniform(0.5, 2.0, size=(n_trees, n)).astype(np.float32)
        targets = rng.normal(size=(n, n_trees, m)).astype(np.float32)
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    perm = rng.permutation(n)
    sample_indices = np.concatenate(
        [perm[rng.choice(n, size=s, replace=False)] for s in sizes]
    ).astype(np.int32)
    node_ranges = np.stack([starts, starts + np.asarray(sizes)], axis=1).astype(np.int64)
    node_tree = rng.integers(0, n_trees, size=len(sizes)).astype(np.int32)
    seeds = rng.integers(0, 2**64 - 1, size=len(sizes), dtype=np.uint64, endpoint=True)
    thresholds = np.cumsum(rng.uniform(0.1, 1.0, size=(p, n_bins - 1)), axis=1)
    thresholds[:, -1] = np.inf
    # features of fewer value bins (their codes and edges): the ragged edge table
    for f, width in ((1, 3), (4, 6)):
        if f < p and f != 3:
            values = codes[f] != n_bins - 1
            codes[f, values] %= width + 1
            thresholds[f, width:] = np.inf
    # a pure node: identical targets
    s_pure = sample_indices[node_ranges[-1, 0]:node_ranges[-1, 1]]
    targets[s_pure] = targets[s_pure[0]]
    return (codes, sample_indices, node_ranges, node_tree, seeds, weights, targets,
            *ragged(thresholds))


def _make_sparse_like(rng, codes, share, n_bins):
    """Set a ``share`` of each feature's codes (in place) to one value; returns those values."""
    dominant = rng.integers(0, n_bins - 1, size=codes.shape[0])
    sparse = rng.random(codes.shape) < share
    codes[sparse] = np.broadcast_to(dominant[:, None], codes.shape)[sparse]
    return dominant


SIZES = (0, 1, 2, 3, 7, RANK_LIMIT, RANK_LIMIT + 1, SORT_LIMIT, SORT_LIMIT + 1, 90,
         257, 12)


@pytest.mark.parametrize(
    "msl, random_split, k, integer",
    [(1, False, 7, False), (3, False, 7, True), (1, False, 3, False), (2, True, 7, False),
     (1, True, 2, True)],
)
def test_split_small_matches_numba(msl, random_split, k, integer):
    rng = np.random.default_rng(10 * msl + k + 100 * random_split + 1000 * integer)
    problem = _split_problem(rng, SIZES, integer=integer)
    n_bins = 12
    args = problem + (k, msl, random_split, n_bins - 1, 1e-5)
    f_gpu, b_gpu, ml_gpu, g_gpu = kernels.split_small(EMULATED, *split_records(*args))
    f_cpu, b_cpu, ml_cpu, g_cpu = kernels.split_small(NUMPY, *split_records(*args))
    np.testing.assert_array_equal(f_gpu, f_cpu)
    np.testing.assert_array_equal(b_gpu, b_cpu)
    np.testing.assert_array_equal(ml_gpu, ml_cpu)
    np.testing.assert_allclose(g_gpu, g_cpu, rtol=1e-12, atol=0)
    assert list(f_gpu[:2]) == [-1, -1] and f_gpu[-1] == -1  # 0 and 1 sample, pure node
    assert (f_gpu[2:-1] >= 0).any()
    codes, sample_indices, node_ranges = problem[:3]
    for i in np.flatnonzero(f_gpu >= 0):
        c = codes[f_gpu[i], sample_indices[node_ranges[i, 0]:node_ranges[i, 1]]]
        present = c[c != n_bins - 1]
        assert f_gpu[i] != 3 and present.min() <= b_gpu[i] <= present.max()


@pytest.mark.parametrize("integer, m", [(False, 3), (True, 3), (False, 9)])
def test_three_sample_nodes_stop_early_with_the_result_of_every_candidate(integer, m):
    """The CPU stops a node of three samples once the tie rule's pick reaches the bound of
    its three partitions' gains; the CUDA kernel evaluates every candidate: same splits,
    same bits (integer targets make exact ties between features; missing values on either
    side)."""
    rng = np.random.default_rng(31 + 7 * integer + m)
    problem = _split_problem(rng, (3,) * 120, p=40, m=m, integer=integer)
    args = problem + (12, 1, False, 11, 1e-5)
    f_gpu, b_gpu, ml_gpu, g_gpu = kernels.split_small(EMULATED, *split_records(*args))
    f_cpu, b_cpu, ml_cpu, g_cpu = kernels.split_small(NUMPY, *split_records(*args))
    assert (f_cpu >= 0).sum() > 100
    np.testing.assert_array_equal(f_gpu, f_cpu)
    np.testing.assert_array_equal(b_gpu, b_cpu)
    np.testing.assert_array_equal(ml_gpu, ml_cpu)
    np.testing.assert_array_equal(g_gpu, g_cpu)


@pytest.mark.parametrize("integer, m, msl", [(False, 3, 1), (True, 3, 1), (True, 7, 2),
                                             (False, 9, 2)])
def test_small_nodes_stop_at_the_partition_bound_with_the_result_of_every_candidate(
        integer, m, msl):
    """Nodes of 4 to SUBSET_LIMIT samples (3: the test above) stop their feature loop on the
    CPU once the tie rule's pick reaches the bound of every partition's gain; the CUDA
    kernel evaluates every candidate: same splits, same bits. Integer targets make exact
    ties between features, missing values put samples on either side, and nodes one sample
    above the limit take the ordinary loop."""
    rng = np.random.default_rng(53 + 7 * integer + m + 100 * msl)
    sizes = tuple(range(4, SUBSET_LIMIT + 2)) * 40
    problem = _split_problem(rng, sizes, p=40, m=m, integer=integer)
    args = problem + (12, msl, False, 11, 1e-5)
    f_gpu, b_gpu, ml_gpu, g_gpu = kernels.split_small(EMULATED, *split_records(*args))
    f_cpu, b_cpu, ml_cpu, g_cpu = kernels.split_small(NUMPY, *split_records(*args))
    assert (f_cpu >= 0).sum() > 0.9 * len(sizes)
    np.testing.assert_array_equal(f_gpu, f_cpu)
    np.testing.assert_array_equal(b_gpu, b_cpu)
    np.testing.assert_array_equal(ml_gpu, ml_cpu)
    np.testing.assert_array_equal(g_gpu, g_cpu)


@pytest.mark.parametrize("ns, msl", [(3, 1), (4, 1), (5, 2), (SUBSET_LIMIT, 1),
                                     (SUBSET_LIMIT, 3)])
def test_largest_partition_gain_matches_brute_force_and_bounds_the_scans(ns, msl):
    """The bound is the largest variance reduction over every two-sided partition of the
    node that keeps min_samples_leaf samples per side (NumPy, all subsets), and no
    feature's best split of those samples exceeds it."""
    from gpurpo.tree._numba._node_split import _largest_partition_gain

    rng = np.random.default_rng(ns + 10 * msl)
    m, mp = 5, 8
    w = rng.integers(1, 4, size=ns).astype(np.float64)
    y = np.zeros((ns, mp))
    y[:, :m] = rng.normal(size=(ns, m)).astype(np.float32)
    wy = w[:, None] * y
    S = wy.sum(axis=0)
    W = w.sum()
    parent = float(S[:m] @ S[:m]) / W
    rows = rng.permutation(ns).astype(np.int32)
    got = _largest_partition_gain(rows, 0, ns, w, wy, W, S, m, parent, msl, np.empty(mp))
    want = -np.inf
    for mask in range(1, 2**ns - 1):
        left = np.array([(mask >> i) & 1 for i in range(ns)], dtype=bool)
        if msl <= left.sum() <= ns - msl:
            L = wy[left, :m].sum(axis=0)
            R = S[:m] - L
            WL = w[left].sum()
            want = max(want, L @ L / WL + R @ R / (W - WL) - parent)
    np.testing.assert_allclose(got, want, rtol=1e-12)
    # every feature's best split of these samples stays below the bound (+ rounding)
    for _ in range(20):
        codes = rng.integers(0, 5, size=ns)
        order = np.argsort(codes, kind="stable")
        for a in range(msl - 1, ns - msl):
            if codes[order[a]] == codes[order[a + 1]]:
                continue
            left = order[: a + 1]
            L = wy[left, :m].sum(axis=0)
            R = S[:m] - L
            WL = w[left].sum()
            assert L @ L / WL + R @ R / (W - WL) - parent <= got + 1e-12 * abs(got)


@pytest.mark.parametrize("random_split", [False, True])
def test_split_small_matches_numba_with_256_bins(random_split):
    # the bin scan spans all 256 bins (the missing bin last) and several sort chunks
    rng = np.random.default_rng(77 + random_split)
    n_bins = 256
    _assert_split_small_matches_numba(_split_problem(rng, SIZES, n_bins=n_bins), random_split,
                                      n_bins - 1)


@pytest.mark.parametrize("first", ["dominant", "missing", "rare"])
@pytest.mark.parametrize("random_split", [False, True])
def test_split_small_matches_numba_on_sparse_like_features(first, random_split):
    # nodes above SORT_LIMIT whose features are mostly one code (the zero of a sparse
    # input): the CPU sums the bin of the node's first sample in registers; the first
    # sample holds the dominant code, the missing bin, or a rare code
    rng = np.random.default_rng(500 + random_split + 10 * len(first))
    n_bins = 12
    sizes = (SORT_LIMIT + 40, 600, 300, 5)
    problem = list(_split_problem(rng, sizes, p=9, n_bins=n_bins))
    codes, sample_indices, node_ranges = problem[0], problem[1], problem[2]
    dominant = _make_sparse_like(rng, codes, 0.9, n_bins)
    for start, stop in node_ranges[:3]:
        s0 = sample_indices[start]
        if first == "dominant":
            codes[:, s0] = dominant
        elif first == "missing":
            codes[:, s0] = n_bins - 1
        else:
            codes[:, s0] = (dominant + 1) % (n_bins - 1)
    args = tuple(problem) + (5, 1, random_split, n_bins - 1, 1e-5)
    got = kernels.split_small(EMULATED, *split_records(*args))
    want = kernels.split_small(NUMPY, *split_records(*args))
    for g, w in zip(got[:3], want[:3]):
        np.testing.assert_array_equal(g, w)
    np.testing.assert_array_equal(got[3], want[3])  # same bits
    assert (want[0][:3] >= 0).all() and want[0][3] == -1  # the large nodes split; pure last


@pytest.mark.parametrize("random_split", [False, True])
@pytest.mark.parametrize("m", [3, 9])
def test_split_small_with_subtracted_bins_matches_numba_and_the_reference(random_split, m):
    # nodes above SORT_LIMIT derive the sums of each feature's subtracted bin (here its
    # dominant code, except for two features) from their totals; the CPU reads the
    # features' stored-entry columns when the nodes' rows increase: the same bits
    rng = np.random.default_rng(700 + random_split + m)
    n_bins = 12
    sizes = (SORT_LIMIT + 40, 900, 300, 5)
    problem = list(_split_problem(rng, sizes, p=9, n_bins=n_bins, m=m))
    codes, sample_indices, node_ranges = problem[0], problem[1], problem[2]
    dominant = _make_sparse_like(rng, codes, 0.9, n_bins).astype(np.uint8)
    codes[2, rng.random(codes.shape[1]) < 0.3] = n_bins - 1  # the dominant code and missing
    subtracted = dominant.astype(np.int32)
    subtracted[[0, 4]] = -1
    for start, stop in node_ranges:  # increasing rows within each node
        sample_indices[start:stop] = np.sort(sample_indices[start:stop])
    stored = code_rows(codes, dominant)
    args = tuple(problem) + (5, 1, random_split, n_bins - 1, 1e-5)
    want = kernels.split_small(NUMPY, *split_records(*args), sparse=kernels.SparseColumns(subtracted))
    for backend, columns in ((NUMPY, stored), (EMULATED, None), (EMULATED, stored)):
        got = kernels.split_small(backend, *split_records(*args),
                                  sparse=kernels.SparseColumns(subtracted, columns))
        for g, w in zip(got, want):
            np.testing.assert_array_equal(g, w)  # same bits
    assert (want[0][:3] >= 0).all() and want[0][3] == -1  # the large nodes split; pure last
    if not random_split:
        # the same split as without subtraction, up to rounding (brute force over the
        # visited features)
        plain = kernels.split_small(NUMPY, *split_records(*args))
        np.testing.assert_array_equal(want[0], plain[0])
        np.testing.assert_array_equal(want[1], plain[1])
        np.testing.assert_allclose(want[3], plain[3], rtol=1e-9)
    # a node whose rows do not increase is read from the codes, with the same sums
    shuffled = [a.copy() for a in problem]
    shuffled[1][node_ranges[1, 0]:node_ranges[1, 1]] = rng.permutation(
        sample_indices[node_ranges[1, 0]:node_ranges[1, 1]])
    args = tuple(shuffled) + (5, 1, random_split, n_bins - 1, 1e-5)
    got = kernels.split_small(NUMPY, *split_records(*args),
                              sparse=kernels.SparseColumns(subtracted, stored))
    emulated = kernels.split_small(EMULATED, *split_records(*args),
                                   sparse=kernels.SparseColumns(subtracted))
    for g, e in zip(got, emulated):
        np.testing.assert_array_equal(g, e)


@pytest.mark.parametrize("random_split", [False, True])
def test_growth_on_sparse_x_with_subtracted_bins_equals_dense_and_emulated(random_split):
    # nodes of 65 to 4096 samples through the per-node kernel (most features mostly zero:
    # their zero bins are subtracted), smaller ones through subtrees; dense X, sparse X
    # (stored-entry columns and rows) and emulated CUDA grow the same trees
    rng = np.random.default_rng(41 + random_split)
    n, p, m, T = 1500, 40, 3, 2
    dense = np.where(rng.random((n, p)) < 0.1, rng.normal(size=(n, p)), 0.0)
    dense[:, :3] = rng.normal(size=(n, 3))  # three dense features: no subtracted bin
    dense[rng.random((n, p)) < 0.02] = np.nan
    targets = (np.nan_to_num(dense[:, :6]) @ rng.normal(size=(6, T * m))).reshape(n, T, m)
    targets = (targets + 0.3 * rng.normal(size=targets.shape)).astype(np.float32)
    weights = rng.multinomial(n, np.full(n, 1.0 / n), size=T).astype(np.float32)
    mapper = BinMapper(max_bins=32).fit(dense)
    params = GrowthParams(n_candidates=12, small_node_size=4096, subtree_size=64,
                          splitter="random" if random_split else "best")
    out = {}
    for name, backend, X in (("dense", NUMPY, dense), ("sparse", NUMPY, sp.csr_matrix(dense)),
                             ("emulated", EMULATED, sp.csr_matrix(dense))):
        binned = mapper.transform(X, backend)
        if name == "dense":
            subtracted = np.asarray(binned.subtracted_bin)
            assert (subtracted[:3] == -1).all() and (subtracted[3:] >= 0).all()
        else:
            assert binned.sparse_codes is not None
        out[name] = grow_trees(binned, targets, weights, params, np.random.default_rng(3),
                               backend)
    for name in ("sparse", "emulated"):
        _structures_equal(out["dense"].structures, out[name].structures)
        _leaves_equal(out["dense"].structures, out["dense"].leaf_of_sample,
                      out[name].structures, out[name].leaf_of_sample)
    assert sum(s.node_count for s in out["dense"].structures) > 2 * 200


@pytest.mark.parametrize("m, random_split", [(8, False), (11, False), (11, True)])
def test_split_small_matches_numba_with_wide_targets(m, random_split):
    # m = 8 fills the CPU's scalar scan of 8 channels; m = 11 pads to 16 channels and
    # takes the CPU's array scan, both with missing values
    rng = np.random.default_rng(300 + m + random_split)
    _assert_split_small_matches_numba(_split_problem(rng, SIZES, m=m), random_split, 11)


def _assert_split_small_matches_numba(problem, random_split, missing_bin):
    # k = 5 candidates, min_samples_leaf 1; most nodes of SIZES split
    args = problem + (5, 1, random_split, missing_bin, 1e-5)
    got = kernels.split_small(EMULATED, *split_records(*args))
    want = kernels.split_small(NUMPY, *split_records(*args))
    for g, w in zip(got[:3], want[:3]):
        np.testing.assert_array_equal(g, w)
    np.testing.assert_allclose(got[3], want[3], rtol=1e-12, atol=0)
    assert (got[0] >= 0).sum() >= len(SIZES) - 4


@pytest.mark.parametrize("msl", [1, 3])
def test_split_small_matches_brute_force(msl):
    rng = np.random.default_rng(20 + msl)
    problem = _split_problem(rng, SIZES, p=6, m=2)
    (codes, sample_indices, node_ranges, node_tree, seeds, weights, targets, edge_values,
     edge_ptr) = problem
    f, b, ml, g = kernels.split_small(EMULATED, *split_records(*problem, 6, msl, False, 11, 1e-5))
    for i in range(len(SIZES)):
        s = sample_indices[node_ranges[i, 0]:node_ranges[i, 1]]
        t = node_tree[i]
        ref = _split_reference(codes, s, weights[t, s].astype(np.float64),
                               targets[s, t].astype(np.float64), _seed_order(seeds[i], 6), msl, 11, 1e-5)
        assert (f[i], b[i], ml[i]) == ref[:3], (i, f[i], b[i], ml[i], ref)
        np.testing.assert_allclose(g[i], ref[3], rtol=1e-9)


@pytest.mark.parametrize("msl, m", [(1, 3), (3, 3), (1, 7), (2, 11)])
def test_split_small_without_missing_values_matches_numba_and_brute_force(msl, m):
    # without missing values; nodes above RANK_LIMIT samples take the CPU's bucket sort
    rng = np.random.default_rng(40 + msl + m)
    problem = list(_split_problem(rng, SIZES, p=6, m=m, missing=0.0))
    problem[0][5] = rng.integers(0, 11, size=problem[0].shape[1])  # no missing feature
    assert RANK_LIMIT + 1 < SORT_LIMIT
    (codes, sample_indices, node_ranges, node_tree, seeds, weights, targets, edge_values,
     edge_ptr) = problem
    args = tuple(problem) + (6, msl, False, 11, 1e-5)
    got = kernels.split_small(EMULATED, *split_records(*args))
    want = kernels.split_small(NUMPY, *split_records(*args))
    for g, w in zip(got[:3], want[:3]):
        np.testing.assert_array_equal(g, w)
    np.testing.assert_allclose(got[3], want[3], rtol=1e-12, atol=0)
    for i in range(len(SIZES)):
        s = sample_indices[node_ranges[i, 0]:node_ranges[i, 1]]
        t = node_tree[i]
        ref = _split_reference(codes, s, weights[t, s].astype(np.float64),
                               targets[s, t].astype(np.float64), _seed_order(seeds[i], 6), msl, 11, 1e-5)
        assert (want[0][i], want[1][i], want[2][i]) == ref[:3], (i, ref)
        np.testing.assert_allclose(want[3][i], ref[3], rtol=1e-9)
    # every node large enough for two leaves splits, except the pure one (the last)
    assert (want[0] >= 0).sum() == sum(n >= max(2, 2 * msl) for n in SIZES[:-1])


@pytest.mark.parametrize("p, n_constant", [(12, 6), (32, 16), (33, 16), (70, 35), (70, 66)])
def test_split_small_visits_features_in_the_seed_order(p, n_constant):
    # k = 2 of p features, many of them constant in the nodes: the evaluated features are
    # the non-constant ones among the first 2 of feature_at(seed, .) (a sorted hash order
    # up to 32 features, a Feistel network above), or the first non-constant one after
    # them when both are constant
    rng = np.random.default_rng(5 + p)
    n_bins = 8
    problem = list(_split_problem(rng, (40, 40, 40, 5), p=p, n_bins=n_bins, missing=0.0))
    codes = problem[0]
    codes[rng.choice(p, size=n_constant, replace=False)] = 1
    records = split_records(*problem, 2, 1, False, n_bins - 1, 1e-5)
    f, b, ml, g = kernels.split_small(EMULATED, *records)
    cpu = kernels.split_small(NUMPY, *records)
    for got, want in zip((f, b, ml, g), cpu):
        np.testing.assert_array_equal(got, want)
    codes, sample_indices, node_ranges, node_tree, seeds, weights, targets = problem[:7]
    all_constant = 0
    for i in range(3):
        s = sample_indices[node_ranges[i, 0]:node_ranges[i, 1]]
        order = _random.feature_at(np.full(p, seeds[i]), np.arange(p), p)
        varies = lambda q: len(np.unique(codes[q, s])) > 1  # noqa: E731
        visited = visited_features(order, varies, 2)
        all_constant += not any(varies(q) for q in order[:2])
        t = node_tree[i]
        ref = _split_reference(codes, s, weights[t, s].astype(np.float64),
                               targets[s, t].astype(np.float64), visited, 1, n_bins - 1, 1e-5)
        assert (f[i], b[i], ml[i]) == ref[:3]
    if n_constant > 60:
        assert all_constant > 0  # the draw beyond the first k is exercised


# --------------------------------------------------------------------------
# leaves, traversal, prediction sums
# --------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("n, d, n_leaves", [(300, 12, 6), (120, 30, 150)])
def test_accumulate_leaves(dtype, n, d, n_leaves):
    # (300, 12, 6): few large leaves; (120, 30, 150): leaves of a sample or none. The sums
    # add each leaf's samples in increasing order on every backend: the loop's bits
    rng = np.random.default_rng(n + d)
    leaf = rng.integers(-1, n_leaves, size=n).astype(np.int32)
    w = rng.uniform(0, 2, size=n)
    Y = ((rng.random((n, d)) < 0.3) * rng.normal(size=(n, d))).astype(dtype)
    Y[3] = 0  # CSR row without entries
    ref = np.zeros((n_leaves, d))
    for i in range(n):
        if leaf[i] >= 0:
            ref[leaf[i]] += w[i] * Y[i].astype(np.float64)
    for backend in (NUMPY, EMULATED):
        dense = kernels.accumulate_leaves_dense(backend, leaf, w, Y, n_leaves)
        csr = kernels.accumulate_leaves_csr(backend, leaf, w, sp.csr_matrix(Y), n_leaves)
        for got in (dense, csr):
            assert got.dtype == np.float64 and got.shape == (n_leaves, d)
            np.testing.assert_array_equal(np.asarray(got), ref)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_apply_matches_python_traversal(dtype):
    rng = np.random.default_rng(3)
    trees = random_packed_trees(rng)
    feature, threshold, missing, left, right, roots = trees
    X = rng.normal(size=(90, 5)).astype(dtype)
    X[rng.random(X.shape) < 0.2] = np.nan
    got = traversal.apply_trees(EMULATED, X, *trees)
    assert got.dtype == np.int32 and got.shape == (90, len(roots))
    np.testing.assert_array_equal(got, traversal.apply_trees(NUMPY, X, *trees))
    for i in range(X.shape[0]):
        for t, node in enumerate(roots):
            while feature[node] >= 0:
                x = float(X[i, feature[node]])
                go_left = bool(missing[node]) if np.isnan(x) else x <= threshold[node]
                node = left[node] if go_left else right[node]
            assert got[i, t] == node


def _sparse_rows(rng, n, p, dtype):
    """A CSR X of ``dtype`` and its dense values: stored NaN, explicit zeros, an empty
    row, column indices unsorted within rows, and values split into two duplicate
    entries (which a CSR matrix sums)."""
    dense = np.where(rng.random((n, p)) < 0.4, rng.normal(size=(n, p)), 0.0).astype(dtype)
    dense[rng.random((n, p)) < 0.05] = np.nan
    dense[3] = 0.0
    r, c = np.nonzero(dense != 0)  # NaN included
    v = dense[r, c]
    split = ~np.isnan(v) & (rng.random(v.size) < 0.2)
    zr, zc = np.nonzero(dense == 0)
    zeros = rng.choice(zr.size, size=10, replace=False)
    r = np.concatenate([r, r[split], zr[zeros]])
    c = np.concatenate([c, c[split], zc[zeros]])
    v = np.concatenate([np.where(split, v / 2, v), v[split] / 2, np.zeros(10, dtype)])
    order = rng.permutation(r.size)
    order = order[np.argsort(r[order], kind="stable")]
    indptr = np.concatenate([[0], np.cumsum(np.bincount(r, minlength=n))])
    X = sp.csr_matrix((v[order], c[order], indptr), shape=(n, p))
    assert not X.has_sorted_indices
    return X, dense


@pytest.mark.parametrize("decimals", [None, 0], ids=["thresholds", "whole thresholds"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_apply_on_sparse_rows_matches_the_densified_rows(dtype, decimals):
    # tree_apply_csr finds each node's value among the row's stored entries (0.0 when
    # absent): the leaves of tree_apply on the densified X, on both kernels; whole
    # thresholds include 0.0 and -0.0, which an absent value and a stored zero equal
    rng = np.random.default_rng(13)
    trees = random_packed_trees(rng, n_trees=6, p=7, decimals=decimals)
    if decimals is not None:
        assert (trees[1] == 0.0).any() and (trees[1] < 0).any() and (trees[1] > 0).any()
    X, dense = _sparse_rows(rng, 83, 7, dtype)  # a last group of 3 rows (APPLY_LANES)
    want = traversal.apply_trees(NUMPY, dense, *trees)
    for backend in (NUMPY, EMULATED):
        got = traversal.apply_trees(backend, X, *trees)
        assert got.dtype == np.int32 and got.shape == want.shape
        np.testing.assert_array_equal(got, want, err_msg=backend.name)
    assert traversal.apply_trees(EMULATED, X[:0], *trees).shape == (0, 6)


@pytest.mark.parametrize("stored_columns", [0, 3, 64, 200], ids=lambda c: f"stored<{c}")
def test_apply_on_sparse_rows_with_features_beyond_the_stored_columns(stored_columns):
    # X has 200 columns (four 64-bit words of the kernel's row bitmaps), but its rows
    # store entries in the first ``stored_columns`` only, while the trees split on
    # all 200: the nodes past the stored columns see 0.0, on both kernels
    rng = np.random.default_rng(stored_columns)
    trees = random_packed_trees(rng, n_trees=8, p=200, max_splits=40, decimals=0)
    dense = np.zeros((21, 200))
    if stored_columns:
        block = rng.normal(size=(21, stored_columns))
        dense[:, :stored_columns] = np.where(rng.random(block.shape) < 0.5, block, 0.0)
    X = sp.csr_matrix(dense)
    want = traversal.apply_trees(NUMPY, dense, *trees)
    for x in range(dense.shape[0]):  # the walk, by hand
        for t, node in enumerate(trees[5]):
            while trees[0][node] >= 0:
                go_left = dense[x, trees[0][node]] <= trees[1][node]
                node = trees[3][node] if go_left else trees[4][node]
            assert want[x, t] == node
    for backend in (NUMPY, EMULATED):
        np.testing.assert_array_equal(traversal.apply_trees(backend, X, *trees), want,
                                      err_msg=backend.name)


def test_sum_leaves_dense_and_csr():
    rng = np.random.default_rng(4)
    n, n_trees, n_leaves, d = 50, 4, 25, 33
    rows = rng.integers(-1, n_leaves, size=(n, n_trees)).astype(np.int32)
    values = (rng.random((n_leaves, d)) < 0.2) * rng.normal(size=(n_leaves, d))
    values[[2, 7]] = 0  # leaves without stored entries
    rows[:, 0] = 2
    ref = np.zeros((n, d))
    for i in range(n):
        for t in range(n_trees):
            if rows[i, t] >= 0:
                ref[i] += values[rows[i, t]]
    start = rng.normal(size=(n, d))
    dense = start.copy()
    traversal.sum_leaves_dense(EMULATED, rows, values, dense)
    cpu = start.copy()
    traversal.sum_leaves_dense(NUMPY, rows, values, cpu)
    np.testing.assert_array_equal(dense, cpu)  # same additions in the same order
    np.testing.assert_allclose(dense, start + ref, rtol=1e-12, atol=1e-12)
    csr = start.copy()
    traversal.sum_leaves_csr(EMULATED, rows, sp.csr_matrix(values), csr)
    cpu = start.copy()
    traversal.sum_leaves_csr(NUMPY, rows, sp.csr_matrix(values), cpu)
    np.testing.assert_array_equal(csr, cpu)  # a row's trees added in order, no atomics
    np.testing.assert_allclose(csr, start + ref, rtol=1e-12, atol=1e-12)
    view = np.zeros((d, n)).T  # a non-contiguous output is filled too
    traversal.sum_leaves_dense(EMULATED, rows, values, view)
    np.testing.assert_allclose(view, ref, rtol=1e-12, atol=1e-12)


# --------------------------------------------------------------------------
# whole trees through the CUDA kernels
# --------------------------------------------------------------------------


def _canonical(tree, node=0):
    """Nested (feature, threshold, missing side, left, right) of a subtree: independent of
    the order in which nodes were numbered (level-wise or depth-first growth)."""
    f = int(tree.feature[node])
    if f < 0:
        return (int(tree.n_node_samples[node]),)
    return (f, float(tree.threshold[node]), int(tree.missing_go_left[node]),
            _canonical(tree, tree.children_left[node]), _canonical(tree, tree.children_right[node]))


def _depth_first(tree):
    """The node ids of a tree depth first, left before right (the CUDA path numbers its
    nodes level by level, the CPU path partly depth first)."""
    order, stack = [], [0]
    while stack:
        node = stack.pop()
        order.append(node)
        if tree.children_left[node] >= 0:
            stack += [tree.children_right[node], tree.children_left[node]]
    return np.asarray(order)


def _leaves_equal(structures_a, leaf_a, structures_b, leaf_b):
    """The same training samples in the same leaves (leaves compared depth first)."""
    for t, (sa, sb) in enumerate(zip(structures_a, structures_b)):
        ranks = []
        for s, leaf in ((sa, np.asarray(leaf_a)[t]), (sb, np.asarray(leaf_b)[t])):
            order = _depth_first(s)
            rank = np.empty(s.n_leaves, dtype=np.int64)
            leaves = order[s.children_left[order] < 0]
            rank[s.leaf_index[leaves]] = np.arange(len(leaves))
            ranks.append(np.where(leaf >= 0, rank[np.maximum(leaf, 0)], -1))
        np.testing.assert_array_equal(ranks[0], ranks[1], err_msg=f"tree {t}")


def _structures_equal(a, b):
    """The same trees node for node, whatever the nodes' numbering."""
    assert len(a) == len(b)
    for sa, sb in zip(a, b):
        oa, ob = _depth_first(sa), _depth_first(sb)
        assert len(oa) == len(ob) == len(sa.feature) == len(sb.feature)
        for name in ("feature", "bin", "threshold", "missing_go_left", "n_node_samples",
                     "weighted_n_node_samples", "depth"):
            np.testing.assert_array_equal(getattr(sa, name)[oa], getattr(sb, name)[ob],
                                          err_msg=name)
        np.testing.assert_array_equal(sa.children_left[oa] < 0, sb.children_left[ob] < 0)
        np.testing.assert_allclose(sa.gain[oa], sb.gain[ob], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("kwargs", [{}, {"max_features": 2, "splitter": "random",
                                          "min_samples_leaf": 2}])
def test_decision_tree_on_emulated_cuda_equals_cpu(kwargs):
    from gpurpo.tree import DecisionTreeRegressor

    rng = np.random.default_rng(6)
    X = rng.normal(size=(300, 5))
    X[rng.random(X.shape) < 0.1] = np.nan
    Y = X[:, :3] * np.array([1.0, -2.0, 0.5]) + 0.1 * rng.normal(size=(300, 3))
    Y = np.nan_to_num(Y)
    cpu = DecisionTreeRegressor(random_state=0, device="cpu", **kwargs).fit(X, Y)
    emu = DecisionTreeRegressor(random_state=0, device="cuda-emulated", **kwargs).fit(X, Y)
    tc, te = cpu.tree_.structure, emu.tree_.structure
    assert tc.node_count == te.node_count > 20
    assert _canonical(te) == _canonical(tc)
    X_test = rng.normal(size=(80, 5))
    X_test[rng.random(X_test.shape) < 0.1] = np.nan
    np.testing.assert_allclose(emu.predict(X_test), cpu.predict(X_test), rtol=1e-12, atol=1e-12)
    # the same leaves stored sparse: prediction through tree_sum_leaves_csr
    sparse_values = sp.csr_matrix(emu.tree_.leaves.values)
    np.testing.assert_allclose(predict_sum(emu.tree_.packed, sparse_values, X_test, EMULATED),
                               cpu.predict(X_test), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("missing", [False, True])
def test_weights_beyond_double_resolution_split_without_dividing_by_zero(missing):
    # weights 1e20 and 1: a right side of light samples has W - W_L = 0 in doubles.
    # The exact small-node scans (numba and CUDA) divide its term by 1, as the
    # histogram scorer does for empty sides, instead of raising or returning inf.
    from gpurpo.tree import DecisionTreeRegressor

    rng = np.random.default_rng(8)
    n = 120
    X = rng.normal(size=(n, 4))
    if missing:
        X[rng.random(X.shape) < 0.1] = np.nan
    Y = rng.normal(size=(n, 3))
    w = np.ones(n)
    heavy = np.arange(n) % 2 == 0
    w[heavy] = 1e20
    fits = {device: DecisionTreeRegressor(random_state=0, device=device).fit(X, Y, sample_weight=w)
            for device in ("cpu", "cuda-emulated")}
    cpu, emu = fits["cpu"], fits["cuda-emulated"]
    assert _canonical(emu.tree_.structure) == _canonical(cpu.tree_.structure)
    assert np.isfinite(cpu.tree_.structure.gain).all()
    # fully grown: every heavy sample ends in its own leaf (up to light ones, which
    # move its leaf mean by 1e-20 relative)
    np.testing.assert_allclose(cpu.predict(X[heavy]), Y[heavy], rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(emu.predict(X), cpu.predict(X), rtol=1e-12, atol=1e-12)


# (small_node_size, subtree_size, max_depth): every node through histograms; level-wise
# growth with the per-node exact kernel below 256 samples; histograms, then the
# per-node kernel, then subtrees below 60 samples
GROWTH_PATHS = [(0, 0, 4), (256, 0, None), (100, 60, None)]


@pytest.mark.parametrize("small, subtree, max_depth", GROWTH_PATHS)
def test_batched_growth_on_emulated_cuda_equals_cpu(small, subtree, max_depth):
    # three bootstrap trees grown together through the given kernel paths
    rng = np.random.default_rng(7)
    n, p, m, T = 400, 6, 3, 3
    X = rng.normal(size=(n, p))
    X[rng.random(X.shape) < 0.05] = np.nan
    targets = rng.normal(size=(n, T, m)).astype(np.float32)
    weights = rng.multinomial(n, np.full(n, 1.0 / n), size=T).astype(np.float32)
    mapper = BinMapper(max_bins=32).fit(X)
    params = GrowthParams(n_candidates=3, max_depth=max_depth, small_node_size=small,
                          subtree_size=subtree)
    out = {}
    for backend in (NUMPY, EMULATED):
        binned = mapper.transform(X, backend)
        out[backend.name] = grow_trees(binned, targets, weights, params,
                                       np.random.default_rng(11), backend)
    _structures_equal(out["numpy"].structures, out["emulated"].structures)
    _leaves_equal(out["numpy"].structures, out["numpy"].leaf_of_sample,
                  out["emulated"].structures, out["emulated"].leaf_of_sample)
    assert sum(s.node_count for s in out["numpy"].structures) > 3 * 15


def _forest(device):
    from gpurpo.ensemble import RandomForestRegressor

    return RandomForestRegressor(n_estimators=4, projection="gaussian", n_components=2,
                                 max_features=0.6, random_state=0, device=device)


def _boosting(device):
    from gpurpo.ensemble import GradientBoostingRegressor

    return GradientBoostingRegressor(n_estimators=5, max_leaf_nodes=6, random_state=0,
                                     device=device)


def _extra_trees_sparse_labels(device):
    from gpurpo.ensemble import ExtraTreesClassifier

    return ExtraTreesClassifier(n_estimators=3, projection="gaussian", n_components=3,
                                random_state=0, device=device)


@pytest.mark.parametrize("make", [_forest, _boosting, _extra_trees_sparse_labels])
def test_ensembles_on_emulated_cuda_equal_cpu(make):
    rng = np.random.default_rng(8)
    X = rng.normal(size=(200, 5))
    X[rng.random(X.shape) < 0.1] = np.nan
    if make is _extra_trees_sparse_labels:
        Y = sp.csr_matrix((rng.random((200, 30)) < 0.15).astype(float))
    else:
        Y = np.nan_to_num(X[:, :3] * np.array([1.0, -2.0, 0.5])) + 0.1 * rng.normal(size=(200, 3))
    X_test = rng.normal(size=(60, 5))
    X_test[rng.random(X_test.shape) < 0.1] = np.nan
    got = {}
    for device in ("cpu", "cuda-emulated"):
        model = make(device).fit(X, Y)
        pred = model.predict_proba(X_test) if hasattr(model, "predict_proba") else model.predict(X_test)
        got[device] = pred.toarray() if sp.issparse(pred) else np.asarray(pred)
    assert got["cpu"].std() > 0
    np.testing.assert_allclose(got["cuda-emulated"], got["cpu"], rtol=1e-12, atol=1e-12)


def test_forest_on_sparse_x_on_emulated_cuda_equals_cpu():
    # a sparse X reaches the subtree kernels row by row (zero codes and stored entries);
    # the subtracted bins of larger nodes: test_growth_on_sparse_x_with_subtracted_bins_...
    rng = np.random.default_rng(9)
    dense = np.where(rng.random((200, 30)) < 0.15, rng.normal(size=(200, 30)), 0.0)
    Y = dense[:, :3] @ rng.normal(size=(3, 4)) + 0.1 * rng.normal(size=(200, 4))
    got = {device: _forest(device).fit(sp.csr_matrix(dense), Y).predict(dense)
           for device in ("cpu", "cuda-emulated")}
    assert got["cpu"].std() > 0
    np.testing.assert_allclose(got["cuda-emulated"], got["cpu"], rtol=1e-12, atol=1e-12)
    on_dense = _forest("cpu").fit(dense, Y).predict(dense)
    np.testing.assert_array_equal(on_dense, got["cpu"])


def test_bench_histogram_variants_match_the_library_kernel():
    """bench/gpu_histogram_variants.cu (timed on GPUs by bench/gpu_profile.py) computes
    the library's histograms: the exact variant equal to float32 rounding, the integer
    ceiling variant within its fixed-point step."""
    from pathlib import Path

    from gpurpo.testing.cuda_emulator import EmulatedModule

    source = Path(__file__).resolve().parents[2] / "bench" / "gpu_histogram_variants.cu"
    module = EmulatedModule(path=source)
    rng = np.random.default_rng(4)
    codes, sample_indices, node_ranges, node_features, node_tree, weights, targets = _batch(
        rng, n_trees=1, k=4, n_bins=16
    )
    n_bins, k, m = 16, 4, targets.shape[2]
    channels = m + 2
    kwargs = {"shared_mem_bytes": 2 * (CELL * n_bins * channels + 4) + 8 * channels + 4,
              "samples_per_block": 20}
    ref = np.zeros((len(node_tree), k, n_bins, channels), dtype=np.float32)
    kcuda.histograms(EMULATED, *histogram_records(codes, sample_indices, node_ranges,
                                                  node_features, node_tree, weights, targets),
                     ref, **kwargs)
    plan = kcuda.histogram_launch_plan(EMULATED.device_attributes(), len(node_tree), k, n_bins,
                                       channels, len(sample_indices), **kwargs)
    assert plan["chunks"] > 1 and plan["n_slot_tiles"] > 1
    for name, atol in (("hist_sample_major", 2e-5), ("hist_lanes_int_ceiling", 0.05)):
        out = np.zeros_like(ref)
        args = (codes, sample_indices, node_ranges, node_features, node_tree, weights, targets,
                out, np.int64(codes.shape[1]), np.int32(k), np.int32(n_bins), np.int32(channels),
                np.int32(m), np.int32(1), np.int32(plan["slot_tile"]), np.int32(plan["chan_tile"]),
                np.int32(plan["n_slot_tiles"]), np.int32(plan["n_chan_tiles"]),
                np.int32(plan["chunks"]))
        module.get_function(name)((plan["grid"],), (plan["block"],), args,
                                  shared_mem=plan["shared_mem"])
        np.testing.assert_allclose(out, ref, rtol=1e-5, atol=atol, err_msg=name)


@pytest.mark.parametrize("block", [256, 64])
def test_partition_matches_numba(monkeypatch, block):
    # nodes of 0 to 700 samples: partial warps, several steps of a block, idle blocks
    from test_tree_kernels import partition_args, partition_problem

    monkeypatch.setattr(kcuda, "PARTITION_BLOCK", block)
    rng = np.random.default_rng(23 + block)
    problem = partition_problem(rng, [0, 1, 31, 32, 33, 255, 256, 257, 700, 5])
    problem[3][4] = -1  # a node that does not split keeps its samples
    cpu_buffer, dev_buffer = problem[1].copy(), problem[1].copy()
    cpu_left = kernels.partition(NUMPY, *partition_args(problem[0], cpu_buffer, *problem[2:]))
    dev_left = kernels.partition(EMULATED, *partition_args(problem[0], dev_buffer, *problem[2:]))
    np.testing.assert_array_equal(dev_buffer, cpu_buffer)
    np.testing.assert_array_equal(dev_left, cpu_left)


# --------------------------------------------------------------------------
# subtrees grown in one launch
# --------------------------------------------------------------------------


SUBTREE_SIZES = (1, 2, 3, 9, RANK_LIMIT + 3, SORT_LIMIT + 5, 200, 40)
SUBTREE_FIELDS = ("feature", "bin", "missing_left", "gain", "left", "right", "depth", "start",
                  "stop")


def _subtrees_both(problem, depth, root_weight, k, msl, mss, max_depth, mid, random_split,
                   missing_bin, sparse_codes=None):
    """Grow the subtrees on the emulated CUDA and the numba kernels (with the codes given
    row by row too when ``sparse_codes`` is set).

    Returns {backend name: (sample order after, node counts, {field: rows of the grown
    nodes})}; the rows past each root's count are left unwritten by both kernels.
    """
    (codes, sample_indices, node_ranges, node_tree, seeds, weights, targets, edge_values,
     edge_ptr) = problem
    got = {}
    for backend in (EMULATED, NUMPY):
        si = sample_indices.copy()
        out = kernels.grow_subtrees(
            backend, codes, kernels.NodeBatch(si, node_ranges, node_tree, seeds, depth), weights,
            targets, root_weight, kernels.EdgeTable(edge_values, edge_ptr),
            kernels.SplitRules(k, msl, random_split, missing_bin, 1e-5, min_samples_split=mss,
                               max_depth=max_depth, min_impurity_decrease=mid),
            kernels.SparseColumns(sparse_codes=sparse_codes),
        )
        count = np.asarray(out.count)
        rows = np.concatenate([np.arange(o, o + c) for o, c in zip(np.asarray(out.offsets), count)])
        got[backend.name] = (si, count, {f: np.asarray(getattr(out, f))[rows]
                                         for f in SUBTREE_FIELDS})
    return got


def _assert_same_subtrees(got):
    (si_e, count_e, e), (si_c, count_c, c) = got["emulated"], got["numpy"]
    np.testing.assert_array_equal(si_e, si_c)
    np.testing.assert_array_equal(count_e, count_c)
    for name in SUBTREE_FIELDS:
        np.testing.assert_array_equal(e[name], c[name], err_msg=name)


@pytest.mark.parametrize(
    "msl, mss, max_depth, mid, random_split, k",
    [(1, 2, None, 0.0, False, 7), (2, 5, None, 0.0, False, 3), (1, 2, 3, 0.0, False, 7),
     (1, 2, None, 1e-3, False, 7), (1, 2, None, 0.0, True, 4), (3, 8, 5, 0.0, True, 7)],
)
def test_grow_subtrees_matches_numba(msl, mss, max_depth, mid, random_split, k):
    rng = np.random.default_rng(31 * msl + mss + 7 * (max_depth or -1) + 100 * random_split + k)
    n_bins = 12
    problem = _split_problem(rng, SUBTREE_SIZES, n_bins=n_bins)
    sample_indices, node_ranges, weights = problem[1], problem[2], problem[5]
    depth = rng.integers(0, 2, size=len(SUBTREE_SIZES)).astype(np.int32)
    got = _subtrees_both(problem, depth, weights.sum(axis=1, dtype=np.float64) / 4, k, msl, mss,
                         max_depth, mid, random_split, n_bins - 1)
    _assert_same_subtrees(got)
    si, count = got["numpy"][:2]
    assert (count > 1).sum() >= 4  # most subtrees split, some deeply
    # each root's samples are a permutation of what it held
    for r0, r1 in node_ranges:
        assert sorted(si[r0:r1]) == sorted(sample_indices[r0:r1])


@pytest.mark.parametrize("msl, random_split", [(1, False), (2, False), (1, True)])
def test_grow_subtrees_without_missing_values_matches_numba(msl, random_split):
    # every node without missing values: the CPU's one-pass scan of sorted samples and
    # bucket sort, against the CUDA kernel's bin table
    rng = np.random.default_rng(61 + msl + 10 * random_split)
    n_bins = 12
    problem = list(_split_problem(rng, SUBTREE_SIZES, n_bins=n_bins, missing=0.0))
    problem[0][5] = rng.integers(0, n_bins - 1, size=problem[0].shape[1])
    assert not (problem[0] == n_bins - 1).any()
    depth = np.zeros(len(SUBTREE_SIZES), dtype=np.int32)
    got = _subtrees_both(tuple(problem), depth, problem[5].sum(axis=1, dtype=np.float64), 7,
                         msl, 2, None, 0.0, random_split, n_bins - 1)
    _assert_same_subtrees(got)
    assert (got["numpy"][1] > 20).sum() >= 3


def test_grow_subtrees_with_256_bins_and_several_warps(monkeypatch):
    # the bin scan spans 256 bins; two warps share the partition's ballots
    monkeypatch.setattr(kcuda, "SPLIT_BLOCK_WARPS", 2)
    rng = np.random.default_rng(91)
    n_bins = 256
    problem = _split_problem(rng, (150, 70, 33), n_bins=n_bins, m=2)
    got = _subtrees_both(problem, np.zeros(3, dtype=np.int32),
                         problem[5].sum(axis=1, dtype=np.float64), 5, 1, 2, None, 0.0, False,
                         n_bins - 1)
    _assert_same_subtrees(got)
    count = got["numpy"][1]
    assert count[:2].min() > 20 and count[2] == 1  # the last root is pure


@pytest.mark.parametrize("p, k", [(32, 6), (33, 6), (300, 17)])
def test_grow_subtrees_matches_numba_with_sampled_features(p, k):
    # k < p on both sides of the feature-order switch (32 features) and a Feistel network
    # with cycle walking (300 features: 9 bits)
    rng = np.random.default_rng(400 + p)
    n_bins = 12
    problem = _split_problem(rng, (150, 60, 33), p=p, n_bins=n_bins)
    got = _subtrees_both(problem, np.zeros(3, dtype=np.int32),
                         problem[5].sum(axis=1, dtype=np.float64), k, 1, 2, None, 0.0, False,
                         n_bins - 1)
    _assert_same_subtrees(got)
    assert got["numpy"][1][:2].min() > 10  # (the last root is pure)


@pytest.mark.parametrize("random_split", [False, True])
@pytest.mark.parametrize(
    "seed, p, share, sizes, k, checked, min_nodes",
    [
        # small roots hold many constant features, larger ones fill their tables mostly
        # in one bin
        (900, 60, 0.95, (150, 40, 9, 5, 2), 7, 2, 11),
        # a wide input: small roots vary on a few hundred features, so that their nodes
        # often find all 20 drawn features constant and draw on
        (950, 2000, 0.995, (150, 40, 12, 9, 6, 2), 20, 4, 4),
    ],
)
def test_grow_subtrees_on_sparse_like_features_matches_numba(
    random_split, seed, p, share, sizes, k, checked, min_nodes
):
    # most codes are each feature's dominant code (the zero of a sparse input); the
    # kernels copy the roots' codes from the codes matrix, or look them up in the rows
    # (CUDA) or columns (numba) of the other codes, with or without the dense codes:
    # the same subtrees every way
    rng = np.random.default_rng(seed + random_split)
    n_bins = 12
    problem = _split_problem(rng, sizes, p=p, n_bins=n_bins)
    dominant = _make_sparse_like(rng, problem[0], share, n_bins)
    args = (problem, np.zeros(len(sizes), dtype=np.int32),
            problem[5].sum(axis=1, dtype=np.float64), k, 1, 2, None, 0.0, random_split,
            n_bins - 1)
    got = _subtrees_both(*args)
    _assert_same_subtrees(got)
    assert (got["numpy"][1][:checked] >= min_nodes).all()
    rows = code_rows(problem[0], dominant.astype(np.uint8))
    assert rows.row_codes.size < 0.1 * problem[0].size
    by_rows = _subtrees_both(*args, sparse_codes=rows)
    _assert_same_subtrees(by_rows)
    _assert_same_subtrees({"emulated": by_rows["numpy"], "numpy": got["numpy"]})
    no_codes = (np.empty((p, 0), np.uint8), *problem[1:])
    stored_only = _subtrees_both(no_codes, *args[1:], sparse_codes=rows)
    _assert_same_subtrees(stored_only)
    _assert_same_subtrees({"emulated": stored_only["emulated"], "numpy": got["numpy"]})


@pytest.mark.parametrize("p, max_depth, mss", [(1, None, 2), (7, 0, 2), (7, None, 10_000)])
def test_grow_subtrees_edge_cases_match_numba(p, max_depth, mss):
    # one feature (the visiting order is trivial); roots at their depth limit; roots below
    # min_samples_split: every root a leaf, its samples left in place
    rng = np.random.default_rng(5 + p)
    n_bins = 12
    problem = list(_split_problem(rng, (60, 1, 2, 33), n_bins=n_bins))
    if p == 1:
        problem[0] = np.ascontiguousarray(problem[0][:1])  # codes
        problem[7] = np.ascontiguousarray(problem[7][: problem[8][1]])  # feature 0's edges
        problem[8] = np.ascontiguousarray(problem[8][:2])
    got = _subtrees_both(problem, np.zeros(4, dtype=np.int32),
                         problem[5].sum(axis=1, dtype=np.float64), 3, 1, mss, max_depth, 0.0,
                         False, n_bins - 1)
    _assert_same_subtrees(got)
    si, count = got["numpy"][:2]
    if p == 1:
        assert count[0] > 3  # the 60-sample root splits on its only feature
    else:
        assert (count == 1).all() and np.array_equal(si, problem[1])


def test_cuda_growth_uses_the_subtree_kernel_by_default(monkeypatch):
    # on CUDA backends level-wise growth hands small nodes to tree_grow_subtrees (default
    # size min(128, max(64, 2^18 / p))); subtree_size=0 grows level-wise to the leaves, same trees
    from gpurpo.tree import device_grower
    from gpurpo.tree.grower import default_subtree_size

    assert default_subtree_size(EMULATED, 100) == 128
    assert default_subtree_size(EMULATED, 1000) == 128
    assert default_subtree_size(EMULATED, 10**6) == 64
    calls = []
    original = device_grower._DeviceGrower._grow_subtrees

    def spy(self, roots, *args):
        calls.append(len(roots))
        return original(self, roots, *args)

    monkeypatch.setattr(device_grower._DeviceGrower, "_grow_subtrees", spy)
    rng = np.random.default_rng(12)
    X = rng.normal(size=(300, 4))
    targets = rng.normal(size=(300, 2, 2)).astype(np.float32)
    weights = rng.integers(0, 3, size=(2, 300)).astype(np.float32)
    binned = BinMapper(max_bins=16).fit(X).transform(X, EMULATED)
    out = {}
    for size in (None, 0):
        params = GrowthParams(n_candidates=2, subtree_size=size)
        out[size] = grow_trees(binned, targets, weights, params, np.random.default_rng(3), EMULATED)
        assert (len(calls) > 0) == (size is None)
        calls.clear()
    for a, b in zip(out[None].structures, out[0].structures):
        assert _canonical(a) == _canonical(b)


def test_transfers_per_level_on_emulated_cuda(monkeypatch):
    # the explicit device->host copies (Backend.to_host) of a tree's fit on the CUDA code
    # path (4 of 8 features per node: the device grower), counted without a GPU: one per
    # level of the device grower (the sizes of the next frontier), plus a fixed number per
    # fit (the input checks, the node table, the subtree outputs, the leaf weights, the
    # values beside every split)
    import gpurpo.backend as gb
    from gpurpo.tree import DecisionTreeRegressor

    rng = np.random.default_rng(7)
    original = gb.Backend.to_host
    calls = []

    def counting(self, a, pinned=False):
        calls.append(1)
        return original(self, a, pinned)

    monkeypatch.setattr(gb.Backend, "to_host", counting)
    for n, depth in ((2000, 8), (6000, 8), (800, None)):
        X = rng.normal(size=(n, 8))
        Y = rng.normal(size=(n, 4))
        calls.clear()
        model = DecisionTreeRegressor(max_depth=depth, max_features=4, random_state=0,
                                      device="cuda-emulated").fit(X, Y)
        levels = model.tree_.max_depth + 1
        # at most 16 per level, plus one per fit for the node-local thresholds
        assert 0 < len(calls) <= levels + 8, (n, len(calls), levels)


def test_cuda_tie_rounding_is_the_cpu_kernels():
    # the tie tolerance's rounding term is a macro of the CUDA source and a constant of the
    # numba kernels (and the histogram path): one value
    import re
    from pathlib import Path

    from gpurpo.tree.splitting import TIE_ROUNDING

    source = (Path(__file__).resolve().parents[2] / "kernels" / "tree_split_small.cu").read_text()
    match = re.search(r"#define SPLIT_TIE_ROUNDING (\S+)", source)
    assert match is not None and float(match.group(1)) == TIE_ROUNDING
