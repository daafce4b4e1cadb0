"""Device activity of the CUDA tree growth, measured on the emulated backend.

The counters of :func:`gpurpo.backend.count_device_activity` taken over a
batch of forest trees (:func:`forest_batch_activity`), a batch of best-first
trees (:func:`best_first_batch_activity`) and one boosting round
(:func:`boosting_round_activity`), and divided by the depth of the deepest
tree: the figures by which the GPU orchestration is judged without a GPU
(launches, copies and synchronisations per tree level).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from gpurpo.backend import EMULATED, count_device_activity

__all__ = ["COUNTERS", "best_first_batch_activity", "boosting_round_activity", "by_level",
           "forest_batch_activity", "per_level"]

COUNTERS = ("launches", "d2h", "h2d", "syncs", "d2h_bytes", "h2d_bytes")


def _data(n: int, p: int, m: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Gaussian X (n, p) and m targets, each a noisy function of a few features."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, p)).astype(np.float32)
    Y = np.tanh(X[:, :m] + X[:, m : 2 * m] * X[:, :m]) + 0.3 * rng.standard_normal((n, m))
    return X, Y.astype(np.float32)


def per_level(activity: Any, depth: int) -> dict[str, Any]:
    """The counters of ``activity`` in total and divided by ``depth`` (at least 1).

    Parameters
    ----------
    activity : DeviceActivity
        Counters of a growth.
    depth : int
        Depth of the deepest tree grown (root at depth 0).

    Returns
    -------
    dict
        ``depth``, every counter under its name, and ``<counter>_per_level``.
    """
    totals = activity.as_dict()
    out: dict[str, Any] = {"depth": int(depth), **totals}
    for name, value in totals.items():
        out[f"{name}_per_level"] = value / max(int(depth), 1)
    return out


def forest_batch_activity(
    n: int, n_trees: int, p: int = 20, m: int = 4, n_candidates: int = 5, seed: int = 0,
    backend: Any = EMULATED,
) -> dict[str, Any]:
    """Counters of growing one batch of fully grown forest trees on the emulated backend.

    The data (binned codes, projected targets, bootstrap weights, the trees'
    root seeds) are uploaded first; the counters cover the growth only
    (:func:`gpurpo.tree.device_grower.grow_trees_on_device`, the CUDA path of
    :func:`gpurpo.tree.grow_trees`), with the CUDA defaults (small-node and
    subtree sizes), in total and level by level.

    Parameters
    ----------
    n, p, m : int
        Samples, features and projected outputs.
    n_trees : int
        Trees grown together.
    n_candidates : int
        Features drawn per node (``max_features``), fewer than ``p``.
    seed : int
        Seed of the data, the weights and the growth.
    backend : Backend
        A CUDA backend: the emulated one, or CuPy's on a GPU (whose counters
        do not see CuPy's operators).

    Returns
    -------
    dict
        :func:`per_level` and :func:`by_level` of the growth, with ``n``,
        ``trees`` and the counters of the upload under ``upload_<counter>``.
    """
    from gpurpo.tree import GrowthParams
    from gpurpo.tree.binning import BinMapper
    from gpurpo.tree.device_grower import grow_trees_on_device
    from gpurpo.tree.grower import default_small_node_size, default_subtree_size, draw_root_seeds

    X, Y = _data(n, p, m, seed)
    rng = np.random.default_rng(seed)
    weights = rng.poisson(1.0, size=(n_trees, n)).astype(np.float32)
    targets = np.repeat(Y[:, None, :], n_trees, axis=1)
    params = GrowthParams(
        n_candidates=n_candidates,
        small_node_size=default_small_node_size(backend),
        subtree_size=default_subtree_size(backend, p),
    )
    mapper = BinMapper().fit(X)
    with count_device_activity() as upload:
        binned = mapper.transform(X, backend)
        targets_dev = backend.asarray(targets)
        weights_dev = backend.asarray(weights)
        seeds_dev = backend.asarray(draw_root_seeds(np.random.default_rng(seed + 1), n_trees))
        levels: list = []
        with count_device_activity() as growth:
            result = grow_trees_on_device(binned, targets_dev, weights_dev, params, None,
                                          backend, root_seeds=seeds_dev, level_activity=levels)
    depth = max(s.max_depth for s in result.structures)
    upload_only = {k: getattr(upload, k) - getattr(growth, k) for k in COUNTERS}
    return {"n": n, "trees": n_trees, **per_level(growth, depth), **by_level(levels),
            **{f"upload_{k}": v for k, v in upload_only.items()}}


def best_first_batch_activity(
    n: int, n_trees: int = 1, p: int = 20, m: int = 4, max_leaf_nodes: int = 31,
    n_candidates: int | None = None, seed: int = 0, backend: Any = EMULATED,
    max_depth: int | None = None,
) -> dict[str, Any]:
    """Counters of growing a batch of best-first trees (boosting's) on the emulated backend.

    As :func:`forest_batch_activity`, for
    :func:`gpurpo.tree.device_best_first.grow_best_first_on_device` (the CUDA
    path of :func:`gpurpo.tree.grow_tree_best_first`) with unit weights, as a
    boosting round without subsampling grows its tree; its steps (the
    evaluation of a frontier, or a round of selection, split and children)
    take the place of levels in :func:`by_level`.

    Parameters
    ----------
    n, p, m : int
        Samples, features and outputs (projections or gradients).
    n_trees : int
        Trees grown together.
    max_leaf_nodes : int
        The trees' leaf budget.
    n_candidates : int or None
        Features drawn per node (None: all, with histogram subtraction).
    seed : int
        Seed of the data and of the growth.
    backend : Backend
        A CUDA backend.
    max_depth : int or None
        The trees' depth limit.

    Returns
    -------
    dict
        :func:`per_level` and :func:`by_level` of the growth, with ``n``,
        ``trees`` and ``n_leaves`` (of every tree).
    """
    from gpurpo.tree import GrowthParams
    from gpurpo.tree.binning import BinMapper
    from gpurpo.tree.device_best_first import grow_best_first_on_device
    from gpurpo.tree.grower import draw_root_seeds

    X, Y = _data(n, p, m, seed)
    targets = np.repeat(Y[:, None, :], n_trees, axis=1)
    params = GrowthParams(max_leaf_nodes=max_leaf_nodes, n_candidates=n_candidates,
                          max_depth=max_depth)
    mapper = BinMapper().fit(X)
    with count_device_activity():
        binned = mapper.transform(X, backend)
        targets_dev = backend.asarray(targets)
        seeds_dev = backend.asarray(draw_root_seeds(np.random.default_rng(seed + 1), n_trees))
        steps: list = []
        with count_device_activity() as growth:
            result = grow_best_first_on_device(binned, targets_dev, None, params, None, backend,
                                               root_seeds=seeds_dev, level_activity=steps)
    depth = max(s.max_depth for s in result.structures)
    return {"n": n, "trees": n_trees, "n_leaves": [s.n_leaves for s in result.structures],
            **per_level(growth, depth), **by_level(steps)}


def by_level(levels: list) -> dict[str, Any]:
    """The growth level by level.

    Parameters
    ----------
    levels : list of (tuple, DeviceActivity)
        Every level's (subtree roots, small nodes, large nodes) and activity
        (``grow_trees_on_device``'s ``level_activity``).

    Returns
    -------
    dict
        ``levels`` (their number), ``level_groups`` (list of their node
        counts), ``level_<counter>`` (list of their counter) and
        ``level_max_<counter>`` (its largest value).
    """
    out: dict[str, Any] = {"levels": len(levels), "level_groups": [g for g, _ in levels]}
    for name in COUNTERS:
        values = [getattr(a, name) for _, a in levels]
        out[f"level_{name}"] = values
        out[f"level_max_{name}"] = max(values, default=0)
    return out


def boosting_round_activity(
    n: int, strategy: str = "relabel_rpo", p: int = 20, m: int = 4, seed: int = 0
) -> dict[str, Any]:
    """Counters of one boosting round, the second of a ``GradientBoostingRegressor`` fit, on
    the emulated backend.

    The round is the difference between a two-round and a one-round fit of
    the same seed (their first rounds are the same): the data upload, the
    binning and the first round's setup are left out; its tree, gradients,
    projection, leaf values and step sizes are in.

    Parameters
    ----------
    n, p, m : int
        Samples, features and outputs.
    strategy : {"relabel_rpo", "multi_output"}
        The boosting strategy (one tree per round for both).
    seed : int
        Seed of the data and of the estimator.

    Returns
    -------
    dict
        :func:`per_level` of the round (per level of its tree), with ``n`` and
        ``strategy``.
    """
    from gpurpo.backend import DeviceActivity
    from gpurpo.ensemble import GradientBoostingRegressor

    X, Y = _data(n, p, m, seed)
    fits = []
    for rounds in (1, 2):
        model = GradientBoostingRegressor(strategy=strategy, n_estimators=rounds,
                                          random_state=seed, device="cuda-emulated")
        with count_device_activity() as fit:
            model.fit(X, Y)
        fits.append(fit)
    second = DeviceActivity()
    for name in COUNTERS:
        setattr(second, name, getattr(fits[1], name) - getattr(fits[0], name))
    depth = model._model.stages[1].structure.max_depth
    return {"n": n, "strategy": strategy, **per_level(second, depth)}
