"""The fused kernels of a boosting round (:mod:`gpurpo.ensemble.boosting.round_kernels`).

Each kernel is held, on the numba (CPU) and the emulated CUDA backends, to a
NumPy reference that follows the contract's order of summation (the same bits)
and to the plain array formulas of the half squared error and of
:func:`gpurpo.ensemble.boosting.step_sizes.least_squares_step` (within rounding).
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpurpo.backend import EMULATED, NUMPY
from gpurpo.ensemble.boosting import round_kernels
from gpurpo.ensemble.boosting.iteration_trees import leaf_label_sums, leaf_means
from gpurpo.ensemble.boosting.round_kernels import (
    add_leaf_values,
    leaf_label_means,
    least_squares_step_from_leaves,
    row_blocks,
    squared_gradient_and_row_loss,
)
from gpurpo.ensemble.boosting.step_sizes import least_squares_step

BACKENDS = [NUMPY, EMULATED]
WARP = 32


def _problem(seed, n, d, k, n_leaves=7, zero_weights=True):
    rng = np.random.default_rng(seed)
    Y = rng.normal(size=(n, d))
    F = rng.normal(size=(n, d))
    values = rng.normal(size=(n_leaves, k))
    values[0] = 0.0  # a leaf predicting 0 everywhere
    leaf = rng.integers(0, n_leaves, size=n).astype(np.int32)
    w = rng.uniform(0.5, 2.0, size=n)
    if zero_weights:
        w[rng.random(n) < 0.3] = 0.0  # rows left out by subsampling
    return Y, F, values, leaf, w


def _row_loss_in_warp_order(Y, F):
    """The contract's row loss: lanes j mod 32, then shuffles down."""
    n, d = Y.shape
    out = np.empty(n)
    for i in range(n):
        lanes = [0.0] * WARP
        for j in range(d):
            r = Y[i, j] - F[i, j]
            lanes[j % WARP] += 0.5 * (r * r)
        offset = WARP // 2
        while offset:
            for lane in range(offset):
                lanes[lane] += lanes[lane + offset]
            offset //= 2
        out[i] = lanes[0] / d
    return out


def _step_in_block_order(Y, F, values, leaf, w, learning_rate):
    """The contract's step: rows in order within blocks, then the blocks in order."""
    n, d = Y.shape
    H = values[leaf] if values.shape[1] == d else np.repeat(values[leaf], d, axis=1)
    blocks = []
    _, rows = row_blocks(n, d)
    for first in range(0, max(n, 1), rows):
        num, den = np.zeros(d), np.zeros(d)
        for i in range(first, min(n, first + rows)):
            wh = w[i] * H[i]
            num = num + wh * (Y[i] - F[i])
            den = den + wh * H[i]
        blocks.append((num, den))
    num, den = np.zeros(d), np.zeros(d)
    for part_num, part_den in blocks:
        num, den = num + part_num, den + part_den
    rho = np.where(den > 0, num / np.where(den > 0, den, 1.0), 0.0)
    return rho, learning_rate * rho


def _on(backend, *arrays):
    return [backend.asarray(a) for a in arrays]


@pytest.mark.parametrize("backend", BACKENDS, ids=lambda b: b.name)
@pytest.mark.parametrize("n, d", [(1, 1), (37, 5), (300, 33), (70, 130)])
def test_gradient_and_row_loss(backend, n, d):
    Y, F, *_ = _problem(n * d, n, d, d)
    grad, loss = squared_gradient_and_row_loss(backend, *_on(backend, Y, F))
    grad, loss = backend.to_host(grad), backend.to_host(loss)
    assert grad.dtype == np.float32 and loss.dtype == np.float64
    np.testing.assert_array_equal(grad, (Y - F).astype(np.float32))
    np.testing.assert_array_equal(loss, _row_loss_in_warp_order(Y, F))
    np.testing.assert_allclose(loss, np.mean(0.5 * (Y - F) ** 2, axis=1), rtol=1e-13)


