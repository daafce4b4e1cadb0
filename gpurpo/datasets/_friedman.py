"""Multi-output versions of Friedman's first regression problem.

Joly, Geurts & Wehenkel (gradient tree boosting with random output
projections) build three multi-output problems on Friedman's function

    f(x) = 10 sin(pi x1 x2) + 20 (x3 - 0.5)^2 + 10 x4 + 5 x5,   x ~ U[0, 1]^5

(Friedman 1991) with standard normal noise e_j scaled by ``noise``:

``"chain"``
    y1 = f(x) + e1 and yj = y(j-1) + ej: outputs share f and their noises
    accumulate, so neighbouring outputs are strongly correlated.
``"group"``
    yj = f(x) + ej: every output is the same function plus its own noise.
``"ind"``
    x ~ U[0, 1]^(5d) and yj = f(x_{5j+1}, ..., x_{5j+5}) + ej: each output
    uses its own five inputs, so the outputs are independent.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from gpurpo._validation import check_choice, check_float, check_int
from gpurpo.backend import check_random_state

__all__ = ["make_friedman1_multioutput", "friedman1"]


def friedman1(X5: np.ndarray) -> np.ndarray:
    """Friedman's function of the five columns of ``X5`` (shape (n, 5))."""
    return (
        10.0 * np.sin(np.pi * X5[:, 0] * X5[:, 1])
        + 20.0 * (X5[:, 2] - 0.5) ** 2
        + 10.0 * X5[:, 3]
        + 5.0 * X5[:, 4]
    )


def make_friedman1_multioutput(
    kind: str = "chain",
    n_samples: int = 1000,
    n_outputs: int = 16,
    noise: float = 1.0,
    random_state: Any = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Generate the friedman1-chain, -group or -ind multi-output problem.

    Parameters
    ----------
    kind : {"chain", "group", "ind"}, default="chain"
        Which problem (see the module docstring).
    n_samples : int, default=1000
        Number of samples n.
    n_outputs : int, default=16
        Number of outputs d.
    noise : float, default=1.0
        Standard deviation of the Gaussian noise e_j added at each output.
    random_state : None, int or numpy Generator
        Seed; the same seed gives the same data.

    Returns
    -------
    X : ndarray of shape (n_samples, 5) or (n_samples, 5 * n_outputs) for "ind"
        Inputs uniform on [0, 1].
    Y : ndarray of shape (n_samples, n_outputs)
        Outputs.
    """
    check_choice(kind, "kind", ("chain", "group", "ind"))
    n = check_int(n_samples, "n_samples", low=1)
    d = check_int(n_outputs, "n_outputs", low=1)
    noise = check_float(noise, "noise", low=0.0)
    rng = check_random_state(random_state)

    n_inputs = 5 * d if kind == "ind" else 5
    X = rng.uniform(0.0, 1.0, size=(n, n_inputs))
    E = noise * rng.standard_normal((n, d))
    if kind == "ind":
        F = np.column_stack([friedman1(X[:, 5 * j : 5 * j + 5]) for j in range(d)])
        Y = F + E
    elif kind == "group":
        Y = friedman1(X)[:, None] + E
    else:
        Y = friedman1(X)[:, None] + np.cumsum(E, axis=1)
    return X, Y
