"""A sparse X on CUDA backends, held as its stored entries alone (no dense codes).

The CUDA growth kernels read its codes from the stored rows: the histograms add
the listed codes and derive each slot's cell of its feature's code of 0.0 from
the node's totals, the exact split of small nodes and the level's partition look
each sample's code up in its row. Each runs on the emulated backend against the
same kernel on the dense codes (the same bits) and a NumPy reference; whole
forests and boosting fits on the emulated backend grow the CPU backend's trees
without ever building the dense codes.
"""

from __future__ import annotations

import shutil

import numpy as np
import pytest
import scipy.sparse as sp
from _sparse_codes import code_rows
from _split_records import histogram_records, split_records
from test_tree_cuda_kernels import (
    SIZES,
    _batch,
    _fixed_point_reference,
    _make_sparse_like,
    _split_problem,
)

from gpurpo.backend import EMULATED, NUMPY
from gpurpo.ensemble import GradientBoostingRegressor, RandomForestRegressor
from gpurpo.tree import _kernels_cuda as kcuda
from gpurpo.tree import kernels
from gpurpo.tree.binning import BinMapper

pytestmark = pytest.mark.skipif(
    shutil.which("g++") is None, reason="the CUDA emulator needs g++ (C++20) on PATH"
)

CELL = kcuda.HIST_CELL_BYTES
# launch plans of the stored rows' layout (per channel 16 bytes, per slot 12, fixed 8)
_STORED_PLANS = {
    "whole-node": ({}, lambda p: p["variant"] == "shared" and p["n_slot_tiles"] == 1
                   and p["chunks"] == 1),
    "slot-tiles": (lambda B, C: {"shared_mem_bytes": 2 * (CELL * B * C + 12) + 16 * C + 8},
                   lambda p: p["variant"] == "shared" and p["slot_tile"] == 2
                   and p["n_chan_tiles"] == 1),
    "channel-tiles": (lambda B, C: {"shared_mem_bytes": 2 * (CELL * B + 16) + 20},
                      lambda p: p["variant"] == "shared" and p["slot_tile"] == 1
                      and p["chan_tile"] == 2),
    "global-atomics": (lambda B, C: {"shared_mem_bytes": CELL * B},
                       lambda p: p["variant"] == "global"),
    "chunked": (lambda B, C: {"samples_per_block": 16},
                lambda p: p["variant"] == "shared" and p["chunks"] > 1),
}


def _rows(stored):
    """The ``rows`` argument of the histogram launcher."""
    return stored.row_ptr, stored.row_features, stored.row_codes, stored.zero_code


@pytest.mark.parametrize("plan_name", list(_STORED_PLANS))
@pytest.mark.parametrize("with_count", [False, True])
def test_histograms_from_stored_rows_are_those_of_the_dense_codes(plan_name, with_count):
    rng = np.random.default_rng(5)
    codes, *rest = _batch(rng)
    n_bins = 17
    zero_code = _make_sparse_like(rng, codes, 0.8, n_bins).astype(np.uint8)
    zero_code[0] = n_bins - 1  # a feature whose code of 0.0 is the missing bin
    batch = (codes, *rest)
    k, m = batch[3].shape[1], batch[-1].shape[2]
    channels = m + 2 if with_count else m + 1
    overrides, check = _STORED_PLANS[plan_name]
    kwargs = overrides(n_bins, channels) if callable(overrides) else overrides
    plan = kcuda.histogram_launch_plan(EMULATED.device_attributes(), len(batch[2]), k, n_bins,
                                       channels, len(batch[1]), stored=True, **kwargs)
    assert check(plan), plan
    stored = code_rows(codes, zero_code)
    assert stored.row_features.size < 0.3 * codes.size
    no_codes = np.empty((codes.shape[0], 0), np.uint8)
    out = np.full((len(batch[2]), k, n_bins, channels), np.nan, dtype=np.float32)
    kcuda.histograms(EMULATED, *histogram_records(no_codes, *rest), out, _rows(stored), **kwargs)
    dense = np.zeros_like(out)
    kcuda.histograms(EMULATED, *histogram_records(*batch), dense, **kwargs)
    want = _fixed_point_reference(*batch, n_bins, channels)
    np.testing.assert_array_equal(dense, want)
    np.testing.assert_array_equal(out, want)  # the same bits as from the dense codes
    assert out[..., 0].any()
    # the numba twin reads the same rows
    cpu = kernels.build_histograms(NUMPY, *histogram_records(no_codes, *rest), n_bins, channels,
                                   stored=stored)
    np.testing.assert_allclose(cpu, out, rtol=1e-5, atol=2e-5)


