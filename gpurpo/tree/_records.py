"""Argument records of the tree kernels (exact splits, histograms, histogram scores).

The exact split kernels ``tree_split_small`` and ``tree_grow_subtrees`` take
a batch of nodes, the ragged edge table of the binned features, the split
rules and the sparse-codes views of the binned matrix; each is one frozen
record here, as scikit-learn's ``HistogramBuilder`` and ``Splitter`` hold
their state, so that the wrappers of :mod:`gpurpo.tree.kernels`, the numba
launch wrappers and the CUDA launchers pass four records instead of twenty
to forty positional arguments. ``tree_histograms`` takes a :class:`NodeBatch`
and ``tree_score_histograms`` an :class:`EdgeTable` too; :class:`Subtrees` holds
``tree_grow_subtrees``'s outputs in one buffer. Array
fields hold arrays of the backend (NumPy or CuPy); the wrappers of
:mod:`gpurpo.tree.kernels` hand the implementations records whose arrays are
C-contiguous and of the dtypes given below.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["EdgeTable", "NodeBatch", "SparseColumns", "SplitRules", "Subtrees"]


@dataclass(frozen=True)
class NodeBatch:
    """The nodes of one kernel call and the samples they own.

    Attributes
    ----------
    sample_indices : int32 array (total,)
        Samples of the nodes: node ``i`` owns
        ``sample_indices[node_ranges[i, 0]:node_ranges[i, 1]]``.
        ``tree_grow_subtrees`` reorders it in place.
    node_ranges : int64 array (N, 2)
        ``[start, stop)`` of each node in ``sample_indices``.
    node_tree : int32 array (N,)
        Tree of each node (its row of the weights and targets).
    node_seed : uint64 array (N,) or None
        Seed of each node (:mod:`gpurpo.tree._random`); required by the
        split kernels, unused by the histogram kernel.
    node_depth : int32 array (N,) or None
        Depth of each node; required by ``tree_grow_subtrees`` only.
    """

    sample_indices: Any
    node_ranges: Any
    node_tree: Any
    node_seed: Any = None
    node_depth: Any = None


@dataclass(frozen=True)
class NodeSplits:
    """The chosen splits of a batch of nodes, as the partition kernels take them.

    Attributes
    ----------
    feature : int32 array (N,)
        Split feature of each node; a node of feature < 0 keeps its samples.
    bin : int32 array (N,)
        Samples whose code is at most ``bin`` go left.
    missing_left : uint8 array (N,)
        Side of the samples whose code is the missing bin.
    """

    feature: Any
    bin: Any
    missing_left: Any


@dataclass(frozen=True)
class EdgeTable:
    """The ragged table of the binned features' upper bin edges.

    Attributes
    ----------
    edge_values : float64 array (E,)
        The features' increasing upper bin edges, feature ``f``'s at
        ``edge_values[edge_ptr[f]:edge_ptr[f + 1]]``
        (:attr:`gpurpo.tree.binning.BinMapper.edge_ptr_`).
    edge_ptr : int64 array (p + 1,)
        Start of each feature's edges; ``edge(f, b)``, the raw upper edge of
        value bin ``b`` (split "code <= b" is "x <= edge(f, b)"), is ``+inf``
        from ``b = edge_ptr[f + 1] - edge_ptr[f]`` on.
    """

    edge_values: Any
    edge_ptr: Any


@dataclass(frozen=True)
class SplitRules:
    """The rules of the exact node split search (Breiman 2001; Geurts et al. 2006).

    Attributes
    ----------
    n_candidates : int
        Number of non-constant features to evaluate at each node (``k``).
    min_samples_leaf : int
        Minimum number of samples on each side of a split.
    random_split : bool
        Extra-Trees mode: one random cut per feature.
    missing_bin : int
        The bin of missing values, ``n_bins - 1``.
    tie_rtol : float
        Relative tolerance of ties between features.
    min_samples_split : int
        A node of fewer samples is a leaf (``tree_grow_subtrees`` only).
    max_depth : int or None
        A node at this depth is a leaf; None: no limit
        (``tree_grow_subtrees`` only).
    min_impurity_decrease : float
        A split must decrease the impurity by at least this much, per output
        and relative to the tree's root weight (``tree_grow_subtrees`` only).
    max_node_size : int or None
        An upper bound of the nodes' sample counts, which sizes the CUDA
        kernels' scratch; None: the largest node is read from the ranges (one
        device-to-host copy). Not read by the CPU kernels.
    """

    n_candidates: int
    min_samples_leaf: int
    random_split: bool
    missing_bin: int
    tie_rtol: float
    min_samples_split: int = 2
    max_depth: int | None = None
    min_impurity_decrease: float = 0.0
    max_node_size: int | None = None

    def __post_init__(self) -> None:
        for name in ("n_candidates", "min_samples_leaf", "missing_bin", "min_samples_split"):
            object.__setattr__(self, name, _integer(getattr(self, name), name))
        for name in ("tie_rtol", "min_impurity_decrease"):
            object.__setattr__(self, name, _real(getattr(self, name), name))
        object.__setattr__(self, "random_split", bool(self.random_split))
        for name in ("max_depth", "max_node_size"):
            if getattr(self, name) is not None:
                object.__setattr__(self, name, _integer(getattr(self, name), name))

    @property
    def depth_limit(self) -> int:
        """``max_depth`` as the kernels take it: -1 for no limit."""
        return -1 if self.max_depth is None else self.max_depth


@dataclass(frozen=True)
class SparseColumns:
    """The views of a binned matrix that spare the split kernels a dense scan.

    Attributes
    ----------
    subtracted_bin : int32 array (p,) or None
        Per feature, the bin whose sums nodes derive from their totals, or -1
        (:attr:`BinnedMatrix.subtracted_bin`); None: -1 for every feature.
    sparse_codes : SparseCodes or None
        The codes of a sparse X row by row and column by column
        (:class:`gpurpo.tree.binning._sparse.SparseCodes`); None: there are
        none and the kernels read the dense codes. In the records that the
        implementations receive it is always a ``SparseCodes``, whose
        ``row_ptr`` and ``col_ptr`` have length 0 when there are none.
    listed : int64 array (p,) or None
        Per feature, its number of codes other than ``subtracted_bin`` in all
        the data (:attr:`BinnedMatrix.listed`); None: ``n`` for every feature.
    """

    subtracted_bin: Any = None
    sparse_codes: Any = None
    listed: Any = None


def _integer(value: Any, name: str) -> int:
    """``value`` as an int; TypeError naming ``name`` when it is not integral."""
    try:
        as_int = int(value)
    except (TypeError, ValueError):
        raise TypeError(f"{name} must be an integer, got {value!r}") from None
    if as_int != value:
        raise TypeError(f"{name} must be an integer, got {value!r}")
    return as_int


def _real(value: Any, name: str) -> float:
    """``value`` as a float; TypeError naming ``name`` when it is not a real number."""
    try:
        return float(value)
    except (TypeError, ValueError):
        raise TypeError(f"{name} must be a real number, got {value!r}") from None


#: Fields of :class:`Subtrees`: (name, dtype name, rows: "roots" + 1, "roots" or "nodes").
_SUBTREE_FIELDS = (
    ("offsets", "int64", "roots+1"),
    ("count", "int32", "roots"),
    ("feature", "int32", "nodes"),
    ("bin", "int32", "nodes"),
    ("missing_left", "uint8", "nodes"),
    ("gain", "float64", "nodes"),
    ("left", "int32", "nodes"),
    ("right", "int32", "nodes"),
    ("depth", "int32", "nodes"),
    ("start", "int64", "nodes"),
    ("stop", "int64", "nodes"),
)
_ITEMSIZE = {dtype: np.dtype(dtype).itemsize for _, dtype, _ in _SUBTREE_FIELDS}


@dataclass
class Subtrees:
    """Outputs of ``tree_grow_subtrees`` (arrays on the backend).

    Every field is a typed view of one byte buffer, so that the whole output
    reaches the host in one copy (:meth:`to_host`).
    """

    buffer: Any
    offsets: Any
    count: Any
    feature: Any
    bin: Any
    missing_left: Any
    gain: Any
    left: Any
    right: Any
    depth: Any
    start: Any
    stop: Any

    @classmethod
    def allocate(cls, xp: Any, n_roots: int, n_nodes: int) -> Subtrees:
        """Uninitialised outputs for ``n_roots`` roots and ``n_nodes`` node rows."""
        layout, n_bytes = _subtree_layout(n_roots, n_nodes)
        return cls._views(xp.empty(n_bytes, dtype=xp.uint8), layout)

    @classmethod
    def _views(cls, buffer: Any, layout: list[tuple[str, str, int, int]]) -> Subtrees:
        fields = {name: buffer[start : start + size].view(dtype) for name, dtype, start, size in layout}
        return cls(buffer=buffer, **fields)

    def to_host(self, backend: Any) -> Subtrees:
        """The same outputs as NumPy arrays, from one device-to-host copy."""
        if isinstance(self.buffer, np.ndarray):
            return self
        layout, _ = _subtree_layout(int(self.count.shape[0]), int(self.feature.shape[0]))
        return Subtrees._views(np.asarray(backend.to_host(self.buffer)), layout)


def _subtree_layout(n_roots: int, n_nodes: int) -> tuple[list[tuple[str, str, int, int]], int]:
    """(name, dtype, byte offset, bytes) of each :class:`Subtrees` field, 8-byte aligned,
    and the buffer's size."""
    rows = {"roots+1": n_roots + 1, "roots": n_roots, "nodes": n_nodes}
    layout = []
    start = 0
    for name, dtype, kind in _SUBTREE_FIELDS:
        size = rows[kind] * _ITEMSIZE[dtype]
        layout.append((name, dtype, start, size))
        start += -(-size // 8) * 8
    return layout, start
