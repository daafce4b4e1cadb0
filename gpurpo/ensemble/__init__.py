"""Tree ensembles: multi-output gradient boosting (and forests).

Joly, Wehenkel & Geurts (2019), gradient tree boosting with random output
projections: :class:`GradientBoostingRegressor` and the multi-label
:class:`GradientBoostingClassifier`.
"""

from gpurpo.ensemble.boosting import (
    GradientBoostingClassifier,
    GradientBoostingRegressor,
)
from gpurpo.ensemble.forest import (
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
    "GradientBoostingClassifier",
    "GradientBoostingRegressor",
]
