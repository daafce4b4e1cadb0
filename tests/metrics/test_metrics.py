"""gpurpo.metrics against scikit-learn and plain NumPy references."""

from __future__ import annotations

import contextlib
import warnings
from unittest import mock

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.metrics import (
    average_precision_score,
    label_ranking_average_precision_score,
    mean_squared_error,
    r2_score,
)
from sklearn.metrics import (
    hamming_loss as sk_hamming_loss,
)

from gpurpo import metrics as M
from gpurpo.backend import cupy_available, use_backend
from gpurpo.metrics import _ranking_counts as ranking_counts
from gpurpo.metrics import _ranking_kernels

FUZZ = settings(max_examples=40, deadline=None)


def _case(seed: int, n: int, d: int, levels: int, density: float):
    """Random labels and scores with many ties (``levels`` distinct scores)."""
    rng = np.random.default_rng(seed)
    Y = (rng.random((n, d)) < density).astype(np.int64)
    S = rng.integers(0, levels, size=(n, d)) / max(levels - 1, 1)
    return Y, S


cases = st.tuples(
    st.integers(0, 2**31 - 1),
    st.integers(1, 15),
    st.integers(1, 12),
    st.integers(1, 5),
    st.floats(0.05, 0.9),
    st.integers(1, 6),
)


# --------------------------------------------------------------------------
# LRAP
# --------------------------------------------------------------------------


# LRAP has two code paths in each of its two versions (the numba kernel of the CPU,
# the array version of CUDA backends, run here on the emulated backend): direct
# counting when rows have few relevant labels and one sort per row otherwise; all
# four are held against scikit-learn.
PATHS = pytest.mark.parametrize(
    "lrap_path", ["kernel-direct", "kernel-sorted", "array-direct", "array-sorted"])


@contextlib.contextmanager
def _lrap_path(name):
    """Run LRAP by the version and the path ``name`` (see PATHS)."""
    version, path = name.split("-")
    limit = 10**9 if path == "direct" else 0
    with contextlib.ExitStack() as stack:
        if version == "kernel":
            stack.enter_context(
                mock.patch.object(_ranking_kernels, "direct_limit", lambda d: limit))
        else:
            stack.enter_context(use_backend("emulated"))
            stack.enter_context(mock.patch.object(ranking_counts, "_FEW_RELEVANT", limit))
        yield


@PATHS
@FUZZ
@given(cases)
def test_lrap_equals_sklearn_on_rows_with_positives(lrap_path, case):
    seed, n, d, levels, density, chunk = case
    Y, S = _case(seed, n, d, levels, density)
    Y[Y.sum(axis=1) == 0, 0] = 1
    expected = label_ranking_average_precision_score(Y, S)
    with _lrap_path(lrap_path):
        for yt in (Y, sp.csr_matrix(Y)):
            got = M.label_ranking_average_precision(yt, S)
            assert got == pytest.approx(expected, rel=1e-12)
            got = M.label_ranking_average_precision(yt, S, chunk_size=chunk)
            assert got == pytest.approx(expected, rel=1e-12)


@PATHS
@FUZZ
@given(cases)
def test_lrap_skips_rows_without_relevant_labels(lrap_path, case):
    with _lrap_path(lrap_path):
        _check_lrap_skipping(case)


def _check_lrap_skipping(case):
    seed, n, d, levels, density, chunk = case
    Y, S = _case(seed, n, d, levels, density)
    has = Y.sum(axis=1) > 0
    if has.any():
        expected = label_ranking_average_precision_score(Y[has], S[has])
        got = M.label_ranking_average_precision(sp.csr_matrix(Y), S, chunk_size=chunk)
        assert got == pytest.approx(expected, rel=1e-12)
    # scikit-learn's convention (score 1 for such rows) on the full matrix
    got_one = M.label_ranking_average_precision(Y, S, no_relevant="one", chunk_size=chunk)
    assert got_one == pytest.approx(label_ranking_average_precision_score(Y, S), rel=1e-12)


def _lrap_paper(Y, S):
    """Joly et al. eq. 6 written out with explicit loops."""
    total, count = 0.0, 0
    for y, s in zip(Y, S):
        rel = np.flatnonzero(y)
        if rel.size == 0:
            continue
        acc = 0.0
        for j in rel:
            above = s >= s[j]
            acc += np.sum(above & (y == 1)) / np.sum(above)
        total += acc / rel.size
        count += 1
    return total / count


