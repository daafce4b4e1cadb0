"""The weighted-median kernel of the absolute-error loss (gpurpo.ensemble.boosting._median_kernels).

The selection kernel (CPU) against the argsort version that CuPy runs
(:func:`gpurpo.ensemble.boosting._median_kernels.weighted_median_columns`) and against the
definition: a value of the column that minimises ``sum_i w_i |z_i - c|``, the
smallest one whose weight at or below reaches half the total.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpurpo.backend import Backend
from gpurpo.ensemble.boosting._median_kernels import (
    weighted_median_columns,
    weighted_median_columns_cpu,
    weighted_median_leaves,
    weighted_median_leaves_cpu,
    weighted_median_of,
)
from gpurpo.ensemble.boosting.step_sizes import weighted_median_step

CPU = Backend("numpy")


def _lower_weighted_median(z: np.ndarray, w: np.ndarray) -> float:
    """The definition, by brute force: the smallest value whose weight at or below it
    reaches half the total (exact in rationals for the integer weights used with it)."""
    if not w.sum() > 0:
        return 0.0
    for c in np.unique(z):
        if 2 * w[z <= c].sum() >= w.sum():
            return float(c)
    raise AssertionError("unreachable")


@settings(max_examples=150, deadline=None)
@given(
    values=st.lists(st.integers(-5, 5), min_size=1, max_size=40),
    weights=st.lists(st.integers(0, 4), min_size=40, max_size=40),
)
def test_selection_gives_the_lower_weighted_median_with_ties(values, weights):
    """Few distinct values, integer weights (zeros included): exact halves are common,
    and the kernel must pick the lower median there, as the definition says."""
    z = np.asarray(values, dtype=np.float64)
    w = np.asarray(weights[: z.size], dtype=np.float64)
    got = weighted_median_of(z.copy(), w.copy())
    assert got == _lower_weighted_median(z, w)


@pytest.mark.parametrize("version", ["kernel", "array"])
@settings(max_examples=60, deadline=None)
@given(
    values=st.lists(st.floats(-1e6, 1e6, allow_nan=False), min_size=1, max_size=60),
    seed=st.integers(0, 2**31 - 1),
)
def test_median_minimises_the_weighted_absolute_deviation(version, values, seed):
    """Both versions give a value of the column that minimises sum_i w_i |z_i - c|."""
    z = np.asarray(values)
    w = np.random.default_rng(seed).random(z.size)
    median = weighted_median_columns_cpu if version == "kernel" else (
        lambda Z, W: weighted_median_columns(np, Z, W))
    got = median(z[:, None], w[:, None])[0]
    objective = lambda c: float(np.sum(w * np.abs(z - c)))  # noqa: E731
    assert got in z
    assert objective(got) <= min(objective(c) for c in z) * (1 + 1e-12) + 1e-12


@pytest.mark.parametrize("shape", [(1, 1), (2, 3), (257, 5), (5000, 7)])
@pytest.mark.parametrize("broadcast", [False, True])
def test_kernel_equals_the_argsort_version(shape, broadcast):
    """Continuous weights (no partial sum at exactly half): the same medians as the
    array version, for a weight per entry and a weight per row."""
    rng = np.random.default_rng(shape[0])
    Z = rng.standard_normal(shape)
    Z[:, 0] = np.sort(Z[:, 0])  # a sorted column, and one of one repeated value
    if shape[1] > 1:
        Z[:, 1] = 3.0
    W = rng.random((shape[0], 1) if broadcast else shape)
    np.testing.assert_array_equal(weighted_median_columns_cpu(Z, W),
                                  weighted_median_columns(np, Z, W))


def test_kernel_zero_weight_columns_and_empty_input():
    Z = np.array([[1.0, 2.0], [3.0, -4.0]])
    W = np.array([[0.0, 1.0], [0.0, 0.5]])
    np.testing.assert_array_equal(weighted_median_columns_cpu(Z, W), [0.0, 2.0])
    assert weighted_median_columns_cpu(np.empty((3, 0)), np.ones((3, 1))).shape == (0,)


def test_selection_is_linear_on_adversarial_orders():
    """Sorted, reversed and organ-pipe columns of 200,000 values (quadratic for a
    first- or last-element pivot) against the array version."""
    n = 200_000
    up = np.arange(n, dtype=np.float64)
    Z = np.column_stack([up, up[::-1], np.r_[up[: n // 2], up[: n // 2][::-1]]])
    W = np.ones((n, 1))
    np.testing.assert_array_equal(weighted_median_columns_cpu(Z, W),
                                  weighted_median_columns(np, Z, W))


def test_step_is_the_exact_minimiser_per_output():
    """weighted_median_step on the CPU: each output's step minimises
    sum_i w_i |r_ij - rho h_ij| over the candidate ratios."""
    rng = np.random.default_rng(3)
    R = rng.standard_normal((300, 4))
    H = rng.standard_normal((300, 4))
    H[::7, 2] = 0.0
    w = rng.random(300)
    rho = weighted_median_step(CPU, R, H, w)
    for j in range(4):
        objective = lambda c: float(np.sum(w * np.abs(R[:, j] - c * H[:, j])))  # noqa: E731
        nz = H[:, j] != 0
        best = min(objective(c) for c in R[nz, j] / H[nz, j])
        assert objective(rho[j]) <= best * (1 + 1e-12)


@pytest.mark.parametrize("one_column", [False, True])
def test_step_kernel_equals_the_array_version(one_column):
    """The step kernel forms the ratios and weights as the array version does (zeros of
    H: ratio 0, weight 0), for per-output trees and for one tree broadcast to all."""
    from gpurpo.ensemble.boosting._median_kernels import _weighted_median_step_xp, weighted_median_step_cpu

    rng = np.random.default_rng(11)
    n, d = 2000, 9
    R = rng.standard_normal((n, d))
    H = rng.standard_normal((n, 1 if one_column else d))
    H[rng.random(H.shape) < 0.2] = 0.0
    w = rng.random(n)
    np.testing.assert_array_equal(weighted_median_step_cpu(R, H, w),
                                  _weighted_median_step_xp(CPU, R, H, w))


EMULATED = Backend("emulated")


def _leaf_medians_by_definition(R, w, leaf, n_leaves):
    out = np.zeros((n_leaves, R.shape[1]))
    for lf in range(n_leaves):
        rows = leaf == lf
        for j in range(R.shape[1]):
            out[lf, j] = _lower_weighted_median(R[rows, j], w[rows]) if rows.any() else 0.0
    return out


@settings(max_examples=80, deadline=None)
@given(
    n=st.integers(1, 40),
    d=st.integers(1, 4),
    n_leaves=st.integers(1, 6),
    seed=st.integers(0, 2**31 - 1),
)
def test_leaf_medians_are_the_lower_weighted_medians_of_each_leaf(n, d, n_leaves, seed):
    """Every leaf's median of every column in one call, on the CPU kernel, the array
    version on NumPy and the emulated backend: few distinct values and integer weights
    (zeros, empty leaves and exact halves included), where all three follow the
    definition exactly."""
    rng = np.random.default_rng(seed)
    R = rng.integers(-4, 5, size=(n, d)).astype(np.float64)
    w = rng.integers(0, 4, size=n).astype(np.float64)
    leaf = rng.integers(0, n_leaves, size=n)
    want = _leaf_medians_by_definition(R, w, leaf, n_leaves)
    np.testing.assert_array_equal(weighted_median_leaves_cpu(R, w, leaf, n_leaves), want)
    np.testing.assert_array_equal(weighted_median_leaves(np, R, w, leaf, n_leaves), want)
    got = EMULATED.kernel("boost_weighted_median_leaves")(
        *(EMULATED.asarray(a) for a in (R, w, leaf)), n_leaves)
    np.testing.assert_array_equal(EMULATED.to_host(got), want)


def test_leaf_medians_are_the_column_kernel_on_each_leafs_rows():
    """The CPU kernel selects from each leaf's rows in increasing order: the bits of
    ``boost_weighted_median_columns`` on those rows, leaf by leaf."""
    rng = np.random.default_rng(4)
    R = rng.standard_normal((3000, 21))
    w = rng.random(3000)
    w[::9] = 0.0
    leaf = rng.integers(0, 31, size=3000)
    leaf[leaf == 7] = 8  # leaf 7 has no row: 0
    got = weighted_median_leaves_cpu(R, w, leaf, 31)
    for lf in range(31):
        rows = np.flatnonzero(leaf == lf)
        want = weighted_median_columns_cpu(R[rows], w[rows][:, None]) if rows.size else 0.0
        np.testing.assert_array_equal(got[lf], want)
    np.testing.assert_array_equal(weighted_median_leaves(np, R, w, leaf, 31), got)


def test_leaf_medians_of_empty_inputs():
    for n, d, n_leaves in ((0, 3, 2), (5, 0, 2), (5, 3, 0)):
        R, w = np.zeros((n, d)), np.ones(n)
        leaf = np.zeros(n, dtype=np.int64)
        for got in (weighted_median_leaves_cpu(R, w, leaf, n_leaves),
                    weighted_median_leaves(np, R, w, leaf, n_leaves)):
            assert got.shape == (n_leaves, d) and not got.any()
