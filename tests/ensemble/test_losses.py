"""Losses of multi-output gradient boosting: values, gradients, constant models, steps.

References are independent of gpurpo: losses written out in NumPy here,
central finite differences, ``scipy.optimize.minimize_scalar`` for the
one-dimensional problems, brute force over breakpoints for the piecewise
linear absolute error, ``numpy.average`` and ``scipy.special.logit`` for
the constant models.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.optimize
import scipy.special
from hypothesis import given, settings
from hypothesis import strategies as st

from gpurpo.backend import NUMPY, Backend, count_device_activity
from gpurpo.ensemble.boosting.losses import LOSSES, get_loss
from gpurpo.ensemble.boosting.step_sizes import MAX_LOGIT_STEP

CPU = Backend("numpy")


# Plain NumPy references of the per-entry losses (labels in {-1, 1} for log_loss).
def ref_pointwise(name, Y, F):
    if name == "squared_error":
        return 0.5 * (Y - F) ** 2
    if name == "absolute_error":
        return np.abs(Y - F)
    return np.log1p(np.exp(-Y * F))


def ref_objective(name, y, f, h, w, rho):
    """sum_i w_i l(y_i, f_i + rho h_i) for one output."""
    return float(np.sum(w * ref_pointwise(name, y, f + rho * h)))


def make_problem(name, n, d, seed, h_columns=None):
    rng = np.random.default_rng(seed)
    if name == "log_loss":
        Y = np.where(rng.random((n, d)) < 0.3, 1.0, -1.0)
        F = 0.5 * rng.standard_normal((n, d))
    else:
        Y = 2.0 * rng.standard_normal((n, d)) + 1.0
        F = rng.standard_normal((n, d))
    H = rng.standard_normal((n, h_columns or d))
    w = rng.random(n) + 0.1
    return Y, F, H, w


@pytest.mark.parametrize("name", list(LOSSES))
def test_pointwise_matches_reference(name):
    Y, F, _, w = make_problem(name, 50, 3, 0)
    loss = get_loss(name)
    np.testing.assert_allclose(loss.pointwise(CPU, Y, F), ref_pointwise(name, Y, F), rtol=1e-12)
    expected = np.average(ref_pointwise(name, Y, F).mean(axis=1), weights=w)
    np.testing.assert_allclose(float(loss.loss(CPU, Y, F, w)), expected, rtol=1e-12)


@pytest.mark.parametrize("name", list(LOSSES))
def test_negative_gradient_by_finite_differences(name):
    Y, F, _, _ = make_problem(name, 40, 4, 1)
    if name == "absolute_error":
        # keep away from the kink at y == f
        F = np.where(np.abs(Y - F) < 1e-3, F + 0.01, F)
    eps = 1e-6
    numeric = -(ref_pointwise(name, Y, F + eps) - ref_pointwise(name, Y, F - eps)) / (2 * eps)
    g = get_loss(name).negative_gradient(CPU, Y, F)
    assert g.dtype == np.float32
    np.testing.assert_allclose(g, numeric, atol=2e-5, rtol=1e-5)


def test_log_loss_gradient_is_label_minus_probability():
    Y, F, _, _ = make_problem("log_loss", 30, 2, 2)
    g = get_loss("log_loss").negative_gradient(CPU, Y, F)
    np.testing.assert_allclose(g, (Y > 0) - scipy.special.expit(F), atol=1e-7)
    proba = get_loss("log_loss").raw_to_output(CPU, np.array([[-800.0, 0.0, 800.0]]))
    np.testing.assert_allclose(proba, [[0.0, 0.5, 1.0]])


@pytest.mark.parametrize("name", list(LOSSES))
def test_init_estimate_minimises_the_loss(name):
    Y, _, _, w = make_problem(name, 61, 3, 3)
    rho = get_loss(name).init_estimate(CPU, Y, w)
    assert rho.shape == (3,)
    for j in range(3):
        y = Y[:, j]
        if name == "squared_error":
            np.testing.assert_allclose(rho[j], np.average(y, weights=w), rtol=1e-12)
        elif name == "log_loss":
            p = np.average(y > 0, weights=w)
            np.testing.assert_allclose(rho[j], scipy.special.logit(p), rtol=1e-10)
        else:
            # The minimum of a weighted sum of |y_i - c| is reached at a data point.
            best = min(float(np.sum(w * np.abs(y - c))) for c in y)
            assert float(np.sum(w * np.abs(y - rho[j]))) <= best + 1e-9


def test_log_loss_init_is_finite_for_constant_labels():
    Y = np.array([[1.0, -1.0], [1.0, -1.0], [1.0, -1.0]])
    rho = get_loss("log_loss").init_estimate(CPU, Y, np.ones(3))
    assert np.all(np.isfinite(rho))
    assert rho[0] > 20 and rho[1] < -20


@pytest.mark.parametrize("name", list(LOSSES))
@pytest.mark.parametrize("h_columns", [None, 1])
def test_step_minimises_each_output(name, h_columns):
    d = 4
    Y, F, H, w = make_problem(name, 80, d, 4, h_columns)
    loss = get_loss(name)
    rho = loss.fit_step(CPU, Y, F, H, w)
    assert rho.shape == (d,)
    for j in range(d):
        h = H[:, 0] if h_columns == 1 else H[:, j]
        y, f = Y[:, j], F[:, j]
        ours = ref_objective(name, y, f, h, w, rho[j])
        if name == "absolute_error":
            breaks = (y - f)[h != 0] / h[h != 0]
            best = min(ref_objective(name, y, f, h, w, b) for b in breaks)
            assert ours <= best + 1e-9
        else:
            res = scipy.optimize.minimize_scalar(
                lambda r: ref_objective(name, y, f, h, w, r), bracket=(-1.0, 1.0), tol=1e-12
            )
            assert ours <= res.fun + 1e-9
            np.testing.assert_allclose(rho[j], res.x, atol=1e-4)
            # first-order optimality by central finite differences
            eps = 1e-5
            slope = (
                ref_objective(name, y, f, h, w, rho[j] + eps)
                - ref_objective(name, y, f, h, w, rho[j] - eps)
            ) / (2 * eps)
            assert abs(slope) <= 1e-4 * float(np.sum(w))


@pytest.mark.parametrize("name", list(LOSSES))
def test_single_column_step_equals_broadcast_step(name):
    Y, F, H, w = make_problem(name, 70, 5, 5, h_columns=1)
    loss = get_loss(name)
    one = loss.fit_step(CPU, Y, F, H, w)
    full = loss.fit_step(CPU, Y, F, np.repeat(H, 5, axis=1), w)
    np.testing.assert_allclose(one, full, rtol=1e-8, atol=1e-10)


def test_squared_error_step_closed_form():
    Y, F, H, w = make_problem("squared_error", 50, 3, 6)
    rho = get_loss("squared_error").fit_step(CPU, Y, F, H, w)
    for j in range(3):
        r, h = Y[:, j] - F[:, j], H[:, j]
        # normal equation of the weighted least-squares fit r ~ rho h
        expected = np.linalg.lstsq((np.sqrt(w) * h)[:, None], np.sqrt(w) * r, rcond=None)[0][0]
        np.testing.assert_allclose(rho[j], expected, rtol=1e-10)


def test_squared_error_step_is_one_for_leaf_means():
    """A tree whose leaves are the mean residuals gets step 1 (least squares)."""
    rng = np.random.default_rng(7)
    n, d = 90, 3
    R = rng.standard_normal((n, d))
    leaf = rng.integers(0, 5, size=n)
    H = np.stack([R[leaf == k].mean(axis=0) for k in range(5)])[leaf]
    rho = get_loss("squared_error").fit_step(CPU, R, np.zeros((n, d)), H, np.ones(n))
    np.testing.assert_allclose(rho, np.ones(d), rtol=1e-12)


@pytest.mark.parametrize("name", list(LOSSES))
def test_step_is_zero_where_tree_predicts_zero(name):
    Y, F, H, w = make_problem(name, 40, 3, 8)
    H[:, 1] = 0.0
    rho = get_loss(name).fit_step(CPU, Y, F, H, w)
    assert rho[1] == 0.0
    assert np.all(rho[[0, 2]] != 0.0)


def test_zero_weight_samples_are_ignored():
    for name in LOSSES:
        Y, F, H, w = make_problem(name, 60, 3, 9)
        w[::2] = 0.0
        loss = get_loss(name)
        full = loss.fit_step(CPU, Y, F, H, w)
        kept = loss.fit_step(CPU, Y[1::2], F[1::2], H[1::2], w[1::2])
        np.testing.assert_allclose(full, kept, rtol=1e-8, atol=1e-12)
        np.testing.assert_allclose(
            loss.init_estimate(CPU, Y, w), loss.init_estimate(CPU, Y[1::2], w[1::2]), rtol=1e-12
        )


def test_logistic_step_is_bounded_on_separable_labels():
    """When the tree separates a label the minimiser is infinite: the step stops at the bound."""
    n = 20
    Y = np.ones((n, 1))
    F = np.zeros((n, 1))
    H = np.full((n, 1), 0.5)
    H[0, 0] = 2.0
    rho = get_loss("log_loss").fit_step(CPU, Y, F, H, np.ones(n))
    np.testing.assert_allclose(rho[0] * 2.0, MAX_LOGIT_STEP, rtol=1e-12)
    rho = get_loss("log_loss").fit_step(CPU, -Y, F, H, np.ones(n))
    np.testing.assert_allclose(rho[0] * 2.0, -MAX_LOGIT_STEP, rtol=1e-12)


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), rate=st.floats(0.05, 0.95))
def test_logistic_step_matches_scalar_minimiser(seed, rate):
    rng = np.random.default_rng(seed)
    n = 50
    y = np.where(rng.random(n) < rate, 1.0, -1.0)
    f = rng.standard_normal(n)
    h = rng.standard_normal(n)
    w = rng.random(n) + 0.05
    rho = get_loss("log_loss").fit_step(CPU, y[:, None], f[:, None], h[:, None], w)[0]
    bound = MAX_LOGIT_STEP / np.abs(h).max()
    res = scipy.optimize.minimize_scalar(
        lambda r: ref_objective("log_loss", y, f, h, w, r),
        bounds=(-bound, bound),
        method="bounded",
        options={"xatol": 1e-10},
    )
    assert ref_objective("log_loss", y, f, h, w, rho) <= res.fun + 1e-8


def test_get_loss_rejects_unknown_names():
    with pytest.raises(ValueError, match="loss must be one of .* got 'huber'"):
        get_loss("huber")
    with pytest.raises(ValueError, match="got 'log_loss'"):
        get_loss("log_loss", allowed=("squared_error", "absolute_error"))


# --------------------------------------------------------------------------
# Fused logistic kernels: numba (CPU) and array-expression (CUDA-side) versions
# --------------------------------------------------------------------------

BACKENDS = [Backend("numpy"), Backend("emulated")]


@pytest.mark.parametrize("backend", BACKENDS, ids=lambda b: b.name)
@pytest.mark.parametrize("h_columns", [None, 1])
def test_logistic_kernels_match_numpy_references(backend, h_columns):
    from gpurpo.ensemble.boosting.logistic_kernels import (
        logistic_derivatives,
        logistic_gradient,
        logistic_row_loss,
    )

    Y, F, H, w = make_problem("log_loss", 1300, 7, 11, h_columns)
    F[0, 0], F[1, 1] = 800.0, -800.0  # saturated scores stay finite
    w[::5] = 0.0
    rho = np.linspace(-1.0, 1.0, 7)
    T = (Y > 0).astype(float)
    P0 = scipy.special.expit(F)
    np.testing.assert_allclose(logistic_gradient(backend, Y, F), T - P0, atol=1e-7)
    np.testing.assert_allclose(
        logistic_row_loss(backend, Y, F), ref_pointwise("log_loss", Y, F).mean(axis=1),
        rtol=1e-12,
    )
    Hb = np.broadcast_to(H, Y.shape)
    P = scipy.special.expit(F + rho * Hb)
    first, second = logistic_derivatives(backend, Y, F, H, w, rho)
    np.testing.assert_allclose(first, (w[:, None] * Hb * (P - T)).sum(axis=0), rtol=1e-10)
    np.testing.assert_allclose(
        second, (w[:, None] * Hb**2 * P * (1 - P)).sum(axis=0), rtol=1e-10
    )
    columns = np.arange(7) % 3 == 0
    f_sub, s_sub = logistic_derivatives(backend, Y, F, H, w, rho, columns)
    np.testing.assert_allclose(f_sub, np.where(columns, first, 0.0), rtol=1e-12)
    np.testing.assert_allclose(s_sub, np.where(columns, second, 0.0), rtol=1e-12)


def test_logistic_step_is_the_same_on_every_backend():
    Y, F, H, w = make_problem("log_loss", 200, 5, 12)
    loss = get_loss("log_loss")
    np.testing.assert_allclose(
        loss.fit_step(BACKENDS[0], Y, F, H, w), loss.fit_step(BACKENDS[1], Y, F, H, w),
        rtol=1e-9,
    )


@pytest.mark.parametrize("backend", BACKENDS, ids=lambda b: b.name)
@pytest.mark.parametrize("wide", [False, True])
def test_logistic_line_with_leaves_matches_numpy_reference(backend, wide):
    """Leaf-tabulated derivatives (exp(-F) once, exp(-rho h) per leaf) against expit."""
    from gpurpo.ensemble.boosting.logistic_kernels import LogisticLine

    rng = np.random.default_rng(3 + wide)
    n, d, n_leaves = 900, 6, 9
    Y = np.where(rng.random((n, d)) < 0.3, 1.0, -1.0)
    F = 2.0 * rng.standard_normal((n, d))
    F[0, 0], F[1, 1], F[2, 2] = 800.0, -800.0, 349.0  # saturated scores
    leaf = rng.integers(0, n_leaves, size=n)
    values = rng.standard_normal((n_leaves, d if wide else 1))
    w = rng.random(n)
    w[::7] = 0.0
    H = np.broadcast_to(values[leaf], (n, d))
    T = (Y > 0).astype(float)
    columns = np.array([True, False, True, True, False, True])
    line = LogisticLine(backend, Y, F, values[leaf], w, leaf=leaf, values=values)
    for rho in (np.zeros(d), np.linspace(-2.0, 2.0, d)):
        P = scipy.special.expit(F + rho * H)
        first, second = (backend.to_host(a) for a in line.derivatives(rho, columns))
        want1 = np.where(columns, (w[:, None] * H * (P - T)).sum(axis=0), 0.0)
        want2 = np.where(columns, (w[:, None] * H**2 * P * (1 - P)).sum(axis=0), 0.0)
        np.testing.assert_allclose(first, want1, rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(second, want2, rtol=1e-10, atol=1e-12)
    # the same step whether the leaves are given or found from H
    loss = get_loss("log_loss")
    np.testing.assert_allclose(
        loss.fit_step(backend, Y, F, values[leaf], w, leaf=leaf, values=values),
        loss.fit_step(backend, Y, F, values[leaf], w),
        rtol=1e-9, atol=1e-12,
    )


def _weighted_lower_median(r, w):
    order = np.argsort(r, kind="stable")
    cum = np.cumsum(w[order])
    return r[order][np.argmax(cum >= 0.5 * cum[-1])]


@pytest.mark.parametrize("backend", BACKENDS, ids=lambda b: b.name)
@pytest.mark.parametrize("name", list(LOSSES))
def test_leaf_values_minimise_each_leaf_and_output(name, backend):
    """Per-(leaf, output) optimum against NumPy references (weights with zeros).

    The emulated backend runs the CUDA-side versions (array expressions and the
    CUDA leaf-accumulation kernel).
    """
    Y, F, _, w = make_problem(name, 240, 4, 21)
    w[::6] = 0.0
    leaf = np.random.default_rng(1).integers(0, 5, size=240)
    leaf[leaf == 3] = 4  # leaf 3 has no sample: value 0
    loss = get_loss(name)
    G = loss.negative_gradient(backend, Y, F)
    got = backend.to_host(loss.leaf_values(backend, Y, F, G, w, leaf, 5))
    assert got.shape == (5, 4)
    np.testing.assert_array_equal(got[3], 0.0)
    for lf in (0, 1, 2, 4):
        rows = (leaf == lf) & (w > 0)
        R, wl = Y[rows] - F[rows], w[rows]
        if name == "squared_error":
            want = (wl[:, None] * R).sum(axis=0) / wl.sum()
        elif name == "absolute_error":
            want = np.array([_weighted_lower_median(R[:, j], wl) for j in range(4)])
        else:
            P = scipy.special.expit(F[rows])
            g = (wl[:, None] * ((Y[rows] > 0) - P)).sum(axis=0)
            h = (wl[:, None] * P * (1 - P)).sum(axis=0)
            want = np.clip(g / h, -10.0, 10.0)
        np.testing.assert_allclose(got[lf], want, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("backend", BACKENDS, ids=lambda b: b.name)
@pytest.mark.parametrize("name", list(LOSSES))
def test_gradient_and_row_loss_equal_the_separate_computations(name, backend):
    Y, F, _, _ = make_problem(name, 300, 6, 31)
    if name == "log_loss":
        F[0, 0], F[1, 1], F[2, 2] = 800.0, -800.0, 0.0  # saturated and zero scores
    loss = get_loss(name)
    G, rows = (backend.to_host(a) for a in loss.gradient_and_row_loss(backend, Y, F))
    assert G.dtype == np.float32 and rows.shape == (300,)
    np.testing.assert_allclose(G, backend.to_host(loss.negative_gradient(backend, Y, F)),
                               rtol=0, atol=1e-7)
    pointwise = np.logaddexp(0.0, -Y * F) if name == "log_loss" else ref_pointwise(name, Y, F)
    np.testing.assert_allclose(rows, pointwise.mean(axis=1), rtol=1e-12)


@pytest.mark.parametrize("n, d, narrow", [(1, 1, True), (700, 5, True), (1100, 40, False),
                                          (300, 130, False)])
def test_logistic_cuda_kernels_agree_with_the_numba_kernels(n, d, narrow):
    """kernels/boost_logistic.cu on the emulator against the numba kernels: the
    derivatives bit for bit (the same products in the same order), the gradient and
    the row losses up to the last bits of exp and log1p."""
    from gpurpo.ensemble.boosting.logistic_kernels import (
        LogisticLine,
        logistic_gradient,
        logistic_gradient_and_row_loss,
        logistic_row_loss,
    )

    rng = np.random.default_rng(n + d)
    Y = np.where(rng.random((n, d)) < 0.3, 1.0, -1.0)
    F = 3.0 * rng.standard_normal((n, d))
    F.flat[:3] = (800.0, -800.0, 0.0)
    n_leaves = 6
    leaf = rng.integers(0, n_leaves, size=n)
    values = rng.standard_normal((n_leaves, 1 if narrow else d))
    w = rng.random(n)
    w[::4] = 0.0
    rho = np.linspace(-1.5, 1.5, d)
    columns = np.arange(d) % 3 != 1
    got = {}
    for backend in BACKENDS:
        line = LogisticLine(backend, Y, F, values[leaf], w, leaf=leaf, values=values)
        grad, rows = logistic_gradient_and_row_loss(backend, Y, F)
        got[backend.name] = [backend.to_host(a) for a in (
            *line.derivatives(rho), *line.derivatives(rho, columns), grad, rows,
            logistic_gradient(backend, Y, F), logistic_row_loss(backend, Y, F))]
    cpu, emulated = got["numpy"], got["emulated"]
    for a, b in zip(cpu[:4], emulated[:4]):
        np.testing.assert_array_equal(a, b)
    assert not emulated[2][~columns].any()
    for a, b in zip(cpu[4:], emulated[4:]):
        np.testing.assert_allclose(a, b, rtol=1e-14, atol=1e-7 if a.dtype == np.float32 else 0)
    np.testing.assert_array_equal(emulated[4], emulated[6])
    np.testing.assert_array_equal(emulated[5], emulated[7])
    np.testing.assert_allclose(emulated[5], np.logaddexp(0.0, -Y * F).mean(axis=1), rtol=1e-13)


def _reference_search(line, d, max_logit_step, max_iter, tol, margin=1e-6):
    """The logistic step search as NumPy array operations (the kernel's reference)."""
    hmax = np.asarray(line.max_abs_step_direction(), dtype=np.float64)
    active = hmax > 0
    cap = np.where(active, max_logit_step / np.where(active, hmax, 1.0), 0.0)
    zero = np.zeros(d)
    d0, curv = line.derivatives(zero)
    direction = np.where(d0 < 0, 1.0, -1.0)
    edge = direction * cap
    lo = np.where(direction > 0, zero, -cap)
    hi = np.where(direction > 0, cap, zero)
    edge_open = np.ones(d, dtype=bool)
    todo = active & (d0 != 0)
    rho, deriv = zero, d0
    for iterations in range(1, max_iter + 1):  # noqa: B007 (the count is returned)
        at_edge = rho == edge
        edge_open &= ~at_edge
        todo &= ~(at_edge & (deriv * direction < 0))
        lo = np.where(deriv < 0, rho, lo)
        hi = np.where(deriv > 0, rho, hi)
        newton = rho - deriv / np.where(curv > 0, curv, 1.0)
        width = margin * (hi - lo)
        beyond = edge_open & (direction * (newton - edge) > 0)
        inside = (curv > 0) & (((newton >= lo - width) & (newton <= hi + width)) | beyond)
        new = np.where(inside, np.clip(newton, lo, hi), 0.5 * (lo + hi))
        new = np.where(todo & (deriv != 0), new, rho)
        todo &= np.abs(new - rho) * hmax > tol
        rho = new
        if not todo.any():
            break
        deriv, curv = line.derivatives(rho, todo)
    else:
        lo = np.where(deriv < 0, rho, lo)
        hi = np.where(deriv > 0, rho, hi)
        rho = np.where(todo, np.where(direction > 0, lo, hi), rho)
    return np.where(active & (d0 != 0), rho, 0.0), iterations


@pytest.mark.parametrize("backend", BACKENDS, ids=lambda b: b.name)
@pytest.mark.parametrize("max_logit_step, max_iter", [(10.0, 40), (0.05, 40), (10.0, 2)])
def test_logistic_search_kernel_matches_the_array_search(backend, max_logit_step, max_iter):
    """boost_logistic_search_step against the search written as NumPy array operations:
    the same step bit for bit, with steps stopped at their bound (0.05 logits) and
    searches out of iterations (2)."""
    from gpurpo.ensemble.boosting.logistic_kernels import LogisticLine
    from gpurpo.ensemble.boosting.step_sizes import logistic_search

    rng = np.random.default_rng(7)
    n, d, n_leaves = 800, 9, 5
    Y = np.where(rng.random((n, d)) < 0.3, 1.0, -1.0)
    Y[:, 0] = 1.0  # separable: the step runs to its bound
    F = 2.0 * rng.standard_normal((n, d))
    leaf = rng.integers(0, n_leaves, size=n)
    values = rng.standard_normal((n_leaves, d))
    values[:, 1] = 0.0  # no direction: no step
    values[:, 0] = np.abs(values[:, 0])
    w = rng.random(n)
    want, iterations = _reference_search(
        LogisticLine(NUMPY, Y, F, None, w, leaf=leaf, values=values), d, max_logit_step,
        max_iter, 1e-5)
    with count_device_activity():  # the data on the (emulated) device, then the search
        line = LogisticLine(backend, *(backend.asarray(a) for a in (Y, F)), None,
                            backend.asarray(w), leaf=backend.asarray(leaf),
                            values=backend.asarray(values))
        with count_device_activity() as activity:
            got = logistic_search(backend, line, d, max_logit_step, max_iter, 1e-5)
        got = backend.to_host(got)
    np.testing.assert_array_equal(got, want)
    if backend.name == "emulated":
        # one copy to the host per iteration (the number of outputs still searching),
        # and 4 launches per iteration (the update, the leaves' exponentials and the
        # derivatives' two kernels) after a setup of at most 45
        assert activity.d2h == iterations and activity.h2d == 0
        assert activity.launches <= 45 + 4 * iterations, (activity.launches, iterations)
    assert got[1] == 0.0 and got[0] > 0
    if max_logit_step < 1:
        assert np.all(np.abs(got) * np.abs(values).max(axis=0) <= max_logit_step * (1 + 1e-12))


@pytest.mark.parametrize("narrow", [True, False])
def test_logistic_line_tables_match_numpy(narrow):
    """exp(-clip(F)), the labels' signs and the leaves' exp(-rho h) of the search, on the
    numba and emulated kernels: against NumPy within an ulp, the two bit for bit."""
    from gpurpo.ensemble.boosting.logistic_kernels import LogisticLine

    rng = np.random.default_rng(11)
    n, d, n_leaves = 300, 7, 4
    Y = np.where(rng.random((n, d)) < 0.4, 1.0, -1.0)
    F = 5.0 * rng.standard_normal((n, d))
    F.flat[:3] = (900.0, -900.0, np.nan)  # clamped both ways; NaN kept
    leaf = rng.integers(0, n_leaves, size=n)
    values = 100.0 * rng.standard_normal((n_leaves, 1 if narrow else d))
    rho = np.linspace(-4.0, 4.0, d)
    got = []
    for backend in BACKENDS:
        line = LogisticLine(backend, Y, F, None, np.ones(n), leaf=leaf, values=values)
        T = backend.xp.empty((n_leaves, d))
        backend.kernel("boost_logistic_leaf_exponentials")(rho, line.values, T, 350.0)
        got.append([backend.to_host(a) for a in (line.positive, line.E, T)])
        np.testing.assert_array_equal(got[-1][0], Y > 0)
        np.testing.assert_allclose(got[-1][1], np.exp(-np.clip(F, -350, 350)), rtol=1e-15)
        assert np.isnan(got[-1][1].flat[2])
        np.testing.assert_allclose(got[-1][2], np.exp(-np.clip(rho * values, -350, 350)),
                                   rtol=1e-15)
    for a, b in zip(*got):
        np.testing.assert_array_equal(a, b)


def _reference_leaf_sums(Y, F, leaf, w, n_leaves, rows_per_block):
    """The logistic per-leaf sums in the contract's order: each block of rows in row
    order from 0, then the blocks in order from 0 (plain Python floats, libm's exp)."""
    n, d = F.shape
    parts = []
    for first in range(0, n, rows_per_block):
        grad = np.zeros((n_leaves, d))
        curv = np.zeros((n_leaves, d))
        for i in range(first, min(n, first + rows_per_block)):
            if w[i] == 0.0:
                continue
            for j in range(d):
                e = math.exp(-abs(F[i, j]))
                r = 1.0 / (1.0 + e)
                p = r if F[i, j] >= 0.0 else e * r
                t = 1.0 if Y[i, j] > 0 else 0.0
                grad[leaf[i], j] += w[i] * (t - p)
                curv[leaf[i], j] += w[i] * (p * (1.0 - p))
        parts.append((grad, curv))
    grad = np.zeros((n_leaves, d))
    curv = np.zeros((n_leaves, d))
    for g, h in parts:
        grad += g
        curv += h
    return grad, curv


@pytest.mark.parametrize("n, d, n_leaves", [(1, 1, 1), (700, 5, 6), (300, 33, 4)])
def test_logistic_leaf_sums_are_summed_in_row_blocks_on_every_backend(n, d, n_leaves):
    """The per-leaf gradient and curvature sums of ``leaf_step="per_leaf"``: the
    contract's order of summation (against a Python reference), so that the numba
    and the CUDA kernels give the same bits run after run."""
    from gpurpo.ensemble.boosting.logistic_kernels import logistic_leaf_sums
    from gpurpo.ensemble.boosting.round_kernels import row_blocks

    rng = np.random.default_rng(n + d)
    Y = np.where(rng.random((n, d)) < 0.3, 1.0, -1.0)
    F = 3.0 * rng.standard_normal((n, d))
    F.flat[:2] = (800.0, -800.0)[: F.size]
    leaf = rng.integers(0, n_leaves, size=n)
    w = rng.random(n)
    w[1::4] = 0.0
    want = _reference_leaf_sums(Y, F, leaf, w, n_leaves, row_blocks(n, n_leaves * d)[1])
    for backend in BACKENDS:
        for _ in range(2):
            got = [backend.to_host(a) for a in logistic_leaf_sums(backend, Y, F, leaf, w,
                                                                   n_leaves)]
            for a, b in zip(got, want):
                np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("name", ["squared_error", "log_loss"])
def test_per_leaf_values_are_the_same_bits_on_every_backend(name):
    Y, F, _, w = make_problem(name, 900, 6, 3)
    w[::7] = 0.0
    leaf = np.random.default_rng(2).integers(0, 9, size=900)
    loss = get_loss(name)
    got = []
    for backend in BACKENDS:
        G = loss.negative_gradient(backend, Y, F)
        for _ in range(2):
            got.append(backend.to_host(loss.leaf_values(backend, Y, F, G, w, leaf, 9)))
    for values in got[1:]:
        np.testing.assert_array_equal(values, got[0])
