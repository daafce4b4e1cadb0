"""CUDA launchers of ``kernels/tree_level.cu`` and ``kernels/tree_best_first.cu`` (the
bookkeeping kernels of device-resident growth).

Each takes the backend followed by EXACTLY the arguments of its numba twin in
:mod:`gpurpo.tree._numba.tree_level`; contracts in
:mod:`gpurpo.tree.level_kernels`. Elementwise kernels use grid-stride loops
(:func:`gpurpo.backend.launch_grid_stride`); ``split`` is one block of
``PARTITION_BLOCK`` threads per (node, part), as ``tree_partition`` per node; ``children``
is one block of ``CHILDREN_BLOCK`` threads (``LEVEL_MAX_THREADS`` of the source), each
taking a contiguous chunk of the frontier, then the blocks placing the parts' samples;
``best_first_select`` is one block.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from gpurpo.backend import Backend, launch_block, launch_grid_stride
from gpurpo.tree._kernels_cuda import PARTITION_BLOCK, PARTITION_BLOCKS_PER_SM, node_stats_launch

__all__ = ["large_setup", "split", "partition_blocks", "children", "roots", "subtract", "leaf_marks_table",
           "leaf_marks_state", "leaf_marks_subtrees", "place", "best_first_select",
           "CHILDREN_BLOCK"]

CHILDREN_BLOCK = 256  # LEVEL_MAX_THREADS of tree_level.cu

_i32, _i64, _f64 = np.int32, np.int64, np.float64


def _elementwise(backend: Backend, name: str, n_items: int, args: tuple) -> None:
    launch_grid_stride(backend, "tree_level.cu", name, n_items, args)


def large_setup(backend: Backend, sample_indices: Any, node_ranges: Any, node_tree: Any,
                weights: Any, targets: Any, node_done: Any, seed: Any, pos: Any, p: int,
                random_split: int, natural: int, out_impure: Any, out_q: Any,
                out_features: Any, out_positions: Any, out_uniforms: Any) -> None:
    """``tree_level_large_setup``: the blocks and tasks of ``tree_node_stats``
    (:func:`~gpurpo.tree._kernels_cuda.node_stats_blocks` blocks per node), then one
    thread per row of ``out_features`` over the whole grid."""
    n_nodes = int(node_ranges.shape[0])
    n_draws, width = (int(s) for s in out_features.shape)
    if n_nodes == 0 and n_draws == 0:
        return
    grid, block, tasks = node_stats_launch(backend, n_nodes, node_done, targets, weights,
                                           n_draws)
    kernel = backend.load_module("tree_level.cu").get_function("tree_level_large_setup")
    kernel((grid,), (block,), (
        sample_indices, node_ranges, node_tree, weights, targets, *tasks, node_done, out_impure,
        out_q, seed, pos, _i64(n_draws), _i32(width), _i32(p), _i32(random_split), _i32(natural),
        out_features, out_positions, out_uniforms))


def split(backend: Backend, codes: Any, row_ptr: Any, row_features: Any, row_codes: Any,
          zero_code: Any, missing_bin: int, sample_indices: Any, front: Any,
          n_sub: int, n_small: int, ranges: Any, small_feature: Any, small_bin: Any,
          small_missing_left: Any, small_gain: Any, large: Any, batch_tree: Any,
          root_weight: Any, n_scored: int, min_impurity_decrease: float, width: int,
          node_feature: Any, node_bin: Any, node_missing_left: Any, node_gain: Any,
          node_pos: Any, out_feature: Any, out_bin: Any, out_missing_left: Any,
          out_n_left: Any, scratch: Any, parts: int, part_min: int, part_left: Any) -> None:
    """``tree_level_split``: one block per (evaluated node, part): a splitting node's
    samples are staged in the same range of ``scratch`` and, for a node of one part,
    partitioned from there back in place; a node of several parts only counts each
    part's left samples (``tree_level_children`` places them). With ``codes`` of shape
    (p, 0) each sample's code is looked up in the stored rows."""
    n_front = int(front.shape[0])
    n_eval = n_front - int(n_sub)
    if n_eval == 0:
        return
    _check_parts(parts, part_min)
    attrs = backend.device_attributes()
    _require_32_thread_warps(attrs, "tree_level_split")
    block = launch_block(attrs, PARTITION_BLOCK)
    grid = max(1, min(n_eval * int(parts), partition_blocks(attrs)))
    kernel = backend.load_module("tree_level.cu").get_function("tree_level_split")
    kernel((grid,), (block,), (
        codes, _i64(codes.shape[1]), row_ptr, row_features, row_codes, zero_code,
        _i32(1 if codes.shape[1] == 0 else 0), _i32(missing_bin), sample_indices, front,
        _i64(n_sub), _i64(n_small), _i64(n_front), ranges, small_feature, small_bin,
        small_missing_left, small_gain, large, batch_tree, root_weight, _i32(n_scored),
        _f64(min_impurity_decrease), _i32(width), node_feature, node_bin, node_missing_left,
        node_gain, node_pos, out_feature, out_bin, out_missing_left, out_n_left, scratch,
        _i64(parts), _i64(part_min), part_left))


