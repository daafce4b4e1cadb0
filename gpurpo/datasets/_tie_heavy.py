"""Multi-target regression data whose features split the rows in the same ways (tie-heavy).

Real multi-target sets often carry counts of heavy-tailed, correlated
quantities, duplicated columns or few-valued integers: many candidate splits of
a node then have exactly the same gain, and how a tree chooses among them
shows in its accuracy (scikit-learn chooses at random through a fresh feature
order at every node). These generators make such data at a few hundred rows,
the size of those sets.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from gpurpo._validation import check_int
from gpurpo.backend import check_random_state

__all__ = ["make_correlated_counts", "make_duplicated_features", "make_few_valued_features"]


def make_correlated_counts(
    n_samples: int = 400, n_features: int = 300, n_outputs: int = 16, n_factors: int = 5,
    random_state: Any = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Rounded exponentials of a few shared factors, and heavy-tailed targets of the same factors.

    ``X = round(exp(0.8 Z A + 5) / 5) * 5`` and
    ``Y = exp(0.5 Z B + 7) + 50 eps`` with ``Z`` (n, n_factors), ``A``, ``B`` and
    ``eps`` standard normal: correlated counts in steps of 5, so that many
    features order a node's rows alike.

    Returns
    -------
    X : float64 ndarray (n_samples, n_features)
    Y : float64 ndarray (n_samples, n_outputs)
    """
    n, p, d, k = _sizes(n_samples, n_features, n_outputs, n_factors)
    rng = check_random_state(random_state)
    Z = rng.standard_normal((n, k))
    X = np.round(np.exp(Z @ rng.standard_normal((k, p)) * 0.8 + 5) / 5) * 5
    Y = np.exp(Z @ rng.standard_normal((k, d)) * 0.5 + 7) + 50 * rng.standard_normal((n, d))
    return X, Y


def make_duplicated_features(
    n_samples: int = 240, n_features: int = 15, n_copies: int = 4, n_outputs: int = 6,
    random_state: Any = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Standard normal features, each present ``n_copies`` times side by side.

    ``Y_j = x_j^2 + x_{j+1} + 0.3 eps`` for ``j < n_outputs`` (needs
    ``n_outputs < n_features``): every split has ``n_copies`` twins of equal gain.

    Returns
    -------
    X : float64 ndarray (n_samples, n_features * n_copies)
    Y : float64 ndarray (n_samples, n_outputs)
    """
    n, p, d, copies = _sizes(n_samples, n_features, n_outputs, n_copies, "n_copies")
    if d >= p:
        raise ValueError(f"n_outputs must be below n_features ({p}), got {d}")
    rng = check_random_state(random_state)
    base = rng.standard_normal((n, p))
    Y = base[:, :d] ** 2 + base[:, 1 : d + 1] + 0.3 * rng.standard_normal((n, d))
    return np.repeat(base, copies, axis=1), Y


def make_few_valued_features(
    n_samples: int = 240, n_features: int = 40, n_values: int = 3, n_outputs: int = 6,
    random_state: Any = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Integer features of ``n_values`` values and sparse linear targets of them.

    ``Y = X W + 0.5 eps`` with a fifth of ``W``'s entries standard normal and
    the rest zero: many features partition a node the same way.

    Returns
    -------
    X : float64 ndarray (n_samples, n_features), values ``0 .. n_values - 1``
    Y : float64 ndarray (n_samples, n_outputs)
    """
    n, p, d, levels = _sizes(n_samples, n_features, n_outputs, n_values, "n_values")
    if levels < 2:
        raise ValueError(f"n_values must be at least 2, got {levels}")
    rng = check_random_state(random_state)
    X = rng.integers(0, levels, size=(n, p)).astype(np.float64)
    W = rng.standard_normal((p, d)) * (rng.random((p, d)) < 0.2)
    return X, X @ W + 0.5 * rng.standard_normal((n, d))


def _sizes(n_samples: Any, n_features: Any, n_outputs: Any, last: Any, last_name: str = "n_factors"
           ) -> tuple[int, int, int, int]:
    return (check_int(n_samples, "n_samples", low=2), check_int(n_features, "n_features", low=1),
            check_int(n_outputs, "n_outputs", low=1), check_int(last, last_name, low=1))
