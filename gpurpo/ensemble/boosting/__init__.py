"""Multi-output gradient tree boosting.

Joly, Wehenkel & Geurts (2019), *Gradient tree boosting with random output
projections for multi-label classification and multi-output regression*:

* ``strategy="multi_output"`` -- gbmort (Algorithm 2): one multi-output
  regression tree per iteration, fitted to the gradients of all outputs;
* ``strategy="rpo"`` -- gbrt-rpo (Algorithm 3): a single-output tree fitted
  to ``phi_m g`` for one random projection row ``phi_m`` per iteration (by
  default a randomly sub-sampled output, as in the paper), then a step
  ``rho_m`` in R^d fitted to every output separately;
* ``strategy="relabel_rpo"`` (Algorithm 4): a tree grown on ``q`` random
  projections of the gradients, its leaves relabelled with the mean
  unprojected gradient, then ``rho_m``;
* ``strategy="single_target"`` -- st-gbrt: one single-output model per
  output, their trees added round-robin (iteration ``m`` boosts output
  ``m mod d``), the reference the paper compares against.

Every iteration (Algorithm 2-4): ``g = -dl/df`` at ``f_{m-1}`` (line 3); grow
the tree (:mod:`gpurpo.ensemble.boosting.iteration_trees`, best-first up to
``max_leaf_nodes`` leaves on pre-binned inputs); fit the optimal step per
output (:meth:`gpurpo.ensemble.boosting.losses.Loss.fit_step`); ``f_m = f_{m-1} + mu
rho_m h_m``. With ``leaf_step="per_leaf"`` the last two steps are replaced by
the optimal value of every (leaf, output) pair
(:meth:`gpurpo.ensemble.boosting.losses.Loss.leaf_values`, Friedman's TreeBoost) and
``rho_m = 1``. ``subsample < 1`` grows each tree and fits its step on a random
subset of the rows (stochastic gradient boosting, Friedman 2002). Early
stopping watches the loss on a validation set.

All arrays of the loop live on the backend (NumPy or CuPy through ``xp``);
the host only sees the random draws (projection rows, subsamples, per-node
seeds), the tree structures and the scalars of control flow.

Extension API: the stages of an iteration are public modules, which
:mod:`gpurpo.dask` assembles into boosting over row-split data:
:mod:`~gpurpo.ensemble.boosting.iteration_trees` (the tree of an iteration
and its leaf labels), :mod:`~gpurpo.ensemble.boosting.step_sizes` (the steps
``rho_m``), :mod:`~gpurpo.ensemble.boosting.logistic_kernels` (the logistic
loss and its line search), :mod:`~gpurpo.ensemble.boosting.staged_model` (the
fitted additive model) and :mod:`~gpurpo.ensemble.boosting.class_targets`
(class labels as label columns); the estimators' methods ``validated_params``,
``check_inputs``, ``encode_targets`` and ``set_fitted_model`` validate a fit's
parameters and data as ``fit`` does and make the estimator the model of
stages fitted elsewhere.
"""

from gpurpo.ensemble.boosting._estimators import (
    GradientBoostingClassifier,
    GradientBoostingRegressor,
)

__all__ = ["GradientBoostingClassifier", "GradientBoostingRegressor"]
