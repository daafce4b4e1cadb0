"""Histogram-based multi-output trees grown on projected outputs.

Modules, one stage each: :mod:`~gpurpo.tree.binning` (quantile bins, uint8
codes), :mod:`~gpurpo.tree.kernels` (kernel contracts and dispatch; numba twins of
``kernels/tree_<stage>.cu`` in ``gpurpo/tree/_numba/tree_<stage>.py``), :mod:`~gpurpo.tree.histogram`,
:mod:`~gpurpo.tree.splitting` (split scores, ``xp`` code),
:mod:`~gpurpo.tree.grower` (level-wise and best-first growth; the lower-level
API used by forests and boosting), :mod:`~gpurpo.tree.leaves` (leaf values
in the original output space), :mod:`~gpurpo.tree.predictor` (packed node
arrays, traversal, prediction) and the estimators
:class:`DecisionTreeRegressor` and :class:`DecisionTreeClassifier`.
"""

from gpurpo.tree._classes import DecisionTreeClassifier, DecisionTreeRegressor
from gpurpo.tree._params import GrowthParams, n_candidate_features
from gpurpo.tree.binning import BinMapper, BinnedMatrix
from gpurpo.tree.grower import GrowResult
from gpurpo.tree.growth import grow_tree_best_first, grow_trees
from gpurpo.tree.leaves import LeafValues, leaf_values, relabelling_outputs, stack_leaf_values
from gpurpo.tree.predictor import (
    PackedTrees,
    Tree,
    TreeStructure,
    apply_trees,
    pack_trees,
    predict_sum,
    predict_trees,
)

__all__ = [
    "BinMapper",
    "BinnedMatrix",
    "DecisionTreeClassifier",
    "DecisionTreeRegressor",
    "GrowResult",
    "GrowthParams",
    "LeafValues",
    "PackedTrees",
    "Tree",
    "TreeStructure",
    "apply_trees",
    "grow_tree_best_first",
    "grow_trees",
    "leaf_values",
    "relabelling_outputs",
    "n_candidate_features",
    "pack_trees",
    "predict_sum",
    "predict_trees",
    "stack_leaf_values",
]
