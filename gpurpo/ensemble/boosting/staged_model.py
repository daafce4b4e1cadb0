"""Storage and prediction of the additive model built by gradient boosting.

The model is ``F(x) = f_0 + sum_m scale_m * v_m[leaf_m(x)]`` (Joly, Wehenkel &
Geurts 2019, Algorithms 2-4, last line: ``f_m = f_{m-1} + mu rho_m h_m``):

* ``f_0`` (d,) is the constant initial model;
* each stage ``m`` holds one tree (a :class:`gpurpo.tree.predictor.TreeStructure`)
  whose leaf ``l`` is labelled with a row ``v_m[l]`` of width ``k``:
  ``k = d`` for the multi-output strategies (the mean gradient of the leaf)
  and for per-leaf steps (``leaf_step="per_leaf"``: the optimal value of
  every (leaf, output)), or ``k = 1`` for a single-output tree (gbrt-rpo,
  single-target boosting);
* ``scale_m`` (d,) is ``mu rho_m``, the learning rate times the per-output
  step (for single-target boosting it is zero except at the tree's output).

Prediction traverses a block of stages in one ``tree_apply`` launch
(:func:`gpurpo.tree.predictor.apply_trees`), then adds the leaf values:
single-column stages as one matrix product ``H S`` (``H`` the (n, T) tree
outputs, ``S`` the (T, d) scales), ``d``-column stages with the
``tree_sum_leaves_dense`` kernel on the pre-scaled leaf rows. Everything runs
on the backend the model was fitted on.

:mod:`gpurpo.dask` builds the same model stage by stage from its workers, so a
distributed fit hands back a plain single-machine model.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from gpurpo.backend import Backend
from gpurpo.tree import traversal
from gpurpo.tree.predictor import TreeStructure, apply_trees, pack_trees

__all__ = ["Stage", "StagedModel"]

# Number of trees traversed per ``tree_apply`` launch at prediction time (the
# (n, T) leaf-index block is the only temporary proportional to T).
_TREES_PER_BLOCK = 256


@dataclass
class Stage:
    """One boosting iteration: a tree, its leaf values and its output scale.

    Attributes
    ----------
    structure : TreeStructure
        Host node arrays of the tree (``leaf_index`` gives each leaf's row
        of ``values``).
    values : float64 backend array of shape (L, k)
        Leaf values before scaling (k = 1 or d).
    scale : float64 backend array of shape (d,)
        Learning rate times the step ``rho_m`` of each output.
    output : int or None
        For single-target boosting, the one output the tree belongs to.
    """

    structure: TreeStructure
    values: Any
    scale: Any
    output: int | None = None

    @property
    def n_leaves(self) -> int:
        return int(self.values.shape[0])

    @property
    def narrow(self) -> bool:
        return int(self.values.shape[1]) == 1


class StagedModel:
    """The additive model ``f_0 + sum_m scale_m v_m[leaf_m(x)]`` on one backend.

    Parameters
    ----------
    backend : Backend
    init : float64 backend array of shape (d,)
        The constant initial model.
    """

    def __init__(self, backend: Backend, init: Any) -> None:
        self.backend = backend
        self.init = init
        self.stages: list[Stage] = []
        self._blocks: dict[tuple[int, int], tuple[Any, ...]] = {}

    def __getstate__(self) -> dict:
        state = self.__dict__.copy()
        state["_blocks"] = {}
        return state

    @property
    def n_outputs(self) -> int:
        return int(self.init.shape[0])

    def __len__(self) -> int:
        return len(self.stages)

    def append(self, stage: Stage) -> None:
        self.stages.append(stage)
        self._blocks.clear()

    def truncate(self, n_stages: int) -> None:
        """Keep the first ``n_stages`` stages."""
        del self.stages[n_stages:]
        self._blocks.clear()

    # -- traversal ---------------------------------------------------------

    def _block(self, start: int, stop: int) -> tuple[Any, ...]:
        """Packed trees and stacked leaf tables of stages ``start:stop`` (cached)."""
        key = (start, stop)
        if key not in self._blocks:
            xp = self.backend.xp
            stages = self.stages[start:stop]
            packed = pack_trees([s.structure for s in stages])
            narrow = [s for s in stages if s.narrow]
            wide = [s for s in stages if not s.narrow]
            if narrow and wide:
                raise ValueError("a boosted model mixes single-column and d-column stages")
            if narrow:
                flat = xp.concatenate([s.values[:, 0] for s in stages])
                scales = xp.stack([s.scale for s in stages], axis=0)
                self._blocks[key] = (packed, flat, scales, None)
            else:
                table = xp.concatenate([s.values * s.scale[None, :] for s in stages], axis=0)
                self._blocks[key] = (packed, None, None, table)
        return self._blocks[key]

    def apply(self, X: Any, start: int = 0, stop: int | None = None) -> Any:
        """Leaf of every sample in stages ``start:stop``: int32 (n, T), per-tree leaf index."""
        xp = self.backend.xp
        stop = len(self.stages) if stop is None else stop
        if stop <= start:
            return xp.empty((X.shape[0], 0), dtype=xp.int32)
        packed = self._block(start, stop)[0]
        nodes = apply_trees(packed, X, self.backend)
        offsets = [0]
        for s in self.stages[start:stop]:
            offsets.append(offsets[-1] + s.n_leaves)
        rows = packed.on(self.backend)[6][nodes]
        return rows - xp.asarray(offsets[:-1], dtype=xp.int32)[None, :]

    # -- prediction --------------------------------------------------------

    def _add_block(self, X: Any, F: Any, start: int, stop: int) -> None:
        packed, flat, scales, table = self._block(start, stop)
        nodes = apply_trees(packed, X, self.backend)
        rows = packed.on(self.backend)[6][nodes]
        if table is None:
            F += flat[rows] @ scales
        else:
            traversal.sum_leaves_dense(self.backend, rows, table, F)

    def raw_predict(self, X: Any, n_stages: int | None = None) -> Any:
        """Scores ``F(X)`` of the first ``n_stages`` stages (all by default): float64 (n, d)."""
        xp = self.backend.xp
        total = len(self.stages) if n_stages is None else min(n_stages, len(self.stages))
        F = xp.empty((X.shape[0], self.n_outputs), dtype=xp.float64)
        F[...] = self.init[None, :]
        for start in range(0, total, _TREES_PER_BLOCK):
            self._add_block(X, F, start, min(total, start + _TREES_PER_BLOCK))
        return F

    def staged_raw_predict(self, X: Any) -> Iterator[Any]:
        """Yield the scores after each stage (a new array each time)."""
        xp = self.backend.xp
        F = xp.empty((X.shape[0], self.n_outputs), dtype=xp.float64)
        F[...] = self.init[None, :]
        for start in range(0, len(self.stages), _TREES_PER_BLOCK):
            stop = min(len(self.stages), start + _TREES_PER_BLOCK)
            leaves = self.apply(X, start, stop)
            for t, stage in enumerate(self.stages[start:stop]):
                F += stage.values[leaves[:, t]] * stage.scale[None, :]
                yield F.copy()
