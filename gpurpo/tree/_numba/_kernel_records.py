"""The argument records of the numba exact split kernels, as numba passes them.

numba compiles neither dataclasses nor their attribute reads, but it takes
``collections.namedtuple`` records of arrays and scalars as arguments (one
LLVM argument per field: the same calling convention as the fields passed
one by one). The launchers of :mod:`.tree_split_small` and
:mod:`.tree_grow_subtrees` turn the typed dataclass records of
:mod:`gpurpo.tree._records` into the kernel records below; the kernels
derive the per-node records of :func:`._node_split._eval_node`.

Kernel records: :data:`Sparse` (the views of the binned matrix),
:data:`Batch`, :data:`Edges`, :data:`Rules`, :data:`SplitOut`,
:data:`SubtreeOut`. Records of the node split search: :data:`NodeData` (the
samples' codes and data), :data:`NodeAt` (one node's place in them, scalars),
:data:`NodeColumns` (what reading a sparse X's stored entries takes),
:data:`NodeBits` (bit sets of two-valued features),
:data:`EvalRules` (the split rules and the visiting order's parameters),
:data:`EvalScratch` (the scratch buffers).
"""

from __future__ import annotations

from collections import namedtuple
from typing import Any

import numpy as np

__all__ = [
    "Batch",
    "Edges",
    "EvalRules",
    "EvalScratch",
    "NodeAt",
    "NodeBits",
    "NodeColumns",
    "NodeData",
    "Rules",
    "Sparse",
    "SplitOut",
    "SubtreeOut",
    "kernel_records",
]

#: The views of a binned matrix (:class:`gpurpo.tree._records.SparseColumns` and its
#: ``SparseCodes``): per feature its subtracted bin and number of listed codes, its
#: code of 0.0, a sparse X's stored entries row by row and column by column (length-0
#: ``row_ptr`` / ``col_ptr`` when there are none).
Sparse = namedtuple("Sparse", [
    "subtracted_bin", "listed", "zero_code", "row_ptr", "row_features", "row_codes",
    "col_ptr", "col_rows", "col_codes",
])

#: The nodes of a kernel call (:class:`gpurpo.tree._records.NodeBatch`); ``node_depth``
#: of length 0 for the small-node kernel.
Batch = namedtuple("Batch", ["sample_indices", "node_ranges", "node_tree", "node_seed",
                             "node_depth"])

#: The ragged edge table (:class:`gpurpo.tree._records.EdgeTable`).
Edges = namedtuple("Edges", ["edge_values", "edge_ptr"])

#: The split rules (:class:`gpurpo.tree._records.SplitRules`): ``random_split`` as an
#: int, ``max_depth`` -1 for no limit.
Rules = namedtuple("Rules", [
    "n_candidates", "min_samples_leaf", "random_split", "missing_bin", "tie_rtol",
    "min_samples_split", "max_depth", "min_impurity_decrease",
])

#: The outputs of ``tree_split_small``, one entry per node.
SplitOut = namedtuple("SplitOut", ["feature", "bin", "missing_left", "gain"])

#: The outputs of ``tree_grow_subtrees`` (the fields of :class:`gpurpo.tree._records.Subtrees`).
SubtreeOut = namedtuple("SubtreeOut", [
    "offsets", "count", "feature", "bin", "missing_left", "gain", "left", "right", "depth",
    "start", "stop",
])

#: The data of the nodes of :func:`._node_split._eval_node`: a node's samples are
#: columns of ``codes`` listed in ``cols``; their weights ``w``, weighted targets
#: ``wy`` and targets ``y`` are at rows listed in ``rows``; ``m`` is the number of
#: real target channels. One record serves every node of a kernel's chunk or block.
NodeData = namedtuple("NodeData", ["codes", "cols", "w", "wy", "y", "rows", "m"])

#: One node of :func:`._node_split._eval_node` (scalars only, so that a record per
#: node costs no reference counting): its samples are ``cols[c0ff:c0ff + ns]``, their
#: data at the rows ``rows[d0:d0 + ns]``; ``seed`` orders its features; with
#: ``use_columns`` its positions hold increasing rows (``slot_of_row`` gives their
#: positions) and it may read the stored-entry columns. ``pos_hi`` < 0: the whole
#: search; else only the positions ``pos_lo .. pos_hi - 1`` of its visiting order, whose
#: candidates are left in the scratch (:func:`._node_split._eval_node`).
NodeAt = namedtuple("NodeAt", ["c0ff", "ns", "d0", "seed", "use_columns", "pos_lo", "pos_hi"])

#: What the nodes' reads of a sparse X's stored entries take: per feature its
#: subtracted bin and number of listed codes; the stored-entry columns and each row's
#: position in the node (``slot_of_row``); the buffer of a feature's gathered codes
#: and the identity that reads it; the stored entries by row and the global row of
#: each column of ``codes``.
NodeColumns = namedtuple("NodeColumns", [
    "subtracted_bin", "listed", "col_ptr", "col_rows", "col_codes", "slot_of_row",
    "node_codes", "identity", "entry_ptr", "entry_features", "row_of_col",
])

#: Bit sets of the two-valued features of a subtree kernel's codes block, for
#: :func:`._feature_scan._scan_bits8`: ``words[f]`` has bit ``c`` set where feature
#: ``f``'s code of column ``c`` is 1, for the features where ``binary[f]`` is True (two
#: values, no missing code in the block); ``mask`` holds the node's columns, within
#: the words ``w_lo .. w_hi`` (none: no bit sets are read).
NodeBits = namedtuple("NodeBits", ["words", "binary", "mask", "w_lo", "w_hi"])

#: The rules of one node's split search and the Feistel parameters ``lo_bits``,
#: ``hi_bits`` of the visiting order of the p features (:mod:`gpurpo.tree._random`).
EvalRules = namedtuple("EvalRules", ["n_candidates", "min_samples_leaf", "random_split",
                                     "missing_bin", "tie_rtol", "lo_bits", "hi_bits"])

#: The scratch buffers of :func:`._node_split._eval_node` (see
#: :func:`.tree_split_small._eval_scratch`).
EvalScratch = namedtuple("EvalScratch", [
    "S", "code_buf", "order", "hist", "bin_pos", "LS", "MS", "keys", "perm", "cand_f",
    "cand_g", "cand_b", "cand_ml", "link", "occupied", "listing",
])


def kernel_records(batch: Any, edges: Any, rules: Any, sparse: Any) -> tuple:
    """``(Batch, Edges, Rules, Sparse)`` from the typed dataclass records of the contract.

    ``batch``, ``edges``, ``rules``, ``sparse``: the
    :class:`~gpurpo.tree._records.NodeBatch`, ``EdgeTable``, ``SplitRules`` and
    ``SparseColumns`` that :mod:`gpurpo.tree.kernels` hands the implementations.
    """
    depth = batch.node_depth
    if depth is None:
        depth = np.zeros(0, dtype=np.int32)
    codes = sparse.sparse_codes
    return (
        Batch(batch.sample_indices, batch.node_ranges, batch.node_tree, batch.node_seed, depth),
        Edges(edges.edge_values, edges.edge_ptr),
        Rules(rules.n_candidates, rules.min_samples_leaf, int(rules.random_split),
              rules.missing_bin, rules.tie_rtol, rules.min_samples_split, rules.depth_limit,
              rules.min_impurity_decrease),
        Sparse(sparse.subtracted_bin, sparse.listed, codes.zero_code, codes.row_ptr,
               codes.row_features, codes.row_codes, codes.col_ptr, codes.col_rows,
               codes.col_codes),
    )
