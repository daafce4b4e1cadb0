"""Two-valued (binary) features in the exact split kernels, CPU against emulated CUDA.

A feature with a single edge (codes 0 and 1, as the word-presence columns of
text data) and a subtracted bin is summed from a table at every node size:
the CPU kernels sum its other code and derive the subtracted one from the
node's totals, in one pass over the node's codes when the best split of a
node with at most 8 channels is searched. The CUDA kernels (run through the
CPU emulation) follow the same rule: same splits, same bits. Trees also equal
those of the sorted scan (no subtracted bin) up to rounding, and the brute
force over the visited features.
"""

from __future__ import annotations

import shutil

import numpy as np
import pytest
from _edge_table import ragged
from _split_records import split_records

from gpurpo.backend import EMULATED, NUMPY
from gpurpo.tree import kernels
from gpurpo.tree._numba._node_split import RANK_LIMIT, SORT_LIMIT, SUBSET_LIMIT

pytestmark = pytest.mark.skipif(
    shutil.which("g++") is None, reason="the CUDA emulator needs g++ (C++20) on PATH"
)

# node sizes: the rank sort, the bucket sort and the table of the generic paths, and
# the partition bound of the smallest nodes
SIZES = (2, 3, SUBSET_LIMIT, RANK_LIMIT, RANK_LIMIT + 9, 150, SORT_LIMIT + 40, 700)
MISSING_BIN = 11


def _binary_problem(rng, m, missing):
    """Nodes over 12 features: 9 binary ones mostly 0 (one of them with missing values
    when ``missing``), one binary mostly 1 (no subtracted bin), two of 11 value bins."""
    p, n = 12, 1600
    codes = rng.integers(0, MISSING_BIN, size=(p, n)).astype(np.uint8)
    thresholds = np.cumsum(rng.uniform(0.1, 1.0, size=(p, MISSING_BIN)), axis=1)
    thresholds[:, -1] = np.inf
    density = rng.uniform(0.03, 0.3, size=p)
    for f in range(2, p):
        codes[f] = rng.random(n) < density[f]
        thresholds[f, 1:] = np.inf
    codes[2] = 1 - codes[2]  # mostly ones
    if missing:
        codes[5, rng.random(n) < 0.1] = MISSING_BIN
    subtracted = np.full(p, -1, dtype=np.int32)
    subtracted[3:] = 0
    listed = np.where(subtracted >= 0, (codes != 0).sum(axis=1), n).astype(np.int64)
    y = rng.normal(size=(n, 2, m))
    y[:, :, 0] += (2.0 * codes[4] + codes[7])[:, None]  # splits worth finding on binary features
    targets = y.astype(np.float32)
    weights = rng.uniform(0.5, 2.0, size=(2, n)).astype(np.float32)
    starts = np.concatenate([[0], np.cumsum(SIZES)[:-1]])
    sample_indices = np.concatenate(
        [rng.choice(n, size=s, replace=False) for s in SIZES]).astype(np.int32)
    node_ranges = np.stack([starts, starts + np.asarray(SIZES)], axis=1).astype(np.int64)
    node_tree = rng.integers(0, 2, size=len(SIZES)).astype(np.int32)
    seeds = rng.integers(0, 2**64 - 1, size=len(SIZES), dtype=np.uint64, endpoint=True)
    problem = (codes, sample_indices, node_ranges, node_tree, seeds, weights, targets,
               *ragged(thresholds))
    return problem, subtracted, listed


@pytest.mark.parametrize("m, random_split, missing",
                         [(7, False, False), (7, False, True), (3, False, True),
                          (7, True, True), (11, False, True)])
