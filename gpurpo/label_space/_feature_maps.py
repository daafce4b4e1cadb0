"""Random Fourier features (Rahimi & Recht 2007) for the Rembrandt classification pipeline.

A shift-invariant kernel ``k(x, y) = k(x - y)`` is the Fourier transform of a
probability density ``p(w)`` (Bochner's theorem), so with ``D`` frequencies
``w_j ~ p`` and phases ``b_j ~ U[0, 2 pi)``,

    phi(x) = sqrt(2 / D) cos(x^T W + b)

satisfies ``E[phi(x)^T phi(y)] = k(x, y)`` (Rahimi & Recht, "Random features
for large-scale kernel machines", NIPS 2007, Algorithm 1). Two kernels:

* ``"rbf"``: ``k(x, y) = exp(-gamma ||x - y||_2^2)``, Gaussian frequencies
  ``w ~ N(0, 2 gamma I)``;
* ``"laplacian"``: ``k(x, y) = exp(-gamma ||x - y||_1)``, independent Cauchy
  frequencies of scale ``gamma`` (the Fourier transform of ``exp(-gamma |t|)``).

Frequencies and phases are drawn on the host from ``random_state`` and moved
to the device, so a seed gives the same map on every backend.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from sklearn.base import BaseEstimator, TransformerMixin
from sklearn.utils.validation import check_is_fitted

from gpurpo._input_features import check_feature_names, check_n_features
from gpurpo._validation import check_array, check_choice, check_float, check_int
from gpurpo.backend import check_random_state, resolve_backend
from gpurpo.label_space._ridge_estimator import in_namespace_of

__all__ = ["RandomFourierFeatures", "KERNELS"]

KERNELS = ("rbf", "laplacian")


def draw_frequencies(
    kernel: str, gamma: float, n_features: int, n_components: int, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """Frequencies ``W`` (p, D) and phases ``b`` (D,) for ``kernel``, on the host."""
    if kernel == "rbf":
        W = rng.standard_normal((n_features, n_components)) * math.sqrt(2.0 * gamma)
    else:
        W = rng.standard_cauchy((n_features, n_components)) * gamma
    b = rng.uniform(0.0, 2.0 * math.pi, size=n_components)
    return W, b


class RandomFourierFeatures(TransformerMixin, BaseEstimator):
    """Random Fourier feature map ``phi(x) = sqrt(2/D) cos(x^T W + b)``.

    Parameters
    ----------
    n_components : int, default=1000
        Number of random features ``D``.
    kernel : {"rbf", "laplacian"}, default="rbf"
        Gaussian (RBF) kernel ``exp(-gamma ||x - y||^2)`` with Gaussian
        frequencies, or Laplacian kernel ``exp(-gamma ||x - y||_1)`` with
        Cauchy frequencies.
    gamma : float or None, default=None
        Kernel parameter; ``None`` uses ``1 / (p * Var(X))`` (the
        ``"scale"`` rule of scikit-learn's SVC, ``Var`` over all entries of
        the training ``X``) for ``"rbf"`` and ``1 / (p * Std(X))`` for
        ``"laplacian"``.
    random_state : None, int or numpy Generator
        Seed of the frequencies and phases.
    device : {"auto", "cpu", "cuda"}, default="auto"

    Attributes
    ----------
    frequencies_ : ndarray, shape (n_features, n_components)
        ``W``, on the host as drawn.
    offsets_ : ndarray, shape (n_components,)
        ``b``.
    gamma_ : float
        The kernel parameter used.
    n_features_in_ : int
    feature_names_in_ : ndarray of str, shape (n_features_in_,)
        Column names of the data frame ``X`` given to ``fit``, when they are all
        strings; absent otherwise. Later inputs must have the same names in the
        same order.
    """

    def __init__(
        self,
        n_components: int = 1000,
        kernel: str = "rbf",
        gamma: float | None = None,
        random_state: Any = None,
        device: str = "auto",
    ) -> None:
        self.n_components = n_components
        self.kernel = kernel
        self.gamma = gamma
        self.random_state = random_state
        self.device = device

    def fit(self, X: Any, y: Any = None) -> RandomFourierFeatures:
        """Draw the frequencies for inputs of ``X``'s width (``X`` sets ``gamma=None``)."""
        D = check_int(self.n_components, "n_components", low=1)
        kernel = check_choice(self.kernel, "kernel", KERNELS)
        backend = resolve_backend(X, device=self.device)
        check_feature_names(self, X, reset=True)
        Xv = check_array(X, "X", backend, accept_sparse=False)
        xp = backend.xp
        n, p = Xv.shape
        if p < 1:
            raise ValueError(
                f"X has 0 feature(s) (shape={tuple(Xv.shape)}) while a minimum of 1 is required."
            )
        if self.gamma is None:
            spread = float(xp.var(Xv, dtype=xp.float64)) if kernel == "rbf" else float(
                xp.std(Xv, dtype=xp.float64)
            )
            gamma = 1.0 / (p * spread) if spread > 0 else 1.0
        else:
            gamma = check_float(self.gamma, "gamma", low=0.0, low_inclusive=False)
        rng = check_random_state(self.random_state)
        self.frequencies_, self.offsets_ = draw_frequencies(kernel, gamma, p, D, rng)
        self.gamma_ = gamma
        check_n_features(self, p, reset=True)
        return self

    def transform(self, X: Any) -> Any:
        """``sqrt(2/D) cos(X W + b)``, shape (n, D), in the namespace of ``X``."""
        check_is_fitted(self, "frequencies_")
        backend = resolve_backend(X, device=self.device)
        check_feature_names(self, X, reset=False)
        Xv = check_array(X, "X", backend, accept_sparse=False)
        check_n_features(self, Xv.shape[1], reset=False)
        xp = backend.xp
        dtype = xp.float32 if Xv.dtype == xp.float32 else xp.float64
        W = backend.asarray(self.frequencies_, dtype=dtype)
        b = backend.asarray(self.offsets_, dtype=dtype)
        scale = math.sqrt(2.0 / W.shape[1])
        out = xp.cos(Xv.astype(dtype) @ W + b[None, :]) * dtype(scale)
        return in_namespace_of(out, X)

    @property
    def _n_features_out(self) -> int:
        return int(self.frequencies_.shape[1])
