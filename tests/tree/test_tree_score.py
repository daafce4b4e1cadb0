"""Histogram split scoring (``tree_score_histograms``): numba and CUDA kernels.

Three references:

* ``reference_scores``: the vectorised NumPy formulation of the split score
  (Joly et al. 2014, eq. 1-2, on cumulative histograms), written here; the
  kernels promise bitwise equality with it (same summation order);
* a brute force over samples: every threshold and missing side of a
  feature is tried on the raw samples, the variance reduction computed
  directly as ``W Var - W_L Var_L - W_R Var_R`` (float64, no histogram);
* the numba kernel, for the CUDA kernel run through the CPU emulation.
"""

from __future__ import annotations

import re
import shutil

import numpy as np
import pytest
from _edge_table import ragged
from hypothesis import given, settings
from hypothesis import strategies as st

from gpurpo.backend import EMULATED, NUMPY
from gpurpo.tree import kernels

needs_gxx = pytest.mark.skipif(
    shutil.which("g++") is None, reason="the CUDA emulator needs g++ (C++20) on PATH"
)


# --------------------------------------------------------------------------
# NumPy reference (vectorised over nodes, slots and bins)
# --------------------------------------------------------------------------


def _sq_norm(a, m):
    out = a[..., 1] * a[..., 1]
    for c in range(2, m + 1):
        out = out + a[..., c] * a[..., c]
    return out


def _gain(left, total, m, parent):
    right = total - left
    wl, wr = left[..., 0], right[..., 0]
    return (
        _sq_norm(left, m) / np.where(wl > 0, wl, 1.0)
        + _sq_norm(right, m) / np.where(wr > 0, wr, 1.0)
        - parent
    )


def _newton_side(a, q, lam, mcw):
    """sum_j G_j^2 / (H_j + lam) over outputs with H_j >= mcw, in output order."""
    out = np.zeros(a.shape[:-1])
    for j in range(1, q + 1):
        h = a[..., q + j]
        den = h + lam
        ok = (h >= mcw) & (den > 0)
        with np.errstate(divide="ignore", invalid="ignore"):
            out = out + np.where(ok, (a[..., j] * a[..., j]) / np.where(ok, den, 1.0), 0.0)
    return out


