"""Random-output forests: exact trees, sums, out-of-bag, determinism, inputs.

References are independent of the forest code: scikit-learn's
DecisionTreeRegressor on the same (already discrete) data, means of the
trees' own predictions computed tree by tree with NumPy, bootstrap indices
re-drawn in the test, scikit-learn's r2_score / LRAP, dense/sparse twins.
"""

from __future__ import annotations

import pickle
import re

import numpy as np
import pytest
import scipy.sparse as sp
from _edge_table import ragged
from _split_records import split_records
from sklearn.metrics import label_ranking_average_precision_score, r2_score
from sklearn.tree import DecisionTreeRegressor as SkTree

from gpurpo.backend import NUMPY, Backend
from gpurpo.datasets import make_multilabel
from gpurpo.ensemble import (
    ExtraTreesClassifier,
    ExtraTreesRegressor,
    RandomForestClassifier,
    RandomForestRegressor,
)
from gpurpo.projections import OutputProjection, make_projection
from gpurpo.tree import BinMapper, GrowthParams, grow_trees, kernels
from gpurpo.tree.leaves import SPARSE_OUTPUT_DENSITY

FORESTS = [
    RandomForestRegressor, RandomForestClassifier, ExtraTreesRegressor, ExtraTreesClassifier
]


def _regression(seed=0, n=200, p=6, d=4):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, p))
    W = rng.normal(size=(p, d))
    Y = np.sin(X @ W) + 0.1 * rng.normal(size=(n, d))
    return X, Y


def _multilabel(seed=0, n=300, p=10, d=20, sparse=True):
    return make_multilabel(n, p, d, label_cardinality=3.0, sparse_output=sparse, random_state=seed)


def _tree_mean(forest, X):
    """Mean over the forest's trees of each tree's own prediction (tree by tree)."""
    preds = [np.asarray(t.predict(X, NUMPY)) for t in forest.estimators_]
    return np.mean(preds, axis=0)


def _same_partition(a, b):
    """Whether two leaf assignments of the same rows group the rows alike."""
    pairs = set(zip(np.asarray(a).tolist(), np.asarray(b).tolist()))
    return len(pairs) == len(set(np.asarray(a).tolist())) == len(set(np.asarray(b).tolist()))


# --------------------------------------------------------------------------
# exact multi-output trees
# --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "stop", [dict(max_depth=1), dict(max_depth=3), dict(min_samples_split=30)]
)
def test_unprojected_unbootstrapped_trees_are_exact_variance_trees(stop):
    # n = 250 continuous values per feature: each gets its own bin, so binning is
    # exact and every tree must be scikit-learn's exact multi-output
    # variance-reduction tree on the same data (nodes stay large enough that no two
    # features induce the same partition, so there are no ties).
    X, Y = _regression(seed=len(str(stop)), n=250, p=5, d=3)
    forest = RandomForestRegressor(
        n_estimators=3, projection=None, bootstrap=False, max_features=None,
        random_state=0, **stop,
    ).fit(X, Y)
    ref = SkTree(random_state=0, **stop).fit(X, Y)
    # Compared on the training rows: a split may fall anywhere in a gap between the
    # values present in a node (scikit-learn: mid-gap, histograms: a bin edge).
    for tree in forest.estimators_:
        np.testing.assert_allclose(tree.predict(X, NUMPY), ref.predict(X), rtol=0, atol=1e-12)
        # same partition of the training samples
        ours = np.asarray(tree.apply(X, NUMPY))
        theirs = ref.apply(X)
        pairs = set(zip(ours.tolist(), theirs.tolist()))
        assert len(pairs) == len(set(ours.tolist())) == len(set(theirs.tolist()))
        assert tree.node_count == ref.tree_.node_count
        sk_features = np.maximum(ref.tree_.feature, -1)  # scikit-learn marks leaves with -2
        np.testing.assert_array_equal(np.sort(tree.feature), np.sort(sk_features))
    np.testing.assert_allclose(forest.predict(X), ref.predict(X), atol=1e-12)
    np.testing.assert_allclose(forest.feature_importances_, ref.feature_importances_, atol=1e-9)


def test_gaussian_projection_with_many_components_keeps_the_exact_tree_at_low_depth():
    # Theorem 1: with m >> log n the projected variance reduction ranks splits as the
    # original one; with a clear structure the top splits are unchanged.
    rng = np.random.default_rng(1)
    X = rng.integers(0, 20, size=(400, 4)).astype(float)
    Y = np.stack([(X[:, 0] > 9) * 3.0, (X[:, 1] > 4) * 2.0, (X[:, 0] > 9) * 1.0], axis=1)
    Y = Y + 0.01 * rng.normal(size=Y.shape)
    forest = RandomForestRegressor(
        n_estimators=2, projection="gaussian", n_components=200, bootstrap=False,
        max_features=None, max_depth=2, random_state=0,
    ).fit(X, Y)
    ref = SkTree(max_depth=2).fit(X, Y)
    np.testing.assert_allclose(forest.predict(X), ref.predict(X), atol=1e-12)


# --------------------------------------------------------------------------
# prediction = mean of the trees, leaves in the original space
# --------------------------------------------------------------------------