@pytest.mark.parametrize("backend", BACKENDS, ids=lambda b: b.name)
@pytest.mark.parametrize("n, d, k", [(1, 1, 1), (40, 6, 6), (600, 3, 3), (520, 140, 140),
                                     (300, 9, 1)])
def test_least_squares_step(backend, n, d, k):
    # 600 and 520 rows: three row blocks, the last short; 140 outputs: two column tiles
    Y, F, values, leaf, w = _problem(n + d + k, n, d, k)
    rho, scale = least_squares_step_from_leaves(backend, *_on(backend, Y, F, values, leaf, w),
                                                0.3)
    rho, scale = backend.to_host(rho), backend.to_host(scale)
    want_rho, want_scale = _step_in_block_order(Y, F, values, leaf, w, 0.3)
    np.testing.assert_array_equal(rho, want_rho)
    np.testing.assert_array_equal(scale, want_scale)
    # the array formula of the step, on the rows of positive weight only
    kept = w > 0
    plain = least_squares_step(np, (Y - F)[kept], values[leaf][kept], w[kept])
    np.testing.assert_allclose(rho, plain, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("backend", BACKENDS, ids=lambda b: b.name)
def test_a_step_without_predictions_is_zero(backend):
    Y, F, values, leaf, w = _problem(3, 50, 4, 4, zero_weights=False)
    values[:] = 0.0
    values[:, 2] = 1.5
    rho, _ = least_squares_step_from_leaves(backend, *_on(backend, Y, F, values, leaf, w), 1.0)
    rho = backend.to_host(rho)
    assert rho[[0, 1, 3]].tolist() == [0.0, 0.0, 0.0]
    # one constant prediction: the step is the weighted mean residual over 1.5
    assert rho[2] == pytest.approx(np.average(Y[:, 2] - F[:, 2], weights=w) / 1.5, rel=1e-12)


@pytest.mark.parametrize("backend", BACKENDS, ids=lambda b: b.name)
@pytest.mark.parametrize("k", [1, 5])
def test_add_leaf_values_matches_the_array_update(backend, k):
    Y, F, values, leaf, w = _problem(k, 90, 5, k)
    scale = np.linspace(-0.5, 0.7, 5)
    want = F + values[leaf] * scale[None, :]
    F_dev = backend.asarray(F.copy())
    add_leaf_values(backend, F_dev, *_on(backend, values, leaf, scale))
    np.testing.assert_array_equal(backend.to_host(F_dev), want)


@settings(max_examples=25, deadline=None)
@given(n=st.integers(1, 700), d=st.integers(1, 70), one_column=st.booleans(),
       seed=st.integers(0, 2**16))
def test_numba_and_emulated_kernels_agree_bit_for_bit(n, d, one_column, seed):
    Y, F, values, leaf, w = _problem(seed, n, d, 1 if one_column else d)
    got = []
    for backend in BACKENDS:
        grad, loss = squared_gradient_and_row_loss(backend, *_on(backend, Y, F))
        rho, scale = least_squares_step_from_leaves(
            backend, *_on(backend, Y, F, values, leaf, w), 0.1)
        F_dev = backend.asarray(F.copy())
        add_leaf_values(backend, F_dev, *_on(backend, values, leaf), scale)
        means = leaf_label_means(backend, *_on(backend, leaf, w, grad), int(values.shape[0]))
        got.append([backend.to_host(a) for a in (grad, loss, rho, scale, F_dev, means)])
    for cpu, emulated in zip(*got):
        np.testing.assert_array_equal(cpu, emulated)


def test_bad_shapes_are_named():
    Y, F, values, leaf, w = _problem(0, 20, 3, 3)
    with pytest.raises(ValueError, match="values must have shape"):
        least_squares_step_from_leaves(NUMPY, Y, F, values[:, :2], leaf, w, 1.0)
    with pytest.raises(ValueError, match="leaf must have shape"):
        add_leaf_values(NUMPY, F, values, leaf[:5], np.ones(3))
    with pytest.raises(ValueError, match="F must be a C-contiguous float64"):
        add_leaf_values(NUMPY, np.asfortranarray(F), values, leaf, np.ones(3))
    with pytest.raises(ValueError, match="Y and F must have the same shape"):
        squared_gradient_and_row_loss(NUMPY, Y[:, :2], F)


def _means_in_block_order(leaf, w, labels, n_leaves):
    """The contract's leaf values: per row block in row order, then the blocks."""
    n, k = labels.shape
    _, rows = row_blocks(n, n_leaves * k)
    S, W = np.zeros((n_leaves, k)), np.zeros(n_leaves)
    for first in range(0, max(n, 1), rows):
        part_S, part_W = np.zeros((n_leaves, k)), np.zeros(n_leaves)
        for i in range(first, min(n, first + rows)):
            if leaf[i] >= 0:
                part_W[leaf[i]] += w[i]
                part_S[leaf[i]] = part_S[leaf[i]] + w[i] * labels[i].astype(np.float64)
        S, W = S + part_S, W + part_W
    return S * (1.0 / np.where(W > 0, W, 1.0))[:, None]


@pytest.mark.parametrize("backend", BACKENDS, ids=lambda b: b.name)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("n, k, n_leaves", [(1, 1, 1), (90, 4, 7), (600, 1, 31), (300, 140, 9)])
def test_leaf_label_means(backend, dtype, n, k, n_leaves):
    rng = np.random.default_rng(n + k)
    labels = rng.normal(size=(n, k)).astype(dtype)
    leaf = rng.integers(-1, n_leaves, size=n).astype(np.int32)  # -1: out of the tree
    w = rng.uniform(0.0, 2.0, size=n)
    if n_leaves > 2:
        leaf[leaf == 2] = 1  # leaf 2 has no row: its values are 0
    got = backend.to_host(leaf_label_means(backend, *_on(backend, leaf, w, labels), n_leaves))
    np.testing.assert_array_equal(got, _means_in_block_order(leaf, w, labels, n_leaves))
    want = leaf_means(np, *leaf_label_sums(NUMPY, leaf, w, labels, n_leaves))
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-14)
    if n_leaves > 2:
        assert not got[2].any()


