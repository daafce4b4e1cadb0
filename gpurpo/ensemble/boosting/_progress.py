"""Progress of the boosting loop: a bar over the rounds and a table of losses.

``verbose >= 1`` shows a :mod:`tqdm.auto` bar (terminal or notebook, on
stderr) over the boosting rounds, whose postfix is the latest training loss
and, with a validation set, the latest validation loss. ``verbose >= 2``
also writes one line per round (round, training loss, validation loss and
score, elapsed time) with ``tqdm.write``, above the bar. The forests report
their trees the same way.

The training loss stays on the device during boosting (reading it syncs a
GPU), so at ``verbose=1`` the postfix reads it at most once per refresh
interval of the bar, and on the last round.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from tqdm.auto import tqdm

__all__ = ["BoostingProgress"]


class BoostingProgress:
    """Progress report of one fit, a context manager that closes the bar.

    Parameters
    ----------
    name : str
        The bar's description (the estimator's class name).
    verbose : int
        0: silent; 1: the bar; 2 and more: the bar and a line per round.
    total : int
        Rounds the fit boosts up to (``n_estimators``).
    initial : int
        Rounds already fitted (a warm start continues from them).
    with_validation : bool
        Whether a validation loss is tracked (``eval_set`` or early stopping).
    score_name : str
        Name of the validation score of the table (e.g. ``"R2"``).
    """

    def __init__(
        self, name: str, verbose: int, total: int, initial: int, with_validation: bool,
        score_name: str,
    ) -> None:
        self.verbose = int(verbose)
        self.with_validation = with_validation
        self._bar = tqdm(
            total=total, initial=initial, desc=name, unit="round", disable=not self.verbose,
            leave=True,
        )
        self._start = time.perf_counter()
        self._next_postfix = self._start
        self._postfix = ""
        if self.verbose >= 2:
            cols = f"{'Iter':>6} {'Train loss':>12}"
            if with_validation:
                cols += f" {'Val loss':>12} {'Val ' + score_name:>12}"
            tqdm.write(cols + f" {'Elapsed':>9}")

    def __enter__(self) -> BoostingProgress:
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self._bar.close()

    def update(
        self, iteration: int, train_loss: Any, val_loss: float | None,
        score: Callable[[], float] | None, last: bool,
    ) -> None:
        """Advance the bar by one round.

        Parameters
        ----------
        iteration : int
            Rounds fitted so far, this one included (1-based).
        train_loss : scalar (host or device)
            Training loss after this round.
        val_loss : float or None
            Validation loss after this round (None without validation).
        score : callable or None
            Returns the validation score; called for the table lines only.
        last : bool
            Whether this is the last round of the fit (its losses stay on the bar).
        """
        if not self.verbose:
            return
        now = time.perf_counter()
        if self.verbose >= 2:
            line = f"{iteration:>6d} {float(train_loss):>12.6g}"
            if val_loss is not None and score is not None:
                line += f" {val_loss:>12.6g} {score():>12.4f}"
            tqdm.write(line + f" {now - self._start:>8.2f}s")
        if last or now >= self._next_postfix:
            self._postfix = f"train loss={float(train_loss):.6g}"
            if val_loss is not None:
                self._postfix += f", val loss={val_loss:.6g}"
            self._bar.set_postfix_str(self._postfix, refresh=False)
            self._next_postfix = now + self._bar.mininterval
        self._bar.update(1)

    def stopped(self, iteration: int, best: int, n_iter_no_change: int) -> None:
        """End the bar early: boosting stopped at ``iteration`` and keeps ``best`` rounds.

        Parameters
        ----------
        iteration : int
            Rounds fitted when boosting stopped.
        best : int
            Rounds of the best validation loss (the model is cut back to them).
        n_iter_no_change : int
            Rounds without improvement that stopped boosting.
        """
        if not self.verbose:
            return
        if self.verbose >= 2:
            tqdm.write(
                f"stopped at iteration {iteration}: {n_iter_no_change} iterations without "
                f"improvement of the validation loss; keeping the first {best}"
            )
        # the bar ends full at the round boosting stopped
        self._bar.total = iteration
        container = getattr(self._bar, "container", None)  # the notebook widget
        if container is not None:
            container.children[1].max = iteration
        self._bar.set_postfix_str(f"{self._postfix}, stopped, best iteration {best}", refresh=False)
        self._bar.refresh()