@pytest.mark.parametrize("sparse_y", [False, True])
def test_prediction_is_the_mean_of_the_trees(sparse_y):
    X, Y = _multilabel(seed=2, sparse=sparse_y)
    forest = RandomForestRegressor(
        n_estimators=9, projection="gaussian", n_components=3, max_features="sqrt",
        batch_size=4, random_state=0,
    ).fit(X, Y)
    assert len(forest.estimators_) == 9
    assert forest.batch_size_ == 4
    X_new, _ = _multilabel(seed=3, n=80, sparse=sparse_y)
    pred = forest.predict(X_new)
    assert isinstance(pred, np.ndarray) and pred.shape == (80, Y.shape[1])
    ref = _tree_mean(forest, X_new)
    np.testing.assert_allclose(pred, ref, rtol=1e-12, atol=1e-12)
    # leaves hold the mean ORIGINAL outputs of the in-bag samples (bootstrap weights)
    Yd = Y.toarray() if sparse_y else Y
    samples = forest.estimators_samples_
    for t, tree in enumerate(forest.estimators_[:3]):
        counts = np.bincount(samples[t], minlength=X.shape[0])
        leaf = np.asarray(tree.apply(X, NUMPY))
        values = tree.value.toarray() if sp.issparse(tree.value) else np.asarray(tree.value)
        for node in np.unique(leaf[counts > 0]):
            inside = (leaf == node) & (counts > 0)
            expected = (counts[inside, None] * Yd[inside]).sum(0) / counts[inside].sum()
            np.testing.assert_allclose(values[tree.leaf_index[node]], expected, atol=1e-12)
        # sparse leaves for sparse y, and for dense y of few nonzeros (their own density)
        few_nonzeros = np.count_nonzero(Yd) <= SPARSE_OUTPUT_DENSITY * Yd.size
        assert sp.issparse(tree.value) == (sparse_y or few_nonzeros)


def test_dense_and_sparse_outputs_give_the_same_forest():
    X, Y = _multilabel(seed=4, sparse=True)
    kwargs = dict(n_estimators=6, projection="gaussian", n_components=4, random_state=3)
    dense = RandomForestClassifier(**kwargs).fit(X, Y.toarray())
    sparse = RandomForestClassifier(**kwargs).fit(X, Y)
    np.testing.assert_allclose(dense.predict_proba(X), sparse.predict_proba(X), atol=1e-12)
    assert isinstance(dense.predict(X), np.ndarray)
    assert sp.issparse(sparse.predict(X))
    np.testing.assert_array_equal(dense.predict(X), sparse.predict(X).toarray())


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_fortran_ordered_inputs_are_left_untouched_and_give_the_same_forest(dtype):
    X, Y = _regression(seed=25, n=150)
    X = X.astype(dtype)
    XF = np.asfortranarray(X)
    kwargs = dict(n_estimators=3, max_features=2, random_state=0)
    a = RandomForestRegressor(**kwargs).fit(X, Y).predict(X)
    b = RandomForestRegressor(**kwargs).fit(XF, Y).predict(XF)
    np.testing.assert_array_equal(XF, X)
    np.testing.assert_array_equal(a, b)


def test_sparse_inputs_equal_dense_inputs():
    X, Y = _regression(seed=5, n=150, p=8, d=2)
    X[np.abs(X) < 0.7] = 0.0
    kwargs = dict(n_estimators=4, max_features=3, random_state=0)
    a = ExtraTreesRegressor(**kwargs).fit(X, Y).predict(X)
    b = ExtraTreesRegressor(**kwargs).fit(sp.csr_matrix(X), Y).predict(sp.csc_matrix(X))
    np.testing.assert_allclose(a, b, atol=1e-12)


def test_wide_sparse_label_space_keeps_sparse_leaves():
    rng = np.random.default_rng(26)
    n, d = 300, 100_000
    X = rng.normal(size=(n, 5))
    cols = rng.integers(0, d, size=(n, 4))
    cols[:, 0] = (X[:, 0] > 0).astype(int)  # two frequent labels that depend on X
    Y = sp.csr_matrix((np.ones(4 * n), (np.repeat(np.arange(n), 4), cols.ravel())), shape=(n, d))
    Y.data[:] = 1.0
    forest = RandomForestClassifier(
        n_estimators=3, projection="gaussian", n_components="log", random_state=0
    ).fit(X, Y)
    assert forest.n_projected_outputs_ == round(np.log(d))
    for tree in forest.estimators_:
        assert sp.issparse(tree.value) and tree.value.nnz <= Y.nnz
    proba = forest.predict_proba(X[:5])
    np.testing.assert_allclose(proba, _tree_mean(forest, X[:5]), atol=1e-12)
    assert sp.issparse(forest.predict(X[:5]))


@pytest.mark.parametrize(
    "n_components, expected",
    [(3, 3), ("log", 3), ("sqrt", 4), (0.5, 10), ("auto", 3161)],
)
def test_n_components_specifications(n_components, expected):
    # d = 20 outputs; "auto" is the Johnson-Lindenstrauss bound for n = 40 samples:
    # floor(4 ln 40 / (0.1^2 / 2 - 0.1^3 / 3)) = 3161
    X, Y = _regression(seed=27, n=40, d=20)
    forest = RandomForestRegressor(
        n_estimators=2, projection="gaussian", n_components=n_components, max_depth=2,
        random_state=0,
    ).fit(X, Y)
    assert forest.n_projected_outputs_ == expected
    Phi = forest.get_projection(1)
    assert Phi.shape == (expected, 20)
    # "gaussian" entries are i.i.d. N(0, 1/m): m * Phi**2 are chi2(1) draws of mean 1
    assert abs(np.mean(expected * Phi**2) - 1.0) < 6 * np.sqrt(2.0 / Phi.size)
    assert abs(np.mean(Phi) * np.sqrt(expected)) < 6 / np.sqrt(Phi.size)
    # tree 1 was grown on Y Phi^T: scikit-learn's exact tree on those targets, the
    # bootstrap counts as weights, partitions the in-bag rows alike (40 continuous
    # values per feature: each gets its own bin, so binning is exact)
    counts = np.bincount(forest.estimators_samples_[1], minlength=X.shape[0])
    inbag = counts > 0
    ref = SkTree(max_depth=2, random_state=0).fit(
        X[inbag], (Y @ Phi.T)[inbag], sample_weight=counts[inbag]
    )
    ours = forest.estimators_[1].apply(X[inbag], NUMPY)
    assert _same_partition(ours, ref.apply(X[inbag]))


