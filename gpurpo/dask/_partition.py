"""The boosting state of one worker's rows, held in place as a Dask actor.

A :class:`BoostingPartition` is built once per worker from the row blocks of
``X`` and ``y`` that the worker holds: it bins ``X`` with the shared edges and
keeps the encoded outputs ``Y``, the scores ``F`` and the negative gradient
``G`` of its rows for the whole fit. Each boosting iteration then asks it for
sums over its rows only (the client adds them up):

* the targets of the iteration's tree (:meth:`tree_targets`, the projected
  gradient; their sum, to centre them on the mean of all rows), then the
  grower of its rows (:meth:`grow_start`, :mod:`gpurpo.dask._grower`);
* per leaf, the weight and the sums of the labelling targets
  (:meth:`label_sums`);
* the sums of the step: the least-squares numerators and denominators, or
  the logistic derivatives along the tree (:meth:`step_sums`,
  :meth:`line_derivatives`);
* and, with the step known, the update of ``F`` and ``G`` and its summed
  training loss (:meth:`update`).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import scipy.sparse as sp

from gpurpo.backend import NUMPY
from gpurpo.dask._grower import PartitionGrower, worker_statistics
from gpurpo.ensemble.boosting.iteration_trees import StageTreeFitter, leaf_label_sums
from gpurpo.ensemble.boosting.logistic_kernels import LogisticLine
from gpurpo.ensemble.boosting.losses import get_loss
from gpurpo.ensemble.boosting.step_sizes import least_squares_sums
from gpurpo.tree import GrowthParams
from gpurpo.tree.binning import BinMapper

__all__ = ["BoostingPartition", "stack_rows"]


def stack_rows(blocks: list[Any]) -> Any:
    """The row blocks stacked in order (CSR for sparse blocks)."""
    if any(sp.issparse(b) for b in blocks):
        return sp.vstack([sp.csr_matrix(b) for b in blocks], format="csr")
    if len(blocks) == 1:
        return blocks[0]
    return np.concatenate(blocks, axis=0)


class BoostingPartition:
    """One worker's rows and their boosting state (see the module docstring).

    Parameters
    ----------
    x_blocks, y_blocks : list of arrays
        The worker's row blocks of ``X`` and ``y``, in the same order.
    template : gpurpo GradientBoostingRegressor or GradientBoostingClassifier
        Validates ``X`` and encodes ``y`` as the single-machine estimator
        does (the classifier's classes are set).
    mapper : BinMapper
        Fitted on a sample of all rows.
    strategy : str
    loss : str
    """

    def __init__(self, x_blocks: list[Any], y_blocks: list[Any], template: Any,
                 mapper: BinMapper, strategy: str, loss: str) -> None:
        backend = self.backend = NUMPY
        X = template.check_inputs(stack_rows(x_blocks), backend)
        self.binned = mapper.transform(X, backend)
        # the regressor's encoding is per row; the classifier's classes come from the template
        fitting = not hasattr(template, "classes_")
        self.Y = template.encode_targets(stack_rows(y_blocks), backend, fitting=fitting)
        self.n = int(self.Y.shape[0])
        self.w = np.ones(self.n, dtype=np.float64)
        self.loss = get_loss(loss)
        self.fitter = StageTreeFitter(backend, self.binned, X, strategy,
                                      GrowthParams().validated())

    # -- the initial model ----------------------------------------------------

    def init_sums(self) -> tuple[np.ndarray, float]:
        """``(sum_i w_i a_i, sum_i w_i)`` with ``a = y`` (squared error) or ``y > 0`` (log loss)."""
        A = self.Y if self.loss.name == "squared_error" else (self.Y > 0)
        return self.w @ A.astype(np.float64), float(np.sum(self.w))

    def start(self, init: np.ndarray) -> None:
        """Scores at the initial model and their negative gradient."""
        self.F = np.broadcast_to(init, (self.n, init.shape[0])).copy()
        self.G = self.loss.negative_gradient(self.backend, self.Y, self.F)

    # -- the tree of one iteration -------------------------------------------

    def tree_targets(self, projection: Any, output: int | None, newton: bool) -> tuple[Any, int]:
        """Set the iteration's targets; their weighted column sums (None when not centred),
        float64 (1, m), and m."""
        hessian = self.loss.hessian(self.backend, self.G) if newton else None
        split_on, self.label_with = self.fitter.split_targets(self.G, projection, output, hessian)
        self.targets = np.ascontiguousarray(split_on, dtype=np.float32)[:, None, :]
        self.output = output
        if newton:
            return None, int(self.targets.shape[2])
        sums = np.einsum("tn,ntc->tc", self.w[None, :], self.targets.astype(np.float64))
        return sums, int(self.targets.shape[2])

    def grow_start(self, mean: Any, params: GrowthParams) -> tuple[dict[str, Any], float]:
        """The grower of this worker's rows; the root's statistics and the rows' weight."""
        self.grower = PartitionGrower(self.binned, self.targets, params, mean, self.backend)
        return worker_statistics(self.grower, self.grower.roots), float(self.grower.w_root[0])

    def hist(self, ids: np.ndarray, feats: np.ndarray) -> np.ndarray:
        """Partial histograms, float32 (N, k, n_bins, m + 1), of this worker's rows."""
        return self.grower.node_histograms(ids, feats)

    def apply_splits(self, *split: Any) -> dict[str, Any]:
        return self.grower.apply_splits(*split)

    def place_leaves(self) -> np.ndarray:
        """Keep the leaf of every row; the weight of every leaf, float64 (L,)."""
        self.leaf, weight = self.grower.leaf_weights()
        del self.grower, self.targets
        return weight

    def label_sums(self, n_leaves: int) -> tuple[np.ndarray, np.ndarray]:
        """Per leaf, the weight and the sums of the labelling targets (float64)."""
        return leaf_label_sums(self.backend, self.leaf, self.w, self.label_with, n_leaves)

    # -- the step and the update ---------------------------------------------

    def _columns(self) -> slice:
        j = self.output
        return slice(None) if j is None else slice(j, j + 1)

    def step_sums(self, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Least-squares step sums (:func:`least_squares_sums`) of this worker's rows."""
        cols = self._columns()
        return least_squares_sums(np, self.Y[:, cols] - self.F[:, cols], values[self.leaf],
                                  self.w)

    def line_open(self, values: np.ndarray) -> np.ndarray:
        """Start the logistic line of this worker's rows; its ``max |h|`` per output."""
        cols = self._columns()
        H = np.ascontiguousarray(values[self.leaf], dtype=np.float64)
        self.line = LogisticLine(self.backend, self.Y[:, cols], self.F[:, cols], H, self.w,
                                 self.leaf, values)
        return self.line.max_abs_step_direction()

    def line_derivatives(self, rho: np.ndarray, columns: np.ndarray) -> tuple[Any, Any]:
        return self.line.derivatives(rho, columns)

    def update(self, values: np.ndarray, scale: np.ndarray) -> float:
        """``F += scale * h(x)``, the next gradient; the summed training loss of the rows."""
        self.line = None
        H = values[self.leaf]
        if self.output is None:
            self.F += H * scale[None, :]
        else:
            j = self.output
            self.F[:, j] += scale[j] * H[:, 0]
        self.G, rows = self.loss.gradient_and_row_loss(self.backend, self.Y, self.F)
        return float(np.sum(self.w * rows))