def test_split_small_on_two_valued_features_matches_emulated_cuda(m, random_split, missing):
    rng = np.random.default_rng(1000 + m + 10 * random_split + 100 * missing)
    problem, subtracted, listed = _binary_problem(rng, m, missing)
    args = split_records(*problem, 6, 1, random_split, MISSING_BIN, 1e-5)
    sparse = kernels.SparseColumns(subtracted, listed=listed)
    want = kernels.split_small(NUMPY, *args, sparse=sparse)
    got = kernels.split_small(EMULATED, *args, sparse=sparse)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)  # same bits
    assert (want[0] >= 2).sum() >= len(SIZES) - 3  # most nodes split on a binary feature
    if not random_split:
        # the sorted scan of every feature (no subtracted bin): the same splits, up to
        # the rounding of the sums
        plain = kernels.split_small(NUMPY, *args)
        np.testing.assert_array_equal(want[0], plain[0])
        np.testing.assert_array_equal(want[1], plain[1])
        np.testing.assert_allclose(want[3], plain[3], rtol=1e-9)


def _brute_force_gain(codes, samples, w, y, f):
    """Best variance-reduction gain of feature ``f`` over ``samples`` (float64, no missing)."""
    c = codes[f, samples]
    W, S = w.sum(), w @ y
    best = -np.inf
    for b in np.unique(c)[:-1]:
        left = c <= b
        WL, SL = w[left].sum(), w[left] @ y[left]
        best = max(best, SL @ SL / WL + (S - SL) @ (S - SL) / (W - WL) - S @ S / W)
    return best


def test_split_small_on_two_valued_features_scores_the_brute_force_gain():
    rng = np.random.default_rng(77)
    problem, subtracted, listed = _binary_problem(rng, 7, False)
    codes, sample_indices, node_ranges, node_tree = problem[:4]
    weights, targets = problem[5], problem[6]
    got = kernels.split_small(NUMPY, *split_records(*problem, 6, 1, False, MISSING_BIN, 1e-5),
                              sparse=kernels.SparseColumns(subtracted, listed=listed))
    for r, (start, stop) in enumerate(node_ranges):
        f = got[0][r]
        if f < 0:
            continue
        samples = sample_indices[start:stop]
        t = node_tree[r]
        w = weights[t, samples].astype(np.float64)
        y = targets[samples, t].astype(np.float64)
        assert got[1][r] == 0 or f < 2
        np.testing.assert_allclose(got[3][r], _brute_force_gain(codes, samples, w, y, f),
                                   rtol=1e-9)


@pytest.mark.parametrize("m, random_split", [(7, False), (7, True), (11, False)])
def test_grow_subtrees_on_two_valued_features_matches_emulated_cuda(m, random_split):
    rng = np.random.default_rng(2000 + m + 10 * random_split)
    problem, subtracted, listed = _binary_problem(rng, m, True)
    (codes, sample_indices, node_ranges, node_tree, seeds, weights, targets, edge_values,
     edge_ptr) = problem
    depth = np.zeros(len(SIZES), dtype=np.int32)
    root_weight = weights.sum(axis=1, dtype=np.float64)
    got = {}
    for backend in (EMULATED, NUMPY):
        si = sample_indices.copy()
        out = kernels.grow_subtrees(
            backend, codes, kernels.NodeBatch(si, node_ranges, node_tree, seeds, depth), weights,
            targets, root_weight, kernels.EdgeTable(edge_values, edge_ptr),
            kernels.SplitRules(6, 1, random_split, MISSING_BIN, 1e-5, min_samples_split=2),
            kernels.SparseColumns(subtracted, listed=listed),
        )
        count = np.asarray(out.count)
        rows = np.concatenate([np.arange(o, o + c)
                               for o, c in zip(np.asarray(out.offsets), count)])
        got[backend.name] = (si, count, {f: np.asarray(getattr(out, f))[rows]
                                         for f in ("feature", "bin", "missing_left", "gain",
                                                   "left", "right", "start", "stop")})
    (si_e, count_e, e), (si_c, count_c, c) = got["emulated"], got["numpy"]
    np.testing.assert_array_equal(si_e, si_c)
    np.testing.assert_array_equal(count_e, count_c)
    for name in e:
        np.testing.assert_array_equal(e[name], c[name], err_msg=name)  # same bits
    assert count_c[-2:].min() > 50  # the large roots grow deep subtrees
