"""Output projections: scaling, distributions, Hadamard structure, batching,
sparse input, n_components resolution, the scikit-learn transformer.

References used here are independent of gpurpo: plain NumPy products,
``scipy.linalg.hadamard``, ``scipy.stats``, scikit-learn's
``johnson_lindenstrauss_min_dim`` and estimator checks, and identities from
the papers (E||Phi y||^2 = ||y||^2; Joly et al. 2014, Theorem 1).
"""

from __future__ import annotations

import math
import tracemalloc

import numpy as np
import pytest
import scipy.linalg
import scipy.sparse as sp
import scipy.stats
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.base import clone
from sklearn.exceptions import NotFittedError
from sklearn.random_projection import johnson_lindenstrauss_min_dim as sk_jl_min_dim
from sklearn.utils.estimator_checks import parametrize_with_checks

from gpurpo.backend import spawn_seeds
from gpurpo.projections import (
    KINDS,
    OutputProjection,
    make_projection,
    make_projections,
    project,
    resolve_n_components,
)

# (kind, extra keyword arguments) covering every kind and option.
VARIANTS = [
    ("gaussian", {}),
    ("rademacher", {}),
    ("achlioptas", {}),
    ("sparse", {}),
    ("sparse", {"density": 0.2}),
    ("subsample", {}),
    ("subsample", {"replace": True}),
    ("hadamard", {}),
    ("hadamard", {"replace": True}),
]
VARIANT_IDS = [k + "".join(f"-{a}={v}" for a, v in kw.items()) for k, kw in VARIANTS]


def dense(a):
    return a.toarray() if sp.issparse(a) else np.asarray(a)


def structured_labels(n, d, seed, rank=4, density=0.05):
    """Binary multi-label matrix with low-rank structure (label co-occurrence)."""
    rng = np.random.default_rng(seed)
    scores = rng.standard_normal((n, rank)) @ rng.standard_normal((rank, d))
    scores += 0.5 * rng.standard_normal((n, d))
    threshold = np.quantile(scores, 1.0 - density)
    return (scores > threshold).astype(np.float64)


# --------------------------------------------------------------------------
# E ||Phi y||^2 = ||y||^2 for every kind
# --------------------------------------------------------------------------


@pytest.mark.parametrize(("kind", "kw"), VARIANTS, ids=VARIANT_IDS)
def test_expected_squared_norm_is_preserved(kind, kw):
    d, m, draws = 37, 8, 3000
    rng = np.random.default_rng(0)
    y = rng.standard_normal(d)
    y[3] = 6.0  # an uneven vector, so output subsampling has real variance
    stacked = make_projections(kind, m, d, draws, random_state=1, **kw)
    assert stacked.shape == (draws * m, d)
    projected = project(y[None, :], stacked).reshape(draws, m)
    sq = (projected**2).sum(axis=1)
    target = float(y @ y)
    standard_error = sq.std(ddof=1) / math.sqrt(draws)
    assert standard_error < 0.05 * target  # enough draws for a meaningful check
    assert abs(sq.mean() - target) < 5 * standard_error


def test_squared_norm_check_detects_misscaling():
    # The same estimator applied to a projection lacking the sqrt(d/m) factor of
    # output subsampling is far outside the tolerance used above.
    d, m, draws = 37, 8, 3000
    y = np.random.default_rng(0).standard_normal(d)
    stacked = make_projections("subsample", m, d, draws, random_state=1) * math.sqrt(m / d)
    sq = (project(y[None, :], stacked).reshape(draws, m) ** 2).sum(axis=1)
    assert abs(sq.mean() - y @ y) > 5 * sq.std(ddof=1) / math.sqrt(draws)


