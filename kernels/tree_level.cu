// Bookkeeping kernels of the device-resident level-wise growth (contracts:
// ``tree_level_*`` in gpurpo/tree/level_kernels.py; CPU twins in
// gpurpo/tree/_numba/tree_level.py; the driver is gpurpo/tree/device_grower.py).
//
// The node table of a batch of trees lives on the device, one array per field;
// a level's frontier is a list of node ids ordered by the path that evaluates
// each node (subtree roots, then small nodes, then large ones), with their
// fields gathered in the launch batch (ranges, tree, seed, depth, pos). Per level:
//   * tree_level_large_setup  the large nodes' statistics (purity, Q) and their
//                          candidate features in their visiting order, with the
//                          Extra-Trees uniforms;
//   * tree_level_split     merges the small and large nodes' choices into the
//                          table (min_impurity_decrease applied; a node whose
//                          candidates were all constant keeps its place and
//                          continues with the next positions) and partitions
//                          the samples of the splitting nodes;
//   * tree_level_children  numbers the children of splitting nodes and builds
//                          the next frontier, its launch batch and its counts,
//                          in one block.
// After growth, tree_level_leaf_marks_* mark the first sample position of
// every leaf and tree_level_place gives every sample its leaf (leaves numbered
// by position within their tree: depth first, left before right) and every
// leaf its weight, summed in position order.

#include "block_partition.cuh"
#include "csr_rows.cuh"
#include "node_stats.cuh"
#include "tree_choice.cuh"
#include "tree_random.cuh"

#define LEVEL_SPLIT_NEG_INF __longlong_as_double((long long)0xFFF0000000000000ULL)
// counters of tree_level_children: created nodes, subtree roots, small nodes,
// derived large nodes, direct large nodes, rows of the subtree outputs, helpers
#define LEVEL_COUNTERS 7
#define LEVEL_MAX_THREADS 256

// Node i's positions pos .. pos + width - 1 of its visiting order (feature -1 from
// position p on), their positions, and with random_split the uniforms
// uniform_at(seed, position). With ``natural`` (all p features, width p): feature j
// in slot j, with the position at which the node visits it.
__device__ __forceinline__ void level_draw_features(
    long long i, const unsigned long long* __restrict__ seed, const long long* __restrict__ pos,
    int width, int p, int random_split, int natural, int lo, int hi,
    int* __restrict__ out_features, long long* __restrict__ out_positions,
    double* __restrict__ out_uniforms)
{
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
        const long long o = i * (long long)width + j;
        long long at;
        int f;
        if (natural) {
            f = j;
            at = -1;
            if (p <= SPLIT_SMALL_P) {
                for (int r = 0; r < p; ++r)
                    if (order[r] == j) at = r;
            } else {
                at = split_feature_position(keys, j, p, lo, hi);
            }
        } else {
            at = pos[i] + j;
            f = -1;
            if (at < p) f = p <= SPLIT_SMALL_P ? order[at] : split_feature_at(keys, at, p, lo, hi);
        }
        out_features[o] = f;
        out_positions[o] = at;
        if (random_split) out_uniforms[o] = split_uniform_at(s, at);
    }
}

// The node statistics of a level's large nodes (node_stats_tasks: tree_node_stats's
// blocks and tasks) and, one thread per row after them, the candidate features of
// n_draws rows (the large nodes, then the helpers: level_draw_features), in one launch.
extern "C" __global__ void tree_level_large_setup(
    const int* __restrict__ sample_indices, const long long* __restrict__ node_ranges,
    const int* __restrict__ node_tree, const float* __restrict__ weights,
    const float* __restrict__ targets, long long n, int n_trees, int m, long long n_nodes,
    int blocks_per_node, double* partial_q, int* partial_differs,
    unsigned int* __restrict__ node_done, unsigned char* __restrict__ out_impure,
    double* __restrict__ out_q, const unsigned long long* __restrict__ seed,
    const long long* __restrict__ pos, long long n_draws, int width, int p, int random_split,
    int natural, int* __restrict__ out_features, long long* __restrict__ out_positions,
    double* __restrict__ out_uniforms)
{
    node_stats_tasks(sample_indices, node_ranges, node_tree, weights, targets, n, n_trees, m,
                     n_nodes, blocks_per_node, partial_q, partial_differs, node_done,
                     out_impure, out_q);
    int lo, hi;
    split_feistel_params(p, &lo, &hi);
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n_draws; i += stride)
        level_draw_features(i, seed, pos, width, p, random_split, natural, lo, hi, out_features,
                            out_positions, out_uniforms);
}