def _check_parts(parts: int, part_min: int) -> None:
    """ValueError unless ``parts`` and ``part_min`` are positive (the kernels divide by
    them)."""
    if int(parts) < 1 or int(part_min) < 1:
        raise ValueError(f"parts and part_min must be at least 1, got {parts} and {part_min}")


def _require_32_thread_warps(attrs: dict, name: str) -> None:
    """RuntimeError unless the device's warps have 32 threads (ballots, shuffles)."""
    if int(attrs["warp_size"]) != 32:
        raise RuntimeError(f"{name} assumes 32-thread warps, got {attrs['warp_size']}")


def partition_blocks(attrs: dict) -> int:
    """The blocks that fill the device for the partition of a level:
    ``PARTITION_BLOCKS_PER_SM`` per multiprocessor."""
    return int(attrs["multiprocessor_count"]) * PARTITION_BLOCKS_PER_SM


def children(backend: Backend, front: Any, n_sub: int, n_small: int, subtract: int,
             ranges: Any, batch_tree: Any, batch_depth: Any, batch_seed: Any,
             dec_feature: Any, n_left: Any, subtree_size: int, small_size: int,
             min_split: int, max_depth: int, first_new: int, node_start: Any, node_stop: Any,
             node_tree: Any, node_depth: Any, node_seed: Any, node_pos: Any, node_parent: Any,
             node_left: Any, node_right: Any, node_feature: Any, node_bin: Any,
             node_missing_left: Any, node_gain: Any, next_front: Any, next_ranges: Any,
             next_tree: Any, next_seed: Any, next_depth: Any, next_pos: Any,
             next_parent_hist: Any, next_sibling: Any, sub_offsets: Any, counts: Any,
             codes: Any, row_ptr: Any, row_features: Any, row_codes: Any, zero_code: Any,
             missing_bin: int, sample_indices: Any, scratch: Any, dec_bin: Any,
             dec_missing_left: Any, parts: int, part_min: int, part_left: Any) -> None:
    """``tree_level_children``: one block for the children and the next frontier, and
    with ``parts`` > 1 the blocks that fill the device after it, which place the samples
    of the nodes partitioned in parts."""
    _check_parts(parts, part_min)
    attrs = backend.device_attributes()
    _require_32_thread_warps(attrs, "tree_level_children")
    block = launch_block(attrs, CHILDREN_BLOCK)
    n_eval = int(front.shape[0]) - int(n_sub)
    placing = min(n_eval * int(parts), partition_blocks(attrs)) if int(parts) > 1 else 0
    kernel = backend.load_module("tree_level.cu").get_function("tree_level_children")
    kernel((1 + placing,), (block,), (
        front, _i64(front.shape[0]), _i64(n_sub), _i64(n_small), _i32(subtract), ranges,
        batch_tree, batch_depth, batch_seed, dec_feature, n_left, _i64(subtree_size),
        _i64(small_size), _i64(min_split), _i32(max_depth), _i64(first_new), node_start,
        node_stop, node_tree, node_depth, node_seed, node_pos, node_parent, node_left,
        node_right, node_feature, node_bin, node_missing_left, node_gain, next_front,
        next_ranges, next_tree, next_seed, next_depth, next_pos, next_parent_hist,
        next_sibling, sub_offsets, counts, codes, _i64(codes.shape[1]), row_ptr, row_features,
        row_codes, zero_code, _i32(1 if codes.shape[1] == 0 else 0), _i32(missing_bin),
        sample_indices, scratch, dec_bin, dec_missing_left, _i64(parts), _i64(part_min),
        part_left))


def roots(backend: Backend, counts: Any, n_each: int, seeds: Any, root_weight: Any,
          sample_indices: Any, weights: Any, subtree_size: int, small_size: int,
          min_split: int, max_depth: int, node_start: Any, node_stop: Any, node_tree: Any,
          node_depth: Any, node_seed: Any, node_pos: Any, node_parent: Any, node_left: Any,
          node_right: Any, node_feature: Any, node_bin: Any, node_missing_left: Any,
          node_gain: Any, front: Any, ranges: Any, batch_tree: Any, batch_seed: Any,
          batch_depth: Any, batch_pos: Any, sub_offsets: Any) -> None:
    """``tree_level_roots``: thread 0 writes the roots and the first frontier; without
    counts the grid also writes the samples and unit weights, grid-stride."""
    n_trees = int(seeds.shape[0])
    filled = 0 if int(counts.shape[0]) else n_trees * int(n_each)
    _elementwise(backend, "tree_level_roots", max(filled, 1), (
        counts, _i64(counts.shape[0]), _i64(n_each), seeds, root_weight, sample_indices,
        weights, _i64(n_trees), _i64(subtree_size), _i64(small_size), _i64(min_split),
        _i32(max_depth), node_start, node_stop, node_tree, node_depth, node_seed, node_pos,
        node_parent, node_left, node_right, node_feature, node_bin, node_missing_left,
        node_gain, front, ranges, batch_tree, batch_seed, batch_depth, batch_pos, sub_offsets))


