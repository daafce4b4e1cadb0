"""The random draws of boosting iterations, made ahead a block at a time.

Iteration ``m`` of :mod:`gpurpo.ensemble.boosting` draws, in this order, from
the estimator's generator: the rows of its stochastic subsample (Friedman
2002, when ``subsample < 1``), the projection of its gradient
(:func:`~gpurpo.ensemble.boosting.iteration_trees.draw_projection`,
Algorithms 3-4 of Joly, Wehenkel & Geurts 2019) and its tree's root seed
(:func:`gpurpo.tree.grower.draw_root_seeds`). :class:`IterationDraws` draws
them for a block of up to ``BLOCK`` iterations at once, iteration by
iteration in that order, so that the numbers are those of drawing each
iteration when it starts, and moves the block to the device in ONE copy:
on a GPU an iteration then starts without copying anything to the device.

The projection reaches the device in the form its product takes
(:func:`~gpurpo.ensemble.boosting.iteration_trees.project_gradient`): dense
rows for the dense kinds, and for sparse kinds of at most
:data:`gpurpo.projections.GATHER_NNZ_PER_ROW` nonzeros per row (output
subsampling has one; the rule of :func:`gpurpo.projections.dense_times_sparse_t`) the
columns and values of every row, padded to the block's widest row with
zero values, whose product gathers the columns it needs. Sparse kinds with
more nonzeros per row keep their host matrix, copied when used.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.sparse as sp

from gpurpo.backend import Backend
from gpurpo.ensemble.boosting.iteration_trees import GatheredProjection, draw_projection
from gpurpo.projections import GATHER_NNZ_PER_ROW
from gpurpo.tree.grower import draw_root_seeds

__all__ = ["BLOCK", "IterationDraw", "IterationDraws"]

#: iterations drawn ahead at most
BLOCK = 16
#: bytes of device projections held for a block at most (dense rows)
BLOCK_BYTES = 64 * 2**20


@dataclass(frozen=True)
class IterationDraw:
    """The draws of one iteration.

    Attributes
    ----------
    rows : int64 backend array (n_in,) or None
        The sorted rows of the subsample (None without subsampling).
    projection : host matrix or None
        As :func:`~gpurpo.ensemble.boosting.iteration_trees.draw_projection`
        returns it (what ``projections_`` keeps).
    device_projection : backend array, GatheredProjection, host matrix or None
        The same projection for the product on the backend's arrays.
    root_seed : uint64 backend array (1,)
        The root seed of the iteration's tree.
    """

    rows: Any
    projection: Any
    device_projection: Any
    root_seed: Any


class IterationDraws:
    """Draws of boosting iterations, made ahead in blocks (module docstring).

    Parameters
    ----------
    backend : Backend
        Where the draws go.
    strategy : str
        The boosting strategy (its projection: ``draw_projection``).
    kind : str or None
        The projection kind.
    n_components : int
        Rows of a ``relabel_rpo`` projection.
    n_outputs : int
        d.
    n_samples : int
        Training rows.
    n_subsample : int or None
        Rows of a subsample (None: no subsampling).
    """

    def __init__(self, backend: Backend, strategy: str, kind: str | None, n_components: int,
                 n_outputs: int, n_samples: int, n_subsample: int | None) -> None:
        self.backend = backend
        self.strategy, self.kind = strategy, kind
        self.n_components, self.n_outputs = int(n_components), int(n_outputs)
        self.n_samples = int(n_samples)
        self.n_subsample = None if n_subsample is None else int(n_subsample)
        self._block: list[IterationDraw] = []

    def next(self, rng: np.random.Generator, remaining: int) -> IterationDraw:
        """The draws of the next iteration, drawing a block of at most ``remaining``
        iterations ahead when the last block is used up."""
        if not self._block:
            self._block = self._draw_block(rng, max(1, int(remaining)))
        return self._block.pop(0)

    def _block_size(self, remaining: int) -> int:
        rows = {"rpo": 1, "relabel_rpo": self.n_components}.get(self.strategy, 0)
        per_iteration = 4 * rows * self.n_outputs if self.kind is not None else 0
        fit = BLOCK_BYTES // per_iteration if per_iteration else BLOCK
        return max(1, min(BLOCK, remaining, fit))

    def _draw_block(self, rng: np.random.Generator, remaining: int) -> list[IterationDraw]:
        size = self._block_size(remaining)
        rows, projections, seeds = [], [], []
        for _ in range(size):
            if self.n_subsample is not None:
                rows.append(np.sort(rng.choice(self.n_samples, size=self.n_subsample,
                                               replace=False)))
            projections.append(draw_projection(self.strategy, self.kind, self.n_components,
                                               self.n_outputs, rng))
            seeds.append(draw_root_seeds(rng, 1)[0])
        parts = {"seeds": np.asarray(seeds, dtype=np.uint64)}
        if rows:
            parts["rows"] = np.stack(rows).astype(np.int64)
        form, width = _device_form(projections)
        if form == "dense":
            parts["dense"] = np.stack([np.asarray(p, dtype=np.float32) for p in projections])
        elif form == "gathered":
            parts["columns"], parts["values"] = _padded_rows(projections, width)
        device = _upload(self.backend, parts)
        draws = []
        for i, projection in enumerate(projections):
            if form == "dense":
                on_device = device["dense"][i]
            elif form == "gathered":
                on_device = GatheredProjection(device["columns"][i], device["values"][i])
            else:
                on_device = projection
            draws.append(IterationDraw(
                rows=device["rows"][i] if rows else None, projection=projection,
                device_projection=on_device, root_seed=device["seeds"][i : i + 1]))
        return draws


def _device_form(projections: list[Any]) -> tuple[str | None, int]:
    """How a block's projections go to the device: ``"dense"``, ``"gathered"``, or None
    (none drawn, or sparse with too many nonzeros per row: kept on the host), and the
    widest row of sparse ones (at least 1)."""
    if projections[0] is None:
        return None, 0
    if not sp.issparse(projections[0]):
        return "dense", 0
    widest = max(1, max(int(np.diff(p.indptr).max(initial=0)) for p in projections))
    return ("gathered" if widest <= GATHER_NNZ_PER_ROW else None), widest


def _padded_rows(projections: list[Any], width: int) -> tuple[np.ndarray, np.ndarray]:
    """Columns (int64) and values (float32) of the rows of CSR projections, (K, q, width),
    padded with column 0 and value 0 to ``width``, the widest row."""
    q = projections[0].shape[0]
    columns = np.zeros((len(projections), q, width), dtype=np.int64)
    values = np.zeros((len(projections), q, width), dtype=np.float32)
    for i, p in enumerate(projections):
        p = p.tocsr()
        for r in range(q):
            lo, hi = p.indptr[r], p.indptr[r + 1]
            columns[i, r, : hi - lo] = p.indices[lo:hi]
            values[i, r, : hi - lo] = p.data[lo:hi]
    return columns, values


def _upload(backend: Backend, parts: dict[str, np.ndarray]) -> dict[str, Any]:
    """``parts`` on the backend from one copy: packed into one byte buffer (each part
    8-byte aligned), copied, and viewed back with their dtypes and shapes."""
    layout, at = {}, 0
    for name, a in parts.items():
        layout[name] = (at, a.dtype, a.shape)
        at += -(-a.nbytes // 8) * 8
    packed = np.zeros(at, dtype=np.uint8)
    for name, a in parts.items():
        start = layout[name][0]
        packed[start : start + a.nbytes] = np.ascontiguousarray(a).view(np.uint8).ravel()
    device = backend.asarray(packed)
    out = {}
    for name, (start, dtype, shape) in layout.items():
        nbytes = int(np.prod(shape)) * np.dtype(dtype).itemsize
        out[name] = device[start : start + nbytes].view(dtype).reshape(shape)
    return out