@pytest.mark.parametrize("backend", BACKENDS, ids=lambda b: b.name)
def test_long_row_blocks_past_the_partial_sums_budget(backend, monkeypatch):
    # a budget of 60 partial sums: the step's 3 blocks of 334 rows instead of 4 of 256,
    # the leaf values' (7 leaves x 20 columns) one block of all rows
    monkeypatch.setattr(round_kernels, "PARTIAL_CELLS", 60)
    assert row_blocks(1000, 20) == (3, 334) and row_blocks(1000, 140) == (1, 1000)
    Y, F, values, leaf, w = _problem(5, 1000, 20, 20)
    rho, _ = least_squares_step_from_leaves(backend, *_on(backend, Y, F, values, leaf, w), 1.0)
    np.testing.assert_array_equal(backend.to_host(rho),
                                  _step_in_block_order(Y, F, values, leaf, w, 1.0)[0])
    got = leaf_label_means(backend, *_on(backend, leaf, w, Y), 7)
    np.testing.assert_array_equal(backend.to_host(got), _means_in_block_order(leaf, w, Y, 7))


@given(n=st.integers(0, 10**7), cells=st.integers(1, 10**6))
def test_row_blocks_cover_every_row_once(n, cells):
    blocks, rows = row_blocks(n, cells)
    assert blocks >= 1 and rows >= 1
    assert (blocks - 1) * rows < max(n, 1) <= blocks * rows
    assert blocks * cells <= max(round_kernels.PARTIAL_CELLS, cells)
    if n and cells * -(-n // round_kernels.ROWS_PER_BLOCK) <= round_kernels.PARTIAL_CELLS:
        assert rows == -(-n // blocks) and rows <= round_kernels.ROWS_PER_BLOCK
