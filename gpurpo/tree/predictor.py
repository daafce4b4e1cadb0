"""Fitted trees: packed node arrays, traversal (``apply``) and prediction.

A tree is stored as flat node arrays (like scikit-learn's ``Tree``): node 0
is the root; internal node ``i`` sends a row ``x`` to ``children_left[i]``
when ``x[feature[i]] <= threshold[i]`` (raw feature values, float64
comparison), to ``children_right[i]`` otherwise, and NaN to the side given
by ``missing_go_left[i]``; leaves have ``feature == -1`` and
``leaf_index >= 0``, the row of their value in the leaf-value table
(:mod:`gpurpo.tree.leaves`).

Many trees are traversed in one ``tree_apply`` launch (one work item per
(row, tree)) after :func:`pack_trees` concatenates their node arrays;
:func:`predict_sum` sums leaf values over trees with the
``tree_sum_leaves_*`` kernels, accumulating into one (n, d) output, so no
per-tree (n, d) array is ever materialised. Rows are processed in chunks.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from gpurpo.backend import Backend
from gpurpo.tree import traversal
from gpurpo.tree._node_tables import pack_tree
from gpurpo.tree.binning import canonical_csr
from gpurpo.tree.leaves import LeafValues, stack_leaf_values

__all__ = [
    "STRUCTURE_DTYPES",
    "TreeStructure",
    "Tree",
    "PackedTrees",
    "pack_trees",
    "apply_trees",
    "apply_trees_block",
    "predict_sum",
    "predict_trees",
    "row_blocks",
]

# cells of a row block of X plus its node indices (row_blocks)
_BLOCK_CELLS = 1 << 22


#: dtypes of the node arrays of a :class:`TreeStructure`, by field
STRUCTURE_DTYPES = {
    "children_left": np.int32,
    "children_right": np.int32,
    "feature": np.int32,
    "threshold": np.float64,
    "bin": np.int32,
    "missing_go_left": np.uint8,
    "leaf_index": np.int32,
    "n_node_samples": np.int64,
    "weighted_n_node_samples": np.float64,
    "gain": np.float64,
    "depth": np.int32,
}

#: dtypes of the concatenated node arrays of :class:`PackedTrees` written by
#: :func:`pack_trees`
_PACKED_DTYPES = {
    "feature": np.int32,
    "threshold": np.float64,
    "missing_go_left": np.uint8,
    "left": np.int32,
    "right": np.int32,
    "leaf_row": np.int32,
}


@dataclass
class TreeStructure:
    """Node arrays of one tree (host NumPy arrays, one entry per node).

    Attributes
    ----------
    children_left, children_right : int32
        Children (-1 for leaves).
    feature : int32
        Split feature (-1 for leaves).
    threshold : float64
        Raw threshold: go left when ``x <= threshold`` (NaN for leaves).
    bin : int32
        The same split on bin codes: go left when ``code <= bin``.
    missing_go_left : uint8
        1 when missing values (NaN) go left.
    leaf_index : int32
        Row of the leaf in the leaf-value table, -1 for internal nodes.
    n_node_samples : int64
        Training samples (with nonzero weight) in the node.
    weighted_n_node_samples : float64
        Their total weight.
    gain : float64
        ``||S_L||^2/W_L + ||S_R||^2/W_R - ||S||^2/W`` of the split, in the
        space the tree was grown in (0 for leaves): the weighted decrease
        of the summed variance, used for feature importances.
    depth : int32
    """

    children_left: np.ndarray
    children_right: np.ndarray
    feature: np.ndarray
    threshold: np.ndarray
    bin: np.ndarray
    missing_go_left: np.ndarray
    leaf_index: np.ndarray
    n_node_samples: np.ndarray
    weighted_n_node_samples: np.ndarray
    gain: np.ndarray
    depth: np.ndarray

    @property
    def node_count(self) -> int:
        return int(self.feature.shape[0])

    @property
    def n_leaves(self) -> int:
        return int((self.feature < 0).sum())

    @property
    def max_depth(self) -> int:
        return int(self.depth.max()) if self.node_count else 0


@dataclass
class PackedTrees:
    """Node arrays of several trees concatenated (host NumPy).

    ``roots[t]`` is tree t's root; children are global node indices;
    ``leaf_row[g]`` is the row of leaf node g in the stacked leaf values
    (``leaf_offsets[t] + leaf_index``), -1 for internal nodes.
    """

    feature: np.ndarray
    threshold: np.ndarray
    missing_go_left: np.ndarray
    left: np.ndarray
    right: np.ndarray
    roots: np.ndarray
    leaf_row: np.ndarray
    node_offsets: np.ndarray
    _device: dict = field(default_factory=dict, repr=False)

    def on(self, backend: Backend) -> tuple[Any, ...]:
        """Node arrays on ``backend`` (cached)."""
        if backend.name not in self._device:
            self._device[backend.name] = tuple(
                backend.asarray(a)
                for a in (
                    self.feature,
                    self.threshold,
                    self.missing_go_left,
                    self.left,
                    self.right,
                    self.roots,
                    self.leaf_row,
                )
            )
        return self._device[backend.name]

    def __getstate__(self) -> dict:
        state = self.__dict__.copy()
        state["_device"] = {}
        return state


def pack_trees(
    structures: Sequence[TreeStructure], leaf_offsets: Sequence[int] | None = None
) -> PackedTrees:
    """Concatenate the node arrays of several trees (see :class:`PackedTrees`).

    One pass per tree (:func:`gpurpo.tree._node_tables.pack_tree`) writes
    every packed array, with children and leaf rows shifted to global ids.
    ``leaf_offsets`` gives each tree's first leaf row; by default the trees'
    leaves follow each other.

    Parameters
    ----------
    structures : sequence of TreeStructure
        The trees, in order.
    leaf_offsets : sequence of int, optional
        Row of each tree's leaf 0 in the stacked leaf values (the offsets of
        :func:`gpurpo.tree.leaves.stack_leaf_values`).

    Returns
    -------
    PackedTrees
        Host NumPy node arrays; tree t's root is node ``node_offsets[t]``.

    Raises
    ------
    ValueError
        If the trees have 2**31 nodes or more in all (int32 node ids).
    """
    counts = np.array([s.node_count for s in structures], dtype=np.int64)
    node_offsets = np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(np.int64)
    total_nodes = int(counts.sum())
    if total_nodes >= 2**31:
        raise ValueError(
            f"too many nodes to pack ({total_nodes}); predict with fewer trees at once"
        )
    out = {name: np.empty(total_nodes, dtype=dtype) for name, dtype in _PACKED_DTYPES.items()}
    leaf_start = 0
    for t, s in enumerate(structures):
        if leaf_offsets is not None:
            leaf_start = int(leaf_offsets[t])
        leaves = pack_tree(
            s.feature, s.threshold, s.missing_go_left, s.children_left, s.children_right,
            s.leaf_index, int(node_offsets[t]), leaf_start, out["feature"], out["threshold"],
            out["missing_go_left"], out["left"], out["right"], out["leaf_row"],
        )
        leaf_start += leaves
    return PackedTrees(roots=node_offsets.astype(np.int32), node_offsets=node_offsets, **out)


def row_blocks(X: Any, backend: Backend, n_trees: int) -> Iterator[tuple[int, Any]]:
    """``(first row, block)`` of X in blocks whose values (dense X: p per row) and
    (rows, ``n_trees``) node indices (4 per row and tree, counted generously) hold about
    ``_BLOCK_CELLS`` cells. A sparse X stays sparse, made canonical CSR once:
    ``tree_apply_csr`` reads its rows' stored entries, where densifying a block of
    rows of a million features wrote 8 MB per row."""
    n, p = X.shape
    sparse = backend.issparse(X)
    if sparse:
        X = canonical_csr(X)
    step = max(1, _BLOCK_CELLS // max(0 if sparse else p, 4 * n_trees, 1))
    for r0 in range(0, n, step):
        yield r0, X[r0 : r0 + step]


def apply_trees(packed: PackedTrees, X: Any, backend: Backend) -> Any:
    """Global index of the leaf node reached by each row in each tree: int32 (n, T).

    Internal node ``i`` sends a row left when ``x[feature[i]] <= threshold[i]``
    and NaN to the side of ``missing_go_left[i]`` (module docstring); rows
    go through the ``tree_apply`` kernel in blocks.

    Parameters
    ----------
    packed : PackedTrees
        The T trees (:func:`pack_trees`).
    X : array or sparse matrix (n, p), on ``backend``
        Raw inputs; a sparse ``X`` is read at its stored entries (``tree_apply_csr``).
    backend : Backend

    Returns
    -------
    int32 array (n, T), on ``backend``
        Index into the packed node arrays; subtract ``packed.node_offsets[t]``
        for tree t's own node index.
    """
    xp = backend.xp
    out = xp.empty((X.shape[0], len(packed.roots)), dtype=xp.int32)
    for r0, block in row_blocks(X, backend, len(packed.roots)):
        out[r0 : r0 + block.shape[0]] = apply_trees_block(packed, block, backend)
    return out


def predict_sum(
    packed: PackedTrees,
    values: Any,
    X: Any,
    backend: Backend,
    dense_output: bool = True,
) -> Any:
    """Sum over the packed trees of the leaf values reached by each row.

    Parameters
    ----------
    packed : PackedTrees
    values : dense float64 array or CSR matrix (L_total, d), on ``backend``
        Stacked leaf values (:func:`gpurpo.tree.leaves.stack_leaf_values`).
    X : array or sparse matrix (n, p), on ``backend``
    backend : Backend
    dense_output : bool
        Dense (n, d) float64 result; otherwise, with sparse values, a CSR
        matrix (the sum of the sparse leaf rows).

    Returns
    -------
    float64 array (n, d) or CSR matrix
    """
    xp = backend.xp
    leaf_row_of_node = packed.on(backend)[6]
    n = X.shape[0]
    d = values.shape[1]
    sparse_values = backend.issparse(values)
    n_trees = len(packed.roots)
    if sparse_values and not dense_output:
        parts = []
        for _, block in row_blocks(X, backend, n_trees):
            nodes = apply_trees_block(packed, block, backend)
            rows = leaf_row_of_node[nodes]
            nb = rows.shape[0]
            indptr = xp.arange(0, nb * n_trees + 1, n_trees, dtype=xp.int64)
            ind = backend.sparse.csr_matrix(
                (xp.ones(nb * n_trees), rows.reshape(-1).astype(xp.int64), indptr),
                shape=(nb, values.shape[0]),
            )
            parts.append((ind @ values).tocsr())
        if not parts:
            return backend.sparse.csr_matrix((0, d))
        return backend.sparse.vstack(parts, format="csr")
    out = xp.zeros((n, d), dtype=xp.float64)
    for r0, block in row_blocks(X, backend, n_trees):
        nodes = apply_trees_block(packed, block, backend)
        rows = leaf_row_of_node[nodes]
        target = out[r0 : r0 + block.shape[0]]
        if sparse_values:
            traversal.sum_leaves_csr(backend, rows, values, target)
        else:
            traversal.sum_leaves_dense(backend, rows, values, target)
    return out


def apply_trees_block(packed: PackedTrees, block: Any, backend: Backend) -> Any:
    """``apply_trees`` on one row block (dense, or canonical CSR)."""
    feature, threshold, missing, left, right, roots, _ = packed.on(backend)
    return traversal.apply_trees(backend, block, feature, threshold, missing, left, right, roots)


class Tree:
    """A fitted tree: node arrays plus leaf values in the original output space.

    The estimators' ``tree_``. Node arrays are host NumPy arrays; leaf values
    live on the backend they were computed on and are moved to the host when
    pickled.

    Attributes
    ----------
    structure : TreeStructure
    leaves : LeafValues
    """

    def __init__(self, structure: TreeStructure, leaves: LeafValues) -> None:
        self.structure = structure
        self.leaves = leaves
        self._packed: PackedTrees | None = None

    def __getstate__(self) -> dict:
        return {"structure": self.structure, "leaves": self.leaves.to_host()}

    def __setstate__(self, state: dict) -> None:
        self.structure = state["structure"]
        self.leaves = state["leaves"]
        self._packed = None

    @property
    def packed(self) -> PackedTrees:
        if self._packed is None:
            self._packed = pack_trees([self.structure])
        return self._packed

    # scikit-learn-like read-only views
    node_count = property(lambda self: self.structure.node_count)
    n_leaves = property(lambda self: self.structure.n_leaves)
    max_depth = property(lambda self: self.structure.max_depth)
    children_left = property(lambda self: self.structure.children_left)
    children_right = property(lambda self: self.structure.children_right)
    feature = property(lambda self: self.structure.feature)
    threshold = property(lambda self: self.structure.threshold)
    missing_go_left = property(lambda self: self.structure.missing_go_left)
    n_node_samples = property(lambda self: self.structure.n_node_samples)
    weighted_n_node_samples = property(lambda self: self.structure.weighted_n_node_samples)
    gain = property(lambda self: self.structure.gain)
    leaf_index = property(lambda self: self.structure.leaf_index)

    @property
    def value(self) -> Any:
        """Leaf values (n_leaves, d): dense array or CSR matrix (host or device)."""
        return self.leaves.values

    def apply(self, X: Any, backend: Backend) -> Any:
        """Node index of the leaf reached by each row: int32 (n,)."""
        return apply_trees(self.packed, X, backend)[:, 0]

    def predict(self, X: Any, backend: Backend, dense_output: bool = True) -> Any:
        """Leaf values of the rows: float64 (n, d), or CSR with sparse leaves."""
        values = self.leaves.to(backend).values
        return predict_sum(self.packed, values, X, backend, dense_output=dense_output)


def predict_trees(
    trees: Sequence[Tree], X: Any, backend: Backend, dense_output: bool = True
) -> Any:
    """Sum of the predictions of several trees (one packed traversal).

    Parameters
    ----------
    trees : sequence of Tree
    X : array or sparse matrix (n, p), on ``backend``
        Raw inputs.
    backend : Backend
    dense_output : bool, default=True
        As in :func:`predict_sum`.

    Returns
    -------
    float64 array (n, d) or CSR matrix, on ``backend``
        ``sum_t v_t(x)`` (not the mean); CSR only with sparse leaf values and
        ``dense_output=False``.
    """
    packed_leaves = [t.leaves for t in trees]
    values, offsets = stack_leaf_values(packed_leaves, backend)
    packed = pack_trees([t.structure for t in trees], leaf_offsets=offsets)
    return predict_sum(packed, values, X, backend, dense_output=dense_output)
