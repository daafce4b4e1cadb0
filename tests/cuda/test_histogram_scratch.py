"""The histogram launches of one growth share their scales and sums.

A growth reads its weights and targets once for the maxima of the fixed-point
scales (:class:`gpurpo.tree._histogram_scratch.HistogramScratch`) instead of at
every launch, and nodes split into sample chunks add their cells into integer
sums that the last chunk of each tile leaves at zero, so the same sums serve
the next launch without zeroing. Checked on the emulated backend against the
fixed-point reference and the launches without a scratch, for every plan that
sums in global memory, launch after launch on one scratch.
"""

from __future__ import annotations

import shutil

import numpy as np
import pytest
from _split_records import histogram_records
from test_tree_cuda_kernels import _batch, _fixed_point_reference

from gpurpo.backend import EMULATED, count_device_activity
from gpurpo.tree import _kernels_cuda as kcuda
from gpurpo.tree import kernels

pytestmark = pytest.mark.skipif(
    shutil.which("g++") is None, reason="the CUDA emulator needs g++ (C++20) on PATH"
)

CELL = kcuda.HIST_CELL_BYTES
#: plans that sum in global memory (17 bins, 6 channels): chunks of whole nodes, of slot
#: tiles and of channel tiles in shared memory, or global atomics
_SUMMED = {
    "chunked": {"samples_per_block": 16},
    "chunked slot tiles": {"samples_per_block": 16,
                           "shared_mem_bytes": 2 * (CELL * 17 * 6 + 4) + 8 * 6 + 4},
    "chunked channel tiles": {"samples_per_block": 16,
                              "shared_mem_bytes": 2 * (CELL * 17 + 8) + 8},
    "global": {"shared_mem_bytes": CELL * 17},
}


def _launch(batch, n_bins, channels, **kwargs):
    codes, *rest = batch
    out = np.full((rest[2].shape[0], rest[2].shape[1], n_bins, channels), np.nan, np.float32)
    kcuda.histograms(EMULATED, *histogram_records(codes, *rest), out, **kwargs)
    return out


@pytest.mark.parametrize("plan", list(_SUMMED))
def test_launches_on_one_scratch_equal_those_without(plan):
    rng = np.random.default_rng(5)
    sizes, k = (0, 5, 150, 200, 3, 40), 3
    first = _batch(rng, sizes=sizes, k=k)
    # another batch of nodes on the same weights and targets
    second = _batch(np.random.default_rng(6), sizes=sizes, k=k)[:5] + first[5:]
    n_bins, channels = 17, 6
    weights, targets = first[5], first[6]
    launch_plan = kcuda.histogram_launch_plan(EMULATED.device_attributes(), len(sizes), k,
                                              n_bins, channels, sum(sizes), **_SUMMED[plan])
    assert launch_plan["variant"] == "global" or launch_plan["chunks"] > 1, launch_plan
    scratch = kernels.histogram_scratch(EMULATED, weights, targets, 0, k, n_bins, channels)
    for batch in (first, second, first):
        got = _launch(batch, n_bins, channels, scratch=scratch, **_SUMMED[plan])
        want = _launch(batch, n_bins, channels, **_SUMMED[plan])
        np.testing.assert_array_equal(got, want)
        np.testing.assert_array_equal(
            got, _fixed_point_reference(*batch, n_bins, channels).astype(np.float32))
        acc, done = scratch.sums(0, 0)
        assert acc.size > 0 and done.size > 0
        assert not np.asarray(acc).any() and not np.asarray(done).any()


def test_a_scratch_made_for_the_roots_needs_no_more_launches():
    rng = np.random.default_rng(8)
    codes, sample_indices, node_ranges, node_features, node_tree, weights, targets = _batch(
        rng, sizes=(0, 5, 200, 150, 3, 40), k=5)
    # as many nodes as trees (3), as the roots are
    nodes = slice(2, 5)
    batch = (codes, sample_indices, node_ranges[nodes], node_features[nodes], node_tree[nodes],
             weights, targets)
    n_bins, channels = 17, 6
    plan = {"samples_per_block": 16}
    with count_device_activity() as making:
        scratch = kernels.histogram_scratch(EMULATED, weights, targets, 5000, 5, n_bins,
                                            channels)
    assert making.launches == 1  # the maxima, and the roots' sums zeroed by that launch
    with count_device_activity() as with_scratch:
        got = _launch(batch, n_bins, channels, scratch=scratch, **plan)
    with count_device_activity() as without:
        want = _launch(batch, n_bins, channels, **plan)
    np.testing.assert_array_equal(got, want)
    # the sums of 3 nodes were zeroed with the maxima: only the histograms' launch
    assert (with_scratch.launches, without.launches) == (1, 2)


def test_a_scratch_grows_its_sums_in_one_zeroing_launch():
    rng = np.random.default_rng(9)
    batch = _batch(rng)
    n_bins, channels = 17, 6
    scratch = kernels.histogram_scratch(EMULATED, batch[5], batch[6], 0, 5, n_bins, channels)
    with count_device_activity() as first:
        _launch(batch, n_bins, channels, scratch=scratch, samples_per_block=16)
    with count_device_activity() as again:
        _launch(batch, n_bins, channels, scratch=scratch, samples_per_block=16)
    assert (first.launches, again.launches) == (2, 1)


def test_a_scratch_takes_the_shapes_it_was_made_for():
    rng = np.random.default_rng(10)
    batch = _batch(rng)
    scratch = kernels.histogram_scratch(EMULATED, batch[5], batch[6], 0, 5, 17, 6)
    other = batch[:6] + (np.concatenate([batch[6], batch[6]], axis=2),)
    with pytest.raises(ValueError, match="histogram scratch"):
        _launch(other, 17, 10, scratch=scratch)


def test_no_scratch_on_the_cpu():
    from gpurpo.backend import NUMPY

    rng = np.random.default_rng(11)
    batch = _batch(rng)
    assert kernels.histogram_scratch(NUMPY, batch[5], batch[6], 5000, 5, 17, 6) is None
