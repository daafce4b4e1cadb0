"""Random-output forests: Random Forests and Extra-Trees on projected outputs.

Joly, Geurts & Wehenkel (2014), "Random forests with random projections of
the output space for high dimensional multi-label classification":

* Algorithm 1 (``shared_projection=True``): draw one projection ``Phi``
  (m x d); grow every tree on ``(X, Y Phi^T)``; label each leaf with the
  mean of the ORIGINAL outputs ``y`` of its training samples.
* Algorithm 2 (``shared_projection=False``, the default): draw a fresh
  ``Phi_t`` for every tree ``t``. The added randomisation reduces the
  variance of the ensemble at the same bias, so it is at least as accurate
  on average (the paper's section 3.3 and figure 3).

Trees are Random Forest trees (Breiman 2001: a bootstrap sample per tree,
the best split over ``k = max_features`` random candidate features per
node) or Extra-Trees (Geurts, Ernst & Wehenkel 2006: one uniformly random
cut per candidate feature, no bootstrap by default), grown with the
histogram tree engine of :mod:`gpurpo.tree` (split score: reduction of the
summed variance of the grown outputs, paper eq. 1-2). ``projection=None``
grows them on the original outputs (exact multi-output forests).

Predictions average the trees' leaf values: label frequencies for the
classifiers (``predict_proba`` gives an (n, d) matrix of label
probabilities for multi-label ``Y``), mean outputs for the regressors.

Extension API: the stages of a fit are public modules, which
:mod:`gpurpo.dask` assembles into a distributed fit of the same forest:
:mod:`~gpurpo.ensemble.forest.base` (:class:`BaseForest`, the fitted model),
:mod:`~gpurpo.ensemble.forest.batches` (batches of trees, bootstrap draws),
:mod:`~gpurpo.ensemble.forest.projection_plan` (each tree's output space),
:mod:`~gpurpo.ensemble.forest.growth` (growing a range of trees),
:mod:`~gpurpo.ensemble.forest.tree_chunks` (grown trees packed for prediction)
and :mod:`~gpurpo.ensemble.forest.warm_start` (the rows each fit drew); the
estimators' methods ``validated_params``, ``check_sample_weight`` and
``set_fitted_forest`` (with :mod:`~gpurpo.ensemble.forest.fitted_trees`)
validate a fit as ``fit`` does and make the estimator the forest of trees
grown elsewhere.
"""

from gpurpo.ensemble.forest._estimators import (
    ExtraTreesClassifier,
    ExtraTreesRegressor,
    RandomForestClassifier,
    RandomForestRegressor,
)

__all__ = [
    "ExtraTreesClassifier",
    "ExtraTreesRegressor",
    "RandomForestClassifier",
    "RandomForestRegressor",
]