# --------------------------------------------------------------------------
# Joly, Geurts & Wehenkel (2014), Theorem 1
# --------------------------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
def test_summed_variance_within_eps_for_jl_dimension(kind):
    n, d, eps = 60, 1500, 0.25
    m = resolve_n_components("auto", d, n_samples=n, eps=eps)
    assert m == sk_jl_min_dim(n, eps=eps)
    Y = structured_labels(n, d, seed=3)
    subset = np.random.default_rng(4).choice(n, size=n // 2, replace=False)
    within = 0
    for seed in range(5):
        phi = make_projection(kind, m, d, random_state=seed)
        ok = True
        for rows in (slice(None), subset):
            original = Y[rows].var(axis=0).sum()
            projected = (Y[rows] @ dense(phi).T).var(axis=0).sum()
            ok &= (1 - eps) * original <= projected <= (1 + eps) * original
        within += ok
    assert within >= 4


# --------------------------------------------------------------------------
# Distributions of the entries
# --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kind", "kw", "m", "d", "s"),
    [
        ("rademacher", {}, 40, 300, 1.0),
        ("achlioptas", {}, 200, 300, 3.0),
        ("sparse", {}, 500, 400, math.sqrt(400)),
        ("sparse", {"density": 0.01}, 300, 1000, 100.0),
    ],
)
def test_rademacher_density_and_values(kind, kw, m, d, s):
    phi = make_projection(kind, m, d, random_state=11, **kw)
    assert sp.issparse(phi) == (kind != "rademacher")
    values = phi.tocsr().data if sp.issparse(phi) else phi.ravel()
    cells, p = m * d, 1.0 / s
    nnz = values.size if sp.issparse(phi) else np.count_nonzero(phi)
    assert abs(nnz - cells * p) <= 5 * math.sqrt(cells * p * (1 - p)) + 1e-9
    assert np.all(np.abs(values[values != 0]) == math.sqrt(s / m))
    positive = int((values > 0).sum())
    assert abs(positive - nnz / 2) <= 5 * math.sqrt(nnz / 4)
    if sp.issparse(phi):
        # nonzeros are spread uniformly over the columns
        counts = np.bincount(phi.tocsr().indices, minlength=d)
        assert scipy.stats.chisquare(counts).pvalue > 1e-5


def test_gaussian_entries_have_variance_one_over_m():
    m, d = 50, 400
    values = make_projection("gaussian", m, d, random_state=5).ravel()
    n = values.size
    assert abs(values.mean()) < 5 / math.sqrt(m * n)
    assert abs(values.var() * m - 1.0) < 5 * math.sqrt(2.0 / n)
    assert scipy.stats.kstest(values, "norm", args=(0.0, 1 / math.sqrt(m))).pvalue > 1e-4


def test_subsample_rows_are_scaled_identity_rows():
    m, d = 10, 25
    phi = make_projection("subsample", m, d, random_state=2)
    assert sp.issparse(phi) and phi.format == "csr"
    full = phi.toarray()
    assert np.all((full != 0).sum(axis=1) == 1)
    assert np.all(full[full != 0] == math.sqrt(d / m))
    cols = full.argmax(axis=1)
    assert len(set(cols)) == m  # without replacement
    with_rep = make_projection("subsample", 3 * d, d, random_state=2, replace=True).toarray()
    assert len(set(with_rep.argmax(axis=1))) < 3 * d


# --------------------------------------------------------------------------
# Subsampled randomized Hadamard transform
# --------------------------------------------------------------------------


def test_hadamard_rows_orthogonal_for_power_of_two():
    # Phi = sqrt(d/m) S H D with H orthonormal: Phi Phi^T = (d/m) I_m.
    m, d = 16, 64
    phi = make_projection("hadamard", m, d, random_state=7)
    assert isinstance(phi, np.ndarray)
    np.testing.assert_allclose(phi @ phi.T, (d / m) * np.eye(m), atol=1e-12)


@pytest.mark.parametrize("d", [5, 37, 100])
def test_hadamard_all_padded_rows_give_orthonormal_columns(d):
    # Keeping all d' rows: Phi^T Phi = P^T D H^T H D P = I_d for any d.
    padded = 1 << (d - 1).bit_length()
    phi = make_projection("hadamard", padded, d, random_state=d)
    np.testing.assert_allclose(phi.T @ phi, np.eye(d), atol=1e-12)


