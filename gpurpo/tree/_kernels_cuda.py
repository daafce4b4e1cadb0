"""CUDA implementations of the tree kernels: launch wrappers for ``kernels/tree_*.cu``.

Each function takes the backend (``"cupy"``, or ``"emulated"`` for the CPU
emulation of CUDA) followed by EXACTLY the arguments of its numba twin in
``gpurpo/tree/_numba/tree_<stage>.py`` (for the exact split kernels, the
argument records of :mod:`gpurpo.tree._records`, unpacked here at the launch); the contracts are documented once, in
:mod:`gpurpo.tree.kernels`, which registers these functions with
:func:`gpurpo.backend.register_kernel`. Like the numba kernels they only fill
the output arrays they are given.

Launch configurations are derived from :meth:`gpurpo.backend.Backend.device_attributes`
(number of multiprocessors, shared memory per block, threads per block, warp
size), not from constants tuned for one card:

* histograms: the (slot tile x n_bins x channel tile) histogram of a block is
  sized to the shared memory a block may opt in to (blocks that use more than
  a launch gets without opting in are wider in proportion, up to the
  device's threads per block, so that a multiprocessor keeps its resident
  threads); when a node's whole (k x n_bins x C)
  histogram does not fit, the kernel tiles over slots, then over channels;
  when not even one (slot, channel) column fits, a global-atomics variant
  runs instead. Each node's samples are split into chunks so that the grid
  has about two waves of resident blocks, but no chunk is smaller than
  ``MIN_SAMPLES_PER_BLOCK`` samples (merging a block's shared histogram into
  global memory costs one pass over its cells);
* the partition of splitting nodes uses one block of ``PARTITION_BLOCK``
  threads per node, at most ``PARTITION_BLOCKS_PER_SM`` blocks per
  multiprocessor; node statistics blocks of ``NODE_STATS_BLOCK`` threads, as
  many per node as fill ``NODE_STATS_BLOCKS_PER_SM`` blocks per multiprocessor
  when the caller gives counters (:func:`node_stats_blocks`), else one;
* elementwise kernels (leaf sums, traversal) use grid-stride loops over at most
  ``GRID_WAVES`` blocks per multiprocessor (:func:`gpurpo.backend.launch_grid`);
* the exact small-node split uses one block of ``SPLIT_BLOCK_WARPS`` warps per
  node, blocks looping over nodes;
* histogram scoring uses one block of ``SCORE_BLOCK`` threads per (node,
  slot), blocks looping over the slots: at most ``SCORE_BLOCKS_PER_SM`` per
  multiprocessor and at most as many as fit their running sums in
  ``SCORE_SCRATCH_BYTES`` of scratch.

Scalars are passed as NumPy scalars of exactly the parameter type.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from gpurpo.backend import ELEMENTWISE_BLOCK, Backend, launch_block, launch_grid
from gpurpo.tree._histogram_scratch import HistogramScratch
from gpurpo.tree._numba._node_split import SORT_LIMIT
from gpurpo.tree._records import EdgeTable, NodeBatch, SparseColumns, SplitRules

__all__ = [
    "histograms",
    "node_stats",
    "node_stats_blocks",
    "node_stats_launch",
    "partition",
    "split_small_nodes",
    "grow_subtrees",
    "score_histograms",
    "apply_trees",
    "sum_leaves_dense",
    "sum_leaves_csr",
    "segment_sums",
    "segment_row_sums",
    "best_slot",
    "histogram_launch_plan",
    "MIN_SAMPLES_PER_BLOCK",
]

HIST_BLOCK = 256
HIST_CELL_BYTES = 8  # a histogram cell in shared memory: a 64-bit fixed-point sum
MIN_SAMPLES_PER_BLOCK = 1024
SPLIT_BLOCK_WARPS = 1
SPLIT_MAX_THREADS = 64  # SPLIT_MAX_THREADS of tree_split_small.cu
SPLIT_MAX_BINS = 256  # SPLIT_MAX_BINS of tree_split_small.cu
SPLIT_BLOCKS_PER_SM = 16
SPLIT_SCRATCH_BYTES = 256 * 1024**2
THREADS_PER_SM = 2048
NODE_STATS_BLOCK = 256  # NODE_STATS_THREADS of tree_node_stats.cu
PARTITION_BLOCK = 256  # PARTITION_THREADS of tree_partition.cu
PARTITION_BLOCKS_PER_SM = 8
NODE_STATS_BLOCKS_PER_SM = 8
SCORE_BLOCK = 128  # SCORE_THREADS of tree_score.cu
SCORE_BLOCKS_PER_SM = 16
SCORE_SCRATCH_BYTES = 256 * 1024**2

_i32, _i64, _f64 = np.int32, np.int64, np.float64


def _power_of_two_block(attrs: dict[str, int], preferred: int) -> int:
    """Largest power of two <= ``preferred`` and the device's threads per block."""
    limit = min(preferred, int(attrs["max_threads_per_block"]))
    return 1 << (max(1, limit).bit_length() - 1)


def _contiguous_out(backend: Backend, out: Any) -> tuple[Any, bool]:
    if out.flags.c_contiguous:
        return out, False
    return backend.xp.ascontiguousarray(out), True


