"""Loss functions of multi-output gradient boosting.

Joly, Wehenkel & Geurts (2019), *Gradient tree boosting with random output
projections for multi-label classification and multi-output regression*,
Section 2, use a loss ``l(y, f) = sum_j l_j(y_j, f_j)`` that decomposes over
the ``d`` outputs. Each loss here provides, for a target matrix ``Y`` and a
score matrix ``F`` of shape ``(n, d)`` (all on one backend, NumPy or CuPy):

* :meth:`Loss.init_estimate` -- the constant model ``f_0 = argmin_rho
  sum_i w_i l(y_i, rho)`` (Algorithms 1-4, line 1), one value per output;
* :meth:`Loss.negative_gradient` -- the pseudo-residuals ``g_i = -dl/df``
  at ``f_{m-1}(x_i)`` (line 3);
* :meth:`Loss.fit_step` -- the step ``rho_m in R^d`` minimising
  ``sum_i w_i l(y_i, f_{m-1}(x_i) + rho_m * h_m(x_i))`` separately for every
  output (the per-output linear fit of the tree predictions to the outputs
  of gbrt-rpo; used by every strategy), and :meth:`Loss.fit_step_from_leaves`,
  the same for a tree given by its leaves (``h_m(x_i) = values[leaf_i]``),
  which the squared error and the log loss take without the (n, d) matrix of
  tree predictions (:mod:`gpurpo.ensemble.boosting.round_kernels`);
* :meth:`Loss.leaf_values` -- the alternative to one step per output
  (``leaf_step="per_leaf"``): the optimal value of every (leaf, output) pair,
  ``argmin_v sum_{i in leaf} w_i l_j(y_ij, f_ij + v)``, as in Friedman's
  TreeBoost (2001, Section 4.4) and XGBoost's vector leaves: the leaf mean of
  the residuals (squared error), their weighted median (absolute error), or
  one Newton step ``sum w g / sum w p (1 - p)`` (log loss);
* :meth:`Loss.loss` -- the weighted mean loss per sample and output.

Losses:

``"squared_error"``
    ``l_j(y, f) = (y - f)^2 / 2``; gradient ``y - f``; ``f_0`` the weighted
    mean; the step has the closed form ``rho_j = sum_i w_i g_ij h_ij /
    sum_i w_i h_ij^2`` (the least-squares fits of the paper's eqs. 20 and 23).
``"absolute_error"``
    ``l_j(y, f) = |y - f|``; gradient ``sign(y - f)``; ``f_0`` the weighted
    median; the step is the exact minimiser of the piecewise-linear convex
    objective, a weighted median of ``(y_ij - f_ij) / h_ij`` with weights
    ``w_i |h_ij|`` (:func:`gpurpo.ensemble.boosting._median_kernels.weighted_median_columns`;
    on the CPU a selection, :mod:`gpurpo.ensemble.boosting._median_kernels`).
``"log_loss"``
    multi-label logistic loss (the paper's eq. 8), for labels ``y_j`` in
    ``{-1, 1}`` (``{0, 1}`` is mapped to it):
    ``l_j(y, F) = log(1 + exp(-y F))`` with ``F`` the log-odds (the paper's
    ``log(1 + exp(-2 y f))`` with ``F = 2 f``; gradient boosting with an
    optimal step gives the same model for either scaling of the score, up
    to that factor). Probabilities are ``sigmoid(F)``. Gradient
    ``t - sigmoid(F)`` with ``t = (y + 1) / 2``; ``f_0`` the log-odds of the
    weighted label frequency; the step is found by a safeguarded Newton
    search per output (:func:`gpurpo.ensemble.boosting.step_sizes.logistic_step`).

Targets and scores are float64; gradients are returned as float32 (the dtype
of the histograms), sums are accumulated in float64.

J. H. Friedman, "Greedy function approximation: a gradient boosting
machine", Annals of Statistics 29(5), 2001.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

from gpurpo.backend import Backend
from gpurpo.ensemble.boosting.logistic_kernels import (
    logistic_gradient,
    logistic_gradient_and_row_loss,
    logistic_leaf_sums,
    logistic_row_loss,
    sigmoid,
)
from gpurpo.ensemble.boosting.round_kernels import (
    leaf_label_means,
    least_squares_step_from_leaves,
    squared_gradient_and_row_loss,
)
from gpurpo.ensemble.boosting.step_sizes import (
    MAX_LOGIT_STEP,
    least_squares_step,
    logistic_step,
    weighted_median_step,
)

__all__ = [
    "LOSSES",
    "Loss",
    "SquaredError",
    "AbsoluteError",
    "LogLoss",
    "get_loss",
    "log_odds",
    "weighted_mean",
]

# Label frequencies are clipped to [_PROBA_CLIP, 1 - _PROBA_CLIP] for the
# initial log-odds, so that a label that is never (or always) present gets a
# finite initial score (about -/+ 27.6).
_PROBA_CLIP = 1e-12


def _weighted_column_mean(xp: ModuleType, A: Any, w: Any) -> Any:
    total = xp.sum(w, dtype=xp.float64)
    return (w.astype(xp.float64) @ A.astype(xp.float64)) / total


def log_odds(xp: ModuleType, freq: Any) -> Any:
    """The initial log-odds of the label frequencies ``freq`` (d,), clipped away from 0 and 1."""
    freq = xp.clip(freq, _PROBA_CLIP, 1.0 - _PROBA_CLIP)
    return xp.log(freq) - xp.log1p(-freq)


def weighted_mean(backend: Backend, per_sample: Any, w: Any | None = None) -> Any:
    """``sum_i w_i a_i / sum_i w_i`` (the plain mean when ``w`` is None), a 0-d array."""
    xp = backend.xp
    if w is None:
        return xp.mean(per_sample)
    w = w.astype(xp.float64)
    return xp.sum(w * per_sample) / xp.sum(w)


class Loss:
    """A loss decomposing over outputs, ``l(y, f) = sum_j l_j(y_j, f_j)``.

    Subclasses implement the methods below with array operations of
    ``backend.xp`` (and the kernels of :mod:`gpurpo.ensemble.boosting.logistic_kernels`),
    so they run unchanged on NumPy and CuPy.
    """

    name: str = ""
    #: Whether :meth:`hessian` is defined (a loss with a second derivative).
    twice_differentiable: bool = True

    def init_estimate(self, backend: Backend, Y: Any, w: Any) -> Any:
        """Constant model ``argmin_rho sum_i w_i l(y_i, rho)``, shape ``(d,)`` float64."""
        raise NotImplementedError

    def pointwise(self, backend: Backend, Y: Any, F: Any) -> Any:
        """Loss of every entry, shape ``(n, d)``."""
        raise NotImplementedError

    def negative_gradient(self, backend: Backend, Y: Any, F: Any) -> Any:
        """``-dl/dF`` at ``F``, shape ``(n, d)``, float32."""
        raise NotImplementedError

    def hessian(self, backend: Backend, G: Any) -> Any:
        """Second derivative ``d^2 l / dF^2`` of every entry, from the negative gradient ``G``.

        Used by the Newton split criterion (``split_criterion="newton"``,
        :class:`gpurpo.ensemble.boosting.iteration_trees.StageTreeFitter`). Returns a
        float32 ``(n, d)`` array, or None when it is the constant 1 (then the
        Newton split is the gradient split).
        """
        raise NotImplementedError

    def fit_step(
        self, backend: Backend, Y: Any, F: Any, H: Any, w: Any, G: Any = None,
        leaf: Any = None, values: Any = None,
    ) -> Any:
        """Step ``rho`` in ``R^d`` minimising ``sum_i w_i l(y_i, F_i + rho * H_i)`` per output.

        Parameters
        ----------
        backend : Backend
        Y, F : arrays of shape (n, d)
            Targets and current scores.
        H : array of shape (n, d) or (n, 1)
            Predictions of the new tree on the same samples (one column is
            broadcast to every output: the single-output tree of gbrt-rpo).
        w : array of shape (n,)
            Non-negative sample weights (0 for samples left out by stochastic
            subsampling).
        G : array of shape (n, d), optional
            The negative gradient at ``F`` when already computed.
        leaf, values : arrays, optional
            The tree's leaf of each sample (n,) and its leaf values (L, d) or
            (L, 1), so that ``H = values[leaf]`` (used by the logistic search).

        Returns
        -------
        array of shape (d,), float64
        """
        raise NotImplementedError

    def fit_step_from_leaves(
        self, backend: Backend, Y: Any, F: Any, w: Any, rows: Any, G: Any, leaf: Any,
        values: Any, learning_rate: float,
    ) -> tuple[Any, Any]:
        """:meth:`fit_step` for a tree given by its leaves, and the step's scale.

        Parameters
        ----------
        backend : Backend
        Y, F, G : arrays of shape (n, d)
            Targets, current scores and the negative gradient at ``F``.
        w : array of shape (n,)
            Sample weights, 0 outside ``rows``.
        rows : int array or None
            The rows the step is fitted on (stochastic subsampling), None for all.
        leaf : int array of shape (n,)
        values : array of shape (L, d) or (L, 1)
            The tree predicts ``H = values[leaf]``.
        learning_rate : float

        Returns
        -------
        rho, scale : float64 arrays of shape (d,)
            The step and ``learning_rate * rho``.
        """
        H = values[leaf]
        if rows is not None:
            Y, F, H, w, G, leaf = Y[rows], F[rows], H[rows], w[rows], G[rows], leaf[rows]
        rho = self.fit_step(backend, Y, F, H, w, G, leaf=leaf, values=values)
        return rho, learning_rate * rho

    def leaf_values(
        self, backend: Backend, Y: Any, F: Any, G: Any, w: Any, leaf: Any, n_leaves: int
    ) -> Any:
        """Optimal value of every (leaf, output): ``argmin_v sum_{i in l} w_i l_j(y_ij, f_ij + v)``.

        Parameters
        ----------
        backend : Backend
        Y, F : arrays of shape (n, d)
            Targets and current scores.
        G : array of shape (n, d)
            The negative gradient at ``F``.
        w : array of shape (n,)
            Non-negative sample weights (0: the sample is left out).
        leaf : int array of shape (n,)
            Leaf of every sample, in ``[0, n_leaves)``.
        n_leaves : int

        Returns
        -------
        array of shape (n_leaves, d), float64 (0 for a leaf without weight)
        """
        raise NotImplementedError

    def row_loss(self, backend: Backend, Y: Any, F: Any) -> Any:
        """Mean loss over the outputs of every sample, shape ``(n,)`` float64."""
        xp = backend.xp
        return xp.mean(self.pointwise(backend, Y, F), axis=1, dtype=xp.float64)

    def loss(self, backend: Backend, Y: Any, F: Any, w: Any | None = None) -> Any:
        """Weighted mean of the loss over samples and outputs (a 0-d array)."""
        return weighted_mean(backend, self.row_loss(backend, Y, F), w)

    def gradient_and_row_loss(self, backend: Backend, Y: Any, F: Any) -> tuple[Any, Any]:
        """:meth:`negative_gradient` and :meth:`row_loss` at the same ``F``.

        The boosting loop needs both after every update (the training loss
        of this iteration, the gradient of the next); losses whose two share
        work compute them in one pass.
        """
        return self.negative_gradient(backend, Y, F), self.row_loss(backend, Y, F)

    def raw_to_output(self, backend: Backend, F: Any) -> Any:
        """Map scores to predictions in the output space (identity for regression)."""
        return F

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


class SquaredError(Loss):
    """Half squared error, ``l_j(y, f) = (y - f)^2 / 2`` (l2-norm loss)."""

    name = "squared_error"

    def init_estimate(self, backend: Backend, Y: Any, w: Any) -> Any:
        return _weighted_column_mean(backend.xp, Y, w)

    def pointwise(self, backend: Backend, Y: Any, F: Any) -> Any:
        return 0.5 * (Y - F) ** 2

    def negative_gradient(self, backend: Backend, Y: Any, F: Any) -> Any:
        return (Y - F).astype(backend.xp.float32)

    def hessian(self, backend: Backend, G: Any) -> Any:
        """None: the second derivative is 1 everywhere."""
        return None

    def fit_step(
        self, backend: Backend, Y: Any, F: Any, H: Any, w: Any, G: Any = None,
        leaf: Any = None, values: Any = None,
    ) -> Any:
        return least_squares_step(backend.xp, Y - F, H, w)

    def fit_step_from_leaves(
        self, backend: Backend, Y: Any, F: Any, w: Any, rows: Any, G: Any, leaf: Any,
        values: Any, learning_rate: float,
    ) -> tuple[Any, Any]:
        """The least-squares step from the leaves in one pass (``w`` is 0 outside
        ``rows``, so all rows are read): :func:`least_squares_step_from_leaves`."""
        return least_squares_step_from_leaves(backend, Y, F, values, leaf, w, learning_rate)

    def gradient_and_row_loss(self, backend: Backend, Y: Any, F: Any) -> tuple[Any, Any]:
        """Both in one pass: :func:`squared_gradient_and_row_loss`."""
        return squared_gradient_and_row_loss(backend, Y, F)

    def leaf_values(
        self, backend: Backend, Y: Any, F: Any, G: Any, w: Any, leaf: Any, n_leaves: int
    ) -> Any:
        """Weighted mean residual ``y - f`` of every leaf and output (0 for a leaf without
        weight), summed in a fixed order: :func:`leaf_label_means`."""
        return leaf_label_means(backend, leaf, w, Y - F, n_leaves)


class AbsoluteError(Loss):
    """Absolute error, ``l_j(y, f) = |y - f|`` (l1-norm loss)."""

    name = "absolute_error"
    twice_differentiable = False

    def init_estimate(self, backend: Backend, Y: Any, w: Any) -> Any:
        median = backend.kernel("boost_weighted_median_columns")
        return median(Y.astype(backend.xp.float64), w[:, None])

    def pointwise(self, backend: Backend, Y: Any, F: Any) -> Any:
        return backend.xp.abs(Y - F)

    def negative_gradient(self, backend: Backend, Y: Any, F: Any) -> Any:
        xp = backend.xp
        return xp.sign(Y - F).astype(xp.float32)

    def fit_step(
        self, backend: Backend, Y: Any, F: Any, H: Any, w: Any, G: Any = None,
        leaf: Any = None, values: Any = None,
    ) -> Any:
        return weighted_median_step(backend, Y - F, H, w)

    def leaf_values(
        self, backend: Backend, Y: Any, F: Any, G: Any, w: Any, leaf: Any, n_leaves: int
    ) -> Any:
        """Weighted median residual ``y - f`` of every leaf and output, all leaves in one
        call (``boost_weighted_median_leaves``)."""
        xp = backend.xp
        return backend.kernel("boost_weighted_median_leaves")(
            (Y - F).astype(xp.float64), w.astype(xp.float64), leaf, int(n_leaves))


class LogLoss(Loss):
    """Multi-label logistic loss ``l_j(y, F) = log(1 + exp(-y F))``, ``y`` in {-1, 1}.

    ``Y`` given to the methods must already be in ``{-1, 1}``; ``F`` is the
    log-odds and ``sigmoid(F)`` the probability of label presence. The
    gradient, the per-sample loss and the step search use the fused kernels
    of :mod:`gpurpo.ensemble.boosting.logistic_kernels`.
    """

    name = "log_loss"

    def init_estimate(self, backend: Backend, Y: Any, w: Any) -> Any:
        xp = backend.xp
        return log_odds(xp, _weighted_column_mean(xp, (Y > 0).astype(xp.float64), w))

    def pointwise(self, backend: Backend, Y: Any, F: Any) -> Any:
        return backend.xp.logaddexp(0.0, -Y * F)

    def row_loss(self, backend: Backend, Y: Any, F: Any) -> Any:
        return logistic_row_loss(backend, Y, F)

    def negative_gradient(self, backend: Backend, Y: Any, F: Any) -> Any:
        return logistic_gradient(backend, Y, F)

    def gradient_and_row_loss(self, backend: Backend, Y: Any, F: Any) -> tuple[Any, Any]:
        return logistic_gradient_and_row_loss(backend, Y, F)

    def hessian(self, backend: Backend, G: Any) -> Any:
        """``p (1 - p)`` with ``p = sigmoid(F)``, as ``|g| (1 - |g|)`` (float32 (n, d)).

        The negative gradient is ``g = t - p`` with ``t`` in {0, 1}, so
        ``|g|`` is ``p`` or ``1 - p`` and ``|g| (1 - |g|) = p (1 - p)``.
        """
        xp = backend.xp
        A = xp.abs(G)
        return A * (1.0 - A)

    def fit_step(
        self, backend: Backend, Y: Any, F: Any, H: Any, w: Any, G: Any = None,
        leaf: Any = None, values: Any = None,
    ) -> Any:
        return logistic_step(backend, Y, F, H, w, leaf, values)

    def fit_step_from_leaves(
        self, backend: Backend, Y: Any, F: Any, w: Any, rows: Any, G: Any, leaf: Any,
        values: Any, learning_rate: float,
    ) -> tuple[Any, Any]:
        """The search along the leaf values, without the (n, d) tree predictions."""
        if rows is not None:
            Y, F, w, leaf = Y[rows], F[rows], w[rows], leaf[rows]
        rho = logistic_step(backend, Y, F, None, w, leaf, values)
        return rho, learning_rate * rho

    def leaf_values(
        self, backend: Backend, Y: Any, F: Any, G: Any, w: Any, leaf: Any, n_leaves: int
    ) -> Any:
        """One Newton step per leaf and output, ``sum w g / sum w p (1 - p)``.

        ``p = sigmoid(F)``; the step is bounded by ``MAX_LOGIT_STEP`` logits
        (a leaf whose labels all agree has a vanishing curvature), and a leaf
        without curvature gets 0.
        """
        xp = backend.xp
        grad, curv = logistic_leaf_sums(backend, Y, F, leaf, w, n_leaves)
        step = grad / xp.where(curv > 0, curv, 1.0)
        return xp.where(curv > 0, xp.clip(step, -MAX_LOGIT_STEP, MAX_LOGIT_STEP), 0.0)

    def raw_to_output(self, backend: Backend, F: Any) -> Any:
        return sigmoid(backend.xp, F)


LOSSES: dict[str, type[Loss]] = {
    "squared_error": SquaredError,
    "absolute_error": AbsoluteError,
    "log_loss": LogLoss,
}


def get_loss(name: str, allowed: tuple[str, ...] | None = None) -> Loss:
    """Instantiate the loss called ``name``.

    Parameters
    ----------
    name : str
        One of :data:`LOSSES` (or of ``allowed``).
    allowed : tuple of str, optional
        Restrict the accepted names (e.g. regression losses only).

    Raises
    ------
    ValueError
        Naming the argument, the accepted values and the received one.
    """
    choices = tuple(LOSSES) if allowed is None else allowed
    if not isinstance(name, str) or name not in choices:
        raise ValueError(f"loss must be one of {choices}, got {name!r}")
    return LOSSES[name]()
