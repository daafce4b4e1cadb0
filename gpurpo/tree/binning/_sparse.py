"""Binning of sparse (CSC) inputs without densifying them.

Text and tag features are mostly zeros: a feature's zeros are all one value,
so its bin edges follow from its nonzero entries and the number of implicit
zeros, and its codes are the code of 0.0 everywhere except at the stored
entries. Both are computed feature by feature from the compressed columns:

* :func:`sparse_column_edges` (host helper of ``BinMapper.fit``): the edges
  of the dense unweighted fit (distinct float32-rounded values and their
  counts, midpoints between consecutive distinct values, or between the
  distinct values holding the ``j / max_bins`` quantiles), with the implicit
  zeros merged into the sorted stored values as one run, in O(nnz log nnz)
  instead of a Python loop over features;
* the ``tree_bin_codes_sparse`` kernel: ``#{edges_f < x}`` for the stored
  entries (NaN: the missing bin) over a row of the code of 0.0. The numba
  kernel works feature by feature; the array version for CUDA backends
  compares blocks of stored entries with their features' edge rows.

Neither densifies a block of features: their cost follows the stored entries.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from numba import njit, prange

from gpurpo.backend import Backend, bincount
from gpurpo.tree._numba._shared import N_CHUNKS
from gpurpo.tree.binning._edge_lookup import _count_below

__all__ = [
    "MOSTLY_ZERO_SHARE",
    "SparseCodes",
    "canonical_csc",
    "canonical_csr",
    "sparse_bin_codes_cpu",
    "sparse_bin_codes_xp",
    "dense_codes_of",
    "listed_share",
    "sparse_codes",
    "sparse_codes_of_dense",
    "sparse_codes_of_values",
    "sparse_codes_on_device",
    "sparse_column_edges",
    "zero_codes",
    "zero_codes_ragged",
]

#: the share of a dense X's codes, other than their feature's code of 0.0, up to which
#: its entries are listed as a sparse X's (:func:`listed_share`): on NumPy instead of
#: the dense codes, on CUDA backends beside them
MOSTLY_ZERO_SHARE = 0.1

# stored entries compared with their edge rows at once by the array version
_XP_BLOCK_CELLS = 1 << 24


def canonical_csc(X: Any) -> Any:
    """``X`` (SciPy or cupyx sparse) as CSC with sorted indices and duplicates summed.

    Densifying sums duplicate entries; reading the stored entries must see the
    same values.
    """
    return _canonical(X.tocsc())


def canonical_csr(X: Any) -> Any:
    """``X`` (SciPy or cupyx sparse) as CSR with sorted indices and duplicates summed
    (the rows that the prediction kernel ``tree_apply_csr`` searches)."""
    return _canonical(X.tocsr())


def _canonical(X: Any) -> Any:
    """A compressed ``X`` itself when canonical, else a copy with its duplicates summed."""
    if not X.has_canonical_format:
        X = X.copy()
        X.sum_duplicates()
    return X


def zero_codes(thresholds: Any) -> Any:
    """The code of 0.0 of each feature (uint8): its number of negative edges in the
    ``(p, n_bins - 1)`` edge table (+inf padded), on the table's backend."""
    return (thresholds < 0.0).sum(axis=1).astype("uint8")


def zero_codes_ragged(edge_values: Any, edge_ptr: Any, xp: Any) -> Any:
    """:func:`zero_codes` of the ragged edge table (feature ``f``'s edges
    ``edge_values[edge_ptr[f]:edge_ptr[f + 1]]``), in ``xp``: the number of
    negative edges of each feature from a running count, O(edges)."""
    below = xp.concatenate([xp.zeros(1, dtype=xp.int64),
                            xp.cumsum(edge_values < 0.0, dtype=xp.int64)])
    return (below[edge_ptr[1:]] - below[edge_ptr[:-1]]).astype(xp.uint8)


