"""The linear label reducers of :mod:`gpurpo.label_space.reducers` fitted on tall Dask label matrices.

``Y`` (n x d) is split by rows over the workers; what the fit needs from it is
a handful of products with small matrices (:mod:`gpurpo.dask._linalg`), so only
``d x l`` and ``k x k`` matrices reach the client:

* PLST (Tai & Lin 2012): the principal directions of the implicitly centred
  ``Y`` from the distributed randomized PCA;
* ML-CSSP (Bi & Kwok 2013, Algorithm 1): leverage-score sampling of ``k``
  labels from the distributed SVD, then ``D = Y_C^+ Y`` (line 11);
* the Gaussian projection with least-squares decoding (Hsu et al. 2009):
  ``Z = Y Phi^T`` per row block and ``D = Z^+ Y``.

The decoders ``D = Z^+ Y`` factor the tall code matrix by TSQR
(``Z = Q R``, Benson, Gleich & Demmel 2013) and sum ``Y_i^T Q_i`` over the
blocks: ``D = R^+ (Y^T Q)^T``. A fitted reducer is an ordinary reducer of
:mod:`gpurpo.label_space.reducers` (``to_local`` returns one), and its
``encode``/``decode`` also take Dask arrays, block by block. For the same
``random_state`` the fit equals the single-machine one up to rounding.
Rembrandt needs the features' projector and has no distributed version.
"""

from __future__ import annotations

from abc import abstractmethod
from typing import Any

import dask.array as da
import numpy as np

from gpurpo._validation import check_choice, check_int
from gpurpo.backend import NUMPY, check_random_state
from gpurpo.dask._linalg import (
    _check_tall,
    _t_times,
    _times,
    cssp_select,
    plst,
)
from gpurpo.label_space import reducers as local
from gpurpo.projections import make_projection

__all__ = ["PLSTReducer", "CSSPReducer", "RandomReducer", "make_reducer", "REDUCERS"]

#: The reducers with a distributed fit.
REDUCERS = ("plst", "random", "cssp")


def _least_squares_decoder(Z: da.Array, Y: da.Array) -> np.ndarray:
    """``D = Z^+ Y`` (k x d) for the row-split codes ``Z`` and labels ``Y`` (same row chunks)."""
    Z = Z.astype(np.float64).rechunk((Y.chunks[0], -1))
    Q, R = da.linalg.tsqr(Z)
    R = np.asarray(R.compute())
    return np.linalg.pinv(R) @ _t_times(Y, Q).T.astype(np.float64)


def _range_finder_params(reducer: local.LabelReducer) -> dict[str, Any]:
    """The range finder's keywords of the reducer's ``n_oversamples`` and ``n_iter``
    (those left at their defaults are left to the range finder)."""
    params: dict[str, Any] = {}
    if reducer.n_oversamples is not None:
        params["n_oversamples"] = reducer.n_oversamples
    if reducer.n_iter != "auto":
        params["n_iter"] = reducer.n_iter
    return params


class _DaskReducer:
    """Fit on a Dask ``Y`` (or, for in-memory ``Y``, the single-machine fit); encode/decode per block."""

    _local_class: type[local.LabelReducer]

    def fit(self, Y: Any, X: Any = None, backend: Any = None) -> Any:
        """Learn ``E``, ``D`` and ``mu`` from labels ``Y`` (n, d).

        Parameters
        ----------
        Y : dask.array.Array, array or sparse matrix, shape (n, d)
            A Dask array chunked by rows (NumPy or SciPy-sparse blocks) is
            fitted across the workers; anything else as the single-machine
            reducer does.
        X : ignored
            Accepted for the reducers' common signature.
        backend : Backend, optional
            Only for in-memory ``Y``.
        """
        if not isinstance(Y, da.Array):
            return self._local_class.fit(self, Y, X, backend)  # type: ignore[arg-type]
        Y = _check_tall(Y, "Y")
        self.backend_ = NUMPY
        self.n_labels_ = int(Y.shape[1])
        self.n_components_ = check_int(
            self.n_components, "n_components", low=1, high=min(int(Y.shape[0]), self.n_labels_)
        )
        self.mean_ = None
        self._fit_dask(Y, check_random_state(self.random_state))
        return self

    @abstractmethod
    def _fit_dask(self, Y: da.Array, rng: np.random.Generator) -> None:
        """Set the fitted attributes from the validated row-split ``Y``."""

    def to_local(self) -> local.LabelReducer:
        """The fitted reducer as a :mod:`gpurpo.label_space.reducers` instance (no Dask needed)."""
        out = self._local_class.__new__(self._local_class)
        out.__dict__.update(self.__dict__)
        return out

    def _per_block(self, A: Any, method: str, width: int) -> da.Array:
        fitted = self.to_local()
        step = getattr(fitted, method)
        if len(A.chunks[1]) > 1:
            A = A.rechunk({1: -1})
        return A.map_blocks(
            lambda block: np.asarray(step(block)), chunks=(A.chunks[0], (width,)), dtype=np.float64,
            meta=np.empty((0, 0), dtype=np.float64),
        )

    def encode(self, Y: Any, backend: Any = None) -> Any:
        """``Z = (Y - 1 mu^T) E`` (n, k); a Dask ``Y`` gives a Dask ``Z``, block by block."""
        if isinstance(Y, da.Array):
            return self._per_block(Y, "encode", self.n_components_)
        return self._local_class.encode(self, Y, backend)  # type: ignore[arg-type]

    def decode(self, Z: Any, backend: Any = None) -> Any:
        """``Y_hat = Z D + 1 mu^T`` (n, d); a Dask ``Z`` gives a Dask ``Y_hat``, block by block."""
        if isinstance(Z, da.Array):
            return self._per_block(Z, "decode", self.n_labels_)
        return self._local_class.decode(self, Z, backend)  # type: ignore[arg-type]