# --------------------------------------------------------------------------
# randomness
# --------------------------------------------------------------------------


@pytest.mark.parametrize("Forest", FORESTS)
def test_same_seed_same_forest_whatever_the_batch_size(Forest):
    X, Y = _multilabel(seed=6)
    X_new, _ = _multilabel(seed=60, n=100)
    kwargs = dict(n_estimators=5, projection="gaussian", n_components=2, random_state=7)
    fits = [Forest(batch_size=b, **kwargs).fit(X, Y) for b in (1, 2, "auto")]
    method = "predict_proba" if hasattr(fits[0], "predict_proba") else "predict"
    outs = [getattr(f, method)(X_new) for f in fits]
    for out in outs[1:]:
        np.testing.assert_array_equal(outs[0], out)
    other = Forest(batch_size=5, **{**kwargs, "random_state": 8}).fit(X, Y)
    assert not np.array_equal(outs[0], getattr(other, method)(X_new))


@pytest.mark.parametrize(
    "n_trees, threads, expected",
    # at most CPU_BATCH_TREES (8) trees, in rounds of one batch per thread evened out
    [(30, 1, 8), (30, 2, 8), (24, 2, 6), (100, 2, 8), (30, 4, 8), (30, 8, 4), (30, 16, 2)],
)
def test_auto_batch_on_the_cpu_keeps_every_thread_busy(n_trees, threads, expected):
    from gpurpo.ensemble.forest import batches

    assert batches.resolve_batch_size("auto", n_trees, 1000, NUMPY, threads) == expected
    # the memory budget is shared by the threads' batches and wins when smaller
    per_tree = batches.CPU_BATCH_BYTES // 12
    assert batches.resolve_batch_size("auto", 30, per_tree, NUMPY, 4) == 3
    assert batches.resolve_batch_size("auto", 30, 10 * batches.CPU_BATCH_BYTES, NUMPY, 1) == 1
    assert batches.resolve_batch_size("auto", 5, 1000, NUMPY, 1) == 5


def test_batches_in_parallel_only_on_the_cpu_with_trees_for_half_the_threads():
    from gpurpo.backend import EMULATED
    from gpurpo.ensemble.forest.batches import grows_batches_in_parallel as parallel

    assert parallel(NUMPY, 100, 16) and parallel(NUMPY, 8, 16) and parallel(NUMPY, 1, 2)
    assert not parallel(NUMPY, 7, 16)  # a single batch with the kernels on 16 threads
    assert not parallel(NUMPY, 100, 1)
    assert not parallel(EMULATED, 100, 4)


@pytest.mark.filterwarnings("ignore:Some inputs do not have OOB scores")
@pytest.mark.parametrize("Forest", [RandomForestRegressor, ExtraTreesClassifier])
@pytest.mark.parametrize("shared", [False, True])
def test_batches_grown_on_threads_give_the_same_forest(Forest, shared, monkeypatch, capsys):
    import numba

    from gpurpo import backend as B

    if numba.config.NUMBA_NUM_THREADS < 2:
        pytest.skip("needs numba to allow 2 threads (a machine with at least 2 cores)")
    X, Y = _multilabel(seed=9)
    X_new, _ = _multilabel(seed=90, n=60)
    kwargs = dict(n_estimators=7, projection="gaussian", n_components=3, batch_size=2,
                  shared_projection=shared, bootstrap=True, oob_score=True, random_state=3)
    serial_calls = []
    twin = B._registry._serial_twin

    def counting_twin(impl):
        # the twins of serial mode (small calls take them in any mode)
        if getattr(B._registry._serial_state, "on", False):
            serial_calls.append(impl)
        return twin(impl)

    monkeypatch.setattr(B._registry, "_serial_twin", counting_twin)
    one = Forest(n_jobs=1, **kwargs).fit(X, Y)
    assert not serial_calls
    two = Forest(n_jobs=2, verbose=1, **kwargs).fit(X, Y)
    assert serial_calls  # the batches ran their kernels' single-threaded twins
    assert "2 batches at a time" in capsys.readouterr().err
    method = "predict_proba" if hasattr(one, "predict_proba") else "predict"
    np.testing.assert_array_equal(getattr(one, method)(X_new), getattr(two, method)(X_new))
    np.testing.assert_array_equal(one.oob_score_, two.oob_score_)
    for a, b in zip(one.estimators_, two.estimators_):
        np.testing.assert_array_equal(a.feature, b.feature)
        np.testing.assert_array_equal(a.threshold, b.threshold)


def test_serial_kernel_twins_are_single_threaded_and_release_the_gil():
    from gpurpo import backend as B

    parallel = NUMPY.kernel("tree_best_slot")
    with B.serial_cpu_kernels():
        twin = NUMPY.kernel("tree_best_slot")
        assert NUMPY.kernel("tree_best_slot") is twin  # made once
    assert NUMPY.kernel("tree_best_slot") is parallel  # only inside the block
    assert parallel.targetoptions.get("parallel")
    assert twin.targetoptions.get("nogil") and not twin.targetoptions.get("parallel")
    assert twin.py_func.__code__ is parallel.py_func.__code__


