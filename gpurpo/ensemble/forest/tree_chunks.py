"""Fitted trees of a forest, packed for prediction, and the prediction sum.

A forest's trees are kept in chunks (one per growth batch): the node arrays
of the chunk's trees concatenated by :func:`gpurpo.tree.pack_trees` and their
leaf values (in the ORIGINAL output space, Joly et al. 2014) stacked into one
table, dense float64 or CSR (:func:`gpurpo.tree.stack_leaf_values`).
:meth:`TreeChunk.accumulate` adds, for a block of rows at a time, the leaf
values reached in every tree of the chunk to an (n, d) accumulator with the
``tree_sum_leaves_*`` kernels: the forest's prediction is the sum over chunks
divided by the number of trees, and no per-tree (n, d) array ever exists.
The same routine with some (row, tree) pairs masked out gives out-of-bag
predictions; :func:`sparse_oob_mean` gives them as a CSR matrix from CSR
leaf values (:mod:`gpurpo.tree.leaf_sums`).

A :class:`TreeChunk` is what a forest's growth stage returns, on one machine
or on a Dask worker (:mod:`gpurpo.dask`), and what the fitted forest keeps.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from gpurpo.backend import Backend, to_host
from gpurpo.tree import traversal
from gpurpo.tree.binning import canonical_csr
from gpurpo.tree.leaf_sums import leaf_sums_csr
from gpurpo.tree.leaves import LeafValues, stack_leaf_values
from gpurpo.tree.predictor import (
    Tree,
    TreeStructure,
    apply_trees_block,
    pack_trees,
    row_blocks,
)

__all__ = ["TreeChunk", "chunk_leaf_rows", "sparse_oob_mean"]


class TreeChunk:
    """Trees packed for one traversal, with their stacked leaf values.

    Parameters
    ----------
    structures : sequence of TreeStructure
    leaves : sequence of LeafValues
        Leaf values of each tree (all dense or all CSR), on ``backend``.
    backend : Backend
        Where the leaf values live.
    """

    def __init__(
        self, structures: Sequence[TreeStructure], leaves: Sequence[LeafValues], backend: Backend
    ) -> None:
        values, offsets = stack_leaf_values(list(leaves), backend)
        self._set(structures, values, offsets, backend)

    @classmethod
    def from_stacked(
        cls, structures: Sequence[TreeStructure], values: Any, offsets: np.ndarray, backend: Backend
    ) -> TreeChunk:
        """A chunk from leaf values already stacked (tree ``t``'s leaf ``l`` at row
        ``offsets[t] + l``), as :func:`gpurpo.tree.batch_leaves.stacked_leaf_values_csr`
        returns them."""
        chunk = cls.__new__(cls)
        chunk._set(structures, values, offsets, backend)
        return chunk

    def _set(self, structures: Sequence[TreeStructure], values: Any, offsets: np.ndarray,
             backend: Backend) -> None:
        self.structures = list(structures)
        self.leaf_offsets = np.asarray(offsets, dtype=np.int64)
        self.packed = pack_trees(self.structures, leaf_offsets=self.leaf_offsets)
        self._values: dict[str, Any] = {backend.name: values}

    @property
    def n_trees(self) -> int:
        return len(self.structures)

    def values_on(self, backend: Backend) -> Any:
        """The stacked leaf values on ``backend`` (moved once, then cached)."""
        if backend.name not in self._values:
            source = next(iter(self._values.values()))
            self._values[backend.name] = backend.asarray(source)
        return self._values[backend.name]

    def tree(self, i: int) -> Tree:
        """Tree ``i`` of the chunk (its leaf values are a slice of the table)."""
        values = next(iter(self._values.values()))
        start = int(self.leaf_offsets[i])
        stop = start + self.structures[i].n_leaves
        return Tree(self.structures[i], LeafValues(values[start:stop]))

    def leaf_rows(self, block: Any, backend: Backend) -> Any:
        """Row of the stacked leaf values each row of ``block`` reaches in each tree.

        ``block``: rows of X on ``backend`` (a sparse one in canonical CSR form).
        Returns an int32 array (rows, n_trees) on ``backend``.
        """
        return self.packed.on(backend)[6][apply_trees_block(self.packed, block, backend)]

    def accumulate(self, X: Any, backend: Backend, out: Any, skip: Any = None) -> Any:
        """Add the leaf values reached by every row in every tree to ``out``.

        Parameters
        ----------
        X : array or sparse matrix (n, p), on ``backend``
            Raw inputs (NaN = missing).
        backend : Backend
        out : float64 array (n, d), C order, on ``backend``
            Accumulator, updated in place.
        skip : bool array (n, n_trees), optional
            On ``backend``; ``True`` leaves tree ``t`` out of row ``i``'s sum
            (out-of-bag predictions skip the trees a sample was drawn for).

        Returns
        -------
        out
        """
        xp = backend.xp
        values = self.values_on(backend)
        sparse_values = backend.issparse(values)
        for r0, block in row_blocks(X, backend, self.n_trees):
            r1 = r0 + block.shape[0]
            rows = self.leaf_rows(block, backend)
            if skip is not None:
                rows = xp.where(skip[r0:r1], xp.int32(-1), rows).astype(xp.int32)
            target = out[r0:r1]
            if sparse_values:
                traversal.sum_leaves_csr(backend, rows, values, target)
            else:
                traversal.sum_leaves_dense(backend, rows, values, target)
        return out

    def __getstate__(self) -> dict:
        state = self.__dict__.copy()
        source = next(iter(self._values.values()))
        state["_values"] = {"numpy": to_host(source)}
        # the packed node arrays repeat the structures: rebuilt on loading (a pickle
        # about a fifth smaller)
        del state["packed"]
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        if "packed" not in state:
            self.packed = pack_trees(self.structures, leaf_offsets=self.leaf_offsets)


def chunk_leaf_rows(
    chunks: Sequence[TreeChunk], X: Any, backend: Backend, in_bag: np.ndarray | None = None
) -> Callable[[int, int], list[Any]]:
    """``leaf_rows_of(r0, r1)``: for rows ``r0:r1`` of X, each chunk's leaf rows
    (:meth:`TreeChunk.leaf_rows`), -1 where ``in_bag[t, i]`` (trees in order) is True;
    the argument :mod:`gpurpo.tree.leaf_sums` sums leaf entries with. A sparse X is made
    canonical CSR once."""
    if backend.issparse(X):
        X = canonical_csr(X)
    first = np.cumsum([0] + [c.n_trees for c in chunks])

    def leaf_rows_of(r0: int, r1: int) -> list[Any]:
        rows = []
        for t0, chunk in zip(first, chunks):
            leaf = chunk.leaf_rows(X[r0:r1], backend)
            if in_bag is not None:
                leaf = np.array(leaf, dtype=np.int32)
                leaf[in_bag[t0 : t0 + chunk.n_trees, r0:r1].T] = -1
            rows.append(leaf)
        return rows

    return leaf_rows_of


def sparse_oob_mean(
    X: Any, chunks: list[TreeChunk], in_bag: np.ndarray, oob_count: np.ndarray, backend: Backend
) -> Any:
    """Out-of-bag mean predictions (n, d) as a CSR matrix, from CSR leaf values.

    Row i averages the leaf rows it reaches in the trees that did not draw
    it (``in_bag[t, i]`` False), over ``oob_count[i]`` of them: the values of
    the dense route (the trees' leaf rows added in tree order, divided by the
    count) at the columns those leaves hold, bit for bit
    (:func:`gpurpo.tree.leaf_sums.leaf_sums_csr`). A row no tree left out has
    no entries.
    """
    leaf_rows_of = chunk_leaf_rows(chunks, X, backend, in_bag)
    divisor = np.maximum(oob_count, 1).astype(np.float64)
    return leaf_sums_csr(int(X.shape[0]), int(chunks[0].values_on(backend).shape[1]), divisor,
                         [c.values_on(backend) for c in chunks], leaf_rows_of)
