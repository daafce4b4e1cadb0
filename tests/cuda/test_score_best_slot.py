"""``tree_score_best_slot``: the scores of every slot and every node's best slot in one
launch, against the two kernels it joins.

On the emulated CUDA backend the block that scores a node's last slot picks the node's
best; on the CPU the numba kernels run one after the other. Both must give, bit for
bit, what ``tree_score_histograms`` then ``tree_best_slot`` give (which
tests/cuda/test_best_slot.py and the score tests hold to NumPy references), with
exact ties between slots, constant slots, Extra-Trees cuts and nodes continuing past
their first k positions, and must leave the counters at zero for the next launch.
"""

from __future__ import annotations

import numpy as np
import pytest
from _edge_table import ragged

from gpurpo.backend import EMULATED, NUMPY
from gpurpo.tree import kernels
from gpurpo.tree._records import EdgeTable
from gpurpo.tree.splitting import TIE_ROUNDING, TIE_RTOL, SlotSplits

BACKENDS = (NUMPY, EMULATED)


def _problem(seed, n_nodes=30, k=6, n_bins=8, m=3, n_samples=25):
    """Histograms of real samples (unit weights: channel 0 counts them), the node
    statistics of those samples, and the slots' features, positions and uniforms."""
    rng = np.random.default_rng(seed)
    C = m + 1
    hist = np.zeros((n_nodes, k, n_bins, C), dtype=np.float32)
    q = np.empty(n_nodes)
    impure = np.ones(n_nodes, dtype=np.uint8)
    for i in range(n_nodes):
        # few distinct target values: exact ties between slots of the same codes
        y = rng.integers(-2, 3, size=(n_samples, m)).astype(np.float32)
        if i % 7 == 3:
            y[:] = 1.0  # a pure node
            impure[i] = 0
        q[i] = float((y.astype(np.float64) ** 2).sum())
        codes = rng.integers(0, n_bins, size=(k, n_samples))  # bin n_bins - 1: missing
        codes[1] = codes[0]  # slots 0 and 1 tie exactly
        if i % 5 == 0:
            codes[2] = 4  # a constant slot
        if i % 6 == 0:
            codes[:] = 2  # every slot constant
        for j in range(k):
            for s in range(n_samples):
                hist[i, j, codes[j, s], 0] += 1.0
                hist[i, j, codes[j, s], 1:] += y[s]
    features = np.stack([rng.permutation(40)[:k] for _ in range(n_nodes)]).astype(np.int32)
    order = np.stack([rng.permutation(k) for _ in range(n_nodes)]).astype(np.int64)
    node_pos = rng.choice([0, 0, 6, 30, 34], n_nodes).astype(np.int64)
    uniforms = rng.random((n_nodes, k))
    return hist, q, impure, features, order, node_pos, uniforms, m


def _edges(n_features, n_bins):
    # every feature with n_bins - 2 increasing edges (value bins 0 .. n_bins - 2), then
    # the bins' lows (the Extra-Trees draw's scale)
    table = np.cumsum(np.random.default_rng(1).random((n_features, n_bins - 2)), axis=1)
    return EdgeTable(*ragged(table))


def _separate(backend, hist, q, impure, features, order, node_pos, uniforms, m, random_split,
              n_features):
    edges = _edges(n_features, hist.shape[2])
    slots = SlotSplits(*kernels.score_histograms(
        backend, hist, features, m, 2, random_split,
        uniforms if random_split else None, edges))
    slots = SlotSplits(*(np.asarray(backend.to_host(a)) for a in (
        slots.gain, slots.bin, slots.missing_left, slots.nonconstant)))
    return np.asarray(backend.to_host(kernels.best_slots(
        backend, hist, q, impure, slots, features, order, m, False, TIE_RTOL, TIE_ROUNDING,
        node_pos=node_pos, n_features=n_features)))


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("random_split", [False, True], ids=["best", "random"])
@pytest.mark.parametrize("sampled", [False, True], ids=["all positions", "continuing"])
def test_one_launch_picks_what_the_two_kernels_pick(seed, random_split, sampled):
    hist, q, impure, features, order, node_pos, uniforms, m = _problem(seed)
    n_features = 40
    pos = node_pos if sampled else None
    expected = _separate(NUMPY, hist, q, impure, features, order, pos, uniforms, m,
                         random_split, n_features)
    assert (expected[:, 0] >= 0).any() and (expected[:, 0] == -1).any()
    if sampled:
        assert (expected[:, 0] == -2).any()
    for backend in BACKENDS:
        counters = kernels.score_counters(backend, len(q))
        for _ in range(2):  # the counters are left at zero: a second launch reuses them
            got = kernels.score_best_slots(
                backend, hist, features, m, 2, _edges(n_features, hist.shape[2]), q, impure,
                order, TIE_RTOL, TIE_ROUNDING, counters, random_split=random_split,
                uniforms=uniforms if random_split else None, node_pos=pos,
                n_features=n_features)
            np.testing.assert_array_equal(np.asarray(backend.to_host(got)), expected,
                                          err_msg=backend.name)
            assert not np.asarray(backend.to_host(counters)).any()