// The choice (f, b, ml, gain) of evaluated frontier node e (frontier position
// n_sub + e; the first n_small of them were split by tree_split_small, the others
// by the histogram path, whose best slots are rows of ``large``: feature, bin,
// missing_left, gain, with feature -2 for a node to continue at pos + width), with
// min_impurity_decrease applied; nothing written.
__device__ __forceinline__ void level_choice(
    long long e, long long n_sub, long long n_small, const int* small_feature,
    const int* small_bin, const unsigned char* small_missing_left, const double* small_gain,
    const double* large, const int* batch_tree, const double* root_weight, int n_scored,
    double min_impurity_decrease, int* f, int* b, int* ml, double* gain)
{
    tree_evaluated_choice(e, n_small, small_feature, small_bin, small_missing_left, small_gain,
                          large, f, b, ml, gain);
    if (*f == -2) {
        *b = 0;
        *ml = 0;
    } else {
        tree_keep_choice(f, b, ml, gain,
                         (double)n_scored * root_weight[batch_tree[n_sub + e]],
                         min_impurity_decrease);
    }
}

// level_choice of node e, written to the table (a continuing node: node_pos += width)
// and the outputs; returns it in f, b, ml.
__device__ __forceinline__ void level_decide(
    long long e, long long n_sub, long long n_small, const long long* front,
    const int* small_feature, const int* small_bin, const unsigned char* small_missing_left,
    const double* small_gain, const double* large, const int* batch_tree,
    const double* root_weight, int n_scored, double min_impurity_decrease, int width,
    int* node_feature, int* node_bin, unsigned char* node_missing_left, double* node_gain,
    long long* node_pos, int* out_feature, int* out_bin, unsigned char* out_missing_left,
    int* f_out, int* b_out, int* ml_out)
{
    const long long g = front[n_sub + e];
    int f, b, ml;
    double gain;
    level_choice(e, n_sub, n_small, small_feature, small_bin, small_missing_left, small_gain,
                 large, batch_tree, root_weight, n_scored, min_impurity_decrease, &f, &b, &ml,
                 &gain);
    if (f == -2) {
        node_pos[g] += width;
    } else {
        node_feature[g] = f;
        node_bin[g] = b;
        node_missing_left[g] = (unsigned char)ml;
        node_gain[g] = gain;
    }
    out_feature[e] = f;
    out_bin[e] = b;
    out_missing_left[e] = (unsigned char)ml;
    *f_out = f;
    *b_out = b;
    *ml_out = ml;
}

// The parts in which a splitting node of ``size`` samples is partitioned: one per
// ``part_min`` samples, at most ``parts`` (the launch's), at least one. Part q of a
// node of k parts holds its positions [size q / k, size (q + 1) / k).
__device__ __forceinline__ long long level_parts(long long size, long long parts,
                                                 long long part_min)
{
    const long long k = size / part_min;
    return k < 1 ? 1 : (k < parts ? k : parts);
}

