"""Device-resident best-first growth (:mod:`gpurpo.tree.device_best_first`) against the host.

The host-orchestrated best-first driver of :mod:`gpurpo.tree.grower` on the NumPy
backend is the reference: the device driver (on NumPy through the numba twins of
its kernels, and on the emulated CUDA backend) must grow the same trees, split for
split (compared depth first, as node ids differ), with the same training samples
in every leaf and the same leaf weights, although it grows them in rounds of
replayed best-first growth rather than one split at a time.
"""

from __future__ import annotations

import numpy as np
import pytest
from _tree_compare import (
    _canonical,
    _leaf_rank,
    _problem,
    _samples_by_leaf,
    record_partition_parts,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpurpo.backend import EMULATED, NUMPY, count_device_activity
from gpurpo.tree import GrowthParams, grow_tree_best_first
from gpurpo.tree.binning import BinMapper
from gpurpo.tree.device_best_first import device_best_first_supported, grow_best_first_on_device
from gpurpo.tree.grower import draw_root_seeds


def _assert_same_trees(params, backend, n=400, p=12, m=3, n_trees=3, seed=0, **data):
    X, targets, W = _problem(n, p, m, n_trees, seed, **data)
    mapper = BinMapper().fit(X)
    seeds = draw_root_seeds(np.random.default_rng(seed + 1), n_trees)
    ref = grow_tree_best_first(mapper.transform(X, NUMPY), targets, W, params, None, NUMPY,
                               seeds)
    got = grow_best_first_on_device(
        mapper.transform(X, backend), backend.asarray(targets),
        None if W is None else backend.asarray(W), params, None, backend,
        backend.asarray(seeds))
    for t in range(n_trees):
        a, b = ref.structures[t], got.structures[t]
        assert a.n_leaves <= params.max_leaf_nodes
        assert _canonical(a) == _canonical(b), f"tree {t}"
        np.testing.assert_array_equal(
            _samples_by_leaf(b, backend.to_host(got.leaf_of_sample[t])),
            _samples_by_leaf(a, ref.leaf_of_sample[t]), err_msg=f"tree {t}")
        np.testing.assert_array_equal(_leaf_rank(b), np.arange(b.n_leaves))
    return ref


CASES = {
    "all features": {"max_leaf_nodes": 31},
    "sampled": {"max_leaf_nodes": 31, "n_candidates": 3},
    "one feature": {"max_leaf_nodes": 20, "n_candidates": 1},
    "extra trees": {"max_leaf_nodes": 24, "n_candidates": 4, "splitter": "random"},
    "extra trees, all": {"max_leaf_nodes": 24, "splitter": "random"},
    "two leaves": {"max_leaf_nodes": 2},
    "more leaves than splits": {"max_leaf_nodes": 1000, "min_samples_leaf": 12},
    "max_depth": {"max_leaf_nodes": 40, "max_depth": 4},
    "min_samples_leaf": {"max_leaf_nodes": 50, "min_samples_leaf": 3},
    "min_samples_split": {"max_leaf_nodes": 30, "min_samples_split": 11, "n_candidates": 2},
    "min_impurity_decrease": {"max_leaf_nodes": 40, "min_impurity_decrease": 0.002},
    "histograms only": {"max_leaf_nodes": 31, "small_node_size": 0},
    "histograms only, sampled": {"max_leaf_nodes": 31, "small_node_size": 0, "n_candidates": 5},
    "no subtraction": {"max_leaf_nodes": 31, "small_node_size": 0,
                       "max_histogram_bytes": 60_000},
    "small nodes only": {"max_leaf_nodes": 31, "small_node_size": 400},
    # the pool of histograms holds 3 nodes: compacted again and again
    "pool compaction": {"max_leaf_nodes": 60, "small_node_size": 0,
                        "max_histogram_bytes": 6 * 12 * 256 * 5 * 4},
}


@pytest.mark.parametrize("case", list(CASES))
def test_numba_twins_grow_the_host_drivers_trees(case):
    params = GrowthParams(**{"small_node_size": 64, **CASES[case]})
    _assert_same_trees(params, NUMPY)


def test_the_cases_reach_their_leaf_budget():
    # the comparison above is between trees that the budget shapes
    ref = _assert_same_trees(GrowthParams(max_leaf_nodes=31, small_node_size=64), NUMPY)
    assert all(s.n_leaves == 31 for s in ref.structures)


@pytest.mark.parametrize("data", [{"weights": False}, {"ties": True}])
def test_unit_weights_and_tied_features(data):
    _assert_same_trees(GrowthParams(max_leaf_nodes=31, n_candidates=4, small_node_size=64),
                       NUMPY, **data)


@pytest.mark.parametrize("case", ["all features", "sampled", "histograms only",
                                  "min_samples_leaf"])
def test_emulated_cuda_grows_the_host_drivers_trees(case):
    params = GrowthParams(**{"small_node_size": 40, **CASES[case]})
    _assert_same_trees(params, EMULATED, n=200, p=6, m=2, n_trees=2, seed=1)


@pytest.mark.parametrize("case", ["all features", "sampled"])
def test_emulated_cuda_grows_them_with_nodes_partitioned_in_parts(monkeypatch, case):
    # parts of 8 samples: a round's large nodes are partitioned by several blocks,
    # counted by tree_level_split and placed by tree_level_children's other blocks
    calls = record_partition_parts(monkeypatch)
    params = GrowthParams(**{"small_node_size": 40, **CASES[case]})
    _assert_same_trees(params, EMULATED, n=200, p=6, m=2, n_trees=2, seed=1)
    assert max(calls) > 1  # some rounds partitioned in parts


@pytest.mark.parametrize("table_bytes", [0, 1 << 30], ids=["table at the end", "table per round"])
@pytest.mark.parametrize("data", [{"weights": False}, {}], ids=["unit weights", "weights"])
def test_the_nodes_come_back_with_the_counts_or_at_the_end(table_bytes, data, monkeypatch):
    # a small node table comes with every round's counts (the last copy is the trees'),
    # a large one once at the end: the same trees either way, with or without the
    # deferred check of the targets (unit weights)
    from gpurpo.tree import device_best_first

    monkeypatch.setattr(device_best_first, "TABLE_COPY_BYTES", table_bytes)
    for params in (GrowthParams(max_leaf_nodes=31, small_node_size=64),
                   GrowthParams(max_leaf_nodes=40, max_depth=4, small_node_size=64),
                   GrowthParams(max_leaf_nodes=2)):
        _assert_same_trees(params, NUMPY, n_trees=2, **data)


def test_grow_tree_best_first_takes_the_device_path_on_cuda_backends():
    X, targets, W = _problem(200, 6, 2, 2, 3)
    binned = BinMapper().fit(X).transform(X, EMULATED)
    params = GrowthParams(max_leaf_nodes=12, n_candidates=3)
    seeds = draw_root_seeds(np.random.default_rng(0), 2)
    with count_device_activity() as activity:
        got = grow_tree_best_first(binned, EMULATED.asarray(targets), EMULATED.asarray(W),
                                   params, None, EMULATED, seeds)
    # the host driver reads every split back; the device driver one count per round
    # (about one round per level) and the inputs' checks and the trees at both ends
    splits = sum(s.n_leaves - 1 for s in got.structures)
    assert activity.d2h <= max(s.max_depth for s in got.structures) + 6 < splits
    ref = grow_tree_best_first(BinMapper().fit(X).transform(X, NUMPY), targets, W, params,
                               None, NUMPY, seeds)
    for a, b in zip(ref.structures, got.structures):
        assert _canonical(a) == _canonical(b)


def test_what_the_device_path_grows():
    X, _, _ = _problem(50, 4, 1, 1, 0)
    binned = BinMapper().fit(X).transform(X, NUMPY)
    assert device_best_first_supported(binned, GrowthParams(max_leaf_nodes=8))
    assert not device_best_first_supported(binned, GrowthParams())
    assert not device_best_first_supported(binned, GrowthParams(max_leaf_nodes=8,
                                                                criterion="newton"))
    with pytest.raises(ValueError, match="params.max_leaf_nodes must be set"):
        grow_best_first_on_device(binned, np.zeros((50, 1, 1), np.float32), None,
                                  GrowthParams(), None, NUMPY)
    with pytest.raises(TypeError, match="binned must be a BinnedMatrix"):
        grow_best_first_on_device(X, np.zeros((50, 1, 1), np.float32), None,
                                  GrowthParams(max_leaf_nodes=8), None, NUMPY)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    seed=st.integers(0, 2**31 - 1),
    n=st.integers(2, 300),
    p=st.integers(1, 40),
    n_trees=st.integers(1, 3),
    leaves=st.integers(2, 60),
    k=st.one_of(st.none(), st.integers(1, 40)),
    splitter=st.sampled_from(["best", "random"]),
    msl=st.integers(1, 4),
    mss=st.integers(2, 8),
    max_depth=st.one_of(st.none(), st.integers(0, 6)),
    small=st.integers(0, 80),
    nan_share=st.sampled_from([0.0, 0.1]),
    unit=st.booleans(),
)
def test_random_problems_grow_the_host_drivers_trees(seed, n, p, n_trees, leaves, k, splitter,
                                                     msl, mss, max_depth, small, nan_share,
                                                     unit):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, p)).astype(np.float32)
    X[:, : p // 2] = np.round(X[:, : p // 2])  # tied values
    X[rng.random(X.shape) < nan_share] = np.nan
    targets = rng.standard_normal((n, n_trees, 2)).astype(np.float32)
    if unit:
        weights = None
    else:
        weights = rng.poisson(1.0, size=(n_trees, n)).astype(np.float32)
        weights[:, 0] = 1.0  # every tree has a sample
    params = GrowthParams(max_leaf_nodes=leaves, n_candidates=k, splitter=splitter,
                          min_samples_leaf=msl, min_samples_split=mss, max_depth=max_depth,
                          small_node_size=small)
    binned = BinMapper(max_bins=16).fit(X).transform(X, NUMPY)
    seeds = draw_root_seeds(rng, n_trees)
    ref = grow_tree_best_first(binned, targets, weights, params, None, NUMPY, seeds)
    got = grow_best_first_on_device(binned, targets, weights, params, None, NUMPY, seeds)
    for t in range(n_trees):
        a, b = ref.structures[t], got.structures[t]
        assert _canonical(a) == _canonical(b)
        np.testing.assert_array_equal(_samples_by_leaf(b, got.leaf_of_sample[t]),
                                      _samples_by_leaf(a, ref.leaf_of_sample[t]))


@pytest.mark.parametrize("change, message, unit", [
    ({"targets": np.inf}, "targets must be finite in float32", True),
    ({"targets": (np.inf, -np.inf)}, "targets must be finite in float32", True),
    ({"targets": np.nan}, "targets must be finite in float32", True),
    ({"targets": np.inf}, "targets must be finite in float32", False),
    ({"weights": -1.0}, "weights must be finite and non-negative", False),
    ({"seeds": 3}, r"root_seeds must have shape \(n_trees=2,\)", True),
])
def test_bad_inputs_are_named(change, message, unit):
    X, _, _ = _problem(50, 4, 1, 1, 0)
    binned = BinMapper().fit(X).transform(X, NUMPY)
    targets = np.zeros((50, 2, 1), np.float32)
    weights = None if unit else np.ones((2, 50), np.float32)
    if "weights" in change:
        weights[0, 5] = change["weights"]
    if "targets" in change:
        for tree, value in enumerate(np.atleast_1d(change["targets"])):
            targets[3 + tree, tree, 0] = value
    seeds = np.arange(change.get("seeds", 2), dtype=np.uint64)
    with pytest.raises(ValueError, match=message):
        grow_best_first_on_device(binned, targets, weights, GrowthParams(max_leaf_nodes=4), None,
                                  NUMPY, seeds)