def test_split_kernel_launches_run_the_serial_twins(monkeypatch):
    # the registered split and score kernels are Python launches unpacking argument records;
    # inside serial_cpu_kernels they must call the single-threaded twins of the compiled kernels
    from gpurpo import backend as B
    from gpurpo.tree._numba import tree_grow_subtrees, tree_score, tree_split_small

    called = []
    original = B.cpu_helper

    def spy(fn, **kwargs):
        got = original(fn, **kwargs)
        called.append((fn, got))
        return got

    monkeypatch.setattr(tree_grow_subtrees, "cpu_helper", spy)
    monkeypatch.setattr(tree_split_small, "cpu_helper", spy)
    monkeypatch.setattr(tree_score, "cpu_helper", spy)
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 4))
    y = X[:, 0] + X[:, 1] ** 2
    n, n_bins = 40, 5
    codes = rng.integers(0, n_bins, size=(3, n)).astype(np.uint8)
    problem = (codes, np.arange(n, dtype=np.int32), np.array([[0, n]], dtype=np.int64),
               np.zeros(1, np.int32), np.ones(1, np.uint64), np.ones((1, n), np.float32),
               rng.normal(size=(n, 1, 2)).astype(np.float32),
               *ragged(np.tile(np.arange(1.0, n_bins), (3, 1))), 3, 1, False, n_bins - 1, 1e-5)
    with B.serial_cpu_kernels():
        RandomForestRegressor(n_estimators=2, random_state=0).fit(X, y)  # grows subtrees
        kernels.split_small(NUMPY, *split_records(*problem))
        hist = rng.random((1, 3, n_bins, 3)).astype(np.float32)
        kernels.score_histograms(NUMPY, hist, np.array([[0, 1, 2]], np.int32), 2, 1, False,
                                 None, kernels.EdgeTable(*problem[7:9]))
    assert {fn for fn, _ in called} == {tree_grow_subtrees.grow_subtrees,
                                        tree_split_small.split_small_nodes,
                                        tree_score.score_histograms}
    for fn, got in called:
        assert fn.targetoptions.get("parallel")
        assert got.targetoptions.get("nogil") and not got.targetoptions.get("parallel")


def test_small_calls_run_the_serial_twins(monkeypatch):
    # a partition of 40 samples runs on one thread; the same call above the limit on all
    from gpurpo import backend as B
    from gpurpo.tree._numba import tree_partition

    got = []
    original = B.cpu_helper

    def spy(fn, **kwargs):
        got.append(original(fn, **kwargs))
        return got[-1]

    monkeypatch.setattr(tree_partition, "cpu_helper", spy)
    rng = np.random.default_rng(1)
    codes = rng.integers(0, 5, size=(2, 40)).astype(np.uint8)
    results = []
    for limit in (tree_partition.SERIAL_SAMPLES, 0):
        monkeypatch.setattr(tree_partition, "SERIAL_SAMPLES", limit)
        samples = np.arange(40, dtype=np.int32)
        n_left = kernels.partition(
            NUMPY, codes, kernels.NodeBatch(samples, np.array([[0, 40]], dtype=np.int64),
                                            np.zeros(1, np.int32)),
            kernels.NodeSplits(np.array([1], np.int32), np.array([2], np.int32),
                               np.zeros(1, np.uint8)), 4)
        results.append((samples, n_left))
    assert got[0] is not tree_partition.partition and not got[0].targetoptions.get("parallel")
    assert got[1] is tree_partition.partition
    np.testing.assert_array_equal(results[0][0], results[1][0])
    assert results[0][1][0] == results[1][1][0] == (codes[1] <= 2).sum()


def test_grower_host_helpers_follow_serial_mode():
    from gpurpo import backend as B
    from gpurpo.tree._numba.gather_trees import gather_tree_arrays

    assert B.cpu_helper(gather_tree_arrays) is gather_tree_arrays
    with B.serial_cpu_kernels():
        twin = B.cpu_helper(gather_tree_arrays)
    assert twin is not gather_tree_arrays and not twin.targetoptions.get("parallel")
    assert twin.targetoptions.get("nogil")


def test_per_tree_projections_differ_and_are_redrawn_from_their_seeds():
    X, Y = _multilabel(seed=7)
    forest = RandomForestClassifier(
        n_estimators=4, projection="sparse", n_components=5, random_state=0
    ).fit(X, Y)
    assert forest.projection_ is None
    mats = [forest.get_projection(i) for i in range(4)]
    d = Y.shape[1]
    assert all(m.shape == (5, d) for m in mats)
    # "sparse": each entry is nonzero with probability 1/s, s = sqrt(d), and then
    # +-sqrt(s/m) with equal probability
    s = np.sqrt(d)
    for mat in mats:
        np.testing.assert_allclose(np.abs(mat.data), np.sqrt(s / 5), rtol=1e-6)
    signs = np.concatenate([np.sign(m.data) for m in mats])
    cells, nnz = 4 * 5 * d, signs.size
    assert abs(nnz - cells / s) < 5 * np.sqrt(cells / s * (1 - 1 / s))
    assert abs(signs.sum()) < 5 * np.sqrt(nnz)
    assert (mats[0] != mats[1]).nnz > 0
    assert (forest.get_projection(2) != mats[2]).nnz == 0
    with pytest.raises(ValueError, match=re.escape("i must be in [0, n_estimators=4), got 4")):
        forest.get_projection(4)


def test_shared_projection_is_one_matrix_for_all_trees():
    X, Y = _multilabel(seed=8)
    proj = OutputProjection("gaussian", n_components=3, random_state=11)
    forest = RandomForestRegressor(
        n_estimators=3, projection=proj, shared_projection=True, random_state=0
    ).fit(X, Y)
    expected = make_projection("gaussian", 3, Y.shape[1], 11, n_samples=X.shape[0])
    np.testing.assert_array_equal(forest.projection_, expected)
    for i in range(3):
        np.testing.assert_array_equal(forest.get_projection(i), expected)
    assert forest.n_projected_outputs_ == 3
    assert proj.random_state == 11 and not hasattr(proj, "components_")


