"""Test helper: the ``SparseCodes`` of a codes matrix, built with NumPy alone."""

from __future__ import annotations

import numpy as np

from gpurpo.tree.binning._sparse import SparseCodes


def code_rows(codes: np.ndarray, zero_code: np.ndarray) -> SparseCodes:
    """The codes that differ from each feature's ``zero_code``, by row and by column."""

    def compressed(major, minor, n_major):
        order = np.lexsort((minor, major))
        ptr = np.zeros(n_major + 1, dtype=np.int64)
        ptr[1:] = np.cumsum(np.bincount(major, minlength=n_major))
        return ptr, minor[order].astype(np.int32), order

    f, i = np.nonzero(codes != zero_code[:, None])
    p, n = codes.shape
    row_ptr, row_features, by_row = compressed(i, f, n)
    col_ptr, col_rows, by_col = compressed(f, i, p)
    return SparseCodes(zero_code=zero_code, row_ptr=row_ptr, row_features=row_features,
                       row_codes=codes[f, i][by_row], col_ptr=col_ptr, col_rows=col_rows,
                       col_codes=codes[f, i][by_col])