@pytest.mark.parametrize(("m", "d", "replace"), [(20, 37, False), (9, 100, False), (50, 37, True)])
def test_hadamard_structure_against_scipy(m, d, replace):
    # sqrt(m) Phi[i, j] = H[r_i, j] D_j, so m Phi_i * Phi_0 = H[r_i xor r_0, :d]:
    # every such product is a row of Sylvester's Hadamard matrix, distinct rows
    # when drawn without replacement.
    padded = 1 << (d - 1).bit_length()
    H = scipy.linalg.hadamard(padded)[:, :d]
    phi = make_projection("hadamard", m, d, random_state=3, replace=replace)
    assert np.all(np.abs(phi) == 1 / math.sqrt(m))
    products = np.rint(m * phi * phi[0]).astype(np.int64)
    matches = (products[:, None, :] == H[None, :, :]).all(axis=2)
    assert np.all(matches.sum(axis=1) == 1)
    found = matches.argmax(axis=1)
    if not replace:
        assert len(set(found)) == m
    np.testing.assert_array_equal(phi, H[found] * (phi[0] * math.sqrt(m)) / math.sqrt(m))


def test_hadamard_without_replacement_limited_to_padded_size():
    with pytest.raises(ValueError, match="n_components <= 64"):
        make_projection("hadamard", 65, 37)
    phi = make_projection("hadamard", 65, 37, replace=True, random_state=0)
    assert phi.shape == (65, 37)
    # Entries of a Hadamard matrix, +-1, scaled by 1/sqrt(m) as for the other kinds.
    np.testing.assert_allclose(np.abs(phi), 1 / math.sqrt(65), rtol=1e-15)


# --------------------------------------------------------------------------
# Batching, sparse input, dtypes
# --------------------------------------------------------------------------


@pytest.mark.parametrize(("kind", "kw"), VARIANTS, ids=VARIANT_IDS)
def test_batched_equals_one_by_one(kind, kw):
    m, d, T = 6, 30, 4
    stacked = make_projections(kind, m, d, T, random_state=9, **kw)
    singles = [make_projection(kind, m, d, random_state=s, **kw) for s in spawn_seeds(9, T)]
    assert sp.issparse(stacked) == sp.issparse(singles[0])
    np.testing.assert_array_equal(dense(stacked), np.vstack([dense(p) for p in singles]))
    Y = structured_labels(25, d, seed=1, density=0.2)
    batched = project(Y, stacked)
    for t, phi in enumerate(singles):
        np.testing.assert_allclose(batched[:, t * m : (t + 1) * m], Y @ dense(phi).T, rtol=1e-12)


