"""One tree grown on rows split over Dask workers: data-parallel histograms.

The XGBoost scheme (Chen & Guestrin 2016, section 4.1; the "approximate"
algorithm with histograms aggregated over machines): every worker holds its
rows' bin codes and targets and, per node, the range of its own rows in the
node; the client holds the node table and makes every decision.

* :class:`PartitionGrower` (on a worker) is the single-machine grower
  (:class:`gpurpo.tree.grower.HostGrower`) of the worker's rows, its targets
  centred on the mean of ALL rows. It builds partial histograms of the nodes
  it is asked for, partitions its rows by the splits it is sent (children get
  the same node ids as on the client, which adds them in the same order) and
  sends back per-node statistics (sample counts, ``sum w ||y||^2``, whether
  its targets differ), then places its rows in the leaves.
* :class:`DistributedGrower` (on the client) is the same grower with the
  data-dependent steps replaced by calls to the workers: a histogram is the
  sum of the workers' partial histograms, a node's statistics the sum of
  theirs, a split the broadcast of (node, feature, bin, missing side). Split
  scoring, the tie rule, the features' visiting order, histogram
  subtraction between siblings and the stopping rules are the inherited
  code: the decisions are the single-machine ones, taken on summed
  histograms.

Every node is split from histograms: the single-machine grower splits small
nodes exactly from their samples (``tree_split_small``, and level-wise the
subtree kernel), which is the same split up to float rounding in near-ties
(the tie rule of :mod:`gpurpo.tree.splitting` absorbs such rounding).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.sparse as sp

from gpurpo.backend import NUMPY, Backend
from gpurpo.tree import GrowthParams, histogram, kernels
from gpurpo.tree.binning import BinnedMatrix
from gpurpo.tree.grower import HostGrower, HostNodeTable, draw_root_seeds

__all__ = ["BinEdges", "DistributedGrower", "PartitionGrower", "Traffic", "payload_bytes"]


def payload_bytes(obj: Any) -> int:
    """Bytes of the arrays and numbers in ``obj`` (nested tuples, lists, dicts)."""
    if isinstance(obj, np.ndarray):
        return int(obj.nbytes)
    if sp.issparse(obj):
        return sum(int(getattr(obj, a).nbytes) for a in ("data", "indices", "indptr")
                   if hasattr(obj, a))
    if isinstance(obj, (tuple, list)):
        return sum(payload_bytes(o) for o in obj)
    if isinstance(obj, dict):
        return sum(payload_bytes(o) for o in obj.values())
    if isinstance(obj, (int, float, np.generic)):
        return 8
    return 0


class Traffic:
    """Bytes moved between the client and the workers, by kind and per tree level.

    A level is one round of the grower: the partial histograms of a frontier
    sent to the client and the splits of that frontier broadcast back (with
    the workers' replies: rows sent left and the children's statistics).
    """

    def __init__(self) -> None:
        self.by_kind: dict[str, int] = defaultdict(int)
        self.levels: list[int] = []
        self._level = 0

    def add(self, kind: str, n_bytes: int, level: bool = False) -> None:
        self.by_kind[kind] += int(n_bytes)
        if level:
            self._level += int(n_bytes)

    def close_level(self) -> None:
        if self._level:
            self.levels.append(self._level)
        self._level = 0


class Workers:
    """The worker-resident partitions (Dask actors) and calls on all of them at once."""

    def __init__(self, actors: list[Any], traffic: Traffic) -> None:
        self.actors = actors
        self.traffic = traffic

    def call(self, kind: str, method: str, *args: Any, level: bool = False) -> list[Any]:
        """``method(*args)`` on every partition; their results in partition order."""
        futures = [getattr(actor, method)(*args) for actor in self.actors]
        results = [f.result() for f in futures]
        self.traffic.add(kind, payload_bytes(args) * len(self.actors), level)
        self.traffic.add(kind, sum(payload_bytes(r) for r in results), level)
        return results


@dataclass
class BinEdges:
    """What the client's grower reads of the binned inputs: the bins and their edges."""

    n_bins: int
    missing_bin: int
    edge_values: np.ndarray
    edge_ptr: np.ndarray

    @property
    def edge_values_host(self) -> np.ndarray:
        return self.edge_values

    @property
    def edge_ptr_host(self) -> np.ndarray:
        return self.edge_ptr