// Tasks (evaluated node e, part q) = e * parts + q, blocks looping over them; a
// node of k = level_parts(size) parts has tasks q < k. Thread 0 of part 0 decides
// (level_decide: min_impurity_decrease applied; the other parts compute the same
// choice, level_choice). A splitting node's block(s) copy its samples to the same
// range of ``scratch`` (as long as sample_indices; a part's range is its block's
// alone). A node of one part is then partitioned stably by its split from there
// back into sample_indices (block_stable_partition), and out_n_left[e] is its
// left count. A node of k > 1 parts (the few large nodes at the top of a tree,
// read by the whole device instead of one multiprocessor) only counts its parts'
// left samples into part_left[e * parts + q]: out_n_left[e] is 0 and its samples
// wait in scratch until tree_level_children places them. out_n_left is 0 for a
// node that does not split. The codes are ``codes`` (p, n), or with ``stored`` a
// sparse X's stored rows (csr_rows.cuh), looked up sample by sample.
extern "C" __global__ void tree_level_split(
    const unsigned char* __restrict__ codes, long long n,
    const long long* __restrict__ row_ptr, const int* __restrict__ row_features,
    const unsigned char* __restrict__ row_codes, const unsigned char* __restrict__ zero_code,
    int stored, int missing_bin,
    int* __restrict__ sample_indices,
    const long long* __restrict__ front, long long n_sub, long long n_small, long long n_front,
    const long long* __restrict__ ranges,
    const int* __restrict__ small_feature, const int* __restrict__ small_bin,
    const unsigned char* __restrict__ small_missing_left, const double* __restrict__ small_gain,
    const double* __restrict__ large, const int* __restrict__ batch_tree,
    const double* __restrict__ root_weight, int n_scored, double min_impurity_decrease,
    int width,
    int* __restrict__ node_feature, int* __restrict__ node_bin,
    unsigned char* __restrict__ node_missing_left, double* __restrict__ node_gain,
    long long* __restrict__ node_pos,
    int* __restrict__ out_feature, int* __restrict__ out_bin,
    unsigned char* __restrict__ out_missing_left, long long* __restrict__ out_n_left,
    int* __restrict__ scratch, long long parts, long long part_min,
    long long* __restrict__ part_left)
{
    __shared__ int choice[3];
    const long long n_tasks = (n_front - n_sub) * parts;
    for (long long task = blockIdx.x; task < n_tasks; task += gridDim.x) {
        const long long e = task / parts;
        const long long q = task - e * parts;
        const long long i = n_sub + e;
        const long long start = ranges[2 * i];
        const long long size = ranges[2 * i + 1] - start;
        const long long k = level_parts(size, parts, part_min);
        if (q >= k) continue;  // the same for the whole block
        if (threadIdx.x == 0) {
            if (q == 0) {
                level_decide(e, n_sub, n_small, front, small_feature, small_bin,
                             small_missing_left, small_gain, large, batch_tree, root_weight,
                             n_scored, min_impurity_decrease, width, node_feature, node_bin,
                             node_missing_left, node_gain, node_pos, out_feature, out_bin,
                             out_missing_left, &choice[0], &choice[1], &choice[2]);
            } else {
                double gain;
                level_choice(e, n_sub, n_small, small_feature, small_bin, small_missing_left,
                             small_gain, large, batch_tree, root_weight, n_scored,
                             min_impurity_decrease, &choice[0], &choice[1], &choice[2], &gain);
            }
        }
        __syncthreads();
        long long n_left = 0;
        if (choice[0] >= 0) {
            const long long a0 = start + size * q / k;
            const long long a1 = start + size * (q + 1) / k;
            for (long long a = a0 + threadIdx.x; a < a1; a += blockDim.x)
                scratch[a] = sample_indices[a];
            __syncthreads();
            FeatureCodes code_of;
            code_of.codes = stored ? nullptr : codes + (long long)choice[0] * n;
            code_of.rows = stored_rows(row_ptr, row_features, row_codes, zero_code);
            code_of.feature = choice[0];
            code_of.sample_of = nullptr;
            if (k == 1) {
                n_left = block_stable_partition(code_of, scratch + start, sample_indices + start,
                                                size, choice[1], choice[2], missing_bin);
            } else {
                const long long c = block_count_left(code_of, scratch + a0, a1 - a0, choice[1],
                                                     choice[2], missing_bin);
                if (threadIdx.x == 0) part_left[task] = c;
            }
        }
        if (threadIdx.x == 0 && q == 0) out_n_left[e] = n_left;
        __syncthreads();  // choice is rewritten by the next task
    }
}

// A new node g of the table: its samples' range, tree, depth, seed, pos and parent;
// no children, no split.
__device__ __forceinline__ void level_new_node(
    long long g, long long start, long long stop, int tree, int depth, unsigned long long seed,
    long long pos, long long parent, long long* node_start, long long* node_stop,
    int* node_tree, int* node_depth, unsigned long long* node_seed, long long* node_pos,
    long long* node_parent, long long* node_left, long long* node_right, int* node_feature,
    int* node_bin, unsigned char* node_missing_left, double* node_gain)
{
    node_start[g] = start;
    node_stop[g] = stop;
    node_tree[g] = tree;
    node_depth[g] = depth;
    node_seed[g] = seed;
    node_pos[g] = pos;
    node_parent[g] = parent;
    node_left[g] = -1;
    node_right[g] = -1;
    node_feature[g] = -1;
    node_bin[g] = 0;
    node_missing_left[g] = 0;
    node_gain[g] = LEVEL_SPLIT_NEG_INF;
}

