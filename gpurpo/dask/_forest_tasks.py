"""The tasks of a distributed forest fit: what runs on the Dask workers.

Each function takes blocks of rows (NumPy / SciPy, or CuPy / cupyx, arrays)
and small host objects, and validates and converts its blocks exactly as the
single-machine forest validates the whole input
(the ``fit`` of :class:`gpurpo.ensemble.forest.base.BaseForest` and of the
estimators), so that stacking validated blocks gives the validated whole.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from gpurpo._class_targets import class_indices, class_labels, encode_class_targets, host_labels, one_hot
from gpurpo._validation import check_array
from gpurpo.backend import Backend, is_gpu_array, to_host
from gpurpo.ensemble.forest.batches import numba_threads
from gpurpo.ensemble.forest.growth import TreeGrowth
from gpurpo.ensemble.forest.tree_chunks import TreeChunk
from gpurpo.tree import relabelling_outputs
from gpurpo.tree.binning import BinMapper, BinnedMatrix, stack_binned

__all__ = [
    "Outputs",
    "bin_block",
    "bin_rows",
    "block_classes",
    "checked_X",
    "fit_mapper",
    "grow_range",
    "make_growth",
    "outputs_of",
    "outputs_summary",
    "predict_block",
    "rows_of_block",
    "stack_binned_blocks",
]


def _stack_rows(blocks: list[Any]) -> Any:
    """Blocks of rows (all dense or all sparse, all on one device) as one array."""
    if len(blocks) == 1:
        return blocks[0]
    backend = Backend("cupy" if is_gpu_array(blocks[0]) else "numpy")
    if backend.issparse(blocks[0]):
        return backend.sparse.vstack(blocks, format="csr")
    return backend.xp.concatenate(blocks, axis=0)


def checked_X(block: Any, backend: Backend) -> Any:
    """A block of rows of ``X`` validated and converted as the forests convert ``X``."""
    xp = backend.xp
    Xv = check_array(block, "X", backend, allow_nan=True, accept_sparse=True, float32_range=True)
    if Xv.dtype not in (xp.float32, xp.float64):
        Xv = Xv.astype(xp.float64)
    if not backend.issparse(Xv):
        Xv = xp.ascontiguousarray(Xv)
    return Xv


def rows_of_block(block: Any, rows: np.ndarray | None, backend: Backend) -> Any:
    """The validated rows ``rows`` (all when None) of a block of ``X``, on the host."""
    Xv = checked_X(block, backend)
    if rows is not None:
        Xv = Xv[backend.asarray(rows)] if is_gpu_array(Xv) else Xv[rows]
    return to_host(Xv) if is_gpu_array(Xv) else Xv


def fit_mapper(mapper: BinMapper, weights: np.ndarray | None, *pieces: Any) -> BinMapper:
    """``mapper`` fitted on the stacked host ``pieces`` of rows (weighted by ``weights``).

    ``mapper.subsample`` must be at least the number of rows: the rows were
    drawn by the caller, as :meth:`gpurpo.tree.binning.BinMapper.fit` draws them.
    """
    sample = _stack_rows(list(pieces))
    return mapper.fit(sample, weights)


def bin_block(mapper: BinMapper, block: Any, backend: Backend) -> BinnedMatrix:
    """The codes of one validated block of rows of ``X``."""
    return mapper.transform(checked_X(block, backend), backend)


def stack_binned_blocks(mapper: BinMapper, backend: Backend, *parts: BinnedMatrix) -> BinnedMatrix:
    """The binned blocks stacked in order (:func:`gpurpo.tree.binning.stack_binned`)."""
    return stack_binned(mapper, list(parts), backend)


def bin_rows(mapper: BinMapper, backend: Backend, *blocks: Any) -> BinnedMatrix:
    """The codes of the stacked validated blocks of rows of ``X``."""
    Xv = _stack_rows([checked_X(block, backend) for block in blocks])
    return mapper.transform(Xv, backend)


def block_classes(block: Any, regressor: str) -> np.ndarray:
    """The sorted distinct class labels of a block of single-label ``y`` (validated)."""
    labels = host_labels(block).reshape(-1)
    return class_labels(labels, "y", regressor)[0]


@dataclass
class Outputs:
    """The outputs of a block of rows as the trees use them.

    Attributes
    ----------
    Y_leaves, Y_targets, leaf_storage
        As in :class:`gpurpo.ensemble.forest.growth.TreeGrowth`.
    sparse : bool
        Whether the validated ``Y`` is a sparse matrix.
    """

    Y_leaves: Any
    Y_targets: Any
    leaf_storage: Any
    sparse: bool


def outputs_of(kind: str, classes: np.ndarray | None, regressor: str, backend: Backend,
               *blocks: Any) -> Outputs:
    """The validated outputs (n, d) of the stacked blocks of ``y``.

    ``kind``: ``"regression"`` (1-D ``y`` becomes one column) or
    ``"classification"``: the one-hot columns of ``classes`` for single-label
    ``y`` (``classes`` given), a checked 0/1 matrix otherwise.
    """
    y = _stack_rows(list(blocks))
    if kind == "regression":
        if len(y.shape) == 1:
            Y = check_array(y, "y", backend, ensure_2d=False, float32_range=True).reshape(-1, 1)
        else:
            Y = check_array(y, "y", backend, accept_sparse=True, float32_range=True)
    elif classes is not None:
        encoded = class_indices(host_labels(y).reshape(-1), classes, "y")
        Y = backend.asarray(one_hot(encoded, int(classes.shape[0]), dtype=np.float32))
    else:
        Y = encode_class_targets(y, backend, regressor=regressor).Y
    Y_leaves, leaf_storage = relabelling_outputs(Y, backend)
    xp = backend.xp
    Y_targets = Y_leaves if Y_leaves.dtype == xp.float32 else Y_leaves.astype(xp.float32)
    return Outputs(Y_leaves, Y_targets, leaf_storage, bool(backend.issparse(Y)))


def outputs_summary(outputs: Outputs, backend: Backend) -> tuple[int | None, bool]:
    """The stored entries of the leaf outputs (None when dense) and whether ``Y`` is sparse."""
    Y = outputs.Y_leaves
    return (int(Y.nnz) if backend.issparse(Y) else None), outputs.sparse


def make_growth(binned: BinnedMatrix, outputs: Outputs, spec: dict[str, Any],
                *x_blocks: Any) -> TreeGrowth:
    """The :class:`TreeGrowth` of the binned rows and their outputs; ``spec`` holds the
    other fields (seeds, plan, parameters, sampling, ...).

    With a best splitter the growth also keeps the raw rows (the stacked ``x_blocks``):
    its splits move to the node-local midpoints of their neighbouring values, as on one
    machine (:func:`gpurpo.tree.thresholds.refine_thresholds`).
    """
    X = None
    if x_blocks and spec["params"].splitter == "best":
        X = _stack_rows([checked_X(block, spec["backend"]) for block in x_blocks])
    return TreeGrowth(binned, outputs.Y_leaves, outputs.Y_targets, outputs.leaf_storage, X=X,
                      **spec)


def grow_range(growth: TreeGrowth, batches: list[tuple[int, int]], n_jobs: Any) -> list[TreeChunk]:
    """Grow the batches of trees ``batches`` (consecutive ranges), one after the other."""
    with numba_threads(n_jobs):
        return [growth.grow(b0, b1)[0] for b0, b1 in batches]


def predict_block(model: Any, method: str, block: Any, **kwargs: Any) -> Any:
    """``model.<method>(block)``: the local forest's prediction of one block of rows."""
    return getattr(model, method)(block, **kwargs)
