"""The bin codes of a node's samples for one feature, from dense codes or sparse columns.
"""

from __future__ import annotations

from numba import njit

from gpurpo.tree.binning._edge_lookup import _count_below, _zero_code


@njit(inline="always", cache=True)
def _node_codes_of(f, cols, c0ff, ns, edge_values, edge_ptr, use_columns, col_ptr, col_rows,
                   col_codes, slot_of_row, out):
    """``out[a]`` = the code of feature ``f`` of row ``cols[c0ff + a]``, ``a < ns``, for a
    sparse X held without its dense codes: its column's stored entries (increasing rows,
    codes other than the feature's code of 0.0) over that code.

    With ``use_columns`` (the node's rows claimed in ``slot_of_row``) and a column of at
    most 8 entries per sample of the node, the column is scanned once; otherwise each
    row is found by binary search in the column.
    """
    zero = _zero_code(edge_values, edge_ptr, f)
    e0 = col_ptr[f]
    e1 = col_ptr[f + 1]
    if use_columns and e1 - e0 <= 8 * ns:
        for a in range(ns):
            out[a] = zero
        for e in range(e0, e1):
            slot = slot_of_row[col_rows[e]]
            if slot >= 0:
                out[slot] = col_codes[e]
        return
    column = col_rows[e0:e1]
    for a in range(ns):
        r = cols[c0ff + a]
        at = _count_below(column, e1 - e0, r)
        out[a] = col_codes[e0 + at] if at < e1 - e0 and column[at] == r else zero
