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
taken on binned data between the smallest fitted values of the smallest and
the largest occupied bin; the split is "code <= cut" for the largest bin
whose smallest value is at most the drawn real value
(:func:`gpurpo.tree.binning._edge_lookup._random_cut`), so each gap between a
node's neighbouring values is cut with probability proportional to its width.

Second-order gain (``newton=True``; boosting's ``split_criterion="newton"``):
XGBoost's vector-leaf gain (Chen & Guestrin 2016, eq. 7, without the factor
1/2), ``sum_j G_Lj^2 / (H_Lj + lambda) + G_Rj^2 / (H_Rj + lambda) - G_j^2 /
(H_j + lambda)``, read from histograms whose channels hold the gradient sums
``G_j`` followed by the hessian sums ``H_j``; an output counts on a side only
where that side's ``H_j >= min_child_weight``.

The per-slot scores are one kernel, ``tree_score_histograms`` (see
:mod:`gpurpo.tree.kernels`), computed in float64 from the float32
histograms; the reduction across slots is ``xp`` code (NumPy or CuPy).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gpurpo.backend import Backend
from gpurpo.tree import kernels

#: Gains also tie within ``TIE_ROUNDING * sum(w ||y||^2)``, the rounding of gains formed
#: from sums of that size: one constant for the exact kernels and the histogram path.
from gpurpo.tree._numba._node_split import TIE_ROUNDING
from gpurpo.tree._records import EdgeTable

__all__ = ["SlotSplits", "score_histograms", "best_slot_per_node", "TIE_RTOL", "TIE_ROUNDING"]

#: Gains of different features within ``TIE_RTOL`` of the node's impurity
#: (``sum w ||y - mean||^2``) of the best tie; the first feature in the node's random
#: visiting order wins, so equal-gain splits are chosen uniformly at random.
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


def score_histograms(
    backend: Backend,
    hist: Any,
    node_features: Any,
    n_outputs: int,
    min_samples_leaf: int,
    edges: EdgeTable,
    random_split: bool = False,
    uniforms: Any = None,
    newton: bool = False,
    reg_lambda: float = 1.0,
    min_child_weight: float = 0.0,
) -> SlotSplits:
    """Best split of each (node, feature slot) from histograms.

    Runs the ``tree_score_histograms`` kernel (numba on the CPU, CUDA on
    the GPU): one fused pass per slot over its bins, in float64.

    Parameters
    ----------
    backend : Backend
        Where ``hist`` lives.
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
    edges : EdgeTable
        The ragged table of the features' raw upper bin edges, followed by the
        bins' smallest fitted values (:attr:`~gpurpo.tree.binning.BinnedMatrix.edge_values`):
        Extra-Trees cuts.
    random_split : bool
        Extra-Trees mode; needs ``uniforms`` (N, k) in [0, 1).
    newton : bool
        Second-order gain (Chen & Guestrin 2016, eq. 7): channels 1..m/2
        are gradient sums, m/2+1..m the matching hessian sums.
    reg_lambda, min_child_weight : float
        ``lambda`` of the second-order gain; outputs whose hessian sum on a
        side is below ``min_child_weight`` do not count on that side.

    Returns
    -------
    SlotSplits
    """
    gain, best_bin, missing_left, nonconstant = kernels.score_histograms(
        backend, hist, node_features, n_outputs, min_samples_leaf, random_split, uniforms,
        edges, newton, reg_lambda, min_child_weight,
    )
    return SlotSplits(
        gain=gain, bin=best_bin, missing_left=missing_left, nonconstant=nonconstant.view(bool)
    )


def best_slot_per_node(
    xp: Any, gain: Any, bins: Any, missing_left: Any, node_features: Any, tie_tol: Any,
    order: Any = None,
) -> tuple[Any, ...]:
    """Reduce (N, K) per-slot best splits to the best split per node.

    The largest gain wins; slots whose gain is within ``tie_tol`` (N,) of the
    largest tie with it, and the first of them in the node's visiting order of
    features wins (the rule of ``tree_split_small``, see
    :mod:`gpurpo.tree.kernels`): the slot of smallest ``order`` (N, K), each
    slot's position in that order, or the first slot when ``order`` is None
    (slots already in visiting order).

    Returns
    -------
    feature : int32 (N,), -1 when no slot has a valid split
    bin : int32 (N,)
    missing_left : uint8 (N,)
    gain : float64 (N,), ``-inf`` without a valid split
    """
    gmax = gain.max(axis=1)
    eligible = (gain >= (gmax - tie_tol)[:, None]) & (gain > -xp.inf)
    if order is None:
        slot = xp.argmax(eligible, axis=1)
    else:
        slot = xp.argmin(xp.where(eligible, order, xp.iinfo(xp.int64).max), axis=1)
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
