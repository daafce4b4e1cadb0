"""Tree structures from a finished node table, shared by the host and device growers."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from gpurpo.backend import SERIAL_ELEMENTS, cpu_helper
from gpurpo.tree._node_tables import sum_internal_weights
from gpurpo.tree._numba.gather_trees import gather_tree_arrays
from gpurpo.tree.binning import BinnedMatrix
from gpurpo.tree.predictor import STRUCTURE_DTYPES, TreeStructure

if TYPE_CHECKING:
    from gpurpo.tree.grower import HostNodeTable

__all__ = ["pack_structures"]


def pack_structures(
    nodes: HostNodeTable, binned: BinnedMatrix, leaf_ids: np.ndarray, leaf_weight: Any,
    leaf_index: np.ndarray, local_id: np.ndarray, node_order: np.ndarray,
    tree_counts: np.ndarray,
) -> list[TreeStructure]:
    """The trees of a finished node table, one :class:`TreeStructure` each.

    ``leaf_ids`` (host int64) are the leaves and ``leaf_weight`` (float64 or
    None without leaves) their weighted sample counts; internal nodes sum
    their children's, bottom up. ``leaf_index``, ``local_id``, ``node_order``
    and ``tree_counts`` number the nodes within their trees
    (:func:`~gpurpo.tree._node_tables.number_nodes`, whose leaf numbering the
    caller may replace).
    """
    size = nodes.size
    is_leaf = nodes.left[:size] < 0
    weighted = np.zeros(size, dtype=np.float64)
    if len(leaf_ids):
        weighted[leaf_ids] = leaf_weight
    # internal nodes bottom-up (children's ids are above their parent's)
    if not sum_internal_weights(is_leaf, nodes.left[:size], nodes.right[:size], weighted):
        raise RuntimeError("node table corrupted: a child's id is not above its parent's")
    tree_first = np.concatenate([[0], np.cumsum(tree_counts)[:-1]])
    arrays = {name: np.empty(size, dtype=dtype) for name, dtype in STRUCTURE_DTYPES.items()}
    cpu_helper(gather_tree_arrays, small=size < SERIAL_ELEMENTS)(
        node_order, is_leaf, nodes.feature[:size], nodes.bin[:size],
        nodes.missing_left[:size], nodes.left[:size], nodes.right[:size], local_id,
        leaf_index, nodes.start[:size], nodes.stop[:size], weighted, nodes.gain[:size],
        nodes.depth[:size],
        np.ascontiguousarray(binned.edge_values_host, dtype=np.float64),
        np.ascontiguousarray(binned.edge_ptr_host, dtype=np.int64),
        *(arrays[k] for k in ("children_left", "children_right", "feature", "threshold",
                              "bin", "missing_go_left", "leaf_index", "n_node_samples",
                              "weighted_n_node_samples", "gain", "depth")),
    )
    return [TreeStructure(**{k: v[tree_first[t] : tree_first[t] + tree_counts[t]]
                             for k, v in arrays.items()})
            for t in range(len(tree_counts))]
