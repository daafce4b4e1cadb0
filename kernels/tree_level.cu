// Bookkeeping kernels of the device-resident level-wise growth (contracts:
// ``tree_level_*`` in gpurpo/tree/level_kernels.py; CPU twins in
// gpurpo/tree/_numba/tree_level.py; the driver is gpurpo/tree/device_grower.py).
//
// The node table of a batch of trees lives on the device, one array per field;
// a level's frontier is a list of node ids ordered by the path that evaluates
// each node (subtree roots, then small nodes, then large ones), with their
// fields gathered in the launch batch (ranges, tree, seed, depth, pos). Per level:
//   * tree_level_features  draws each large node's candidate features in its
//                          visiting order, with the Extra-Trees uniforms;
//   * tree_level_decide    merges the small and large nodes' choices into the
//                          table (min_impurity_decrease applied; a node whose
//                          candidates were all constant keeps its place and
//                          continues with the next positions);
//   * tree_level_children  numbers the children of splitting nodes and builds
//                          the next frontier, its launch batch and its counts,
//                          in one block.
// After growth, tree_level_leaf_marks_* mark the first sample position of
// every leaf and tree_level_place gives every sample its leaf (leaves numbered
// by position within their tree: depth first, left before right) and every
// leaf its weight, summed in position order.

#include "tree_random.cuh"

#define LEVEL_SPLIT_NEG_INF __longlong_as_double((long long)0xFFF0000000000000ULL)
// counters of tree_level_children: created nodes, subtree roots, small nodes,
// large nodes, rows of the subtree outputs
#define LEVEL_COUNTERS 5
#define LEVEL_MAX_THREADS 256

// One thread per node: positions pos .. pos + width - 1 of the node's visiting
// order (feature -1 from position p on), their positions, and with
// random_split the uniforms uniform_at(seed, position).
extern "C" __global__ void tree_level_features(
    const unsigned long long* __restrict__ seed, const long long* __restrict__ pos,
    long long n_nodes, int width, int p, int random_split,
    int* __restrict__ out_features, long long* __restrict__ out_positions,
    double* __restrict__ out_uniforms)
{
    int lo, hi;
    split_feistel_params(p, &lo, &hi);
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n_nodes; i += stride) {
        const unsigned long long s = seed[i];
        unsigned long long keys[SPLIT_N_ROUNDS];
        int order[SPLIT_SMALL_P];
        if (p <= SPLIT_SMALL_P) {
            // the features sorted by hash64(round_key(seed, 0) ^ f) (all distinct)
            const unsigned long long key = split_round_key(s, 0);
            unsigned long long h[SPLIT_SMALL_P];
            for (int f = 0; f < p; ++f) {
                const unsigned long long hf = split_hash64(key ^ (unsigned long long)f);
                int z = f - 1;
                while (z >= 0 && h[z] > hf) {
                    h[z + 1] = h[z];
                    order[z + 1] = order[z];
                    --z;
                }
                h[z + 1] = hf;
                order[z + 1] = f;
            }
        } else {
            for (int r = 0; r < SPLIT_N_ROUNDS; ++r) keys[r] = split_round_key(s, r);
        }
        for (int j = 0; j < width; ++j) {
            const long long at = pos[i] + j;
            const long long o = i * (long long)width + j;
            int f = -1;
            if (at < p) f = p <= SPLIT_SMALL_P ? order[at] : split_feature_at(keys, at, p, lo, hi);
            out_features[o] = f;
            out_positions[o] = at;
            if (random_split) out_uniforms[o] = split_uniform_at(s, at);
        }
    }
}

