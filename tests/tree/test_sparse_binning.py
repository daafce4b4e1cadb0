"""Binning sparse X from its stored entries equals binning the densified X.

References: ``quantile_edges`` (np.unique, bincount, searchsorted) on each
densified column rounded to float32, and the dense fit itself
(``_fit_edges_sorted``, a float32 sort), for the edges; the dense
``tree_bin_codes`` kernel on ``X.toarray()`` for the codes.
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from _split_records import split_records
from hypothesis import given, settings
from hypothesis import strategies as st

from gpurpo.backend import EMULATED, NUMPY
from gpurpo.ensemble import RandomForestRegressor
from gpurpo.tree import BinMapper, kernels
from gpurpo.tree.binning._mapper import _fit_edges_sorted
from gpurpo.tree.binning._quantile_rule import quantile_edges
from gpurpo.tree.binning._sparse import sparse_column_edges

VALUES = st.sampled_from([np.nan, 0.0, -0.0, 1.0, -1.0, 0.5, 2.0, -3.25, 7.0, 1e-300])


@st.composite
def _sparse_matrix(draw):
    n = draw(st.integers(1, 40))
    p = draw(st.integers(1, 5))
    density = draw(st.floats(0.0, 1.0))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    dense = np.zeros((n, p))
    stored = rng.random((n, p)) < density
    many = draw(st.booleans())  # many distinct values (quantile edges) or a few (one bin each)
    values = rng.normal(size=(n, p)) if many else rng.choice([-1.0, 0.5, 2.0, np.nan], (n, p))
    if draw(st.booleans()):  # values that float32 merges: 1 + 2^-30 rounds to 1
        values = np.where(rng.random((n, p)) < 0.5, 1.0, 1.0 + 2.0**-30)
    dense[stored] = values[stored]
    matrix = sp.csc_matrix(dense)
    explicit = rng.random(matrix.nnz) < 0.1  # some stored entries are explicit zeros
    matrix.data[explicit] = 0.0
    return matrix, draw(st.integers(2, 12))


def _reference_edges(dense, max_bins):
    edges = []
    for f in range(dense.shape[1]):
        col = dense[:, f].astype(np.float32).astype(np.float64)
        edges.append(quantile_edges(col[~np.isnan(col)], max_bins, None))
    return edges


@settings(max_examples=150, deadline=None)
@given(_sparse_matrix())
def test_edges_from_stored_entries_equal_edges_of_the_dense_columns(case):
    matrix, max_bins = case
    p = matrix.shape[1]
    # each column's slots: as many as it can have edges (its stored entries, at most
    # max_bins - 1), so that a column writing past them would overwrite the next one's
    slots = np.minimum(np.diff(matrix.indptr), max_bins - 1)
    slot_ptr = np.concatenate([[0], np.cumsum(slots)]).astype(np.int64)
    out = np.full(slot_ptr[-1], np.nan)
    n_edges = np.zeros(p, dtype=np.int64)
    sparse_column_edges(matrix.indptr.astype(np.int64), matrix.data, matrix.shape[0], max_bins,
                        slot_ptr, out, n_edges)
    assert (n_edges <= slots).all()
    dense_fit = _fit_edges_sorted(matrix.toarray(), max_bins)
    for f, ref in enumerate(_reference_edges(matrix.toarray(), max_bins)):
        got = out[slot_ptr[f] : slot_ptr[f] + n_edges[f]]
        np.testing.assert_array_equal(got, ref)
        np.testing.assert_array_equal(got, dense_fit[f])


@settings(max_examples=100, deadline=None)
@given(_sparse_matrix())
def test_codes_from_stored_entries_equal_codes_of_the_dense_matrix(case):
    matrix, max_bins = case
    mapper = BinMapper(max_bins=max_bins).fit(matrix)
    dense = matrix.toarray()
    table = mapper.thresholds_
    n_edges = (mapper.n_value_bins_ - 1).astype(np.int32)
    expected = np.empty((matrix.shape[1], matrix.shape[0]), dtype=np.uint8)
    kernels.bin_codes(NUMPY, dense, table, n_edges, mapper.missing_bin_, expected)
    for backend in (NUMPY, EMULATED):  # numba kernel; array version of CUDA backends
        got = np.empty_like(expected)
        kernels.bin_codes_sparse(backend, matrix, table, n_edges, mapper.missing_bin_, got)
        np.testing.assert_array_equal(got, expected)


@settings(max_examples=100, deadline=None)
@given(_sparse_matrix(), st.sampled_from(["csr", "csc", "coo"]))
def test_stored_codes_rebuild_the_codes_of_the_dense_matrix(case, fmt):
    # the zero codes overwritten by the listed entries give back every code, by rows and
    # by columns, and only the codes that differ from their feature's zero code are listed
    matrix, max_bins = case
    mapper = BinMapper(max_bins=max_bins).fit(matrix)
    stored = mapper.transform(matrix.asformat(fmt), NUMPY).sparse_codes
    dense = matrix.toarray()
    expected = np.empty((matrix.shape[1], matrix.shape[0]), dtype=np.uint8)
    kernels.bin_codes(NUMPY, dense, mapper.thresholds_,
                      (mapper.n_value_bins_ - 1).astype(np.int32), mapper.missing_bin_, expected)
    # the dense matrix's binning: its codes, and the same listing when it lists its entries
    dense_binned = mapper.transform(dense, NUMPY)
    np.testing.assert_array_equal(dense_binned.codes, expected)
    if dense_binned.sparse_codes is not None:
        for name in ("zero_code", "row_ptr", "row_features", "row_codes", "col_ptr", "col_rows",
                     "col_codes"):
            np.testing.assert_array_equal(getattr(dense_binned.sparse_codes, name),
                                          getattr(stored, name), err_msg=name)
    p, n = expected.shape
    zero_code = np.empty((p, 1), dtype=np.uint8)
    kernels.bin_codes(NUMPY, np.zeros((1, p)), mapper.thresholds_,
                      (mapper.n_value_bins_ - 1).astype(np.int32), mapper.missing_bin_, zero_code)
    np.testing.assert_array_equal(stored.zero_code, zero_code[:, 0])
    by_rows = np.repeat(stored.zero_code[:, None], n, axis=1)
    for i in range(n):
        f = stored.row_features[stored.row_ptr[i]:stored.row_ptr[i + 1]]
        assert (np.diff(f) > 0).all()
        by_rows[f, i] = stored.row_codes[stored.row_ptr[i]:stored.row_ptr[i + 1]]
    by_cols = np.repeat(stored.zero_code[:, None], n, axis=1)
    for f in range(p):
        rows = stored.col_rows[stored.col_ptr[f]:stored.col_ptr[f + 1]]
        assert (np.diff(rows) > 0).all()
        by_cols[f, rows] = stored.col_codes[stored.col_ptr[f]:stored.col_ptr[f + 1]]
    np.testing.assert_array_equal(by_rows, expected)
    np.testing.assert_array_equal(by_cols, expected)
    assert stored.row_codes.size == (expected != stored.zero_code[:, None]).sum()
    assert stored.col_codes.size == stored.row_codes.size
    for a, dtype in ((stored.row_ptr, np.int64), (stored.row_features, np.int32),
                     (stored.row_codes, np.uint8), (stored.col_ptr, np.int64),
                     (stored.col_rows, np.int32), (stored.col_codes, np.uint8)):
        assert a.dtype == dtype


@settings(max_examples=60, deadline=None)
@given(_sparse_matrix())
def test_subtracted_bin_is_the_zero_code_of_mostly_zero_features(case):
    # the same for dense and sparse X: the code of 0.0 where at least half the codes are
    # it, else -1
    matrix, max_bins = case
    mapper = BinMapper(max_bins=max_bins).fit(matrix)
    dense = mapper.transform(matrix.toarray(), NUMPY)
    sparse = mapper.transform(matrix, NUMPY)
    zero_code = sparse.sparse_codes.zero_code.astype(np.int32)
    share = (dense.codes == zero_code[:, None]).mean(axis=1)
    expected = np.where(share >= 0.5, zero_code, -1)
    np.testing.assert_array_equal(dense.subtracted_bin, expected)
    np.testing.assert_array_equal(sparse.subtracted_bin, expected)
    assert dense.subtracted_bin.dtype == np.int32
    # fit_transform of the dense X counts the codes of 0.0 in the codes kernel
    fused_mapper = BinMapper(max_bins=max_bins)
    dense_X = np.ascontiguousarray(matrix.toarray())
    assert fused_mapper._fuses(dense_X, NUMPY, None)
    fused = fused_mapper.fit_transform(dense_X, NUMPY)
    np.testing.assert_array_equal(fused.codes, dense.codes)
    np.testing.assert_array_equal(fused.subtracted_bin, expected)
    assert fused.subtracted_bin.dtype == np.int32


def test_duplicate_entries_are_summed_as_densifying_does():
    rows = np.array([0, 0, 1, 3, 3, 3])
    cols = np.array([0, 0, 1, 1, 1, 0])
    vals = np.array([1.0, 2.0, 5.0, -1.0, 1.0, 4.0])
    matrix = sp.coo_matrix((vals, (rows, cols)), shape=(5, 2)).tocsr()
    assert not matrix.has_canonical_format or matrix.nnz < 6
    mapper = BinMapper(max_bins=8).fit(matrix)
    for f, ref in enumerate(_reference_edges(matrix.toarray(), 8)):
        np.testing.assert_array_equal(mapper.edges_[f], ref)
    codes = mapper.transform(matrix, NUMPY).codes
    np.testing.assert_array_equal(codes, mapper.transform(matrix.toarray(), NUMPY).codes)


@pytest.mark.parametrize("fmt", ["csr", "csc"])
def test_forest_on_sparse_x_equals_forest_on_dense_x(fmt):
    rng = np.random.default_rng(4)
    dense = np.where(rng.random((300, 40)) < 0.1, rng.normal(size=(300, 40)), 0.0)
    Y = dense[:, :3] @ rng.normal(size=(3, 5)) + 0.1 * rng.normal(size=(300, 5))
    kwargs = dict(n_estimators=4, max_features=0.5, random_state=0)
    on_dense = RandomForestRegressor(**kwargs).fit(dense, Y)
    on_sparse = RandomForestRegressor(**kwargs).fit(sp.csr_matrix(dense).asformat(fmt), Y)
    np.testing.assert_array_equal(on_sparse.predict(dense), on_dense.predict(dense))


@pytest.mark.parametrize("params", [dict(max_features=20),
                                    dict(max_features=None, max_leaf_nodes=40),
                                    dict(max_features=20, splitter="random")])
def test_large_nodes_of_a_sparse_x_are_split_from_their_columns(monkeypatch, params):
    # On the CPU a sparse X takes no histogram, whatever a node's size (a mostly-zero
    # feature costs its column's stored entries); a dense X whose codes are not mostly
    # zeros builds histograms for nodes above 4,096 samples (and, with all features,
    # above 512). Both grow the same trees.
    from gpurpo.tree import DecisionTreeRegressor

    rng = np.random.default_rng(15)
    n, p = 6000, 60
    dense = np.where(rng.random((n, p)) < 0.2, rng.normal(size=(n, p)), 0.0)
    Y = dense[:, :4] @ rng.normal(size=(4, 3)) + 0.1 * rng.normal(size=(n, 3))
    calls = []
    build = kernels.build_histograms

    def counted(*args, **kwargs):
        calls.append(1)
        return build(*args, **kwargs)

    monkeypatch.setattr(kernels, "build_histograms", counted)
    on_dense = DecisionTreeRegressor(random_state=0, **params).fit(dense, Y)
    assert calls, "the dense X should build histograms for its large nodes"
    calls.clear()
    on_sparse = DecisionTreeRegressor(random_state=0, **params).fit(sp.csr_matrix(dense), Y)
    assert not calls
    assert on_dense.tree_.node_count > 60
    # the paths number the nodes differently (level by level, or depth first in one call)
    assert _preorder(on_sparse.tree_) == _preorder(on_dense.tree_)
    np.testing.assert_array_equal(on_sparse.predict(dense), on_dense.predict(dense))


def _preorder(tree):
    """(feature, threshold, missing side, samples) of every node, parents before children,
    left subtrees first: the tree whatever the numbering of its nodes."""
    out, stack = [], [0]
    while stack:
        i = stack.pop()
        f = int(tree.feature[i])
        split = (float(tree.threshold[i]), int(tree.missing_go_left[i])) if f >= 0 else None
        out.append((f, split, int(tree.n_node_samples[i])))
        if f >= 0:
            stack += [int(tree.children_right[i]), int(tree.children_left[i])]
    return out


@pytest.mark.parametrize("random_split", [False, True])
def test_small_nodes_take_a_sparse_feature_from_its_column(random_split):
    # Nodes of up to SORT_LIMIT samples sort their codes, except for the features with
    # a subtracted bin and fewer other codes (``listed``) than the node has samples,
    # summed as a larger node's: from the column of stored entries for a sparse X, from
    # the codes for a dense X or on CUDA, with the same bits. Reference: the same nodes
    # with every feature sorted (``listed`` left at n).
    from gpurpo.tree._numba._node_split import SORT_LIMIT

    rng = np.random.default_rng(21 + random_split)
    n, p, m = 3000, 300, 3
    density = rng.uniform(0.005, 0.08, size=p)  # columns of 15 to 240 stored entries
    dense = np.where(rng.random((n, p)) < density, rng.normal(size=(n, p)), 0.0)
    dense[rng.random((n, p)) < 0.002] = np.nan
    mapper = BinMapper(max_bins=64).fit(dense)
    on_sparse = mapper.transform(sp.csr_matrix(dense), NUMPY)
    on_dense = mapper.transform(dense, NUMPY)
    np.testing.assert_array_equal(on_dense.listed, np.diff(on_sparse.sparse_codes.col_ptr))
    short = on_dense.listed < 120
    assert 0.2 < short.mean() < 0.9  # some features listed less than the nodes, some more
    sizes = [40, 90, 150, 200, SORT_LIMIT]
    rows = np.concatenate([np.sort(rng.choice(n, s, replace=False)) for s in sizes])
    stops = np.cumsum(sizes)
    ranges = np.column_stack([stops - sizes, stops]).astype(np.int64)
    targets = (np.nan_to_num(dense[:, :5]) @ rng.normal(size=(5, m)))[:, None, :]
    targets = (targets + 0.1 * rng.normal(size=targets.shape)).astype(np.float32)
    weights = rng.integers(1, 4, size=(1, n)).astype(np.float32)  # root lists: positive
    args = (on_dense.codes, rows.astype(np.int32), ranges,
            np.zeros(len(sizes), dtype=np.int32), np.arange(len(sizes), dtype=np.uint64),
            weights, targets, on_dense.edge_values, on_dense.edge_ptr, p, 1, random_split,
            on_dense.missing_bin, 1e-5)
    subtracted = on_dense.subtracted_bin
    records = split_records(*args)
    got = {
        "sparse": kernels.split_small(NUMPY, *records, sparse=kernels.SparseColumns(
            subtracted, on_sparse.sparse_codes, on_sparse.listed)),
        "dense": kernels.split_small(NUMPY, *records, sparse=kernels.SparseColumns(
            subtracted, listed=on_dense.listed)),
        "emulated": kernels.split_small(EMULATED, *records, sparse=kernels.SparseColumns(
            subtracted, listed=on_dense.listed)),
    }
    ref = kernels.split_small(NUMPY, *records, sparse=kernels.SparseColumns(subtracted))
    assert (ref[0] >= 0).all()
    for name, out in got.items():
        for g, r in zip(out[:3], ref[:3]):
            np.testing.assert_array_equal(g, r, err_msg=name)
        np.testing.assert_allclose(out[3], ref[3], rtol=1e-12, err_msg=name)
    for name in ("dense", "emulated"):
        for g, r in zip(got[name], got["sparse"]):
            np.testing.assert_array_equal(g, r, err_msg=name)


def test_a_sparse_x_is_binned_at_its_stored_entries_only():
    # On the CPU a sparse X keeps no dense (p, n) codes: max_binned_bytes bounds them only
    # when something builds them (BinnedMatrix.codes), and they equal the dense X's codes
    rng = np.random.default_rng(30)
    n, p = 400, 120
    dense = np.where(rng.random((n, p)) < 0.05, rng.normal(size=(n, p)), 0.0)
    dense[rng.random((n, p)) < 0.003] = np.nan
    mapper = BinMapper(max_bins=32, max_binned_bytes=n * p - 1).fit(sp.csr_matrix(dense))
    binned = mapper.transform(sp.csr_matrix(dense), NUMPY)
    assert binned.dense_codes is None
    assert binned.kernel_codes.shape == (p, 0)
    assert (binned.n_features, binned.n_samples) == (p, n)
    with pytest.raises(ValueError, match=r"dense codes .* max_binned_bytes"):
        binned.codes
    with pytest.raises(ValueError, match="max_binned_bytes"):
        mapper.transform(dense, NUMPY)
    mapper.max_binned_bytes = n * p
    on_dense = mapper.transform(dense, NUMPY)
    np.testing.assert_array_equal(mapper.transform(sp.csr_matrix(dense), NUMPY).codes,
                                  on_dense.codes)
    np.testing.assert_array_equal(binned.listed, on_dense.listed)
    np.testing.assert_array_equal(binned.subtracted_bin, on_dense.subtracted_bin)


def _binned_both_ways(rng, n, p, max_density, nan_share, max_bins):
    """Random sparse data (columns of 0.5 % to ``max_density`` stored entries, some NaN)
    and its binned forms from the CSR X (stored entries only) and from the dense X."""
    density = rng.uniform(0.005, max_density, size=p)
    dense = np.where(rng.random((n, p)) < density, rng.normal(size=(n, p)), 0.0)
    dense[rng.random((n, p)) < nan_share] = np.nan
    mapper = BinMapper(max_bins=max_bins).fit(dense)
    return dense, mapper.transform(sp.csr_matrix(dense), NUMPY), mapper.transform(dense, NUMPY)


def _node_rows(rng, n, sizes, order):
    """Sample lists of nodes of ``sizes`` (rows increasing or shuffled) and their ranges."""
    rows = [rng.choice(n, s, replace=False) for s in sizes]
    rows = np.concatenate([np.sort(r) if order == "increasing" else r for r in rows])
    stops = np.cumsum(sizes)
    return rows, np.column_stack([stops - sizes, stops]).astype(np.int64)


@pytest.mark.parametrize("random_split", [False, True])
@pytest.mark.parametrize("order", ["increasing", "shuffled"])
def test_split_kernels_without_dense_codes_read_the_columns(random_split, order):
    # Without dense codes (codes of shape (p, 0)) the small-node kernel gathers a node's
    # codes of a feature from its column: by the node's row slots when its rows increase,
    # by binary search otherwise (shuffled rows), for sorted nodes and for tables of
    # nodes above SORT_LIMIT samples. Reference: the same kernel on the dense codes.
    # The CPU partition reads the columns too (partition_columns against partition).
    rng = np.random.default_rng(40 + random_split)
    n, p, m = 3000, 200, 3
    dense, on_sparse, on_dense = _binned_both_ways(rng, n, p, 0.4, 0.002, 64)
    assert on_sparse.dense_codes is None
    sizes = [2, 3, 40, 150, 256, 700, 1500]
    rows, ranges = _node_rows(rng, n, sizes, order)
    targets = (np.nan_to_num(dense[:, :5]) @ rng.normal(size=(5, m)))[:, None, :]
    targets = (targets + 0.1 * rng.normal(size=targets.shape)).astype(np.float32)
    weights = rng.integers(1, 4, size=(1, n)).astype(np.float32)
    rest = (rows.astype(np.int32), ranges, np.zeros(len(sizes), dtype=np.int32),
            np.arange(len(sizes), dtype=np.uint64), weights, targets, on_dense.edge_values,
            on_dense.edge_ptr, 15, 1, random_split, on_dense.missing_bin, 1e-5)
    ref = kernels.split_small(
        NUMPY, *split_records(on_dense.codes, *rest),
        sparse=kernels.SparseColumns(on_dense.subtracted_bin, listed=on_dense.listed))
    got = kernels.split_small(
        NUMPY, *split_records(on_sparse.kernel_codes, *rest),
        sparse=kernels.SparseColumns(on_dense.subtracted_bin, on_sparse.sparse_codes,
                                     on_dense.listed))
    assert (ref[0] >= 0).sum() >= len(sizes) - 1
    for g, r in zip(got, ref):
        np.testing.assert_array_equal(g, r)
    split = ref[0] >= 0
    splits = kernels.NodeSplits(ref[0][split], ref[1][split], ref[2][split])
    expected_rows = rows.astype(np.int32)
    expected_left = kernels.partition(
        NUMPY, on_dense.codes, kernels.NodeBatch(expected_rows, ranges[split], None), splits,
        on_dense.missing_bin)
    got_rows = rows.astype(np.int32)
    got_left = kernels.partition_columns(
        NUMPY, on_sparse.sparse_codes, kernels.EdgeTable(on_dense.edge_values, on_dense.edge_ptr),
        kernels.NodeBatch(got_rows, ranges[split], None), splits, on_dense.missing_bin)
    np.testing.assert_array_equal(got_left, expected_left)
    np.testing.assert_array_equal(got_rows, expected_rows)
    assert 0 < got_left.min() and (got_left < np.diff(ranges[split], axis=1)[:, 0]).all()


@pytest.mark.parametrize("params", [dict(max_features="sqrt"),
                                    dict(max_features=None, max_leaf_nodes=30),
                                    dict(max_features="sqrt", splitter="random")])
def test_trees_on_a_sparse_x_never_build_its_dense_codes(monkeypatch, params):
    # Level-wise (the subtree kernel from a root above its block size), best-first
    # (small-node kernel and partition) and Extra-Trees growth on a sparse X whose dense
    # codes exceed max_binned_bytes: same trees as the dense X, no dense codes built.
    from gpurpo.tree import DecisionTreeRegressor
    from gpurpo.tree.binning import _mapper as binning

    built = []
    rebuild = binning.dense_codes_of
    monkeypatch.setattr(binning, "dense_codes_of", lambda *a: built.append(1) or rebuild(*a))
    rng = np.random.default_rng(50)
    n, p = 1500, 3000  # block limit 174 samples: the root and its large nodes read columns
    dense = np.where(rng.random((n, p)) < 0.01, rng.exponential(size=(n, p)), 0.0)
    dense[:, :40] = np.where(rng.random((n, 40)) < 0.5, rng.normal(size=(n, 40)), 0.0)
    Y = dense[:, :6] @ rng.normal(size=(6, 4)) + 0.1 * rng.normal(size=(n, 4))
    on_sparse = DecisionTreeRegressor(random_state=0, max_binned_bytes=n * p // 10,
                                      **params).fit(sp.csr_matrix(dense), Y)
    assert not built
    on_dense = DecisionTreeRegressor(random_state=0, **params).fit(dense, Y)
    assert _preorder(on_sparse.tree_) == _preorder(on_dense.tree_)
    np.testing.assert_array_equal(on_sparse.predict(dense), on_dense.predict(dense))
    assert on_dense.tree_.node_count > 50


def test_a_node_lists_the_features_of_its_stored_entries_in_visiting_order():
    # Reference: the features with a stored entry in the node's rows (np.unique), ordered
    # by their positions in NumPy's visiting order (argsort of feature_at's order).
    from gpurpo.tree import _random
    from gpurpo.tree._numba._node_split import _list_node_features

    rng = np.random.default_rng(8)
    n, p = 50, 700
    X = sp.random(n, p, density=0.02, format="csr", random_state=3)
    seed = np.uint64(987654321)
    keys = np.empty(_random.N_ROUNDS, dtype=np.uint64)
    _random.round_keys_nb(seed, keys)
    lo, hi = _random.feistel_params(p)
    order = _random.feature_at(np.full(p, seed), np.arange(p), p)
    position = np.argsort(order)
    cols = rng.permutation(2 * n).astype(np.int32)  # columns of codes; rows through a map
    row_of_col = np.full(2 * n, -1, dtype=np.int32)
    row_of_col[cols[5:25]] = rng.choice(n, 20, replace=False)
    entry_ptr = X.indptr.astype(np.int64)
    entry_features = X.indices.astype(np.int32)
    rows = row_of_col[cols[5:25]]
    features = np.unique(X[rows].indices)
    expected = features[np.argsort(position[features])]
    listing = np.empty(4 * X[rows].nnz, dtype=np.int64)
    got = _list_node_features(entry_ptr, entry_features, row_of_col, cols, 5, 20, keys,
                              p, lo, hi, listing)
    assert got == expected.size > 20
    np.testing.assert_array_equal(listing[:got] & 0xFFFFFFFF, expected)
    np.testing.assert_array_equal(listing[:got] >> 32, position[expected])
    # more stored entries than the listing holds: -1 (the order is walked instead)
    short = np.empty(X[rows].nnz - 1, dtype=np.int64)
    assert _list_node_features(entry_ptr, entry_features, row_of_col, cols, 5, 20, keys,
                               p, lo, hi, short) == -1
    # columns that are the rows themselves (an empty map)
    direct = np.sort(rng.choice(n, 12, replace=False)).astype(np.int32)
    features = np.unique(X[direct].indices)
    got = _list_node_features(entry_ptr, entry_features, np.empty(0, dtype=np.int32), direct, 0,
                              12, keys, p, lo, hi, listing)
    np.testing.assert_array_equal(listing[:got] & 0xFFFFFFFF,
                                  features[np.argsort(position[features])])


@pytest.mark.parametrize("params", [dict(max_features="sqrt"),
                                    dict(max_features=None),
                                    dict(max_features=0.2, splitter="random")])
def test_small_nodes_of_a_wide_sparse_x_visit_only_their_listed_features(params):
    # A text-like X (3,000 features, about 9 stored entries per row): nodes of a few
    # samples hold fewer stored entries than max_features, so they visit the features of
    # those entries only (_list_node_features); the dense X walks the visiting order,
    # position by position. Same trees, node by node. (Checked to fail when the listing
    # is emptied: the small nodes then find no split.)
    from gpurpo.tree import DecisionTreeRegressor

    rng = np.random.default_rng(21)
    n, p = 800, 3000
    X = sp.random(n, p, density=0.003, format="csr", random_state=5,
                  data_rvs=lambda k: rng.exponential(size=k))
    Y = rng.normal(size=(n, 4)) + 3.0 * X[:, :4].toarray()
    on_sparse = DecisionTreeRegressor(random_state=0, **params).fit(X, Y)
    on_dense = DecisionTreeRegressor(random_state=0, **params).fit(X.toarray(), Y)
    assert on_dense.tree_.node_count > 400
    assert _preorder(on_sparse.tree_) == _preorder(on_dense.tree_)
    np.testing.assert_array_equal(on_sparse.predict(X), on_dense.predict(X.toarray()))


def test_newton_boosting_on_a_sparse_x_never_builds_its_dense_codes(monkeypatch):
    # second-order splits (the log loss's) use histograms: a sparse X's are summed from
    # its columns, so the fit takes a max_binned_bytes below the dense codes and gives
    # the dense X's model
    from gpurpo.ensemble import GradientBoostingClassifier
    from gpurpo.tree.binning import _mapper as binning

    built = []
    rebuild = binning.dense_codes_of
    monkeypatch.setattr(binning, "dense_codes_of", lambda *a: built.append(1) or rebuild(*a))
    rng = np.random.default_rng(60)
    n, p = 300, 50
    dense = np.where(rng.random((n, p)) < 0.2, rng.normal(size=(n, p)), 0.0)
    Y = (dense[:, :3] @ rng.normal(size=(3, 4)) > 0).astype(float)
    kwargs = dict(n_estimators=3, split_criterion="newton", random_state=0)
    on_dense = GradientBoostingClassifier(**kwargs).fit(dense, Y)
    on_sparse = GradientBoostingClassifier(max_binned_bytes=n * p // 10, **kwargs).fit(
        sp.csr_matrix(dense), Y)
    assert not built
    np.testing.assert_array_equal(on_sparse.predict_proba(dense), on_dense.predict_proba(dense))


@pytest.mark.parametrize("order", ["increasing", "shuffled"])
def test_histograms_of_a_sparse_x_without_dense_codes_equal_the_dense_ones(order):
    # histograms_columns gathers each (node, feature)'s codes from the column: the same
    # float32 sums, in the same order, as tree_histograms on the dense codes
    rng = np.random.default_rng(80)
    n, p, m = 2000, 120, 3
    dense, on_sparse, on_dense = _binned_both_ways(rng, n, p, 0.5, 0.003, 32)
    sizes = [1, 30, 500, 1400]
    rows, ranges = _node_rows(rng, n, sizes, order)
    features = rng.integers(0, p, size=(len(sizes), 9)).astype(np.int32)
    features[0, 3] = -1
    tree = np.array([0, 1, 1, 0], dtype=np.int32)
    weights = rng.integers(0, 3, size=(2, n)).astype(np.float32)
    targets = rng.normal(size=(n, 2, m)).astype(np.float32)
    for channels in (m + 1, m + 2):
        args = (kernels.NodeBatch(rows.astype(np.int32), ranges, tree), features, weights,
                targets, on_dense.n_bins, channels)
        expected = kernels.build_histograms(NUMPY, on_dense.codes, *args)
        got = kernels.build_histograms_columns(
            NUMPY, on_sparse.sparse_codes,
            kernels.EdgeTable(on_sparse.edge_values, on_sparse.edge_ptr), *args)
        np.testing.assert_array_equal(got, expected)
        assert expected[:, :, :, 0].sum() > 0


def test_a_fitted_mapper_keeps_its_edges_without_the_padded_table():
    # one column of many values makes the table 255 wide for every feature; the mapper
    # keeps the edges alone (pickles too), and rebuilds the same table and codes
    import pickle

    rng = np.random.default_rng(70)
    n, p = 600, 3000
    dense = np.where(rng.random((n, p)) < 0.003, rng.normal(size=(n, p)), 0.0)
    dense[:, 0] = rng.normal(size=n)
    mapper = BinMapper().fit(sp.csr_matrix(dense))
    table = mapper.thresholds_
    assert table.shape == (p, 255)  # 255 value bins, 254 edges, +inf padded
    n_edges = mapper.n_value_bins_ - 1
    assert mapper.edge_values_.shape == (n_edges.sum(),)
    for f in (0, 1, p - 1):
        np.testing.assert_array_equal(mapper.edges_[f], table[f, : n_edges[f]])
        assert np.isinf(table[f, n_edges[f]:]).all()
    blob = pickle.dumps(mapper)
    assert len(blob) < table.nbytes / 20
    loaded = pickle.loads(blob)
    np.testing.assert_array_equal(loaded.thresholds_, table)
    np.testing.assert_array_equal(loaded.transform(dense, NUMPY).codes,
                                  mapper.transform(dense, NUMPY).codes)
    # a mapper pickled with the padded table itself loads the same
    state = {k: v for k, v in mapper.__dict__.items() if k != "edge_values_"}
    state["thresholds_"] = table
    old = BinMapper.__new__(BinMapper)
    old.__setstate__(state)
    np.testing.assert_array_equal(old.edge_values_, mapper.edge_values_)
    with pytest.raises(AttributeError, match="not fitted"):
        BinMapper().thresholds_


def test_a_fit_on_a_wide_sparse_X_builds_no_padded_table():
    # one column of many values makes the padded table 255 wide for all 100,000
    # features (203 MB): neither the edge fit nor the fit's binned matrix may build it;
    # the kernels read the ragged edges, so the tree is the one the dense X gives
    import tracemalloc

    from gpurpo.tree import DecisionTreeRegressor

    rng = np.random.default_rng(71)
    n, p = 400, 100_000
    X = sp.hstack([sp.csr_matrix(rng.normal(size=(n, 1))),
                   sp.random(n, p - 1, density=0.0005, format="csr", random_state=rng)],
                  format="csr")
    y = np.asarray(X[:, :50].sum(axis=1)).ravel() + rng.normal(scale=0.1, size=n)
    padded_bytes = p * 254 * 8
    tracemalloc.start()
    try:
        binned = BinMapper().fit(X).transform(X, NUMPY)
        binning_peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.reset_peak()
        tree = DecisionTreeRegressor(max_features=0.01, random_state=0).fit(X, y)
        fit_peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert binned.n_bins == 256
    assert binned.edge_values.nbytes < padded_bytes / 100
    assert binning_peak < padded_bytes / 4, binning_peak
    assert fit_peak < padded_bytes / 4, fit_peak  # histograms of the large nodes: 30 MB
    assert tree.tree_.node_count > 20
    dense_tree = DecisionTreeRegressor(max_features=0.01, random_state=0).fit(X.toarray(), y)
    for name in ("feature", "threshold", "children_left", "missing_go_left"):
        np.testing.assert_array_equal(getattr(tree.tree_, name), getattr(dense_tree.tree_, name))


def test_sparse_data_of_other_dtypes_are_binned_as_float64():
    # integer, bool and long double entries: the codes of their float64 values
    rng = np.random.default_rng(90)
    dense = np.where(rng.random((200, 6)) < 0.3, rng.integers(-3, 4, size=(200, 6)), 0)
    mapper = BinMapper(max_bins=8).fit(dense.astype(np.float64))
    expected = mapper.transform(dense.astype(np.float64), NUMPY).codes
    for dtype in (np.int64, np.int8, np.longdouble, bool):
        got = mapper.transform(sp.csr_matrix(dense.astype(dtype)), NUMPY)
        if dtype is bool:
            expected_bool = mapper.transform(dense.astype(bool).astype(np.float64), NUMPY).codes
            np.testing.assert_array_equal(got.codes, expected_bool)
        else:
            np.testing.assert_array_equal(got.codes, expected)
    assert BinMapper().fit(np.zeros((5, 0))).edges_ == []
