"""Codes of raw values from fitted bin edges, by per-feature cell tables (numba).
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from gpurpo.tree.binning._edge_lookup import _count_below

# Codes "#{edges < x}" of one feature come from a table of equal cells over
# [edge_0, edge_last] holding at most one edge each (_cells_of, _fill_cells): a
# value's cell gives the number of edges in the cells before it, and one comparison
# with the edge of its own cell finishes the count. Features whose edges lie closer
# together than their range / MAX_CELLS take a binary search.
MAX_CELLS = 1 << 16
# table entries held at once by bin_codes (a block of features)
_BLOCK_CELLS = 1 << 20


@njit(cache=True)
def _cells_of(edges, n_edges, max_cells):
    """The number of cells of one feature's table (:func:`_fill_cells`); 0: a binary search.

    One cell for fewer than two edges. Otherwise the power of two at least
    twice ``(edge_last - edge_0) / smallest gap``: consecutive edges are then
    two cells apart or more, and the rounding of a cell position (a relative
    error of a few units of 2**-53) cannot put two edges in one cell. 0 when
    that exceeds ``max_cells``, when an edge is infinite (values beyond
    float32's range in the fit) or the edges do not increase.
    """
    if n_edges < 2:
        return 1 if n_edges == 0 or np.isfinite(edges[0]) else 0
    span = edges[n_edges - 1] - edges[0]
    if not np.isfinite(span):
        return 0
    gap = np.inf
    for j in range(1, n_edges):
        gap = min(gap, edges[j] - edges[j - 1])
    if not gap > 0.0:
        return 0
    need = 2.0 * (span / gap)
    if not need <= max_cells:
        return 0
    cells = 1
    while cells < need:
        cells *= 2
    return cells if np.isfinite(cells / span) else 0


@njit(inline="always", cache=True)
def _cell(x, lo, scale, cells):
    """The cell ``floor((x - lo) * scale)`` of ``x``, clamped to ``[0, cells]`` (NaN: ``cells``).

    Monotone in ``x`` (each rounded step is), so a value below an edge never
    lands in a later cell than the edge, nor a value above it in an earlier one.
    Two selects, NaN-safe by their order (numba's ``max`` passes NaN through).
    """
    g = (x - lo) * scale
    g = g if g < cells else np.float64(cells)  # NaN: cells
    g = g if g > 0.0 else 0.0
    return np.uint64(g)


@njit(cache=True)
def _fill_cells(edges, n_edges, cells, base, cut):
    """Fill one feature's table of ``cells + 1`` cells for ``#{edges < x}``.

    ``cut[g]`` is the edge lying in cell ``g`` (:func:`_cell`; NaN: none) and
    ``base[g]`` the number of edges in the cells before ``g``. By the
    monotonicity of :func:`_cell`, a non-NaN ``x`` in cell ``g`` has
    ``#{edges < x} = base[g] + (x > cut[g])``: the edges of earlier cells are
    below ``x``, those of later cells above it. For fewer than two edges, one
    cell of width 1 from the edge (0 without edges): the table then needs no
    division by the span.

    Returns ``(ok, lo, scale)``; ``ok`` is False if two edges share a cell
    (:func:`_cells_of` rules it out), and the caller then searches.
    """
    lo = edges[0] if n_edges > 0 else 0.0
    scale = cells / (edges[n_edges - 1] - lo) if n_edges > 1 else 1.0
    for g in range(cells + 1):
        cut[g] = np.nan
    for j in range(n_edges):
        g = _cell(edges[j], lo, scale, cells)
        if not np.isnan(cut[g]):
            return False, lo, scale
        cut[g] = edges[j]
    run = 0
    for g in range(cells + 1):
        base[g] = run
        if not np.isnan(cut[g]):
            run += 1
    return True, lo, scale


@njit(inline="always", cache=True)
def _code_in_cells(x, lo, scale, cells, base, cut):
    """``#{edges < x}`` for a non-NaN ``x`` from the table of :func:`_fill_cells`."""
    g = _cell(x, lo, scale, cells)
    return np.int64(base[g]) + np.int64(x > cut[g])


@njit(inline="always", cache=True)
def float32_codes_agree(a, b):
    """Whether every value's code is fixed by its float32 rounding at the edge between ``a < b``.

    ``a`` and ``b`` are consecutive distinct float32 values of a sorted
    sample and the edge is ``e = (a + b) / 2`` in float64. For a value ``x``
    OF THAT SAMPLE, ``v = float32(x)`` is itself a sample value, so ``v <= a``
    or ``v >= b``, and round to nearest keeps ``x`` within half a float32
    spacing of ``v``: ``e < x`` and ``e < v`` then agree, except when ``a``
    and ``b`` are adjacent float32 numbers and ``x`` is exactly ``e``, rounded
    up to ``b`` (a tie). False in that case, and when ``e`` is infinite
    (values beyond float32's range).
    """
    e = 0.5 * (np.float64(a) + np.float64(b))
    return np.isfinite(e) and np.nextafter(a, np.float32(np.inf)) != b


@njit(cache=True)
def _float32_cuts(edges, n_edges, lo, scale, cells, above):
    """``above[g]``: the least float32 greater than the edge of cell ``g``; NaN for none.

    For a float32 ``x``, ``x >= above[g]`` if and only if ``x > cut[g]``
    (compared in float64; :func:`_fill_cells`): a float32 comparison with the
    cell tables instead of a float64 conversion per value.
    """
    for g in range(cells + 1):
        above[g] = np.nan
    for j in range(n_edges):
        e = edges[j]
        u = np.float32(e)
        if np.float64(u) <= e:
            u = np.nextafter(u, np.float32(np.inf))
        above[_cell(e, lo, scale, cells)] = u


@njit(cache=True)
def _tie_uppers(edges, n_edges, out):
    """``out[k]``: the upper float32 ``b`` of edge ``k`` when the edge is the midpoint
    of two adjacent float32 numbers ``a < b`` (the tie of :func:`float32_codes_agree`),
    else +inf.

    A float32 value lies just above such an edge exactly when it equals
    ``out[k]``. A value of +inf matches the +inf of the other edges: it is then
    compared with the edge in float64 too, which keeps its code (that
    comparison is exact for any value). +inf rather than NaN: comparisons
    with NaN are slow on x86 (a microcode assist per comparison).
    """
    for k in range(n_edges):
        e = edges[k]
        a = np.float32(e)
        if np.float64(a) > e:
            a = np.nextafter(a, np.float32(-np.inf))
        b = np.nextafter(a, np.float32(np.inf))
        tie = (np.float64(a) < e and e < np.float64(b)
               and 0.5 * (np.float64(a) + np.float64(b)) == e)
        out[k] = b if tie else np.float32(np.inf)


@njit(cache=True)
def _codes_of_feature(v, X, f, e_f, ne, float32_ok, missing_bin, o):
    """The codes of feature ``f`` (row ``v`` of the float32 copy) for :func:`bin_codes_fitted`."""
    n = v.shape[0]
    cells = _cells_of(e_f, ne, MAX_CELLS)
    base = np.empty(cells + 1, dtype=np.uint8)
    cut = np.empty(cells + 1)
    ok, lo, scale = _fill_cells(e_f, ne, cells, base, cut) if cells > 0 else (False, 0.0, 0.0)
    if not ok:
        for i in range(n):
            x = np.float64(X[i, f])
            o[i] = missing_bin if np.isnan(x) else _count_below(e_f, ne, x)
        return
    above = np.empty(cells + 1, dtype=np.float32)
    _float32_cuts(e_f, ne, lo, scale, cells, above)
    missing = np.uint8(missing_bin)
    for i in range(n):
        x = v[i]
        g = _cell(np.float64(x), lo, scale, cells)
        code = base[g] + np.uint8(x >= above[g])
        o[i] = missing if np.isnan(x) else code
    if not float32_ok:
        _fix_tie_codes(v, X, f, e_f, ne, o)


@njit(cache=True)
def _fix_tie_codes(v, X, f, e_f, ne, o):
    """Codes of the float32 values ``v`` of feature ``f`` compared in float32, made those
    of the float64 values of ``X``: the values just above a tie edge
    (:func:`_tie_uppers`) are compared with it in float64."""
    n = v.shape[0]
    tie_upper = np.empty(max(ne, 1), dtype=np.float32)
    _tie_uppers(e_f, ne, tie_upper)
    for i in range(n):
        code = np.int64(o[i])
        if 0 < code and code <= ne and v[i] == tie_upper[code - 1]:
            if not e_f[code - 1] < np.float64(X[i, f]):
                o[i] = np.uint8(code - 1)


@njit(nogil=True, cache=True)
def bin_codes_fitted(values, X, f0, edges, n_edges, float32_ok, missing_bin, coded, out,
                     out_n_zero):
    """Codes of the very values the edges were fitted on (host helper of BinMapper).

    ``values`` (q, n) is the float32, feature-major copy of the ``q``
    features of ``X`` (n, p) from ``f0`` (:func:`transpose_block_to_float32`),
    whose sorted copy gave the edges (:func:`edges_from_sorted`) and
    ``float32_ok``, its verdict of :func:`float32_codes_agree` over each
    feature's edges; ``edges``, ``n_edges``, ``float32_ok`` and ``out`` are
    the rows of those ``q`` features. The codes are those of
    :func:`bin_codes` (``#{edges < x}`` compared in float64, NaN to
    ``missing_bin``), read from the contiguous float32 rows through the
    cell table of :func:`_fill_cells`. A feature without a table (infinite
    edges, or edges too close for :data:`MAX_CELLS` cells) takes a binary
    search over the float64 values of ``X``. Where ``float32_ok`` is False, a
    value whose float32 rounding lies just above an edge at the midpoint of
    two adjacent float32 numbers (the tie of :func:`float32_codes_agree`) is
    compared in float64 with that edge.

    Where ``coded[j]`` is True, ``out[j]`` already holds those float32 codes
    (:func:`gpurpo.tree.binning._bucket_edges.bucket_edges_rows`): only the float64
    comparisons next to tie edges and the count below are made.

    ``out_n_zero[j]``: how many of feature ``j``'s codes are the code of 0.0
    (``#{edges < 0.0}``; NaN codes excluded when ``missing_bin`` is above
    every value code), counted while the codes are in the cache (the
    subtracted bins of :class:`gpurpo.tree.binning.BinnedMatrix`).
    """
    for j in range(values.shape[0]):
        o = out[j]
        if not coded[j]:
            _codes_of_feature(values[j], X, f0 + j, edges[j], n_edges[j], float32_ok[j],
                              missing_bin, o)
        elif not float32_ok[j]:
            _fix_tie_codes(values[j], X, f0 + j, edges[j], n_edges[j], o)
        zero = np.uint8(_count_below(edges[j], n_edges[j], 0.0))
        count = 0
        for i in range(o.shape[0]):
            count += o[i] == zero
        out_n_zero[j] = count


@njit(parallel=True, cache=True)
def bin_codes(X, edges, n_edges, missing_bin, out):
    """``out[f, i] = #{edges[f, :n_edges[f]] < X[i, f]}``, ``missing_bin`` for NaN (see kernels.py).

    Blocks of features (at most 256, whose cell tables of :func:`_fill_cells`
    hold at most ``_BLOCK_CELLS`` entries together) get their tables at once,
    then tasks of consecutive rows (contiguous slabs of a C-order ``X``) code
    them. Features without a table take a binary search.
    """
    n = X.shape[0]
    p = X.shape[1]
    rblock = 256  # rows per task
    n_tasks = (n + rblock - 1) // rblock
    cells = np.empty(p, dtype=np.int64)
    for f in prange(p):
        cells[f] = _cells_of(edges[f], n_edges[f], MAX_CELLS)
    f0 = 0
    while f0 < p:
        f1 = f0 + 1
        total = cells[f0] + 1
        while f1 < p and f1 - f0 < 256 and total + cells[f1] + 1 <= _BLOCK_CELLS:
            total += cells[f1] + 1
            f1 += 1
        nf = f1 - f0
        start = np.zeros(nf + 1, dtype=np.int64)
        for j in range(nf):
            start[j + 1] = start[j] + cells[f0 + j] + 1
        base = np.empty(total, dtype=np.uint8)
        cut = np.empty(total)
        ok = np.zeros(nf, dtype=np.bool_)
        lo = np.zeros(nf)
        scale = np.zeros(nf)
        for j in prange(nf):
            f = f0 + j
            if cells[f] > 0:
                ok[j], lo[j], scale[j] = _fill_cells(
                    edges[f], n_edges[f], cells[f], base[start[j]:start[j + 1]],
                    cut[start[j]:start[j + 1]])
        for task in prange(n_tasks):
            i0 = task * rblock
            i1 = min(n, i0 + rblock)
            for f in range(f0, f1):
                ne = n_edges[f]
                j = f - f0
                if not ok[j]:
                    e_f = edges[f]
                    for i in range(i0, i1):
                        x = np.float64(X[i, f])
                        out[f, i] = missing_bin if np.isnan(x) else _count_below(e_f, ne, x)
                    continue
                cells_j = cells[f]
                base_j = base[start[j]:start[j + 1]]
                cut_j = cut[start[j]:start[j + 1]]
                lo_j = lo[j]
                scale_j = scale[j]
                for i in range(i0, i1):
                    x = np.float64(X[i, f])
                    if np.isnan(x):
                        out[f, i] = missing_bin
                        continue
                    out[f, i] = _code_in_cells(x, lo_j, scale_j, cells_j, base_j, cut_j)
        f0 = f1
