"""The output space each tree of a forest is grown in.

Joly, Geurts & Wehenkel (2014), section 3.2: Algorithm 1 grows every tree of
the ensemble on ONE random projection ``Y Phi^T`` of the outputs, Algorithm 2
draws a fresh ``Phi_t`` for every tree ``t`` (the default: the extra
randomisation lowers the variance of the ensemble, so it is never worse on
average). Leaves are labelled in the original space either way.

:class:`ProjectionPlan` validates the forest's ``projection`` /
``n_components`` / ``shared_projection`` parameters once and then gives the
float32 targets ``(n, T, m)`` of a batch of ``T`` trees: with per-tree
projections the ``T`` matrices ``Phi_t`` (drawn on the host, each from its
tree's own seed, so a tree's projection does not depend on how trees are
batched) are stacked into one ``(T m, d)`` matrix and applied to ``Y`` in ONE
product (:func:`gpurpo.projections.project`).

The plan is a building block of distributed fitting too: :mod:`gpurpo.dask`
builds it on the client and ships it to the workers that grow the trees.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import scipy.sparse as sp
from sklearn.base import clone

from gpurpo import projections
from gpurpo.backend import Backend

__all__ = ["ProjectionPlan", "MAX_DENSE_TARGET_BYTES"]

MAX_DENSE_TARGET_BYTES = 2 * 1024**3


def _stack(blocks: list[Any]) -> Any:
    if any(sp.issparse(b) for b in blocks):
        return sp.vstack([sp.csr_matrix(b) for b in blocks], format="csr")
    return np.vstack(blocks)


class ProjectionPlan:
    """Projected targets of the trees of a forest.

    Parameters
    ----------
    projection : None, str or OutputProjection
        ``None``: trees are grown on the original outputs. A kind of
        :data:`gpurpo.projections.KINDS`, drawn with ``n_components`` rows.
        An :class:`~gpurpo.projections.OutputProjection`: each projection is
        a clone of it, fitted (drawn) with its own seed; its ``n_components``
        and other parameters apply (the forest's ``n_components`` does not).
    n_components : int, float or {"auto", "log", "sqrt"}
        m for a projection given by name
        (:func:`gpurpo.projections.resolve_n_components`).
    shared : bool
        One projection for all trees (Algorithm 1) instead of one per tree
        (Algorithm 2).
    n_samples, n_outputs : int
        Shape (n, d) of the output matrix of the first fit: n resolves
        ``n_components="auto"`` and draws every projection, so a warm start
        on other rows keeps them; :meth:`targets` takes any number of rows.
    rng : numpy.random.Generator
        Draws the shared projection (when ``shared``).

    Attributes
    ----------
    n_components : int
        m, the number of outputs each tree is grown on (d without projection).
    shared_components : ndarray, CSR matrix or None
        The shared projection (m, d) on the host, when ``shared``.
    """

    def __init__(
        self,
        projection: Any,
        n_components: Any,
        shared: bool,
        n_samples: int,
        n_outputs: int,
        rng: np.random.Generator,
    ) -> None:
        if not isinstance(shared, (bool, np.bool_)):
            raise TypeError(
                f"shared_projection must be a bool, got {type(shared).__name__} {shared!r}"
            )
        if isinstance(projection, projections.OutputProjection):
            projection = clone(projection)
        self.projection = projection
        self.shared = bool(shared)
        self.n = int(n_samples)
        self.d = int(n_outputs)
        self.shared_components: Any = None
        self._shape_only = None
        if projection is None:
            # unused, but validated (scikit-learn checks unused parameters too)
            projections.resolve_n_components(n_components, self.d, n_samples=self.n)
            self.n_components = self.d
        elif isinstance(projection, str):
            if projection not in projections.KINDS:
                raise ValueError(
                    f"projection must be None, one of {projections.KINDS} or an "
                    f"OutputProjection, got {projection!r}"
                )
            self.n_components = projections.resolve_n_components(
                n_components, self.d, n_samples=self.n
            )
            if not self.shared:
                # the draw of one tree raises here, before any growth, on impossible settings
                # (e.g. subsampling more outputs than d without replacement)
                projections.make_projection(projection, self.n_components, self.d, 0)
        elif isinstance(projection, projections.OutputProjection):
            # Drawing a projection only uses the shape of Y: fit on an empty
            # CSR matrix of that shape (no copy of the data, no validation pass).
            self._shape_only = sp.csr_matrix((self.n, self.d), dtype=np.float32)
            probe = clone(projection).set_params(random_state=0).fit(self._shape_only)
            self.n_components = int(probe.n_components_)
        else:
            raise TypeError(
                f"projection must be None, one of {projections.KINDS} or an OutputProjection, "
                f"got {type(projection).__name__} {projection!r}"
            )
        if projection is not None and self.shared:
            if isinstance(projection, str):
                self.shared_components = projections.make_projection(
                    projection, self.n_components, self.d, rng, n_samples=self.n
                )
            else:
                est = clone(projection)
                if est.random_state is None:
                    est.set_params(random_state=int(rng.integers(0, 2**31 - 1)))
                self.shared_components = est.fit(self._shape_only).components_
        self._cache: dict[str, Any] = {}

    # ------------------------------------------------------------------

    @property
    def per_tree(self) -> bool:
        """True when every tree has its own projection (Algorithm 2)."""
        return self.projection is not None and not self.shared

    def components(self, seed: int) -> Any:
        """The projection (m, d) of the tree with projection seed ``seed`` (host)."""
        if self.projection is None:
            return None
        if self.shared:
            return self.shared_components
        if isinstance(self.projection, str):
            return projections.make_projection(
                self.projection, self.n_components, self.d, int(seed), n_samples=self.n
            )
        est = clone(self.projection).set_params(random_state=int(seed))
        return est.fit(self._shape_only).components_

    def targets(self, Y: Any, seeds: np.ndarray, backend: Backend) -> Any:
        """Float32 targets (n, T, m) of the T trees whose projection seeds are ``seeds``.

        ``Y`` is the float32 output matrix (dense or CSR) on ``backend``.
        Without projection or with a shared one, the (n, m) matrix is
        computed once and broadcast over the trees.
        """
        xp = backend.xp
        n = int(Y.shape[0])
        n_trees = len(seeds)
        if not self.per_tree:
            base = self._cache.get(backend.name)
            if base is None:
                base = self._common(Y, backend)
                self._cache[backend.name] = base
            return xp.broadcast_to(base[:, None, :], (n, n_trees, base.shape[1]))
        stacked = _stack([self.components(s) for s in seeds])
        Z = projections.project(Y, stacked, backend)
        return xp.asarray(Z, dtype=xp.float32).reshape(n, n_trees, self.n_components)

    def _common(self, Y: Any, backend: Backend) -> Any:
        xp = backend.xp
        if self.projection is None:
            if backend.issparse(Y):
                size = 4 * int(Y.shape[0]) * self.d
                if size > MAX_DENSE_TARGET_BYTES:
                    raise ValueError(
                        f"projection=None grows trees on the outputs as a dense float32 array "
                        f"of shape {(int(Y.shape[0]), self.d)} ({size} bytes); pass a projection "
                        "(e.g. projection='gaussian') for sparse outputs this wide"
                    )
                Y = Y.toarray()
            return xp.ascontiguousarray(xp.asarray(Y, dtype=xp.float32))
        Z = projections.project(Y, self.shared_components, backend)
        return xp.ascontiguousarray(xp.asarray(Z, dtype=xp.float32))

    def clear(self) -> None:
        """Drop the cached (n, m) targets."""
        self._cache.clear()
