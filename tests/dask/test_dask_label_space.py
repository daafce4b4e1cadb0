"""gpurpo.dask's PCA, PLST and label reducers on a LocalCluster of 2 worker processes.

References: the single-machine gpurpo functions and reducers on the same
in-memory matrix with the same seed (the same draws, so the same result up to
rounding), the eigenvalues of the Gram matrix for the optimal rank-k error,
and NumPy least squares for the decoders.
"""

import pickle

import numpy as np
import pytest
import scipy.sparse as sp

da = pytest.importorskip("dask.array")
distributed = pytest.importorskip("distributed")

from gpurpo import dask as gdask  # noqa: E402
from gpurpo import linalg  # noqa: E402
from gpurpo.label_space import reducers  # noqa: E402


def _multilabel(n=2400, d=40, seed=0):
    """0/1 labels with correlated columns (a few latent topics) and unequal means."""
    rng = np.random.default_rng(seed)
    topics = rng.random((n, 4)) < 0.3
    loads = rng.random((4, d)) < 0.4
    noise = rng.random((n, d)) < 0.03
    return ((topics @ loads > 0) | noise).astype(np.float64)


def _rows(A, rows=600, sparse=False):
    blocks = da.from_array(A, chunks=(rows, A.shape[1]))
    return blocks.map_blocks(sp.csr_matrix, dtype=A.dtype) if sparse else blocks


@pytest.mark.parametrize("sparse", [False, True])
def test_randomized_pca_and_plst_equal_the_single_machine_ones(client, sparse):
    Y = _multilabel()
    got = gdask.randomized_pca(_rows(Y, sparse=sparse), 5, random_state=3)
    want = linalg.randomized_pca(Y, 5, random_state=3)
    np.testing.assert_allclose(got.mean, Y.mean(axis=0), rtol=1e-12)
    np.testing.assert_allclose(got.explained_variance, want.explained_variance, rtol=1e-10)
    np.testing.assert_allclose(got.components, want.components, atol=1e-9)
    components, mean = gdask.plst(_rows(Y, sparse=sparse), 5, random_state=3)
    np.testing.assert_allclose(components, want.components, atol=1e-9)
    # the truth: the variances are the top eigenvalues of the covariance matrix
    exact = np.linalg.eigvalsh(np.cov(Y, rowvar=False))[::-1][:5]
    np.testing.assert_allclose(got.explained_variance, exact, rtol=1e-6)


@pytest.mark.parametrize("name", ["plst", "random", "cssp"])
@pytest.mark.parametrize("sparse", [False, True])
def test_reducers_fit_as_on_one_machine(client, name, sparse):
    Y = _multilabel(seed=1)
    fitted = gdask.make_reducer(name, 6, random_state=7).fit(_rows(Y, sparse=sparse))
    local = reducers.make_reducer(name, 6, random_state=7).fit(Y)
    np.testing.assert_allclose(fitted.decoder_, local.decoder_, atol=1e-8)
    if local.mean_ is not None:
        np.testing.assert_allclose(fitted.mean_, local.mean_, atol=1e-12)
    if name == "cssp":
        np.testing.assert_array_equal(fitted.indices_, local.indices_)
        # D = Y_C^+ Y is the least-squares decoder (Bi & Kwok, Algorithm 1, line 11)
        Z = Y[:, fitted.indices_]
        np.testing.assert_allclose(fitted.decoder_, np.linalg.lstsq(Z, Y, rcond=None)[0], atol=1e-8)
    # encode / decode block by block on Dask arrays, and in memory
    Z = fitted.encode(_rows(Y, sparse=sparse))
    assert isinstance(Z, da.Array) and Z.shape == (Y.shape[0], 6)
    np.testing.assert_allclose(Z.compute(), local.encode(Y), atol=1e-8)
    Y_hat = fitted.decode(Z)
    np.testing.assert_allclose(Y_hat.compute(), local.decode(local.encode(Y)), atol=1e-8)
    np.testing.assert_allclose(fitted.encode(Y), local.encode(Y), atol=1e-8)


def test_to_local_is_an_ordinary_picklable_reducer(client):
    Y = _multilabel(seed=2)
    fitted = gdask.PLSTReducer(4, random_state=0).fit(_rows(Y))
    plain = pickle.loads(pickle.dumps(fitted.to_local()))
    assert type(plain) is reducers.PLSTReducer
    np.testing.assert_allclose(plain.decode(plain.encode(Y)), fitted.decode(fitted.encode(Y)))


def test_in_memory_labels_take_the_single_machine_fit():
    Y = _multilabel(n=300, seed=3)
    got = gdask.CSSPReducer(3, random_state=1).fit(Y)
    want = reducers.CSSPReducer(3, random_state=1).fit(Y)
    np.testing.assert_array_equal(got.indices_, want.indices_)
    np.testing.assert_allclose(got.decoder_, want.decoder_)


def test_bad_reducer_input_is_named():
    with pytest.raises(ValueError, match="reducer"):
        gdask.make_reducer("rembrandt", 3)
    with pytest.raises(ValueError, match="n_components"):
        gdask.PLSTReducer(50).fit(da.ones((100, 8), chunks=50))
    with pytest.raises(ValueError, match="Y must be tall"):
        gdask.PLSTReducer(2).fit(da.ones((4, 8), chunks=2))
    with pytest.raises(ValueError, match="Y must have at least 2 rows"):
        gdask.plst(da.ones((1, 1), chunks=1), 1)


@pytest.mark.slow
def test_randomized_svd_of_a_large_array_is_near_optimal(client):
    """20,000 x 2,000 in 4 row chunks: Frobenius error within 1.1 of the optimal rank-k error.

    The optimal error comes from the eigenvalues of ``A^T A`` (Eckart-Young),
    the achieved error block by block; neither uses the randomized SVD.
    """
    n, d, k = 20_000, 2_000, 20
    rng = da.random.default_rng(0)
    spectrum = 1.0 / np.arange(1, 61)
    directions = np.linalg.qr(np.random.default_rng(1).standard_normal((d, 60)))[0]
    signal = rng.standard_normal((n, 60), chunks=(n // 4, 60)) @ (spectrum[:, None] * directions.T)
    A = (signal * 30 + 0.05 * rng.standard_normal((n, d), chunks=(n // 4, d))).persist()
    U, s, Vt = gdask.randomized_svd(A, k, random_state=0)
    eigenvalues = np.clip(np.linalg.eigvalsh((A.T @ A).compute()), 0, None)
    optimal = np.sqrt(eigenvalues[: d - k].sum())
    achieved = float(np.sqrt((((A - (U * s) @ Vt) ** 2).sum()).compute()))
    assert optimal <= achieved * (1 + 1e-9)
    assert achieved <= 1.1 * optimal
