"""The kernels of device-resident level growth (``kernels/tree_level.cu``).

Each kernel runs on the emulated CUDA backend and as its numba twin (the NumPy
backend), against a reference written here in plain Python from the contract
(:mod:`gpurpo.tree.level_kernels`) and :mod:`gpurpo.tree._random`'s array
functions: the same outputs bit for bit.
"""

from __future__ import annotations

import numpy as np
import pytest

from gpurpo.backend import EMULATED, NUMPY
from gpurpo.tree import level_kernels
from gpurpo.tree._random import child_seed_nb, feature_at, uniform_at
from gpurpo.tree.binning._sparse import sparse_codes_of_dense

BACKENDS = (NUMPY, EMULATED)


def _launch(backend, name, *args):
    """Run the kernel on copies of ``args`` moved to ``backend``; return them on the host."""
    dev = [backend.asarray(np.array(a)) if isinstance(a, np.ndarray) else a for a in args]
    level_kernels.launch(backend, name, *dev)
    return [np.asarray(backend.to_host(a)) if isinstance(a, np.ndarray) else a for a in dev]


def _node_stats_reference(sample_indices, ranges, tree, weights, targets):
    """Purity (any target differing from the first sample's) and Q = sum w ||y||^2."""
    impure, q = [], []
    for (start, stop), t in zip(ranges, tree):
        y = targets[sample_indices[start:stop], t].astype(np.float64)
        w = weights[t, sample_indices[start:stop]].astype(np.float64)
        impure.append(int(stop > start and bool((y != y[0]).any())))
        q.append(float((w * (y * y).sum(axis=1)).sum()))
    return np.array(impure, np.uint8), np.array(q)


@pytest.mark.parametrize("p", [1, 5, 32, 33, 100])
@pytest.mark.parametrize("random_split", [0, 1])
@pytest.mark.parametrize("natural", [0, 1])
def test_large_setup_gives_the_node_stats_and_the_visiting_order(p, random_split, natural):
    rng = np.random.default_rng(p)
    # 4 large nodes (one empty, one pure) and 5 helper rows
    n_nodes, n_rows, n, n_trees, m = 4, 9, 700, 2, 3
    width = p if natural else 7
    seed = rng.integers(0, 2**63, size=n_rows, dtype=np.uint64)
    pos = rng.integers(0, p + 2, size=n_rows).astype(np.int64)
    if natural:
        # feature j in slot j, at the position where the node visits it
        order = feature_at(seed[:, None], np.arange(p)[None, :], p)
        at = np.argsort(order, axis=1)
        expected_f = np.broadcast_to(np.arange(p), (n_rows, p))
    else:
        at = pos[:, None] + np.arange(width)[None, :]
        expected_f = np.where(at < p, feature_at(seed[:, None], np.minimum(at, p - 1), p), -1)
    expected_u = uniform_at(seed[:, None], at)
    sample_indices = rng.permutation(n).astype(np.int32)
    ranges = np.array([[0, 400], [400, 400], [400, 430], [430, 700]], np.int64)
    tree = np.array([0, 1, 1, 0], np.int32)
    weights = rng.integers(0, 3, size=(n_trees, n)).astype(np.float32)
    targets = rng.normal(size=(n, n_trees, m)).astype(np.float32)
    targets[sample_indices[400:430], 1] = targets[sample_indices[400], 1]
    expected_impure, expected_q = _node_stats_reference(sample_indices, ranges, tree, weights,
                                                        targets)
    assert list(expected_impure) == [1, 0, 0, 1]
    for backend in BACKENDS:
        # a node_done of the nodes' counters: several CUDA blocks per node
        for node_done in (np.zeros(0, np.uint32), np.zeros(n_nodes, np.uint32)):
            impure = np.full(n_nodes, 7, dtype=np.uint8)
            q = np.full(n_nodes, -1.0)
            feats = np.full((n_rows, width), -7, dtype=np.int32)
            positions = np.zeros((n_rows, width), dtype=np.int64)
            uniforms = np.full((n_rows, width) if random_split else (1, 1), -1.0)
            *_, done, _, _, _, _, _, impure, q, feats, positions, uniforms = _launch(
                backend, "tree_level_large_setup", sample_indices, ranges, tree, weights,
                targets, node_done, seed, pos, p, random_split, natural, impure, q, feats,
                positions, uniforms)
            np.testing.assert_array_equal(impure, expected_impure, err_msg=backend.name)
            np.testing.assert_allclose(q, expected_q, rtol=1e-12, err_msg=backend.name)
            assert not done.any()  # the counters are left at zero
            np.testing.assert_array_equal(feats, expected_f, err_msg=backend.name)
            np.testing.assert_array_equal(positions, at, err_msg=backend.name)
            if random_split:
                np.testing.assert_array_equal(uniforms, expected_u, err_msg=backend.name)
            else:
                assert (uniforms == -1.0).all()