@njit(parallel=True, cache=True)
def sparse_column_edges(indptr, data, n_rows, max_bins, out_ptr, out_edges, out_n_edges):
    """Unweighted bin edges of every column of a CSC matrix with ``n_rows`` rows.

    Column ``f`` holds the stored values ``data[indptr[f]:indptr[f + 1]]``
    (NaN ignored, explicit zeros counted as zeros) and
    ``n_rows - (indptr[f + 1] - indptr[f])`` implicit zeros. Fills
    ``out_edges[out_ptr[f]:out_ptr[f] + out_n_edges[f]]`` (float64, increasing;
    column ``f``'s slots end at ``out_ptr[f + 1]``: at least
    ``min(max_bins - 1, stored entries)`` of them, as many as it can have
    edges, so that memory follows the stored entries, not ``p x max_bins``) exactly as
    ``quantile_edges`` does for the dense column rounded to float32, which
    are the edges of the dense unweighted fit (``_fit_edges_sorted``: midpoints
    of float32 values, computed in float64), so that sparse and dense X give
    the same bins.

    Columns go by contiguous ranges, one range per task, each task with scratch arrays
    reused from column to column (grown to the longest column it meets): four
    allocations per column cost more than the column's work at a million features.
    """
    p = indptr.shape[0] - 1
    n_tasks = min(p, N_CHUNKS)
    for task in prange(n_tasks):
        values = np.empty(0)
        distinct = np.empty(0)
        counts = np.empty(0, dtype=np.int64)
        for f in range(task * p // n_tasks, (task + 1) * p // n_tasks):
            size = indptr[f + 1] - indptr[f] + 1
            if size > distinct.shape[0]:
                values = np.empty(2 * size)
                distinct = np.empty(2 * size)
                counts = np.empty(2 * size, dtype=np.int64)
            out_n_edges[f] = _column_edges(data, indptr[f], indptr[f + 1], n_rows, max_bins,
                                           values, distinct, counts, out_edges, out_ptr[f])


@njit(inline="always", cache=True)
def _column_edges(data, a, b, n_rows, max_bins, values, distinct, counts, out_edges, at0):
    """The edges of the column of stored values ``data[a:b]`` (:func:`sparse_column_edges`)
    written at ``out_edges[at0:]``; returns their number. ``values``, ``distinct`` and
    ``counts`` are scratch of at least ``b - a + 1`` entries."""
    m = 0
    for t in range(a, b):
        # rounded to float32 like the dense fit, which sorts a float32 copy
        x = np.float64(np.float32(data[t]))
        if not np.isnan(x):
            values[m] = x
            m += 1
    if m > 1:
        values[:m].sort()
    n_zero = n_rows - (b - a)
    # distinct values and their counts, the implicit zeros merged as one run
    nd = 0
    zeros_pending = n_zero > 0
    for t in range(m):
        x = values[t]
        if zeros_pending and x >= 0.0:
            distinct[nd] = 0.0
            counts[nd] = n_zero
            nd += 1
            zeros_pending = False
        if nd > 0 and distinct[nd - 1] == x:
            counts[nd - 1] += 1
        else:
            distinct[nd] = x
            counts[nd] = 1
            nd += 1
    if zeros_pending:
        distinct[nd] = 0.0
        counts[nd] = n_zero
        nd += 1
    if nd <= max_bins:
        for e in range(nd - 1):
            out_edges[at0 + e] = 0.5 * (distinct[e] + distinct[e + 1])
        return max(nd - 1, 0)
    for e in range(1, nd):  # cumulative counts, in place
        counts[e] += counts[e - 1]
    total = counts[nd - 1]
    at = 0
    last = -1
    ne = 0
    for j in range(1, max_bins):
        # first distinct value whose cumulative count reaches j / max_bins of the
        # total, compared in integers (C * max_bins >= j * n)
        while counts[at] * max_bins < j * total:
            at += 1
        cut = min(at, nd - 2)
        if cut > last:
            out_edges[at0 + ne] = 0.5 * (distinct[cut] + distinct[cut + 1])
            ne += 1
            last = cut
    return ne


@njit(parallel=True, cache=True)
def sparse_bin_codes_cpu(indptr, indices, data, edges, n_edges, missing_bin, out):
    """Numba kernel: ``out[f, i]`` = code of X[i, f] for a CSC ``X`` (canonical: no duplicates).

    ``#{edges[f, :n_edges[f]] < x}``, ``missing_bin`` for NaN; rows without
    a stored entry get the code of 0.0.
    """
    p = out.shape[0]
    for f in prange(p):
        ne = n_edges[f]
        row = out[f]
        zero_code = _count_below(edges[f], ne, 0.0)
        for i in range(row.shape[0]):
            row[i] = zero_code
        for t in range(indptr[f], indptr[f + 1]):
            row[indices[t]] = _entry_code(edges[f], ne, data[t], missing_bin)


@njit(inline="always", cache=True)
def _entry_code(edges_f, n_edges_f, x, missing_bin):
    """The code of the value ``x``: ``#{edges_f[:n_edges_f] < x}``, ``missing_bin`` for NaN."""
    v = np.float64(x)
    return missing_bin if np.isnan(v) else _count_below(edges_f, n_edges_f, v)


@njit(parallel=True, cache=True)
def _stored_entry_codes(indptr, data, edge_values, edge_ptr, missing_bin, out):
    """``out[t]``: the code of the stored entry ``t`` of a CSC matrix (as
    :func:`sparse_bin_codes_cpu` writes it into the dense codes), feature ``f``'s
    edges ``edge_values[edge_ptr[f]:edge_ptr[f + 1]]``."""
    for f in prange(indptr.shape[0] - 1):
        e0 = edge_ptr[f]
        edges_f = edge_values[e0:]
        n_edges_f = edge_ptr[f + 1] - e0
        for t in range(indptr[f], indptr[f + 1]):
            out[t] = _entry_code(edges_f, n_edges_f, data[t], missing_bin)


def sparse_bin_codes_xp(
    backend: Backend, indptr: Any, indices: Any, data: Any, edges: Any, n_edges: Any,
    missing_bin: int, out: Any,
) -> None:
    """The ``tree_bin_codes_sparse`` kernel in ``xp``, for CUDA backends.

    ``edges`` is the thresholds table (+inf beyond each feature's edges), so
    ``#{edges_f < x}`` is a row sum of comparisons; stored entries are
    compared with their features' rows by blocks.
    """
    xp = backend.xp
    out[...] = zero_codes(edges)[:, None]
    nnz = int(data.shape[0])
    if nnz == 0:
        return
    feature = xp.searchsorted(indptr, xp.arange(nnz), side="right") - 1
    out[feature, indices] = _entry_codes_xp(edges, feature, data, missing_bin, xp)


def _entry_codes_xp(table: Any, feature: Any, data: Any, missing_bin: int, xp: Any) -> Any:
    """uint8 codes of stored values ``data`` of the features ``feature``: ``#{edges_f < x}``
    from the +inf padded thresholds ``table`` (p, width), ``missing_bin`` for NaN;
    blocks of ``_XP_BLOCK_CELLS`` comparisons."""
    nnz = int(data.shape[0])
    out = xp.empty(nnz, dtype=xp.uint8)
    step = max(1, _XP_BLOCK_CELLS // max(int(table.shape[1]), 1))
    for t0 in range(0, nnz, step):
        t1 = min(nnz, t0 + step)
        x = data[t0:t1].astype(xp.float64)
        codes = (table[feature[t0:t1]] < x[:, None]).sum(axis=1)
        out[t0:t1] = xp.where(xp.isnan(x), missing_bin, codes).astype(xp.uint8)
    return out


def sparse_codes_on_device(X: Any, table: Any, missing_bin: int, zero_code: Any,
                           backend: Backend) -> SparseCodes:
    """The :class:`SparseCodes` of sparse ``X`` (n, p) on a CUDA backend, binned from its
    stored values with the +inf padded thresholds ``table`` (p, width), without the
    dense ``(p, n)`` codes: the codes :func:`sparse_bin_codes_xp` writes at the
    stored entries, entries coded ``zero_code[f]`` left out, listed column by
    column and row by row (memory in proportion to the stored entries)."""
    xp = backend.xp
    csc = canonical_csc(X)
    csr = _canonical(X.tocsr())
    lists = []
    for matrix, by_row in ((csr, True), (csc, False)):
        indptr = backend.asarray(matrix.indptr).astype(xp.int64)
        indices = backend.asarray(matrix.indices).astype(xp.int64)
        major = xp.searchsorted(indptr, xp.arange(indices.shape[0]), side="right") - 1
        feature = indices if by_row else major
        codes = _entry_codes_xp(table, feature, backend.asarray(matrix.data), missing_bin, xp)
        lists.append(_kept_entries(indices, major, codes, zero_code[feature],
                                   int(indptr.shape[0]) - 1, xp))
    return SparseCodes(zero_code, *lists[0], *lists[1])


@dataclass
class SparseCodes:
    """The codes of a sparse X at its stored entries, row by row and column by column.

    Every code of the feature-major matrix is ``zero_code[f]`` except at the
    entries listed here, so that work over a few rows or one feature costs
    their entries rather than all ``p`` features or all ``n`` rows: the
    subtree kernel copies its root's samples from the rows, the small-node
    kernel builds a feature's table from its column.

    Attributes
    ----------
    zero_code : uint8 array (p,)
        Code of the value 0.0 of each feature.
    row_ptr : int64 array (n + 1,)
        Row ``i`` owns entries ``row_ptr[i]:row_ptr[i + 1]``.
    row_features : int32 array (nnz,)
        Feature of each entry, increasing within a row.
    row_codes : uint8 array (nnz,)
        Code of each entry; never the feature's ``zero_code`` (entries binned
        with the zeros are left out).
    col_ptr : int64 array (p + 1,)
        Feature ``f`` owns entries ``col_ptr[f]:col_ptr[f + 1]`` of the columns.
    col_rows : int32 array (nnz,)
        Row of each entry, increasing within a column.
    col_codes : uint8 array (nnz,)
        Code of each entry.
    """

    zero_code: Any
    row_ptr: Any
    row_features: Any
    row_codes: Any
    col_ptr: Any
    col_rows: Any
    col_codes: Any


def _compressed_codes(indptr: Any, indices: Any, codes: Any, zero_code: Any, by_row: bool,
                      xp: Any) -> tuple[Any, Any, Any]:
    """(pointers, indices, codes) of the entries of a canonical compressed structure whose
    code is not their feature's zero code."""
    n_major = indptr.shape[0] - 1
    if xp is np:
        major = np.repeat(np.arange(n_major), np.diff(indptr))
    else:
        major = xp.searchsorted(indptr, xp.arange(indices.shape[0]), side="right") - 1
    feature, row = (indices, major) if by_row else (major, indices)
    return _kept_entries(indices, major, codes[feature, row], zero_code[feature], n_major, xp)


def _kept_entries(indices: Any, major: Any, entry_codes: Any, entry_zero: Any, n_major: int,
                  xp: Any) -> tuple[Any, Any, Any]:
    """(pointers, indices, codes) of the stored entries whose code ``entry_codes`` is not
    ``entry_zero`` (their feature's code of 0.0), ``major`` the row or column of each."""
    keep = entry_codes != entry_zero
    ptr = xp.zeros(n_major + 1, dtype=xp.int64)
    ptr[1:] = xp.cumsum(bincount(xp, major[keep], n_major))
    return (ptr, xp.ascontiguousarray(indices[keep].astype(xp.int32)),
            xp.ascontiguousarray(entry_codes[keep]))


@njit(cache=True)
def _rows_of_columns(col_ptr, col_rows, col_codes, row_ptr, row_features, row_codes):
    """The column lists' entries listed row by row, features increasing within a row.

    A counting sort by row: ``row_ptr`` (n + 1, zeroed) receives the row
    pointers, ``row_features`` and ``row_codes`` the entries. Visiting the
    features in increasing order keeps each row's features sorted, as a
    canonical CSR lists them.
    """
    p = col_ptr.shape[0] - 1
    n = row_ptr.shape[0] - 1
    for e in range(col_rows.shape[0]):
        row_ptr[col_rows[e] + 1] += 1
    for i in range(n):
        row_ptr[i + 1] += row_ptr[i]
    fill = row_ptr[:n].copy()
    for f in range(p):
        for e in range(col_ptr[f], col_ptr[f + 1]):
            i = col_rows[e]
            q = fill[i]
            row_features[q] = f
            row_codes[q] = col_codes[e]
            fill[i] = q + 1


def sparse_codes_of_values(X: Any, edge_values: np.ndarray, edge_ptr: np.ndarray,
                           missing_bin: int, zero_code: np.ndarray) -> SparseCodes:
    """The :class:`SparseCodes` of a canonical CSC SciPy ``X`` (n, p), binned from its
    stored values, without the dense ``(p, n)`` codes (NumPy backend).

    The same entries and codes as :func:`sparse_codes` of the codes that
    ``tree_bin_codes_sparse`` writes: ``#{edges_f < x}`` for feature ``f``'s edges
    ``edge_values[edge_ptr[f]:edge_ptr[f + 1]]`` (the ragged table),
    ``missing_bin`` for NaN, entries coded ``zero_code[f]`` left out.
    Memory: the stored entries twice (columns and rows), none per (row,
    feature) cell.
    """
    indptr = np.ascontiguousarray(X.indptr, dtype=np.int64)
    indices = np.ascontiguousarray(X.indices)
    data = X.data if X.data.dtype in (np.float32, np.float64) else X.data.astype(np.float64)
    data = np.ascontiguousarray(data)
    entry_codes = np.empty(data.shape[0], dtype=np.uint8)
    _stored_entry_codes(indptr, data, np.ascontiguousarray(edge_values, dtype=np.float64),
                        np.ascontiguousarray(edge_ptr, dtype=np.int64), int(missing_bin),
                        entry_codes)
    major = np.repeat(np.arange(indptr.shape[0] - 1), np.diff(indptr))
    col_ptr, col_rows, col_codes = _kept_entries(indices, major, entry_codes, zero_code[major],
                                                 indptr.shape[0] - 1, np)
    return _listed_by_rows_too(zero_code, col_ptr, col_rows, col_codes, X.shape[0])


def _listed_by_rows_too(zero_code: np.ndarray, col_ptr: np.ndarray, col_rows: np.ndarray,
                        col_codes: np.ndarray, n: int) -> SparseCodes:
    """The :class:`SparseCodes` of the column lists, their rows re-listed by
    :func:`_rows_of_columns` (NumPy arrays)."""
    row_ptr = np.zeros(n + 1, dtype=np.int64)
    row_features = np.empty(col_rows.shape[0], dtype=np.int32)
    row_codes = np.empty(col_rows.shape[0], dtype=np.uint8)
    _rows_of_columns(col_ptr, col_rows, col_codes, row_ptr, row_features, row_codes)
    return SparseCodes(zero_code, row_ptr, row_features, row_codes, col_ptr, col_rows, col_codes)


@njit(parallel=True, cache=True)
def _column_lengths(codes, zero_code, out):
    """``out[f + 1]``: the number of codes of feature ``f`` other than ``zero_code[f]``."""
    for f in prange(codes.shape[0]):
        z = zero_code[f]
        count = 0
        for s in range(codes.shape[1]):
            count += codes[f, s] != z
        out[f + 1] = count


@njit(parallel=True, cache=True)
def _fill_columns(codes, zero_code, col_ptr, col_rows, col_codes):
    """Each feature's rows whose code is not its ``zero_code``, increasing, and their codes,
    at ``col_ptr[f]:col_ptr[f + 1]``."""
    for f in prange(codes.shape[0]):
        z = zero_code[f]
        q = col_ptr[f]
        for s in range(codes.shape[1]):
            c = codes[f, s]
            if c != z:
                col_rows[q] = s
                col_codes[q] = c
                q += 1


def sparse_codes_of_dense(codes: Any, zero_code: Any, xp: Any = np) -> SparseCodes:
    """The :class:`SparseCodes` of feature-major dense ``codes`` (p, n): the entries whose
    code is not their feature's ``zero_code``, as :func:`sparse_codes` lists those of a
    sparse X with these codes (arrays of ``xp``; on NumPy two passes over ``codes``)."""
    if xp is not np:
        return SparseCodes(zero_code, *_listed_of_dense(codes.T, zero_code[None, :], xp),
                           *_listed_of_dense(codes, zero_code[:, None], xp))
    p, n = codes.shape
    col_ptr = np.zeros(p + 1, dtype=np.int64)
    _column_lengths(codes, zero_code, col_ptr)
    np.cumsum(col_ptr, out=col_ptr)
    col_rows = np.empty(int(col_ptr[-1]), dtype=np.int32)
    col_codes = np.empty(int(col_ptr[-1]), dtype=np.uint8)
    _fill_columns(codes, zero_code, col_ptr, col_rows, col_codes)
    return _listed_by_rows_too(zero_code, col_ptr, col_rows, col_codes, n)


def _listed_of_dense(codes: Any, zero: Any, xp: Any) -> tuple[Any, Any, Any]:
    """(pointers, indices, codes) of the codes of ``codes`` (major, minor), a view of the
    feature-major codes or of their transpose, that are not ``zero`` (their feature's
    code of 0.0, broadcast): major by major, minor increasing."""
    keep = codes != zero
    ptr = xp.zeros(int(codes.shape[0]) + 1, dtype=xp.int64)
    ptr[1:] = xp.cumsum(keep.sum(axis=1, dtype=xp.int64))
    minor = xp.nonzero(keep)[1]
    return (ptr, xp.ascontiguousarray(minor.astype(xp.int32)),
            xp.ascontiguousarray(codes[keep]))


def listed_share(subtracted_bin: Any, listed: Any, n: int, xp: Any = np) -> float:
    """The share of the codes of an ``(n, p)`` X that a listing of its entries holds when
    each feature with a subtracted bin lists its ``listed`` codes other than its code of
    0.0 and every other feature all its ``n`` codes (``BinnedMatrix.subtracted_bin``,
    ``BinnedMatrix.listed``, arrays of ``xp``); 1 for an X without codes."""
    p = int(listed.shape[0])
    if n * p == 0:
        return 1.0
    if xp is np:
        subtracted_bin, listed = np.asarray(subtracted_bin), np.asarray(listed)
    kept = xp.where(subtracted_bin >= 0, listed, n)
    return float(kept.sum()) / (n * p)


def dense_codes_of(stored: SparseCodes, n: int, xp: Any = np) -> Any:
    """The feature-major ``(p, n)`` uint8 codes that ``stored`` lists (arrays of ``xp``)."""
    p = stored.col_ptr.shape[0] - 1
    codes = xp.empty((p, n), dtype=xp.uint8)
    codes[...] = stored.zero_code[:, None]
    feature = xp.searchsorted(stored.col_ptr, xp.arange(stored.col_rows.shape[0]),
                              side="right") - 1
    codes[feature, stored.col_rows] = stored.col_codes
    return codes


def sparse_codes(X: Any, codes: Any, zero_code: Any, backend: Backend) -> SparseCodes:
    """The stored entries of sparse ``X`` (n, p) with their codes from ``codes`` (p, n).

    ``zero_code`` (uint8 (p,), :func:`zero_codes`) is each feature's code of
    0.0; entries with that code are left out (a canonical CSC ``X`` is used
    as it is). Runs in ``xp`` on the backend (NumPy or CuPy arrays, SciPy or
    cupyx ``X``); on NumPy the rows are re-listed from the
    columns (:func:`_rows_of_columns`) instead of converting ``X`` to CSR
    and gathering each row's codes across the codes matrix.
    """
    xp = backend.xp
    csc = canonical_csc(X)
    if xp is np:
        col_ptr, col_rows, col_codes = _compressed_codes(
            csc.indptr.astype(np.int64), csc.indices.astype(np.int64), codes, zero_code,
            False, np)
        return _listed_by_rows_too(zero_code, col_ptr, col_rows, col_codes, X.shape[0])
    csr = _canonical(X.tocsr())
    rows = _compressed_codes(backend.asarray(csr.indptr).astype(xp.int64),
                             backend.asarray(csr.indices).astype(xp.int64), codes, zero_code,
                             True, xp)
    cols = _compressed_codes(backend.asarray(csc.indptr).astype(xp.int64),
                             backend.asarray(csc.indices).astype(xp.int64), codes, zero_code,
                             False, xp)
    return SparseCodes(zero_code, *rows, *cols)
