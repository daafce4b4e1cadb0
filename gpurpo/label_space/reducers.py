"""Linear label-space reducers: encode ``Y`` (n x d) to ``Z`` (n x k), decode ``Z`` back.

Every reducer is linear: ``Z = (Y - 1 mu^T) E`` and ``Y_hat = Z D + 1 mu^T``,
with an encoding ``E`` (d x k), a decoding ``D`` (k x d) and a shift ``mu``
(zero for ``"random"`` and ``"cssp"``). Sparse ``Y`` is never densified:
``Y E`` and ``Y^T Q`` are sparse-dense products. All arithmetic is written
once against ``xp``; CuPy input stays on the GPU.

``"plst"``
    Principal label space transformation (Tai & Lin, Neural Computation
    24(9), 2012, Algorithm 1): ``E = V_k``, ``D = V_k^T`` with ``V_k`` the
    top-``k`` principal directions of ``Y`` and ``mu`` its mean
    (:func:`gpurpo.linalg.plst`).
``"rembrandt"``
    Mineiro & Karampatziakis (arXiv:1412.6547), Algorithm 2 on the
    column-centred ``X`` and ``Y``: ``E = R``, ``D = R^T`` with ``R`` the
    top-``k`` eigenvectors of ``Y_c^T P_X Y_c``, ``P_X`` the (ridge) projector
    on the centred features (:func:`gpurpo.linalg.rembrandt`). Centring is
    the same as adding an intercept column to ``X``; it keeps the mean label
    vector out of the embedding. With a linear least-squares estimator the
    resulting model is reduced-rank regression.
``"random"``
    Compressed-sensing style encoding by a Gaussian projection ``Phi``
    (k x d, entries N(0, 1/k); Hsu, Kakade, Langford & Zhang, NIPS 2009):
    ``E = Phi^T``. Decoding is least squares on the training labels,
    ``D = argmin_D ||Y - Z D||_F = Z^+ Y``, so ``Z D`` is the projection of
    ``Y`` on the span of its ``k`` random sketches (the randomized range
    finder of Halko, Martinsson & Tropp 2011 without power iterations).
``"cssp"``
    ML-CSSP (Bi & Kwok, ICML 2013, Algorithm 1): ``k`` labels ``C`` chosen by
    leverage-score sampling (:func:`gpurpo.linalg.cssp_select`), ``Z = Y_C``
    and ``D = Y_C^+ Y`` (line 11), so ``Z D = Y_C Y_C^+ Y``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from gpurpo._validation import check_choice, check_int
from gpurpo.backend import Backend, check_random_state, resolve_backend, use_backend
from gpurpo.label_space._ridge_estimator import _column_means, _cross
from gpurpo.linalg import as_operator, centered, cssp_select, plst, qr_factor, rembrandt
from gpurpo.projections import make_projection

__all__ = [
    "REDUCERS",
    "LabelReducer",
    "PLSTReducer",
    "RembrandtReducer",
    "RandomReducer",
    "CSSPReducer",
    "make_reducer",
]

REDUCERS = ("plst", "rembrandt", "random", "cssp")

#: Default oversampling of Rembrandt's range finder (the paper's p = 20).
REMBRANDT_OVERSAMPLES = 20


def _dense(a: Any, backend: Backend) -> Any:
    return a.toarray() if backend.issparse(a) else a


def least_squares_decoder(Z: Any, Y: Any, backend: Backend) -> Any:
    """``D = Z^+ Y`` (k x d) from a thin QR ``Z = Q R``: ``D = R^+ (Y^T Q)^T``.

    ``Q`` comes from Cholesky QR2 with a Householder fallback
    (:func:`gpurpo.linalg.qr_factor`); the pseudo-inverse of the small
    triangular factor handles rank-deficient codes. ``Y`` may be sparse.
    """
    xp = backend.xp
    Q, R = qr_factor(xp.asarray(Z, dtype=xp.float64), xp)
    return xp.linalg.pinv(R) @ _cross(Q, Y, backend).astype(xp.float64)


class LabelReducer:
    """Base class of the linear reducers (see the module docstring).

    Parameters
    ----------
    n_components : int
        Code length ``k``, ``1 <= k <= min(n, d)``.
    random_state : None, int or numpy Generator
        Seed of the randomized factorisation, projection or sampling.
    n_oversamples : int or None
        Oversampling of the randomized range finders (None: the default of
        the :mod:`gpurpo.linalg` function used).
    n_iter : int or "auto"
        Power (range-finder) iterations; ``"auto"``: the default of the
        :mod:`gpurpo.linalg` function used.

    Attributes
    ----------
    n_components_ : int
    n_labels_ : int
    mean_ : array of shape (d,) or None
        Shift ``mu`` (None when the reducer does not centre).
    decoder_ : array, shape (k, d)
        ``D``, on the backend of the training labels.
    """

    #: The reducer's name in :data:`REDUCERS`.
    name = ""

    def __init__(
        self,
        n_components: int,
        *,
        random_state: Any = None,
        n_oversamples: int | None = None,
        n_iter: int | str = "auto",
    ) -> None:
        self.n_components = n_components
        self.random_state = random_state
        self.n_oversamples = n_oversamples
        self.n_iter = n_iter

    def _range_params(self) -> dict[str, Any]:
        params: dict[str, Any] = {}
        if self.n_oversamples is not None:
            params["n_oversamples"] = self.n_oversamples
        if self.n_iter != "auto":
            params["n_iter"] = self.n_iter
        return params

    def fit(self, Y: Any, X: Any = None, backend: Backend | None = None) -> LabelReducer:
        """Learn ``E``, ``D`` and ``mu`` from labels ``Y`` (n, d), dense or sparse, on ``backend``."""
        if backend is None:
            backend = resolve_backend(X, Y)
        self.backend_ = backend
        self.n_labels_ = int(Y.shape[1])
        # an int (2.5 was truncated) in [1, min(n, d)], for every reducer
        self.n_components_ = check_int(
            self.n_components, "n_components", low=1, high=min(int(Y.shape[0]), self.n_labels_)
        )
        self.mean_ = None
        self._fit(Y, X, backend, check_random_state(self.random_state))
        return self

    def _fit(self, Y: Any, X: Any, backend: Backend, rng: np.random.Generator) -> None:
        raise NotImplementedError

    def _project(self, Y: Any, backend: Backend) -> Any:
        """``Y E`` as a dense (n, k) array."""
        raise NotImplementedError

    def encode(self, Y: Any, backend: Backend | None = None) -> Any:
        """``Z = (Y - 1 mu^T) E``, dense (n, k), on ``backend`` (default: the fit backend)."""
        backend = self.backend_ if backend is None else backend
        Z = backend.xp.asarray(self._project(Y, backend), dtype=backend.xp.float64)
        if self.mean_ is not None:
            mean = backend.asarray(self.mean_, dtype=backend.xp.float64)
            Z = Z - self._project(mean[None, :], backend)
        return Z

    def decode(self, Z: Any, backend: Backend | None = None) -> Any:
        """``Y_hat = Z D + 1 mu^T``, dense (n, d), on ``backend`` (default: the fit backend)."""
        backend = self.backend_ if backend is None else backend
        xp = backend.xp
        out = xp.asarray(Z, dtype=xp.float64) @ backend.asarray(self.decoder_, dtype=xp.float64)
        if self.mean_ is not None:
            out += backend.asarray(self.mean_, dtype=xp.float64)[None, :]
        return out


class _OrthonormalReducer(LabelReducer):
    """``E = V`` with orthonormal columns and ``D = V^T``."""

    def _project(self, Y: Any, backend: Backend) -> Any:
        return _dense(Y @ backend.xp.ascontiguousarray(backend.asarray(self.decoder_).T), backend)


class PLSTReducer(_OrthonormalReducer):
    """PLST: top principal directions of ``Y`` (Tai & Lin 2012); see the module docstring."""

    name = "plst"

    def _fit(self, Y: Any, X: Any, backend: Backend, rng: np.random.Generator) -> None:
        components, mean = plst(Y, self.n_components_, random_state=rng, **self._range_params())
        self.decoder_ = backend.asarray(components, dtype=backend.xp.float64)
        self.mean_ = backend.asarray(mean, dtype=backend.xp.float64)


class RembrandtReducer(_OrthonormalReducer):
    """Rembrandt embedding of the centred labels (Mineiro & Karampatziakis, Algorithm 2).

    Parameters
    ----------
    alpha : float, default=1.0
        Ridge penalty of the least-squares fits inside Rembrandt.
    n_components, random_state, n_oversamples, n_iter
        As in :class:`LabelReducer`; the oversampling (default 20, the
        paper's) is capped at ``max(0, n_features - k)`` since
        ``Y_c^T P_X Y_c`` has rank at most ``n_features``.

    Attributes
    ----------
    eigenvalues_ : array, shape (k,)
        Eigenvalues of ``Y_c^T P_X Y_c`` for the embedding directions.
    """

    name = "rembrandt"

    def __init__(
        self,
        n_components: int,
        *,
        alpha: float = 1.0,
        random_state: Any = None,
        n_oversamples: int | None = None,
        n_iter: int | str = "auto",
    ) -> None:
        super().__init__(
            n_components, random_state=random_state, n_oversamples=n_oversamples, n_iter=n_iter
        )
        self.alpha = alpha

    def _fit(self, Y: Any, X: Any, backend: Backend, rng: np.random.Generator) -> None:
        if X is None:
            raise ValueError("reducer='rembrandt' needs the features X, got None")
        xp = backend.xp
        y_mean = _column_means(Y, backend, xp.float64)
        x_mean = _column_means(X, backend, xp.float64)
        # Centred features give P_X 1 = 0, hence Y_c^T P_X Y_c = Y^T P_X Y: Y is
        # passed as is, so that rembrandt sees (and can exploit) a sparse Y.
        Y_op = as_operator(Y, "Y", backend)
        if backend.issparse(X):
            X_op = centered(as_operator(X, "X", backend), x_mean)
        else:
            X_op = as_operator(xp.asarray(X, dtype=xp.float64) - x_mean[None, :], "X", backend)
        # Y_c^T P_X Y_c has rank at most p = n_features: sampling more than
        # max(k, p) directions only adds its null space (and rank-deficient blocks).
        params = self._range_params()
        oversamples = params.get("n_oversamples", REMBRANDT_OVERSAMPLES)
        params["n_oversamples"] = max(0, min(oversamples, int(X.shape[1]) - self.n_components_))
        # Both arguments are operators: the active backend tells rembrandt where they live.
        with use_backend(backend.name):
            R, eigenvalues = rembrandt(
                X_op, Y_op, self.n_components_, alpha=self.alpha, random_state=rng, **params
            )
        self.decoder_ = xp.ascontiguousarray(backend.asarray(R, dtype=xp.float64).T)
        self.eigenvalues_ = backend.asarray(eigenvalues)
        self.mean_ = y_mean


class RandomReducer(LabelReducer):
    """Gaussian projection with least-squares decoding; see the module docstring.

    Attributes
    ----------
    projection_ : array, shape (k, d)
        ``Phi`` (drawn on the host by :func:`gpurpo.projections.make_projection`).
    """

    name = "random"

    def _fit(self, Y: Any, X: Any, backend: Backend, rng: np.random.Generator) -> None:
        phi = make_projection("gaussian", self.n_components_, self.n_labels_, rng)
        self.projection_ = backend.asarray(phi, dtype=backend.xp.float64)
        self.decoder_ = least_squares_decoder(self._project(Y, backend), Y, backend)

    def _project(self, Y: Any, backend: Backend) -> Any:
        return _dense(Y @ backend.xp.ascontiguousarray(backend.asarray(self.projection_).T), backend)


class CSSPReducer(LabelReducer):
    """ML-CSSP label selection with ``Y_C^+ Y`` decoding (Bi & Kwok 2013, Algorithm 1).

    Parameters
    ----------
    method : {"sample", "sample_qr"}, default="sample"
        Selection rule of :func:`gpurpo.linalg.cssp_select`: Bi & Kwok's
        leverage-score sampling until ``k`` distinct labels, or Boutsidis,
        Mahoney & Drineas' sampling followed by pivoted QR.
    n_components, random_state, n_oversamples, n_iter
        As in :class:`LabelReducer`.

    Attributes
    ----------
    indices_ : array of int64, shape (k,)
        The selected labels ``C``.
    n_trials_ : int
        Number of draws the sampling made.
    """

    name = "cssp"

    def __init__(
        self,
        n_components: int,
        *,
        method: str = "sample",
        random_state: Any = None,
        n_oversamples: int | None = None,
        n_iter: int | str = "auto",
    ) -> None:
        super().__init__(
            n_components, random_state=random_state, n_oversamples=n_oversamples, n_iter=n_iter
        )
        self.method = method

    def _fit(self, Y: Any, X: Any, backend: Backend, rng: np.random.Generator) -> None:
        indices, n_trials = cssp_select(
            Y, self.n_components_, random_state=rng, method=self.method, **self._range_params()
        )
        self.indices_ = backend.asarray(indices)
        self.n_trials_ = int(n_trials)
        self.decoder_ = least_squares_decoder(self._project(Y, backend), Y, backend)

    def _project(self, Y: Any, backend: Backend) -> Any:
        return _dense(Y[:, backend.asarray(self.indices_)], backend)


def make_reducer(
    name: str,
    n_components: int,
    *,
    alpha: float = 1.0,
    random_state: Any = None,
    n_oversamples: int | None = None,
    n_iter: int | str = "auto",
) -> LabelReducer:
    """The reducer called ``name`` (``"plst"``, ``"rembrandt"``, ``"random"`` or ``"cssp"``).

    ``alpha`` is only used by ``"rembrandt"``; the other arguments are those
    of :class:`LabelReducer`.

    Parameters
    ----------
    name : {"plst", "rembrandt", "random", "cssp"}
        The reducer (see the module docstring): PLST (Tai & Lin 2012),
        Rembrandt (Mineiro & Karampatziakis 2014), a Gaussian projection
        (Hsu et al. 2009) or ML-CSSP (Bi & Kwok 2013).
    n_components : int
        Code length ``k``, ``1 <= k <= min(n, d)``.
    alpha : float, default=1.0
        Ridge parameter of :class:`RembrandtReducer`.
    random_state : None, int or numpy Generator, default=None
        Seed of the randomized factorisation, projection or sampling.
    n_oversamples : int or None, default=None
        Oversampling of the randomized range finders.
    n_iter : int or "auto", default="auto"
        Power (range-finder) iterations.

    Returns
    -------
    LabelReducer
        An unfitted :class:`PLSTReducer`, :class:`RembrandtReducer`,
        :class:`RandomReducer` or :class:`CSSPReducer`.

    Raises
    ------
    ValueError
        If ``name`` is not in :data:`REDUCERS`.
    """
    check_choice(name, "reducer", REDUCERS)
    common = dict(random_state=random_state, n_oversamples=n_oversamples, n_iter=n_iter)
    if name == "plst":
        return PLSTReducer(n_components, **common)
    if name == "rembrandt":
        return RembrandtReducer(n_components, alpha=alpha, **common)
    if name == "random":
        return RandomReducer(n_components, **common)
    return CSSPReducer(n_components, **common)