struct LevelRules {
    long long subtree_size;
    long long small_size;
    long long min_split;  // the smallest node that may split: max(2, min_samples_split, 2 msl)
    int max_depth;        // -1: unlimited
};

// The group of a child of ``size`` samples at ``depth``: -1 a leaf, 0 a subtree
// root, 1 a small node, 2 a large node.
__device__ __forceinline__ int level_child_kind(long long size, int depth, const LevelRules& r)
{
    if (size < r.min_split || (r.max_depth >= 0 && depth >= r.max_depth)) return -1;
    if (size <= r.subtree_size) return 0;
    if (size <= r.small_size) return 1;
    return 2;
}

// The children of frontier node i: their sizes and groups, and which one is
// derived from the parent's histogram (-1: none): with ``subtract`` and a large
// parent (i >= n_sub + n_small), the larger child when it is large (the left one
// on equal sizes is the smaller).
struct LevelChildren {
    long long size[2];
    int kind[2];
    int derived;
};

__device__ __forceinline__ LevelChildren level_children_of(
    long long i, long long e, long long n_small, int subtract, const long long* ranges,
    const int* batch_depth, const long long* n_left, const LevelRules& r)
{
    LevelChildren ch;
    ch.size[0] = n_left[e];
    ch.size[1] = ranges[2 * i + 1] - ranges[2 * i] - n_left[e];
    for (int side = 0; side < 2; ++side)
        ch.kind[side] = level_child_kind(ch.size[side], batch_depth[i] + 1, r);
    const int big = ch.size[0] <= ch.size[1] ? 1 : 0;
    ch.derived = (subtract && e >= n_small && ch.kind[big] == 2) ? big : -1;
    return ch;
}

__device__ void level_counts(long long i, long long n_sub, long long n_small, int subtract,
                             const long long* ranges, const int* batch_depth,
                             const int* dec_feature, const long long* n_left,
                             const LevelRules& r, long long* c)
{
    for (int k = 0; k < LEVEL_COUNTERS; ++k) c[k] = 0;
    if (i < n_sub) return;
    const long long e = i - n_sub;
    const int f = dec_feature[e];
    if (f == -2) {
        c[4] = 1;
        return;
    }
    if (f < 0) return;
    c[0] = 2;
    const LevelChildren ch = level_children_of(i, e, n_small, subtract, ranges, batch_depth,
                                               n_left, r);
    for (int side = 0; side < 2; ++side) {
        const int kind = ch.kind[side];
        if (side == ch.derived) c[3] += 1;
        else if (kind == 0) c[1] += 1;
        else if (kind == 1) c[2] += 1;
        else if (kind == 2) c[4] += 1;
        if (kind == 0) c[5] += 2 * ch.size[side] - 1;
    }
    if (ch.derived >= 0 && ch.kind[1 - ch.derived] != 2) c[6] += 1;
}

__device__ __forceinline__ void level_batch_entry(
    long long j, long long g, long long start, long long stop, int tree,
    unsigned long long seed, int depth, long long pos, long long* next_front,
    long long* next_ranges, int* next_tree, unsigned long long* next_seed, int* next_depth,
    long long* next_pos)
{
    if (next_front) next_front[j] = g;
    next_ranges[2 * j] = start;
    next_ranges[2 * j + 1] = stop;
    next_tree[j] = tree;
    next_seed[j] = seed;
    next_depth[j] = depth;
    next_pos[j] = pos;
}

