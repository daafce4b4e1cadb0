"""Nodes searched in ranges of positions over every thread (``split_few_nodes``).

A call of fewer nodes than threads (best-first growth evaluates the two
children of a split) splits the search of each node that visits every
position of its order into ranges searched at once; the tie rule over the
ranges' candidates in order must pick what the node-by-node kernel picks, bit
for bit, on dense codes, on a sparse X's stored-entry columns, with and
without dense codes, with random cuts, and for the nodes searched whole.
"""

from __future__ import annotations

import contextlib

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpurpo.backend import NUMPY, serial_cpu_kernels
from gpurpo.tree import kernels
from gpurpo.tree._numba import tree_split_small
from gpurpo.tree._numba._node_split import SUBSET_LIMIT
from gpurpo.tree.binning import BinMapper
from gpurpo.tree.grower import TIE_RTOL


def _problem(seed, n, p, m, layout):
    rng = np.random.default_rng(seed)
    if layout == "continuous":
        X = rng.normal(size=(n, p)).astype(np.float32)
        X[rng.random((n, p)) < 0.05] = np.nan
    else:
        X = sp.random(n, p, density=0.05, format="csr", random_state=seed, dtype=np.float32)
        if layout == "text, dense":
            X = X.toarray()
    targets = rng.normal(size=(n, 1, m)).astype(np.float32)
    weights = rng.integers(1, 4, size=(1, n)).astype(np.float32)  # nodes hold positive weights
    return BinMapper(max_bins=32).fit(X).transform(X, NUMPY), targets, weights


def _split(binned, targets, weights, ranges, samples, seeds, k, msl, random_split, threads,
           monkeypatch, min_samples=0):
    # ranges, and threads, for calls of every size (the kernel's own limits are a matter
    # of speed only)
    monkeypatch.setattr(tree_split_small, "RANGED_MIN_SAMPLES", min_samples)
    monkeypatch.setattr(tree_split_small, "SERIAL_SEARCH", 0)
    monkeypatch.setattr(tree_split_small.numba, "get_num_threads", lambda: threads)
    return kernels.split_small(
        NUMPY, binned.kernel_codes,
        kernels.NodeBatch(samples, ranges, np.zeros(len(ranges), np.int32), seeds),
        weights, targets, kernels.EdgeTable(binned.edge_values, binned.edge_ptr),
        kernels.SplitRules(k, msl, random_split, binned.missing_bin, TIE_RTOL),
        kernels.SparseColumns(binned.subtracted_bin, binned.sparse_codes, binned.listed))


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2**31), n_nodes=st.integers(1, 4), p=st.sampled_from([6, 40, 150]),
       m=st.sampled_from([1, 3, 9]), all_features=st.booleans(), random_split=st.booleans(),
       msl=st.sampled_from([1, 5]), sorted_rows=st.booleans(),
       layout=st.sampled_from(["continuous", "text, dense", "text, csr"]))
def test_ranges_pick_what_the_whole_search_picks(monkeypatch, seed, n_nodes, p, m, all_features,
                                                 random_split, msl, sorted_rows, layout):
    n = 1300  # room for 4 nodes of 300
    binned, targets, weights = _problem(seed, n, p, m, layout)
    rng = np.random.default_rng(seed + 1)
    # node sizes around the limits: pure or tiny nodes, SUBSET_LIMIT, the sort limit, more
    sizes = rng.choice([2, SUBSET_LIMIT, SUBSET_LIMIT + 1, 40, 256, 300], size=n_nodes)
    samples = rng.permutation(n)[: sizes.sum()].astype(np.int32)
    stops = np.cumsum(sizes)
    ranges = np.column_stack([stops - sizes, stops]).astype(np.int64)
    if sorted_rows:  # increasing rows: the nodes read a sparse X's columns
        for a, b in ranges:
            samples[a:b] = np.sort(samples[a:b])
    seeds = rng.integers(0, 2**63, size=n_nodes, dtype=np.uint64)
    k = p if all_features else max(1, p // 3)
    args = (binned, targets, weights, ranges, samples, seeds, k, msl, random_split)
    whole = _split(*args, 1, monkeypatch)
    ranged = _split(*args, 16, monkeypatch)
    for a, b in zip(whole, ranged):
        np.testing.assert_array_equal(a, b)
    # the nodes that visit every position were searched in ranges
    task_node, task_lo, task_hi, width = tree_split_small.range_plan(ranges, k, p, msl, 64)
    for i, size in enumerate(sizes):
        whole_search = not (all_features and size > SUBSET_LIMIT and size >= 2 * msl)
        assert (width[i] < 0) == whole_search
        assert ((task_node == i).sum() > 1) == (not whole_search and p >= 32)
        if not whole_search:  # the ranges cover the order once
            covered = np.concatenate([np.arange(a, b) for a, b in
                                      zip(task_lo[task_node == i], task_hi[task_node == i])])
            np.testing.assert_array_equal(covered, np.arange(p))


def test_a_node_searched_in_ranges_finds_its_split(monkeypatch):
    # one large node of text-like data, every feature a candidate: ranges over 2 and 16
    # threads, and the whole search, choose the same split
    binned, targets, weights = _problem(3, 3000, 400, 3, "text, csr")
    ranges = np.array([[0, 3000]], dtype=np.int64)
    samples = np.arange(3000, dtype=np.int32)
    seeds = np.array([7], dtype=np.uint64)
    args = (binned, targets, weights, ranges, samples, seeds, 400, 1, False)
    whole = _split(*args, 1, monkeypatch)
    assert whole[0][0] >= 0
    # 16 threads: 25 ranges of 16 positions
    task_node, task_lo, task_hi, width = tree_split_small.range_plan(ranges, 400, 400, 1, 64)
    assert (len(task_node), width[0]) == (25, 16)
    for threads in (2, 16):
        got = _split(*args, threads, monkeypatch)
        for a, b in zip(whole, got):
            np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("threads, serial, min_samples", [
    (1, False, 0), (2, False, 0), (16, True, 0), (16, False, 51)])
def test_other_batches_take_the_node_by_node_kernel(monkeypatch, threads, serial, min_samples):
    # 3 nodes: one thread, two threads; any number of threads inside serial_cpu_kernels
    # (a forest's batches grown by several Python threads); nodes below the size limit
    calls = []
    monkeypatch.setattr(tree_split_small, "split_few_nodes",
                        lambda *a: calls.append(a) or None)
    binned, targets, weights = _problem(0, 150, 6, 2, "continuous")
    ranges = np.array([[0, 50], [50, 100], [100, 150]], dtype=np.int64)
    with serial_cpu_kernels() if serial else contextlib.nullcontext():
        got = _split(binned, targets, weights, ranges, np.arange(150, dtype=np.int32),
                     np.array([1, 2, 3], dtype=np.uint64), 6, 1, False, threads, monkeypatch,
                     min_samples)
    assert not calls and (got[0] >= 0).all()
    _split(binned, targets, weights, ranges, np.arange(150, dtype=np.int32),
           np.array([1, 2, 3], dtype=np.uint64), 6, 1, False, 16, monkeypatch, 50)
    assert len(calls) == 1