def test_output_projection_instance_per_tree_uses_its_parameters():
    X, Y = _multilabel(seed=9)
    proj = OutputProjection("subsample", n_components=4)
    forest = RandomForestRegressor(n_estimators=3, projection=proj, random_state=0).fit(X, Y)
    assert forest.n_projected_outputs_ == 4
    mats = [forest.get_projection(i) for i in range(3)]
    d = Y.shape[1]
    for m in mats:
        # 4 distinct rows of the d x d identity (drawn without replacement), times sqrt(d/4)
        assert m.shape == (4, d) and m.nnz == 4
        np.testing.assert_array_equal(np.diff(m.indptr), [1, 1, 1, 1])
        assert len(set(m.indices.tolist())) == 4
        np.testing.assert_allclose(m.data, np.sqrt(d / 4), rtol=1e-6)
    assert any((mats[0] != m).nnz for m in mats[1:])


# --------------------------------------------------------------------------
# bootstrap and out-of-bag
# --------------------------------------------------------------------------


def test_bootstrap_samples_and_max_samples():
    X, Y = _regression(seed=10, n=120)
    forest = RandomForestRegressor(n_estimators=4, max_samples=0.5, random_state=0).fit(X, Y)
    samples = forest.estimators_samples_
    assert [len(s) for s in samples] == [60] * 4
    for s, tree in zip(samples, forest.estimators_):
        assert tree.n_node_samples[0] == len(np.unique(s))
        assert tree.weighted_n_node_samples[0] == pytest.approx(60.0)
    no_boot = ExtraTreesRegressor(n_estimators=2, random_state=0).fit(X, Y)
    for s, tree in zip(no_boot.estimators_samples_, no_boot.estimators_):
        np.testing.assert_array_equal(s, np.arange(120))
        assert tree.n_node_samples[0] == 120


def test_oob_regression_matches_per_tree_reference():
    X, Y = _regression(seed=11, n=200, d=3)
    forest = RandomForestRegressor(n_estimators=12, oob_score=True, random_state=0).fit(X, Y)
    n = X.shape[0]
    total = np.zeros_like(Y)
    count = np.zeros(n)
    for s, tree in zip(forest.estimators_samples_, forest.estimators_):
        oob = np.bincount(s, minlength=n) == 0
        total[oob] += np.asarray(tree.predict(X, NUMPY))[oob]
        count[oob] += 1
    valid = count > 0
    ref = total[valid] / count[valid, None]
    np.testing.assert_allclose(forest.oob_prediction_[valid], ref, atol=1e-12)
    assert np.isnan(forest.oob_prediction_[~valid]).all()
    assert forest.oob_score_ == pytest.approx(r2_score(Y[valid], ref), abs=1e-10)
    # 1-D targets give 1-D OOB predictions; a callable scores them
    forest1 = RandomForestRegressor(
        n_estimators=12, oob_score=lambda t, p: -np.mean((t - p) ** 2), random_state=0
    ).fit(X, Y[:, 0])
    assert forest1.oob_prediction_.shape == (n,)
    total1 = np.zeros(n)
    count1 = np.zeros(n)
    for s, tree in zip(forest1.estimators_samples_, forest1.estimators_):
        oob = np.bincount(s, minlength=n) == 0
        total1[oob] += np.asarray(tree.predict(X, NUMPY)).reshape(n)[oob]
        count1[oob] += 1
    valid1 = count1 > 0
    np.testing.assert_allclose(
        forest1.oob_prediction_[valid1], total1[valid1] / count1[valid1], atol=1e-12
    )
    assert np.isnan(forest1.oob_prediction_[~valid1]).all()
    ok = ~np.isnan(forest1.oob_prediction_)
    mse = np.mean((Y[ok, 0] - forest1.oob_prediction_[ok]) ** 2)
    assert forest1.oob_score_ == pytest.approx(-mse)


def test_oob_multilabel_is_lrap_and_single_label_is_accuracy():
    X, Y = _multilabel(seed=12, n=250, sparse=True)
    forest = RandomForestClassifier(
        n_estimators=15, projection="gaussian", n_components=3, oob_score=True, random_state=0
    ).fit(X, Y)
    proba = forest.oob_decision_function_
    valid = ~np.isnan(proba).any(axis=1)
    Yd = Y.toarray()
    keep = valid & (Yd.sum(1) > 0)
    ref = label_ranking_average_precision_score(Yd[keep], proba[keep])
    assert forest.oob_score_ == pytest.approx(ref, abs=1e-10)
    labels = np.array(["a", "b", "c"])[np.asarray(Yd[:, :3].argmax(1))]
    single = RandomForestClassifier(n_estimators=15, oob_score=True, random_state=0).fit(X, labels)
    proba1 = single.oob_decision_function_
    ok = ~np.isnan(proba1).any(axis=1)
    acc = np.mean(single.classes_[proba1[ok].argmax(1)] == labels[ok])
    assert single.oob_score_ == pytest.approx(acc)
    np.testing.assert_allclose(proba1[ok].sum(1), 1.0)


def test_oob_warns_when_some_samples_are_never_out_of_bag():
    X, Y = _regression(seed=13, n=60)
    with pytest.warns(UserWarning, match="do not have OOB scores"):
        forest = RandomForestRegressor(n_estimators=1, oob_score=True, random_state=0).fit(X, Y)
    assert np.isnan(forest.oob_prediction_).any()
    assert np.isfinite(forest.oob_score_)


# --------------------------------------------------------------------------
# inspection, stopping rules, verbose, pickling
# --------------------------------------------------------------------------