@pytest.mark.parametrize("n,d,density", [(30, 200, 0.5), (40, 60, 0.05)])
def test_lrap_default_path_choice_on_dense_and_sparse_rows(n, d, density):
    Y, S = _case(7, n, d, 50, density)
    Y[:, 0] = 1
    assert M.label_ranking_average_precision(Y, S) == pytest.approx(
        label_ranking_average_precision_score(Y, S), rel=1e-12
    )


@PATHS
def test_lrap_reads_csr_entries_and_float32_scores(lrap_path):
    """A CSR y_true with stored zeros (not relevant), unsorted column indices and
    float32 scores with ties: scikit-learn's value on the dense float64 data."""
    Y, S = _case(3, 60, 45, 7, 0.3)
    Y[:, 0] = 1
    csr = sp.csr_matrix(Y)
    rows = np.repeat(np.arange(60), np.diff(csr.indptr))
    order = np.lexsort((-csr.indices, rows))  # indices decreasing within each row
    data = csr.data[order].astype(np.float64)
    data[::5] = 0.0  # stored zeros: these labels are not relevant
    unsorted = sp.csr_matrix((data, csr.indices[order], csr.indptr), shape=Y.shape)
    assert not unsorted.has_sorted_indices
    expected = label_ranking_average_precision_score(unsorted.toarray(), S.astype(np.float32))
    with _lrap_path(lrap_path):
        got = M.label_ranking_average_precision(unsorted, S.astype(np.float32))
    assert got == pytest.approx(expected, rel=1e-12)


def test_lrap_matches_the_paper_formula_and_a_hand_example():
    Y = np.array([[1, 0, 0], [0, 0, 1]])
    S = np.array([[0.75, 0.5, 1.0], [1.0, 0.2, 0.1]])
    # sample 1: label 0 ranked 2nd -> 1/2; sample 2: label 2 ranked 3rd -> 1/3
    assert M.label_ranking_average_precision(Y, S) == pytest.approx((1 / 2 + 1 / 3) / 2)
    rng = np.random.default_rng(3)
    Y = (rng.random((40, 25)) < 0.2).astype(int)
    S = np.round(rng.random((40, 25)), 1)
    assert M.label_ranking_average_precision(Y, S) == pytest.approx(_lrap_paper(Y, S), rel=1e-12)


def test_lrap_with_no_relevant_label_anywhere_is_nan_with_warning():
    with pytest.warns(RuntimeWarning, match="no sample"):
        value = M.label_ranking_average_precision(np.zeros((3, 4)), np.ones((3, 4)))
    assert np.isnan(value)
    assert M.label_ranking_average_precision(
        np.zeros((3, 4)), np.ones((3, 4)), no_relevant="one"
    ) == 1.0


def test_lrap_large_sparse_label_space_in_small_chunks():
    rng = np.random.default_rng(0)
    n, d = 6, 40_000
    rows = np.repeat(np.arange(n), 5)
    cols = rng.integers(0, d, size=rows.size)
    Y = sp.csr_matrix((np.ones(rows.size), (rows, cols)), shape=(n, d))
    Y.data[:] = 1.0
    S = rng.integers(0, 1000, size=(n, d)).astype(np.float64)
    expected = label_ranking_average_precision_score(Y, S)
    assert M.label_ranking_average_precision(Y, S) == pytest.approx(expected, rel=1e-12)
    assert M.label_ranking_average_precision(Y, S, chunk_size=1) == pytest.approx(
        expected, rel=1e-12
    )


def test_sparse_scores_are_accepted():
    rng = np.random.default_rng(1)
    Y = (rng.random((20, 15)) < 0.3).astype(float)
    Y[:, 0] = 1
    S = sp.random(20, 15, density=0.3, random_state=2, format="csr")
    dense = S.toarray()
    assert M.label_ranking_average_precision(Y, S) == pytest.approx(
        label_ranking_average_precision_score(Y, dense)
    )
    assert M.micro_auprc(Y, S) == pytest.approx(
        average_precision_score(Y, dense, average="micro")
    )


# --------------------------------------------------------------------------
# micro AUPRC
# --------------------------------------------------------------------------


