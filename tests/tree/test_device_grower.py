"""Device-resident level growth (:mod:`gpurpo.tree.device_grower`) against the host grower.

The host-orchestrated grower of :mod:`gpurpo.tree.grower` on the NumPy backend is
the reference: the device grower (on NumPy through the numba twins of its kernels,
and on the emulated CUDA backend) must grow the same trees: the same splits and
thresholds node for node (compared depth first, as node ids differ), the same
training samples in every leaf, the same leaf weights.
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

from gpurpo.backend import EMULATED, NUMPY
from gpurpo.tree import GrowthParams, grow_trees
from gpurpo.tree import _kernels_cuda as kcuda
from gpurpo.tree.binning import BinMapper
from gpurpo.tree.device_grower import device_growth_supported, grow_trees_on_device
from gpurpo.tree.grower import draw_root_seeds


def _assert_same_trees(params, backend, n=400, p=12, m=3, n_trees=3, seed=0, **data):
    X, targets, W = _problem(n, p, m, n_trees, seed, **data)
    mapper = BinMapper().fit(X)
    seeds = draw_root_seeds(np.random.default_rng(seed + 1), n_trees)
    ref = grow_trees(mapper.transform(X, NUMPY), targets, W, params, None, NUMPY, seeds)
    got = grow_trees_on_device(
        mapper.transform(X, backend), backend.asarray(targets),
        None if W is None else backend.asarray(W), params, None, backend,
        backend.asarray(seeds))
    for t in range(n_trees):
        a, b = ref.structures[t], got.structures[t]
        assert _canonical(a) == _canonical(b), f"tree {t}"
        np.testing.assert_array_equal(
            _samples_by_leaf(b, backend.to_host(got.leaf_of_sample[t])),
            _samples_by_leaf(a, ref.leaf_of_sample[t]), err_msg=f"tree {t}")
        # depth first, left before right: the device grower's leaf numbering
        np.testing.assert_array_equal(_leaf_rank(b), np.arange(b.n_leaves))


CASES = {
    "all features": {},
    "sampled": {"n_candidates": 3},
    "one feature": {"n_candidates": 1},
    "extra trees": {"n_candidates": 4, "splitter": "random"},
    "extra trees, all": {"splitter": "random"},
    "max_depth": {"max_depth": 4},
    "min_samples_leaf": {"min_samples_leaf": 6, "n_candidates": 5},
    "min_samples_split": {"min_samples_split": 11, "n_candidates": 2},
    "min_impurity_decrease": {"min_impurity_decrease": 0.005},
    "histograms only": {"small_node_size": 0, "subtree_size": 0, "n_candidates": 5},
    "small chunks": {"small_node_size": 0, "subtree_size": 0, "max_histogram_bytes": 20_000},
    "no subtrees": {"subtree_size": 0, "small_node_size": 50},
}


@pytest.mark.parametrize("case", list(CASES))
def test_numba_twins_grow_the_host_growers_trees(case):
    params = GrowthParams(**{"small_node_size": 64, "subtree_size": 16, **CASES[case]})
    _assert_same_trees(params, NUMPY)


@pytest.mark.parametrize("data", [{"weights": False}, {"ties": True}])
def test_unit_weights_and_tied_features(data):
    _assert_same_trees(GrowthParams(n_candidates=4, small_node_size=64, subtree_size=16),
                       NUMPY, **data)


def test_emulated_cuda_grows_unit_weight_trees():
    # no weights: the roots' kernel writes every tree's samples and unit weights
    _assert_same_trees(GrowthParams(n_candidates=3, small_node_size=40, subtree_size=16),
                       EMULATED, n=120, p=5, n_trees=2, weights=False)


@pytest.mark.parametrize("case", ["sampled", "extra trees", "histograms only", "all features"])
def test_emulated_cuda_grows_the_host_growers_trees(case):
    params = GrowthParams(**{"small_node_size": 64, "subtree_size": 16, **CASES[case]})
    _assert_same_trees(params, EMULATED, n=250, n_trees=2)


@pytest.mark.parametrize("data", [{}, {"ties": True}])
def test_emulated_cuda_grows_them_with_chunked_histograms(monkeypatch, data):
    # chunks of 16 samples: several blocks, running at once, add each large node's cells
    # (64-bit fixed-point sums, the last block converts them)
    monkeypatch.setattr(kcuda, "MIN_SAMPLES_PER_BLOCK", 16)
    plan = kcuda.histogram_launch_plan(EMULATED.device_attributes(), 2, 5, 256, 5, 500)
    assert plan["chunks"] > 1
    params = GrowthParams(small_node_size=0, subtree_size=0, n_candidates=5)
    _assert_same_trees(params, EMULATED, n=250, n_trees=2, **data)


@pytest.mark.parametrize("data", [{}, {"ties": True}])
@pytest.mark.parametrize("case", ["sampled", "all features"])
def test_emulated_cuda_grows_them_with_nodes_partitioned_in_parts(monkeypatch, case, data):
    # parts of 8 samples: the top nodes' partitions are shared by blocks, counted by
    # tree_level_split and placed by tree_level_children's other blocks
    calls = record_partition_parts(monkeypatch)
    params = GrowthParams(**{"small_node_size": 64, "subtree_size": 16, **CASES[case]})
    _assert_same_trees(params, EMULATED, n=250, n_trees=2, **data)
    assert max(calls) > 1  # some levels partitioned in parts


def test_grow_trees_takes_the_device_path_on_cuda_backends():
    X, targets, W = _problem(200, 6, 2, 2, 3)
    binned = BinMapper().fit(X).transform(X, EMULATED)
    params = GrowthParams(n_candidates=3)
    seeds = draw_root_seeds(np.random.default_rng(0), 2)
    a = grow_trees(binned, EMULATED.asarray(targets), EMULATED.asarray(W), params, None,
                   EMULATED, seeds)
    b = grow_trees_on_device(binned, EMULATED.asarray(targets), EMULATED.asarray(W), params,
                             None, EMULATED, seeds)
    for sa, sb in zip(a.structures, b.structures):
        for name in ("children_left", "feature", "threshold", "leaf_index"):
            np.testing.assert_array_equal(getattr(sa, name), getattr(sb, name))


def test_what_the_device_path_grows():
    X, _, _ = _problem(50, 4, 1, 1, 0)
    binned = BinMapper().fit(X).transform(X, NUMPY)
    assert device_growth_supported(binned, GrowthParams())
    assert not device_growth_supported(binned, GrowthParams(max_leaf_nodes=8))
    assert not device_growth_supported(binned, GrowthParams(criterion="newton"))
    with pytest.raises(ValueError, match="params.max_leaf_nodes must be None"):
        grow_trees_on_device(binned, np.zeros((50, 1, 1), np.float32), None,
                             GrowthParams(max_leaf_nodes=8), None, NUMPY)


@pytest.mark.parametrize("change, message", [
    ({"weights": -1.0}, "weights must be finite and non-negative"),
    ({"weights": 0.0}, "tree 0 has none"),
    ({"targets": np.inf}, "targets must be finite in float32"),
    # without weights the check (the sum of the trees' target means) is read with the
    # node table at the end: a NaN, an infinity of either sign, infinities of both signs
    # in two trees (whose means sum to NaN) are all caught
    ({"targets": np.nan, "unit": True}, "targets must be finite in float32"),
    ({"targets": -np.inf, "unit": True}, "targets must be finite in float32"),
    ({"targets": (np.inf, -np.inf), "unit": True}, "targets must be finite in float32"),
    ({"seeds": 3}, r"root_seeds must have shape \(n_trees=2,\)"),
    ({"shape": (49, 2, 1)}, r"targets must have shape \(n_samples=50"),
])
def test_bad_inputs_are_named(change, message):
    X, _, _ = _problem(50, 4, 1, 1, 0)
    binned = BinMapper().fit(X).transform(X, NUMPY)
    targets = np.zeros(change.get("shape", (50, 2, 1)), np.float32)
    weights = np.ones((2, 50), np.float32)
    if "weights" in change:
        weights[0] = change["weights"]
    if "targets" in change:
        for tree, value in enumerate(np.atleast_1d(change["targets"])):
            targets[3 + tree, tree, 0] = value
    seeds = np.arange(change.get("seeds", 2), dtype=np.uint64)
    with pytest.raises(ValueError, match=message):
        grow_trees_on_device(binned, targets, None if change.get("unit") else weights,
                             GrowthParams(), None, NUMPY, seeds)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    seed=st.integers(0, 2**31 - 1),
    n=st.integers(2, 300),
    p=st.integers(1, 40),
    n_trees=st.integers(1, 3),
    k=st.one_of(st.none(), st.integers(1, 40)),
    splitter=st.sampled_from(["best", "random"]),
    msl=st.integers(1, 4),
    mss=st.integers(2, 8),
    max_depth=st.one_of(st.none(), st.integers(0, 6)),
    small=st.integers(0, 80),
    subtree=st.integers(0, 40),
    nan_share=st.sampled_from([0.0, 0.1]),
)
def test_random_problems_grow_the_host_growers_trees(seed, n, p, n_trees, k, splitter, msl, mss,
                                                     max_depth, small, subtree, nan_share):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, p)).astype(np.float32)
    X[:, : p // 2] = np.round(X[:, : p // 2])  # tied values
    X[rng.random(X.shape) < nan_share] = np.nan
    targets = rng.standard_normal((n, n_trees, 2)).astype(np.float32)
    weights = rng.poisson(1.0, size=(n_trees, n)).astype(np.float32)
    weights[:, 0] = 1.0  # every tree has a sample
    params = GrowthParams(n_candidates=k, splitter=splitter, min_samples_leaf=msl,
                          min_samples_split=mss, max_depth=max_depth, small_node_size=small,
                          subtree_size=subtree)
    binned = BinMapper(max_bins=16).fit(X).transform(X, NUMPY)
    seeds = draw_root_seeds(rng, n_trees)
    ref = grow_trees(binned, targets, weights, params, None, NUMPY, seeds)
    got = grow_trees_on_device(binned, targets, weights, params, None, NUMPY, seeds)
    for t in range(n_trees):
        a, b = ref.structures[t], got.structures[t]
        assert _canonical(a) == _canonical(b)
        np.testing.assert_array_equal(_samples_by_leaf(b, got.leaf_of_sample[t]),
                                      _samples_by_leaf(a, ref.leaf_of_sample[t]))


@pytest.mark.parametrize("backend", [NUMPY, EMULATED], ids=lambda b: b.name)
def test_node_table_grows_and_comes_back_in_one_copy(backend):
    from gpurpo.backend import count_device_activity
    from gpurpo.tree.device_grower import DeviceNodeTable

    with count_device_activity():  # device arrays of the emulated backend in this block
        table = DeviceNodeTable(backend.xp, 5)
        values = {}
        for k, (name, dtype) in enumerate(DeviceNodeTable.FIELDS):
            values[name] = (np.arange(5) * (k + 1)).astype(dtype)
            getattr(table, name)[:] = backend.asarray(values[name])
        table.reserve(4, 5)  # fits: nothing moves
        assert table.capacity == 5
        table.reserve(7, 3)  # doubles, keeping the first 3 rows
        assert table.capacity == 10
        table.head[:] = backend.asarray(np.array([7]))
        with count_device_activity() as copies:
            host = table.to_host(backend, 3)
        with count_device_activity() as whole:
            full = table.to_host(backend, table.capacity)
    assert copies.d2h == (1 if backend is EMULATED else 0)
    for name, expected in values.items():
        assert host[name].dtype == np.dtype(dict(DeviceNodeTable.FIELDS)[name])
        np.testing.assert_array_equal(host[name], expected[:3], err_msg=name)
        np.testing.assert_array_equal(full[name][:3], expected[:3], err_msg=name)
    assert host["head"][0] == full["head"][0] == 7
    if backend is EMULATED:
        # the used rows only: 8 bytes of head, each field's 3 rows padded to 8 bytes
        used_bytes = 8 + sum(-(-3 * np.dtype(d).itemsize // 8) * 8
                             for _, d in DeviceNodeTable.FIELDS)
        assert copies.d2h_bytes == used_bytes < whole.d2h_bytes == table.buffer.nbytes
