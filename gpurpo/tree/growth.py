"""The entry points of tree growth, on the host or on the device.

Lower-level API used by the tree estimators, the forests and boosting
------------------------------------------------------------------------

``grow_trees(binned, targets, weights, params, rng, backend, root_seeds=None) -> GrowResult``
    Grows ``T`` trees TOGETHER, level by level (Joly et al. 2014, section
    3.1; the node-batched growth of GPU tree learners): at every level all
    frontier nodes of all trees are evaluated in one batch. ``targets`` is a
    float32 array (n, T, m) holding each tree's own projected outputs (one
    batched product ``Y @ Phi^T`` gives all of them), ``weights`` a float32
    array (T, n) of sample weights / bootstrap counts (``None``: all ones);
    samples with weight 0 are not in the tree. ``binned`` comes from
    :meth:`gpurpo.tree.binning.BinMapper.transform`. A forest calls it once
    per batch of trees.

``grow_tree_best_first(binned, targets, weights, params, rng, backend, root_seeds=None) -> GrowResult``
    Best-first growth (the leaf with the largest gain is split next) until
    ``params.max_leaf_nodes`` leaves, for each of the T trees (boosting
    passes T = 1 and its gradients as targets, shape (n, 1, m)).

``GrowResult``
    ``structures``: one :class:`~gpurpo.tree.predictor.TreeStructure` per
    tree (host arrays: children, features, real thresholds, missing
    directions, leaf indices, sample counts, gains); ``leaf_of_sample``:
    int32 (T, n) on the backend, the leaf (index into the tree's leaves,
    numbered 0..n_leaves-1 in node order) of every training sample, -1 where
    its weight is 0. Label the leaves in the original output space with
    :func:`gpurpo.tree.leaves.leaf_values`.

On the CPU both grow on the host-orchestrated drivers of
:mod:`gpurpo.tree.grower`; on CUDA backends, trees of the variance criterion
on dense codes grow with their state on the device
(:mod:`gpurpo.tree.device_grower`, :mod:`gpurpo.tree.device_best_first`),
the same trees.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from gpurpo.backend import Backend
from gpurpo.tree._params import GrowthParams
from gpurpo.tree.binning import BinnedMatrix
from gpurpo.tree.device_best_first import device_best_first_supported, grow_best_first_on_device
from gpurpo.tree.device_grower import device_growth_supported, grow_trees_on_device
from gpurpo.tree.grower import GrowResult, HostGrower, check_binned, run_best_first, run_level_wise

__all__ = ["grow_tree_best_first", "grow_trees"]


def grow_trees(
    binned: BinnedMatrix,
    targets: Any,
    weights: Any,
    params: GrowthParams,
    rng: np.random.Generator,
    backend: Backend,
    root_seeds: Any = None,
) -> GrowResult:
    """Grow T trees together, level by level (see the module docstring).

    On CUDA backends, level-wise trees of the variance criterion grow with
    their state on the device
    (:func:`gpurpo.tree.device_grower.grow_trees_on_device`; the same trees).

    Parameters
    ----------
    binned : BinnedMatrix
        Binned inputs of the n training samples.
    targets : float32 array (n, T, m)
        Each tree's (projected) outputs.
    weights : float32 array (T, n) or None
        Sample weights / bootstrap counts per tree (None: ones).
    params : GrowthParams
    rng : numpy.random.Generator
        Draws one seed per tree (host side); node seeds derive from it.
    backend : Backend
    root_seeds : uint64 array (T,), optional
        The trees' root seeds, instead of drawing them from ``rng``
        (:func:`draw_root_seeds`).

    Returns
    -------
    GrowResult
    """
    check_binned(binned)
    if backend.uses_cuda_kernels and device_growth_supported(binned, params):
        return grow_trees_on_device(binned, targets, weights, params, rng, backend, root_seeds)
    return run_level_wise(HostGrower(_host_codes(binned, backend), targets, weights, params, rng,
                                     backend, root_seeds))


def grow_tree_best_first(
    binned: BinnedMatrix,
    targets: Any,
    weights: Any,
    params: GrowthParams,
    rng: np.random.Generator,
    backend: Backend,
    root_seeds: Any = None,
) -> GrowResult:
    """Grow T trees best-first up to ``params.max_leaf_nodes`` leaves each.

    The leaf whose best split has the largest gain (ties: the older node) is
    split next, as scikit-learn's best-first builder does; ``max_depth`` and
    the other stopping rules apply as in :func:`grow_trees`. On CUDA backends,
    trees of the variance criterion grow with their state on the device
    (:func:`gpurpo.tree.device_best_first.grow_best_first_on_device`; the
    same trees).

    Parameters
    ----------
    binned : BinnedMatrix
        Binned inputs of the n training samples
        (:meth:`gpurpo.tree.binning.BinMapper.transform`).
    targets : float32 array (n, T, m)
        Each tree's (projected) outputs, on ``backend``; boosting passes
        T = 1 and its gradients.
    weights : float32 array (T, n) or None
        Sample weights / bootstrap counts per tree (None: ones); a weight of
        0 leaves the sample out of the tree.
    params : GrowthParams
        Stopping rules and split options; ``max_leaf_nodes`` must be set.
    rng : numpy.random.Generator
        Draws one seed per tree (host side); node seeds derive from it.
    backend : Backend
    root_seeds : uint64 array (T,), optional
        The trees' root seeds, instead of drawing them from ``rng``
        (:func:`draw_root_seeds`).

    Returns
    -------
    GrowResult
        The T tree structures (at most ``max_leaf_nodes`` leaves each) and
        ``leaf_of_sample``, int32 (T, n) on ``backend`` (-1 where the weight
        is 0).

    Raises
    ------
    ValueError
        If ``params.max_leaf_nodes`` is None.
    TypeError
        If ``binned`` is not a BinnedMatrix.
    """
    check_binned(binned)
    if params.max_leaf_nodes is None:
        raise ValueError("grow_tree_best_first needs params.max_leaf_nodes, got None")
    if backend.uses_cuda_kernels and device_best_first_supported(binned, params):
        return grow_best_first_on_device(binned, targets, weights, params, rng, backend,
                                         root_seeds)
    return run_best_first(HostGrower(_host_codes(binned, backend), targets, weights, params, rng,
                                     backend, root_seeds))


def _host_codes(binned: BinnedMatrix, backend: Backend) -> BinnedMatrix:
    """``binned`` for the host-orchestrated grower: on CUDA backends with its dense codes
    (:attr:`~gpurpo.tree.binning.BinnedMatrix.codes` builds them from a sparse X's
    stored entries, within ``max_binned_bytes``), which its CUDA kernels read; the
    CPU kernels read the stored entries themselves."""
    if backend.uses_cuda_kernels and binned.dense_codes is None:
        binned.codes  # builds and keeps them
    return binned
