"""Early stopping of gradient boosting on a validation loss.

The validation set is either given (``eval_set``) or a random fraction of
the training rows held out before boosting starts. After every iteration
the validation loss is compared with the best one so far: an iteration
improves when its loss is below ``(1 - tol)`` times the best (every
boosting loss is non-negative, so ``tol`` is a relative improvement).
Boosting stops after ``n_iter_no_change`` iterations in a row without
improvement, and the model is cut back to the best iteration.
"""

from __future__ import annotations

import math

import numpy as np

from gpurpo._validation import check_float, check_int

__all__ = ["EarlyStopping", "validation_split"]


def validation_split(
    n_samples: int, fraction: float, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """Random (train, validation) row indices, drawn on the host.

    Parameters
    ----------
    n_samples : int
    fraction : float in (0, 1)
        Fraction of rows held out (rounded up, at least one row, and at least
        one row is left for training).
    rng : numpy Generator

    Returns
    -------
    train, validation : sorted int64 arrays

    Raises
    ------
    ValueError
        When fewer than two rows are available.
    """
    if n_samples < 2:
        raise ValueError(
            "validation_fraction needs at least 2 training samples to hold some out, "
            f"got n_samples={n_samples}"
        )
    n_val = min(n_samples - 1, max(1, int(math.ceil(fraction * n_samples))))
    perm = rng.permutation(n_samples)
    return np.sort(perm[n_val:]), np.sort(perm[:n_val])


class EarlyStopping:
    """Track the validation loss and decide when to stop.

    Parameters
    ----------
    n_iter_no_change : int or None
        Stop after this many iterations without improvement (``None``: only
        record the losses, never stop).
    tol : float >= 0
        Relative improvement needed: ``loss < (1 - tol) * best``.

    Attributes
    ----------
    best_loss : float
    best_iteration : int
        Number of boosting iterations of the best model so far (0 = the
        constant initial model).
    history : list of float
        Validation loss after each recorded iteration (the first entry is the
        initial model's).
    """

    def __init__(self, n_iter_no_change: int | None, tol: float) -> None:
        if n_iter_no_change is not None:
            check_int(n_iter_no_change, "n_iter_no_change", low=1)
        self.n_iter_no_change = n_iter_no_change
        self.tol = check_float(tol, "tol", low=0.0)
        self.best_loss = math.inf
        self.best_iteration = 0
        self.history: list[float] = []
        self._reference = math.inf
        self._since_best = 0

    def start(self, n_iterations: int, loss: float) -> None:
        """Record the loss of the model with ``n_iterations`` iterations before boosting."""
        self.history.append(loss)
        self.best_loss = loss
        self.best_iteration = n_iterations
        self._reference = loss
        self._since_best = 0

    def update(self, n_iterations: int, loss: float) -> bool:
        """Record the loss after ``n_iterations`` iterations; return True to stop.

        The counter of iterations without improvement is reset when the loss
        drops below ``(1 - tol)`` times the loss of the last significant
        improvement; the model kept is the one of lowest loss.
        """
        self.history.append(loss)
        if loss < self.best_loss:
            self.best_loss = loss
            self.best_iteration = n_iterations
        if loss < (1.0 - self.tol) * self._reference:
            self._reference = loss
            self._since_best = 0
            return False
        self._since_best += 1
        return self.n_iter_no_change is not None and self._since_best >= self.n_iter_no_change
