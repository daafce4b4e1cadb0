"""gpurpo.dask's label-space linear algebra on a LocalCluster of 2 worker processes.

References: gpurpo.linalg on the same in-memory matrix with the same seed (the
same draws, so the same result up to rounding) and NumPy's exact SVD.
"""

import numpy as np
import pytest
import scipy.sparse as sp

da = pytest.importorskip("dask.array")
pytest.importorskip("distributed")

from gpurpo import dask as gdask  # noqa: E402
from gpurpo import linalg  # noqa: E402


def _labels(n=3000, d=60, rank=8, seed=0):
    """A tall label-like matrix of low rank plus noise."""
    rng = np.random.default_rng(seed)
    return rng.normal(size=(n, rank)) @ rng.normal(size=(rank, d)) + 0.05 * rng.normal(size=(n, d))


def _row_chunks(A, rows=700):
    return da.from_array(A, chunks=(rows, A.shape[1]))


def test_randomized_svd_equals_the_single_machine_result(client):
    A = _labels()
    U, s, Vt = gdask.randomized_svd(_row_chunks(A), 5, random_state=3)
    assert isinstance(U, da.Array) and U.chunks[0] == _row_chunks(A).chunks[0]
    U_ref, s_ref, Vt_ref = linalg.randomized_svd(A, 5, random_state=3)
    np.testing.assert_allclose(s, s_ref, rtol=1e-10)
    np.testing.assert_allclose(Vt, Vt_ref, atol=1e-9)
    np.testing.assert_allclose(U.compute(), U_ref, atol=1e-9)
    # and the truth: the exact leading singular values
    np.testing.assert_allclose(s, np.linalg.svd(A, compute_uv=False)[:5], rtol=1e-8)


@pytest.mark.parametrize("normalizer", ["QR", "none", "householder"])
def test_range_finder_spans_the_dominant_subspace(client, normalizer):
    A = _labels(seed=1)
    Q = gdask.randomized_range_finder(_row_chunks(A), 10, 2, random_state=0,
                                      power_iteration_normalizer=normalizer).compute()
    np.testing.assert_allclose(Q.T @ Q, np.eye(10), atol=1e-10)
    U8 = np.linalg.svd(A, full_matrices=False)[0][:, :8]
    # the top-8 left singular vectors lie in span(Q)
    np.testing.assert_allclose(np.linalg.norm(U8 - Q @ (Q.T @ U8)), 0.0, atol=1e-6)


def test_leverage_scores_and_cssp_select_equal_the_single_machine_ones(client):
    Y = (_labels(seed=2) > 0.5).astype(np.float64)
    Yd = _row_chunks(Y, 500)
    scores = gdask.leverage_scores(Yd, 6, random_state=5)
    np.testing.assert_allclose(scores, linalg.leverage_scores(Y, 6, random_state=5), atol=1e-9)
    np.testing.assert_allclose(scores.sum(), 6.0, rtol=1e-9)
    for method in ("sample", "sample_qr"):
        got, trials = gdask.cssp_select(Yd, 6, random_state=5, method=method)
        want, want_trials = linalg.cssp_select(Y, 6, random_state=5, method=method)
        np.testing.assert_array_equal(got, want)
        assert trials == want_trials


def test_column_blocks_and_integer_or_sparse_blocks_are_accepted(client):
    A = np.round(_labels(seed=4) * 3)
    blocky = da.from_array(A.astype(np.int64), chunks=(800, 25))  # blocks of columns: joined
    s = gdask.randomized_svd(blocky, 4, random_state=0)[1]
    np.testing.assert_allclose(s, linalg.randomized_svd(A, 4, random_state=0)[1], rtol=1e-10)
    sparse_blocks = _row_chunks(A).map_blocks(sp.csr_matrix, dtype=A.dtype)
    s_sparse = gdask.randomized_svd(sparse_blocks, 4, random_state=0)[1]
    np.testing.assert_allclose(s_sparse, s, rtol=1e-10)


@pytest.mark.parametrize(
    "make, error, match",
    [
        (lambda: np.ones((10, 3)), TypeError, "A must be a dask.array.Array, got ndarray"),
        (lambda: da.ones((10,), chunks=5), ValueError, r"A must be a 2-D dask array, got shape \(10,\)"),
        (lambda: da.ones((3, 10), chunks=2), ValueError, r"A must be tall .* got shape \(3, 10\)"),
        (lambda: da.ones((10, 3), chunks=5, dtype=complex), ValueError, "Complex data not supported: A"),
        (lambda: (lambda x: x[x[:, 0] > 0])(da.ones((10, 3), chunks=5)), ValueError, "unknown chunk sizes"),
    ],
)
def test_bad_input_is_caught_from_the_metadata(make, error, match):
    # no client needed: nothing is computed
    with pytest.raises(error, match=match):
        gdask.randomized_svd(make(), 2)


def test_bad_parameters_are_named():
    A = da.ones((20, 4), chunks=10)
    with pytest.raises(ValueError, match="n_components"):
        gdask.randomized_svd(A, 5)
    with pytest.raises(ValueError, match="size must be between 1 and the number of rows of A"):
        gdask.randomized_range_finder(A, 0, 1)
    with pytest.raises(ValueError, match="method"):
        gdask.cssp_select(A, 2, method="greedy")


def test_gpurpo_imports_without_dask():
    import subprocess
    import sys

    code = "import sys, gpurpo, gpurpo.linalg, gpurpo.ensemble; assert 'dask' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)
