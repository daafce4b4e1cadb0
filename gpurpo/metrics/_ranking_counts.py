"""Per-row LRAP counts with the array module (``xp``): the CUDA backends' kernel."""

from __future__ import annotations

from typing import Any

from gpurpo.backend import bincount

# LRAP counts ranks directly (O(nnz d), one boolean per (row, label,
# relevant slot): at most 2 * _FEW_RELEVANT bytes per cell, within the
# ranking budget) when no row of a block has more relevant labels than
# this, and sorts every row of the block (O(d log d) per row) otherwise.
_FEW_RELEVANT = 32


def _ranking_counts(T: Any, S: Any, xp: Any) -> tuple[Any, Any]:
    """Per row: sum over relevant j of L_ij / R_ij, and the number of relevant labels.

    ``R_ij = #{k : s_ik >= s_ij}`` and ``L_ij = #{k relevant : s_ik >= s_ij}``
    (ties count as ranked above, as in scikit-learn's ``rankdata(.., "max")``).
    Scores are sorted once per row; tie groups get global ids so that group
    sizes come from one ``bincount`` for the whole block.
    """
    c, d = S.shape
    order = xp.argsort(-S, axis=1)
    s_sorted = xp.take_along_axis(S, order, axis=1)
    rel = xp.take_along_axis(T, order, axis=1)
    new_group = xp.ones((c, d), dtype=bool)
    new_group[:, 1:] = s_sorted[:, 1:] != s_sorted[:, :-1]
    group = xp.cumsum(new_group, axis=1) - 1
    flat = (group + (xp.arange(c) * d)[:, None]).ravel()
    size = bincount(xp, flat, c * d).reshape(c, d)
    rel_size = bincount(xp, flat, c * d, weights=rel.ravel()).reshape(c, d)
    R = xp.take_along_axis(xp.cumsum(size, axis=1), group, axis=1)
    L = xp.take_along_axis(xp.cumsum(rel_size, axis=1), group, axis=1)
    return (rel * (L / R)).sum(axis=1), rel.sum(axis=1)


def _ranking_counts_few(T: Any, S: Any, xp: Any) -> tuple[Any, Any]:
    """Same as :func:`_ranking_counts` by direct counting, for few relevant labels.

    The relevant scores of each row are packed into a (rows, width) matrix
    ``P``; ``R_ij`` compares each of them with the whole row and ``L_ij``
    with the row's own relevant scores: work ``O(nnz * d)`` instead of
    sorting every row. Padding is +inf where it is compared against (no
    score reaches it, so padded slots get ``R = 0`` and are dropped) and
    -inf where it is counted (it never counts).
    """
    c = S.shape[0]
    rows, cols = xp.nonzero(T)
    n_rel = bincount(xp, rows, c)
    if rows.shape[0] == 0:
        return xp.zeros(c), n_rel.astype(xp.float64)
    width = int(n_rel.max())
    first = xp.cumsum(n_rel) - n_rel
    slot = xp.arange(rows.shape[0]) - first[rows]
    P = xp.full((c, width), xp.inf)
    P[rows, slot] = S[rows, cols]
    P_counted = xp.where(xp.isinf(P), -xp.inf, P)
    R = xp.count_nonzero(S[:, None, :] >= P[:, :, None], axis=2)
    L = xp.count_nonzero(P_counted[:, None, :] >= P[:, :, None], axis=2)
    ratio = xp.where(R > 0, L / xp.maximum(R, 1), 0.0)
    return ratio.sum(axis=1), n_rel.astype(xp.float64)


def ranking_counts_xp(T: Any, S: Any, xp: Any) -> tuple[Any, Any]:
    """The LRAP counts of a block with array operations (the kernel ``lrap_row_counts``
    on CUDA backends, :mod:`gpurpo.metrics._ranking_kernels`): by direct counting when no row
    has more than ``_FEW_RELEVANT`` relevant labels, else by sorting every row."""
    few = int(T.sum(axis=1).max()) <= _FEW_RELEVANT
    return (_ranking_counts_few if few else _ranking_counts)(T, S, xp)