@pytest.mark.parametrize(("kind", "kw"), VARIANTS, ids=VARIANT_IDS)
def test_sparse_y_equals_dense_y(kind, kw):
    d = 40
    Y = structured_labels(30, d, seed=2, density=0.1)
    Y[:, 5] *= 3.5  # non-binary values too
    phi = make_projections(kind, 7, d, 3, random_state=4, **kw)
    reference = Y @ dense(phi).T
    for Yin in (Y, sp.csr_matrix(Y), sp.csc_matrix(Y), sp.csr_array(Y)):
        out = project(Yin, phi)
        assert isinstance(out, np.ndarray) and out.flags.c_contiguous
        assert out.dtype == np.float64 and out.shape == (30, 21)
        np.testing.assert_allclose(out, reference, rtol=1e-12, atol=1e-12)
    out32 = project(sp.csr_matrix(Y, dtype=np.float32), phi)
    assert out32.dtype == np.float32
    np.testing.assert_allclose(out32, reference, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("kind", ["sparse", "gaussian"])
def test_sparse_y_is_never_densified(kind):
    # A dense copy of Y would take 400 MB; the whole call must stay far below.
    n, d = 1000, 50_000
    rng = np.random.default_rng(0)
    rows = np.repeat(np.arange(n), 5)
    cols = rng.integers(0, d, size=rows.size)
    Y = sp.csr_matrix((np.ones(rows.size), (rows, cols)), shape=(n, d))
    phi = make_projections(kind, 5, d, 2, random_state=1)
    tracemalloc.start()
    try:
        out = project(Y, phi)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert out.shape == (n, 10)
    assert peak < 40e6 + 2 * dense(phi).nbytes
    np.testing.assert_allclose(out[:50], Y[:50].toarray() @ dense(phi).T, rtol=1e-12)


@given(
    kind=st.sampled_from(KINDS),
    n=st.integers(1, 12),
    d=st.integers(1, 20),
    m=st.integers(1, 6),
    seed=st.integers(0, 2**32 - 1),
    sparse_y=st.booleans(),
)
@settings(max_examples=40, deadline=None)
def test_project_matches_numpy_reference(kind, n, d, m, seed, sparse_y):
    replace = m > d
    phi = make_projection(kind, m, d, random_state=seed, replace=replace)
    assert phi.shape == (m, d)
    Y = np.random.default_rng(seed).standard_normal((n, d))
    out = project(sp.csr_matrix(Y) if sparse_y else Y, phi)
    np.testing.assert_allclose(out, Y @ dense(phi).T, rtol=1e-10, atol=1e-12)


def test_make_projection_dtype_and_determinism():
    for kind in KINDS:
        a = make_projection(kind, 4, 16, random_state=3, dtype=np.float32)
        b = make_projection(kind, 4, 16, random_state=3, dtype=np.float32)
        assert a.dtype == np.float32
        np.testing.assert_array_equal(dense(a), dense(b))
        c = make_projection(kind, 4, 16, random_state=4)
        assert not np.array_equal(dense(a), dense(c))


def test_sparse_kinds_are_stored_sparse():
    for kind in KINDS:
        phi = make_projection(kind, 4, 16, random_state=0)
        assert sp.issparse(phi) == (kind in ("achlioptas", "sparse", "subsample"))
        if sp.issparse(phi):
            assert phi.format == "csr"


# --------------------------------------------------------------------------
# n_components
# --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "d", "expected"),
    [
        (5, 10, 5),
        (np.int64(50), 10, 50),  # more than d is fine
        ("log", 1000, 7),  # ln 1000 = 6.91
        ("log", 2, 1),  # ln 2 = 0.69
        ("log", 1, 1),  # ln 1 = 0, at least 1
        ("sqrt", 1000, 32),  # sqrt 1000 = 31.6
        ("sqrt", 2, 1),
        (0.25, 100, 25),
        (1.0, 37, 37),
        (0.3, 10, 3),
        (1e-9, 100, 1),
    ],
)
def test_resolve_n_components_values(spec, d, expected):
    got = resolve_n_components(spec, d)
    assert got == expected and type(got) is int


@pytest.mark.parametrize(("n", "eps"), [(1000, 0.1), (50, 0.5), (10**6, 0.3), (2, 0.9)])
def test_resolve_auto_is_sklearn_jl_bound(n, eps):
    assert resolve_n_components("auto", 10, n_samples=n, eps=eps) == int(sk_jl_min_dim(n, eps=eps))


def test_resolve_auto_single_sample_gives_one():
    assert resolve_n_components("auto", 10, n_samples=1) == 1


#: The start of the message for an n_components float outside (0, 1].
FLOAT_FRACTION = r"n_components given as a float .* must be in \(0, 1\].* got "


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"n_components": 0, "n_outputs": 10}, "n_components must be >= 1, got 0"),
        ({"n_components": -1, "n_outputs": 10}, "n_components must be >= 1, got -1"),
        ({"n_components": "foo", "n_outputs": 10}, "n_components must be an int >= 1, .* got 'foo'"),
        ({"n_components": 1.5, "n_outputs": 10}, FLOAT_FRACTION + "1.5"),
        ({"n_components": 0.0, "n_outputs": 10}, FLOAT_FRACTION + "0.0"),
        ({"n_components": float("nan"), "n_outputs": 10}, FLOAT_FRACTION + "nan"),
        ({"n_components": True, "n_outputs": 10}, "n_components must be an int >= 1, got the bool True"),
        ({"n_components": None, "n_outputs": 10}, "n_components must be an int >= 1, .* got NoneType None"),
        ({"n_components": [3], "n_outputs": 10}, r"n_components must be an int >= 1, .* got list \[3\]"),
        ({"n_components": 3, "n_outputs": 0}, "n_outputs must be an int >= 1, got 0"),
        ({"n_components": "auto", "n_outputs": 10},
         "n_components='auto' needs n_samples .* got n_samples=None"),
        ({"n_components": "auto", "n_outputs": 10, "n_samples": 0}, "n_samples must be an int >= 1, got 0"),
        ({"n_components": "auto", "n_outputs": 10, "n_samples": 100, "eps": 1.0},
         r"eps must be a float in \(0, 1\), got 1.0"),
        ({"n_components": "auto", "n_outputs": 10, "n_samples": 100, "eps": 0},
         r"eps must be a float in \(0, 1\), got 0"),
    ],
)
def test_resolve_n_components_errors(kwargs, match):
    with pytest.raises(ValueError, match=match):
        resolve_n_components(**kwargs)