def test_feature_importances_sum_to_one_and_find_the_informative_feature():
    rng = np.random.default_rng(14)
    X = rng.normal(size=(300, 6))
    Y = np.stack([np.sign(X[:, 2]), np.sign(X[:, 2]) * 2, rng.normal(size=300) * 0.1], axis=1)
    for Forest in (RandomForestRegressor, ExtraTreesRegressor):
        forest = Forest(n_estimators=10, projection="gaussian", n_components=2, random_state=0)
        imp = forest.fit(X, Y).feature_importances_
        assert imp.shape == (6,) and (imp >= 0).all()
        assert imp.sum() == pytest.approx(1.0)
        assert imp.argmax() == 2
    stump = RandomForestRegressor(n_estimators=2, max_depth=1, random_state=0).fit(X[:, :1], Y)
    np.testing.assert_allclose(stump.feature_importances_, [1.0])


def test_stopping_rules_hold_in_every_tree():
    X, Y = _regression(seed=15, n=300)
    f = RandomForestRegressor(n_estimators=3, max_leaf_nodes=7, random_state=0).fit(X, Y)
    assert all(t.n_leaves <= 7 for t in f.estimators_)
    f = ExtraTreesRegressor(n_estimators=3, max_depth=3, random_state=0).fit(X, Y)
    assert all(t.max_depth <= 3 for t in f.estimators_)
    f = RandomForestRegressor(n_estimators=3, min_samples_leaf=9, random_state=0).fit(X, Y)
    for t in f.estimators_:
        assert t.n_node_samples[t.feature < 0].min() >= 9
    applied = f.apply(X)
    assert applied.shape == (300, 3)
    for j, t in enumerate(f.estimators_):
        assert (t.feature[applied[:, j]] == -1).all()
        np.testing.assert_array_equal(applied[:, j], t.apply(X, NUMPY))
    # the prediction is the mean over the trees of the values of the leaves reached
    leaf_values = [np.asarray(t.value)[t.leaf_index[applied[:, j]]] for j, t in enumerate(f.estimators_)]
    np.testing.assert_allclose(f.predict(X), np.mean(leaf_values, axis=0), rtol=1e-12, atol=1e-12)


def test_verbose_reports_progress_per_batch(capsys):
    X, Y = _regression(seed=16, n=80)
    RandomForestRegressor(n_estimators=5, batch_size=2, verbose=1, random_state=0).fit(X, Y)
    captured = capsys.readouterr()
    assert captured.out == ""  # the bar goes to stderr
    final = captured.err.replace("\r", "\n").strip().splitlines()[-1]
    assert final.startswith("RandomForestRegressor") and "5/5" in final
    assert "batch of 2 in" in final  # the last of the batches 1, 2, 2
    RandomForestRegressor(n_estimators=5, batch_size=2, random_state=0).fit(X, Y)
    assert capsys.readouterr() == ("", "")  # verbose=0 is silent
    RandomForestRegressor(n_estimators=5, batch_size=2, verbose=2, random_state=0).fit(X, Y)
    captured = capsys.readouterr()
    assert "5/5" in captured.err
    lines = captured.out.splitlines()
    # batches may start on concurrent threads; they are reported grown in order. Five
    # trees in batches of at most two are three batches as even as possible: 1, 2, 2
    starts = sorted(ln.split("growing trees ")[1] for ln in lines if "growing trees" in ln)
    assert starts == ["1-1 of 5 together on m=4 outputs", "2-3 of 5 together on m=4 outputs",
                      "4-5 of 5 together on m=4 outputs"]
    assert len(lines) == 3


def test_pickle_round_trip_keeps_predictions():
    X, Y = _multilabel(seed=17)
    forest = RandomForestClassifier(
        n_estimators=4, projection="gaussian", n_components=3, random_state=0
    ).fit(X, Y)
    clone = pickle.loads(pickle.dumps(forest))
    np.testing.assert_array_equal(clone.predict_proba(X), forest.predict_proba(X))
    assert len(clone.estimators_) == 4
    assert (clone.predict(X) != forest.predict(X)).nnz == 0


def test_single_label_classifier_with_string_classes():
    rng = np.random.default_rng(18)
    X = rng.normal(size=(200, 4))
    y = np.where(X[:, 0] > 0.3, "hi", np.where(X[:, 1] > 0, "mid", "lo"))
    clf = ExtraTreesClassifier(n_estimators=20, random_state=0).fit(X, y)
    assert list(clf.classes_) == ["hi", "lo", "mid"]
    proba = clf.predict_proba(X)
    np.testing.assert_allclose(proba.sum(1), 1.0)
    assert np.mean(clf.predict(X) == y) > 0.95
    np.testing.assert_allclose(np.exp(clf.predict_log_proba(X[:5])), proba[:5])


def test_demo_usage_dense_scores_from_sparse_labels():
    # the call made by ``python -m gpurpo demo``
    X, Y = _multilabel(seed=19, sparse=True)
    for projection in (None, "gaussian"):
        forest = RandomForestRegressor(
            n_estimators=3, max_features="sqrt", projection=projection, n_components=3,
            random_state=0, device="auto",
        ).fit(X, Y)
        scores = forest.predict(X)
        assert isinstance(scores, np.ndarray) and scores.shape == Y.shape
        # each tree's leaves hold label frequencies in [0, 1]; the forest averages them
        np.testing.assert_allclose(scores, _tree_mean(forest, X), rtol=1e-12, atol=1e-12)
        assert scores.min() >= 0.0 and scores.max() <= 1.0


def test_n_jobs_restores_the_thread_count():
    import numba

    before = numba.get_num_threads()
    X, Y = _regression(seed=20, n=60)
    RandomForestRegressor(n_estimators=2, n_jobs=1, random_state=0).fit(X, Y).predict(X)
    assert numba.get_num_threads() == before


# --------------------------------------------------------------------------
# CUDA kernels through the CPU emulation
# --------------------------------------------------------------------------