@pytest.mark.parametrize("k", [3, 40])
def test_histograms_of_long_and_short_rows_from_stored_rows(k):
    # rows of 1 to about 60 entries of 64 features: with 3 candidate features the long
    # rows are searched for each feature, the short ones walked; with 40 all are walked
    rng = np.random.default_rng(10 + k)
    n, p, n_bins, m = 700, 64, 9, 2
    density = rng.choice([0.02, 0.3, 0.95], size=n)
    codes = np.where(rng.random((p, n)) < density, rng.integers(1, n_bins, size=(p, n)), 0)
    codes = codes.astype(np.uint8)
    sizes = (300, 250, 150)
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    sample_indices = np.concatenate([rng.choice(n, size=s, replace=False) for s in sizes])
    node_ranges = np.stack([starts, starts + np.asarray(sizes)], axis=1).astype(np.int64)
    node_features = np.stack([rng.choice(p, size=k, replace=False) for _ in sizes])
    rest = (sample_indices.astype(np.int32), node_ranges, node_features.astype(np.int32),
            np.array([0, 1, 0], np.int32), rng.integers(0, 3, size=(2, n)).astype(np.float32),
            rng.normal(size=(n, 2, m)).astype(np.float32))
    stored = code_rows(codes, np.zeros(p, np.uint8))
    lengths = np.diff(stored.row_ptr)
    assert (lengths > 3 * np.ceil(np.log2(lengths + 1))).any()
    assert (lengths <= 3 * np.ceil(np.log2(lengths + 1))).any()
    for kwargs in ({}, {"samples_per_block": 16}):
        out = np.zeros((3, k, n_bins, m + 2), dtype=np.float32)
        kcuda.histograms(EMULATED, *histogram_records(np.empty((p, 0), np.uint8), *rest), out,
                         _rows(stored), **kwargs)
        want = _fixed_point_reference(codes, *rest, n_bins, m + 2)
        np.testing.assert_array_equal(out, want)


def test_histograms_need_the_rows_of_the_samples():
    rng = np.random.default_rng(6)
    codes, *rest = _batch(rng)
    no_codes = np.empty((codes.shape[0], 0), np.uint8)
    with pytest.raises(ValueError, match="stored"):
        kernels.build_histograms(EMULATED, *histogram_records(no_codes, *rest), 17, 5)
    short = code_rows(codes[:, :10], np.zeros(codes.shape[0], np.uint8))
    with pytest.raises(ValueError, match="rows"):
        kernels.build_histograms(EMULATED, *histogram_records(no_codes, *rest), 17, 5,
                                 stored=short)


@pytest.mark.parametrize("random_split", [False, True])
def test_split_small_on_stored_rows_matches_the_dense_codes(random_split):
    rng = np.random.default_rng(900 + random_split)
    n_bins = 12
    problem = list(_split_problem(rng, SIZES, p=9, n_bins=n_bins))
    codes = problem[0]
    zero_code = _make_sparse_like(rng, codes, 0.85, n_bins).astype(np.uint8)
    stored = code_rows(codes, zero_code)
    args = tuple(problem) + (5, 1, random_split, n_bins - 1, 1e-5)
    want = kernels.split_small(NUMPY, *split_records(*args))
    no_codes = (np.empty((codes.shape[0], 0), np.uint8),) + tuple(problem[1:])
    records = split_records(*no_codes, 5, 1, random_split, n_bins - 1, 1e-5)
    got = kernels.split_small(EMULATED, *records, sparse=kernels.SparseColumns(None, stored))
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)  # same bits
    assert (want[0] >= 0).sum() >= 5


def _text_like(rng, n=600, p=80, d=6):
    """Word counts in a CSR matrix (about 5 % stored) and outputs of a few words."""
    X = sp.random(n, p, density=0.05, format="csr", random_state=rng,
                  data_rvs=lambda k: rng.integers(1, 4, k).astype(float))
    dense = X.toarray()
    Y = dense[:, :4] @ rng.normal(size=(4, d)) + 0.1 * rng.normal(size=(n, d))
    return X, dense, Y


def test_binning_on_cuda_backends_lists_the_stored_entries_only():
    rng = np.random.default_rng(7)
    X, _, _ = _text_like(rng)
    X = X.tolil()
    X[3, 5] = np.nan
    X[10, 7] = -2.0
    X = X.tocsr()
    dense = X.toarray()
    mapper = BinMapper(max_bins=16).fit(dense)
    host = mapper.transform(X, NUMPY)
    device = mapper.transform(X, EMULATED)
    assert device.dense_codes is None and host.dense_codes is None
    for name in ("zero_code", "row_ptr", "row_features", "row_codes", "col_ptr", "col_rows",
                 "col_codes"):
        np.testing.assert_array_equal(np.asarray(getattr(device.sparse_codes, name)),
                                      getattr(host.sparse_codes, name), err_msg=name)
    # the dense codes, built on demand, are those of the dense X
    np.testing.assert_array_equal(np.asarray(device.codes), mapper.transform(dense, NUMPY).codes)


def _fit_both(estimator, X, Y, monkeypatch):
    """Predictions of ``estimator`` fitted on the CPU and on the emulated backend, which
    must never build the dense codes."""
    from gpurpo.tree.binning import _mapper

    def refuse(*args, **kwargs):
        raise AssertionError("the dense codes were built")

    monkeypatch.setattr(_mapper, "dense_codes_of", refuse)
    out = {}
    for device in ("cpu", "cuda-emulated"):
        out[device] = estimator.set_params(device=device).fit(X, Y).predict(X)
    return out