def _code_args(codes, zero_code, stored):
    """The ``codes, row_ptr, row_features, row_codes, zero_code`` arguments of the split
    and children kernels: the dense codes, or a (p, 0) array and their stored rows."""
    if not stored:
        return (codes, np.zeros(0, np.int64), np.zeros(0, np.int32), np.zeros(0, np.uint8),
                zero_code)
    rows = sparse_codes_of_dense(codes, zero_code)
    return (np.empty((codes.shape[0], 0), np.uint8), rows.row_ptr, rows.row_features,
            rows.row_codes, zero_code)


def _decide_reference(front, n_sub, n_small, small, large, tree, root_weight, n_scored, mid,
                      width, table):
    feature, bins, ml, gain, pos = (a.copy() for a in table)
    n_eval = len(front) - n_sub
    out = (np.zeros(n_eval, np.int32), np.zeros(n_eval, np.int32), np.zeros(n_eval, np.uint8))
    for e in range(n_eval):
        i, g = n_sub + e, front[n_sub + e]
        if e < n_small:
            f, b, m, gn = (small[0][e], small[1][e], small[2][e], small[3][e])
        else:
            f, b, m, gn = large[e - n_small]
            f, b, m = int(f), int(b), int(m)
        if f == -2:
            pos[g] += width
            out[0][e], out[1][e], out[2][e] = -2, 0, 0
            continue
        if f >= 0 and not (gn / (n_scored * root_weight[tree[i]]) + np.finfo(float).eps >= mid):
            f = -1
        if f < 0:
            f, b, m, gn = -1, 0, 0, -np.inf
        feature[g], bins[g], ml[g], gain[g] = f, b, m, gn
        out[0][e], out[1][e], out[2][e] = f, b, m
    return (feature, bins, ml, gain, pos), out


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("stored", [False, True])
def test_split_writes_the_choices_and_partitions_the_splitting_nodes(seed, stored):
    from test_tree_kernels import partition_reference

    rng = np.random.default_rng(seed)
    n_nodes, n_sub, n_small, n_large, p, n_bins = 60, 5, 11, 14, 6, 9
    n_front = n_sub + n_small + n_large
    front = rng.permutation(n_nodes)[:n_front].astype(np.int64)
    sizes = rng.integers(0, 40, n_front)
    stops = np.cumsum(sizes)
    ranges = np.stack([stops - sizes, stops], axis=1).astype(np.int64)
    n = int(stops[-1]) + 3
    codes = rng.integers(0, n_bins, size=(p, n)).astype(np.uint8)
    zero_code = rng.integers(0, n_bins, p).astype(np.uint8)
    # most codes the feature's code of 0.0, as in a sparse X
    codes = np.where(rng.uniform(size=(p, n)) < 0.7, zero_code[:, None], codes).astype(np.uint8)
    code_args = _code_args(codes, zero_code, stored)
    samples = rng.permutation(n).astype(np.int32)
    small = (rng.integers(-1, p, n_small).astype(np.int32),
             rng.integers(0, n_bins - 1, n_small).astype(np.int32),
             rng.integers(0, 2, n_small).astype(np.uint8), rng.uniform(0, 2, n_small))
    large = np.stack([rng.integers(-2, p, n_large), rng.integers(0, n_bins - 1, n_large),
                      rng.integers(0, 2, n_large), rng.uniform(0, 2, n_large)], axis=1).astype(float)
    tree = rng.integers(0, 3, n_front).astype(np.int32)
    root_weight = rng.uniform(5, 10, 3)
    table = (np.full(n_nodes, 9, np.int32), np.full(n_nodes, 9, np.int32),
             np.full(n_nodes, 9, np.uint8), np.full(n_nodes, 9.0), rng.integers(0, 4, n_nodes))
    mid = 0.02
    expected_table, expected_out = _decide_reference(front, n_sub, n_small, small, large, tree,
                                                     root_weight, 4, mid, 3, table)
    assert (expected_out[0] == -2).any() and (expected_out[0] >= 0).any()
    assert ((expected_out[0] == -1) & (np.concatenate([small[0], large[:, 0]]) >= 0)).any()
    expected_samples, expected_left = partition_reference(
        codes, samples, ranges[n_sub:], *expected_out, n_bins - 1)
    expected_left[expected_out[0] < 0] = 0
    for backend in BACKENDS:
        outs = [np.zeros(n_front - n_sub, np.int32), np.zeros(n_front - n_sub, np.int32),
                np.zeros(n_front - n_sub, np.uint8), np.full(n_front - n_sub, -9, np.int64)]
        # the launch batch may hold rows after the frontier's (helpers): never read
        batch = np.concatenate([ranges, np.full((5, 2), 10**9, np.int64)])
        # one part per node (no node of 2 part_min samples)
        parts = (np.zeros(n, np.int32), 4, 10**6, np.zeros(4 * (n_front - n_sub), np.int64))
        got = _launch(backend, "tree_level_split", *code_args, n_bins - 1, samples, front, n_sub,
                      n_small, batch, *small, large, tree, root_weight, 4, mid, 3, *table, *outs,
                      *parts)
        got = got[:-4]
        for a, b in zip(got[-9:-4], expected_table):
            np.testing.assert_array_equal(a, b, err_msg=backend.name)
        for a, b in zip(got[-4:-1], expected_out):
            np.testing.assert_array_equal(a, b, err_msg=backend.name)
        np.testing.assert_array_equal(got[-1], expected_left, err_msg=backend.name)
        np.testing.assert_array_equal(got[6], expected_samples, err_msg=backend.name)


