"""``tree_best_slot``: the emulated CUDA kernel and the numba kernel against NumPy.

The reference is the tie tolerance written out (W and S summed over slot 0's bins in
order, as the contract says) and :func:`gpurpo.tree.splitting.best_slot_per_node`.
"""

from __future__ import annotations

import numpy as np
import pytest

from gpurpo.backend import EMULATED, NUMPY
from gpurpo.tree import kernels
from gpurpo.tree.splitting import TIE_ROUNDING, TIE_RTOL, SlotSplits, best_slot_per_node


def _problem(seed, n_nodes=40, k=7, n_bins=9, m=3):
    rng = np.random.default_rng(seed)
    C = m + 1
    hist = rng.integers(0, 4, size=(n_nodes, k, n_bins, C)).astype(np.float32)
    hist[..., 1:] = rng.standard_normal((n_nodes, k, n_bins, m)).astype(np.float32)
    q = rng.uniform(1.0, 50.0, n_nodes)
    # gains on a coarse grid: exact ties, near ties (within the tolerance) and -inf slots
    gain = np.round(rng.uniform(0.0, 3.0, (n_nodes, k)), 1) + rng.choice([0.0, 1e-9], (n_nodes, k))
    gain[rng.random((n_nodes, k)) < 0.2] = -np.inf
    gain[0] = -np.inf  # no valid slot
    slots = SlotSplits(
        gain=gain,
        bin=rng.integers(0, n_bins - 1, (n_nodes, k)).astype(np.int32),
        missing_left=rng.integers(0, 2, (n_nodes, k)).astype(np.uint8),
        nonconstant=np.ones((n_nodes, k), dtype=bool),
    )
    features = np.stack([rng.permutation(20)[:k] for _ in range(n_nodes)]).astype(np.int32)
    order = np.stack([rng.permutation(k) for _ in range(n_nodes)]).astype(np.int64)
    impure = (rng.random(n_nodes) > 0.1).astype(np.uint8)
    return hist, q, impure, slots, features, order, m


def _reference(hist, q, impure, slots, features, order, m, newton):
    if newton:
        tol = TIE_RTOL * q
    else:
        tol = np.empty(len(q))
        for i in range(len(q)):
            w = 0.0
            for b in range(hist.shape[2]):
                w += float(hist[i, 0, b, 0])
            parent = 0.0
            for c in range(1, m + 1):
                s = 0.0
                for b in range(hist.shape[2]):
                    s += float(hist[i, 0, b, c])
                parent += s * s
            parent /= w if w > 0 else 1.0
            tol[i] = TIE_RTOL * max(q[i] - parent, 0.0) + TIE_ROUNDING * q[i]
    f, b, ml, g = best_slot_per_node(np, slots.gain, slots.bin, slots.missing_left, features, tol,
                                     order=order)
    f = np.where(impure > 0, f, -1)
    b = np.where(f >= 0, b, 0)
    ml = np.where(f >= 0, ml, 0)
    g = np.where(f >= 0, g, -np.inf)
    return np.stack([f, b, ml, g], axis=1).astype(np.float64)


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("newton", [False, True])
@pytest.mark.parametrize("ordered", [True, False])
def test_best_slot_kernels_against_numpy(seed, newton, ordered):
    hist, q, impure, slots, features, order, m = _problem(seed)
    if not ordered:
        order = None
    expected = _reference(hist, q, impure, slots, features, order, m, newton)
    for backend in (NUMPY, EMULATED):
        got = kernels.best_slots(backend, hist, q, impure, slots, features, order, m, newton,
                                 TIE_RTOL, TIE_ROUNDING)
        np.testing.assert_array_equal(got, expected, err_msg=backend.name)


def test_ties_are_decided_by_the_visiting_order():
    hist, q, impure, slots, features, order, m = _problem(0, n_nodes=1, k=4)
    impure[:] = 1
    slots.gain[0] = [2.0, 2.0, 1.0, 2.0]
    order[0] = [3, 1, 0, 2]
    for backend in (NUMPY, EMULATED):
        got = kernels.best_slots(backend, hist, q, impure, slots, features, order, m, False,
                                 TIE_RTOL, TIE_ROUNDING)
        assert got[0, 0] == features[0, 1] and got[0, 3] == 2.0
        got = kernels.best_slots(backend, hist, q, impure, slots, features, None, m, False,
                                 TIE_RTOL, TIE_ROUNDING)
        assert got[0, 0] == features[0, 0]


def test_bad_histogram_shape_is_refused():
    hist, q, impure, slots, features, order, m = _problem(0)
    with pytest.raises(ValueError, match=r"hist must have shape \(40, 7, B, C\), got \(39, 7, 9, 4\)"):
        kernels.best_slots(NUMPY, hist[:-1], q, impure, slots, features, order, m, False,
                           TIE_RTOL, TIE_ROUNDING)


def _continuation_reference(hist, q, impure, slots, features, order, m, node_pos, p):
    """scikit-learn's rule for k sampled features, node by node: no non-constant slot,
    continue (-2) while positions remain; past the first k positions, the first
    non-constant slot in visiting order; else the tie rule of the first k."""
    k = slots.gain.shape[1]
    expected = _reference(hist, q, impure, slots, features, order, m, False)
    for i in range(len(q)):
        nonconstant = slots.nonconstant[i].astype(bool)
        if not impure[i]:
            continue
        if not nonconstant.any():
            expected[i] = [-2.0 if node_pos[i] + k < p else -1.0, 0.0, 0.0, -np.inf]
        elif node_pos[i] > 0:
            j = min(np.flatnonzero(nonconstant), key=lambda s: order[i, s])
            g = slots.gain[i, j]
            expected[i] = ([features[i, j], slots.bin[i, j], slots.missing_left[i, j], g]
                           if g > -np.inf else [-1.0, 0.0, 0.0, -np.inf])
    return expected


@pytest.mark.parametrize("seed", range(3))
def test_continuing_nodes_of_sampled_features(seed):
    hist, q, impure, slots, features, order, m = _problem(seed)
    rng = np.random.default_rng(seed + 10)
    n_nodes, k = slots.gain.shape
    slots.nonconstant = rng.random((n_nodes, k)) < 0.5
    slots.nonconstant[: n_nodes // 4] = False  # nodes whose slots are all constant
    slots.gain[~slots.nonconstant] = -np.inf
    p = 20
    node_pos = rng.choice([0, 0, 7, 13, 14], n_nodes).astype(np.int64)
    expected = _continuation_reference(hist, q, impure, slots, features, order, m, node_pos, p)
    assert (expected[:, 0] == -2).any() and (expected[:, 0] >= 0).any()
    for backend in (NUMPY, EMULATED):
        got = kernels.best_slots(backend, hist, q, impure, slots, features, order, m, False,
                                 TIE_RTOL, TIE_ROUNDING, node_pos=node_pos, n_features=p)
        np.testing.assert_array_equal(got, expected, err_msg=backend.name)
