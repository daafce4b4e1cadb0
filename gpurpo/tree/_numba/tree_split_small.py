"""numba twin of the ``tree_split_small`` kernel of ``kernels/tree_split_small.cu``.

Splits every small node of a batch exactly on its samples (:mod:`._node_split`),
with per-chunk scratch. :func:`launch` is the registered implementation: it
turns the argument records of :mod:`gpurpo.tree._records` into those of
:mod:`._kernel_records` and runs the compiled kernel :func:`split_small_nodes`,
whose threads take whole nodes, or for a batch of no more nodes than threads
:func:`split_few_nodes`, whose threads share each node's features. Best-first
growth (boosting) evaluates the two children of a split per call, often one
large and one small: on text-like X (20,000 x 500 binary features, relabel_rpo,
2 threads) those calls took 1.5 times as long node by node.
"""

from __future__ import annotations

import numba
import numpy as np
from numba import njit, prange

from gpurpo.backend import cpu_helper
from gpurpo.tree._borrow import borrow_all
from gpurpo.tree._numba._kernel_records import (
    EvalRules,
    EvalScratch,
    NodeAt,
    NodeBits,
    NodeColumns,
    NodeData,
    SplitOut,
    kernel_records,
)
from gpurpo.tree._numba._node_split import (
    SORT_LIMIT,
    _eval_node,
    _tie_pick,
    searches_every_position,
)
from gpurpo.tree._numba._shared import N_CHUNKS, SERIAL_SEARCH, total_samples
from gpurpo.tree._random import N_ROUNDS, SMALL_P, feistel_params

# positions of the visiting order computed at once; holds a whole order of SMALL_P features
PERM_BATCH = max(32, SMALL_P)
# a node searched in ranges by split_few_nodes: ranges of at least this many positions,
# about this many ranges per thread (features cost unequal times)
MIN_RANGE = 16
TASKS_PER_THREAD = 4
# ... when its largest node has at least this many samples: below, the buffers of the
# ranges cost more than they save (text-like X of 1,123 rows, 2 threads: 12 % slower)
RANGED_MIN_SAMPLES = 4096


@njit(cache=True)
def _eval_scratch(max_ns, mp, n_bins, n_slots, n_listing):
    """Buffers of ``_eval_node`` for nodes of up to ``max_ns`` samples.

    Returns ``((w, wy, y), scratch)``: a node's gathered weights, weighted
    targets and targets, zeroed (their padding channels stay zero), and the
    :data:`~._kernel_records.EvalScratch` of :func:`_search_scratch`.
    """
    data = (
        np.empty(max_ns, dtype=np.float64),
        np.zeros((max_ns, mp), dtype=np.float64),
        np.zeros((max_ns, mp), dtype=np.float32),
    )
    return data, _search_scratch(max_ns, mp, n_bins, n_slots, n_listing)