class PLSTReducer(_DaskReducer, local.PLSTReducer):
    """PLST (Tai & Lin 2012) fitted by the distributed randomized PCA; see the module docstring."""

    _local_class = local.PLSTReducer

    def _fit_dask(self, Y: da.Array, rng: np.random.Generator) -> None:
        components, mean = plst(Y, self.n_components_, random_state=rng, **_range_finder_params(self))
        self.decoder_ = np.asarray(components, dtype=np.float64)
        self.mean_ = np.asarray(mean, dtype=np.float64)


class RandomReducer(_DaskReducer, local.RandomReducer):
    """Gaussian projection with least-squares decoding on row blocks; see the module docstring."""

    _local_class = local.RandomReducer

    def _fit_dask(self, Y: da.Array, rng: np.random.Generator) -> None:
        phi = make_projection("gaussian", self.n_components_, self.n_labels_, rng)
        self.projection_ = np.asarray(phi, dtype=np.float64)
        self.decoder_ = _least_squares_decoder(_times(Y, np.ascontiguousarray(self.projection_.T)), Y)


class CSSPReducer(_DaskReducer, local.CSSPReducer):
    """ML-CSSP label selection (Bi & Kwok 2013) on row blocks; see the module docstring."""

    _local_class = local.CSSPReducer

    def _fit_dask(self, Y: da.Array, rng: np.random.Generator) -> None:
        indices, n_trials = cssp_select(
            Y, self.n_components_, random_state=rng, method=self.method, **_range_finder_params(self)
        )
        self.indices_ = np.asarray(indices)
        self.n_trials_ = int(n_trials)
        columns = self.indices_

        def selected(block: Any) -> np.ndarray:
            picked = block[:, columns]
            return np.asarray(picked.toarray() if hasattr(picked, "toarray") else picked, dtype=np.float64)

        Z = Y.map_blocks(selected, chunks=(Y.chunks[0], (len(columns),)), dtype=np.float64,
                         meta=np.empty((0, 0), dtype=np.float64))
        self.decoder_ = _least_squares_decoder(Z, Y)


def make_reducer(
    name: str,
    n_components: int,
    *,
    random_state: Any = None,
    n_oversamples: int | None = None,
    n_iter: int | str = "auto",
) -> PLSTReducer | RandomReducer | CSSPReducer:
    """The distributed reducer called ``name`` (``"plst"``, ``"random"`` or ``"cssp"``).

    Parameters
    ----------
    name : {"plst", "random", "cssp"}
        PLST (Tai & Lin 2012), a Gaussian projection (Hsu et al. 2009) or
        ML-CSSP (Bi & Kwok 2013). ``"rembrandt"`` needs the features'
        projector and is refused.
    n_components, random_state, n_oversamples, n_iter
        As in :func:`gpurpo.label_space.reducers.make_reducer`.

    Returns
    -------
    PLSTReducer, RandomReducer or CSSPReducer
        Unfitted.
    """
    check_choice(name, "reducer", REDUCERS)
    common = dict(random_state=random_state, n_oversamples=n_oversamples, n_iter=n_iter)
    if name == "plst":
        return PLSTReducer(n_components, **common)
    if name == "random":
        return RandomReducer(n_components, **common)
    return CSSPReducer(n_components, **common)
