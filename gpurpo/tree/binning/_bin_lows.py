"""Each value bin's smallest fitted value: the raw scale of the Extra-Trees draw.

Geurts, Ernst & Wehenkel (2006) draw a node's threshold uniformly between the
node's smallest and largest value of the feature, so each gap between
neighbouring values of the node is cut with probability proportional to its
width in raw units (scikit-learn's ``RandomSplitter``). On binned data the
node knows its codes only; with the smallest fitted value of every value bin
(``bin_low``) the draw is made in raw units
(:func:`gpurpo.tree.binning._edge_lookup._random_cut`): exactly scikit-learn's
rule where a bin holds one value (at most ``max_bins`` distinct values), and
at the resolution of the bins otherwise. Bin edges alone put the draw on the
wrong scale at the ends of heavy-tailed features: the last edge of a node
lies halfway into its widest gap.

Layout: feature ``f``'s ``n_edges[f] + 1`` lows, one per value bin, follow
each other as its edges do, at ``edge_ptr[f] + f + b`` for bin ``b``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import scipy.sparse as sp
from numba import njit, prange

from gpurpo.tree.binning._edge_lookup import _count_below

__all__ = ["bin_lows", "block_lows", "edge_lows"]


@njit(cache=True)
def _fill_empty(edge_values, edge_ptr, low):
    """Bins that no fitted value reached take their lower edge; bin 0 its upper edge
    less the gap to the next edge (its upper edge with one edge, 0.0 with none), so
    that lows increase."""
    p = edge_ptr.shape[0] - 1
    for f in range(p):
        e0 = edge_ptr[f]
        n_e = edge_ptr[f + 1] - e0
        base = e0 + f
        for b in range(n_e + 1):
            if np.isinf(low[base + b]):
                if b > 0:
                    low[base + b] = edge_values[e0 + b - 1]
                elif n_e > 1:
                    low[base] = 2.0 * edge_values[e0] - edge_values[e0 + 1]
                elif n_e > 0:
                    low[base] = edge_values[e0]
                else:
                    low[base] = 0.0


# rows per block of the dense kernels: a block's rows of X (and of the codes) stay in
# cache while every feature is visited
_ROWS = 256


@njit(cache=True)
def _dense_lows(sample, edge_values, edge_ptr, low):
    """``low[bin]`` = the smallest non-NaN value of ``sample[:, f]`` in each bin, per feature
    (the bin by binary search in the edges), a block of rows at a time."""
    n, p = sample.shape
    for r0 in range(0, n, _ROWS):
        r1 = min(n, r0 + _ROWS)
        for f in range(p):
            e0 = edge_ptr[f]
            n_e = edge_ptr[f + 1] - e0
            edges = edge_values[e0 : e0 + n_e]
            base = e0 + f
            for i in range(r0, r1):
                v = np.float64(sample[i, f])
                if np.isnan(v):
                    continue
                at = base + _count_below(edges, n_e, v)
                if v < low[at]:
                    low[at] = v


@njit(cache=True)
def _coded_lows(sample, codes, missing_code, edge_ptr, skip, low):
    """As :func:`_dense_lows` from the codes of ``sample`` (feature-major, ``missing_code``
    for NaN), without a search, for the features ``f`` where ``skip[f]`` is False."""
    n, p = sample.shape
    for r0 in range(0, n, _ROWS):
        r1 = min(n, r0 + _ROWS)
        for f in range(p):
            if skip[f]:
                continue
            base = edge_ptr[f] + f
            for i in range(r0, r1):
                c = codes[f, i]
                if c == missing_code:
                    continue
                v = np.float64(sample[i, f])
                if v < low[base + c]:
                    low[base + c] = v


@njit(nogil=True, cache=True)
def block_lows(values, codes, exact, missing_code, out):
    """``out[j, b]`` = the smallest value of feature ``j`` coded ``b`` (+inf for none), for
    the features where ``exact[j]`` is True, from their float32 rows.

    ``values`` (q, n) is a block of features as float32 rows and ``codes``
    (q, n) their codes (``missing_code`` for NaN), both feature-major: two
    contiguous reads per feature, where :func:`_coded_lows` reads ``X`` a
    column at a time. ``exact[j]``: float32 holds each non-NaN value of
    feature ``j`` exactly
    (:func:`gpurpo.tree.binning._sorted_edges.transpose_block_to_float32`), so
    its float32 values are its values, and the smallest of a bin is the same
    value (the first in row order among equal ones, as there).
    """
    for j in range(values.shape[0]):
        if not exact[j]:
            continue
        row = out[j]
        for b in range(row.shape[0]):
            row[b] = np.inf
        v = values[j]
        c = codes[j]
        for i in range(v.shape[0]):
            b = np.int64(c[i])
            if b == missing_code:
                continue
            x = np.float64(v[i])
            if x < row[b]:
                row[b] = x


@njit(cache=True)
def _place_known(known, done, edge_ptr, low):
    """``low`` of each feature ``f`` where ``done[f]`` is True from row ``f`` of ``known``."""
    for f in range(edge_ptr.shape[0] - 1):
        if done[f]:
            base = edge_ptr[f] + f
            for b in range(edge_ptr[f + 1] - edge_ptr[f] + 1):
                low[base + b] = known[f, b]


@njit(cache=True, parallel=True)
def _csc_lows(indptr, data, n, edge_values, edge_ptr, low):
    """As :func:`_dense_lows` for a canonical CSC sample: stored entries, and 0.0 where a
    column holds fewer than ``n`` entries."""
    p = indptr.shape[0] - 1
    for f in prange(p):
        e0 = edge_ptr[f]
        n_e = edge_ptr[f + 1] - e0
        edges = edge_values[e0 : e0 + n_e]
        base = e0 + f
        if indptr[f + 1] - indptr[f] < n:
            at = base + _count_below(edges, n_e, 0.0)
            if 0.0 < low[at]:
                low[at] = 0.0
        for k in range(indptr[f], indptr[f + 1]):
            v = np.float64(data[k])
            if np.isnan(v):
                continue
            at = base + _count_below(edges, n_e, v)
            if v < low[at]:
                low[at] = v


def bin_lows(sample: Any, edge_values: np.ndarray, edge_ptr: np.ndarray,
             codes: np.ndarray | None = None, missing_code: int = -1,
             known: tuple[np.ndarray, np.ndarray] | None = None) -> np.ndarray:
    """The smallest value of ``sample`` in each value bin of the edge table (see the module).

    Parameters
    ----------
    sample : ndarray or SciPy sparse matrix of shape (n, p), on the host
        The rows the edges were fitted on.
    edge_values, edge_ptr : float64 ndarray, int64 ndarray (p + 1,)
        The ragged edge table (:attr:`gpurpo.tree.binning.BinMapper.edge_ptr_`).
    codes : uint8 ndarray of shape (p, n), optional
        The codes of a dense ``sample`` when already made (NaN coded
        ``missing_code``): read instead of searching the edges.
    missing_code : int
    known : (float64 ndarray (p, b), bool ndarray (p,)), optional
        Lows already found (:func:`block_lows`): row ``f`` of the first holds
        feature ``f``'s lows (bin after bin) where the second is True; only
        the other features of a dense ``sample`` with ``codes`` are read.

    Returns
    -------
    float64 ndarray of shape (edge_values.shape[0] + p,)
        Increasing within each feature.
    """
    p = edge_ptr.shape[0] - 1
    low = np.full(edge_values.shape[0] + p, np.inf)
    if sp.issparse(sample):
        from gpurpo.tree.binning._sparse import canonical_csc

        csc = canonical_csc(sample)
        _csc_lows(csc.indptr.astype(np.int64), csc.data, int(csc.shape[0]), edge_values,
                  edge_ptr, low)
    elif p and sample.shape[0] and codes is not None:
        done = np.zeros(p, dtype=np.bool_) if known is None else known[1]
        if known is not None:
            _place_known(known[0], done, edge_ptr, low)
        if not done.all():
            _coded_lows(np.asarray(sample), codes, missing_code, edge_ptr, done, low)
    elif p and sample.shape[0]:
        _dense_lows(np.asarray(sample), edge_values, edge_ptr, low)
    _fill_empty(edge_values, edge_ptr, low)
    return low


def edge_lows(edge_values: np.ndarray, edge_ptr: np.ndarray) -> np.ndarray:
    """Lows from the edges alone (each bin's lower edge, see :func:`_fill_empty`): for
    mappers fitted without their lows and for hand-made edge tables."""
    low = np.full(edge_values.shape[0] + edge_ptr.shape[0] - 1, np.inf)
    _fill_empty(edge_values, edge_ptr, low)
    return low
