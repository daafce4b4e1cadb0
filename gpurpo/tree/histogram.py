"""Histograms of a batch of nodes: layout, construction and subtraction.

A histogram of a node holds, for each candidate feature slot and bin, the
weighted count and the weighted sums of the m projected outputs of the
node's samples in that bin (Joly et al. 2014: the split score only needs
these sums). Layout: float32 ``(N, k, n_bins, C)`` with channels

* ``0``: sum of weights ``W``;
* ``1 .. m``: weighted sums ``S_c = sum w y_c``;
* ``m + 1`` (only when :func:`n_channels` says so): number of samples, used
  for ``min_samples_leaf`` when weights are not all 1.

:func:`node_histograms` is the single entry point of the growers. It
dispatches on the type of the binned input: for a dense
:class:`~gpurpo.tree.binning.BinnedMatrix` it runs the ``tree_histograms``
kernel. A sparsity-aware input (codes of the nonzero entries only, in CSC
form) plugs in here, without touching the growers: build the histograms over
the nonzero entries of the node's samples and derive the bin of the zero
value as the node totals (W, S, count of the node, identical for every slot)
minus the sum over the other bins.

Histogram subtraction: the histogram of one child is the parent's minus its
sibling's (:func:`subtract`), valid when both are over the same features.
"""

from __future__ import annotations

from typing import Any

from gpurpo.tree import kernels
from gpurpo.tree._records import EdgeTable, NodeBatch
from gpurpo.tree.binning import BinnedMatrix

__all__ = ["n_channels", "node_histograms", "subtract", "histogram_bytes"]


def n_channels(n_outputs: int, unit_weights: bool) -> int:
    """Number of channels C: ``m + 1``, or ``m + 2`` with a sample count.

    With unit weights channel 0 is the (exact) sample count. Otherwise a
    count channel is added: ``min_samples_leaf`` counts samples, and a
    float32 weight sum obtained by subtraction is not exactly zero for an
    empty side when weights are fractional.
    """
    return n_outputs + 1 if unit_weights else n_outputs + 2


def histogram_bytes(n_nodes: int, k: int, n_bins: int, channels: int) -> int:
    """Bytes of an ``(n_nodes, k, n_bins, channels)`` float32 histogram."""
    return 4 * n_nodes * k * n_bins * channels


def node_histograms(
    binned: Any,
    batch: NodeBatch,
    node_features: Any,
    weights: Any,
    targets: Any,
    channels: int,
    out: Any = None,
    scratch: Any = None,
) -> Any:
    """Histograms of a batch of nodes (see the module docstring for the layout).

    Parameters
    ----------
    binned : BinnedMatrix
        Binned inputs: dense codes of shape (p, n), or a sparse X's stored
        entries alone (read column by column on the CPU); on CUDA backends the
        listed entries of the rows whenever ``sparse_codes`` lists them
        (:attr:`~gpurpo.tree.binning.BinnedMatrix.stored_rows_held`).
    batch : NodeBatch
        The nodes: ``sample_indices`` int32 (total,), ``node_ranges`` int64
        (N, 2) (each node's [start, stop) in ``sample_indices``) and
        ``node_tree`` int32 (N,) (the tree of each node).
    node_features : int32 array (N, k)
        Candidate features per node, ``-1`` for unused slots.
    weights : float32 array (T, n)
    targets : float32 array (n, T, m)
    channels : int
        ``m + 1`` or ``m + 2``.
    out : float32 array (N, k, n_bins, channels), optional
        Array that receives the histograms, every cell written (dense codes, or
        a sparse X's stored rows on CUDA backends).
    scratch : optional
        :func:`gpurpo.tree.kernels.histogram_scratch` of ``weights`` and ``targets``,
        which the histogram launches of a growth share on CUDA backends (dense codes
        or stored rows).

    Returns
    -------
    float32 array (N, k, n_bins, channels)
    """
    if not isinstance(binned, BinnedMatrix):
        raise TypeError(
            f"no histogram builder for binned inputs of type {type(binned).__name__}")
    nodes = (batch, node_features, weights, targets, binned.n_bins, channels)
    if binned.stored_rows_held:
        # the CUDA kernels add the listed entries of the rows (a sparse X, or a dense one
        # of mostly zeros) and derive each feature's cell of its code of 0.0
        xp = binned.backend.xp
        return kernels.build_histograms(
            binned.backend, xp.empty((binned.n_features, 0), dtype=xp.uint8), *nodes, out=out,
            stored=binned.sparse_codes, scratch=scratch)
    if binned.dense_codes is None:
        if out is not None:
            raise ValueError("out is taken for dense codes only")
        return kernels.build_histograms_columns(
            binned.backend, binned.sparse_codes, EdgeTable(binned.edge_values, binned.edge_ptr),
            *nodes)
    return kernels.build_histograms(binned.backend, binned.codes, *nodes, out=out,
                                    scratch=scratch)


def subtract(parent: Any, child: Any, in_place: bool = False) -> Any:
    """Histogram of a node's other child: ``parent - child`` (same features).

    ``in_place=True`` writes the result over ``parent`` (whose histogram is
    no longer needed once both children have theirs) instead of allocating.
    """
    if in_place:
        parent -= child
        return parent
    return parent - child