@pytest.mark.parametrize(
    ("args", "kwargs", "match"),
    [
        (("foo", 3, 10), {}, "kind must be one of .*gaussian.*hadamard.*'foo'"),
        (("gaussian", 0, 10), {}, "n_components must be >= 1, got 0"),
        (("subsample", 11, 10), {}, "n_components <= n_outputs=10"),
        (("achlioptas", 3, 10), {"density": 0.5}, "density applies to kind='sparse' only .* got density=0.5"),
        (("sparse", 3, 10), {"density": 0.0}, "density must be > 0.0, got 0.0"),
        (("sparse", 3, 10), {"density": 1.5}, "density must be <= 1.0, got 1.5"),
        (("gaussian", 3, 0), {}, "n_outputs must be an int >= 1, got 0"),
    ],
)
def test_make_projection_errors(args, kwargs, match):
    with pytest.raises(ValueError, match=match):
        make_projection(*args, **kwargs)


@pytest.mark.parametrize("n_projections", [0, -2, 1.0, None])
def test_make_projections_counts(n_projections):
    with pytest.raises(ValueError, match=f"n_projections must be an int >= 1, got {n_projections}$"):
        make_projections("gaussian", 3, 10, n_projections)


def test_project_errors():
    phi = make_projection("gaussian", 3, 10, random_state=0)
    with pytest.raises(ValueError, match=r"Y has 9 columns but components has 10 \(shape \(3, 10\)\)"):
        project(np.ones((4, 9)), phi)
    with pytest.raises(ValueError, match=r"Y must be a 2-D array, got an array of shape \(10,\)"):
        project(np.ones(10), phi)
    with pytest.raises(ValueError, match="Y contains NaN or infinity"):
        project(np.full((2, 10), np.nan), phi)
    with pytest.raises(ValueError, match=r"components must be a 2-D matrix, got shape \(10,\)"):
        project(np.ones((2, 10)), np.ones(10))


# --------------------------------------------------------------------------
# OutputProjection transformer
# --------------------------------------------------------------------------


def test_output_projection_fit_transform():
    Y = structured_labels(80, 300, seed=5)
    est = OutputProjection(kind="sparse", n_components="sqrt", random_state=0)
    out = est.fit_transform(Y)
    assert est.n_outputs_ == 300 and est.n_features_in_ == 300
    assert est.n_components_ == 17  # sqrt(300) = 17.3
    assert sp.issparse(est.components_) and est.components_.shape == (17, 300)
    assert est.density_ == est.components_.nnz / (17 * 300)
    np.testing.assert_allclose(out, Y @ est.components_.toarray().T, rtol=1e-12)
    np.testing.assert_array_equal(out, OutputProjection(**est.get_params()).fit(Y).transform(Y))
    np.testing.assert_allclose(est.transform(sp.csr_matrix(Y)), out, rtol=1e-12)
    names = est.get_feature_names_out()
    assert list(names[:2]) == ["outputprojection0", "outputprojection1"]


def test_output_projection_auto_uses_samples_and_eps():
    Y = np.random.default_rng(0).standard_normal((200, 50))
    est = OutputProjection(n_components="auto", eps=0.5, random_state=0).fit(Y)
    assert est.n_components_ == int(sk_jl_min_dim(200, eps=0.5))