def test_forest_on_stored_rows_equals_cpu(monkeypatch):
    rng = np.random.default_rng(8)
    X, dense, Y = _text_like(rng)
    forest = RandomForestRegressor(n_estimators=3, max_features=0.3, random_state=0,
                                   min_samples_leaf=2)
    got = _fit_both(forest, X, Y, monkeypatch)
    assert got["cpu"].std() > 0
    np.testing.assert_allclose(got["cuda-emulated"], got["cpu"], rtol=1e-12, atol=1e-12)


def test_boosting_on_stored_rows_equals_cpu(monkeypatch):
    rng = np.random.default_rng(9)
    X, dense, Y = _text_like(rng)
    boosting = GradientBoostingRegressor(n_estimators=4, max_leaf_nodes=8, random_state=0)
    got = _fit_both(boosting, X, Y, monkeypatch)
    assert got["cpu"].std() > 0
    np.testing.assert_allclose(got["cuda-emulated"], got["cpu"], rtol=1e-12, atol=1e-12)


def test_bench_stored_rows_batch_lists_the_codes_it_times():
    """bench/gpu_check.py times the histograms of its text-like batch from the stored
    rows against the dense codes: its rows list exactly the codes that are not 0."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
    try:
        from gpu_check import histogram_batch, stored_rows_batch
    finally:
        sys.path.pop(0)
    rng = np.random.default_rng(3)
    n, p, m, n_bins = 500, 12, 3, 9
    codes, stored = stored_rows_batch(np, rng, n, p, n_bins, density=0.1)
    want = code_rows(codes, np.zeros(p, np.uint8))
    for got, name in zip(stored, ("row_ptr", "row_features", "row_codes", "zero_code")):
        np.testing.assert_array_equal(got, getattr(want, name), err_msg=name)
    weights, targets, sample_indices, node_ranges, node_features, node_tree = histogram_batch(
        np, rng, n, p, m, 1, p, False)
    records = (sample_indices, node_ranges, node_features, node_tree, weights, targets)
    outs = [np.zeros((1, p, n_bins, m + 2), np.float32) for _ in range(2)]
    kcuda.histograms(EMULATED, *histogram_records(np.empty((p, 0), np.uint8), *records),
                     outs[0], stored)
    kcuda.histograms(EMULATED, *histogram_records(codes, *records), outs[1])
    np.testing.assert_array_equal(outs[0], outs[1])
    assert outs[0][..., -1].sum() == n * p


@pytest.mark.parametrize("max_leaf_nodes", [None, 16])
def test_growth_on_stored_rows_has_the_device_activity_of_dense_codes(max_leaf_nodes,
                                                                      monkeypatch):
    # the same trees from the dense X (its codes alone, or listed as mostly zeros too)
    # and from its CSR form, with no more launches and the same copies: nothing per
    # node on the host for stored rows
    from gpurpo.backend import count_device_activity
    from gpurpo.tree import GrowthParams, grow_tree_best_first, grow_trees
    from gpurpo.tree.binning import _mapper

    rng = np.random.default_rng(11)
    n, p, T, m = 800, 40, 2, 2
    X = sp.random(n, p, density=0.08, format="csr", random_state=rng)
    dense = X.toarray()
    Y = (dense[:, :5] @ rng.normal(size=(5, T * m))).reshape(n, T, m)
    Y = (Y + 0.1 * rng.normal(size=Y.shape)).astype(np.float32)
    W = rng.multinomial(n, np.full(n, 1 / n), size=T).astype(np.float32)
    mapper = BinMapper(max_bins=32).fit(dense)
    if max_leaf_nodes is None:
        params, grow = GrowthParams(n_candidates=8), grow_trees
    else:
        params, grow = GrowthParams(max_leaf_nodes=max_leaf_nodes), grow_tree_best_first
    got = {}
    for name, data in (("dense", dense), ("listed", dense), ("stored", X)):
        with monkeypatch.context() as patch:
            if name == "dense":
                patch.setattr(_mapper, "MOSTLY_ZERO_SHARE", -1.0)
            with count_device_activity():
                binned = mapper.transform(data, EMULATED)
                targets, weights = EMULATED.asarray(Y), EMULATED.asarray(W)
                with count_device_activity() as activity:
                    result = grow(binned, targets, weights, params, np.random.default_rng(1),
                                  EMULATED)
        assert (binned.dense_codes is None) == (name == "stored")
        assert binned.stored_rows_held == (name != "dense")
        got[name] = (activity, [s.node_count for s in result.structures],
                     np.asarray(EMULATED.to_host(result.leaf_of_sample)))
    dense_a, dense_nodes, dense_leaves = got["dense"]
    assert sum(dense_nodes) > T * 20
    for name in ("listed", "stored"):
        activity, nodes, leaves = got[name]
        assert nodes == dense_nodes, name
        np.testing.assert_array_equal(leaves, dense_leaves, err_msg=name)
        assert activity.launches <= dense_a.launches, name
        assert (activity.d2h, activity.h2d) == (dense_a.d2h, dense_a.h2d), name
