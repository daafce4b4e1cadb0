"""Bootstrap draw counts counted on CUDA backends: the counts of the host.

A forest's trees draw their rows on the host; on CUDA backends the draws of a
batch are counted on the device (one ``bincount``) instead of on the host. The
counts, and so the trees and the out-of-bag scores, are those of the CPU.
"""

from __future__ import annotations

import shutil

import numpy as np
import pytest

from gpurpo.backend import EMULATED, NUMPY, count_device_activity
from gpurpo.ensemble import RandomForestRegressor
from gpurpo.ensemble.forest.batches import bootstrap_indices
from gpurpo.ensemble.forest.warm_start import Sampling, draw_counts, draw_counts_on

pytestmark = pytest.mark.skipif(
    shutil.which("g++") is None, reason="the CUDA emulator needs g++ (C++20) on PATH"
)


@pytest.mark.parametrize("n_draws, weighted", [(500, False), (120, False), (500, True)])
def test_counts_on_the_device_are_the_host_counts(n_draws, weighted):
    n = 500
    rng = np.random.default_rng(0)
    draw_p = rng.random(n) if weighted else None
    if weighted:
        draw_p[:40] = 0.0
        draw_p /= draw_p.sum()
    sampling = Sampling(0, 4, n, n_draws, draw_p, True)
    seeds = rng.integers(0, 2**31, size=4)
    want = draw_counts(sampling, seeds)
    # the reference: each tree's draws, counted
    for t, seed in enumerate(seeds):
        np.testing.assert_array_equal(
            want[t], np.bincount(bootstrap_indices(seed, n, n_draws, draw_p), minlength=n))
    with count_device_activity() as activity:
        got = draw_counts_on(sampling, seeds, EMULATED)
    assert activity.h2d == 1 and activity.h2d_bytes == 4 * 4 * n_draws  # int32 draws
    assert got.dtype == np.float32 and got.shape == (4, n)
    np.testing.assert_array_equal(np.asarray(EMULATED.to_host(got)), want)
    np.testing.assert_array_equal(draw_counts_on(sampling, seeds, NUMPY), want)
    if weighted:
        assert not want[:, :40].any()


def test_without_bootstrap_every_row_counts_once():
    sampling = Sampling(0, 2, 30, 30, None, False)
    for backend in (NUMPY, EMULATED):
        got = np.asarray(backend.to_host(draw_counts_on(sampling, np.array([3, 4]), backend)))
        np.testing.assert_array_equal(got, np.ones((2, 30)))


def test_forest_with_out_of_bag_score_on_emulated_cuda_equals_cpu():
    rng = np.random.default_rng(1)
    X = rng.normal(size=(300, 6))
    Y = X[:, :3] @ rng.normal(size=(3, 4)) + 0.1 * rng.normal(size=(300, 4))
    got = {}
    for device in ("cpu", "cuda-emulated"):
        forest = RandomForestRegressor(n_estimators=12, oob_score=True, max_features=0.5,
                                       random_state=0, device=device).fit(X, Y)
        got[device] = (forest.predict(X), forest.oob_score_, forest.oob_prediction_)
    np.testing.assert_allclose(got["cuda-emulated"][0], got["cpu"][0], rtol=1e-12, atol=1e-12)
    assert got["cuda-emulated"][1] == pytest.approx(got["cpu"][1], rel=1e-12)
    np.testing.assert_allclose(got["cuda-emulated"][2], got["cpu"][2], rtol=1e-12, atol=1e-12)
    assert 0.5 < got["cpu"][1] < 1.0