def test_exact_ties_follow_the_visiting_order():
    hist, q, impure, features, order, _, uniforms, m = _problem(0, n_nodes=4)
    expected = _separate(NUMPY, hist, q, impure, features, order, None, uniforms, m, False, 40)
    # slots 0 and 1 score alike: the one earlier in the visiting order wins
    for i in np.flatnonzero(expected[:, 0] >= 0):
        picked = int(np.flatnonzero(features[i] == expected[i, 0])[0])
        if picked in (0, 1):
            assert order[i, picked] <= order[i, 1 - picked]
    for backend in BACKENDS:
        got = kernels.score_best_slots(
            backend, hist, features, m, 2, _edges(40, hist.shape[2]), q, impure, order,
            TIE_RTOL, TIE_ROUNDING, kernels.score_counters(backend, 4))
        np.testing.assert_array_equal(np.asarray(backend.to_host(got)), expected)


def test_counters_grow_and_bad_inputs_are_named():
    counters = kernels.score_counters(NUMPY, 10)
    assert counters.dtype == np.uint32 and counters.shape[0] >= 10 and not counters.any()
    assert kernels.score_counters(NUMPY, 10, counters) is counters
    more = kernels.score_counters(NUMPY, 5 * counters.shape[0], counters)
    assert more.shape[0] >= 5 * counters.shape[0] and not more.any()
    hist, q, impure, features, order, _, _, m = _problem(0, n_nodes=4)
    with pytest.raises(ValueError, match="node_done must be contiguous uint32 of at least 4"):
        kernels.score_best_slots(NUMPY, hist, features, m, 2, _edges(40, hist.shape[2]), q,
                                 impure, order, TIE_RTOL, TIE_ROUNDING,
                                 np.zeros(3, dtype=np.uint32))
    for bad in (np.zeros(8, dtype=np.int64), np.zeros(16, dtype=np.uint32)[::2]):
        with pytest.raises(ValueError, match="node_done must be contiguous uint32"):
            kernels.score_best_slots(NUMPY, hist, features, m, 2, _edges(40, hist.shape[2]), q,
                                     impure, order, TIE_RTOL, TIE_ROUNDING, bad)
    counters = np.zeros(8, dtype=np.uint32)
    for change, message in (({"q": q[:3]}, r"q must have shape \(4,\)"),
                            ({"impure": impure[:3]}, r"impure must have shape \(4,\)"),
                            ({"order": order[:, :3]}, r"order must have shape \(4, 6\)")):
        args = {"q": q, "impure": impure, "order": order, **change}
        with pytest.raises(ValueError, match=message):
            kernels.score_best_slots(NUMPY, hist, features, m, 2, _edges(40, hist.shape[2]),
                                     args["q"], args["impure"], args["order"], TIE_RTOL,
                                     TIE_ROUNDING, counters)
    with pytest.raises(ValueError, match="node_done must be a contiguous 1-D uint32"):
        kernels.node_stats(NUMPY, np.zeros(4, np.int32), np.zeros((1, 2), np.int64),
                           np.zeros(1, np.int32), np.ones((1, 4), np.float32),
                           np.zeros((4, 1, 2), np.float32), node_done=np.zeros(4, np.int32))