def _no_placing(n):
    """The arguments of ``tree_level_children`` after ``counts`` for a level of one part
    per node: nothing to place."""
    return (np.zeros((1, n), np.uint8), np.zeros(0, np.int64), np.zeros(0, np.int32),
            np.zeros(0, np.uint8), np.zeros(1, np.uint8), 1, np.zeros(n, np.int32),
            np.zeros(n, np.int32), np.zeros(1, np.int32), np.zeros(1, np.uint8), 1, 1,
            np.zeros(1, np.int64))


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("stored", [False, True])
@pytest.mark.parametrize("parts", [2, 7, 64])
def test_nodes_partitioned_in_parts_end_as_in_one(seed, stored, parts):
    # tree_level_split then tree_level_children: nodes of many samples counted in parts
    # and placed by the children kernel's other blocks, others partitioned at once; the
    # same samples, left counts and children as with one part per node (and as the
    # partition reference), on the numba twins and the emulated device
    from test_tree_kernels import partition_reference

    rng = np.random.default_rng(seed + 10)
    n_sub, n_small, n_large, p, n_bins, part_min = 3, 6, 9, 5, 9, 16
    n_front = n_sub + n_small + n_large
    n_nodes = 4 * n_front
    front = rng.permutation(n_nodes // 2)[:n_front].astype(np.int64)
    sizes = rng.choice([0, 1, 15, 16, 17, 40, 200, 700], n_front)
    stops = np.cumsum(sizes)
    ranges = np.stack([stops - sizes, stops], axis=1).astype(np.int64)
    n = int(stops[-1]) + 3
    zero_code = rng.integers(0, n_bins, p).astype(np.uint8)
    codes = rng.integers(0, n_bins, size=(p, n)).astype(np.uint8)
    codes = np.where(rng.uniform(size=(p, n)) < 0.5, zero_code[:, None], codes).astype(np.uint8)
    code_args = _code_args(codes, zero_code, stored)
    samples = rng.permutation(n).astype(np.int32)
    n_eval = n_front - n_sub
    small = (rng.integers(-1, p, n_small).astype(np.int32),
             rng.integers(0, n_bins - 1, n_small).astype(np.int32),
             rng.integers(0, 2, n_small).astype(np.uint8), rng.uniform(0, 2, n_small))
    large = np.stack([rng.integers(-2, p, n_large), rng.integers(0, n_bins - 1, n_large),
                      rng.integers(0, 2, n_large), rng.uniform(0, 2, n_large)], axis=1).astype(float)
    tree = rng.integers(0, 3, n_front).astype(np.int32)
    depth = rng.integers(0, 4, n_front).astype(np.int32)
    seeds = rng.integers(0, 2**63, n_front, dtype=np.uint64)
    root_weight = rng.uniform(5, 10, 3)
    table = [np.full(n_nodes, -5, np.int64), np.full(n_nodes, -5, np.int64),
             np.full(n_nodes, -5, np.int32), np.full(n_nodes, -5, np.int32),
             np.zeros(n_nodes, np.uint64), rng.integers(0, 4, n_nodes).astype(np.int64),
             np.full(n_nodes, -5, np.int64), np.full(n_nodes, -5, np.int64),
             np.full(n_nodes, -5, np.int64), np.full(n_nodes, 9, np.int32),
             np.full(n_nodes, 9, np.int32), np.full(n_nodes, 9, np.uint8), np.full(n_nodes, 9.0)]
    rules = (10, 100, 2, -1)
    results = []
    for backend in BACKENDS:
        for k in (1, parts):
            dec = [np.zeros(n_eval, np.int32), np.zeros(n_eval, np.int32),
                   np.zeros(n_eval, np.uint8), np.full(n_eval, -9, np.int64)]
            scratch = np.full(n, -7, np.int32)
            part_left = np.full(n_eval * k, -7, np.int64)
            dev = [backend.asarray(np.array(a)) for a in
                   (*code_args, samples, front, ranges, *small, large, tree, root_weight,
                    *table, *dec, scratch, part_left, depth, seeds)]
            (c0, c1, c2, c3, c4, d_samples, d_front, d_ranges, s0, s1, s2, s3, d_large, d_tree,
             d_root, *rest) = dev
            d_table, (f_out, b_out, ml_out, n_left), (d_scratch, d_part_left, d_depth,
                                                     d_seeds) = rest[:13], rest[13:17], rest[17:]
            level_kernels.launch(backend, "tree_level_split", c0, c1, c2, c3, c4, n_bins - 1,
                                 d_samples, d_front, n_sub, n_small, d_ranges, s0, s1, s2, s3,
                                 d_large, d_tree, d_root, 4, 0.0, 3, d_table[9], d_table[10],
                                 d_table[11], d_table[12], d_table[5], f_out, b_out, ml_out,
                                 n_left, d_scratch, k, part_min, d_part_left)
            nxt = [backend.asarray(a) for a in (
                np.full(2 * n_front, -9, np.int64), np.full((3 * n_front, 2), -9, np.int64),
                np.full(3 * n_front, -9, np.int32), np.zeros(3 * n_front, np.uint64),
                np.full(3 * n_front, -9, np.int32), np.full(3 * n_front, -9, np.int64),
                np.full(2 * n_front, -9, np.int64), np.full(2 * n_front, -9, np.int64),
                np.full(2 * n_front + 1, -9, np.int64), np.zeros(7, np.int64))]
            level_kernels.launch(backend, "tree_level_children", d_front, n_sub, n_small, 1,
                                 d_ranges, d_tree, d_depth, d_seeds, f_out, n_left, *rules,
                                 n_nodes // 2, *d_table, *nxt, c0, c1, c2, c3, c4, n_bins - 1,
                                 d_samples, d_scratch, b_out, ml_out, k, part_min, d_part_left)
            host = [np.asarray(backend.to_host(a)) for a in
                    (d_samples, f_out, b_out, ml_out, n_left, *d_table, *nxt)]
            results.append((backend.name, k, host))
            if backend is EMULATED:  # the kernels divide by both
                with pytest.raises(ValueError, match="parts and part_min must be at least 1"):
                    level_kernels.launch(
                        backend, "tree_level_split", c0, c1, c2, c3, c4, n_bins - 1, d_samples,
                        d_front, n_sub, n_small, d_ranges, s0, s1, s2, s3, d_large, d_tree,
                        d_root, 4, 0.0, 3, d_table[9], d_table[10], d_table[11], d_table[12],
                        d_table[5], f_out, b_out, ml_out, n_left, d_scratch, k, 0, d_part_left)
    expected_samples, expected_left = partition_reference(
        codes, samples, ranges[n_sub:], *results[0][2][1:4], n_bins - 1)
    expected_left[results[0][2][1] < 0] = 0
    multi = [(s0 // part_min >= 2) and f >= 0 for s0, f in zip(sizes[n_sub:], results[0][2][1])]
    assert any(multi) and not all(multi)
    for name, k, host in results:
        np.testing.assert_array_equal(host[0], expected_samples, err_msg=f"{name} {k}")
        np.testing.assert_array_equal(host[4], expected_left, err_msg=f"{name} {k}")
        for a, b in zip(host[1:], results[0][2][1:]):
            np.testing.assert_array_equal(a, b, err_msg=f"{name} {k}")


def _children_reference(front, n_sub, n_small, subtract, ranges, tree, depth, seed, dec,
                        n_left, rules, first_new, node_pos):
    subtree, small, min_split, max_depth = rules

    def kind(c, d):
        if c < min_split or (max_depth >= 0 and d >= max_depth):
            return -1
        return 0 if c <= subtree else 1 if c <= small else 2

    rows, links = {}, {}
    groups = ([], [], [], [])  # subtree roots, small, derived, direct
    helpers, derive, sub_rows = [], [], [0]
    nxt = first_new
    for i in range(n_sub, len(front)):
        e, g = i - n_sub, front[i]
        if dec[e] == -2:
            groups[3].append((g, ranges[i, 0], ranges[i, 1], tree[i], seed[i], depth[i],
                              node_pos[g]))
            continue
        if dec[e] < 0:
            continue
        links[g] = (nxt, nxt + 1)
        mid = ranges[i, 0] + n_left[e]
        spans = ((ranges[i, 0], mid), (mid, ranges[i, 1]))
        d = depth[i] + 1
        kinds = [kind(ce - cs, d) for cs, ce in spans]
        big = 1 if mid - ranges[i, 0] <= ranges[i, 1] - mid else 0
        derived = big if (subtract and e >= n_small and kinds[big] == 2) else -1
        entries = []
        for side, (cs, ce) in enumerate(spans):
            h, k = nxt + side, kinds[side]
            s = child_seed_nb(seed[i], side)
            rows[h] = (cs, ce, tree[i], d, s, -1 if k == 0 else 0, g)
            entry = (h, cs, ce, tree[i], s, d, -1 if k == 0 else 0)
            entries.append(entry)
            if side == derived:
                groups[2].append(entry)
            elif k >= 0:
                groups[{0: 0, 1: 1, 2: 3}[k]].append(entry)
            if k == 0:
                sub_rows.append(sub_rows[-1] + 2 * (ce - cs) - 1)
        if derived >= 0:
            small_side = 1 - derived
            if kinds[small_side] == 2:
                sibling = [row[0] for row in groups[3]].index(entries[small_side][0])
            else:
                helpers.append(entries[small_side])
                sibling = -len(helpers)
            derive.append((e - n_small, sibling))
        nxt += 2
    order = groups[0] + groups[1] + groups[2] + groups[3]
    counts = [nxt - first_new, len(groups[0]), len(groups[1]), len(groups[2]), len(groups[3]),
              sub_rows[-1], len(helpers)]
    return rows, links, order, helpers, derive, sub_rows, counts


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("subtract", [0, 1])
def test_children_number_the_nodes_and_group_the_next_frontier(seed, subtract):
    rng = np.random.default_rng(seed)
    n_front, n_sub, n_small, cap = 300, 7, 40, 1200
    front = rng.permutation(cap // 2)[:n_front].astype(np.int64)
    sizes = rng.integers(1, 400, n_front)
    stops = np.cumsum(sizes)
    ranges = np.stack([stops - sizes, stops], axis=1).astype(np.int64)
    tree = rng.integers(0, 4, n_front).astype(np.int32)
    depth = rng.integers(0, 6, n_front).astype(np.int32)
    seeds = rng.integers(0, 2**63, n_front, dtype=np.uint64)
    dec = rng.choice([-2, -1, 0, 3, 5], n_front - n_sub).astype(np.int32)
    n_left = np.array([rng.integers(1, s) if s > 1 else 0 for s in sizes[n_sub:]], np.int64)
    rules = (20, 100, 4, 6)
    first_new = cap // 2
    node_pos = rng.integers(0, 50, cap).astype(np.int64)
    rows, links, order, helpers, derive, sub_rows, counts = _children_reference(
        front, n_sub, n_small, subtract, ranges, tree, depth, seeds, dec, n_left, rules,
        first_new, node_pos)
    assert all(counts[1:3]) and counts[4], counts  # every group is exercised
    assert bool(counts[3]) == bool(subtract) and bool(counts[6]) == bool(subtract)
    for backend in BACKENDS:
        table = [np.full(cap, -5, np.int64), np.full(cap, -5, np.int64), np.full(cap, -5, np.int32),
                 np.full(cap, -5, np.int32), np.zeros(cap, np.uint64), node_pos.copy(),
                 np.full(cap, -5, np.int64), np.full(cap, -5, np.int64), np.full(cap, -5, np.int64),
                 np.full(cap, -5, np.int32), np.full(cap, -5, np.int32), np.full(cap, 5, np.uint8),
                 np.full(cap, 5.0)]
        batch = 3 * n_front
        nxt = [np.full(2 * n_front, -9, np.int64), np.full((batch, 2), -9, np.int64),
               np.full(batch, -9, np.int32), np.zeros(batch, np.uint64),
               np.full(batch, -9, np.int32), np.full(batch, -9, np.int64)]
        links_out = [np.full(2 * n_front, -9, np.int64), np.full(2 * n_front, -9, np.int64)]
        sub_offsets = np.full(2 * n_front + 1, -9, np.int64)
        counts_out = np.zeros(7, np.int64)
        got = _launch(backend, "tree_level_children", front, n_sub, n_small, subtract, ranges,
                      tree, depth, seeds, dec, n_left, *rules, first_new, *table, *nxt,
                      *links_out, sub_offsets, counts_out, *_no_placing(int(stops[-1])))
        (start, stop, ttree, tdepth, tseed, tpos, parent, left, right, feature, bins, ml,
         gain) = got[15:28]
        next_front, next_ranges, next_tree, next_seed, next_depth, next_pos = got[28:34]
        parent_hist, sibling, offsets_out, counts_got = got[34:38]
        name = backend.name
        np.testing.assert_array_equal(counts_got, counts, err_msg=name)
        np.testing.assert_array_equal(offsets_out[: len(sub_rows)], sub_rows, err_msg=name)
        for h, (cs, ce, t, d, s, pos, g) in rows.items():
            assert (start[h], stop[h], ttree[h], tdepth[h], tseed[h], tpos[h], parent[h]) == (
                cs, ce, t, d, s, pos, g), name
            assert (left[h], right[h], feature[h], bins[h], ml[h], gain[h]) == (
                -1, -1, -1, 0, 0, -np.inf), name
        for g, (lo, hi) in links.items():
            assert (left[g], right[g]) == (lo, hi), name
        n_next = len(order)
        np.testing.assert_array_equal(next_front[:n_next], [row[0] for row in order])
        listed = order + helpers
        np.testing.assert_array_equal(next_ranges[: len(listed)], [r[1:3] for r in listed])
        np.testing.assert_array_equal(next_tree[: len(listed)], [r[3] for r in listed])
        np.testing.assert_array_equal(next_seed[: len(listed)], [r[4] for r in listed])
        np.testing.assert_array_equal(next_depth[: len(listed)], [r[5] for r in listed])
        np.testing.assert_array_equal(next_pos[:n_next], [r[6] for r in order])
        np.testing.assert_array_equal(parent_hist[: len(derive)], [d[0] for d in derive])
        np.testing.assert_array_equal(sibling[: len(derive)], [d[1] for d in derive])


@pytest.mark.parametrize("backend", BACKENDS, ids=lambda b: b.name)
@pytest.mark.parametrize("max_depth", [-1, 0])
@pytest.mark.parametrize("n_each", [None, 1, 12, 300])
def test_roots_fill_the_table_and_group_the_first_frontier(backend, max_depth, n_each):
    # counts given, or none: n_each samples per tree, and root weights written
    counts = np.array([3, 40, 1, 12, 300, 7, 90], dtype=np.int64)
    seeds = np.arange(11, 18, dtype=np.uint64) * np.uint64(2**40)
    subtree, small, min_split = 10, 100, 4
    T = len(counts)
    given = np.zeros(0, np.int64) if n_each else counts
    if n_each:
        counts = np.full(T, n_each, np.int64)
    root_weight = np.full(T, -1.0)
    # without counts, the samples (each tree's in order) and their unit weights
    n_fill = n_each or 5
    samples = np.full(T * n_fill, -7, np.int32)
    weights = np.full((T, n_fill), -7.0, np.float32)
    table = [np.full(T + 2, 7, dtype=d) for d in
             ("int64", "int64", "int32", "int32", "uint64", "int64", "int64", "int64", "int64",
              "int32", "int32", "uint8", "float64")]
    batch = [np.full(T, -7, dtype=np.int64), np.full((T, 2), -7, dtype=np.int64),
             np.full(T, -7, dtype=np.int32), np.zeros(T, dtype=np.uint64),
             np.full(T, -7, dtype=np.int32), np.full(T, -7, dtype=np.int64),
             np.full(T + 1, -7, dtype=np.int64)]
    out = _launch(backend, "tree_level_roots", given, n_each or 0, seeds, root_weight, samples,
                  weights, subtree, small, min_split, max_depth, *table, *batch)
    (start, stop, tree, depth, seed, pos, parent, left, right, feature, bin_, ml, gain,
     front, ranges, b_tree, b_seed, b_depth, b_pos, sub_offsets) = out[10:]
    np.testing.assert_array_equal(out[3], np.full(T, float(n_each) if n_each else -1.0))
    if n_each:
        np.testing.assert_array_equal(out[4], np.tile(np.arange(n_each, dtype=np.int32), T))
        np.testing.assert_array_equal(out[5], np.ones((T, n_each), np.float32))
    else:
        assert (out[4] == -7).all() and (out[5] == -7.0).all()
    stops = np.cumsum(counts)
    np.testing.assert_array_equal(start[:T], stops - counts)
    np.testing.assert_array_equal(stop[:T], stops)
    np.testing.assert_array_equal(tree[:T], np.arange(T))
    np.testing.assert_array_equal(seed[:T], seeds)
    assert (depth[:T] == 0).all() and (parent[:T] == -1).all() and (left[:T] == -1).all()
    assert (right[:T] == -1).all() and (feature[:T] == -1).all() and (bin_[:T] == 0).all()
    assert (ml[:T] == 0).all() and np.isneginf(gain[:T]).all()
    assert (start[T:] == 7).all()  # rows after the roots untouched
    # the groups of the host grower's rule: leaf, subtree root, small, large
    leaf = (counts < min_split) | (max_depth == 0)
    kind = np.where(leaf, 3, np.where(counts <= subtree, 0, np.where(counts <= small, 1, 2)))
    np.testing.assert_array_equal(pos[:T], np.where(kind == 0, -1, 0))
    expected = np.argsort(kind, kind="stable")[: int((kind < 3).sum())]
    n = len(expected)
    np.testing.assert_array_equal(front[:n], expected)
    np.testing.assert_array_equal(ranges[:n], np.stack([stops - counts, stops], 1)[expected])
    np.testing.assert_array_equal(b_tree[:n], expected)
    np.testing.assert_array_equal(b_seed[:n], seeds[expected])
    np.testing.assert_array_equal(b_depth[:n], 0)
    np.testing.assert_array_equal(b_pos[:n], pos[expected])
    subs = expected[kind[expected] == 0]
    np.testing.assert_array_equal(sub_offsets[: len(subs) + 1],
                                  np.concatenate([[0], np.cumsum(2 * counts[subs] - 1)]))


@pytest.mark.parametrize("backend", BACKENDS, ids=lambda b: b.name)
def test_subtract_derives_the_larger_siblings(backend):
    rng = np.random.default_rng(5)
    n_derived, n_direct, n_helpers, shape = 4, 3, 2, (3, 5, 2)
    parent = rng.standard_normal((6, *shape)).astype(np.float32)
    hist = np.full((n_derived + n_direct + n_helpers, *shape), np.nan, np.float32)
    hist[n_derived:] = rng.standard_normal((n_direct + n_helpers, *shape))
    parent_row = np.array([5, 0, 2, 3], np.int64)
    sibling = np.array([2, -1, 0, -2], np.int64)  # direct 2, helper 0, direct 0, helper 1
    rows = [n_derived + 2, n_derived + n_direct, n_derived, n_derived + n_direct + 1]
    expected = hist.copy()
    for d in range(n_derived):
        expected[d] = parent[parent_row[d]] - hist[rows[d]]
    got = _launch(backend, "tree_level_subtract", hist, n_derived, n_direct, parent,
                  parent_row, sibling)[0]
    np.testing.assert_array_equal(got, expected)


def _leaf_problem(seed, n_trees=3, n=50):
    """Trees' sample ranges cut into leaves, some leaves in the table and some in
    subtree outputs; every position covered once."""
    rng = np.random.default_rng(seed)
    counts = rng.integers(5, n, n_trees)
    stops = np.cumsum(counts)
    root_ranges = np.stack([stops - counts, stops], axis=1).astype(np.int64)
    total = int(stops[-1])
    sample_indices = np.concatenate([rng.permutation(n)[:c] for c in counts]).astype(np.int32)
    cuts = np.unique(np.concatenate([rng.integers(0, total, total // 4), stops[:-1], [0]]))
    weights = rng.uniform(0.5, 2.0, (n_trees, n)).astype(np.float32)
    return root_ranges, total, sample_indices, cuts, weights


def _place_reference(root_ranges, total, sample_indices, cuts, weights, n):
    leaf = np.full((len(root_ranges), n), -1, np.int32)
    leaf_weight = []
    bounds = list(cuts) + [total]
    for t, (lo, hi) in enumerate(root_ranges):
        rank = 0
        for a, b in zip(bounds[:-1], bounds[1:]):
            if lo <= a < hi:
                acc = 0.0
                for q in range(a, b):
                    leaf[t, sample_indices[q]] = rank
                    acc += float(weights[t, sample_indices[q]])
                leaf_weight.append(acc)
                rank += 1
    return leaf, np.array(leaf_weight)


@pytest.mark.parametrize("seed", range(3))
def test_leaf_marks_and_place(seed):
    n = 50
    root_ranges, total, sample_indices, cuts, weights = _leaf_problem(seed, n=n)
    expected_leaf, expected_weight = _place_reference(root_ranges, total, sample_indices, cuts,
                                                      weights, n)
    # half the leaves are table nodes (one is a subtree root, skipped), half come from a
    # subtree output under one root node whose start is cuts[1]
    half = len(cuts) // 2
    table_starts = np.concatenate([cuts[:half], [cuts[half]]]).astype(np.int64)
    table_feature = np.concatenate([np.full(half, -1), [-1]]).astype(np.int32)
    table_pos = np.concatenate([np.zeros(half), [-1]]).astype(np.int64)
    base = int(cuts[half])
    rows = cuts[half:] - base
    roots = np.array([half], np.int64)  # the subtree root's node id
    offsets = np.array([0, len(rows) + 1], np.int64)
    count = np.array([len(rows) + 1], np.int32)
    feature = np.concatenate([[3], np.full(len(rows), -1)]).astype(np.int32)  # row 0: internal
    start = np.concatenate([[0], rows]).astype(np.int64)
    for backend in BACKENDS:
        mark = np.zeros(total, np.int32)
        mark = _launch(backend, "tree_level_leaf_marks_table", table_feature, table_pos,
                       table_starts, mark)[-1]
        mark = _launch(backend, "tree_level_leaf_marks_subtrees", roots, offsets, count, feature,
                       start, table_starts, mark)[-1]
        expected_mark = np.zeros(total, np.int32)
        expected_mark[cuts] = 1
        np.testing.assert_array_equal(mark, expected_mark, err_msg=backend.name)
        cum = np.cumsum(mark).astype(np.int64)
        leaf = np.full((len(root_ranges), n), -1, np.int32)
        leaf_weight = np.full(total, np.nan)
        root_start, root_stop = (np.ascontiguousarray(c) for c in root_ranges.T)
        got = _launch(backend, "tree_level_place", mark, cum, sample_indices, root_start,
                      root_stop, weights, leaf, leaf_weight)
        np.testing.assert_array_equal(got[-2], expected_leaf, err_msg=backend.name)
        np.testing.assert_array_equal(got[-1][: len(expected_weight)], expected_weight,
                                      err_msg=backend.name)


@pytest.mark.parametrize("seed", range(3))
def test_leaf_marks_of_a_best_first_table(seed):
    # state 0 (not in its tree), 1 (a leaf), 2 (split): the leaves' first positions
    rng = np.random.default_rng(seed)
    total, n_nodes = 60, 25
    state = rng.integers(0, 3, size=n_nodes).astype(np.uint8)
    start = rng.permutation(total)[:n_nodes].astype(np.int64)
    expected = np.zeros(total, np.int32)
    for g in range(n_nodes):
        if state[g] == 1:
            expected[start[g]] = 1
    for backend in BACKENDS:
        mark = _launch(backend, "tree_level_leaf_marks_state", state, start,
                       np.zeros(total, np.int32))[-1]
        np.testing.assert_array_equal(mark, expected, err_msg=backend.name)


def test_launch_names_the_kernel():
    with pytest.raises(ValueError, match="name must be one of"):
        level_kernels.launch(NUMPY, "tree_partition")
