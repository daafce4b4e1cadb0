"""gpurpo on Dask: forests, boosting and label-space linear algebra on arrays split by rows.

Install with ``pip install "gpurpo[dask]"``; gpurpo itself imports without Dask.
The functions and estimators take ``dask.array`` inputs chunked by rows and run
on Dask's own scheduler (a ``distributed.Client`` when one is active):

* :func:`randomized_range_finder`, :func:`randomized_svd`,
  :func:`leverage_scores` and :func:`cssp_select`, with the signatures of
  their :mod:`gpurpo.linalg` namesakes and, for the same ``random_state``, the
  same results up to rounding; :func:`randomized_pca` and :func:`plst` with
  implicit centring;
* the label reducers :class:`PLSTReducer`, :class:`CSSPReducer` and
  :class:`RandomReducer` (:mod:`gpurpo.label_space.reducers` fitted on a tall
  Dask ``Y``; ``encode``/``decode`` per row block, ``to_local()``);
* :class:`RandomForestRegressor`, :class:`RandomForestClassifier`,
  :class:`ExtraTreesRegressor` and :class:`ExtraTreesClassifier`, the forests of
  :mod:`gpurpo.ensemble` with two more parameters, ``client`` and ``data``:
  ``data="replicate"`` copies the binned inputs to every worker and grows the
  single-machine forest of the same ``random_state``, tree for tree;
  ``data="local"`` grows each worker's share of the trees on the rows it holds.
  :meth:`~RandomForestRegressor.to_local` gives the fitted
  :mod:`gpurpo.ensemble` forest; ``predict`` runs per block of rows;
* :class:`GradientBoostingRegressor` and :class:`GradientBoostingClassifier`:
  the boosting estimators of :mod:`gpurpo.ensemble` with data-parallel
  histograms over the workers (:mod:`gpurpo.dask._boosting`); ``to_local()``
  gives the single-machine estimator.
"""

from __future__ import annotations

try:
    import dask.array  # noqa: F401
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError(
        'gpurpo.dask needs Dask: pip install "gpurpo[dask]" (dask[array] and distributed)'
    ) from exc

from gpurpo.dask._boosting import GradientBoostingClassifier, GradientBoostingRegressor
from gpurpo.dask._forest import (
    ExtraTreesClassifier,
    ExtraTreesRegressor,
    RandomForestClassifier,
    RandomForestRegressor,
)
from gpurpo.dask._linalg import (
    cssp_select,
    leverage_scores,
    plst,
    randomized_pca,
    randomized_range_finder,
    randomized_svd,
)
from gpurpo.dask._reducers import CSSPReducer, PLSTReducer, RandomReducer, make_reducer

__all__ = [
    "CSSPReducer",
    "ExtraTreesClassifier",
    "ExtraTreesRegressor",
    "GradientBoostingClassifier",
    "GradientBoostingRegressor",
    "PLSTReducer",
    "RandomForestClassifier",
    "RandomForestRegressor",
    "RandomReducer",
    "cssp_select",
    "leverage_scores",
    "make_reducer",
    "plst",
    "randomized_pca",
    "randomized_range_finder",
    "randomized_svd",
]