@FUZZ
@given(cases)
def test_micro_auprc_equals_sklearn_with_ties(case):
    seed, n, d, levels, density, chunk = case
    Y, S = _case(seed, n, d, levels, density)
    if Y.sum() == 0:
        Y[0, 0] = 1
    expected = average_precision_score(Y, S, average="micro")
    assert M.micro_auprc(Y, S) == pytest.approx(expected, rel=1e-12)
    assert M.micro_auprc(sp.csr_matrix(Y), S, chunk_size=chunk) == pytest.approx(
        expected, rel=1e-12
    )


def test_micro_auprc_without_positives_matches_sklearn_value():
    S = np.random.default_rng(0).random((4, 3))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        expected = average_precision_score(np.zeros((4, 3)), S, average="micro")
    with pytest.warns(RuntimeWarning, match="no positive"):
        assert M.micro_auprc(np.zeros((4, 3)), S) == expected == 0.0


def test_micro_auprc_perfect_ranking_is_one():
    Y = np.array([[1, 0, 0], [0, 1, 1]])
    assert M.micro_auprc(Y, Y * 2.0 + 0.5) == 1.0


# --------------------------------------------------------------------------
# precision@k
# --------------------------------------------------------------------------


def _precision_at_k_reference(Y, S, k):
    hits = []
    for y, s in zip(Y, S):
        top = np.argsort(-s, kind="stable")[:k]
        hits.append(y[top].sum() / k)
    return float(np.mean(hits))


@pytest.mark.parametrize("version", ["kernel", "array"])
@FUZZ
@given(cases, st.integers(1, 12))
def test_precision_at_k_equals_reference_with_ties(version, case, k):
    """The CPU kernel and the array version of CUDA backends (on the emulated
    backend), dense and CSR y_true, float64 and float32 scores."""
    seed, n, d, levels, density, chunk = case
    k = min(k, d)
    Y, S = _case(seed, n, d, levels, density)
    expected = _precision_at_k_reference(Y, S, k)
    with (use_backend("emulated") if version == "array" else contextlib.nullcontext()):
        assert M.precision_at_k(Y, S, k) == pytest.approx(expected, rel=1e-12)
        assert M.precision_at_k(sp.csr_matrix(Y), S, k, chunk_size=chunk) == pytest.approx(
            expected, rel=1e-12
        )
        assert M.precision_at_k(Y, S.astype(np.float32), k) == pytest.approx(
            _precision_at_k_reference(Y, S.astype(np.float32), k), rel=1e-12
        )


def test_precision_at_d_is_mean_label_density():
    Y, S = _case(5, 30, 8, 3, 0.4)
    assert M.precision_at_k(Y, S, 8) == pytest.approx(Y.mean())


def test_precision_at_k_rejects_bad_k():
    Y, S = _case(0, 4, 5, 3, 0.5)
    with pytest.raises(ValueError, match="k must be <= 5"):
        M.precision_at_k(Y, S, 6)
    with pytest.raises(ValueError, match="k must be >= 1"):
        M.precision_at_k(Y, S, 0)


# --------------------------------------------------------------------------
# Regression metrics and Hamming loss
# --------------------------------------------------------------------------


@FUZZ
@given(st.integers(0, 2**31 - 1), st.integers(2, 20), st.integers(1, 8), st.integers(1, 6))
def test_macro_r2_equals_sklearn_uniform_average(seed, n, d, chunk):
    rng = np.random.default_rng(seed)
    T = rng.standard_normal((n, d))
    P = T + rng.standard_normal((n, d))
    expected = r2_score(T, P, multioutput="uniform_average")
    assert M.macro_r2(T, P) == pytest.approx(expected, rel=1e-10, abs=1e-12)
    assert M.macro_r2(T, P, chunk_size=chunk) == pytest.approx(expected, rel=1e-10, abs=1e-12)


def test_macro_r2_constant_outputs_and_sparse_targets_like_sklearn():
    rng = np.random.default_rng(0)
    T = (rng.random((30, 6)) < 0.3).astype(float)
    T[:, 0] = 0.0  # constant, predicted exactly -> 1
    T[:, 1] = 1.0  # constant, predicted wrongly -> 0
    P = rng.random((30, 6))
    P[:, 0] = 0.0
    expected = r2_score(T, P, multioutput="uniform_average")
    assert M.macro_r2(sp.csr_matrix(T), P) == pytest.approx(expected, rel=1e-12)
    assert M.macro_r2(T, P, chunk_size=7) == pytest.approx(expected, rel=1e-12)


