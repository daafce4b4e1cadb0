"""Targets of the device-resident CUDA growth, judged by device-activity counts.

The design (docs: DESIGN.md, "GPU growth") grows a batch of trees on the
device with a fixed handful of launches per level for all nodes of all trees
and at most one small device-to-host copy per level. These tests count the
CUDA code path on the emulated backend (:mod:`gpurpo.testing.device_activity`)
and hold it to those targets, per tree level (total / depth of the deepest
tree):

* at most 12 launches and at most 1 device-to-host copy per level;
* no host-to-device copy after the data upload;
* the same counts per level for 1 and 8 trees, and for 4 times the rows (a
  fixed cost per level, plus a setup cost spread over the levels: counts per
  level within 10 %, or 0.5, of each other).

The host-orchestrated growth does not meet them yet: they are expected to
fail (strictly) until the redesign, with the measured figures in the reasons
(launches/d2h/h2d/syncs per level; ``bench/host_overhead.py`` prints them at
1,000 and 8,000 rows). Trees of up to 128 samples grow in one
``tree_grow_subtrees`` launch, so the deep levels cost nothing each and the
launches per level of the forest stay under 12 on this measure; the copies
per level do not.
"""

from __future__ import annotations

import pytest

from gpurpo.testing.device_activity import boosting_round_activity, forest_batch_activity

#: small data: the emulator runs every CUDA thread on the CPU
ROWS, MORE_ROWS, TREES = 300, 1200, 8
PER_LEVEL = ("launches", "d2h", "h2d", "syncs")


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
def boosting_round():
    return boosting_round_activity(ROWS, "relabel_rpo")


def _per_level(result):
    return {name: result[f"{name}_per_level"] for name in PER_LEVEL}


def _assert_same_per_level(a, b):
    for name in PER_LEVEL:
        x, y = a[f"{name}_per_level"], b[f"{name}_per_level"]
        assert abs(x - y) <= max(0.5, 0.1 * max(x, y)), (name, _per_level(a), _per_level(b))


def test_the_measurement_sees_the_growth(one_tree, batch):
    # every level of growth reads results back, and more trees grow deeper
    assert one_tree["depth"] >= 5 and batch["depth"] >= one_tree["depth"]
    assert one_tree["launches"] >= one_tree["depth"] / 4
    assert one_tree["upload_h2d"] >= 3  # codes, targets, weights


@pytest.mark.xfail(strict=True, reason=(
    "host-orchestrated growth, per level (launches/d2h): forest batch of 8 trees, 300 rows: "
    "7.1/2.7 (1,000 rows: 9.0/4.0; 8,000 rows: 13.6/6.9); boosting round, relabel_rpo, "
    "300 rows: 64.6/28.9 (8,000 rows: 99.1/45.3)"))
@pytest.mark.parametrize("case", ["forest batch", "boosting round"])
def test_at_most_12_launches_and_1_copy_to_the_host_per_level(case, batch, boosting_round):
    result = batch if case == "forest batch" else boosting_round
    assert result["launches_per_level"] <= 12, _per_level(result)
    assert result["d2h_per_level"] <= 1, _per_level(result)


@pytest.mark.xfail(strict=True, reason=(
    "host-orchestrated growth: node tables go to the device every level; after the upload, "
    "8 trees, 300 rows: 57 host-to-device copies, 3.4 per level (8,000 rows: 212, 8.2)"))
def test_no_copy_to_the_device_after_the_upload(batch):
    assert batch["h2d"] == 0


@pytest.mark.xfail(strict=True, reason=(
    "host-orchestrated growth, per level (launches/d2h/h2d/syncs), 300 rows: "
    "1 tree 5.4/1.9/2.1/1.9, 8 trees 7.1/2.7/3.4/2.7 (1,000 rows: 6.9/2.8/3.4/2.8 "
    "and 9.0/4.0/4.9/4.0)"))
def test_the_same_counts_per_level_for_1_and_8_trees(one_tree, batch):
    _assert_same_per_level(one_tree, batch)


@pytest.mark.xfail(strict=True, reason=(
    "host-orchestrated growth, per level (launches/d2h/h2d/syncs), 1 tree: 300 rows "
    "5.4/1.9/2.1/1.9, 1,200 rows 6.6/2.6/3.2/2.6 (1,000 rows 6.9/2.8/3.4/2.8, 8,000 rows "
    "10.8/5.3/6.4/5.3)"))
def test_the_same_counts_per_level_for_4_times_the_rows(one_tree, more_rows):
    _assert_same_per_level(one_tree, more_rows)
