"""gpurpo on Dask: the label-space linear algebra on tall arrays split by rows over workers.

Install with ``pip install "gpurpo[dask]"``; gpurpo itself imports without Dask.
The functions take ``dask.array`` inputs chunked by rows and run on Dask's own
scheduler (a ``distributed.Client`` when one is active):

* :func:`randomized_range_finder`, :func:`randomized_svd`,
  :func:`leverage_scores` and :func:`cssp_select`, with the signatures of
  their :mod:`gpurpo.linalg` namesakes and, for the same ``random_state``, the
  same results up to rounding; :func:`randomized_pca` and :func:`plst` with
  implicit centring;
* the label reducers :class:`PLSTReducer`, :class:`CSSPReducer` and
  :class:`RandomReducer` (:mod:`gpurpo.label_space.reducers` fitted on a tall
  Dask ``Y``; ``encode``/``decode`` per row block, ``to_local()``).
"""

from __future__ import annotations

try:
    import dask.array  # noqa: F401
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError(
        'gpurpo.dask needs Dask: pip install "gpurpo[dask]" (dask[array] and distributed)'
    ) from exc

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
    "PLSTReducer",
    "RandomReducer",
    "cssp_select",
    "leverage_scores",
    "make_reducer",
    "plst",
    "randomized_pca",
    "randomized_range_finder",
    "randomized_svd",
]