def _emulated_tree_kernels_missing() -> str | None:
    try:
        Backend("emulated").kernel("tree_histograms")
    except NotImplementedError as exc:
        return f"CUDA twins of the tree kernels not available yet ({exc})"
    return None


def test_cpu_equals_emulated_cuda_on_small_data():
    reason = _emulated_tree_kernels_missing()
    if reason:
        pytest.skip(reason)
    X, Y = _multilabel(seed=21, n=120, p=6, d=10, sparse=True)
    kwargs = dict(n_estimators=3, projection="gaussian", n_components=3, max_depth=4,
                  random_state=0)
    cpu = RandomForestClassifier(device="cpu", **kwargs).fit(X, Y)
    emu = RandomForestClassifier(device="cuda-emulated", **kwargs).fit(X, Y)
    np.testing.assert_allclose(cpu.predict_proba(X), emu.predict_proba(X), atol=1e-9)
    np.testing.assert_allclose(
        cpu.predict_proba(X), emu.set_params(device="cpu").predict_proba(X), atol=1e-9
    )


# --------------------------------------------------------------------------
# bad input
# --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        (dict(n_estimators=0), ValueError, "n_estimators"),
        (dict(n_estimators=2.5), TypeError, "n_estimators"),
        (dict(bootstrap="yes"), TypeError, "bootstrap"),
        (dict(bootstrap=False, oob_score=True), ValueError, "oob_score"),
        (dict(bootstrap=False, max_samples=0.5), ValueError, "max_samples"),
        (dict(max_samples=0), ValueError, "max_samples"),
        (dict(max_samples=1.5), ValueError, "max_samples"),
        (dict(projection="fourier"), ValueError, "projection"),
        (dict(projection=3), TypeError, "projection"),
        (dict(projection="gaussian", n_components=0), ValueError, "n_components"),
        (dict(projection="gaussian", n_components="many"), ValueError, "n_components"),
        (dict(projection="subsample", n_components=50), ValueError, "n_components"),
        (dict(shared_projection="no"), TypeError, "shared_projection"),
        (dict(batch_size=0), ValueError, "batch_size"),
        (dict(batch_size="big"), ValueError, "batch_size"),
        (dict(n_jobs=0), ValueError, "n_jobs"),
        (dict(max_bins=1), ValueError, "max_bins"),
        (dict(max_bins=256), ValueError, "max_bins"),
        (dict(device="tpu"), ValueError, "device"),
        (dict(max_features=0), ValueError, "max_features"),
        (dict(max_features="all"), ValueError, "max_features"),
        (dict(max_depth=0), ValueError, "max_depth"),
        (dict(min_samples_leaf=0), ValueError, "min_samples_leaf"),
        (dict(min_samples_split=1), ValueError, "min_samples_split"),
        (dict(max_leaf_nodes=1), ValueError, "max_leaf_nodes"),
        (dict(verbose=-1), ValueError, "verbose"),
    ],
)
def test_bad_parameters_raise_errors_naming_them(kwargs, error, match):
    X, Y = _regression(seed=22, n=40, d=10)
    with pytest.raises(error, match=match):
        RandomForestRegressor(n_estimators=kwargs.pop("n_estimators", 2), **kwargs).fit(X, Y)


def test_bad_data_raises():
    X, Y = _regression(seed=23, n=40)
    forest = RandomForestRegressor(n_estimators=2, random_state=0)
    Yn = Y.copy()
    Yn[0, 0] = np.nan
    with pytest.raises(ValueError, match="y contains NaN"):
        forest.fit(X, Yn)
    Xi = X.copy()
    Xi[1, 1] = np.inf
    with pytest.raises(ValueError, match="X contains infinity"):
        forest.fit(Xi, Y)
    with pytest.raises(ValueError, match="inconsistent numbers of rows"):
        forest.fit(X[:30], Y)
    with pytest.raises(ValueError, match=re.escape(
        "sample_weight must have shape (n_samples,) = (40,), got (10,)"
    )):
        forest.fit(X, Y, sample_weight=np.ones(10))
    with pytest.raises(ValueError, match="^sample_weight must be finite and non-negative$"):
        forest.fit(X, Y, sample_weight=-np.ones(40))
    forest.fit(X, Y)
    with pytest.raises(ValueError, match=re.escape(
        "X has 5 features, but RandomForestRegressor is expecting 6 features as input"
    )):
        forest.predict(X[:, :5])
    clf = RandomForestClassifier(n_estimators=2)
    with pytest.raises(ValueError, match=re.escape(
        "multi-label y must contain only 0 and 1 (a label indicator matrix); got other values; "
        "use a forest regressor for real-valued outputs"
    )):
        clf.fit(X, (Y > 0).astype(float) * 2)
    with pytest.raises(ValueError, match=re.escape(
        "Unknown label type: continuous values in y; a classifier needs class labels (use a "
        "forest regressor for continuous targets)"
    )):
        clf.fit(X, Y[:, 0])


@pytest.mark.parametrize("estimator", [RandomForestRegressor, ExtraTreesRegressor])
def test_mostly_zero_weights_never_give_an_empty_tree(estimator):
    # a bootstrap draw of rows of zero weight only used to reach the kernels with an
    # empty root (heap corruption); weighted draws never pick a row of zero weight
    X, Y = _regression(seed=5, n=40)
    w = np.zeros(40)
    w[:5] = 1.0
    for seed in range(12):
        forest = estimator(n_estimators=4, bootstrap=True, random_state=seed)
        forest.fit(X, Y, sample_weight=w)
        assert np.isfinite(forest.predict(X)).all()
        for drawn in forest.estimators_samples_:
            assert set(drawn.tolist()) <= set(range(5))
    lone = np.zeros(40)
    lone[7] = 1.0
    forest = estimator(n_estimators=3, bootstrap=True, random_state=0)
    forest.fit(X, Y, sample_weight=lone)
    np.testing.assert_allclose(forest.predict(X[:3]), np.repeat(Y[7:8], 3, axis=0))


