"""One matrix of bad and unusual inputs for every public estimator and linear-algebra entry point.

Each case either names the error (its type and a message that names the
argument) or gives the result of the same data in canonical form (float64
dense, or CSR). A new estimator joins by being listed in ``ESTIMATORS``, a new
entry point by being listed in ``ENTRY_POINTS``; the cases apply to all.
"""

from __future__ import annotations

import inspect
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import scipy.sparse as sp

from gpurpo.ensemble import (
    ExtraTreesClassifier,
    ExtraTreesRegressor,
    GradientBoostingClassifier,
    GradientBoostingRegressor,
    RandomForestClassifier,
    RandomForestRegressor,
)
from gpurpo.label_space import LabelSpaceClassifier, LabelSpaceRegressor
from gpurpo.linalg import (
    cssp_select,
    leverage_scores,
    randomized_pca,
    randomized_range_finder,
    randomized_svd,
    rembrandt,
)
from gpurpo.tree import DecisionTreeClassifier, DecisionTreeRegressor

ESTIMATORS: dict[str, Callable[[], Any]] = {
    "DecisionTreeRegressor": lambda: DecisionTreeRegressor(random_state=0),
    "DecisionTreeClassifier": lambda: DecisionTreeClassifier(random_state=0),
    "RandomForestRegressor": lambda: RandomForestRegressor(n_estimators=2, random_state=0),
    "RandomForestClassifier": lambda: RandomForestClassifier(n_estimators=2, random_state=0),
    "ExtraTreesRegressor": lambda: ExtraTreesRegressor(n_estimators=2, random_state=0),
    "ExtraTreesClassifier": lambda: ExtraTreesClassifier(n_estimators=2, random_state=0),
    "GradientBoostingRegressor": lambda: GradientBoostingRegressor(n_estimators=2, random_state=0),
    "GradientBoostingClassifier": lambda: GradientBoostingClassifier(n_estimators=2, random_state=0),
    "LabelSpaceRegressor": lambda: LabelSpaceRegressor(n_components=2, random_state=0),
    "LabelSpaceClassifier": lambda: LabelSpaceClassifier(n_components=2, random_state=0),
}

# each entry point called on one matrix argument A (rembrandt: A is X, with fixed labels)
_LABELS = (np.random.default_rng(9).random((30, 5)) > 0.5).astype(np.float64)
ENTRY_POINTS: dict[str, Callable[[Any], Any]] = {
    "randomized_svd": lambda A: randomized_svd(A, 2, random_state=0),
    "randomized_range_finder": lambda A: randomized_range_finder(A, 2, 1, random_state=0),
    "randomized_pca": lambda A: randomized_pca(A, 2, random_state=0),
    "leverage_scores": lambda A: leverage_scores(A, 2, random_state=0),
    "cssp_select": lambda A: cssp_select(A, 2, random_state=0),
    "rembrandt": lambda A: rembrandt(A, _LABELS, 2, random_state=0),
}
# the name each entry point gives its matrix argument in errors
_ARGUMENT = {"cssp_select": "Y", "rembrandt": "X"}