// The roots of the T trees (tree t owns the next counts[t] positions of the
// samples) into rows 0 .. T - 1 of the table, and the first frontier: the roots
// grouped as subtree roots, small and large nodes (leaves left out), each group in
// tree order, with their launch batch and sub_offsets (0, then the running sum of
// 2 count - 1 over the subtree roots); all by thread 0. With n_counts 0, every tree
// has all n_each samples of weight 1: root_weight[t] = n_each, and the threads of
// the grid write sample_indices (t n_each + i: i) and weights (ones), grid-stride.
extern "C" __global__ void tree_level_roots(
    const long long* __restrict__ counts, long long n_counts, long long n_each,
    const unsigned long long* __restrict__ seeds, double* __restrict__ root_weight,
    int* __restrict__ sample_indices, float* __restrict__ weights,
    long long n_trees, long long subtree_size, long long small_size, long long min_split,
    int max_depth, long long* __restrict__ node_start, long long* __restrict__ node_stop,
    int* __restrict__ node_tree, int* __restrict__ node_depth,
    unsigned long long* __restrict__ node_seed, long long* __restrict__ node_pos,
    long long* __restrict__ node_parent, long long* __restrict__ node_left,
    long long* __restrict__ node_right, int* __restrict__ node_feature,
    int* __restrict__ node_bin, unsigned char* __restrict__ node_missing_left,
    double* __restrict__ node_gain, long long* __restrict__ front,
    long long* __restrict__ ranges, int* __restrict__ batch_tree,
    unsigned long long* __restrict__ batch_seed, int* __restrict__ batch_depth,
    long long* __restrict__ batch_pos, long long* __restrict__ sub_offsets)
{
    if (!n_counts) {
        const long long stride = (long long)gridDim.x * blockDim.x;
        for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n_trees * n_each;
             i += stride) {
            sample_indices[i] = (int)(i % n_each);
            weights[i] = 1.0f;
        }
    }
    if (threadIdx.x != 0 || blockIdx.x != 0) return;
    const LevelRules r = {subtree_size, small_size, min_split, max_depth};
    long long start = 0;
    for (long long t = 0; t < n_trees; ++t) {
        const long long count = n_counts ? counts[t] : n_each;
        if (!n_counts) root_weight[t] = (double)n_each;
        const int kind = level_child_kind(count, 0, r);
        level_new_node(t, start, start + count, (int)t, 0, seeds[t], kind == 0 ? -1 : 0, -1,
                       node_start, node_stop, node_tree, node_depth, node_seed, node_pos,
                       node_parent, node_left, node_right, node_feature, node_bin,
                       node_missing_left, node_gain);
        start += count;
    }
    long long j = 0, rows = 0;
    sub_offsets[0] = 0;
    for (int group = 0; group < 3; ++group) {
        for (long long t = 0; t < n_trees; ++t) {
            const long long count = node_stop[t] - node_start[t];
            if (level_child_kind(count, 0, r) != group) continue;
            front[j] = t;
            ranges[2 * j] = node_start[t];
            ranges[2 * j + 1] = node_stop[t];
            batch_tree[j] = (int)t;
            batch_seed[j] = seeds[t];
            batch_depth[j] = 0;
            batch_pos[j] = node_pos[t];
            if (group == 0) {
                rows += 2 * count - 1;
                sub_offsets[j + 1] = rows;
            }
            ++j;
        }
    }
}

// The sum over the block of every thread's ``v`` (all threads get it; blockDim a
// multiple of 32, at most LEVEL_MAX_THREADS).
__device__ __forceinline__ long long level_block_sum(long long v)
{
    __shared__ long long warp_sums[LEVEL_MAX_THREADS / 32];
    for (int d = 16; d > 0; d >>= 1) v += __shfl_down_sync(0xFFFFFFFFu, v, d);
    if ((threadIdx.x & 31) == 0) warp_sums[threadIdx.x >> 5] = v;
    __syncthreads();
    long long total = 0;
    for (int w = 0; w < (int)(blockDim.x >> 5); ++w) total += warp_sums[w];
    __syncthreads();  // warp_sums is rewritten by the next call
    return total;
}

