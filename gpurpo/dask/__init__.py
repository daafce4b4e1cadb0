"""gpurpo on Dask: the label-space linear algebra on tall arrays split by rows over workers.

Install with ``pip install "gpurpo[dask]"``; gpurpo itself imports without Dask.
The functions take ``dask.array`` inputs chunked by rows and run on Dask's own
scheduler (a ``distributed.Client`` when one is active):

* :func:`randomized_range_finder`, :func:`randomized_svd`,
  :func:`leverage_scores` and :func:`cssp_select`, with the signatures of
  their :mod:`gpurpo.linalg` namesakes and, for the same ``random_state``, the
  same results up to rounding.
"""

from __future__ import annotations

try:
    import dask.array  # noqa: F401
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError(
        'gpurpo.dask needs Dask: pip install "gpurpo[dask]" (dask[array] and distributed)'
    ) from exc

from gpurpo.dask._linalg import cssp_select, leverage_scores, randomized_range_finder, randomized_svd

__all__ = ["cssp_select", "leverage_scores", "randomized_range_finder", "randomized_svd"]