// One thread per evaluated frontier node (frontier positions n_sub .. n_front - 1;
// the first n_small of them were split by tree_split_small, the others by the
// histogram path, whose best slots are rows of ``large``: feature, bin,
// missing_left, gain, with feature -2 for a node to continue at pos + width).
extern "C" __global__ void tree_level_decide(
    const long long* __restrict__ front, long long n_sub, long long n_small, long long n_front,
    const int* __restrict__ small_feature, const int* __restrict__ small_bin,
    const unsigned char* __restrict__ small_missing_left, const double* __restrict__ small_gain,
    const double* __restrict__ large, const int* __restrict__ batch_tree,
    const double* __restrict__ root_weight, int n_scored, double min_impurity_decrease,
    int width,
    int* __restrict__ node_feature, int* __restrict__ node_bin,
    unsigned char* __restrict__ node_missing_left, double* __restrict__ node_gain,
    long long* __restrict__ node_pos,
    int* __restrict__ out_feature, int* __restrict__ out_bin,
    unsigned char* __restrict__ out_missing_left)
{
    const double eps = 2.220446049250313e-16;
    const long long n_eval = n_front - n_sub;
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (long long e = (long long)blockIdx.x * blockDim.x + threadIdx.x; e < n_eval; e += stride) {
        const long long i = n_sub + e;
        const long long g = front[i];
        int f, b, ml;
        double gain;
        if (e < n_small) {
            f = small_feature[e];
            b = small_bin[e];
            ml = small_missing_left[e];
            gain = small_gain[e];
        } else {
            const double* row = large + 4 * (e - n_small);
            f = (int)row[0];
            b = (int)row[1];
            ml = (int)row[2];
            gain = row[3];
        }
        if (f == -2) {
            node_pos[g] += width;
            out_feature[e] = -2;
            out_bin[e] = 0;
            out_missing_left[e] = 0;
            continue;
        }
        if (f >= 0) {
            const double improvement =
                gain / ((double)n_scored * root_weight[batch_tree[i]]);
            if (!(improvement + eps >= min_impurity_decrease)) f = -1;
        }
        if (f < 0) {
            b = 0;
            ml = 0;
            gain = LEVEL_SPLIT_NEG_INF;
            f = -1;
        }
        node_feature[g] = f;
        node_bin[g] = b;
        node_missing_left[g] = (unsigned char)ml;
        node_gain[g] = gain;
        out_feature[e] = f;
        out_bin[e] = b;
        out_missing_left[e] = (unsigned char)ml;
    }
}

struct LevelRules {
    long long subtree_size;
    long long small_size;
    long long min_split;  // the smallest node that may split: max(2, min_samples_split, 2 msl)
    int max_depth;        // -1: unlimited
};

// What frontier node i contributes: children created, subtree roots, small and
// large nodes of the next frontier, rows of the subtree outputs.
__device__ __forceinline__ int level_child_kind(long long size, int depth, const LevelRules& r)
{
    if (size < r.min_split || (r.max_depth >= 0 && depth >= r.max_depth)) return -1;  // a leaf
    if (size <= r.subtree_size) return 0;
    if (size <= r.small_size) return 1;
    return 2;
}

__device__ void level_counts(long long i, long long n_sub, const long long* ranges,
                             const int* batch_depth, const int* dec_feature,
                             const long long* n_left, const LevelRules& r, long long* c)
{
    for (int k = 0; k < LEVEL_COUNTERS; ++k) c[k] = 0;
    if (i < n_sub) return;
    const long long e = i - n_sub;
    const int f = dec_feature[e];
    if (f == -2) {
        c[3] = 1;
        return;
    }
    if (f < 0) return;
    c[0] = 2;
    const long long start = ranges[2 * i], stop = ranges[2 * i + 1];
    const long long sizes[2] = {n_left[e], stop - start - n_left[e]};
    for (int side = 0; side < 2; ++side) {
        const int kind = level_child_kind(sizes[side], batch_depth[i] + 1, r);
        if (kind >= 0) c[1 + kind] += 1;
        if (kind == 0) c[4] += 2 * sizes[side] - 1;
    }
}

