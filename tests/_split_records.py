"""Test helpers: the argument records of ``kernels.split_small`` and
``kernels.build_histograms`` from a flat problem."""

from __future__ import annotations

from typing import Any

from gpurpo.tree.kernels import EdgeTable, NodeBatch, SplitRules


def split_records(codes: Any, sample_indices: Any, node_ranges: Any, node_tree: Any,
                  node_seed: Any, weights: Any, targets: Any, edge_values: Any, edge_ptr: Any,
                  n_candidates: int, min_samples_leaf: int, random_split: bool,
                  missing_bin: int, tie_rtol: float) -> tuple:
    """``(codes, batch, weights, targets, edges, rules)``: the arguments of
    ``kernels.split_small`` after the backend, for a problem given as the
    tests build it (node arrays, then edge table, then rule scalars)."""
    return (
        codes,
        NodeBatch(sample_indices, node_ranges, node_tree, node_seed),
        weights,
        targets,
        EdgeTable(edge_values, edge_ptr),
        SplitRules(n_candidates, min_samples_leaf, random_split, missing_bin, tie_rtol),
    )


def histogram_records(codes: Any, sample_indices: Any, node_ranges: Any, node_features: Any,
                      node_tree: Any, weights: Any, targets: Any) -> tuple:
    """``(codes, batch, node_features, weights, targets)``: the arguments of
    ``kernels.build_histograms`` (and of the ``tree_histograms`` launchers, before
    ``out``) after the backend, for a batch given as the tests build it."""
    return codes, NodeBatch(sample_indices, node_ranges, node_tree), node_features, weights, targets