def test_weighted_bootstrap_draws_rows_in_proportion_to_their_weights():
    # integer weights act as repetitions: a row of weight 3 is drawn three times as
    # often as a row of weight 1 (binomial counts over 60 trees x 40 draws)
    X, Y = _regression(seed=6, n=40)
    w = np.where(np.arange(40) < 20, 3.0, 1.0)
    forest = RandomForestRegressor(n_estimators=60, random_state=0).fit(X, Y, sample_weight=w)
    drawn = np.bincount(np.concatenate(forest.estimators_samples_), minlength=40)
    ratio = drawn[:20].sum() / drawn[20:].sum()
    assert 2.6 < ratio < 3.4
    assert sum(len(s) for s in forest.estimators_samples_) == 60 * 40


def test_without_bootstrap_leaves_average_with_the_exact_weights():
    # the weights were rounded to float32 for the leaves (1e-8 from the weighted tree)
    from gpurpo.tree import DecisionTreeRegressor

    rng = np.random.default_rng(0)
    X = rng.integers(0, 20, (300, 5)).astype(float)
    Y = np.c_[X[:, 0] * 1.3 + rng.normal(size=300), X[:, 2] + rng.normal(size=300)]
    w = rng.uniform(0.2, 3.0, 300)
    kwargs = dict(projection=None, max_features=None, max_depth=4)
    forest = RandomForestRegressor(n_estimators=2, bootstrap=False, **kwargs)
    tree = DecisionTreeRegressor(**kwargs)
    forest.fit(X, Y, sample_weight=w)
    tree.fit(X, Y, sample_weight=w)
    np.testing.assert_allclose(forest.predict(X), tree.predict(X), rtol=1e-13, atol=1e-13)


def test_the_grower_refuses_a_tree_without_positive_weight():
    X, Y = _regression(seed=7, n=30)
    binned = BinMapper().fit_transform(X, NUMPY)
    targets = np.ascontiguousarray(Y[:, None, :].astype(np.float32).repeat(2, axis=1))
    weights = np.ones((2, 30))
    weights[1] = 0.0
    with pytest.raises(ValueError, match="tree 1 has none"):
        grow_trees(binned, targets, weights, GrowthParams(), np.random.default_rng(0), NUMPY)


def test_out_of_memory_says_what_to_lower(monkeypatch):
    import gpurpo.ensemble.forest.growth as growth

    def no_memory(*args, **kwargs):
        raise MemoryError("simulated allocation failure")

    monkeypatch.setattr(growth, "grow_trees", no_memory)
    X, Y = _regression(seed=24, n=50)
    with pytest.raises(MemoryError, match="lower batch_size.*batch had 3 trees") as info:
        RandomForestRegressor(n_estimators=6, batch_size=3, random_state=0).fit(X, Y)
    assert "simulated allocation failure" in str(info.value)


@pytest.mark.parametrize(
    "n_trees, size, workers",
    [(100, 8, 2), (100, 8, 1), (9, 4, 1), (30, 8, 4), (5, 8, 8), (1, 8, 2), (17, 3, 3)],
)
def test_tree_batches_cover_every_tree_once_evenly_per_thread(n_trees, size, workers):
    from gpurpo.ensemble.forest.batches import tree_batches

    batches = tree_batches(n_trees, size, workers)
    trees = [t for b0, b1 in batches for t in range(b0, b1)]
    assert trees == list(range(n_trees))
    sizes = [b1 - b0 for b0, b1 in batches]
    assert max(sizes) <= size and max(sizes) - min(sizes) <= 1
    if workers > 1 and n_trees >= workers:
        # threads taking batches in turn get the same number of trees, give or take one batch
        assert len(batches) % workers == 0
        per_thread = [sum(sizes[w::workers]) for w in range(workers)]
        assert max(per_thread) - min(per_thread) <= -(-len(batches) // workers)


def test_tree_batches_deal_100_trees_to_two_threads_as_50_and_50():
    from gpurpo.ensemble.forest.batches import tree_batches

    batches = tree_batches(100, 8, 2)
    sizes = [b1 - b0 for b0, b1 in batches]
    assert len(batches) == 14 and sum(sizes[0::2]) == sum(sizes[1::2]) == 50


def test_oob_predictions_too_large_for_memory_are_refused_up_front(monkeypatch):
    # oob_score kept (n, d) dense float64 arrays even for sparse Y of 100,000 labels
    import gpurpo.ensemble.forest.base as forest_base

    X, Y = _regression(seed=31, n=60, d=5)
    monkeypatch.setattr(forest_base, "OOB_MAX_BYTES", 8 * 60 * 5 - 1)
    forest = RandomForestRegressor(n_estimators=3, oob_score=True, random_state=0)
    with pytest.raises(ValueError, match=r"oob_score=True keeps .* shape \(60, 5\) \(2400 bytes\)"):
        forest.fit(X, Y)
    monkeypatch.setattr(forest_base, "OOB_MAX_BYTES", 8 * 60 * 5)
    assert np.isfinite(forest.fit(X, Y).oob_score_)


def test_pickles_hold_each_tree_once():
    # the packed node arrays repeated the structures (a pickle about a fifth larger)
    X, Y = _regression(seed=32, n=300, d=6)
    forest = RandomForestRegressor(n_estimators=6, batch_size=3, random_state=0).fit(X, Y)
    assert all("packed" not in chunk.__getstate__() for chunk in forest._chunks)
    loaded = pickle.loads(pickle.dumps(forest))
    np.testing.assert_array_equal(loaded.predict(X), forest.predict(X))
    np.testing.assert_array_equal(loaded.apply(X), forest.apply(X))
