"""Top-k predictions by blocks of rows (``predict_top_k``) against a full stable sort.

The reference is NumPy's stable ``argsort`` of the negated dense predictions:
its first k columns are the top k with ties broken by the lowest column, the
rule ``precision_at_k`` uses.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import gpurpo._top_k as top_k_module
from gpurpo._top_k import top_k, top_k_mask, top_k_of_row_blocks
from gpurpo.backend import EMULATED, NUMPY
from gpurpo.datasets import make_multilabel
from gpurpo.ensemble import (
    ExtraTreesClassifier,
    ExtraTreesRegressor,
    GradientBoostingClassifier,
    GradientBoostingRegressor,
    RandomForestClassifier,
    RandomForestRegressor,
)
from gpurpo.label_space import LabelSpaceClassifier, LabelSpaceRegressor, RembrandtClassifier
from gpurpo.metrics import precision_at_k
from gpurpo.tree import DecisionTreeClassifier, DecisionTreeRegressor


def _reference(S, k):
    order = np.argsort(-S, axis=1, kind="stable")[:, :k]
    return order, np.take_along_axis(S, order, axis=1)


@st.composite
def _scores_and_k(draw):
    rows = draw(st.integers(1, 6))
    cols = draw(st.integers(1, 12))
    # few distinct values: many ties, at and around the k-th score
    S = draw(hnp.arrays(np.float64, (rows, cols), elements=st.sampled_from([-1.0, 0.0, 0.5, 2.0])))
    return S, draw(st.integers(1, cols))


@settings(max_examples=200, deadline=None)
@given(_scores_and_k())
def test_top_k_is_the_head_of_a_stable_descending_sort(case):
    # the numba kernel (numpy backend) and the array-primitive one that CUDA
    # backends run (the emulated backend runs it on NumPy arrays)
    S, k = case
    ref_indices, ref_values = _reference(S, k)
    for backend in (NUMPY, EMULATED):
        indices, values = top_k(S, k, backend)
        np.testing.assert_array_equal(indices, ref_indices)
        np.testing.assert_array_equal(values, ref_values)
        assert indices.dtype == np.int64 and values.dtype == np.float64
    mask = np.zeros(S.shape, dtype=bool)
    np.put_along_axis(mask, ref_indices, True, axis=1)
    np.testing.assert_array_equal(top_k_mask(S, k, np), mask)


@pytest.mark.parametrize("block_bytes", [8, 8 * 7 * 3, None])
def test_row_blocks_give_the_same_top_k(block_bytes):
    S = np.random.default_rng(0).integers(0, 4, size=(23, 7)).astype(np.float64)
    seen = []

    def block_scores(r0, r1):
        seen.append((r0, r1))
        return S[r0:r1]

    indices, values = top_k_of_row_blocks(23, 7, 3, block_scores, NUMPY, block_bytes)
    ref_indices, ref_values = _reference(S, 3)
    np.testing.assert_array_equal(indices, ref_indices)
    np.testing.assert_array_equal(values, ref_values)
    assert seen[0][0] == 0 and seen[-1][1] == 23
    assert all(a[1] == b[0] for a, b in zip(seen, seen[1:]))
    if block_bytes == 8:
        assert len(seen) == 23  # one row per block when a row does not fit


def _multilabel(seed=0, n=260, p=8, d=40):
    X, Y = make_multilabel(n, p, d, label_cardinality=4.0, sparse_output=True,
                           random_state=seed)[:2]
    return np.asarray(X), Y


def _dense(a):
    return a.toarray() if sp.issparse(a) else np.asarray(a)


CASES = [
    (lambda: RandomForestClassifier(n_estimators=6, projection="gaussian", n_components=4,
                                    random_state=0), "predict_proba", True),
    (lambda: ExtraTreesRegressor(n_estimators=4, random_state=0), "predict", True),
    (lambda: DecisionTreeClassifier(max_depth=5, random_state=0), "predict_proba", True),
    (lambda: DecisionTreeRegressor(projection="gaussian", n_components=3, random_state=0),
     "predict", True),
    (lambda: GradientBoostingClassifier(n_estimators=4, random_state=0), "predict_proba", False),
    (lambda: GradientBoostingRegressor(n_estimators=4, random_state=0), "predict", False),
    (lambda: LabelSpaceClassifier(n_components=6, random_state=0), "decision_function", True),
    (lambda: LabelSpaceRegressor(n_components=6, random_state=0), "predict", False),
    (lambda: RembrandtClassifier(n_components=6, random_state=0), "decision_function", True),
]


@pytest.mark.parametrize("make, method, sparse_y", CASES,
                         ids=[type(c[0]()).__name__ + "-" + c[1] for c in CASES])
def test_predict_top_k_equals_sorting_the_dense_predictions(make, method, sparse_y, monkeypatch):
    X, Y = _multilabel()
    est = make().fit(X[:200], Y[:200] if sparse_y else Y[:200].toarray())
    S = _dense(getattr(est, method)(X[200:]))
    ref_indices, ref_values = _reference(S, 5)
    # blocks of 7 rows: the block path is exercised, not one block of everything
    monkeypatch.setattr(top_k_module, "TOP_K_BLOCK_BYTES", 8 * S.shape[1] * 7)
    indices, values = est.predict_top_k(X[200:], k=5)
    assert isinstance(indices, np.ndarray) and indices.shape == (60, 5)
    np.testing.assert_array_equal(indices, ref_indices)
    np.testing.assert_allclose(values, ref_values, rtol=1e-12, atol=1e-15)


def test_precision_at_k_from_the_top_k_labels():
    X, Y = _multilabel(seed=3)
    forest = RandomForestClassifier(n_estimators=8, projection="gaussian", n_components=4,
                                    random_state=0).fit(X[:200], Y[:200])
    labels, _ = forest.predict_top_k(X[200:], k=3)
    truth = Y[200:].toarray()
    hits = np.take_along_axis(truth, labels, axis=1).sum()
    expected = precision_at_k(Y[200:], forest.predict_proba(X[200:]), k=3)
    assert hits / labels.size == pytest.approx(expected, abs=1e-12)


def test_single_label_classes_are_positions_in_classes_():
    X, Y = _multilabel()
    y = np.array(["ant", "bee", "cat"])[np.asarray(Y[:, :3].argmax(axis=1)).ravel()]
    forest = RandomForestClassifier(n_estimators=5, random_state=0).fit(X, y)
    labels, scores = forest.predict_top_k(X[:10], k=1)
    np.testing.assert_array_equal(forest.classes_[labels[:, 0]], forest.predict(X[:10]))


@pytest.mark.parametrize("k, error, match", [
    (0, ValueError, "k must be"),
    (41, ValueError, "k must be"),
    (2.5, TypeError, "k must be an int"),
])
def test_bad_k_is_refused_naming_k(k, error, match):
    X, Y = _multilabel()
    forest = RandomForestClassifier(n_estimators=2, random_state=0).fit(X, Y)
    with pytest.raises(error, match=match):
        forest.predict_top_k(X, k=k)


def test_unfitted_model_raises_not_fitted():
    from sklearn.exceptions import NotFittedError

    X, _ = _multilabel()
    with pytest.raises(NotFittedError):
        RandomForestClassifier().predict_top_k(X, k=2)


# --------------------------------------------------------------------------
# out of memory: the dense scores point to predict_top_k
# --------------------------------------------------------------------------

_ESTIMATORS = [
    RandomForestRegressor, RandomForestClassifier, ExtraTreesRegressor, ExtraTreesClassifier,
    GradientBoostingRegressor, GradientBoostingClassifier, DecisionTreeRegressor,
    DecisionTreeClassifier, LabelSpaceRegressor, LabelSpaceClassifier, RembrandtClassifier,
]


@pytest.mark.parametrize("Estimator", _ESTIMATORS)
def test_every_dense_scoring_method_points_to_predict_top_k(Estimator):
    methods = [name for name in ("predict", "predict_proba", "predict_log_proba",
                                 "decision_function") if hasattr(Estimator, name)]
    assert "predict" in methods and hasattr(Estimator, "predict_top_k")
    for name in methods:
        assert getattr(getattr(Estimator, name), "__wrapped__", None) is not None, name


class _Scores:
    n_outputs_ = 1000

    @top_k_module.suggests_top_k
    def decision_function(self, X):
        raise MemoryError("Unable to allocate 7.45 GiB")

    @top_k_module.suggests_top_k
    def predict(self, X):
        return self.decision_function(X) > 0

    @top_k_module.suggests_top_k
    def predict_proba(self, X):
        raise ValueError("not a memory error")


def test_the_memory_error_names_the_method_and_the_matrix_once():
    X = np.zeros((1_000_000, 3))
    with pytest.raises(MemoryError) as info:
        _Scores().predict(X)
    message = str(info.value)
    assert message.startswith("out of memory in _Scores.decision_function, which forms a dense "
                              "matrix of scores of shape (1000000, 1000), 7.45 GiB in float64")
    assert "predict_top_k(X, k)" in message
    assert message.count("out of memory in") == 1  # the outer method passes it on
    assert message.endswith("Original error: Unable to allocate 7.45 GiB")
    with pytest.raises(ValueError, match="not a memory error"):
        _Scores().predict_proba(X)


def test_scores_too_large_for_memory_raise_the_hint_and_top_k_still_works(tmp_path):
    # a real allocation failure: 200 rows x 10^8 sparse labels are 149 GiB of dense
    # scores, refused under an address-space limit whatever the kernel's overcommit rule
    script = tmp_path / "huge_d.py"
    script.write_text(textwrap.dedent("""
        import resource
        resource.setrlimit(resource.RLIMIT_AS, (16 * 2**30, resource.getrlimit(
            resource.RLIMIT_AS)[1]))
        import numpy as np, scipy.sparse as sp
        from gpurpo.ensemble import RandomForestClassifier
        from gpurpo.tree import DecisionTreeClassifier
        rng = np.random.default_rng(0)
        n, d = 200, 10**8
        X = rng.normal(size=(n, 5))
        cols = rng.integers(0, d, size=3 * n)
        Y = sp.csr_matrix((np.ones(3 * n), (np.repeat(np.arange(n), 3), cols)), shape=(n, d))
        forest = RandomForestClassifier(n_estimators=2, projection="subsample",
                                        n_components=5, random_state=0).fit(X, Y)
        from gpurpo.backend import NUMPY
        labels, scores = forest.predict_top_k(X, 2)
        assert labels.shape == scores.shape == (n, 2)
        # reference from the trees' own sparse leaves: the probabilities are the mean
        # over the trees of the label frequencies of the leaves reached
        proba = sum(t.value[t.leaf_index[np.asarray(t.apply(X, NUMPY))]]
                    for t in forest.estimators_).tocsr() / 2
        for i in range(n):
            cols = proba.indices[proba.indptr[i]:proba.indptr[i + 1]]
            vals = proba.data[proba.indptr[i]:proba.indptr[i + 1]]
            cols, vals = cols[vals > 0], vals[vals > 0]
            order = np.lexsort((cols, -vals))  # decreasing score, then increasing column
            want, want_scores = list(cols[order][:2]), list(vals[order][:2])
            zeros = (c for c in range(d) if c not in set(cols.tolist()))
            while len(want) < 2:  # the first columns of score 0
                want.append(next(zeros))
                want_scores.append(0.0)
            assert labels[i].tolist() == want, (i, labels[i], want)
            np.testing.assert_allclose(scores[i], want_scores, rtol=1e-12, atol=0)
        # the 0/1 labels come from the sparse sums: no dense matrix either
        predicted = forest.predict(X)
        assert sp.issparse(predicted) and predicted.shape == (n, d)
        assert (predicted != (proba > 0.5)).nnz == 0
        try:
            forest.predict_proba(X)
        except MemoryError as exc:
            print(exc)
        else:
            raise SystemExit("no MemoryError")
        # a single tree's sparse leaves give sparse probabilities: no dense matrix
        tree = DecisionTreeClassifier(projection="subsample", n_components=5, random_state=0)
        proba = tree.fit(X, Y).predict_proba(X)
        assert sp.issparse(proba) and proba.shape == (n, d)
    """))
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                         timeout=600, cwd=Path(__file__).resolve().parents[2])
    assert out.returncode == 0, out.stderr[-2000:]
    message = out.stdout.strip()
    assert message.startswith("out of memory in RandomForestClassifier.predict_proba, which "
                              "forms a dense matrix of scores of shape (200, 100000000), "
                              "149.01 GiB in float64")
    assert "predict_top_k(X, k)" in message