def subtract(backend: Backend, hist: Any, n_derived: int, n_direct: int, parent_hist: Any,
             parent_row: Any, sibling: Any) -> None:
    """``tree_level_subtract``: one thread per (derived node, cell)."""
    cells = int(np.prod(hist.shape[1:]))
    _elementwise(backend, "tree_level_subtract", int(n_derived) * cells, (
        hist, _i64(n_derived), _i64(n_direct), _i64(cells), parent_hist, parent_row, sibling))


def leaf_marks_table(backend: Backend, node_feature: Any, node_pos: Any, node_start: Any,
                     mark: Any) -> None:
    """``tree_level_leaf_marks_table``: one thread per node."""
    n = int(node_feature.shape[0])
    _elementwise(backend, "tree_level_leaf_marks_table", n,
                 (_i64(n), node_feature, node_pos, node_start, mark))


def leaf_marks_state(backend: Backend, node_state: Any, node_start: Any, mark: Any) -> None:
    """``tree_level_leaf_marks_state``: one thread per node."""
    n = int(node_state.shape[0])
    _elementwise(backend, "tree_level_leaf_marks_state", n, (_i64(n), node_state, node_start, mark))


def leaf_marks_subtrees(backend: Backend, roots: Any, offsets: Any, count: Any, feature: Any,
                        start: Any, node_start: Any, mark: Any) -> None:
    """``tree_level_leaf_marks_subtrees``: one thread per subtree root."""
    n = int(roots.shape[0])
    _elementwise(backend, "tree_level_leaf_marks_subtrees", n,
                 (_i64(n), roots, offsets, count, feature, start, node_start, mark))


def place(backend: Backend, mark: Any, cum: Any, sample_indices: Any, root_start: Any,
          root_stop: Any, weights: Any, out_leaf_of_sample: Any, out_leaf_weight: Any) -> None:
    """``tree_level_place``: one thread per sample position."""
    total = int(mark.shape[0])
    _elementwise(backend, "tree_level_place", total, (
        _i64(total), mark, cum, sample_indices, root_start, root_stop, _i32(root_start.shape[0]),
        _i64(weights.shape[1]), weights, out_leaf_of_sample, out_leaf_weight))


def best_first_select(backend: Backend, eval_front: Any, n_small: int, small_feature: Any,
                      small_bin: Any, small_missing_left: Any, small_gain: Any, large: Any,
                      root_weight: Any, n_scored: int, min_impurity_decrease: float,
                      base_small: int, base_large: int, n_nodes: int, max_leaves: int,
                      dummy: int, node_start: Any, node_stop: Any, node_tree: Any,
                      node_depth: Any, node_seed: Any, node_left: Any, node_right: Any,
                      node_feature: Any, node_bin: Any, node_missing_left: Any, node_gain: Any,
                      node_slot: Any, node_state: Any, heap_gain: Any, heap_order: Any,
                      heap_node: Any, out_front: Any, out_ranges: Any, out_tree: Any,
                      out_depth: Any, out_seed: Any, out_small_feature: Any, out_small_bin: Any,
                      out_small_missing_left: Any, out_small_gain: Any, out_large: Any,
                      pending: Any) -> None:
    """``tree_best_first_select``: one block."""
    attrs = backend.device_attributes()
    block = min(CHILDREN_BLOCK, int(attrs["max_threads_per_block"]))
    kernel = backend.load_module("tree_best_first.cu").get_function("tree_best_first_select")
    kernel((1,), (block,), (
        eval_front, _i64(eval_front.shape[0]), _i64(n_small), small_feature, small_bin,
        small_missing_left, small_gain, large, root_weight, _i32(n_scored),
        _f64(min_impurity_decrease), _i64(base_small), _i64(base_large), _i64(n_nodes),
        _i64(max_leaves), _i64(dummy), node_start, node_stop, node_tree, node_depth, node_seed,
        node_left, node_right, node_feature, node_bin, node_missing_left, node_gain, node_slot,
        node_state, _i64(heap_gain.shape[0]), _i64(heap_gain.shape[1]), heap_gain, heap_order,
        heap_node, _i64(out_front.shape[0]), out_front, out_ranges, out_tree, out_depth,
        out_seed, _i64(out_small_feature.shape[0]), out_small_feature, out_small_bin,
        out_small_missing_left, out_small_gain, out_large, pending))