def reference_scores(hist, node_features, m, msl, random_split, uniforms, thresholds,
                     newton=None):
    """NumPy scores; ``newton=(lam, mcw)``: the second-order gain, m = 2q channels."""
    n_nodes, k, n_bins, channels = hist.shape
    if newton is None:
        gain_fn = _gain
    else:
        lam, mcw = newton

        def gain_fn(left, total, m, parent):
            # the right side's sums are T - L, as in the kernels
            return (_newton_side(left, m // 2, lam, mcw)
                    + _newton_side(total - left, m // 2, lam, mcw) - parent)
    cnt = channels - 1 if channels == m + 2 else 0
    h = hist.astype(np.float64)
    values, miss = h[:, :, : n_bins - 1, :], h[:, :, n_bins - 1, :]
    cum = np.cumsum(values, axis=2)
    total = cum[:, :, -1, :] + miss
    n_total, n_miss = total[..., cnt], miss[..., cnt]
    has_miss = n_miss > 0
    occupied = values[..., cnt] > 0
    any_value = occupied.any(axis=2)
    nvb = n_bins - 1
    bmin = np.argmax(occupied, axis=2)
    bmax = (nvb - 1) - np.argmax(occupied[:, :, ::-1], axis=2)
    nonconstant = (occupied.sum(axis=2) + has_miss >= 2) & (node_features >= 0)
    w_total = total[..., 0]
    if newton is None:
        parent = _sq_norm(total, m) / np.where(w_total > 0, w_total, 1.0)
    else:
        parent = _newton_side(total, m // 2, *newton)
    if not random_split:
        n_left = cum[..., cnt]
        below_max = np.arange(nvb)[None, None, :] < bmax[:, :, None]
        ok_right = (
            occupied & (below_max | has_miss[:, :, None]) & (n_left >= msl)
            & (n_total[:, :, None] - n_left >= msl)
        )
        g_right = np.where(ok_right, gain_fn(cum, total[:, :, None], m, parent[:, :, None]), -np.inf)
        left_m = cum + miss[:, :, None, :]
        n_left_m = n_left + n_miss[:, :, None]
        ok_left = (
            occupied & has_miss[:, :, None] & below_max & (n_left_m >= msl)
            & (n_total[:, :, None] - n_left_m >= msl)
        )
        g_left = np.where(ok_left, gain_fn(left_m, total[:, :, None], m, parent[:, :, None]), -np.inf)
        both = np.stack([g_right, g_left], axis=3).reshape(n_nodes, k, 2 * nvb)
        flat = np.argmax(both, axis=2)
        gain = np.take_along_axis(both, flat[:, :, None], axis=2)[:, :, 0]
        best_bin, direction = flat // 2, flat % 2
        w_left = np.take_along_axis(cum[..., 0], best_bin[:, :, None], axis=2)[:, :, 0]
    else:
        # the cut: the largest bin in [bmin, bmax - 1] whose low is at most t, uniform
        # between the lows of bmin and bmax (gpurpo.tree.binning._edge_lookup); the lows
        # follow the edges in the ragged table, +inf beyond a feature's last value bin
        edge_values, edge_ptr = ragged(thresholds)
        n_edges = np.diff(edge_ptr)
        lows = np.full((thresholds.shape[0], thresholds.shape[1] + 1), np.inf)
        for f, count in enumerate(n_edges):
            at = edge_ptr[-1] + edge_ptr[f] + f
            lows[f, : count + 1] = edge_values[at : at + count + 1]
        low = lows[np.where(node_features >= 0, node_features, 0)]

        def low_at(at):
            return np.take_along_axis(low, np.clip(at, 0, low.shape[2] - 1)[:, :, None], axis=2)[:, :, 0]

        many = bmax - bmin >= 2
        with np.errstate(invalid="ignore"):
            lo, hi = low_at(bmin), low_at(bmax)
            t = lo + uniforms * (hi - lo)
            j = np.arange(low.shape[2])[None, None, :]
            steps = ((j > bmin[:, :, None]) & (j <= (bmax - 1)[:, :, None])
                     & (low <= t[:, :, None])).sum(axis=2)
        best_bin = np.where(bmax <= bmin, bmax, np.where(many, bmin + steps, bmin))
        left = np.take_along_axis(cum, best_bin[:, :, None, None], axis=2)[:, :, 0, :]
        n_left = left[..., cnt]
        below_max = best_bin < bmax
        ok_right = (below_max | has_miss) & (n_left >= msl) & (n_total - n_left >= msl)
        g_right = np.where(ok_right, gain_fn(left, total, m, parent), -np.inf)
        left_m = left + miss
        n_left_m = n_left + n_miss
        ok_left = has_miss & below_max & (n_left_m >= msl) & (n_total - n_left_m >= msl)
        g_left = np.where(ok_left, gain_fn(left_m, total, m, parent), -np.inf)
        direction = (g_left > g_right).astype(np.int64)
        gain = np.maximum(g_right, g_left)
        w_left = left[..., 0]
    gain = np.where(nonconstant & any_value, gain, -np.inf)
    missing_left = np.where(has_miss, direction, (w_left >= w_total - w_left).astype(np.int64))
    return gain, best_bin.astype(np.int32), missing_left.astype(np.uint8), nonconstant


# --------------------------------------------------------------------------
# Data: histograms of real samples
# --------------------------------------------------------------------------


def sample_problem(rng, n_nodes=7, k=5, n_bins=12, m=3, with_count=True, p=6, integer_targets=False,
                   hessian=False):
    """Histograms built from samples (NumPy), with unused slots, constant and empty features.

    ``hessian=True``: the last m / 2 targets are non-negative (hessians of
    the first m / 2), as the second-order gain expects.
    """
    nvb = n_bins - 1
    channels = m + 2 if with_count else m + 1
    hist = np.zeros((n_nodes, k, n_bins, channels), dtype=np.float32)
    feats = rng.integers(0, p, size=(n_nodes, k)).astype(np.int32)
    feats[rng.random((n_nodes, k)) < 0.15] = -1
    samples = []
    for i in range(n_nodes):
        ns = int(rng.integers(0, 40))
        codes = rng.integers(0, n_bins, size=(k, ns))  # includes the missing bin
        if rng.random() < 0.3:
            codes[rng.integers(k)] = rng.integers(nvb)  # a constant feature
        if rng.random() < 0.3:
            codes[codes == nvb] = 0  # no missing values in this node
        w = rng.integers(0, 3, size=ns).astype(np.float64) if with_count else np.ones(ns)
        y = (rng.integers(-3, 4, size=(ns, m)) if integer_targets else rng.normal(size=(ns, m)))
        if hessian:
            y[:, m // 2 :] = np.abs(y[:, m // 2 :]) * rng.uniform(0.0, 0.5, size=(ns, 1))
        for j in range(k):
            if feats[i, j] < 0:
                continue
            for s in range(ns):
                b = codes[j, s]
                hist[i, j, b, 0] += w[s]
                hist[i, j, b, 1 : m + 1] += w[s] * y[s]
                if with_count:
                    hist[i, j, b, m + 1] += 1
        samples.append((codes, w, y))
    thresholds = np.sort(rng.normal(size=(p, nvb)), axis=1)
    thresholds[:, -2:] = np.inf
    uniforms = rng.random((n_nodes, k))
    # features of 0 to nvb - 2 edges: the kernels read the ragged table (+inf beyond them)
    thresholds[np.arange(nvb) >= rng.integers(0, max(nvb - 1, 1), size=p)[:, None]] = np.inf
    return hist, feats, thresholds, uniforms, samples


def run_kernel(backend, hist, feats, m, msl, random_split, uniforms, thresholds, newton=None):
    extra = {} if newton is None else dict(
        newton=True, reg_lambda=newton[0], min_child_weight=newton[1]
    )
    out = kernels.score_histograms(
        backend, backend.asarray(hist), backend.asarray(feats), m, msl, random_split,
        backend.asarray(uniforms),
        kernels.EdgeTable(*(backend.asarray(a) for a in ragged(thresholds))), **extra,
    )
    return tuple(backend.to_host(a) for a in out)


def assert_same(got, want):
    g, b, ml, nc = got
    rg, rb, rml, rnc = want
    np.testing.assert_array_equal(g, rg)  # bitwise, -inf included
    np.testing.assert_array_equal(b, rb)
    np.testing.assert_array_equal(ml, rml)
    np.testing.assert_array_equal(nc.astype(bool), rnc)


# --------------------------------------------------------------------------
# Tests
# --------------------------------------------------------------------------


@pytest.mark.parametrize("random_split", [False, True])
@pytest.mark.parametrize("msl", [1, 3])
@pytest.mark.parametrize("with_count", [True, False])
@pytest.mark.parametrize("m", [1, 4])
def test_numba_kernel_equals_numpy_reference(random_split, msl, with_count, m):
    rng = np.random.default_rng(100 * m + 10 * msl + with_count + 2 * random_split)
    hist, feats, thr, u, _ = sample_problem(rng, m=m, with_count=with_count)
    got = run_kernel(NUMPY, hist, feats, m, msl, random_split, u, thr)
    assert_same(got, reference_scores(hist, feats, m, msl, random_split, u, thr))
    assert np.isfinite(got[0]).any() and np.isinf(got[0]).any()


@settings(max_examples=40, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    m=st.integers(1, 6),
    n_bins=st.integers(2, 20),
    msl=st.integers(1, 5),
    random_split=st.booleans(),
    with_count=st.booleans(),
)
def test_numba_kernel_equals_reference_fuzzed(seed, m, n_bins, msl, random_split, with_count):
    rng = np.random.default_rng(seed)
    hist, feats, thr, u, _ = sample_problem(
        rng, n_nodes=4, k=3, n_bins=n_bins, m=m, with_count=with_count
    )
    got = run_kernel(NUMPY, hist, feats, m, msl, random_split, u, thr)
    assert_same(got, reference_scores(hist, feats, m, msl, random_split, u, thr))


def _brute_force(codes, w, y, nvb, msl):
    """Best (gain, bin, missing_left) of one feature by trying every split on the samples."""
    def wss(mask):
        wm = w[mask]
        if wm.sum() <= 0:
            return 0.0
        mean = (wm[:, None] * y[mask]).sum(axis=0) / wm.sum()
        return float((wm[:, None] * (y[mask] - mean) ** 2).sum())

    total = wss(np.ones(len(w), dtype=bool))
    best = (-np.inf, None, None)
    missing = codes == nvb
    for b in range(nvb):
        for miss_left in (False, True):
            if miss_left and not missing.any():
                continue
            go_left = (codes <= b) & ~missing
            if miss_left:
                go_left |= missing
            n_left = int(go_left.sum())
            if n_left < msl or len(w) - n_left < msl or n_left == 0 or n_left == len(w):
                continue
            gain = total - wss(go_left) - wss(~go_left)
            if gain > best[0] + 1e-9:
                best = (gain, b, miss_left)
    return best


@pytest.mark.parametrize("msl", [1, 2])
def test_best_split_is_the_brute_force_optimum(msl):
    rng = np.random.default_rng(7 + msl)
    hist, feats, thr, u, samples = sample_problem(rng, n_nodes=12, k=4, m=2, with_count=True)
    gain, best_bin, missing_left, _ = run_kernel(NUMPY, hist, feats, 2, msl, False, u, thr)
    nvb = hist.shape[2] - 1
    checked = 0
    for i, (codes, w, y) in enumerate(samples):
        for j in range(hist.shape[1]):
            if feats[i, j] < 0:
                continue
            want_gain, want_bin, want_ml = _brute_force(codes[j], w, y, nvb, msl)
            if want_bin is None:
                assert gain[i, j] == -np.inf or gain[i, j] <= 1e-6 * max(1.0, abs(gain).max())
                continue
            np.testing.assert_allclose(gain[i, j], want_gain, rtol=1e-5, atol=1e-4)
            # the same partition: the chosen bin is at or after the brute-force one with
            # only empty bins between them (empty bins give the same partition)
            lo, hi = sorted((int(best_bin[i, j]), want_bin))
            between = codes[j][(codes[j] > lo) & (codes[j] <= hi)]
            assert between.size == 0 or np.isclose(gain[i, j], want_gain, rtol=1e-9)
            checked += 1
    assert checked > 10


@needs_gxx
@pytest.mark.parametrize("random_split", [False, True])
@pytest.mark.parametrize("with_count", [True, False])
def test_cuda_kernel_equals_numba(random_split, with_count):
    rng = np.random.default_rng(31 + random_split + 2 * with_count)
    m = 3
    hist, feats, thr, u, _ = sample_problem(rng, n_nodes=9, k=6, m=m, with_count=with_count)
    want = run_kernel(NUMPY, hist, feats, m, 2, random_split, u, thr)
    got = run_kernel(EMULATED, hist, feats, m, 2, random_split, u, thr)
    for a, b in zip(got, want):
        np.testing.assert_array_equal(a, b)
    assert_same(got, reference_scores(hist, feats, m, 2, random_split, u, thr))


@needs_gxx
@pytest.mark.parametrize("random_split", [False, True])
@pytest.mark.parametrize("with_count", [True, False])
def test_cuda_kernel_equals_numba_with_256_bins_and_ties(random_split, with_count):
    # more bins than threads per block; integer targets make equal gains (the tie rule)
    rng = np.random.default_rng(41 + random_split + 2 * with_count)
    m = 2
    hist, feats, thr, u, _ = sample_problem(rng, n_nodes=8, k=4, n_bins=256, m=m,
                                            with_count=with_count, integer_targets=True)
    want = run_kernel(NUMPY, hist, feats, m, 1, random_split, u, thr)
    got = run_kernel(EMULATED, hist, feats, m, 1, random_split, u, thr)
    for a, b in zip(got, want):
        np.testing.assert_array_equal(a, b)


@needs_gxx
def test_cuda_kernel_with_fewer_blocks_than_slots(monkeypatch):
    """Blocks loop over the slots: a scratch budget of a few blocks still scores every slot."""
    from gpurpo.tree import _kernels_cuda

    rng = np.random.default_rng(5)
    m = 2
    hist, feats, thr, u, _ = sample_problem(rng, n_nodes=10, k=5, m=m)
    n_bins = hist.shape[2]
    monkeypatch.setattr(_kernels_cuda, "SCORE_SCRATCH_BYTES", 8 * (m + 2) * n_bins * 7)
    got = run_kernel(EMULATED, hist, feats, m, 1, False, u, thr)
    assert_same(got, reference_scores(hist, feats, m, 1, False, u, thr))


# --------------------------------------------------------------------------
# Second-order (Newton) gain: channels 1..q gradients, q+1..2q hessians
# --------------------------------------------------------------------------


@pytest.mark.parametrize("random_split", [False, True])
@pytest.mark.parametrize("with_count", [True, False])
@pytest.mark.parametrize("newton", [(1.0, 0.0), (0.0, 0.0), (0.5, 2.0)])
def test_newton_numba_kernel_equals_numpy_reference(random_split, with_count, newton):
    rng = np.random.default_rng(int(10 * newton[0] + 3 * newton[1]) + 2 * with_count + random_split)
    m = 6
    hist, feats, thr, u, _ = sample_problem(rng, m=m, with_count=with_count, hessian=True)
    got = run_kernel(NUMPY, hist, feats, m, 1, random_split, u, thr, newton)
    assert_same(got, reference_scores(hist, feats, m, 1, random_split, u, thr, newton))
    assert np.isfinite(got[0]).any()
    # the variance gain of the same histograms chooses differently somewhere
    variance = run_kernel(NUMPY, hist, feats, m, 1, random_split, u, thr)
    assert not np.array_equal(got[0], variance[0])


@settings(max_examples=30, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    q=st.integers(1, 4),
    n_bins=st.integers(2, 20),
    msl=st.integers(1, 4),
    random_split=st.booleans(),
    lam=st.sampled_from([0.0, 0.3, 1.0]),
    mcw=st.sampled_from([0.0, 0.5, 3.0]),
)
def test_newton_numba_kernel_equals_reference_fuzzed(seed, q, n_bins, msl, random_split, lam, mcw):
    rng = np.random.default_rng(seed)
    hist, feats, thr, u, _ = sample_problem(
        rng, n_nodes=4, k=3, n_bins=n_bins, m=2 * q, with_count=True, hessian=True
    )
    got = run_kernel(NUMPY, hist, feats, 2 * q, msl, random_split, u, thr, (lam, mcw))
    assert_same(got, reference_scores(hist, feats, 2 * q, msl, random_split, u, thr, (lam, mcw)))


def _newton_brute_force(codes, w, y, nvb, lam, mcw):
    """Best second-order gain of one feature, every split tried on the samples."""
    q = y.shape[1] // 2

    def score(mask):
        G = (w[mask, None] * y[mask, :q]).sum(axis=0)
        H = (w[mask, None] * y[mask, q:]).sum(axis=0)
        ok = (H >= mcw) & (H + lam > 0)
        return float(np.sum(np.where(ok, G**2 / np.where(ok, H + lam, 1.0), 0.0)))

    everyone = np.ones(len(w), dtype=bool)
    best = -np.inf
    missing = codes == nvb
    for b in range(nvb):
        for miss_left in (False, True):
            if miss_left and not missing.any():
                continue
            go_left = ((codes <= b) & ~missing) | (missing & miss_left)
            if go_left.all() or not go_left.any():
                continue
            best = max(best, score(go_left) + score(~go_left) - score(everyone))
    return best


@pytest.mark.parametrize("newton", [(1.0, 0.0), (0.0, 0.0), (1.0, 0.4)])
def test_newton_best_gain_is_the_brute_force_optimum(newton):
    rng = np.random.default_rng(17)
    m = 4
    hist, feats, thr, u, samples = sample_problem(rng, n_nodes=12, k=4, m=m, hessian=True)
    gain, _, _, _ = run_kernel(NUMPY, hist, feats, m, 1, False, u, thr, newton)
    nvb = hist.shape[2] - 1
    checked = 0
    for i, (codes, w, y) in enumerate(samples):
        for j in range(hist.shape[1]):
            want = _newton_brute_force(codes[j], w, y, nvb, *newton)
            if feats[i, j] < 0 or not np.isfinite(want):
                continue
            np.testing.assert_allclose(gain[i, j], want, rtol=1e-4, atol=1e-4)
            checked += 1
    assert checked > 10


@needs_gxx
@pytest.mark.parametrize("random_split", [False, True])
@pytest.mark.parametrize("n_bins", [12, 256])
def test_newton_cuda_kernel_equals_numba(random_split, n_bins):
    rng = np.random.default_rng(51 + random_split + n_bins)
    m = 4
    hist, feats, thr, u, _ = sample_problem(rng, n_nodes=8, k=4, n_bins=n_bins, m=m, hessian=True)
    newton = (1.0, 0.3)
    want = run_kernel(NUMPY, hist, feats, m, 1, random_split, u, thr, newton)
    got = run_kernel(EMULATED, hist, feats, m, 1, random_split, u, thr, newton)
    for a, b in zip(got, want):
        np.testing.assert_array_equal(a, b)
    assert np.isfinite(got[0]).any()


def test_newton_score_validates_its_arguments():
    rng = np.random.default_rng(0)
    hist, feats, thr, u, _ = sample_problem(rng, m=3)
    edges = kernels.EdgeTable(*ragged(thr))
    with pytest.raises(ValueError, match=re.escape(
        "n_outputs must be even with newton=True (gradient then hessian channels), got 3"
    )):
        kernels.score_histograms(NUMPY, hist, feats, 3, 1, False, None, edges, newton=True)
    hist, feats, thr, u, _ = sample_problem(rng, m=4, hessian=True)
    edges = kernels.EdgeTable(*ragged(thr))
    with pytest.raises(ValueError, match=re.escape("reg_lambda must be >= 0.0, got -1.0")):
        kernels.score_histograms(NUMPY, hist, feats, 4, 1, False, None, edges, newton=True,
                                 reg_lambda=-1.0)
    with pytest.raises(ValueError, match=re.escape("min_child_weight must be >= 0.0, got -0.5")):
        kernels.score_histograms(NUMPY, hist, feats, 4, 1, False, None, edges, newton=True,
                                 min_child_weight=-0.5)


def test_score_histograms_validates_shapes():
    rng = np.random.default_rng(0)
    hist, feats, thr, u, _ = sample_problem(rng, m=3)
    edges = kernels.EdgeTable(*ragged(thr))
    n_nodes, k = feats.shape
    with pytest.raises(ValueError, match=re.escape(
        f"hist must have m + 1 or m + 2 channels for n_outputs=5, got shape {hist.shape}"
    )):
        kernels.score_histograms(NUMPY, hist, feats, 5, 1, False, None, edges)
    with pytest.raises(ValueError, match=re.escape(
        "edge_values and edge_ptr must be 1-D (a ragged edge table: feature f's edges at "
        f"edge_values[edge_ptr[f]:edge_ptr[f + 1]]), got shapes {thr.shape} and "
        f"{ragged(thr)[1].shape}"
    )):
        kernels.score_histograms(NUMPY, hist, feats, 3, 1, False, None,
                                 kernels.EdgeTable(thr, ragged(thr)[1]))
    with pytest.raises(ValueError, match=re.escape(
        f"node_features must have shape {(n_nodes, k)}, got {(n_nodes, k - 1)}"
    )):
        kernels.score_histograms(NUMPY, hist, feats[:, :-1], 3, 1, False, None, edges)
    with pytest.raises(ValueError, match="^uniforms are required when random_split is true$"):
        kernels.score_histograms(NUMPY, hist, feats, 3, 1, True, None, edges)


@pytest.mark.parametrize("n_gaps", [2, 3, 7])
def test_extra_trees_cuts_each_gap_of_evenly_spaced_values_alike(n_gaps):
    # scikit-learn's Extra-Trees draw the threshold uniformly between the node's smallest and
    # largest values: each of the n_gaps gaps of evenly spaced values with probability
    # 1 / n_gaps, the last one included
    from gpurpo.tree.binning._bin_lows import bin_lows
    from gpurpo.tree.binning._edge_lookup import _random_cut

    values = np.arange(13.0)  # values 0, 1, ..., 12 binned at the midpoints
    edge_ptr = np.array([0, 12], dtype=np.int64)
    edges = np.concatenate([values[:-1] + 0.5, bin_lows(values[:, None], values[:-1] + 0.5, edge_ptr)])
    for bmin in (0, 3):
        bmax = bmin + n_gaps
        grid = (np.arange(6000) + 0.5) / 6000
        cuts = np.array([_random_cut(edges, edge_ptr, 0, bmin, bmax, u) for u in grid])
        counts = np.bincount(cuts - bmin, minlength=n_gaps)
        assert cuts.min() >= bmin and cuts.max() <= bmax - 1
        np.testing.assert_allclose(counts / grid.size, 1.0 / n_gaps, atol=2.0 / grid.size)
    assert _random_cut(edges, edge_ptr, 0, 4, 4, 0.3) == 4  # a constant feature
    assert _random_cut(edges, edge_ptr, 0, 4, 5, 0.9) == 4  # one gap


def test_extra_trees_cut_each_gap_of_a_node_with_probability_proportional_to_its_width():
    # heavy-tailed values: scikit-learn's uniform threshold between the node's smallest and
    # largest values cuts between neighbouring node values in proportion to their distance,
    # through bins that the node does not occupy, and the widest gap at the end most often
    from gpurpo.tree.binning._bin_lows import bin_lows
    from gpurpo.tree.binning._edge_lookup import _random_cut

    values = np.array([0.0, 5.0, 10.0, 20.0, 45.0, 120.0, 900.0])
    edges = (values[:-1] + values[1:]) / 2
    edge_ptr = np.array([0, edges.size], dtype=np.int64)
    table = np.concatenate([edges, bin_lows(values[::-1, None], edges, edge_ptr)])
    np.testing.assert_array_equal(table[edges.size:], values)
    grid = (np.arange(20000) + 0.5) / 20000
    for node in ([0, 1, 2, 3, 4, 5, 6], [1, 3, 4, 6], [0, 2, 5]):
        codes = np.array(node)
        cuts = np.array([_random_cut(table, edge_ptr, 0, codes[0], codes[-1], u) for u in grid])
        # the node's gap each cut falls in: code <= cut to the left
        gap = np.searchsorted(codes, cuts, side="right") - 1
        share = np.bincount(gap, minlength=codes.size - 1) / grid.size
        widths = np.diff(values[codes])
        np.testing.assert_allclose(share, widths / widths.sum(), atol=2.0 / grid.size)