def test_macro_r2_needs_two_samples():
    with pytest.raises(ValueError, match="at least 2 samples"):
        M.macro_r2(np.ones((1, 3)), np.ones((1, 3)))


def test_rmse_is_root_of_entrywise_mean_squared_error():
    rng = np.random.default_rng(4)
    T = (rng.random((25, 9)) < 0.2).astype(float)
    P = rng.random((25, 9))
    per_entry = np.sqrt(mean_squared_error(T, P))
    assert M.rmse(T, P) == pytest.approx(per_entry, rel=1e-12)
    assert M.rmse(sp.csr_matrix(T), P, chunk_size=4) == pytest.approx(per_entry, rel=1e-12)
    per_sample_norm = np.sqrt(np.mean(np.sum((T - P) ** 2, axis=1)))
    assert M.rmse(T, P, normalize=False) == pytest.approx(per_sample_norm, rel=1e-12)


@FUZZ
@given(cases)
def test_hamming_loss_equals_sklearn(case):
    seed, n, d, _, density, chunk = case
    rng = np.random.default_rng(seed + 1)
    Y = (rng.random((n, d)) < density).astype(int)
    P = (rng.random((n, d)) < 0.5).astype(int)
    expected = sk_hamming_loss(Y, P)
    for yt, yp in [(Y, P), (sp.csr_matrix(Y), P), (Y, sp.csr_matrix(P)),
                   (sp.csr_matrix(Y), sp.csr_matrix(P))]:
        assert M.hamming_loss(yt, yp, chunk_size=chunk) == pytest.approx(expected, rel=1e-12)


# --------------------------------------------------------------------------
# Validation
# --------------------------------------------------------------------------

ALL = [
    (M.label_ranking_average_precision, "y_score"),
    (M.micro_auprc, "y_score"),
    (M.precision_at_k, "y_score"),
    (M.macro_r2, "y_pred"),
    (M.rmse, "y_pred"),
    (M.hamming_loss, "y_pred"),
]


@pytest.mark.parametrize("metric,other", ALL)
def test_bad_input_names_the_argument(metric, other):
    Y = np.array([[1, 0, 1], [0, 1, 0]])
    with pytest.raises(ValueError, match=f"y_true and {other} must have the same shape"):
        metric(Y, np.zeros((2, 4)))
    with pytest.raises(ValueError, match="y_true must be a 2-D array"):
        metric(np.array([1, 0, 1]), np.zeros(3))
    with pytest.raises(ValueError, match=f"{other} must be a 2-D array"):
        metric(Y, np.zeros((2, 3, 1)))
    with pytest.raises(ValueError, match=f"{other} contains NaN"):
        metric(Y, np.array([[0.5, np.nan, 0.0], [0.0, 1.0, 0.0]]))
    with pytest.raises(ValueError, match="y_true contains NaN"):
        metric(np.array([[1.0, np.nan, 0.0], [0.0, 1.0, 0.0]]), np.zeros((2, 3)))
    with pytest.raises(ValueError, match="chunk_size must be >= 1"):
        metric(Y, np.zeros((2, 3)), chunk_size=0)
    with pytest.raises(ValueError, match="chunk_size must be >= 1"):
        metric(sp.csr_matrix(Y), sp.csr_matrix(Y), chunk_size=0)


@pytest.mark.parametrize(
    "metric", [M.label_ranking_average_precision, M.micro_auprc, M.precision_at_k,
               M.hamming_loss]
)
def test_label_metrics_require_binary_y_true(metric):
    with pytest.raises(ValueError, match="y_true must be a 0/1 label indicator"):
        metric(np.array([[2, 0], [0, 1]]), np.zeros((2, 2)))
    with pytest.raises(ValueError, match="y_true must be a 0/1 label indicator"):
        metric(sp.csr_matrix(np.array([[0.5, 0], [0, 1]])), np.zeros((2, 2)))


def test_hamming_loss_requires_binary_predictions():
    with pytest.raises(ValueError, match="y_pred must be a 0/1 label indicator"):
        M.hamming_loss(np.eye(2), np.full((2, 2), 0.7))


