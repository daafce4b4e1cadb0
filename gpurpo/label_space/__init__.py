"""Models on a low-dimensional label space: PLST, Rembrandt, compressed sensing and ML-CSSP.

* :class:`LabelSpaceRegressor`, :class:`LabelSpaceClassifier` - encode the
  targets with a reducer, fit any scikit-learn-style regressor on the codes
  (default: :class:`RidgeRegression` on the active backend), decode.
* :class:`RembrandtClassifier` - Mineiro & Karampatziakis' Algorithm 3:
  Rembrandt embedding, least-squares map, optional random Fourier features
  (:class:`RandomFourierFeatures`), softmax / sigmoid decoder with early
  stopping.
* :mod:`gpurpo.label_space.reducers` - the linear reducers (``"plst"``,
  ``"rembrandt"``, ``"random"``, ``"cssp"``) with ``encode``/``decode``.

Dense or sparse labels, NumPy or CuPy (everything stays on the GPU for CuPy
input).
"""

from gpurpo.label_space._feature_maps import RandomFourierFeatures
from gpurpo.label_space._models import LabelSpaceClassifier, LabelSpaceRegressor, RembrandtClassifier
from gpurpo.label_space._ridge_estimator import RidgeRegression
from gpurpo.label_space.reducers import (
    REDUCERS,
    CSSPReducer,
    LabelReducer,
    PLSTReducer,
    RandomReducer,
    RembrandtReducer,
    make_reducer,
)

__all__ = [
    "REDUCERS",
    "CSSPReducer",
    "LabelReducer",
    "LabelSpaceClassifier",
    "LabelSpaceRegressor",
    "PLSTReducer",
    "RandomFourierFeatures",
    "RandomReducer",
    "RembrandtClassifier",
    "RembrandtReducer",
    "RidgeRegression",
    "make_reducer",
]
