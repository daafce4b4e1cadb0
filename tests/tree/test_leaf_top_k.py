"""Top k of summed sparse leaf rows (gpurpo.tree.leaf_sums) against dense references.

The reference forms the dense (n, d) sums with NumPy, adding the trees' leaf
rows in tree order to a zero row as the dense kernel does, divides them, and
takes the head of a stable sort by decreasing score: the same columns and
the same float64 scores, bit for bit.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

import gpurpo.ensemble.forest.base as forest_base
import gpurpo.tree._classes as tree_classes
from gpurpo._top_k import top_k
from gpurpo.backend import NUMPY
from gpurpo.datasets import make_multilabel
from gpurpo.ensemble import ExtraTreesRegressor, RandomForestClassifier, RandomForestRegressor
from gpurpo.tree import DecisionTreeClassifier
from gpurpo.tree import leaf_sums as leaf_top_k
from gpurpo.tree.leaf_sums import prefers_leaf_sums, top_k_of_leaf_sums


def _dense_sums(groups, n, d, divisor):
    S = np.zeros((n, d))
    for leaf_rows, values in groups:
        V = values.toarray().astype(np.float64)
        for t in range(leaf_rows.shape[1]):
            for i in range(n):
                if leaf_rows[i, t] >= 0:
                    S[i] += V[leaf_rows[i, t]]
    S /= divisor
    return S


def _reference(groups, n, d, k, divisor):
    S = _dense_sums(groups, n, d, divisor)
    order = np.argsort(-S, axis=1, kind="stable")[:, :k]
    return order, np.take_along_axis(S, order, axis=1)


@st.composite
def _problems(draw):
    n = draw(st.integers(1, 12))
    d = draw(st.integers(1, 30))
    k = draw(st.integers(1, d))
    groups = []
    for _ in range(draw(st.integers(1, 4))):
        n_leaves = draw(st.integers(1, 6))
        density = draw(st.sampled_from([0.0, 0.1, 0.5, 1.0]))
        seed = draw(st.integers(0, 2**31 - 1))
        rng = np.random.default_rng(seed)
        mask = rng.random((n_leaves, d)) < density
        if draw(st.booleans()):
            # small integers and halves: many exact ties, cancellations to 0.0, negatives
            dense = np.where(mask, rng.integers(-3, 4, size=(n_leaves, d)) / 2.0, 0.0)
        else:
            # inexact sums: another order of the additions rounds differently
            dense = np.where(mask, rng.normal(size=(n_leaves, d)) * 10.0 ** rng.integers(
                -8, 9, size=(n_leaves, d)), 0.0)
        values = sp.csr_matrix(dense)
        # some stored entries hold an explicit 0.0
        values.data[rng.random(values.nnz) < 0.2] = 0.0
        # groups may differ in index and value types (read as they are, or converted)
        if draw(st.booleans()):
            values.indptr = values.indptr.astype(np.int64)
            values.indices = values.indices.astype(np.int64)
        if draw(st.booleans()):
            values.data = values.data.astype(np.float32)
        n_trees = draw(st.integers(1, 3))
        leaf_rows = rng.integers(-1, n_leaves, size=(n, n_trees)).astype(np.int32)
        groups.append((leaf_rows, values))
    divisor = draw(st.sampled_from([1.0, 3.0, 7.0]))
    block_rows = draw(st.integers(1, 13))
    block_entries = draw(st.integers(1, 60))
    return n, d, k, groups, divisor, block_rows, block_entries


@settings(max_examples=200, deadline=None)
@given(_problems())
def test_top_k_of_leaf_sums_equals_the_dense_reference(problem):
    n, d, k, groups, divisor, block_rows, block_entries = problem

    def leaf_rows_of(r0, r1):
        return [leaf_rows[r0:r1] for leaf_rows, _ in groups]

    values = [v for _, v in groups]
    indices, scores = top_k_of_leaf_sums(n, d, k, divisor, values, leaf_rows_of,
                                         block_rows=block_rows, block_entries=block_entries)
    ref_indices, ref_scores = _reference(groups, n, d, k, divisor)
    np.testing.assert_array_equal(indices, ref_indices)
    np.testing.assert_array_equal(scores, ref_scores)
    # the same sums as a matrix: all of them, or those above a threshold
    dense = _dense_sums(groups, n, d, divisor)
    for above in (None, 0.0, 0.25):
        S = leaf_top_k.leaf_sums_csr(n, d, divisor, values, leaf_rows_of, block_rows=block_rows,
                                     block_entries=block_entries, above=above)
        expected = dense if above is None else np.where(dense > above, dense, 0.0)
        np.testing.assert_array_equal(S.toarray(), expected)
        if above is not None:
            assert np.all(S.data > above)


def test_int64_indices_and_float32_values_are_read_as_they_are():
    rng = np.random.default_rng(0)
    values = sp.csr_matrix(np.where(rng.random((5, 40)) < 0.3, rng.random((5, 40)), 0.0)
                           .astype(np.float32))
    values.indptr = values.indptr.astype(np.int64)
    values.indices = values.indices.astype(np.int64)
    leaf_rows = rng.integers(0, 5, size=(9, 2)).astype(np.int32)
    indices, scores = top_k_of_leaf_sums(9, 40, 6, 2.0, [values],
                                         lambda r0, r1: [leaf_rows[r0:r1]])
    ref_indices, ref_scores = _reference([(leaf_rows, values)], 9, 40, 6, 2.0)
    np.testing.assert_array_equal(indices, ref_indices)
    np.testing.assert_array_equal(scores, ref_scores)


@pytest.mark.parametrize(
    "make",
    [
        lambda: RandomForestClassifier(n_estimators=9, batch_size=2, projection="gaussian",
                                       n_components=3, random_state=0),
        lambda: ExtraTreesRegressor(n_estimators=5, batch_size=3, max_features=0.5,
                                    random_state=1),
        lambda: DecisionTreeClassifier(projection="sparse", n_components=4, random_state=2),
    ],
    ids=["forest-in-5-chunks", "extra-trees-regressor", "tree"],
)
@pytest.mark.parametrize("sparse_x", [False, True])
def test_sparse_leaves_rank_as_the_dense_predictions_bit_for_bit(make, sparse_x, monkeypatch):
    # the leaf sums for any d (d = 60 may take the dense blocks)
    monkeypatch.setattr(leaf_top_k, "LEAF_TOP_K_MIN_RATIO", 0)
    X, Y = make_multilabel(300, 12, 60, label_cardinality=3.0, sparse_output=True,
                           random_state=4)
    if isinstance(make(), ExtraTreesRegressor):
        Y = Y.multiply(np.random.default_rng(0).normal(size=Y.shape)).tocsr()  # signed sums
    model = make().fit(X[:220], Y[:220])
    X_test = sp.csr_matrix(X[220:]) if sparse_x else X[220:]
    dense = model.predict_proba(X_test) if hasattr(model, "predict_proba") else \
        model.predict(X_test)
    dense = dense.toarray() if sp.issparse(dense) else np.asarray(dense)
    ref_indices, ref_scores = top_k(dense, 8, NUMPY)
    indices, scores = model.predict_top_k(X_test, k=8)
    np.testing.assert_array_equal(indices, ref_indices)
    np.testing.assert_array_equal(scores, ref_scores)


def test_the_leaf_sums_are_preferred_from_d_4_times_the_entries_a_row_reaches():
    # two groups: 10 leaf rows holding 50 entries in all, so 5 per leaf; 4 trees: L = 20
    values = [
        sp.csr_matrix((np.ones(30), (np.repeat(np.arange(6), 5), np.arange(30))),
                      shape=(6, 1000)),
        sp.csr_matrix((np.ones(20), (np.repeat(np.arange(4), 5), np.arange(20))),
                      shape=(4, 1000)),
    ]
    assert prefers_leaf_sums(values, 4, 4 * 20)
    assert not prefers_leaf_sums(values, 4, 4 * 20 - 1)
    assert prefers_leaf_sums([sp.csr_matrix((3, 40))], 2, 4)  # empty leaves: L counts as 1
    assert not prefers_leaf_sums([sp.csr_matrix((3, 40))], 2, 3)


@pytest.mark.parametrize("Model", [RandomForestClassifier, DecisionTreeClassifier])
def test_predict_top_k_takes_the_route_the_rule_prefers(Model, monkeypatch):
    X, Y = make_multilabel(200, 6, 50, label_cardinality=3.0, sparse_output=True,
                           random_state=1)
    model = Model(projection="gaussian", n_components=3, random_state=0).fit(X, Y)
    module = forest_base if Model is RandomForestClassifier else tree_classes

    def refused(*args, **kwargs):
        raise AssertionError("the other route")

    expected = model.predict_top_k(X, k=4)
    monkeypatch.setattr(leaf_top_k, "LEAF_TOP_K_MIN_RATIO", 0)
    monkeypatch.setattr(module, "top_k_of_row_blocks", refused)
    for got, want in zip(model.predict_top_k(X, k=4), expected):
        np.testing.assert_array_equal(got, want)
    monkeypatch.undo()
    monkeypatch.setattr(leaf_top_k, "LEAF_TOP_K_MIN_RATIO", 10**9)
    monkeypatch.setattr(module, "top_k_of_leaf_sums", refused)
    for got, want in zip(model.predict_top_k(X, k=4), expected):
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("ratio", [0, 10**9])
@pytest.mark.parametrize("sparse_x", [False, True])
def test_sparse_label_predictions_equal_thresholding_the_dense_probabilities(ratio, sparse_x,
                                                                             monkeypatch):
    monkeypatch.setattr(leaf_top_k, "LEAF_TOP_K_MIN_RATIO", ratio)
    X, Y = make_multilabel(300, 12, 60, label_cardinality=6.0, sparse_output=True,
                           random_state=5)
    forest = RandomForestClassifier(n_estimators=7, batch_size=3, projection="gaussian",
                                    n_components=3, max_features=0.5, random_state=0)
    forest.fit(X[:220], Y[:220])
    X_test = sp.csr_matrix(X[220:]) if sparse_x else X[220:]
    expected = (forest.predict_proba(X_test) > 0.5).astype(np.int64)
    assert 0 < expected.sum() < expected.size  # some labels on, some off
    labels = forest.predict(X_test)
    assert sp.issparse(labels) and labels.format == "csr" and labels.dtype == np.int64
    assert not np.any(labels.data == 0)
    np.testing.assert_array_equal(labels.toarray(), expected)


def test_leaf_sums_csr_stores_the_dense_sums_bit_for_bit():
    rng = np.random.default_rng(3)
    values = [sp.csr_matrix(np.where(rng.random((6, 25)) < 0.3, rng.normal(size=(6, 25)), 0.0))
              for _ in range(2)]
    rows = [rng.integers(-1, 6, size=(11, 3)).astype(np.int32) for _ in range(2)]
    S = leaf_top_k.leaf_sums_csr(11, 25, 5.0, values, lambda r0, r1: [r[r0:r1] for r in rows],
                                 block_rows=4)
    dense = np.zeros((11, 25))
    for r, V in zip(rows, values):
        for t in range(r.shape[1]):
            for i in range(11):
                if r[i, t] >= 0:
                    dense[i] += V.toarray()[r[i, t]]
    dense /= 5.0
    np.testing.assert_array_equal(S.toarray(), dense)
    reached = np.zeros((11, 25), dtype=bool)
    for r, V in zip(rows, values):
        for t in range(r.shape[1]):
            for i in range(11):
                if r[i, t] >= 0:
                    reached[i] |= V.toarray()[r[i, t]] != 0
    stored = np.zeros((11, 25), dtype=bool)
    stored[np.repeat(np.arange(11), np.diff(S.indptr)), S.indices] = True
    np.testing.assert_array_equal(stored, reached)  # the columns the leaves hold


# --------------------------------------------------------------------------
# out-of-bag predictions of sparse outputs, kept sparse
# --------------------------------------------------------------------------


@pytest.mark.parametrize("Forest", [RandomForestClassifier, RandomForestRegressor])
@pytest.mark.parametrize("sparse_x", [False, True])
def test_sparse_out_of_bag_predictions_equal_the_dense_ones(Forest, sparse_x, monkeypatch):
    X, Y = make_multilabel(240, 10, 40, label_cardinality=5.0, sparse_output=True,
                           random_state=6)
    if Forest is RandomForestRegressor:
        Y = Y.multiply(np.random.default_rng(1).normal(size=Y.shape)).tocsr()
    X = sp.csr_matrix(X) if sparse_x else X
    params = dict(n_estimators=6, batch_size=4, oob_score=True, projection="gaussian",
                  n_components=3, random_state=0)
    name = "oob_decision_function_" if Forest is RandomForestClassifier else "oob_prediction_"
    with pytest.warns(UserWarning, match="do not have OOB scores"):
        dense = Forest(**params).fit(X, Y)
    # the dense (240, 40) float64 predictions are over the budget: kept sparse
    monkeypatch.setattr(forest_base, "OOB_MAX_BYTES", 8 * 240 * 40 - 1)
    with pytest.warns(UserWarning, match="do not have OOB scores"):
        sparse = Forest(**params).fit(X, Y)
    assert sparse.oob_score_ == dense.oob_score_
    kept = getattr(sparse, name)
    assert sp.issparse(kept) and kept.shape == (240, 40)
    reference = getattr(dense, name)
    valid = ~np.isnan(reference).any(axis=1)
    assert 0 < valid.sum() < 240
    np.testing.assert_array_equal(kept.toarray()[valid], reference[valid])
    assert np.diff(kept.indptr)[~valid].sum() == 0  # rows no tree left out: no entries


def test_sparse_out_of_bag_score_after_a_warm_start_equals_one_fit(monkeypatch):
    X, Y = make_multilabel(200, 8, 30, label_cardinality=4.0, sparse_output=True,
                           random_state=7)
    monkeypatch.setattr(forest_base, "OOB_MAX_BYTES", 8 * 200 * 30 - 1)
    params = dict(oob_score=True, projection="gaussian", n_components=2, random_state=3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # rows in every early bag
        cold = RandomForestClassifier(n_estimators=12, **params).fit(X, Y)
        warm = RandomForestClassifier(n_estimators=4, warm_start=True, **params).fit(X, Y)
        warm.set_params(n_estimators=12).fit(X, Y)
    assert warm.oob_score_ == cold.oob_score_
    assert (warm.oob_decision_function_ != cold.oob_decision_function_).nnz == 0


def test_dense_outputs_over_the_out_of_bag_budget_are_still_refused(monkeypatch):
    X, Y = make_multilabel(100, 8, 20, label_cardinality=4.0, sparse_output=True,
                           random_state=8)
    monkeypatch.setattr(forest_base, "OOB_MAX_BYTES", 8 * 100 * 20 - 1)
    forest = RandomForestClassifier(n_estimators=3, oob_score=True, random_state=0)
    with pytest.raises(ValueError, match=r"only sparse y on the CPU keeps them sparse"):
        forest.fit(X, Y.toarray())


def test_rows_are_summed_in_ranges_within_the_entry_budget():
    rng = np.random.default_rng(9)
    values = [sp.csr_matrix(np.where(rng.random((8, 50)) < 0.4, 1.0, 0.0))]
    leaf_rows = rng.integers(-1, 8, size=(37, 4)).astype(np.int32)
    reached = [sum(values[0][j].nnz for j in row if j >= 0) for row in leaf_rows]
    ranges = list(leaf_top_k._block_sums(37, values, lambda r0, r1: [leaf_rows[r0:r1]],
                                         block_rows=10, block_entries=45))
    assert [r[0] for r in ranges] == sorted(r[0] for r in ranges)
    covered = np.concatenate([np.arange(r0, r1) for r0, r1, *_ in ranges])
    np.testing.assert_array_equal(covered, np.arange(37))
    for r0, r1, start, count, cols, sums in ranges:
        assert start[0] == 0 and len(cols) == start[-1] == sum(reached[r0:r1])
        assert start[-1] <= 45 or r1 - r0 == 1
        assert r0 // 10 == (r1 - 1) // 10  # within one traversal block