# --------------------------------------------------------------------------
# histograms
# --------------------------------------------------------------------------


def histogram_launch_plan(
    attrs: dict[str, int],
    n_nodes: int,
    k: int,
    n_bins: int,
    n_channels: int,
    total_samples: int,
    shared_mem_bytes: int | None = None,
    samples_per_block: int | None = None,
    stored: bool = False,
) -> dict[str, Any]:
    """Launch configuration of ``tree_histograms`` for a batch.

    Parameters
    ----------
    attrs : dict
        :meth:`~gpurpo.backend.Backend.device_attributes`.
    n_nodes, k, n_bins, n_channels : int
        Shape of the output histograms.
    total_samples : int
        Length of ``sample_indices`` (sum of the node sizes).
    shared_mem_bytes : int, optional
        Shared memory a block may use (default: the device's opt-in
        per-block maximum, ``max_shared_memory_per_block_optin``); a smaller
        value forces slot/channel tiling or the global-atomics variant.
    samples_per_block : int, optional
        Smallest sample chunk per block (default ``MIN_SAMPLES_PER_BLOCK``).
    stored : bool
        Codes read from a sparse X's stored rows: a block also holds its channels'
        totals and its slots' features sorted, with their slots.

    Returns
    -------
    dict with ``variant`` (``"shared"`` or ``"global"``), ``block``,
    ``grid``, ``chunks`` and, for ``"shared"``, ``slot_tile``,
    ``chan_tile``, ``n_slot_tiles``, ``n_chan_tiles``, ``shared_mem``.
    """
    default_smem = int(attrs["max_shared_memory_per_block"])
    smem = int(attrs.get("max_shared_memory_per_block_optin", default_smem)
               if shared_mem_bytes is None else shared_mem_bytes)
    spb = MIN_SAMPLES_PER_BLOCK if samples_per_block is None else int(samples_per_block)
    if spb < 1:
        raise ValueError(f"samples_per_block must be >= 1, got {samples_per_block}")
    avg = total_samples / max(n_nodes, 1)
    column = HIST_CELL_BYTES * n_bins  # one (slot, channel) column of fixed-point cells
    # a block holds its cells, its channels' scales (float64), its slots' features and
    # a flag (int32); for stored rows also its channels' totals (int64), its slots'
    # features sorted and their slots, and their number (int32)
    per_channel = 16 if stored else 8
    per_slot = 12 if stored else 4
    fixed = 8 if stored else 4
    if column + per_channel + per_slot + fixed <= smem:
        node_bytes = column * n_channels + per_slot
        if node_bytes + per_channel * n_channels + fixed <= smem:
            chan_tile = n_channels
            slot_tile = min(k, (smem - per_channel * n_channels - fixed) // node_bytes)
        else:
            slot_tile = 1
            chan_tile = (smem - per_slot - fixed) // (column + per_channel)
        n_slot_tiles = math.ceil(k / slot_tile)
        n_chan_tiles = math.ceil(n_channels / chan_tile)
        # the tiles of a node's slots are balanced, so the last is not nearly empty
        slot_tile = math.ceil(k / n_slot_tiles)
        shared = (HIST_CELL_BYTES * slot_tile * n_bins * chan_tile + per_channel * chan_tile
                  + per_slot * slot_tile + fixed)
        # beyond the shared memory of a launch without opting in, the blocks are wider
        # in proportion, so that a multiprocessor keeps as many threads resident
        block = launch_block(attrs, HIST_BLOCK * _power_of_two_ceil(shared / default_smem))
        per_sm = min(max(1, THREADS_PER_SM // block),
                     max(1, int(attrs.get("max_shared_memory_per_multiprocessor", smem))
                         // max(shared, 1)))
        resident = int(attrs["multiprocessor_count"]) * per_sm
        units = n_nodes * n_slot_tiles * n_chan_tiles
        chunks = max(1, min(int(avg // spb), math.ceil(2 * resident / units)))
        return {
            "variant": "shared",
            "block": block,
            "grid": units * chunks,
            "chunks": chunks,
            "slot_tile": slot_tile,
            "chan_tile": chan_tile,
            "n_slot_tiles": n_slot_tiles,
            "n_chan_tiles": n_chan_tiles,
            "shared_mem": shared,
        }
    block = launch_block(attrs, HIST_BLOCK)
    resident = int(attrs["multiprocessor_count"]) * max(1, THREADS_PER_SM // block)
    chunks = max(1, min(int(avg // spb), math.ceil(2 * resident / max(n_nodes, 1))))
    return {"variant": "global", "block": block, "grid": n_nodes * chunks, "chunks": chunks}


def _power_of_two_ceil(x: float) -> int:
    """The smallest power of two >= ``x`` (1 for ``x <= 1``)."""
    return 1 << max(0, math.ceil(math.log2(x))) if x > 1 else 1


def histograms(
    backend: Backend,
    codes: Any,
    batch: NodeBatch,
    node_features: Any,
    weights: Any,
    targets: Any,
    out: Any,
    rows: Any = None,
    *,
    scratch: HistogramScratch | None = None,
    shared_mem_bytes: int | None = None,
    samples_per_block: int | None = None,
) -> None:
    """``tree_histograms``: shared-memory privatised histograms (global fallback).

    With ``codes`` of shape (p, 0) the codes are a sparse X's stored rows
    (``rows``: the ``row_ptr, row_features, row_codes, zero_code`` arrays of its
    :class:`~gpurpo.tree.binning.SparseCodes`, typed): a block adds the listed
    codes only and derives each slot's cell of its feature's code of 0.0 from the
    node's totals, the same bits as from the dense codes.

    ``batch`` is the typed :class:`~gpurpo.tree._records.NodeBatch` of the
    contract (its ``sample_indices``, ``node_ranges`` and ``node_tree``).

    The sums are fixed point (``kernels/tree_histograms.cu``): the channels'
    scales come from ``tree_histogram_bounds`` (the largest ``|w|`` and
    ``|y_c|``; it also zeroes the 64-bit sums and counters of chunked nodes),
    and the result is exact integer sums rounded once, the same bits whatever
    the launch plan and the run: two launches per call; one with ``scratch``
    (:class:`~gpurpo.tree._histogram_scratch.HistogramScratch` of these weights
    and targets: a growth's maxima, read once, and its zeroed sums).
    ``shared_mem_bytes`` and ``samples_per_block`` override the launch plan
    (see :func:`histogram_launch_plan`).
    """
    n_nodes, k, n_bins, n_channels = (int(s) for s in out.shape)
    if n_nodes == 0 or k == 0:
        return
    sample_indices, node_ranges, node_tree = batch.sample_indices, batch.node_ranges, batch.node_tree
    n = int(weights.shape[1])
    n_trees, m = int(targets.shape[1]), int(targets.shape[2])
    xp = backend.xp
    stored = int(codes.shape[1]) == 0
    if stored:
        if rows is None or int(rows[0].shape[0]) != n + 1:
            raise ValueError("codes of shape (p, 0) need rows: the stored rows of the "
                             f"sparse X of {n} samples")
    else:
        # never read with dense codes (empty: no launch)
        rows = (xp.empty(1, dtype=xp.int64), xp.empty(0, dtype=xp.int32),
                xp.empty(0, dtype=xp.uint8), xp.empty(1, dtype=xp.uint8))
    plan = histogram_launch_plan(
        backend.device_attributes(),
        n_nodes,
        k,
        n_bins,
        n_channels,
        int(sample_indices.shape[0]),
        shared_mem_bytes,
        samples_per_block,
        stored,
    )
    attrs = backend.device_attributes()
    module = backend.load_module("tree_histograms.cu")
    # integer sums in global memory, and a counter of finished chunks per unit, for
    # nodes split into chunks (and the fallback), zero before the launch
    summed = plan["variant"] == "global" or plan["chunks"] > 1
    units = n_nodes * (plan.get("n_slot_tiles", 1) * plan.get("n_chan_tiles", 1))
    acc_cells, n_done = (int(out.size), units) if summed else (0, 0)
    if scratch is None:
        # this launch's own: the maxima, and its sums zeroed, in one launch
        scratch = HistogramScratch(backend, weights, targets, acc_cells, n_done)
    else:
        scratch.check(weights, targets)
    acc, done = scratch.sums(acc_cells, n_done)
    partial = scratch.partial
    n_partial = int(partial.shape[0])
    head = (codes, *rows, _i32(1 if stored else 0), sample_indices, node_ranges,
            node_features, node_tree, weights, targets, partial, out, acc, done)
    shape = (_i64(n), _i32(k), _i32(n_bins), _i32(n_channels), _i32(m), _i32(n_trees),
             _i32(n_partial), _i32(int(sample_indices.shape[0]).bit_length()))
    if plan["variant"] == "shared":
        kernel = module.get_function("tree_histograms_shared")
        if plan["shared_mem"] > int(attrs["max_shared_memory_per_block"]):
            # opt in (cudaFuncAttributeMaxDynamicSharedMemorySize)
            kernel.max_dynamic_shared_size_bytes = plan["shared_mem"]
        args = head + shape + (
            _i32(plan["slot_tile"]),
            _i32(plan["chan_tile"]),
            _i32(plan["n_slot_tiles"]),
            _i32(plan["n_chan_tiles"]),
            _i32(plan["chunks"]),
        )
        kernel((plan["grid"],), (plan["block"],), args, shared_mem=plan["shared_mem"])
    else:
        kernel = module.get_function("tree_histograms_global")
        kernel((plan["grid"],), (plan["block"],), head + shape + (_i32(plan["chunks"]),))


# --------------------------------------------------------------------------
# node statistics
# --------------------------------------------------------------------------


def node_stats_blocks(attrs: dict, n_nodes: int, has_counters: bool) -> int:
    """Blocks per node of ``tree_node_stats``: with counters, as many as fill
    ``NODE_STATS_BLOCKS_PER_SM`` blocks on every multiprocessor (the few large nodes at
    the top of a tree are read by the whole device); else one."""
    if not has_counters or n_nodes == 0:
        return 1
    return max(1, int(attrs["multiprocessor_count"]) * NODE_STATS_BLOCKS_PER_SM // n_nodes)


def node_stats(
    backend: Backend,
    sample_indices: Any,
    node_ranges: Any,
    node_tree: Any,
    weights: Any,
    targets: Any,
    node_done: Any,
    out_impure: Any,
    out_q: Any,
) -> None:
    """``tree_node_stats``: :func:`node_stats_blocks` blocks per node (purity by
    barrier-OR, Q by a tree reduction; with several, the node's last block adds their
    partial sums in block order)."""
    n_nodes = int(node_ranges.shape[0])
    if n_nodes == 0:
        return
    grid, block, tasks = node_stats_launch(backend, n_nodes, node_done, targets, weights)
    kernel = backend.load_module("tree_node_stats.cu").get_function("tree_node_stats")
    kernel((grid,), (block,), (sample_indices, node_ranges, node_tree, weights, targets, *tasks,
                               node_done, out_impure, out_q))


def node_stats_launch(backend: Backend, n_nodes: int, node_done: Any, targets: Any,
                      weights: Any, n_threads: int = 0) -> tuple[int, int, tuple]:
    """(grid, block, arguments from ``n`` to ``partial_differs``) of a launch of
    ``node_stats_tasks`` (``kernels/node_stats.cuh``) on ``n_nodes`` nodes
    (:func:`node_stats_blocks` blocks each), with at least ``n_threads`` threads in all
    when the grid's cap allows."""
    xp = backend.xp
    n_trees, m = int(targets.shape[1]), int(targets.shape[2])
    attrs = backend.device_attributes()
    block = _power_of_two_block(attrs, NODE_STATS_BLOCK)
    per_node = node_stats_blocks(attrs, n_nodes, int(node_done.shape[0]) >= n_nodes)
    n_tasks = n_nodes * per_node
    grid = max(1, min(max(n_tasks, -(-int(n_threads) // block)),
                      int(attrs["multiprocessor_count"]) * NODE_STATS_BLOCKS_PER_SM))
    partial_q = xp.empty(n_tasks if per_node > 1 else 1, dtype=xp.float64)
    partial_differs = xp.empty(n_tasks if per_node > 1 else 1, dtype=xp.int32)
    return grid, block, (_i64(weights.shape[1]), _i32(n_trees), _i32(m), _i64(n_nodes),
                         _i32(per_node), partial_q, partial_differs)


# --------------------------------------------------------------------------
# partition
# --------------------------------------------------------------------------


def partition(
    backend: Backend,
    codes: Any,
    sample_indices: Any,
    node_ranges: Any,
    node_feature: Any,
    node_bin: Any,
    node_missing_left: Any,
    missing_bin: int,
    out_n_left: Any,
) -> None:
    """``tree_partition``: one block per node, warp ballots for the ranks.

    The samples are read from a copy of ``sample_indices`` (one device copy)
    and written back in place.
    """
    n_nodes = int(node_ranges.shape[0])
    if n_nodes == 0:
        return
    attrs = backend.device_attributes()
    if int(attrs["warp_size"]) != 32:
        raise RuntimeError(f"tree_partition assumes 32-thread warps, got {attrs['warp_size']}")
    block = launch_block(attrs, PARTITION_BLOCK)
    grid = max(1, min(n_nodes, int(attrs["multiprocessor_count"]) * PARTITION_BLOCKS_PER_SM))
    src = sample_indices.copy()
    kernel = backend.load_module("tree_partition.cu").get_function("tree_partition")
    kernel(
        (grid,),
        (block,),
        (
            codes, src, sample_indices, node_ranges, node_feature, node_bin, node_missing_left,
            _i64(codes.shape[1]), _i32(missing_bin), _i64(n_nodes), out_n_left,
        ),
    )


# --------------------------------------------------------------------------
# exact split of small nodes
# --------------------------------------------------------------------------


def _split_block(backend: Backend) -> int:
    """Threads per block of the split kernels: SPLIT_BLOCK_WARPS warps, a power of two."""
    attrs = backend.device_attributes()
    if int(attrs["warp_size"]) != 32:
        raise RuntimeError(f"the split kernels assume 32-thread warps, got {attrs['warp_size']}")
    return _power_of_two_block(attrs, min(SPLIT_MAX_THREADS, SPLIT_BLOCK_WARPS * 32))


def _split_scratch(xp: Any, n_blocks: int, max_ns: int, m: int, cand_stride: int) -> tuple[Any, ...]:
    """Per-block scratch of ``split_node`` (see tree_split_small.cu), in argument order."""
    return (
        xp.empty(n_blocks * max_ns, dtype=xp.int32),
        xp.empty(2 * n_blocks * max_ns, dtype=xp.uint8),
        xp.empty(n_blocks * m, dtype=xp.float64),
        xp.empty(n_blocks * (SPLIT_MAX_BINS + 1) * m, dtype=xp.float64),
        xp.empty(n_blocks * cand_stride, dtype=xp.int32),
        xp.empty(n_blocks * cand_stride, dtype=xp.float64),
        xp.empty(n_blocks * cand_stride, dtype=xp.int32),
        xp.empty(n_blocks * cand_stride, dtype=xp.uint8),
    )


def _split_scratch_bytes(max_ns: int, m: int, cand_stride: int) -> int:
    return 6 * max_ns + 8 * m + 8 * (SPLIT_MAX_BINS + 1) * m + 17 * cand_stride


def _split_blocks(backend: Backend, n_items: int, scratch_per_block: int) -> int:
    """Blocks of a split kernel: SPLIT_BLOCKS_PER_SM per SM, within SPLIT_SCRATCH_BYTES."""
    attrs = backend.device_attributes()
    n_blocks = min(n_items, int(attrs["multiprocessor_count"]) * SPLIT_BLOCKS_PER_SM)
    return max(1, min(n_blocks, SPLIT_SCRATCH_BYTES // scratch_per_block))


def _split_launch(
    backend: Backend, codes: Any, node_ranges: Any, targets: Any, rules: SplitRules,
) -> tuple[int, int, int, int, int, int, int]:
    """Checked sizes of a split-kernel launch: (p, n, n_trees, m, block, max_ns, cand_stride).

    ``max_ns`` is ``rules.max_node_size`` when given, else the largest node
    (read from the ranges: one device-to-host copy).
    """
    if not 1 <= int(rules.missing_bin) <= 255:
        raise ValueError(
            f"missing_bin must be in [1, 255] for uint8 codes, got {rules.missing_bin}")
    if int(targets.shape[2]) < 1:
        raise ValueError(f"targets must have at least one output, got shape {targets.shape}")
    # n from the targets: ``codes`` has no columns for a sparse X held as its stored rows
    p, n = int(codes.shape[0]), int(targets.shape[0])
    if rules.max_node_size is not None:
        max_ns = max(1, int(rules.max_node_size))
    else:
        sizes = node_ranges[:, 1] - node_ranges[:, 0]
        max_ns = max(1, int(backend.to_host(sizes.max())))
    cand_stride = max(1, min(int(rules.n_candidates), p))
    n_trees, m = int(targets.shape[1]), int(targets.shape[2])
    return p, n, n_trees, m, _split_block(backend), max_ns, cand_stride


def split_small_nodes(
    backend: Backend,
    codes: Any,
    batch: NodeBatch,
    weights: Any,
    targets: Any,
    edges: EdgeTable,
    rules: SplitRules,
    sparse: SparseColumns,
    out_feature: Any,
    out_bin: Any,
    out_missing_left: Any,
    out_gain: Any,
) -> None:
    """``tree_split_small``: one block per node, bit-compatible with the numba kernel.

    The block scans the node's codes in parallel: the dense ``codes``, or for
    ``codes`` of shape (p, 0) each sample's code looked up in its stored row
    (``sparse.sparse_codes``' rows; its columns are not read); the subtracted
    bins' sums are derived as the numba kernel derives them.
    """
    xp = backend.xp
    node_ranges = batch.node_ranges
    n_nodes = int(node_ranges.shape[0])
    if n_nodes == 0:
        return
    p, n, n_trees, m, block, max_ns, cand_stride = _split_launch(
        backend, codes, node_ranges, targets, rules)
    n_blocks = _split_blocks(backend, n_nodes, _split_scratch_bytes(max_ns, m, cand_stride))
    kernel = backend.load_module("tree_split_small.cu").get_function("tree_split_small")
    rows = sparse.sparse_codes
    if codes.shape[1] == 0 and rows.row_ptr.shape[0] != n + 1:
        raise ValueError("codes of shape (p, 0) need the stored rows of the sparse X "
                         "(sparse.sparse_codes)")
    kernel(
        (n_blocks,),
        (block,),
        (
            codes, rows.row_ptr, rows.row_features, rows.row_codes, rows.zero_code,
            _i32(1 if codes.shape[1] == 0 else 0), sparse.subtracted_bin, sparse.listed,
            batch.sample_indices, node_ranges,
            batch.node_tree, batch.node_seed, weights, targets, edges.edge_values,
            edges.edge_ptr, _i64(n), _i32(p), _i32(n_trees), _i32(m), _i64(n_nodes),
            *_rule_scalars(rules), _i32(SORT_LIMIT), _i64(max_ns), _i32(cand_stride),
            *_split_scratch(xp, n_blocks, max_ns, m, cand_stride),
            out_feature, out_bin, out_missing_left, out_gain,
        ),
    )


def _rule_scalars(rules: SplitRules) -> tuple[Any, Any, Any, Any, Any]:
    """``n_candidates, min_samples_leaf, random_split, missing_bin, tie_rtol`` of the
    split kernels, as their parameter types."""
    return (_i32(min(rules.n_candidates, 2**31 - 1)), _i32(rules.min_samples_leaf),
            _i32(1 if rules.random_split else 0), _i32(rules.missing_bin), _f64(rules.tie_rtol))


def grow_subtrees(
    backend: Backend,
    codes: Any,
    batch: NodeBatch,
    weights: Any,
    targets: Any,
    root_weight: Any,
    edges: EdgeTable,
    rules: SplitRules,
    sparse: SparseColumns,
    out: Any,
) -> None:
    """``tree_grow_subtrees``: one block per subtree, bit-compatible with the numba kernel.

    Each block copies its root's samples (codes of every feature, weights,
    targets) into its own scratch and grows the subtree depth first there
    (for a sparse X given row by row, the codes are not copied but looked up
    in the samples' rows: no ``p`` bytes per sample of scratch);
    the number of blocks follows the device (SM count) and the scratch budget
    ``SPLIT_SCRATCH_BYTES``. The stored-entry columns (``col_*`` of
    ``sparse.sparse_codes``) serve the CPU kernel's roots above its block
    size; every root here fits a block's scratch, and they are not read.
    ``out`` is the :class:`~gpurpo.tree._records.Subtrees` to fill.
    """
    xp = backend.xp
    node_ranges = batch.node_ranges
    n_roots = int(node_ranges.shape[0])
    if n_roots == 0:
        return
    p, n, n_trees, m, block, max_ns, cand_stride = _split_launch(
        backend, codes, node_ranges, targets, rules)
    if max_ns >= 2**30:
        raise ValueError(f"a subtree root holds {max_ns} samples; the subtree kernel takes < 2**30")
    rows = sparse.sparse_codes
    # stored rows: no copy of the codes (each looked up in its sample's row)
    copied = 0 if rows.row_ptr.shape[0] else p
    # codes block, columns (3 int arrays), weights, targets, stack, seeds
    per_block = (copied + 12 + 4 + 4 * m + 4 + 16) * max_ns + 8
    n_blocks = _split_blocks(backend, n_roots, per_block + _split_scratch_bytes(max_ns, m, cand_stride))
    kernel = backend.load_module("tree_split_small.cu").get_function("tree_grow_subtrees")
    n_candidates, min_samples_leaf, random_split, missing_bin, tie_rtol = _rule_scalars(rules)
    kernel(
        (n_blocks,),
        (block,),
        (
            codes, sparse.subtracted_bin, sparse.listed, rows.zero_code, rows.row_ptr,
            rows.row_features, rows.row_codes, _i64(rows.row_ptr.shape[0]),
            batch.sample_indices, node_ranges, batch.node_tree, batch.node_seed,
            batch.node_depth, weights, targets, edges.edge_values, edges.edge_ptr, _i64(n),
            _i32(p), _i32(n_trees), _i32(m), _i64(n_roots), n_candidates, min_samples_leaf,
            _i32(rules.min_samples_split), _i32(rules.depth_limit),
            _f64(rules.min_impurity_decrease), root_weight, random_split, missing_bin, tie_rtol,
            _i32(SORT_LIMIT), _i64(max_ns), _i32(cand_stride),
            xp.empty(max(1, n_blocks * copied * max_ns), dtype=xp.uint8),
            xp.empty(n_blocks * max_ns, dtype=xp.int32),
            xp.empty(n_blocks * max_ns, dtype=xp.int32),
            xp.empty(n_blocks * max_ns, dtype=xp.int32),
            xp.empty(n_blocks * max_ns, dtype=xp.float32),
            xp.empty(n_blocks * max_ns * m, dtype=xp.float32),
            xp.empty(n_blocks * (max_ns + 2), dtype=xp.int32),
            xp.empty(n_blocks * 2 * max_ns, dtype=xp.uint64),
            *_split_scratch(xp, n_blocks, max_ns, m, cand_stride),
            out.offsets, out.count, out.feature, out.bin, out.missing_left, out.gain, out.left,
            out.right, out.depth, out.start, out.stop,
        ),
    )


# --------------------------------------------------------------------------
# histogram scores
# --------------------------------------------------------------------------


def score_histograms(
    backend: Backend,
    hist: Any,
    node_features: Any,
    n_outputs: int,
    min_samples_leaf: int,
    random_split: int,
    uniforms: Any,
    edges: EdgeTable,
    newton: int,
    reg_lambda: float,
    min_child_weight: float,
    out_gain: Any,
    out_bin: Any,
    out_missing_left: Any,
    out_nonconstant: Any,
) -> None:
    """``tree_score_histograms``: one block per (node, slot), bit-compatible with numba.

    ``edges`` is the typed :class:`~gpurpo.tree._records.EdgeTable` of the contract.
    """
    _launch_score(backend, "tree_score_histograms", hist, node_features, n_outputs,
                  min_samples_leaf, random_split, uniforms, edges, newton, reg_lambda,
                  min_child_weight, (out_gain, out_bin, out_missing_left, out_nonconstant))


def score_best_slot(
    backend: Backend, hist: Any, node_features: Any, n_outputs: int, min_samples_leaf: int,
    random_split: int, uniforms: Any, edges: EdgeTable, newton: int, reg_lambda: float,
    min_child_weight: float, q: Any, impure: Any, order: Any, node_pos: Any, has_order: int,
    has_pos: int, n_features: int, tie_rtol: float, tie_rounding: float, node_done: Any,
    out_gain: Any, out_bin: Any, out_missing_left: Any, out_nonconstant: Any, out: Any,
) -> None:
    """``tree_score_best_slot``: ``tree_score_histograms``'s blocks, the block of a node's
    last slot picking the node's best (``node_done``: a zeroed counter per node, left
    at zero)."""
    k = int(hist.shape[1])
    _launch_score(backend, "tree_score_best_slot", hist, node_features, n_outputs,
                  min_samples_leaf, random_split, uniforms, edges, newton, reg_lambda,
                  min_child_weight, (
                      q, impure, order, node_pos, _i32(k), _i32(has_order), _i32(has_pos),
                      _i32(n_features), _f64(tie_rtol), _f64(tie_rounding), node_done,
                      out_gain, out_bin, out_missing_left, out_nonconstant, out))


def _launch_score(backend: Backend, name: str, hist: Any, node_features: Any, n_outputs: int,
                  min_samples_leaf: int, random_split: int, uniforms: Any, edges: EdgeTable,
                  newton: int, reg_lambda: float, min_child_weight: float,
                  tail: tuple) -> None:
    """Launch ``name`` of ``tree_score.cu``: one block per (node, slot), grid-stride, each
    with its scratch of running sums; ``tail`` follows the common arguments."""
    xp = backend.xp
    n_nodes, k, n_bins, n_channels = (int(s) for s in hist.shape)
    n_tasks = n_nodes * k
    if n_tasks == 0:
        return
    attrs = backend.device_attributes()
    block = _power_of_two_block(attrs, SCORE_BLOCK)
    per_block = 8 * n_channels * n_bins  # totals + (n_bins - 1) bins of running sums
    n_blocks = max(1, min(n_tasks, int(attrs["multiprocessor_count"]) * SCORE_BLOCKS_PER_SM,
                          SCORE_SCRATCH_BYTES // per_block))
    scratch = xp.empty(n_blocks * n_channels * n_bins, dtype=xp.float64)
    kernel = backend.load_module("tree_score.cu").get_function(name)
    kernel(
        (n_blocks,),
        (block,),
        (
            hist, node_features, uniforms, edges.edge_values, edges.edge_ptr,
            _i32(int(edges.edge_ptr.shape[0]) - 1), _i64(n_tasks), _i32(n_bins),
            _i32(n_channels), _i32(n_outputs), _i32(min(int(min_samples_leaf), 2**31 - 1)),
            _i32(1 if random_split else 0), _i32(1 if newton else 0), _f64(reg_lambda),
            _f64(min_child_weight), scratch, *tail,
        ),
    )


def best_slot(backend: Backend, hist: Any, q: Any, impure: Any, gain: Any, bins: Any,
              missing_left: Any, node_features: Any, order: Any, nonconstant: Any,
              node_pos: Any, m: int, newton: int, has_order: int, has_pos: int,
              n_features: int, tie_rtol: float, tie_rounding: float, out: Any) -> None:
    """``tree_best_slot``: one thread per node."""
    n_nodes, k = (int(s) for s in gain.shape)
    attrs = backend.device_attributes()
    block = launch_block(attrs, ELEMENTWISE_BLOCK)
    kernel = backend.load_module("tree_score.cu").get_function("tree_best_slot")
    kernel(
        (launch_grid(n_nodes, block, attrs),),
        (block,),
        (hist, q, impure, gain, bins, missing_left, node_features, order, nonconstant, node_pos,
         _i64(n_nodes), _i32(k), _i32(hist.shape[2]), _i32(hist.shape[3]), _i32(m),
         _i32(newton), _i32(has_order), _i32(has_pos), _i32(n_features), _f64(tie_rtol),
         _f64(tie_rounding), out),
    )


def segment_sums(backend: Backend, values: Any, bounds: Any, out: Any) -> None:
    """``tree_segment_sums``: one thread per segment, summing it in order."""
    n_segments = int(out.shape[0])
    attrs = backend.device_attributes()
    block = launch_block(attrs, ELEMENTWISE_BLOCK)
    kernel = backend.load_module("tree_segment_sums.cu").get_function("tree_segment_sums")
    kernel((launch_grid(n_segments, block, attrs),), (block,), (values, bounds, _i64(n_segments), out))


def segment_row_sums(backend: Backend, rows: Any, row_weights: Any, bounds: Any, Y: Any,
                     out: Any) -> None:
    """``tree_segment_row_sums``: one thread per (segment, column), columns fastest."""
    n_segments, d = (int(s) for s in out.shape)
    if n_segments * d == 0:
        return
    suffix = {np.dtype(np.float32): "f32", np.dtype(np.float64): "f64"}.get(np.dtype(Y.dtype))
    if suffix is None:
        raise TypeError(f"Y must be float32 or float64, got {Y.dtype}")
    attrs = backend.device_attributes()
    block = launch_block(attrs, ELEMENTWISE_BLOCK)
    kernel = backend.load_module("tree_segment_sums.cu").get_function(
        f"tree_segment_row_sums_{suffix}")
    kernel((launch_grid(n_segments * d, block, attrs),), (block,),
           (rows, row_weights, bounds, Y, _i64(n_segments), _i64(d), out))


def apply_trees(backend: Backend, X: Any, *nodes: Any) -> None:
    """``tree_apply``: one thread per (row, tree). ``nodes``: feature, threshold,
    missing_left, left, right, roots, out."""
    n, p = (int(s) for s in X.shape)
    suffix = {np.dtype(np.float32): "f32", np.dtype(np.float64): "f64"}.get(np.dtype(X.dtype))
    if suffix is None:
        raise TypeError(f"X must be float32 or float64, got {X.dtype}")
    _launch_per_row_and_tree(backend, f"tree_apply_{suffix}", n, nodes,
                             (X, *nodes, _i64(n), _i64(p)))


def apply_trees_csr(backend: Backend, indptr: Any, indices: Any, data: Any, n_columns: int,
                    *nodes: Any) -> None:
    """``tree_apply_csr``: one thread per (row, tree), as ``tree_apply``; a thread
    binary-searches its row's entries, so ``n_columns`` is not needed."""
    n = int(indptr.shape[0]) - 1
    _launch_per_row_and_tree(backend, "tree_apply_csr", n, nodes,
                             (indptr, indices, data, *nodes, _i64(n)))


def _launch_per_row_and_tree(backend: Backend, name: str, n: int, nodes: tuple,
                             args: tuple, source: str = "tree_predict.cu") -> None:
    """Launch ``name`` of ``source`` over the n x T (row, tree) work items, its
    arguments ``args`` followed by T (``nodes[5]`` holds the T roots)."""
    n_trees = int(nodes[5].shape[0])
    if n * n_trees == 0:
        return
    attrs = backend.device_attributes()
    block = launch_block(attrs, ELEMENTWISE_BLOCK)
    kernel = backend.load_module(source).get_function(name)
    kernel((launch_grid(n * n_trees, block, attrs),), (block,), (*args, _i32(n_trees)))


def sum_leaves_dense(backend: Backend, leaf_rows: Any, values: Any, out: Any) -> None:
    """``tree_sum_leaves_dense``: one thread per (row, output), trees added in order."""
    n, n_trees = (int(s) for s in leaf_rows.shape)
    d = int(values.shape[1])
    if n * d == 0 or n_trees == 0:
        return
    attrs = backend.device_attributes()
    block = launch_block(attrs, ELEMENTWISE_BLOCK)
    target, copied = _contiguous_out(backend, out)
    kernel = backend.load_module("tree_predict.cu").get_function("tree_sum_leaves_dense")
    kernel((launch_grid(n * d, block, attrs),), (block,), (leaf_rows, values, target, _i64(n), _i32(n_trees), _i64(d)))
    if copied:
        out[...] = target


def sum_leaves_csr(backend: Backend, leaf_rows: Any, indptr: Any, indices: Any, data: Any, out: Any) -> None:
    """``tree_sum_leaves_csr``: one thread per row, its trees added in order (no atomics)."""
    n, n_trees = (int(s) for s in leaf_rows.shape)
    d = int(out.shape[1])
    if n * n_trees == 0 or int(indices.shape[0]) == 0:
        return
    attrs = backend.device_attributes()
    block = launch_block(attrs, ELEMENTWISE_BLOCK)
    target, copied = _contiguous_out(backend, out)
    kernel = backend.load_module("tree_predict.cu").get_function("tree_sum_leaves_csr")
    kernel(
        (launch_grid(n, block, attrs),),
        (block,),
        (leaf_rows, indptr, indices, data, target, _i64(n), _i32(n_trees), _i64(d)),
    )
    if copied:
        out[...] = target


# --------------------------------------------------------------------------
# node-local thresholds
# --------------------------------------------------------------------------

_SIGN = np.uint64(1 << 63)


def _order_keys(backend: Backend, values: Any) -> Any:
    """uint64 keys whose unsigned order is the numeric order of the float64 ``values``."""
    xp = backend.xp
    bits = xp.ascontiguousarray(values, dtype=xp.float64).view(xp.uint64)
    return xp.where(bits >= _SIGN, ~bits, bits | _SIGN)


def _from_order_keys(backend: Backend, keys: Any, out: Any) -> None:
    """Inverse of :func:`_order_keys`, written into the float64 ``out``."""
    xp = backend.xp
    out[...] = xp.where(keys >= _SIGN, keys ^ _SIGN, ~keys).view(xp.float64)


def _neighbour_values(backend: Backend, name: str, n: int, data: tuple, weights: Any,
                      nodes: tuple, low: Any, high: Any, extra: tuple) -> None:
    low_keys = _order_keys(backend, low)
    high_keys = _order_keys(backend, high)
    _launch_per_row_and_tree(backend, name, n, nodes,
                             (*data, weights, *nodes, low_keys, high_keys, *extra),
                             source="tree_thresholds.cu")
    _from_order_keys(backend, low_keys, low)
    _from_order_keys(backend, high_keys, high)


def neighbour_values(backend: Backend, X: Any, weights: Any, *args: Any) -> None:
    """``tree_neighbour_values``: one thread per (row, tree), atomic max/min on order keys.
    ``args``: feature, threshold, missing_left, left, right, roots, low, high."""
    n, p = (int(s) for s in X.shape)
    suffix = {np.dtype(np.float32): "f32", np.dtype(np.float64): "f64"}.get(np.dtype(X.dtype))
    if suffix is None:
        raise TypeError(f"X must be float32 or float64, got {X.dtype}")
    _neighbour_values(backend, f"tree_neighbour_values_{suffix}", n, (X,), weights, args[:6],
                      args[6], args[7], (_i64(n), _i64(p)))


def neighbour_values_csr(backend: Backend, indptr: Any, indices: Any, data: Any, weights: Any,
                         *args: Any) -> None:
    """``tree_neighbour_values_csr``: as :func:`neighbour_values` for a CSR X."""
    n = int(indptr.shape[0]) - 1
    _neighbour_values(backend, "tree_neighbour_values_csr", n, (indptr, indices, data), weights,
                      args[:6], args[6], args[7], (_i64(n),))
