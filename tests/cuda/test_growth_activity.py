"""Device-resident CUDA growth, judged by device-activity counts.

The CUDA path of :func:`gpurpo.tree.grow_trees` (:mod:`gpurpo.tree.device_grower`)
grows a batch of trees with its state on the device: a fixed handful of launches
per level for all nodes of all trees and one small device-to-host copy per level.
These tests count it on the emulated backend (:mod:`gpurpo.testing.device_activity`),
level by level and per tree level (total / depth of the deepest tree):

* every level launches exactly the kernels of the paths it runs (at most 12, with
  trees on all features deriving histograms by subtraction) and copies one array
  of counts to the host (none when only subtrees remain);
* no host-to-device copy after the data upload;
* at most 12 launches and 1 device-to-host copy per tree level, setup included;
* the counts of a level depend on which paths it runs only, the same for 1 and 8
  trees and for 4 times the rows (1 and 3 trees).

Best-first trees (boosting's, ``max_leaf_nodes``) grow in rounds
(:mod:`gpurpo.tree.device_best_first`), about one per level of the deepest tree:

* every round (selection, split, children) launches 3 kernels and copies one array
  of counts to the host; every evaluation of a frontier copies nothing; a round and
  the evaluation of its children take at most 12 launches;
* a tree of depth D takes D rounds when its last round splits only the last leaf of
  its budget or its deepest children are leaves by ``max_depth``, and D + 1 when its
  deepest nodes could split but the budget stops them (a round that confirms it);
  the nodes come to the host with the last round's counts;
* the counts of a step depend on which paths it runs only, the same for 1 and 4
  trees and for 4 times the rows.

A boosting round (the second of a fit: gradients, projection, the tree, leaf values
and step sizes) launches at most 12 kernels per level of its tree, on 300 rows and (with
relabel_rpo) 8,000 rows (the work around the tree is fused, :mod:`gpurpo.ensemble.boosting.round_kernels`;
with 8,000 rows every level's nodes are large, the tree only 5 or 6 levels deep, and
its setup a few launches: the roots' kernel writes the samples and unit weights, the
histograms' scratch holds the score counters), copies to the host once per round of
its tree's growth and nothing else, and nothing to the device (its random draws come
in blocks of iterations, :mod:`gpurpo.ensemble.boosting.iteration_draws`); it is
expected to fail the per-level target of copies (strictly), with the measured figures
in the reason.
"""

from __future__ import annotations

import pytest

from gpurpo.testing.device_activity import (
    best_first_batch_activity,
    boosting_round_activity,
    forest_batch_activity,
)

#: small data: the emulator runs every CUDA thread on the CPU
ROWS, MORE_ROWS, TREES, MORE_ROWS_TREES = 300, 1200, 8, 3
PER_LEVEL = ("launches", "d2h", "h2d", "syncs")

#: launches of a level: the split of the evaluated nodes (one kernel, which stages the
#: splitting nodes' samples itself), children; one per subtree or small-node call; node
#: statistics with the feature draws (one launch), histograms (every cell written: no
#: zeroing; the maxima of their fixed-point scales read once per growth), scores with
#: best slots (one launch, its counters zeroed once per growth) for the large nodes (and
#: a subtraction for derived ones: all features only)
COMMON, SUBTREES, SMALL, LARGE, DERIVED = 2, 1, 1, 3, 1


def _expected_launches(groups):
    n_sub, n_small, n_derived, n_direct = groups
    if n_small + n_derived + n_direct == 0:
        return SUBTREES
    return (COMMON + SUBTREES * bool(n_sub) + SMALL * bool(n_small)
            + LARGE * bool(n_derived + n_direct) + DERIVED * bool(n_derived))


@pytest.fixture(scope="module")
def one_tree():
    return forest_batch_activity(ROWS, 1)


@pytest.fixture(scope="module")
def batch():
    return forest_batch_activity(ROWS, TREES)


@pytest.fixture(scope="module")
def more_rows():
    return forest_batch_activity(MORE_ROWS, 1)