// One block: every thread takes a contiguous chunk of the frontier, counts
// (pass 1), thread 0 turns the per-thread counts into offsets, and every
// thread writes its chunk's children and next-frontier entries (pass 2) in
// frontier order: children numbered first_new + 2 * (splitting nodes before),
// left then right; next frontier = subtree roots, small nodes, large nodes
// (continuing nodes keep their id), each group in frontier order, with the
// nodes' fields in next_* (the next level's launch batch); sub_offsets[0] = 0 and sub_offsets[r + 1] the subtree output rows of
// roots 0 .. r (2 size - 1 each); counts the LEVEL_COUNTERS totals.
extern "C" __global__ void tree_level_children(
    const long long* __restrict__ front, long long n_front, long long n_sub,
    const long long* __restrict__ ranges, const int* __restrict__ batch_tree,
    const int* __restrict__ batch_depth, const unsigned long long* __restrict__ batch_seed,
    const int* __restrict__ dec_feature, const long long* __restrict__ n_left,
    long long subtree_size, long long small_size, long long min_split, int max_depth,
    long long first_new,
    long long* __restrict__ node_start, long long* __restrict__ node_stop,
    int* __restrict__ node_tree, int* __restrict__ node_depth,
    unsigned long long* __restrict__ node_seed, long long* __restrict__ node_pos,
    long long* __restrict__ node_parent, long long* __restrict__ node_left,
    long long* __restrict__ node_right, int* __restrict__ node_feature,
    int* __restrict__ node_bin, unsigned char* __restrict__ node_missing_left,
    double* __restrict__ node_gain,
    long long* __restrict__ next_front, long long* __restrict__ next_ranges,
    int* __restrict__ next_tree, unsigned long long* __restrict__ next_seed,
    int* __restrict__ next_depth, long long* __restrict__ next_pos,
    long long* __restrict__ sub_offsets, long long* __restrict__ counts)
{
    __shared__ long long offsets[LEVEL_MAX_THREADS][LEVEL_COUNTERS];
    __shared__ long long totals[LEVEL_COUNTERS];
    const LevelRules r = {subtree_size, small_size, min_split, max_depth};
    const int tid = threadIdx.x;
    const int nthreads = blockDim.x < LEVEL_MAX_THREADS ? blockDim.x : LEVEL_MAX_THREADS;
    const long long chunk = (n_front + nthreads - 1) / nthreads;
    const long long lo = tid < nthreads ? (long long)tid * chunk : n_front;
    const long long hi = lo + chunk < n_front ? lo + chunk : n_front;
    long long c[LEVEL_COUNTERS];
    long long mine[LEVEL_COUNTERS] = {0, 0, 0, 0, 0};
    for (long long i = lo; i < hi; ++i) {
        level_counts(i, n_sub, ranges, batch_depth, dec_feature, n_left, r, c);
        for (int k = 0; k < LEVEL_COUNTERS; ++k) mine[k] += c[k];
    }
    if (tid < nthreads)
        for (int k = 0; k < LEVEL_COUNTERS; ++k) offsets[tid][k] = mine[k];
    __syncthreads();
    if (tid == 0) {
        long long acc[LEVEL_COUNTERS] = {0, 0, 0, 0, 0};
        for (int t = 0; t < nthreads; ++t)
            for (int k = 0; k < LEVEL_COUNTERS; ++k) {
                const long long v = offsets[t][k];
                offsets[t][k] = acc[k];
                acc[k] += v;
            }
        for (int k = 0; k < LEVEL_COUNTERS; ++k) {
            totals[k] = acc[k];
            counts[k] = acc[k];
        }
        sub_offsets[0] = 0;
    }
    __syncthreads();
    if (tid >= nthreads) return;
    const long long n_sub_next = totals[1];
    const long long n_small_next = totals[2];
    long long at[LEVEL_COUNTERS];
    for (int k = 0; k < LEVEL_COUNTERS; ++k) at[k] = offsets[tid][k];
    for (long long i = lo; i < hi; ++i) {
        if (i < n_sub) continue;
        const long long e = i - n_sub;
        const int f = dec_feature[e];
        const long long g = front[i];
        if (f == -2) {
            const long long j = n_sub_next + n_small_next + at[3];
            at[3] += 1;
            next_front[j] = g;
            next_ranges[2 * j] = ranges[2 * i];
            next_ranges[2 * j + 1] = ranges[2 * i + 1];
            next_tree[j] = batch_tree[i];
            next_seed[j] = batch_seed[i];
            next_depth[j] = batch_depth[i];
            next_pos[j] = node_pos[g];
            continue;
        }
        if (f < 0) continue;
        const long long start = ranges[2 * i], stop = ranges[2 * i + 1];
        const long long mid = start + n_left[e];
        const long long first_child = first_new + at[0];
        at[0] += 2;
        node_left[g] = first_child;
        node_right[g] = first_child + 1;
        for (int side = 0; side < 2; ++side) {
            const long long h = first_child + side;
            const long long cs = side == 0 ? start : mid;
            const long long ce = side == 0 ? mid : stop;
            const int depth = batch_depth[i] + 1;
            const int kind = level_child_kind(ce - cs, depth, r);
            const unsigned long long child_seed = split_child_seed(batch_seed[i], side);
            node_start[h] = cs;
            node_stop[h] = ce;
            node_tree[h] = batch_tree[i];
            node_depth[h] = depth;
            node_seed[h] = child_seed;
            node_pos[h] = kind == 0 ? -1 : 0;
            node_parent[h] = g;
            node_left[h] = -1;
            node_right[h] = -1;
            node_feature[h] = -1;
            node_bin[h] = 0;
            node_missing_left[h] = 0;
            node_gain[h] = LEVEL_SPLIT_NEG_INF;
            long long j = -1;
            if (kind == 0) {
                j = at[1];
                at[4] += 2 * (ce - cs) - 1;
                sub_offsets[j + 1] = at[4];
                at[1] += 1;
            } else if (kind == 1) {
                j = n_sub_next + at[2];
                at[2] += 1;
            } else if (kind == 2) {
                j = n_sub_next + n_small_next + at[3];
                at[3] += 1;
            }
            if (j >= 0) {
                next_front[j] = h;
                next_ranges[2 * j] = cs;
                next_ranges[2 * j + 1] = ce;
                next_tree[j] = batch_tree[i];
                next_seed[j] = child_seed;
                next_depth[j] = depth;
                next_pos[j] = kind == 0 ? -1 : 0;
            }
        }
    }
}

