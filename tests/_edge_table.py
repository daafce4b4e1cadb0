"""Test helper: the ragged edge table of a ``(p, B - 1)`` table padded with ``+inf``."""

from __future__ import annotations

import numpy as np

from gpurpo.tree.binning._bin_lows import edge_lows


def ragged(table: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``edge_values, edge_ptr`` of ``table``: each row's entries below ``+inf``, which
    must come first (increasing rows), so that the split kernels read the same
    edges, and ``+inf`` from each feature's number of edges on; the edges are followed
    by the bins' lows from the edges alone (the Extra-Trees draw's scale, see
    :func:`gpurpo.tree.binning._bin_lows.edge_lows`)."""
    table = np.asarray(table, dtype=np.float64)
    finite = table < np.inf
    counts = finite.sum(axis=1)
    if not np.array_equal(finite, np.arange(table.shape[1]) < counts[:, None]):
        raise ValueError("each row's +inf entries must follow its edges")
    edge_ptr = np.zeros(table.shape[0] + 1, dtype=np.int64)
    edge_ptr[1:] = np.cumsum(counts)
    edges = np.ascontiguousarray(table[finite])
    return np.concatenate([edges, edge_lows(edges, edge_ptr)]), edge_ptr