def worker_statistics(grower: HostGrower, ids: np.ndarray) -> dict[str, np.ndarray]:
    """A worker's statistics of the nodes ``ids``: what :func:`combine_statistics` sums."""
    impure, q = grower.node_statistics(ids)
    start, stop = grower.nodes.start[ids], grower.nodes.stop[ids]
    count = stop - start
    first = np.zeros((len(ids), grower.m), dtype=np.float32)
    held = count > 0
    if held.any():
        rows = grower.sample_indices[start[held]]
        first[held] = grower.targets[rows, grower.nodes.tree[ids[held]], :]
    return {"impure": impure, "q": q, "count": count.astype(np.int64), "first": first}


def combine_statistics(parts: list[dict[str, np.ndarray]]) -> tuple[np.ndarray, ...]:
    """(impure, Q, count) of nodes over all rows from the workers' :func:`worker_statistics`.

    A node is impure when some worker's targets in it differ, or two workers'
    first targets in it differ (the single-machine test: not all equal).
    """
    q = np.sum([p["q"] for p in parts], axis=0)
    count = np.sum([p["count"] for p in parts], axis=0)
    impure = np.zeros(q.shape[0], dtype=bool)
    ref = np.zeros_like(parts[0]["first"])
    have = np.zeros(q.shape[0], dtype=bool)
    for p in parts:
        held = p["count"] > 0
        impure |= held & p["impure"].astype(bool)
        impure |= held & have & (p["first"] != ref).any(axis=1)
        take = held & ~have
        ref[take] = p["first"][take]
        have |= held
    return impure, q, count


class PartitionGrower(HostGrower):
    """The grower of one worker's rows (see the module docstring).

    Parameters
    ----------
    binned : BinnedMatrix
        The worker's rows, binned with the shared bin edges.
    targets : float32 array (n_rows, 1, m)
    params : GrowthParams
    mean : float64 array (1, m) or None
        The weighted mean of the targets over all rows (None: no centring,
        the second-order criterion).
    backend : Backend
    """

    def __init__(self, binned: BinnedMatrix, targets: Any, params: GrowthParams, mean: Any,
                 backend: Backend = NUMPY) -> None:
        self._mean = mean
        # node seeds only order the features of the client's evaluations
        super().__init__(binned, targets, None, params, None, backend,
                         root_seeds=np.zeros(1, dtype=np.uint64))

    def target_centre(self, targets: Any, weights: Any, w_sum: Any) -> Any:
        """The mean of the targets over ALL rows: every worker centres on the same value."""
        return self.xp.asarray(self._mean, dtype=self.xp.float64)

    def apply_splits(self, ids: np.ndarray, feature: np.ndarray, bins: np.ndarray,
                     missing_left: np.ndarray, first_child: int) -> dict[str, Any]:
        """Partition this worker's rows of the nodes ``ids`` by the client's splits.

        Returns the rows sent left per node and the statistics of the
        children (ids ``first_child, first_child + 1, ...``, left then right).
        """
        nodes = self.nodes
        if nodes.size != first_child:
            raise RuntimeError(f"node tables out of step: the client's next node is {first_child}, "
                               f"this worker's {nodes.size}")
        nodes.feature[ids] = feature
        nodes.bin[ids] = bins
        nodes.missing_left[ids] = missing_left
        left, right = self.split(ids)
        children = np.stack([left, right], axis=1).reshape(-1)
        return {"n_left": (nodes.stop[left] - nodes.start[left]).astype(np.int64),
                "children": worker_statistics(self, children)}

    def leaf_weights(self) -> tuple[np.ndarray, np.ndarray]:
        """(leaf of every row int32 (n_rows,), weight of every leaf float64 (L,))."""
        result = self.finish()
        s = result.structures[0]
        leaves = s.children_left < 0
        weight = np.zeros(s.n_leaves, dtype=np.float64)
        weight[s.leaf_index[leaves]] = s.weighted_n_node_samples[leaves]
        return result.leaf_of_sample[0], weight