// One thread per table node: the first position of every leaf that is not a
// subtree root (pos -1; their leaves come from the subtree outputs).
extern "C" __global__ void tree_level_leaf_marks_table(
    long long n_nodes, const int* __restrict__ node_feature,
    const long long* __restrict__ node_pos, const long long* __restrict__ node_start,
    int* __restrict__ mark)
{
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (long long g = (long long)blockIdx.x * blockDim.x + threadIdx.x; g < n_nodes; g += stride)
        if (node_feature[g] < 0 && node_pos[g] >= 0) mark[node_start[g]] = 1;
}

// One thread per subtree root r (node roots[r]): the first position of each
// leaf among its count[r] output rows (positions relative to the root's start).
extern "C" __global__ void tree_level_leaf_marks_subtrees(
    long long n_roots, const long long* __restrict__ roots,
    const long long* __restrict__ offsets, const int* __restrict__ count,
    const int* __restrict__ feature, const long long* __restrict__ start,
    const long long* __restrict__ node_start, int* __restrict__ mark)
{
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (long long r = (long long)blockIdx.x * blockDim.x + threadIdx.x; r < n_roots; r += stride) {
        const long long base = node_start[roots[r]];
        for (long long row = offsets[r]; row < offsets[r] + count[r]; ++row)
            if (feature[row] < 0) mark[base + start[row]] = 1;
    }
}

// One thread per sample position q that starts a leaf (mark[q] = 1; cum is the
// inclusive sum of mark): the leaf's rank in its tree t (found among the
// trees' root ranges) goes to every sample of the leaf, and its weight, the
// float64 sum of the samples' weights in position order, to
// out_leaf_weight[cum[q] - 1].
extern "C" __global__ void tree_level_place(
    long long total, const int* __restrict__ mark, const long long* __restrict__ cum,
    const int* __restrict__ sample_indices, const long long* __restrict__ root_ranges,
    int n_trees, long long n, const float* __restrict__ weights,
    int* __restrict__ out_leaf_of_sample, double* __restrict__ out_leaf_weight)
{
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (long long q = (long long)blockIdx.x * blockDim.x + threadIdx.x; q < total; q += stride) {
        if (!mark[q]) continue;
        int lo = 0, hi = n_trees - 1;
        while (lo < hi) {  // the last tree whose range starts at or before q
            const int mid = (lo + hi + 1) / 2;
            if (root_ranges[2 * mid] <= q) lo = mid; else hi = mid - 1;
        }
        const int t = lo;
        const long long tree_start = root_ranges[2 * t], tree_stop = root_ranges[2 * t + 1];
        const long long before = tree_start > 0 ? cum[tree_start - 1] : 0;
        const int rank = (int)(cum[q] - 1 - before);
        double acc = 0.0;
        for (long long a = q; a < tree_stop && (a == q || !mark[a]); ++a) {
            const long long s = sample_indices[a];
            out_leaf_of_sample[(long long)t * n + s] = rank;
            acc += (double)weights[(long long)t * n + s];
        }
        out_leaf_weight[cum[q] - 1] = acc;
    }
}
