"""Tree kernels (numba CPU) against plain NumPy references written here.

Each kernel of ``gpurpo.tree.kernels`` is run on random inputs and compared
with a direct NumPy implementation of its documented contract: exact for
counts and node indices, float32 tolerance for float32 sums. The
counter-based randomness of ``gpurpo.tree._random`` is checked for the
properties the growers rely on (bijection, numba == NumPy).
"""

from __future__ import annotations

import shutil
from dataclasses import astuple

import numpy as np
import pytest
import scipy.sparse as sp
from _edge_table import ragged
from _sparse_codes import code_rows
from _split_records import histogram_records, split_records
from _visiting import visited_features
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from gpurpo.backend import EMULATED, NUMPY, registered_kernels
from gpurpo.tree import _random, kernels, traversal

RNG = np.random.default_rng(12345)


# --------------------------------------------------------------------------
# counter-based randomness
# --------------------------------------------------------------------------


@pytest.mark.parametrize("p", [1, 2, 3, 7, 32, 33, 64, 100, 513])
def test_feature_order_is_a_permutation_and_numba_matches_numpy(p):
    seeds = np.array([0, 1, 2**63 + 11, 2**64 - 1], dtype=np.uint64)
    order = _random.feature_at(seeds[:, None], np.arange(p)[None, :], p)
    for row in order:
        assert sorted(row.tolist()) == list(range(p))
    lo, hi = _random.feistel_params(p)
    assert (2 ** (lo + hi) < 2 * p or lo + hi == 2) and hi - lo in (0, 1)
    keys = np.empty(_random.N_ROUNDS, dtype=np.uint64)
    small = np.empty(_random.SMALL_P, dtype=np.int64)
    for s, row in zip(seeds, order):
        if p <= _random.SMALL_P:
            _random.small_feature_order_nb(s, p, small)
            got = small[:p].tolist()
        else:
            _random.round_keys_nb(s, keys)
            got = [_random.feature_at_nb(keys, i, p, lo, hi) for i in range(p)]
            # the batched version (one vectorised network pass, then cycle walking), from
            # every start position, over batches that cross and end the permutation
            for start in range(0, p, max(1, p // 5)):
                for n in (1, 7, p - start):
                    n = min(n, p - start)
                    batch = np.full(n, -1, dtype=np.int64)
                    _random.feature_batch_nb(keys, start, n, p, lo, hi, batch)
                    assert batch.tolist() == row[start:start + n].tolist()
        assert got == row.tolist()


@pytest.mark.parametrize("p", [33, 64, 100, 513, 4097])
def test_feature_position_inverts_the_feature_order(p):
    # the position of each feature in NumPy's order (the inverse permutation, by argsort)
    seeds = np.array([0, 7, 2**63 + 11, 2**64 - 1], dtype=np.uint64)
    order = _random.feature_at(seeds[:, None], np.arange(p)[None, :], p)
    lo, hi = _random.feistel_params(p)
    keys = np.empty(_random.N_ROUNDS, dtype=np.uint64)
    for s, row in zip(seeds, order):
        _random.round_keys_nb(s, keys)
        got = [_random.feature_position_nb(keys, f, p, lo, hi) for f in range(p)]
        assert got == np.argsort(row).tolist()


def _splitmix64_finaliser(x):
    # SplitMix64's output function (Steele, Lea & Flood 2014) in Python integers
    mask = (1 << 64) - 1
    z = (x + 0x9E3779B97F4A7C15) & mask
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & mask
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & mask
    return z ^ (z >> 31)


def test_children_seeds_match_the_kernels_and_splitmix64():
    # the grower's host seeds of both children equal the numba twin the subtree kernel
    # uses, and the SplitMix64 hash of the salted parent seed
    seeds = np.array([0, 1, 2**63 + 11, 2**64 - 1, 123456789], dtype=np.uint64)
    got = _random.children_seeds(seeds)
    assert got.dtype == np.uint64 and got.shape == (2 * seeds.size,)
    for j, s in enumerate(seeds):
        for side, salt in ((0, 0x8CB92BA72F3D8DD7), (1, 0xE7037ED1A0B428DB)):
            want = _splitmix64_finaliser(int(s) ^ salt)
            assert int(got[2 * j + side]) == want
            assert int(_random.child_seed_nb(s, side)) == want


def test_feature_order_is_roughly_uniform():
    # first visited feature over many seeds: chi-square-like check on counts
    p = 10
    seeds = np.arange(20000, dtype=np.uint64) * np.uint64(7919)
    first = _random.feature_at(seeds, np.zeros_like(seeds), p)
    counts = np.bincount(first, minlength=p)
    assert counts.min() > 1700 and counts.max() < 2300


def _chi_square_p_value(counts):
    expected = counts.sum() / counts.size
    return stats.chi2.sf(((counts - expected) ** 2 / expected).sum(), counts.size - 1)


@pytest.mark.parametrize("p", [5, 10, 32, 33, 65, 120, 500])
def test_sampled_feature_subsets_are_uniform(p):
    # Over 100,000 node seeds: how often each feature is among the first k =
    # ceil(sqrt(p)) visited, and the ordered pairs (first, second) are uniform
    # (chi-square). The 4-round balanced Feistel network used before fails this test
    # for p = 5, 10, 32, 33 and 120 (p-values from 3e-5 down to 1e-186).
    k = int(np.ceil(np.sqrt(p)))
    rng = np.random.default_rng(p)
    seeds = rng.integers(0, 2**63, size=100_000, dtype=np.uint64)
    order = _random.feature_at(seeds[:, None], np.arange(k)[None, :], p)
    assert _chi_square_p_value(np.bincount(order.ravel(), minlength=p)) > 1e-4
    pairs = np.bincount(order[:, 0] * p + order[:, 1], minlength=p * p).reshape(p, p)
    assert (np.diag(pairs) == 0).all()
    assert _chi_square_p_value(pairs[~np.eye(p, dtype=bool)]) > 1e-4


def test_uniforms_numba_matches_numpy_and_range():
    seeds = RNG.integers(0, 2**63, size=50, dtype=np.uint64)
    u = _random.uniform_at(seeds[:, None], np.arange(40)[None, :])
    assert u.min() >= 0.0 and u.max() < 1.0
    assert abs(u.mean() - 0.5) < 0.03
    ref = np.array([[_random.uniform_at_nb(s, i) for i in range(40)] for s in seeds])
    np.testing.assert_array_equal(u, ref)


def test_all_kernels_registered_with_cpu_implementation():
    reg = registered_kernels()
    for name in kernels.KERNEL_NAMES:
        assert "cpu" in reg[name]


# --------------------------------------------------------------------------
# binning codes
# --------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_bin_codes_kernel_matches_searchsorted(dtype):
    n = 3000
    X = np.column_stack([
        RNG.standard_cauchy(n),  # heavy tails: many edges in few grid cells
        RNG.exponential(size=n) ** 4,
        RNG.integers(0, 3, n),
        np.full(n, 2.0),  # constant: no edge
        np.where(RNG.random(n) < 0.3, np.nan, RNG.normal(size=n)),
        RNG.normal(size=n),
    ]).astype(dtype)
    width = 40
    edges = np.full((X.shape[1], width), np.inf)
    n_edges = np.zeros(X.shape[1], dtype=np.int32)
    for f in range(X.shape[1]):
        col = X[:, f][~np.isnan(X[:, f])].astype(np.float64)
        e = np.unique(np.quantile(col, np.linspace(0, 1, width + 1)[1:-1]))
        # also put edges exactly on data values
        e = np.unique(np.concatenate([e[: width // 2], col[:3]]))[: width - 1]
        edges[f, : e.size] = e
        n_edges[f] = e.size
    # infinite edges, as values beyond float32's range give the edge fit: a binary search
    with np.errstate(over="ignore"):  # +-1e39 is infinite in float32
        column = RNG.choice([-1e39, -2.0, 0.5, 3.0, 1e39], n).astype(dtype)
    X = np.column_stack([X, column])
    edges = np.vstack([edges, np.full(width, np.inf)])
    edges[-1, :5] = [-np.inf, -1.0, 0.0, 1.0, np.inf]
    n_edges = np.append(n_edges, 5).astype(np.int32)
    out = np.empty((X.shape[1], n), dtype=np.uint8)
    kernels.bin_codes(NUMPY, X, edges, n_edges, width, out)
    for f in range(X.shape[1]):
        x = X[:, f].astype(np.float64)
        ref = np.searchsorted(edges[f, : n_edges[f]], x, side="left")
        ref[np.isnan(x)] = width
        np.testing.assert_array_equal(out[f], ref)


@settings(max_examples=60, deadline=None)
@given(
    kind=st.sampled_from(["normal", "clustered", "near", "one", "none", "wide", "tiny"]),
    n_edges=st.integers(0, 254),
    seed=st.integers(0, 2**32 - 1),
)
def test_cell_tables_count_edges_below_like_searchsorted(kind, n_edges, seed):
    """The codes "#{edges < x}" from the one-edge-per-cell tables (and the binary search
    they fall back to) equal searchsorted for edges spread evenly, in clusters, a
    few ulps apart (too close for any table), one edge, none, spanning most of
    float64's range or a denormal one; values on the edges, one ulp either side,
    between them, beyond them, infinite and NaN; the fitted path (float32 values,
    float32 comparisons) likewise for the float32 values of the same data."""
    from gpurpo.tree.binning._code_tables import bin_codes_fitted

    rng = np.random.default_rng(seed)
    if kind == "normal":
        e = rng.normal(size=n_edges)
    elif kind == "clustered":
        e = rng.choice([-3.0, 0.0, 5.0], n_edges) + rng.normal(size=n_edges) * 1e-3
    elif kind == "near":
        e = 1.0 + np.arange(n_edges) * np.spacing(1.0) * rng.integers(1, 4)
    elif kind == "one":
        e = rng.normal(size=min(n_edges, 1)) * 10.0
    elif kind == "none":
        e = np.empty(0)
    elif kind == "wide":
        e = rng.uniform(-1e300, 1e300, n_edges)
    else:
        e = rng.uniform(0.0, 1e-310, n_edges)
    with np.errstate(over="ignore"):  # "wide": beyond float32, infinite: a binary search
        e = np.unique(e.astype(np.float32).astype(np.float64))
    ne = e.size
    base = rng.normal(size=300) * (np.abs(e).max() if ne else 1.0)
    with np.errstate(invalid="ignore"):
        x = np.concatenate([
            base, e, np.nextafter(e, np.inf), np.nextafter(e, -np.inf),
            0.5 * (e[1:] + e[:-1]), [np.inf, -np.inf, np.nan, 0.0, -0.0],
        ])
    width = max(ne, 1) + 1  # the missing bin: above every value code, at most 255
    edges = np.full((1, width), np.inf)
    edges[0, :ne] = e
    n_edges_arr = np.array([ne], dtype=np.int64)
    missing = width
    expected = np.where(np.isnan(x), missing, np.searchsorted(e, x, side="left"))
    out = np.empty((1, x.size), dtype=np.uint8)
    kernels.bin_codes(NUMPY, np.ascontiguousarray(x[:, None]), edges, n_edges_arr, missing, out)
    np.testing.assert_array_equal(out[0], expected)
    with np.errstate(over="ignore"):
        x32 = x.astype(np.float32)
    expected32 = np.where(np.isnan(x32), missing,
                          np.searchsorted(e, x32.astype(np.float64), side="left"))
    n_zero = np.zeros(1, dtype=np.int64)
    bin_codes_fitted(x32[None, :], np.ascontiguousarray(x32[:, None]), 0, edges, n_edges_arr,
                     np.array([True]), missing, np.array([False]), out, n_zero)
    np.testing.assert_array_equal(out[0], expected32)
    assert n_zero[0] == np.sum(expected32 == np.searchsorted(e, 0.0, side="left"))


# --------------------------------------------------------------------------
# histograms
# --------------------------------------------------------------------------


def _random_batch(n=300, p=9, n_bins=17, n_trees=3, m=4, n_nodes=7, k=5, missing=True):
    codes = RNG.integers(0, n_bins - (0 if missing else 1), size=(p, n)).astype(np.uint8)
    weights = RNG.integers(0, 4, size=(n_trees, n)).astype(np.float32)
    targets = RNG.normal(size=(n, n_trees, m)).astype(np.float32)
    lists, ranges, start = [], [], 0
    for _ in range(n_nodes):
        size = int(RNG.integers(1, 60))
        lists.append(RNG.choice(n, size=size, replace=False))
        ranges.append((start, start + size))
        start += size
    sample_indices = np.concatenate(lists).astype(np.int32)
    node_ranges = np.array(ranges, dtype=np.int64)
    node_features = np.stack([RNG.choice(p, size=k, replace=False) for _ in range(n_nodes)])
    node_features = node_features.astype(np.int32)
    node_features[0, -1] = -1
    node_tree = RNG.integers(0, n_trees, size=n_nodes).astype(np.int32)
    return codes, sample_indices, node_ranges, node_features, node_tree, weights, targets


def _histogram_reference(codes, sample_indices, node_ranges, node_features, node_tree,
                         weights, targets, n_bins, channels):
    n_nodes, k = node_features.shape
    m = targets.shape[2]
    out = np.zeros((n_nodes, k, n_bins, channels), dtype=np.float64)
    for i in range(n_nodes):
        t = node_tree[i]
        samples = sample_indices[node_ranges[i, 0]:node_ranges[i, 1]]
        for j in range(k):
            f = node_features[i, j]
            if f < 0:
                continue
            for s in samples:
                b = codes[f, s]
                w = float(weights[t, s])
                out[i, j, b, 0] += w
                out[i, j, b, 1:m + 1] += w * targets[s, t].astype(np.float64)
                if channels == m + 2:
                    out[i, j, b, m + 1] += 1
    return out


@pytest.mark.parametrize("with_count", [False, True])
def test_histogram_kernel_matches_reference(with_count):
    batch = _random_batch()
    n_bins = 17
    m = batch[-1].shape[2]
    channels = m + 2 if with_count else m + 1
    got = kernels.build_histograms(NUMPY, *histogram_records(*batch), n_bins, channels)
    ref = _histogram_reference(*batch, n_bins, channels)
    assert got.dtype == np.float32 and got.shape == ref.shape
    # weighted counts of integer weights and sample counts are exact
    np.testing.assert_array_equal(got[..., 0], ref[..., 0])
    if with_count:
        np.testing.assert_array_equal(got[..., -1], ref[..., -1])
    np.testing.assert_allclose(got[..., 1:m + 1], ref[..., 1:m + 1], rtol=1e-5, atol=1e-5)
    assert not got[0, -1].any()  # unused slot stays zero


@pytest.mark.parametrize("rows_bytes", [1, 8 * 5 * 100, 1 << 26])
def test_histograms_by_groups_of_nodes_sum_the_same(rows_bytes):
    """The host kernel gathers the weighted targets of a group of nodes at a time:
    one node a group (the budget below any node's rows), groups of some 100
    samples, all the nodes at once; the same histograms, bit for bit, and the
    reference's counts and sums."""
    from gpurpo.tree._numba.tree_histograms import histograms_in_groups

    batch = _random_batch(m=4)
    n_bins = 17
    node_features = batch[3]
    ref = _histogram_reference(*batch, n_bins, 6)
    got = np.zeros((node_features.shape[0], node_features.shape[1], n_bins, 6), np.float32)
    histograms_in_groups(*batch, got, rows_bytes)
    np.testing.assert_array_equal(got[..., 0], ref[..., 0])
    np.testing.assert_array_equal(got[..., -1], ref[..., -1])
    np.testing.assert_allclose(got[..., 1:5], ref[..., 1:5], rtol=1e-5, atol=1e-5)
    whole = np.zeros_like(got)
    histograms_in_groups(*batch, whole, 1 << 26)
    np.testing.assert_array_equal(got.view(np.uint32), whole.view(np.uint32))


# --------------------------------------------------------------------------
# exact split of small nodes
# --------------------------------------------------------------------------


def _best_split_reference(codes, samples, w, y, features, msl, missing_bin, tie_rtol=1e-5):
    """Brute force over features / bins / missing side, float64, tie rule of the contract."""
    W = w.sum()
    S = (w[:, None] * y).sum(0)
    Q = (w[:, None] * y * y).sum()
    parent = S @ S / W
    none = (-np.inf, -1, 0, 0)
    if len(samples) < max(2, 2 * msl) or (y == y[0]).all():
        return none
    per_feature = []
    for f in features:
        c = codes[f, samples].astype(np.int64)
        if (c == c[0]).all():
            continue
        miss = c == missing_bin
        best = None
        for b in np.unique(c[~miss]):
            for ml in (0, 1):
                if ml and not miss.any():
                    continue
                left = (c <= b) & ~miss
                if ml:
                    left |= miss
                nl = left.sum()
                if nl < msl or len(samples) - nl < msl:
                    continue
                SL = (w[left, None] * y[left]).sum(0)
                SR = S - SL
                WL = w[left].sum()
                g = SL @ SL / WL + SR @ SR / (W - WL) - parent
                if best is None or g > best[0]:
                    direction = ml if miss.any() else int(WL >= W - WL)
                    best = (g, f, int(b), direction)
        if best is not None:
            per_feature.append(best)
    if not per_feature:
        return none
    gmax = max(c[0] for c in per_feature)
    # ties: gains within tie_rtol of the node's impurity (plus the rounding of sums of size
    # Q); the first feature in the visiting order (the order of ``features``) wins
    return next(c for c in per_feature if c[0] >= gmax - tie_rtol * (Q - parent) - 1e-12 * Q)


# --------------------------------------------------------------------------
# node statistics (purity and the tie tolerance's Q)
# --------------------------------------------------------------------------


@pytest.mark.parametrize("impl", ["numba", "cuda", "cuda, blocks sharing nodes"])
def test_node_stats_match_a_loop_over_samples(impl):
    n, n_trees, m = 300, 3, 4
    weights = RNG.integers(0, 4, size=(n_trees, n)).astype(np.float32)
    targets = RNG.normal(size=(n, n_trees, m)).astype(np.float32)
    targets[:40, 1] = targets[0, 1]  # node 1 below: pure in tree 1
    targets[50:60, 2, 1] = 3.0  # node 2: channels equal except channel 1 -> impure
    targets[50:60, 2, [0, 2, 3]] = targets[50, 2, [0, 2, 3]]
    sizes = [7, 40, 10, 1, 0, 120]
    samples = [RNG.choice(np.arange(60, n), 7, replace=False), RNG.permutation(40),
               np.arange(50, 60)[::-1], np.array([5]), np.array([], dtype=int),
               RNG.choice(n, 120, replace=False)]
    targets[samples[2][3], 2, 1] = 2.5
    sample_indices = np.concatenate(samples).astype(np.int32)
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    ranges = np.stack([starts, starts + sizes], 1).astype(np.int64)
    node_tree = np.array([0, 1, 2, 0, 1, 2], dtype=np.int32)
    if impl != "numba" and shutil.which("g++") is None:
        pytest.skip("the CUDA emulator needs g++ (C++20) on PATH")
    backend = NUMPY if impl == "numba" else EMULATED
    # with counters, several blocks read a node and its last adds their sums
    counters = (kernels.score_counters(backend, len(sizes)) if impl.endswith("nodes")
                else None)
    if counters is not None:
        from gpurpo.tree._kernels_cuda import node_stats_blocks

        assert node_stats_blocks(backend.device_attributes(), len(sizes), True) > 1
    impure, q = kernels.node_stats(backend, sample_indices, ranges, node_tree, weights, targets,
                                   node_done=counters)
    if counters is not None:
        assert not np.asarray(counters).any()  # left at zero for the next launch
    for i, (idx, t) in enumerate(zip(samples, node_tree)):
        y = targets[idx, t].astype(np.float64)
        expected_q = sum(float(weights[t, s]) * float(np.dot(y[j], y[j]))
                         for j, s in enumerate(idx))
        assert q[i] == pytest.approx(expected_q, rel=1e-12, abs=0.0)
        distinct = len({tuple(row) for row in targets[idx, t]}) > 1
        assert bool(impure[i]) == distinct, i
    assert list(impure) == [1, 0, 1, 0, 0, 1]


# --------------------------------------------------------------------------
# partition of splitting nodes
# --------------------------------------------------------------------------


def partition_problem(rng, sizes, p=5, n_bins=12):
    """Nodes over a shuffled buffer with a gap (untouched) between two of them."""
    n = int(np.sum(sizes)) + 7
    codes = rng.integers(0, n_bins, size=(p, n)).astype(np.uint8)  # includes missing
    buffer = rng.permutation(n).astype(np.int32)
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]]) + 7 * (np.arange(len(sizes)) >= 2)
    ranges = np.stack([starts, starts + np.asarray(sizes)], axis=1).astype(np.int64)
    feature = rng.integers(0, p, size=len(sizes)).astype(np.int32)
    bins = rng.integers(0, n_bins - 1, size=len(sizes)).astype(np.int32)
    missing_left = rng.integers(0, 2, size=len(sizes)).astype(np.uint8)
    return codes, buffer, ranges, feature, bins, missing_left, n_bins - 1


def partition_args(codes, buffer, ranges, feature, bins, missing_left, missing_bin):
    """``kernels.partition``'s arguments after the backend for a :func:`partition_problem`."""
    return (codes, kernels.NodeBatch(buffer, ranges, None),
            kernels.NodeSplits(feature, bins, missing_left), missing_bin)


def partition_reference(codes, buffer, ranges, feature, bins, missing_left, missing_bin):
    out = buffer.copy()
    n_left = np.zeros(len(ranges), dtype=np.int64)
    for i, (start, stop) in enumerate(ranges):
        if feature[i] < 0:  # not splitting: untouched
            continue
        s = buffer[start:stop]
        c = codes[feature[i], s]
        left = np.where(c == missing_bin, bool(missing_left[i]), c <= bins[i])
        out[start:stop] = np.concatenate([s[left], s[~left]])
        n_left[i] = left.sum()
    return out, n_left


def test_partition_is_a_stable_split_of_each_node():
    rng = np.random.default_rng(21)
    problem = partition_problem(rng, [0, 1, 9, 40, 3, 130, 25])
    problem[3][-1] = -1  # a node that does not split keeps its samples
    want, want_left = partition_reference(*problem)
    buffer = problem[1].copy()
    got_left = kernels.partition(NUMPY, *partition_args(problem[0], buffer, *problem[2:]))
    np.testing.assert_array_equal(buffer, want)
    np.testing.assert_array_equal(got_left, want_left)
    assert 0 < want_left[3] < 40 and want_left[-1] == 0


def test_partition_needs_an_int32_buffer():
    rng = np.random.default_rng(22)
    codes, buffer, *rest = partition_problem(rng, [5, 5])
    with pytest.raises(TypeError, match="sample_indices must be a C-contiguous int32 array"):
        kernels.partition(NUMPY, *partition_args(codes, buffer.astype(np.int64), *rest))
    with pytest.raises(TypeError, match="splits must be a NodeSplits, got tuple"):
        kernels.partition(NUMPY, codes, kernels.NodeBatch(buffer, rest[0], None),
                          tuple(rest[1:4]), rest[4])


# sizes: two samples (first separating feature), three (stops at the largest possible gain),
# rank sort (5, 20), bucket sort (60, 200), bin table (300)
@pytest.mark.parametrize("n_per_node", [2, 3, 5, 20, 60, 200, 300])
@pytest.mark.parametrize("msl", [1, 3])
def test_split_small_matches_brute_force(n_per_node, msl):
    n, p, n_bins, m, n_trees = 400, 6, 12, 3, 2
    codes = RNG.integers(0, n_bins, size=(p, n)).astype(np.uint8)
    codes[2] = 4  # a constant feature
    weights = RNG.uniform(0.5, 2.0, size=(n_trees, n)).astype(np.float32)
    targets = RNG.normal(size=(n, n_trees, m)).astype(np.float32)
    n_nodes = 6
    sample_indices = np.concatenate(
        [RNG.choice(n, size=n_per_node, replace=False) for _ in range(n_nodes)]
    ).astype(np.int32)
    node_ranges = np.stack([np.arange(n_nodes) * n_per_node,
                            (np.arange(n_nodes) + 1) * n_per_node], 1).astype(np.int64)
    node_tree = RNG.integers(0, n_trees, size=n_nodes).astype(np.int32)
    seeds = RNG.integers(0, 2**63, size=n_nodes, dtype=np.uint64)
    thresholds = np.cumsum(RNG.uniform(0.1, 1, size=(p, n_bins - 1)), axis=1)
    f, b, ml, g = kernels.split_small(NUMPY, *split_records(
        codes, sample_indices, node_ranges, node_tree, seeds, weights, targets,
        *ragged(thresholds), p, msl, False, n_bins - 1, 1e-5,
    ))
    for i in range(n_nodes):
        samples = sample_indices[node_ranges[i, 0]:node_ranges[i, 1]]
        t = node_tree[i]
        ref = _best_split_reference(codes, samples, weights[t, samples].astype(np.float64),
                                    targets[samples, t].astype(np.float64),
                                    _random.feature_at(np.full(p, seeds[i]), np.arange(p), p), msl,
                                    n_bins - 1)
        assert (f[i], b[i], ml[i]) == ref[1:], (i, f[i], b[i], ml[i], ref)
        np.testing.assert_allclose(g[i], ref[0], rtol=1e-9)


@pytest.mark.parametrize("n_constant", [12, 27])
def test_split_small_visits_k_features_in_seed_order(n_constant):
    # with k < p the kernel evaluates the non-constant features among the first k of
    # feature_at(seed, .), or the first non-constant one after them when all k are constant
    n, p, n_bins, m = 200, 30, 8, 2
    codes = RNG.integers(0, n_bins - 1, size=(p, n)).astype(np.uint8)
    constant = RNG.choice(p, size=n_constant, replace=False)
    codes[constant] = 3
    weights = np.ones((1, n), dtype=np.float32)
    targets = RNG.normal(size=(n, 1, m)).astype(np.float32)
    sample_indices = np.arange(n, dtype=np.int32)
    seeds = RNG.integers(0, 2**63, size=5, dtype=np.uint64)
    ranges = np.array([[0, 40], [40, 80], [80, 120], [120, 160], [160, 200]], dtype=np.int64)
    k = 4
    f, b, ml, g = kernels.split_small(NUMPY, *split_records(
        codes, sample_indices, ranges, np.zeros(5, np.int32), seeds, weights, targets,
        *ragged(np.zeros((p, n_bins - 1))), k, 1, False, n_bins - 1, 1e-5,
    ))
    for i in range(5):
        samples = sample_indices[ranges[i, 0]:ranges[i, 1]]
        order = _random.feature_at(np.full(p, seeds[i]), np.arange(p), p)
        visited = visited_features(order, lambda q: len(np.unique(codes[q, samples])) > 1, k)
        ref = _best_split_reference(codes, samples, np.ones(len(samples)),
                                    targets[samples, 0].astype(np.float64), visited, 1,
                                    n_bins - 1)
        assert (f[i], b[i]) == ref[1:3]


@pytest.mark.parametrize("below_zero", [True, False])
def test_columns_find_a_split_isolating_one_stored_entry(below_zero):
    # a node above SORT_LIMIT whose only informative feature has a single stored entry, an
    # outlier: the best split isolates it, on the left when its code lies below the zero code
    # (one sample left of the first split point), on the right otherwise
    rng = np.random.default_rng(7)
    p, n_bins, ns = 6, 12, 400
    zero = np.full(p, 5, dtype=np.uint8)
    codes = np.repeat(zero[:, None], ns, axis=1)
    for f in range(1, p):  # uninformative stored entries elsewhere
        codes[f, rng.choice(ns, 20, replace=False)] = rng.integers(6, n_bins - 1, 20)
    outlier = 123
    codes[0, outlier] = 2 if below_zero else 9
    weights = np.ones((1, ns), dtype=np.float32)
    targets = rng.normal(scale=0.01, size=(ns, 1, 3)).astype(np.float32)
    targets[outlier, 0, :] = 50.0
    thresholds = np.cumsum(np.ones((p, n_bins - 1)), axis=1)
    args = (codes, np.arange(ns, dtype=np.int32), np.array([[0, ns]], dtype=np.int64),
            np.zeros(1, np.int32), np.array([42], dtype=np.uint64), weights, targets, *ragged(thresholds),
            p, 1, False, n_bins - 1, 1e-5)
    plain = kernels.split_small(NUMPY, *split_records(*args))
    by_columns = kernels.split_small(NUMPY, *split_records(*args), sparse=kernels.SparseColumns(
        zero.astype(np.int32), code_rows(codes, zero)))
    expected_bin = 2 if below_zero else 5
    for got in (plain, by_columns):
        assert (got[0][0], got[1][0]) == (0, expected_bin)
    np.testing.assert_allclose(by_columns[3], plain[3], rtol=1e-9)


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), share=st.floats(0.5, 0.99), ns=st.integers(257, 700),
       missing=st.sampled_from([0.0, 0.1]), m=st.sampled_from([1, 3, 8, 9]),
       k=st.integers(1, 12), random_split=st.booleans())
def test_subtracted_bins_and_columns_give_the_plain_split(seed, share, ns, missing, m, k,
                                                         random_split):
    # a node above SORT_LIMIT whose features are mostly one code: deriving that code's sums
    # from the node's totals picks the split of the plain sums (gains equal up to rounding),
    # and reading the features' stored-entry columns gives the same bits as the codes
    rng = np.random.default_rng(seed)
    p, n_bins, n = 12, 16, ns + 50
    codes = rng.integers(0, n_bins - 1, size=(p, n)).astype(np.uint8)
    zero = rng.integers(0, n_bins - 1, size=p).astype(np.uint8)
    mostly = rng.random((p, n)) < share
    codes[mostly] = np.broadcast_to(zero[:, None], codes.shape)[mostly]
    codes[rng.random((p, n)) < missing] = n_bins - 1
    subtracted = np.where(rng.random(p) < 0.8, zero.astype(np.int32), -1).astype(np.int32)
    weights = rng.uniform(0.5, 2.0, size=(1, n)).astype(np.float32)
    targets = rng.normal(size=(n, 1, m)).astype(np.float32)
    samples = np.sort(rng.choice(n, size=ns, replace=False)).astype(np.int32)
    thresholds = np.cumsum(rng.uniform(0.1, 1.0, size=(p, n_bins - 1)), axis=1)
    args = (codes, samples, np.array([[0, ns]], dtype=np.int64), np.zeros(1, np.int32),
            rng.integers(0, 2**63, size=1, dtype=np.uint64), weights, targets, *ragged(thresholds), k, 1,
            random_split, n_bins - 1, 1e-5)
    plain = kernels.split_small(NUMPY, *split_records(*args))
    derived = kernels.split_small(NUMPY, *split_records(*args),
                                  sparse=kernels.SparseColumns(subtracted))
    by_columns = kernels.split_small(NUMPY, *split_records(*args),
                                     sparse=kernels.SparseColumns(subtracted, code_rows(codes, zero)))
    for a, b in zip(derived, by_columns):
        np.testing.assert_array_equal(a, b)
    assert (derived[0][0], derived[1][0], derived[2][0]) == (plain[0][0], plain[1][0],
                                                             plain[2][0])
    np.testing.assert_allclose(derived[3], plain[3], rtol=1e-9)


def test_split_small_random_cut_within_node_range():
    n, p, n_bins, m = 300, 5, 20, 2
    codes = RNG.integers(0, n_bins - 1, size=(p, n)).astype(np.uint8)
    thresholds = np.cumsum(RNG.uniform(0.1, 1, size=(p, n_bins - 1)), axis=1)
    thresholds[:, -1] = np.inf
    targets = RNG.normal(size=(n, 1, m)).astype(np.float32)
    sizes = [3, 8, 40, 100]
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    ranges = np.stack([starts, starts + sizes], 1).astype(np.int64)
    sample_indices = RNG.permutation(n)[: sum(sizes)].astype(np.int32)
    for trial in range(5):
        seeds = RNG.integers(0, 2**63, size=len(sizes), dtype=np.uint64)
        f, b, ml, g = kernels.split_small(NUMPY, *split_records(
            codes, sample_indices, ranges, np.zeros(len(sizes), np.int32), seeds,
            np.ones((1, n), np.float32), targets, *ragged(thresholds), 1, 1, True, n_bins - 1, 1e-5,
        ))
        for i in range(len(sizes)):
            if f[i] < 0:
                continue
            c = codes[f[i], sample_indices[ranges[i, 0]:ranges[i, 1]]]
            assert c.min() <= b[i] < c.max()


# --------------------------------------------------------------------------
# leaves, traversal, prediction sums
# --------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_accumulate_leaves_dense_and_csr(dtype):
    n, d, L = 200, 70, 9
    leaf = RNG.integers(-1, L, size=n).astype(np.int32)
    w = RNG.uniform(0, 2, size=n)
    Y = (RNG.random((n, d)) < 0.1) * RNG.normal(size=(n, d))
    Y = Y.astype(dtype)
    ref = np.zeros((L, d))
    for i in range(n):
        if leaf[i] >= 0:
            ref[leaf[i]] += w[i] * Y[i].astype(np.float64)
    dense = kernels.accumulate_leaves_dense(NUMPY, leaf, w, Y, L)
    csr = kernels.accumulate_leaves_csr(NUMPY, leaf, w, sp.csr_matrix(Y), L)
    np.testing.assert_allclose(dense, ref, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(csr, ref, rtol=1e-12, atol=1e-12)


def _random_forest_arrays(n_trees=4, p=5):
    feature, threshold, missing, left, right, roots = [], [], [], [], [], []
    offset = 0
    for _ in range(n_trees):
        n_internal = int(RNG.integers(0, 8))
        # random binary tree in preorder via a queue of open slots
        nodes = [{"f": -1}]
        open_leaves = [0]
        for _ in range(n_internal):
            g = open_leaves.pop(int(RNG.integers(len(open_leaves))))
            nodes[g] = {"f": int(RNG.integers(p)), "t": float(RNG.normal()),
                        "m": int(RNG.integers(2)), "l": len(nodes), "r": len(nodes) + 1}
            nodes += [{"f": -1}, {"f": -1}]
            open_leaves += [len(nodes) - 2, len(nodes) - 1]
        roots.append(offset)
        for nd in nodes:
            feature.append(nd["f"])
            threshold.append(nd.get("t", 0.0))
            missing.append(nd.get("m", 0))
            left.append(nd["l"] + offset if nd["f"] >= 0 else -1)
            right.append(nd["r"] + offset if nd["f"] >= 0 else -1)
        offset += len(nodes)
    as_ = np.asarray
    return (as_(feature, np.int32), as_(threshold), as_(missing, np.uint8), as_(left, np.int32),
            as_(right, np.int32), as_(roots, np.int32))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_apply_matches_python_traversal(dtype):
    arrays = _random_forest_arrays()
    feature, threshold, missing, left, right, roots = arrays
    X = RNG.normal(size=(150, 5)).astype(dtype)
    X[RNG.random(X.shape) < 0.2] = np.nan
    got = traversal.apply_trees(NUMPY, X, *arrays)
    for i in range(X.shape[0]):
        for t, r in enumerate(roots):
            g = r
            while feature[g] >= 0:
                x = float(X[i, feature[g]])
                go_left = bool(missing[g]) if np.isnan(x) else x <= threshold[g]
                g = left[g] if go_left else right[g]
            assert got[i, t] == g


def test_sum_leaves_dense_and_csr():
    n, T, L, d = 60, 5, 30, 40
    rows = RNG.integers(-1, L, size=(n, T)).astype(np.int32)
    values = (RNG.random((L, d)) < 0.2) * RNG.normal(size=(L, d))
    ref = np.zeros((n, d))
    for i in range(n):
        for t in range(T):
            if rows[i, t] >= 0:
                ref[i] += values[rows[i, t]]
    out = np.ones((n, d))
    traversal.sum_leaves_dense(NUMPY, rows, values, out)
    np.testing.assert_allclose(out, ref + 1, rtol=1e-12)
    csr = sp.csr_matrix(values)
    # SciPy's int32 indices are read as they are; int64 and other integer types too
    for index_dtype in (np.int32, np.int64, np.uint16):
        typed = sp.csr_matrix(values)
        typed.indices = csr.indices.astype(index_dtype)
        typed.indptr = csr.indptr.astype(np.int64 if index_dtype == np.uint16 else index_dtype)
        out = np.zeros((n, d))
        traversal.sum_leaves_csr(NUMPY, rows, typed, out)
        np.testing.assert_allclose(out, ref, rtol=1e-12, atol=1e-15)


def test_feature_table_equals_the_vectorised_visiting_order():
    rng = np.random.default_rng(31)
    for p in (1, 2, 7, 64, 500):
        seeds = rng.integers(0, 2**64 - 1, size=6, dtype=np.uint64, endpoint=True)
        positions = rng.integers(0, p, size=(6, 9)).astype(np.int64)
        out = np.empty(positions.shape, dtype=np.int32)
        _random.feature_table(seeds, positions, p, *_random.feistel_params(p), out)
        np.testing.assert_array_equal(out, _random.feature_at(seeds[:, None], positions, p))


def test_split_records_reject_bad_arguments():
    with pytest.raises(TypeError, match="n_candidates"):
        kernels.SplitRules(2.5, 1, False, 11, 1e-5)
    with pytest.raises(TypeError, match="max_depth"):
        kernels.SplitRules(2, 1, False, 11, 1e-5, max_depth="deep")
    codes = np.zeros((2, 4), dtype=np.uint8)
    batch = kernels.NodeBatch(np.arange(4, dtype=np.int32), np.array([[0, 4]]),
                              np.zeros(1, np.int32), np.ones(1, np.uint64))
    problem = (codes, batch, np.ones((1, 4), np.float32), np.zeros((4, 1, 1), np.float32),
               kernels.EdgeTable(*ragged(np.ones((2, 1)))))
    with pytest.raises(TypeError, match="rules must be a SplitRules, got tuple"):
        kernels.split_small(NUMPY, *problem, (2, 1, False, 1, 1e-5))
    with pytest.raises(ValueError, match="node_depth"):
        kernels.grow_subtrees(NUMPY, *problem[:4], np.ones(1), problem[4],
                              kernels.SplitRules(2, 1, False, 1, 1e-5))
    with pytest.raises(ValueError, match="node_seed"):
        kernels.split_small(NUMPY, codes, kernels.NodeBatch(*astuple(batch)[:3]), *problem[2:],
                            kernels.SplitRules(2, 1, False, 1, 1e-5))
    features = np.zeros((1, 2), np.int32)
    with pytest.raises(TypeError, match="batch must be a NodeBatch"):
        kernels.build_histograms(NUMPY, codes, astuple(batch)[:3], features, *problem[2:4], 2, 2)
    with pytest.raises(TypeError, match="edges must be an EdgeTable"):
        kernels.score_histograms(NUMPY, np.zeros((1, 2, 2, 2), np.float32), features, 1, 1,
                                 False, None, ragged(np.ones((2, 1))))