def test_output_projection_float32_and_float64():
    Y = np.random.default_rng(1).standard_normal((40, 64))
    for kind in KINDS:
        est = OutputProjection(kind=kind, n_components=8, random_state=2).fit(Y)
        out64 = est.transform(Y)
        out32 = est.transform(Y.astype(np.float32))
        assert out64.dtype == np.float64 and out32.dtype == np.float32
        np.testing.assert_allclose(out32, out64, rtol=1e-4, atol=1e-4)


def test_output_projection_clone_and_params():
    est = OutputProjection(
        kind="subsample", n_components=0.5, eps=0.2, density=None, replace=True, random_state=7
    )
    params = est.get_params()
    assert params == {
        "kind": "subsample",
        "n_components": 0.5,
        "eps": 0.2,
        "density": None,
        "replace": True,
        "random_state": 7,
    }
    twin = clone(est)
    assert twin is not est and twin.get_params() == params
    Y = structured_labels(20, 30, seed=0, density=0.3)
    np.testing.assert_array_equal(twin.fit_transform(Y), est.fit_transform(Y))
    fitted_clone = clone(est)
    assert not hasattr(fitted_clone, "components_")
    est.set_params(kind="hadamard", replace=False)
    assert est.get_params()["kind"] == "hadamard"
    assert est.fit(Y).components_.shape == (15, 30)


@pytest.mark.parametrize(
    ("params", "Y", "match"),
    [
        ({"kind": "foo"}, np.ones((5, 4)), "kind must be one of .*gaussian"),
        ({"n_components": 0}, np.ones((5, 4)), "n_components must be >= 1, got 0"),
        ({"n_components": -1}, np.ones((5, 4)), "n_components must be >= 1, got -1"),
        ({"n_components": "foo"}, np.ones((5, 4)), "n_components must be an int >= 1, .* got 'foo'"),
        ({"n_components": 1.5}, np.ones((5, 4)), FLOAT_FRACTION + "1.5"),
        ({"kind": "subsample", "n_components": 5}, np.ones((5, 4)), "n_components <= n_outputs"),
        ({}, np.ones(5), "Y must be a 2-D"),
        ({}, np.array([[1.0, np.nan], [0.0, 1.0]]), "Y contains NaN"),
        ({}, np.array([[1.0, np.inf], [0.0, 1.0]]), "Y contains NaN or infinity"),
        ({"n_components": "auto", "eps": 1.5}, np.ones((5, 4)), r"eps must be a float in \(0, 1\), got 1.5"),
    ],
)
def test_output_projection_fit_errors(params, Y, match):
    with pytest.raises(ValueError, match=match):
        OutputProjection(**params).fit(Y)


def test_output_projection_transform_errors():
    est = OutputProjection(n_components=3, random_state=0)
    with pytest.raises(NotFittedError):
        est.transform(np.ones((2, 4)))
    est.fit(np.ones((5, 4)))
    with pytest.raises(ValueError, match="expecting 4 features"):
        est.transform(np.ones((2, 5)))


# scikit-learn's estimator checks, all of them, with no exemption.
@parametrize_with_checks([OutputProjection(n_components=5, random_state=0)])
def test_sklearn_estimator_checks(estimator, check):
    check(estimator)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_project_very_sparse_components_with_empty_and_repeated_rows(dtype):
    """The gather path (at most a few nonzeros per row): empty rows, several entries, duplicates."""
    rng = np.random.default_rng(3)
    Y = rng.standard_normal((40, 9)).astype(dtype)
    C = sp.csr_matrix(
        (np.array([2.0, -1.0, 0.5, 3.0, 1.5]), np.array([4, 0, 4, 8, 8]), np.array([0, 0, 1, 4, 5])),
        shape=(4, 9),
    )
    out = project(Y, C)
    assert out.dtype == dtype and out.shape == (40, 4) and out.flags.c_contiguous
    np.testing.assert_allclose(out, Y.astype(np.float64) @ C.toarray().T,
                               rtol=1e-6 if dtype == np.float32 else 1e-12, atol=1e-6)
    np.testing.assert_array_equal(out[:, 0], 0.0)
    empty = project(Y, sp.csr_matrix((3, 9)))
    np.testing.assert_array_equal(empty, np.zeros((40, 3)))