def _data() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """X (30, 4) with zeros (a real sparse pattern), real outputs and 0/1 labels."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(30, 4))
    X[X < 0] = 0.0
    return X, rng.normal(size=(30, 3)), (rng.random((30, 3)) > 0.5).astype(np.float64)


def _targets(name: str) -> np.ndarray:
    _, Y_real, Y_labels = _data()
    return Y_labels if "Classifier" in name else Y_real


def _with_entry(a: sp.spmatrix, value: float) -> sp.csr_matrix:
    a = sp.csr_matrix(a, dtype=np.float64, copy=True)
    a.data[0] = value
    return a


def _complex(a: Any) -> Any:
    return a.astype(np.complex128) + 1j if not sp.issparse(a) else (a.astype(np.complex128) * (1 + 1j))


# ---------------------------------------------------------------------------------------------
# cases: (id, builds (X, y, sample_weight, X_at_predict) from (X, y), error type, message regex)
# ---------------------------------------------------------------------------------------------

ESTIMATOR_ERRORS = [
    ("complex dense X", lambda X, y: (_complex(X), y, None, None), ValueError, r"Complex data not supported: X"),
    ("complex CSR X", lambda X, y: (_complex(sp.csr_matrix(X)), y, None, None), ValueError,
     r"Complex data not supported: X"),
    ("complex dense y", lambda X, y: (X, _complex(y), None, None), ValueError, r"Complex data not supported: y"),
    ("complex CSR y", lambda X, y: (X, _complex(sp.csr_matrix(y)), None, None), ValueError,
     r"Complex data not supported: y"),
    ("NaN in CSR y", lambda X, y: (X, _with_entry(y, np.nan), None, None), ValueError, r"y contains NaN or infinity"),
    ("inf in CSR y", lambda X, y: (X, _with_entry(y, np.inf), None, None), ValueError, r"y contains NaN or infinity"),
    ("inf in X", lambda X, y: (np.where(X > 1, np.inf, X), y, None, None), ValueError, r"X contains .*infinity"),
    ("3-D y", lambda X, y: (X, y[:, :, None], None, None), ValueError, r"y must be .*2-D.*got .*shape \(30, 3, 1\)"),
    ("3-D X", lambda X, y: (X[:, :, None], y, None, None), ValueError,
     r"X must be a 2-D array, got an array of shape \(30, 4, 1\)"),
    ("strings in X", lambda X, y: (X.astype(str), y, None, None), ValueError, r"X must hold numbers, got dtype <U"),
    ("object X of strings", lambda X, y: (np.full(X.shape, "a", dtype=object), y, None, None), ValueError,
     r"X must hold numbers, got an object array"),
    ("rows of X and y differ", lambda X, y: (X[:20], y, None, None), ValueError, r"inconsistent numbers of rows"),
    ("NaN in sample_weight", lambda X, y: (X, y, np.r_[np.nan, np.ones(29)], None), ValueError,
     r"sample_weight (must be finite|contains NaN)"),
    ("negative sample_weight", lambda X, y: (X, y, -np.ones(30), None), ValueError,
     r"sample_weight must be (finite and )?non-negative"),
    ("empty X at predict", lambda X, y: (X, y, None, X[:0]), ValueError,
     r"X must have at least 1 row\(s\), got shape \(0, 4\)"),
    ("complex X at predict", lambda X, y: (X, y, None, sp.csr_matrix(_complex(X))), ValueError,
     r"Complex data not supported: X"),
    ("X at predict with fewer features", lambda X, y: (X, y, None, X[:, :3]), ValueError,
     r"X has 3 features, but .* is expecting 4 features"),
]

# cases whose result must equal the canonical form's: (id, X variant, y variant, canonical X, canonical y)
_FORMATS = ("coo", "dok", "lil", "csc")
ESTIMATOR_EQUIVALENT = (
    [(f"{f.upper()} X", lambda X, y, f=f: (sp.csr_matrix(X).asformat(f), y), lambda X, y: (sp.csr_matrix(X), y))
     for f in _FORMATS]
    + [(f"{f.upper()} y", lambda X, y, f=f: (X, sp.csr_matrix(y).asformat(f)), lambda X, y: (X, sp.csr_matrix(y)))
       for f in _FORMATS]
    + [
        ("float16 X", lambda X, y: (X.astype(np.float16), y),
         lambda X, y: (X.astype(np.float16).astype(np.float64), y)),
        ("float32 X", lambda X, y: (X.astype(np.float32), y),
         lambda X, y: (X.astype(np.float32).astype(np.float64), y)),
        ("int X", lambda X, y: (np.round(X * 3).astype(np.int32), y), lambda X, y: (np.round(X * 3), y)),
        ("object X of numbers", lambda X, y: (X.astype(object), y), lambda X, y: (X, y)),
        ("list X", lambda X, y: (X.tolist(), y), lambda X, y: (X, y)),
        ("bool y", lambda X, y: (X, y.astype(bool) if set(np.unique(y)) <= {0, 1} else y), lambda X, y: (X, y)),
    ]
)


def _dense(a: Any) -> np.ndarray:
    return a.toarray() if sp.issparse(a) else np.asarray(a)


def _takes_sample_weight(est: Any) -> bool:
    return "sample_weight" in inspect.signature(est.fit).parameters


def _error_cases():
    """(estimator, case) pairs; the sample_weight cases only for the estimators that take one."""
    X, y = _data()[0], _data()[1]
    out = []
    for name in ESTIMATORS:
        for case in ESTIMATOR_ERRORS:
            if case[1](X, y)[2] is not None and not _takes_sample_weight(ESTIMATORS[name]()):
                continue
            out.append(pytest.param(name, *case, id=f"{case[0]}-{name}"))
    return out


@pytest.mark.parametrize("name, case, build, error, match", _error_cases())
def test_estimator_names_the_bad_argument(name, case, build, error, match):
    X, y = _data()[0], _targets(name)
    X_fit, y_fit, weight, X_predict = build(X, y)
    est = ESTIMATORS[name]()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        if X_predict is None:
            with pytest.raises(error, match=match):
                est.fit(X_fit, y_fit, **({} if weight is None else {"sample_weight": weight}))
            return
        est.fit(X_fit, y_fit)
        with pytest.raises(error, match=match):
            est.predict(X_predict)


@pytest.mark.parametrize("name", ESTIMATORS)
@pytest.mark.parametrize("case, variant, canonical", ESTIMATOR_EQUIVALENT, ids=[c[0] for c in ESTIMATOR_EQUIVALENT])
def test_estimator_gives_the_canonical_result(name, case, variant, canonical):
    X, y = _data()[0], _targets(name)
    X_variant, y_variant = variant(X, y)
    X_canon, y_canon = canonical(X, y)
    want = _dense(ESTIMATORS[name]().fit(X_canon, y_canon).predict(X_canon))
    got = _dense(ESTIMATORS[name]().fit(X_variant, y_variant).predict(X_canon))
    np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), rtol=1e-12, atol=1e-12)


ENTRY_POINT_ERRORS = [
    ("complex dense", lambda A: _complex(A), ValueError, r"Complex data not supported: {arg}"),
    ("complex CSR", lambda A: _complex(sp.csr_matrix(A)), ValueError, r"Complex data not supported: {arg}"),
    ("NaN dense", lambda A: np.where(A > 1, np.nan, A), ValueError, r"{arg} contains NaN"),
    ("inf CSR", lambda A: _with_entry(A, np.inf), ValueError, r"{arg} contains .*infinity"),
    ("3-D", lambda A: A[:, :, None], ValueError, r"{arg} must be a 2-D array"),
    ("strings", lambda A: A.astype(str), ValueError, r"{arg} must hold numbers"),
    ("no rows", lambda A: A[:0], ValueError, r"{arg} must have at least"),
]

ENTRY_POINT_EQUIVALENT = (
    [(f"{f.upper()}", lambda A, f=f: sp.csr_matrix(A).asformat(f), lambda A: sp.csr_matrix(A)) for f in _FORMATS]
    + [
        ("float16", lambda A: A.astype(np.float16), lambda A: A.astype(np.float16).astype(np.float64)),
        ("object of numbers", lambda A: A.astype(object), lambda A: A),
        ("list", lambda A: A.tolist(), lambda A: A),
    ]
)


def _arrays_of(result: Any) -> list[np.ndarray]:
    """Every array of a result: a tuple (or named tuple) of arrays, an array, or an int."""
    if isinstance(result, tuple):
        return [a for part in result for a in _arrays_of(part)]
    return [np.asarray(_dense(result), dtype=np.float64)]


def _matrix() -> np.ndarray:
    X = _data()[0]
    return np.hstack([X, X[:, :1] * 2 + X[:, 1:2]])  # (30, 5): rank 4, labels of rembrandt are (30, 5)


@pytest.mark.parametrize("name", ENTRY_POINTS)
@pytest.mark.parametrize("case, build, error, match", ENTRY_POINT_ERRORS, ids=[c[0] for c in ENTRY_POINT_ERRORS])
def test_entry_point_names_the_bad_argument(name, case, build, error, match):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        with pytest.raises(error, match=match.format(arg=_ARGUMENT.get(name, "A"))):
            ENTRY_POINTS[name](build(_matrix()))


@pytest.mark.parametrize("name", ENTRY_POINTS)
@pytest.mark.parametrize("case, variant, canonical", ENTRY_POINT_EQUIVALENT,
                         ids=[c[0] for c in ENTRY_POINT_EQUIVALENT])
def test_entry_point_gives_the_canonical_result(name, case, variant, canonical):
    A = _matrix()
    want = _arrays_of(ENTRY_POINTS[name](canonical(A)))
    got = _arrays_of(ENTRY_POINTS[name](variant(A)))
    assert len(got) == len(want)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-10, atol=1e-12)