@pytest.fixture(scope="module")
def more_rows_batch():
    return forest_batch_activity(MORE_ROWS, MORE_ROWS_TREES)


@pytest.fixture(scope="module")
def all_features():
    return forest_batch_activity(900, 1, p=8, n_candidates=8)


@pytest.fixture(scope="module")
def boosting_rounds():
    return {strategy: boosting_round_activity(ROWS, strategy)
            for strategy in ("multi_output", "relabel_rpo")}


@pytest.fixture(scope="module")
def boosting_round_8000():
    # relabel_rpo, whose round also projects the gradients (multi_output, measured by
    # bench/host_overhead.py, takes fewer launches)
    return boosting_round_activity(8000, "relabel_rpo")


def _per_level(result):
    return {name: result[f"{name}_per_level"] for name in PER_LEVEL}


def test_the_measurement_sees_the_growth(one_tree, batch):
    # more trees grow deeper; the top levels run on the host loop, the rest in subtrees
    assert one_tree["depth"] >= 5 and batch["depth"] >= one_tree["depth"]
    assert 2 <= one_tree["levels"] < one_tree["depth"]
    assert one_tree["upload_h2d"] >= 4  # codes, targets, weights, seeds
    assert sum(one_tree["level_launches"]) < one_tree["launches"]


@pytest.mark.parametrize("case", ["one_tree", "batch", "more_rows", "more_rows_batch"])
def test_every_level_launches_its_paths_kernels_and_copies_one_array(case, request):
    result = request.getfixturevalue(case)
    groups = result["level_groups"]
    assert [_expected_launches(g) for g in groups] == result["level_launches"], groups
    assert max(result["level_launches"]) <= 12
    assert result["level_d2h"] == [int(sum(g[1:]) > 0) for g in groups]
    assert result["level_h2d"] == [0] * len(groups)


def test_all_features_levels_add_one_subtraction(all_features):
    # with all p features the larger of two large siblings is derived from its parent's
    # histogram: one more launch at the levels that do it
    groups = all_features["level_groups"]
    assert any(g[2] for g in groups), groups
    assert [_expected_launches(g) for g in groups] == all_features["level_launches"], groups
    assert max(all_features["level_launches"]) <= 12
    assert all_features["level_d2h"] == [int(sum(g[1:]) > 0) for g in groups]
    assert all_features["h2d"] == 0


def test_no_copy_to_the_device_after_the_upload(batch, more_rows):
    assert batch["h2d"] == 0 and more_rows["h2d"] == 0


@pytest.mark.parametrize("case", ["forest batch", "boosting round", "boosting round, multi_output",
                                  "boosting round, 8000 rows"])
def test_at_most_12_launches_per_level(case, request):
    # the round's work around its tree (gradients, step, scores) is one fused kernel each,
    # and its tree's setup (targets centred, their check, the roots with the samples) a
    # handful
    if case == "forest batch":
        result = request.getfixturevalue("batch")
    elif case.endswith("8000 rows"):
        result = request.getfixturevalue("boosting_round_8000")
        assert result["depth"] <= 7, result  # every level's nodes are large: a shallow tree
    else:
        rounds = request.getfixturevalue("boosting_rounds")
        result = rounds["multi_output" if "multi_output" in case else "relabel_rpo"]
    assert result["launches_per_level"] <= 12, _per_level(result)


@pytest.mark.parametrize("case", ["forest batch", "boosting round"])
def test_at_most_1_copy_to_the_host_per_level(case, batch, request):
    if case == "boosting round":
        request.applymarker(pytest.mark.xfail(strict=True, reason=(
            "relabel_rpo, 300 rows, tree depth 7: 1.14 copies to the host per level, one "
            "per round of growth, 8 for 7 levels: the last round confirms the tree. "
            "Dropping it needs the children's evaluation launched without their counts "
            "(frontier sizes kept on the device)")))
        result = request.getfixturevalue("boosting_rounds")["relabel_rpo"]
    else:
        result = batch
    assert result["d2h_per_level"] <= 1, _per_level(result)