@njit(cache=True)
def _search_scratch(max_ns, mp, n_bins, n_slots, n_listing):
    """The :data:`~._kernel_records.EvalScratch` of ``_eval_node`` for nodes of up to
    ``max_ns`` samples and ``n_slots`` candidates, its ``listing`` of ``n_listing``
    entries (:func:`_list_node_features`); ``hist``, the bucket sort's list heads
    ``bin_pos`` and its bit set ``occupied`` are zeroed (``_eval_node`` leaves them
    zeroed); ``link`` holds the bucket sort's list links."""
    return EvalScratch(
        np.empty(mp, dtype=np.float64),
        np.empty(min(max_ns, SORT_LIMIT), dtype=np.int64),
        np.empty(min(max_ns, SORT_LIMIT), dtype=np.int64),
        np.zeros((n_bins, mp + 2), dtype=np.float64),
        np.zeros(n_bins, dtype=np.int64),
        np.empty(mp, dtype=np.float64),
        np.empty(mp, dtype=np.float64),
        np.empty(N_ROUNDS, dtype=np.uint64),
        np.empty(PERM_BATCH, dtype=np.int64),
        np.empty(n_slots, dtype=np.int64),
        np.empty(n_slots, dtype=np.float64),
        np.empty(n_slots, dtype=np.int64),
        np.empty(n_slots, dtype=np.int64),
        np.empty(min(max_ns, SORT_LIMIT), dtype=np.int64),
        np.zeros((n_bins + 63) // 64, dtype=np.uint64),
        np.empty(n_listing, dtype=np.int64),
    )


@njit(cache=True)
def _eval_rules(rules, p):
    """The :data:`~._kernel_records.EvalRules` of the kernel's ``Rules``, for ``p`` features."""
    lo_bits, hi_bits = feistel_params(p)
    return EvalRules(rules.n_candidates, rules.min_samples_leaf, rules.random_split,
                     rules.missing_bin, rules.tie_rtol, lo_bits, hi_bits)


@njit(inline="always", cache=True)
def _claim_slots(node_rows, start, ns, allowed, slot_of_row):
    """Whether a node may read the stored-entry columns, and if so its rows' slots.

    The column lists give each bin's samples in row order: the node's position
    order when its rows ``node_rows[start:start + ns]`` increase (the stable
    partitions keep them so), when columns exist (``allowed``): at every node
    size, a feature whose column (``listed``) is shorter than the node takes
    its table from the column (see :func:`_eval_node`). Sets ``slot_of_row[row]`` to the row's
    position in the node; undo with :func:`_release_slots`.
    """
    if not allowed:
        return False
    for a in range(start + 1, start + ns):
        if node_rows[a] <= node_rows[a - 1]:
            return False
    for a in range(ns):
        slot_of_row[node_rows[start + a]] = a
    return True


@njit(inline="always", cache=True)
def _release_slots(node_rows, start, ns, slot_of_row):
    """Reset the slots that :func:`_claim_slots` set (-1: outside the node)."""
    for a in range(start, start + ns):
        slot_of_row[node_rows[a]] = -1


@njit(cache=True)
def _split_chunk(ch, n_chunks, max_ns, codes, sparse, batch, weights, targets, edges, rules, out):
    """Split the nodes ``ch, ch + n_chunks, ...`` with scratch buffers of this chunk."""
    p = codes.shape[0]
    m = targets.shape[2]
    mp = ((m + 7) // 8) * 8
    n_bins = rules.missing_bin + 1
    n_slots = max(1, min(rules.n_candidates, p))
    identity = np.empty(max_ns, dtype=np.int32)
    for a in range(max_ns):
        identity[a] = a
    # each row's position in the current node, -1 outside it (read with the column lists)
    slot_of_row = np.full(targets.shape[0] if sparse.col_ptr.shape[0] > 0 else 1, -1,
                          dtype=np.int32)
    # a node's codes of one feature, gathered from its column when there are no dense codes
    node_codes = np.empty((1, max_ns if codes.shape[1] == 0 else 1), dtype=np.uint8)
    data, scratch = _eval_scratch(max_ns, mp, n_bins, n_slots, 0)
    _split_chunk_nodes(
        ch, n_chunks, codes, sparse, batch, weights, targets, edges, rules, out,
        data, scratch,
        NodeColumns(
            sparse.subtracted_bin, sparse.listed, sparse.col_ptr,
            sparse.col_rows, sparse.col_codes, slot_of_row, node_codes, identity,
            # no stored entries by row: nodes walk the visiting order
            np.empty(0, dtype=np.int64), np.empty(0, dtype=np.int32),
            np.empty(0, dtype=np.int32),
        ),
    )


@njit(cache=True)
def _split_chunk_nodes(ch, n_chunks, codes, sparse, batch, weights, targets, edges, rules, out,
                       data, scratch, columns):
    """The loop of :func:`_split_chunk` on views of its arrays that hold no reference.

    ``data`` holds the gathered weights, weighted targets and targets of a node,
    ``scratch`` the other buffers of :func:`_eval_node` (:func:`_eval_scratch`),
    ``columns`` its :data:`~._kernel_records.NodeColumns`.
    """
    codes, weights, targets = borrow_all((codes, weights, targets))
    sample_indices, node_ranges, node_tree, node_seed, _ = borrow_all(batch)
    edges = borrow_all(edges)
    out = borrow_all(out)
    w, wy, y = borrow_all(data)
    scratch = borrow_all(scratch)
    columns = borrow_all(columns)
    slot_of_row = columns.slot_of_row
    identity = columns.identity
    n_nodes = node_ranges.shape[0]
    m = targets.shape[2]
    eval_rules = _eval_rules(rules, codes.shape[0])
    node_data = NodeData(codes, sample_indices, w, wy, y, identity, m)
    zero = np.int64(0)
    # no bit sets of codes (those of the subtree kernel's blocks)
    no_bits = NodeBits(np.empty((0, 0), dtype=np.uint64), np.empty(0, dtype=np.bool_),
                       np.empty(0, dtype=np.uint64), zero, zero - 1)
    for i in range(ch, n_nodes, n_chunks):
        start = node_ranges[i, 0]
        ns = node_ranges[i, 1] - start
        gather_node(sample_indices, start, ns, node_tree[i], weights, targets, w, wy, y)
        use_columns = _claim_slots(sample_indices, start, ns, columns.col_ptr.shape[0] > 0,
                                   slot_of_row)
        f, b, ml, g = _eval_node(node_data, NodeAt(start, ns, zero, node_seed[i], use_columns,
                                                   zero, zero - 1),
                                 columns, edges, eval_rules, scratch, no_bits)
        if use_columns:
            _release_slots(sample_indices, start, ns, slot_of_row)
        out.feature[i] = f
        out.bin[i] = b
        out.missing_left[i] = ml
        out.gain[i] = g


@njit(parallel=True, cache=True)
def split_small_nodes(codes, sparse, batch, weights, targets, edges, rules, out):
    """``tree_split_small`` on the records of :mod:`._kernel_records`: ``sparse`` (a
    ``Sparse``), ``batch`` (a ``Batch``), ``edges`` (an ``Edges``), ``rules`` (a
    ``Rules``), ``out`` (a ``SplitOut``)."""
    node_ranges = batch.node_ranges
    n_nodes = node_ranges.shape[0]
    max_ns = max(np.int64(1), np.int64(np.max(node_ranges[:, 1] - node_ranges[:, 0])))
    # nodes are dealt to a few chunks (strided, for balance); each chunk owns scratch
    # buffers, so nothing is allocated per node
    n_chunks = min(n_nodes, N_CHUNKS)
    for ch in prange(n_chunks):
        _split_chunk(np.int64(ch), n_chunks, max_ns, codes, sparse, batch, weights, targets,
                     edges, rules, out)


@njit(inline="always", cache=True)
def gather_node(sample_indices, start, ns, t, weights, targets, w, wy, y):
    """A node's weights, weighted targets and targets in tree ``t``, at positions
    ``0 .. ns - 1`` (the padding channels of ``wy`` and ``y`` stay as they are)."""
    m = targets.shape[2]
    for a in range(ns):
        s = sample_indices[start + a]
        wa = np.float64(weights[t, s])
        w[a] = wa
        for c in range(m):
            yv = targets[s, t, c]
            y[a, c] = yv
            wy[a, c] = wa * yv


@njit(cache=True)
def range_plan(node_ranges, n_candidates, p, min_samples_leaf, n_tasks):
    """The tasks of :func:`split_few_nodes`: ``(task_node, task_lo, task_hi, width)``.

    A node that visits every position of its order
    (:func:`._node_split.searches_every_position`) is searched in ranges of
    ``width[i]`` positions (at least ``MIN_RANGE``; the last one shorter), about
    ``n_tasks`` ranges in all; another one whole (``width[i] = -1``, one task
    with ``task_hi = -1``). Task ``r * n_nodes + i`` is node ``i``'s range
    ``r`` (unused slots: node -1), so that the threads, which take consecutive
    tasks, share every node's ranges.
    """
    n_nodes = node_ranges.shape[0]
    per_node = max(np.int64(1), (n_tasks + n_nodes - 1) // n_nodes)
    width = np.full(n_nodes, -1, dtype=np.int64)
    parts = np.ones(n_nodes, dtype=np.int64)
    for i in range(n_nodes):
        ns = node_ranges[i, 1] - node_ranges[i, 0]
        if searches_every_position(ns, n_candidates, p, min_samples_leaf):
            want = min(per_node, max(np.int64(1), p // MIN_RANGE))
            width[i] = (p + want - 1) // want
            parts[i] = (p + width[i] - 1) // width[i]
    rounds = np.int64(np.max(parts))
    task_node = np.full(rounds * n_nodes, -1, dtype=np.int64)
    task_lo = np.zeros(rounds * n_nodes, dtype=np.int64)
    task_hi = np.full(rounds * n_nodes, -1, dtype=np.int64)
    for i in range(n_nodes):
        for r in range(parts[i]):
            task = r * n_nodes + i
            task_node[task] = i
            if width[i] > 0:
                task_lo[task] = r * width[i]
                task_hi[task] = min(p, (r + 1) * width[i])
    return task_node, task_lo, task_hi, width


@njit(cache=True)
def _search_task(task, task_node, task_lo, task_hi, codes, sparse, batch, edges, rules,
                 node_w, node_wy, node_y, identity, node_slots, use_columns, max_ns, m, res_f,
                 res_g, res_b, res_ml, res_n, res_tol):
    """One range of a node's visiting order (``task_hi < 0``: its whole search), searched
    with this task's scratch; its candidates (or its choice) in row ``task`` of the
    results (``res_n``: their number, -1 for none from a node that cannot split)."""
    i = task_node[task]
    if i < 0:
        return
    start = batch.node_ranges[i, 0]
    ns = batch.node_ranges[i, 1] - start
    mp = node_wy.shape[2]
    n_bins = rules.missing_bin + 1
    n_slots = max(1, min(rules.n_candidates, codes.shape[0]))
    scratch = _search_scratch(max(ns, 1), mp, n_bins, n_slots, 0)
    node_codes = np.empty((1, max_ns if codes.shape[1] == 0 else 1), dtype=np.uint8)
    columns = NodeColumns(
        sparse.subtracted_bin, sparse.listed, sparse.col_ptr, sparse.col_rows,
        sparse.col_codes, node_slots[i], node_codes, identity,
        np.empty(0, dtype=np.int64), np.empty(0, dtype=np.int32), np.empty(0, dtype=np.int32),
    )
    zero = np.int64(0)
    no_bits = NodeBits(np.empty((0, 0), dtype=np.uint64), np.empty(0, dtype=np.bool_),
                       np.empty(0, dtype=np.uint64), zero, zero - 1)
    node_data = NodeData(codes, batch.sample_indices, node_w[i], node_wy[i], node_y[i],
                         identity, m)
    f, b, ml, g = _eval_node(
        node_data,
        NodeAt(start, ns, zero, batch.node_seed[i], use_columns[i], task_lo[task], task_hi[task]),
        columns, edges, _eval_rules(rules, codes.shape[0]), scratch, no_bits)
    if task_hi[task] < 0 or f < 0:
        res_n[task] = -1 if task_hi[task] >= 0 else 1
        res_f[task, 0] = f
        res_b[task, 0] = b
        res_ml[task, 0] = ml
        res_g[task, 0] = g
        return
    res_n[task] = f
    res_tol[task] = g
    for q in range(f):
        res_f[task, q] = scratch.cand_f[q]
        res_g[task, q] = scratch.cand_g[q]
        res_b[task, q] = scratch.cand_b[q]
        res_ml[task, q] = scratch.cand_ml[q]


@njit(parallel=True, cache=True)
def split_few_nodes(codes, sparse, batch, weights, targets, edges, rules, out, n_tasks):
    """``tree_split_small`` for a batch of no more nodes than threads: the nodes that
    visit every position of their order are searched in about ``n_tasks`` ranges of
    positions at once (:func:`range_plan`), so that a call of one or two nodes
    (best-first growth evaluates the two children of a split, often one large and one
    small) keeps every thread busy. The tie rule over each node's candidates, range
    after range, picks what :func:`split_small_nodes` picks: the same choices, bit for
    bit."""
    node_ranges = batch.node_ranges
    n_nodes = node_ranges.shape[0]
    p = codes.shape[0]
    m = targets.shape[2]
    mp = ((m + 7) // 8) * 8
    max_ns = max(np.int64(1), np.int64(np.max(node_ranges[:, 1] - node_ranges[:, 0])))
    task_node, task_lo, task_hi, width = range_plan(node_ranges, rules.n_candidates, p,
                                                    rules.min_samples_leaf, n_tasks)
    total = task_node.shape[0]
    cap = max(np.int64(1), np.int64(np.max(width)))
    # every node's data, gathered once, and its rows' positions (read by every range)
    node_w = np.empty((n_nodes, max_ns), dtype=np.float64)
    node_wy = np.zeros((n_nodes, max_ns, mp), dtype=np.float64)
    node_y = np.zeros((n_nodes, max_ns, mp), dtype=np.float32)
    with_columns = sparse.col_ptr.shape[0] > 0
    node_slots = np.full((n_nodes, targets.shape[0] if with_columns else 1), -1,
                         dtype=np.int32)
    use_columns = np.zeros(n_nodes, dtype=np.bool_)
    for i in prange(n_nodes):
        start = node_ranges[i, 0]
        ns = node_ranges[i, 1] - start
        gather_node(batch.sample_indices, start, ns, batch.node_tree[i], weights, targets,
                     node_w[i], node_wy[i], node_y[i])
        use_columns[i] = _claim_slots(batch.sample_indices, start, ns, with_columns,
                                      node_slots[i])
    identity = np.arange(max_ns).astype(np.int32)
    res_f = np.empty((total, cap), dtype=np.int64)
    res_g = np.empty((total, cap), dtype=np.float64)
    res_b = np.empty((total, cap), dtype=np.int64)
    res_ml = np.empty((total, cap), dtype=np.int64)
    res_n = np.zeros(total, dtype=np.int64)
    res_tol = np.zeros(total, dtype=np.float64)
    for task in prange(total):
        _search_task(task, task_node, task_lo, task_hi, codes, sparse, batch, edges, rules,
                     node_w, node_wy, node_y, identity, node_slots, use_columns, max_ns, m,
                     res_f, res_g, res_b, res_ml, res_n, res_tol)
    for i in range(n_nodes):
        _pick_of_ranges(i, n_nodes, total, width, res_f, res_g, res_b, res_ml, res_n, res_tol,
                        out)


@njit(cache=True)
def _pick_of_ranges(i, n_nodes, total, width, res_f, res_g, res_b, res_ml, res_n, res_tol,
                    out):
    """Node ``i``'s choice from its tasks ``i, i + n_nodes, ...``: a whole search's own,
    or the tie rule over the candidates of its ranges in order (none: no split)."""
    if width[i] < 0:
        out.feature[i] = res_f[i, 0]
        out.bin[i] = res_b[i, 0]
        out.missing_left[i] = res_ml[i, 0]
        out.gain[i] = res_g[i, 0]
        return
    found = 0
    if res_n[i] >= 0:  # else the node cannot split (every range says so)
        for t in range(i, total, n_nodes):
            found += res_n[t]
    cand_g = np.empty(max(found, 1), dtype=np.float64)
    where = np.empty(max(found, 1), dtype=np.int64)
    j = 0
    if found > 0:
        for t in range(i, total, n_nodes):
            for q in range(res_n[t]):
                cand_g[j] = res_g[t, q]
                where[j] = t * res_f.shape[1] + q
                j += 1
    pick = _tie_pick(cand_g, found, res_tol[i])
    if pick < 0:
        out.feature[i] = -1
        out.bin[i] = 0
        out.missing_left[i] = 0
        out.gain[i] = -np.inf
        return
    t = where[pick] // res_f.shape[1]
    q = where[pick] - t * res_f.shape[1]
    out.feature[i] = res_f[t, q]
    out.bin[i] = res_b[t, q]
    out.missing_left[i] = res_ml[t, q]
    out.gain[i] = res_g[t, q]


def launch(codes, batch, weights, targets, edges, rules, sparse, out_feature, out_bin,
           out_missing_left, out_gain):
    """``tree_split_small`` on the CPU: :func:`split_small_nodes` on the kernel records.

    ``batch``, ``edges``, ``rules`` and ``sparse`` are the typed
    :class:`~gpurpo.tree._records.NodeBatch`, ``EdgeTable``, ``SplitRules`` and
    ``SparseColumns`` of the contract (:mod:`gpurpo.tree.kernels`). Inside
    :func:`gpurpo.backend.serial_cpu_kernels`, and for a call of fewer than
    ``SERIAL_SEARCH`` (samples x candidate features), the kernel's single-threaded
    twin runs;
    a batch of no more nodes than threads (and more than one thread), the largest of
    at least ``RANGED_MIN_SAMPLES`` samples, is searched by :func:`split_few_nodes`.
    """
    kernel_batch, kernel_edges, kernel_rules, kernel_sparse = kernel_records(
        batch, edges, rules, sparse)
    out = SplitOut(out_feature, out_bin, out_missing_left, out_gain)
    threads = numba.get_num_threads()
    ranges = kernel_batch.node_ranges
    kernel = cpu_helper(split_small_nodes, small=total_samples(ranges) * min(
        int(kernel_rules.n_candidates), codes.shape[0]) < SERIAL_SEARCH)
    if (kernel is split_small_nodes and threads > 1 and 0 < ranges.shape[0] <= threads
            and int((ranges[:, 1] - ranges[:, 0]).max()) >= RANGED_MIN_SAMPLES):
        # no more nodes than threads: their searches are split over the threads
        split_few_nodes(codes, kernel_sparse, kernel_batch, weights, targets, kernel_edges,
                        kernel_rules, out, np.int64(TASKS_PER_THREAD * threads))
        return
    kernel(codes, kernel_sparse, kernel_batch, weights, targets, kernel_edges, kernel_rules, out)