// The blocks after the first of tree_level_children: tasks (evaluated node e, part q)
// = e * parts + q as in tree_level_split, blocks looping over them. Each part of a
// splitting node of k > 1 parts places its samples, waiting in scratch, into
// sample_indices: its left ones after the left ones of the parts before it, its
// right ones after the node's n_left left samples and the right ones of the parts
// before it, each in their order (block_place): the node's stable partition.
__device__ void level_place_parts(
    const unsigned char* codes, long long n, const long long* row_ptr, const int* row_features,
    const unsigned char* row_codes, const unsigned char* zero_code, int stored, int missing_bin,
    int* sample_indices, const int* scratch, long long n_sub, long long n_front,
    const long long* ranges, const int* dec_feature, const int* dec_bin,
    const unsigned char* dec_missing_left, long long parts, long long part_min,
    const long long* part_left)
{
    if (blockDim.x > LEVEL_MAX_THREADS || (blockDim.x & 31) != 0) __trap();  // never launched so
    const long long n_tasks = (n_front - n_sub) * parts;
    for (long long task = blockIdx.x - 1; task < n_tasks; task += gridDim.x - 1) {
        const long long e = task / parts;
        const long long q = task - e * parts;
        const int f = dec_feature[e];
        if (f < 0) continue;
        const long long i = n_sub + e;
        const long long start = ranges[2 * i];
        const long long size = ranges[2 * i + 1] - start;
        const long long k = level_parts(size, parts, part_min);
        if (k == 1 || q >= k) continue;  // the same for the whole block
        long long before = 0, all = 0;
        for (long long r = threadIdx.x; r < k; r += blockDim.x) {
            const long long c = part_left[e * parts + r];
            all += c;
            if (r < q) before += c;
        }
        before = level_block_sum(before);
        const long long n_left = level_block_sum(all);
        const long long a0 = start + size * q / k;
        const long long a1 = start + size * (q + 1) / k;
        FeatureCodes code_of;
        code_of.codes = stored ? nullptr : codes + (long long)f * n;
        code_of.rows = stored_rows(row_ptr, row_features, row_codes, zero_code);
        code_of.feature = f;
        code_of.sample_of = nullptr;
        block_place(code_of, scratch + a0, sample_indices + start + before,
                    sample_indices + start + n_left + (a0 - start - before), a1 - a0, dec_bin[e],
                    dec_missing_left[e], missing_bin);
    }
}