@pytest.mark.parametrize("strategy", ["multi_output", "relabel_rpo"])
def test_a_boosting_round_copies_to_the_host_once_per_round_of_its_tree(strategy,
                                                                         boosting_rounds):
    # a round of growth per level and at most one that confirms the tree; the checks,
    # the nodes, the leaf values and the step sizes add no copy
    result = boosting_rounds[strategy]
    assert result["depth"] >= 5
    assert result["d2h"] <= result["depth"] + 1, result


@pytest.mark.parametrize("strategy", ["multi_output", "relabel_rpo"])
def test_a_boosting_round_copies_nothing_to_the_device(strategy, boosting_rounds):
    # the draws of the round (projection, root seed) came with the first round's block
    assert boosting_rounds[strategy]["h2d"] == 0


def test_the_same_counts_per_level_for_1_and_8_trees_and_4_times_the_rows(
        one_tree, batch, more_rows, more_rows_batch):
    seen: dict[tuple, tuple] = {}
    for result in (one_tree, batch, more_rows, more_rows_batch):
        for groups, launches, d2h in zip(result["level_groups"], result["level_launches"],
                                         result["level_d2h"]):
            paths = (bool(groups[0]), bool(groups[1]), bool(groups[2] + groups[3]))
            seen.setdefault(paths, (launches, d2h))
            assert seen[paths] == (launches, d2h), (paths, result["n"], result["trees"])
    # subtrees, small and large nodes each ran at some level, and together at one
    assert all(any(paths[k] for paths in seen) for k in range(3)), seen
    assert (True, True, True) in seen, seen


@pytest.fixture(scope="module")
def best_first():
    return {(n, trees): best_first_batch_activity(n, trees)
            for n in (ROWS, MORE_ROWS) for trees in (1, 4)}


def _steps(result):
    """(groups, launches, d2h, h2d) of the evaluations and of the rounds of a growth."""
    steps = list(zip(result["level_groups"], result["level_launches"], result["level_d2h"],
                     result["level_h2d"]))
    return steps[0::2], steps[1::2]


def test_best_first_rounds_copy_one_array_and_evaluations_none(best_first):
    for result in best_first.values():
        assert result["n_leaves"] == [31] * result["trees"]
        evaluations, rounds = _steps(result)
        # a round per level of the deepest tree and one that finds the trees complete
        assert len(rounds) == result["depth"] + 1
        assert [r[1:] for r in rounds] == [(3, 1, 0)] * len(rounds)
        assert all(e[2:] == (0, 0) for e in evaluations)
        assert result["h2d"] == 0
        # the root's evaluation, then a round and its children's
        levels = [evaluations[0][1]] + [r[1] + e[1] for r, e in zip(rounds, evaluations[1:])]
        assert max(levels) <= 12, levels


@pytest.mark.parametrize("max_leaf_nodes, max_depth", [(2, None), (31, 3)])
def test_best_first_growth_ends_without_a_confirming_round(max_leaf_nodes, max_depth):
    # two leaves: the root's split is the budget's last; depth 3: the children of
    # the third round are leaves by max_depth (31 leaves are not reached)
    result = best_first_batch_activity(ROWS, 1, max_leaf_nodes=max_leaf_nodes,
                                       max_depth=max_depth)
    evaluations, rounds = _steps(result)
    assert result["depth"] == (max_depth or result["depth"])
    assert len(rounds) == result["depth"], (result["depth"], len(rounds))
    # one copy per round, the nodes with the last; the last replay copies nothing
    assert result["d2h"] == len(rounds)
    assert evaluations[-1][1:] == (1, 0, 0)


def test_best_first_step_counts_depend_on_the_paths_only(best_first):
    seen: dict[tuple, int] = {}
    for result in best_first.values():
        evaluations, _ = _steps(result)
        for groups, launches, _, _ in evaluations:
            paths = (bool(groups[1]), bool(groups[2]), bool(groups[3]))
            seen.setdefault(paths, launches)
            assert seen[paths] == launches, (paths, result["n"], result["trees"])
    # small nodes, derived and direct large nodes each ran at some step
    assert all(any(paths[k] for paths in seen) for k in range(3)), seen
