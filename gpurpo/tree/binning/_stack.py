"""Stacking the rows of binned matrices coded by one bin mapper.

Blocks of rows binned apart with the same fitted :class:`BinMapper` (on Dask
workers, say) are stacked into the :class:`BinnedMatrix` that binning the
stacked rows at once gives: the codes of a row depend only on the row and
the edges, and everything else a binned matrix holds (each feature's count of
the code of 0.0, the stored-entry lists of a sparse X) follows from the codes.
"""

from __future__ import annotations

import numpy as np

from gpurpo.backend import Backend
from gpurpo.tree.binning._mapper import BinMapper, BinnedMatrix
from gpurpo.tree.binning._sparse import SparseCodes

__all__ = ["stack_binned"]


def stack_binned(mapper: BinMapper, parts: list[BinnedMatrix], backend: Backend) -> BinnedMatrix:
    """The rows of ``parts`` (in order) as one binned matrix.

    Parameters
    ----------
    mapper : BinMapper
        The fitted mapper that binned every part.
    parts : list of BinnedMatrix
        Binned blocks of rows, all on ``backend``.
    backend : Backend

    Returns
    -------
    BinnedMatrix
        What ``mapper.transform`` of the stacked rows gives. Parts that all
        list their stored entries only (a sparse X binned on the CPU) give
        stored-entry codes; otherwise the parts' codes are stacked densely and
        listed again if they are mostly zeros (:meth:`BinMapper.transform`).

    Raises
    ------
    ValueError
        If ``parts`` is empty.
    """
    if not parts:
        raise ValueError("parts must hold at least one binned matrix")
    dense = [part.dense_codes is not None for part in parts]
    if any(dense):
        # parts of a dense X, some of them listed as mostly zeros: the codes of all rows,
        # which the mapper lists again if they are mostly zeros
        codes = backend.xp.concatenate([part.codes for part in parts], axis=1)
        return mapper._binned(backend.xp.ascontiguousarray(codes), backend)
    stored = _stack_sparse_codes([part.sparse_codes for part in parts],
                                 [part.n_samples for part in parts])
    return mapper._binned(None, backend, stored=stored)


def _stack_sparse_codes(parts: list[SparseCodes], sizes: list[int]) -> SparseCodes:
    """The stored-entry codes of the stacked rows (host arrays).

    Rows are listed part after part; each feature's column lists its entries
    of the first part, then of the second, ..., so rows stay increasing
    within a column, as :func:`gpurpo.tree.binning._sparse.sparse_codes` lists
    them.
    """
    zero_code = parts[0].zero_code
    p = int(zero_code.shape[0])
    row_offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    entry_offsets = np.concatenate(
        [[0], np.cumsum([int(part.row_ptr[-1]) for part in parts])]).astype(np.int64)
    row_ptr = np.concatenate(
        [np.zeros(1, dtype=np.int64)]
        + [part.row_ptr[1:] + entry_offsets[b] for b, part in enumerate(parts)])
    row_features = np.concatenate([part.row_features for part in parts])
    row_codes = np.concatenate([part.row_codes for part in parts])
    counts = np.stack([np.diff(part.col_ptr) for part in parts])  # (parts, p)
    col_ptr = np.zeros(p + 1, dtype=np.int64)
    np.cumsum(counts.sum(axis=0), out=col_ptr[1:])
    earlier = np.cumsum(counts, axis=0) - counts  # each column's entries of earlier parts
    col_rows = np.empty(int(col_ptr[-1]), dtype=np.int32)
    col_codes = np.empty(int(col_ptr[-1]), dtype=np.uint8)
    for b, part in enumerate(parts):
        feature = np.repeat(np.arange(p), counts[b])
        within = np.arange(feature.shape[0]) - part.col_ptr[feature]
        at = col_ptr[feature] + earlier[b, feature] + within
        col_rows[at] = part.col_rows + row_offsets[b]
        col_codes[at] = part.col_codes
    return SparseCodes(zero_code, row_ptr, row_features, row_codes, col_ptr, col_rows,
                       col_codes)