// Block 0: every thread takes a contiguous chunk of the frontier's evaluated nodes
// (after its n_sub subtree roots), first sums the
// part counts of its nodes partitioned in parts into n_left, counts
// (pass 1), thread 0 turns the per-thread counts into offsets, and every
// thread writes its chunk's children and next-frontier entries (pass 2) in
// frontier order: children numbered first_new + 2 * (splitting nodes before),
// left then right. Next frontier = subtree roots, small nodes, derived large
// nodes, direct large nodes (continuing nodes keep their id), each group in
// frontier order, with the nodes' fields in next_* (the next level's launch
// batch); after them in next_* only, the histogram helpers (the smaller
// children, not large, of derived nodes). A derived node d has
// next_parent_hist[d] (its parent's row among this level's large nodes) and
// next_sibling[d] (its sibling's index among the direct large nodes, or -1 -
// its index among the helpers). sub_offsets[0] = 0 and sub_offsets[r + 1] the
// subtree output rows of roots 0 .. r (2 size - 1 each); counts the
// LEVEL_COUNTERS totals.
extern "C" __global__ void tree_level_children(
    const long long* __restrict__ front, long long n_front, long long n_sub, long long n_small,
    int subtract, const long long* __restrict__ ranges, const int* __restrict__ batch_tree,
    const int* __restrict__ batch_depth, const unsigned long long* __restrict__ batch_seed,
    const int* __restrict__ dec_feature, long long* __restrict__ n_left,
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
    long long* __restrict__ next_parent_hist, long long* __restrict__ next_sibling,
    long long* __restrict__ sub_offsets, long long* __restrict__ counts,
    const unsigned char* __restrict__ codes, long long n,
    const long long* __restrict__ row_ptr, const int* __restrict__ row_features,
    const unsigned char* __restrict__ row_codes, const unsigned char* __restrict__ zero_code,
    int stored, int missing_bin, int* __restrict__ sample_indices,
    const int* __restrict__ scratch, const int* __restrict__ dec_bin,
    const unsigned char* __restrict__ dec_missing_left, long long parts, long long part_min,
    const long long* __restrict__ part_left)
{
    __shared__ long long offsets[LEVEL_MAX_THREADS][LEVEL_COUNTERS];
    __shared__ long long totals[LEVEL_COUNTERS];
    if (blockIdx.x > 0) {
        level_place_parts(codes, n, row_ptr, row_features, row_codes, zero_code, stored,
                          missing_bin, sample_indices, scratch, n_sub, n_front, ranges,
                          dec_feature, dec_bin, dec_missing_left, parts, part_min, part_left);
        return;
    }
    const LevelRules r = {subtree_size, small_size, min_split, max_depth};
    const int tid = threadIdx.x;
    const int nthreads = blockDim.x < LEVEL_MAX_THREADS ? blockDim.x : LEVEL_MAX_THREADS;
    // chunks of the evaluated nodes only: the subtree roots before them add nothing
    const long long chunk = (n_front - n_sub + nthreads - 1) / nthreads;
    const long long lo = tid < nthreads ? n_sub + (long long)tid * chunk : n_front;
    const long long hi = lo + chunk < n_front ? lo + chunk : n_front;
    // the left counts of the nodes partitioned in parts: the sums of their parts'
    for (long long i = lo; i < hi; ++i) {
        const long long e = i - n_sub;
        if (dec_feature[e] < 0) continue;
        const long long k = level_parts(ranges[2 * i + 1] - ranges[2 * i], parts, part_min);
        if (k == 1) continue;
        long long total = 0;
        for (long long q = 0; q < k; ++q) total += part_left[e * parts + q];
        n_left[e] = total;
    }
    long long c[LEVEL_COUNTERS];
    long long mine[LEVEL_COUNTERS];
    for (int k = 0; k < LEVEL_COUNTERS; ++k) mine[k] = 0;
    for (long long i = lo; i < hi; ++i) {
        level_counts(i, n_sub, n_small, subtract, ranges, batch_depth, dec_feature, n_left, r, c);
        for (int k = 0; k < LEVEL_COUNTERS; ++k) mine[k] += c[k];
    }
    if (tid < nthreads)
        for (int k = 0; k < LEVEL_COUNTERS; ++k) offsets[tid][k] = mine[k];
    __syncthreads();
    if (tid == 0) {
        long long acc[LEVEL_COUNTERS];
        for (int k = 0; k < LEVEL_COUNTERS; ++k) acc[k] = 0;
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
    // group bases: subtree roots, small, derived, direct, helpers
    const long long base[5] = {0, totals[1], totals[1] + totals[2],
                               totals[1] + totals[2] + totals[3],
                               totals[1] + totals[2] + totals[3] + totals[4]};
    long long at[LEVEL_COUNTERS];
    for (int k = 0; k < LEVEL_COUNTERS; ++k) at[k] = offsets[tid][k];
    for (long long i = lo; i < hi; ++i) {
        if (i < n_sub) continue;
        const long long e = i - n_sub;
        const int f = dec_feature[e];
        const long long g = front[i];
        if (f == -2) {
            level_batch_entry(base[3] + at[4], g, ranges[2 * i], ranges[2 * i + 1], batch_tree[i],
                              batch_seed[i], batch_depth[i], node_pos[g], next_front,
                              next_ranges, next_tree, next_seed, next_depth, next_pos);
            at[4] += 1;
            continue;
        }
        if (f < 0) continue;
        const LevelChildren ch = level_children_of(i, e, n_small, subtract, ranges, batch_depth,
                                                   n_left, r);
        const long long start = ranges[2 * i], stop = ranges[2 * i + 1];
        const long long mid = start + n_left[e];
        const long long first_child = first_new + at[0];
        at[0] += 2;
        node_left[g] = first_child;
        node_right[g] = first_child + 1;
        const int depth = batch_depth[i] + 1;
        long long slot[2];  // each child's index in its group (-1: a leaf)
        for (int side = 0; side < 2; ++side) {
            const int kind = ch.kind[side];
            if (side == ch.derived) slot[side] = at[3]++;
            else if (kind == 0) slot[side] = at[1]++;
            else if (kind == 1) slot[side] = at[2]++;
            else if (kind == 2) slot[side] = at[4]++;
            else slot[side] = -1;
        }
        long long helper = -1;
        if (ch.derived >= 0 && ch.kind[1 - ch.derived] != 2) helper = at[6]++;
        for (int side = 0; side < 2; ++side) {
            const long long h = first_child + side;
            const long long cs = side == 0 ? start : mid;
            const long long ce = side == 0 ? mid : stop;
            const int kind = ch.kind[side];
            const unsigned long long child_seed = split_child_seed(batch_seed[i], side);
            level_new_node(h, cs, ce, batch_tree[i], depth, child_seed, kind == 0 ? -1 : 0, g,
                           node_start, node_stop, node_tree, node_depth, node_seed, node_pos,
                           node_parent, node_left, node_right, node_feature, node_bin,
                           node_missing_left, node_gain);
            long long j = -1;
            if (side == ch.derived) {
                j = base[2] + slot[side];
                next_parent_hist[slot[side]] = e - n_small;
                next_sibling[slot[side]] = helper >= 0 ? -1 - helper : slot[1 - side];
            } else if (kind == 0) {
                j = slot[side];
                at[5] += 2 * (ce - cs) - 1;
                sub_offsets[slot[side] + 1] = at[5];
            } else if (kind == 1) {
                j = base[1] + slot[side];
            } else if (kind == 2) {
                j = base[3] + slot[side];
            }
            if (j >= 0)
                level_batch_entry(j, h, cs, ce, batch_tree[i], child_seed, depth,
                                  kind == 0 ? -1 : 0, next_front, next_ranges, next_tree,
                                  next_seed, next_depth, next_pos);
            if (helper >= 0 && side != ch.derived)
                level_batch_entry(base[4] + helper, h, cs, ce, batch_tree[i], child_seed, depth,
                                  0, (long long*)0, next_ranges, next_tree, next_seed,
                                  next_depth, next_pos);
        }
    }
}

// One thread per (derived node, histogram cell): the derived node's histogram is
// its parent's minus its sibling's (rows: n_derived derived, then n_direct
// direct, then the helpers; sibling >= 0 a direct row, else helper -1 - sibling).
extern "C" __global__ void tree_level_subtract(
    float* __restrict__ hist, long long n_derived, long long n_direct, long long cells,
    const float* __restrict__ parent_hist, const long long* __restrict__ parent_row,
    const long long* __restrict__ sibling)
{
    const long long total = n_derived * cells;
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (long long q = (long long)blockIdx.x * blockDim.x + threadIdx.x; q < total; q += stride) {
        const long long d = q / cells, cell = q - d * cells;
        const long long s = sibling[d];
        const long long row = n_derived + (s >= 0 ? s : n_direct + (-1 - s));
        hist[q] = __fsub_rn(parent_hist[parent_row[d] * cells + cell], hist[row * cells + cell]);
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

// One thread per node g of a best-first table: the first position of every
// leaf (node_state[g] == 1, the last replay's leaves).
extern "C" __global__ void tree_level_leaf_marks_state(
    long long n_nodes, const unsigned char* __restrict__ node_state,
    const long long* __restrict__ node_start, int* __restrict__ mark)
{
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (long long g = (long long)blockIdx.x * blockDim.x + threadIdx.x; g < n_nodes; g += stride)
        if (node_state[g] == 1) mark[node_start[g]] = 1;
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
// trees' root ranges: root_start[t] .. root_stop[t]) goes to every sample of the
// leaf, and its weight, the float64 sum of the samples' weights in position order,
// to out_leaf_weight[cum[q] - 1].
extern "C" __global__ void tree_level_place(
    long long total, const int* __restrict__ mark, const long long* __restrict__ cum,
    const int* __restrict__ sample_indices, const long long* __restrict__ root_start,
    const long long* __restrict__ root_stop, int n_trees, long long n,
    const float* __restrict__ weights,
    int* __restrict__ out_leaf_of_sample, double* __restrict__ out_leaf_weight)
{
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (long long q = (long long)blockIdx.x * blockDim.x + threadIdx.x; q < total; q += stride) {
        if (!mark[q]) continue;
        int lo = 0, hi = n_trees - 1;
        while (lo < hi) {  // the last tree whose range starts at or before q
            const int mid = (lo + hi + 1) / 2;
            if (root_start[mid] <= q) lo = mid; else hi = mid - 1;
        }
        const int t = lo;
        const long long tree_start = root_start[t], tree_stop = root_stop[t];
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