def test_unknown_no_relevant_option():
    with pytest.raises(ValueError, match="no_relevant must be one of"):
        M.label_ranking_average_precision(np.eye(2), np.eye(2), no_relevant="drop")


# --------------------------------------------------------------------------
# CuPy
# --------------------------------------------------------------------------


@pytest.mark.gpu
@pytest.mark.skipif(not cupy_available(), reason="needs CuPy and a CUDA device")
def test_cupy_inputs_give_the_numpy_results():
    import cupy
    import cupyx.scipy.sparse as cusp

    Y, S = _case(11, 60, 40, 4, 0.2)
    Y[Y.sum(axis=1) == 0, 0] = 1
    P = (np.random.default_rng(2).random(Y.shape) < 0.3).astype(float)
    Yg = cupy.asarray(Y, dtype=cupy.float64)
    Ysg = cusp.csr_matrix(cupy.asarray(Y, dtype=cupy.float64))
    Sg = cupy.asarray(S)
    Pg = cupy.asarray(P)
    for yt in (Yg, Ysg):
        assert M.label_ranking_average_precision(yt, Sg, chunk_size=7) == pytest.approx(
            label_ranking_average_precision_score(Y, S), rel=1e-12
        )
        assert M.micro_auprc(yt, Sg, chunk_size=7) == pytest.approx(
            average_precision_score(Y, S, average="micro"), rel=1e-12
        )
        assert M.precision_at_k(yt, Sg, 3) == pytest.approx(
            _precision_at_k_reference(Y, S, 3), rel=1e-12
        )
        assert M.macro_r2(yt, Sg) == pytest.approx(r2_score(Y, S), rel=1e-10)
        assert M.rmse(yt, Sg) == pytest.approx(np.sqrt(mean_squared_error(Y, S)), rel=1e-12)
        assert M.hamming_loss(yt, Pg) == pytest.approx(sk_hamming_loss(Y, P), rel=1e-12)
    assert M.hamming_loss(Ysg, cusp.csr_matrix(Pg)) == pytest.approx(sk_hamming_loss(Y, P))


def test_repeated_sparse_entries_count_as_their_sum():
    # two 1s stored at one position are a 2 (SciPy's meaning): not a 0/1 label;
    # 0.5 + 0.5 is a 1; the caller's matrix is left as it was
    scores = np.array([[1.0, 0.0], [0.0, 1.0]])
    twice = sp.csr_matrix(
        (np.ones(4), np.array([0, 0, 1, 1]), np.array([0, 2, 4])), shape=(2, 2))
    for metric, kwargs in ((M.precision_at_k, {"k": 1}), (M.hamming_loss, {}),
                           (M.label_ranking_average_precision, {})):
        with pytest.raises(ValueError, match="y_true must be a 0/1 label indicator"):
            metric(twice, scores, **kwargs)
    halves = sp.csr_matrix(
        (np.array([0.5, 0.5, 1.0]), np.array([0, 0, 1]), np.array([0, 2, 3])), shape=(2, 2))
    assert M.precision_at_k(halves, scores, k=1) == 1.0
    assert M.hamming_loss(halves, scores) == 0.0
    assert not halves.has_canonical_format
    np.testing.assert_array_equal(halves.data, [0.5, 0.5, 1.0])


def test_input_checks_stay_within_the_memory_budget(monkeypatch):
    # the finiteness and 0/1 checks reduce blocks of rows (no boolean copy of a whole input)
    import tracemalloc

    monkeypatch.setattr(M._blocks, "_MEMORY_BUDGET", 2**20)
    rng = np.random.default_rng(0)
    y_true = (rng.random((1000, 2000)) < 0.01).astype(float)  # 16 MB, 2e6 cells
    scores = rng.random((1000, 2000))
    cases = ((M.precision_at_k, (y_true, scores), {"k": 5}),
             (M.hamming_loss, (y_true, (scores > 0.5).astype(float)), {}),
             (M.label_ranking_average_precision, (y_true, scores), {}),
             (M.macro_r2, (y_true, scores), {}))
    for metric, args, kwargs in cases:
        tracemalloc.start()
        try:
            metric(*args, **kwargs)
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        assert peak < 1.5 * 2**20, (metric.__name__, peak)