class DistributedGrower(HostGrower):
    """The client's grower of one tree whose rows live on the workers (module docstring).

    Parameters
    ----------
    workers : Workers
        The partitions, with a :class:`PartitionGrower` of the tree's
        targets started (their ``grow_start``).
    edges : BinEdges
    n_rows, n_features, n_targets : int
        Rows over all workers, features, target columns m.
    params : GrowthParams
    rng : numpy Generator
        Draws the root seed, as the single-machine grower does.
    root_stats : list of dict
        The workers' :func:`worker_statistics` of the root.
    w_root : float
        The summed weight of all rows.
    """

    def __init__(self, workers: Workers, edges: BinEdges, n_rows: int, n_features: int,
                 n_targets: int, params: GrowthParams, rng: np.random.Generator,
                 root_stats: list[dict[str, np.ndarray]], w_root: float) -> None:
        # the data-independent state of HostGrower.__init__, for one tree of unit weights
        self.xp = np
        self.backend = NUMPY
        self.binned = edges
        self.edges = kernels.EdgeTable(edges.edge_values, edges.edge_ptr)
        self.params = params.validated()
        self.rng = rng
        self.workers = workers
        self.n_trees = 1
        self.n = int(n_rows)
        self.p = int(n_features)
        self.m = int(n_targets)
        self.newton = self.params.criterion == "newton"
        self.channels = histogram.n_channels(self.m, True)
        self.k = self.p if params.n_candidates is None else min(int(params.n_candidates), self.p)
        self.all_features = self.k >= self.p
        self.random_split = params.splitter == "random"
        # every node from histograms (see the module docstring)
        self.small = self.subtree = 0
        self.msl = int(params.min_samples_leaf)
        self.w_root = np.array([w_root], dtype=np.float64)
        impure, q, count = combine_statistics(root_stats)
        self.nodes = HostNodeTable()
        max_nodes = 2 * max(int(count[0]), 1) - 1
        if params.max_leaf_nodes is not None:
            max_nodes = min(max_nodes, 2 * int(params.max_leaf_nodes) - 1)
        self.nodes.reserve(max_nodes)
        self.roots = self.nodes.add(np.zeros(1), np.full(1, -1), np.zeros(1), np.zeros(1),
                                    count, draw_root_seeds(rng, 1))
        self.stats: dict[int, tuple[bool, float]] = {0: (bool(impure[0]), float(q[0]))}
        self.cache: dict[int, Any] = {}
        self.node_bytes = histogram.histogram_bytes(1, self.k, edges.n_bins, self.channels)

    def node_statistics(self, ids: np.ndarray, on_host: bool = True) -> tuple[np.ndarray, np.ndarray]:
        """Statistics sent by the workers with the splits that created the nodes (host
        arrays, whatever ``on_host``: the client computes on the host)."""
        pairs = [self.stats[int(g)] for g in ids]
        return (np.array([a for a, _ in pairs], dtype=bool),
                np.array([b for _, b in pairs], dtype=np.float64))

    def node_histograms(self, ids: np.ndarray, feats: Any) -> Any:
        """The sum of the workers' partial histograms of the nodes ``ids``."""
        parts = self.workers.call("histograms", "hist", np.asarray(ids, dtype=np.int64),
                                  np.ascontiguousarray(feats, dtype=np.int32), level=True)
        total = parts[0].copy()
        for part in parts[1:]:
            total += part
        return total

    def partition_nodes(self, ids: np.ndarray, ranges: np.ndarray) -> np.ndarray:
        """Broadcast the splits of ``ids``; the rows sent left, summed over the workers."""
        nodes = self.nodes
        first = int(nodes.size)
        replies = self.workers.call(
            "splits", "apply_splits", np.asarray(ids, dtype=np.int64),
            nodes.feature[ids].copy(), nodes.bin[ids].copy(), nodes.missing_left[ids].copy(),
            first, level=True,
        )
        self.workers.traffic.close_level()
        impure, q, _ = combine_statistics([r["children"] for r in replies])
        for i in range(2 * len(ids)):
            self.stats[first + i] = (bool(impure[i]), float(q[i]))
        return np.sum([r["n_left"] for r in replies], axis=0)

    def place_samples(self, leaf_ids: np.ndarray, leaf_start: np.ndarray,
                       leaf_length: np.ndarray, leaf_tree: np.ndarray,
                       leaf_rank: np.ndarray) -> tuple[Any, np.ndarray | None]:
        """The workers place their rows (kept there); the leaves' summed weights."""
        self.workers.traffic.close_level()
        weights = self.workers.call("tree_setup", "place_leaves")
        return None, np.sum(weights, axis=0)[leaf_rank]
