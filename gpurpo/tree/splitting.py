"""Split scores from histograms, vectorised over all nodes of a batch.

Joly, Geurts & Wehenkel (2014), eq. 1-2: a node is split to maximise the
reduction of the summed variance of the (projected) outputs,

    W Var(S) - W_L Var(S_L) - W_R Var(S_R)
        = ||S_L||^2 / W_L + ||S_R||^2 / W_R - ||S||^2 / W,

with ``W`` the weighted count and ``S`` the vector of weighted sums of the m
outputs of a node; this "gain" needs only the counts and sums of a
histogram. For each (node, feature slot) the candidate splits are
"code <= b" for the occupied value bins b, with missing values sent to the
side that scores best (see ``tree_split_small`` in
:mod:`gpurpo.tree.kernels` for the exact rules, shared by both paths).

Extra-Trees (Geurts, Ernst & Wehenkel 2006): one cut per (node, feature),
drawn uniformly between the node's smallest and largest value of the feature,
taken on binned data between the upper edge of the smallest occupied bin and
the upper edge of the bin below the largest occupied bin; the split is
"code <= cut" for the largest bin whose upper edge is below the drawn real
value, so every threshold lies within the node's range of values.

Everything here is ``xp`` code (NumPy or CuPy), computed in float64 from the
float32 histograms.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["SlotSplits", "score_histograms", "best_slot_per_node", "TIE_RTOL"]

#: Gains of different features within ``TIE_RTOL * sum(w ||y||^2)`` of the best
#: tie; the lowest feature index wins (well above float32 histogram rounding).
TIE_RTOL = 1e-5


@dataclass
class SlotSplits:
    """Best split of every (node, slot); arrays of shape (N, k).

    gain : float64, ``-inf`` when the slot has no valid split
    bin : int32, split "code <= bin"
    missing_left : uint8
    nonconstant : bool, the feature takes at least two codes in the node
    """

    gain: Any
    bin: Any
    missing_left: Any
    nonconstant: Any


def _sq_norm(xp: Any, a: Any, m: int) -> Any:
    out = a[..., 1] * a[..., 1]
    for c in range(2, m + 1):
        out = out + a[..., c] * a[..., c]
    return out


def _gain(xp: Any, left: Any, total: Any, m: int, parent: Any) -> Any:
    right = total - left
    wl = left[..., 0]
    wr = right[..., 0]
    safe_l = xp.where(wl > 0, wl, 1.0)
    safe_r = xp.where(wr > 0, wr, 1.0)
    return _sq_norm(xp, left, m) / safe_l + _sq_norm(xp, right, m) / safe_r - parent


def score_histograms(
    xp: Any,
    hist: Any,
    node_features: Any,
    n_outputs: int,
    min_samples_leaf: int,
    random_split: bool = False,
    uniforms: Any = None,
    thresholds: Any = None,
) -> SlotSplits:
    """Best split of each (node, feature slot) from histograms.

    Parameters
    ----------
    xp : module
        ``numpy`` or ``cupy``.
    hist : float32 array (N, k, B, C)
        Histograms (see :mod:`gpurpo.tree.histogram`); bin ``B - 1`` holds
        missing values; channel ``C - 1`` is the sample count when
        ``C == n_outputs + 2``, else channel 0 (unit weights) is.
    node_features : int array (N, k)
        Feature of each slot, ``-1`` for unused slots.
    n_outputs : int
        m.
    min_samples_leaf : int
        Minimum number of samples on each side.
    random_split : bool
        Extra-Trees mode; needs ``uniforms`` (N, k) in [0, 1) and the
        ``thresholds`` table (p, B - 1).

    Returns
    -------
    SlotSplits
    """
    m = int(n_outputs)
    n_nodes, k, n_bins, channels = hist.shape
    cnt = channels - 1 if channels == m + 2 else 0
    h = hist.astype(xp.float64)
    values = h[:, :, : n_bins - 1, :]
    miss = h[:, :, n_bins - 1, :]
    cum = xp.cumsum(values, axis=2)
    total = cum[:, :, -1, :] + miss
    n_total = total[..., cnt]
    n_miss = miss[..., cnt]
    has_miss = n_miss > 0
    occupied = values[..., cnt] > 0
    any_value = occupied.any(axis=2)
    n_value_bins = n_bins - 1
    bmin = xp.argmax(occupied, axis=2)
    bmax = (n_value_bins - 1) - xp.argmax(occupied[:, :, ::-1], axis=2)
    n_occupied = occupied.sum(axis=2) + has_miss
    valid_slot = node_features >= 0
    nonconstant = (n_occupied >= 2) & valid_slot
    w_total = total[..., 0]
    parent = _sq_norm(xp, total, m) / xp.where(w_total > 0, w_total, 1.0)
    neg_inf = -xp.inf

    if not random_split:
        total_b = total[:, :, None, :]
        n_left = cum[..., cnt]
        bins = xp.arange(n_value_bins)[None, None, :]
        below_max = bins < bmax[:, :, None]
        ok_right = (
            occupied
            & (below_max | has_miss[:, :, None])
            & (n_left >= min_samples_leaf)
            & (n_total[:, :, None] - n_left >= min_samples_leaf)
        )
        gain_right = xp.where(ok_right, _gain(xp, cum, total_b, m, parent[:, :, None]), neg_inf)
        left_m = cum + miss[:, :, None, :]
        n_left_m = n_left + n_miss[:, :, None]
        ok_left = (
            occupied
            & has_miss[:, :, None]
            & below_max
            & (n_left_m >= min_samples_leaf)
            & (n_total[:, :, None] - n_left_m >= min_samples_leaf)
        )
        gain_left = xp.where(ok_left, _gain(xp, left_m, total_b, m, parent[:, :, None]), neg_inf)
        both = xp.stack([gain_right, gain_left], axis=3).reshape(n_nodes, k, 2 * n_value_bins)
        flat = xp.argmax(both, axis=2)
        gain = xp.take_along_axis(both, flat[:, :, None], axis=2)[:, :, 0]
        best_bin = flat // 2
        direction = flat % 2
        w_left = xp.take_along_axis(cum[..., 0], best_bin[:, :, None], axis=2)[:, :, 0]
    else:
        p_feat = xp.where(valid_slot, node_features, 0)
        thr = thresholds[p_feat]
        lo = xp.take_along_axis(thr, bmin[:, :, None], axis=2)[:, :, 0]
        hi_idx = xp.maximum(bmax - 1, 0)
        hi = xp.take_along_axis(thr, hi_idx[:, :, None], axis=2)[:, :, 0]
        lo = xp.where(bmax > bmin, lo, 0.0)
        hi = xp.where(bmax > bmin, hi, 0.0)
        cut_value = lo + uniforms * (hi - lo)
        bins = xp.arange(n_value_bins)[None, None, :]
        steps = (
            (bins > bmin[:, :, None])
            & (bins <= (bmax - 1)[:, :, None])
            & (thr <= cut_value[:, :, None])
        ).sum(axis=2)
        best_bin = xp.where(bmax > bmin, bmin + steps, bmax)
        left = xp.take_along_axis(cum, best_bin[:, :, None, None], axis=2)[:, :, 0, :]
        n_left = left[..., cnt]
        below_max = best_bin < bmax
        ok_right = (
            (below_max | has_miss)
            & (n_left >= min_samples_leaf)
            & (n_total - n_left >= min_samples_leaf)
        )
        gain_right = xp.where(ok_right, _gain(xp, left, total, m, parent), neg_inf)
        left_m = left + miss
        n_left_m = n_left + n_miss
        ok_left = (
            has_miss
            & below_max
            & (n_left_m >= min_samples_leaf)
            & (n_total - n_left_m >= min_samples_leaf)
        )
        gain_left = xp.where(ok_left, _gain(xp, left_m, total, m, parent), neg_inf)
        direction = (gain_left > gain_right).astype(xp.int64)
        gain = xp.maximum(gain_right, gain_left)
        w_left = left[..., 0]

    usable = nonconstant & any_value
    gain = xp.where(usable, gain, neg_inf)
    no_miss_left = (w_left >= w_total - w_left).astype(xp.uint8)
    missing_left = xp.where(has_miss, direction.astype(xp.uint8), no_miss_left)
    return SlotSplits(
        gain=gain,
        bin=best_bin.astype(xp.int32),
        missing_left=missing_left.astype(xp.uint8),
        nonconstant=nonconstant,
    )


def best_slot_per_node(
    xp: Any, gain: Any, bins: Any, missing_left: Any, node_features: Any, tie_tol: Any
) -> tuple[Any, ...]:
    """Reduce (N, K) per-slot best splits to the best split per node.

    The largest gain wins; slots whose gain is within ``tie_tol`` (N,) of the
    largest tie with it and the lowest feature index among them wins (the
    rule of ``tree_split_small``, see :mod:`gpurpo.tree.kernels`).

    Returns
    -------
    feature : int32 (N,), -1 when no slot has a valid split
    bin : int32 (N,)
    missing_left : uint8 (N,)
    gain : float64 (N,), ``-inf`` without a valid split
    """
    gmax = gain.max(axis=1)
    big = xp.iinfo(xp.int32).max
    eligible = (gain >= (gmax - tie_tol)[:, None]) & (gain > -xp.inf)
    key = xp.where(eligible, node_features, big)
    slot = xp.argmin(key, axis=1)
    found = gmax > -xp.inf
    pick = slot[:, None]
    feature = xp.where(found, xp.take_along_axis(node_features, pick, axis=1)[:, 0], -1)
    best_bin = xp.take_along_axis(bins, pick, axis=1)[:, 0]
    best_ml = xp.take_along_axis(missing_left, pick, axis=1)[:, 0]
    best_gain = xp.where(found, xp.take_along_axis(gain, pick, axis=1)[:, 0], -xp.inf)
    return (
        feature.astype(xp.int32),
        best_bin.astype(xp.int32),
        best_ml.astype(xp.uint8),
        best_gain,
    )
