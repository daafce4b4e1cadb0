// One round of device-resident best-first growth (contract: tree_best_first_select
// in gpurpo/tree/level_kernels.py; CPU twin in gpurpo/tree/_numba/tree_best_first.py;
// the driver is gpurpo/tree/device_best_first.py).
//
// Best-first growth splits, tree by tree, the leaf of largest gain until the tree
// has max_leaves leaves. The device driver grows in rounds: every round this
// kernel records the choices of the nodes evaluated last, then REPLAYS best-first
// growth on what is known of each tree (the nodes split so far and the evaluated
// leaves), and batches for splitting every leaf that the replay expands. The
// children of a node split this round are not known yet: the replay goes on as
// if they were leaves, so a round may split nodes that a later replay, knowing
// more, does not expand (they end up as leaves). When a replay expands no new
// node, it is best-first growth on complete information, and its marks
// (node_state) are the tree. So is a replay whose every batched node is the last
// split of its tree (its expansion brings the tree to max_leaves leaves): the
// children that the round creates stay leaves whatever their evaluation, and the
// kernel counts in pending[0] the batched rows that are not such a split.
//
// The round's batch has a row per evaluation slot: rows 0 .. S - 1 for nodes
// evaluated by tree_split_small (slot -2 - row in node_slot), rows S + s for
// those evaluated from histograms (slot s), so that the children kernel finds a
// derived child's parent histogram at the parent's slot. Rows without a node
// name the dummy node and have feature -1.

#include "tree_choice.cuh"

#define BEST_FIRST_NEG_INF __longlong_as_double((long long)0xFFF0000000000000ULL)

// Whether heap entry a pops before b: the larger gain, then the earlier push.
__device__ __forceinline__ bool best_first_before(double gain_a, long long order_a,
                                                  double gain_b, long long order_b)
{
    return gain_a > gain_b || (gain_a == gain_b && order_a < order_b);
}

__device__ long long best_first_push(double* heap_gain, long long* heap_order,
                                     long long* heap_node, long long size, double gain,
                                     long long order, long long node)
{
    long long at = size;
    while (at > 0) {
        const long long up = (at - 1) / 2;
        if (!best_first_before(gain, order, heap_gain[up], heap_order[up])) break;
        heap_gain[at] = heap_gain[up];
        heap_order[at] = heap_order[up];
        heap_node[at] = heap_node[up];
        at = up;
    }
    heap_gain[at] = gain;
    heap_order[at] = order;
    heap_node[at] = node;
    return size + 1;
}

// The first node of a heap of size > 0 entries, removed (the new size is size - 1).
__device__ long long best_first_pop(double* heap_gain, long long* heap_order,
                                    long long* heap_node, long long size)
{
    const long long top = heap_node[0];
    size -= 1;
    const double gain = heap_gain[size];
    const long long order = heap_order[size];
    const long long node = heap_node[size];
    long long at = 0;
    while (true) {
        long long child = 2 * at + 1;
        if (child >= size) break;
        if (child + 1 < size && best_first_before(heap_gain[child + 1], heap_order[child + 1],
                                                  heap_gain[child], heap_order[child]))
            child += 1;
        if (!best_first_before(heap_gain[child], heap_order[child], gain, order)) break;
        heap_gain[at] = heap_gain[child];
        heap_order[at] = heap_order[child];
        heap_node[at] = heap_node[child];
        at = child;
    }
    heap_gain[at] = gain;
    heap_order[at] = order;
    heap_node[at] = node;
    return top;
}

struct BestFirstRound {
    const long long* node_start;
    const long long* node_stop;
    const int* node_tree;
    const int* node_depth;
    const unsigned long long* node_seed;
    const long long* node_slot;
    long long n_small_rows;
    long long* out_front;
    long long* out_ranges;
    int* out_tree;
    int* out_depth;
    unsigned long long* out_seed;
    int* out_small_feature;
    int* out_small_bin;
    unsigned char* out_small_missing_left;
    double* out_small_gain;
    double* out_large;
};

// Node g's row of the round's batch: its choice and launch fields.
__device__ void best_first_write_row(const BestFirstRound& b, long long g, int feature,
                                     int bin, int missing_left, double gain)
{
    const long long slot = b.node_slot[g];
    long long row;
    if (slot <= -2) {
        row = -2 - slot;
        b.out_small_feature[row] = feature;
        b.out_small_bin[row] = bin;
        b.out_small_missing_left[row] = (unsigned char)missing_left;
        b.out_small_gain[row] = gain;
    } else {
        row = b.n_small_rows + slot;
        b.out_large[4 * slot] = (double)feature;
        b.out_large[4 * slot + 1] = (double)bin;
        b.out_large[4 * slot + 2] = (double)missing_left;
        b.out_large[4 * slot + 3] = gain;
    }
    b.out_front[row] = g;
    b.out_ranges[2 * row] = b.node_start[g];
    b.out_ranges[2 * row + 1] = b.node_stop[g];
    b.out_tree[row] = b.node_tree[g];
    b.out_depth[row] = b.node_depth[g];
    b.out_seed[row] = b.node_seed[g];
}

// One block. Phases: (1) the batch rows cleared; (2) the choices of the nodes
// evaluated last (eval_front: the first n_small by tree_split_small, then rows
// of ``large``) into the table with min_impurity_decrease applied, each node's
// evaluation slot into node_slot, and nodes whose candidates were all constant
// (feature -2: they continue) batched as they are; (3) node_state cleared; (4)
// one thread per tree replays best-first growth with a heap in its row of the
// heap_* scratch, marking node_state 1 (a leaf) or 2 (expanded) and batching
// every expanded node that is not split yet. pending[0]: the rows batched with
// feature -2 and the expanded nodes batched while their tree had fewer than
// max_leaves leaves after them.
extern "C" __global__ void tree_best_first_select(
    const long long* __restrict__ eval_front, long long n_eval, long long n_small,
    const int* __restrict__ small_feature, const int* __restrict__ small_bin,
    const unsigned char* __restrict__ small_missing_left, const double* __restrict__ small_gain,
    const double* __restrict__ large, const double* __restrict__ root_weight, int n_scored,
    double min_impurity_decrease, long long base_small, long long base_large,
    long long n_nodes, long long max_leaves, long long dummy,
    const long long* __restrict__ node_start, const long long* __restrict__ node_stop,
    const int* __restrict__ node_tree, const int* __restrict__ node_depth,
    const unsigned long long* __restrict__ node_seed,
    const long long* __restrict__ node_left, const long long* __restrict__ node_right,
    int* __restrict__ node_feature, int* __restrict__ node_bin,
    unsigned char* __restrict__ node_missing_left, double* __restrict__ node_gain,
    long long* node_slot, unsigned char* __restrict__ node_state,
    long long n_trees, long long heap_width, double* __restrict__ heap_gain,
    long long* __restrict__ heap_order, long long* __restrict__ heap_node,
    long long n_rows, long long* __restrict__ out_front, long long* __restrict__ out_ranges,
    int* __restrict__ out_tree, int* __restrict__ out_depth,
    unsigned long long* __restrict__ out_seed, long long n_small_rows,
    int* __restrict__ out_small_feature, int* __restrict__ out_small_bin,
    unsigned char* __restrict__ out_small_missing_left, double* __restrict__ out_small_gain,
    double* __restrict__ out_large, long long* __restrict__ pending)
{
    const BestFirstRound b = {node_start, node_stop, node_tree, node_depth, node_seed,
                              node_slot, n_small_rows, out_front, out_ranges, out_tree,
                              out_depth, out_seed, out_small_feature, out_small_bin,
                              out_small_missing_left, out_small_gain, out_large};
    for (long long row = threadIdx.x; row < n_rows; row += blockDim.x) {
        out_front[row] = dummy;
        out_ranges[2 * row] = 0;
        out_ranges[2 * row + 1] = 0;
        out_tree[row] = 0;
        out_depth[row] = 0;
        out_seed[row] = 0ULL;
        if (row < n_small_rows) {
            out_small_feature[row] = -1;
            out_small_bin[row] = 0;
            out_small_missing_left[row] = 0;
            out_small_gain[row] = BEST_FIRST_NEG_INF;
        } else {
            const long long r = row - n_small_rows;
            out_large[4 * r] = -1.0;
            out_large[4 * r + 1] = 0.0;
            out_large[4 * r + 2] = 0.0;
            out_large[4 * r + 3] = BEST_FIRST_NEG_INF;
        }
    }
    if (threadIdx.x == 0) pending[0] = 0;
    __syncthreads();
    for (long long e = threadIdx.x; e < n_eval; e += blockDim.x) {
        const long long g = eval_front[e];
        int f, bin, ml;
        double gain;
        tree_evaluated_choice(e, n_small, small_feature, small_bin, small_missing_left,
                              small_gain, large, &f, &bin, &ml, &gain);
        node_slot[g] = e < n_small ? -2 - (base_small + e) : base_large + e - n_small;
        if (f == -2) {
            node_feature[g] = -2;
            best_first_write_row(b, g, -2, 0, 0, BEST_FIRST_NEG_INF);
            atomicAdd((unsigned long long*)pending, 1ULL);
            continue;
        }
        tree_keep_choice(&f, &bin, &ml, &gain, (double)n_scored * root_weight[node_tree[g]],
                         min_impurity_decrease);
        node_feature[g] = f;
        node_bin[g] = bin;
        node_missing_left[g] = (unsigned char)ml;
        node_gain[g] = gain;
    }
    for (long long g = threadIdx.x; g < n_nodes; g += blockDim.x) node_state[g] = 0;
    __syncthreads();
    for (long long t = threadIdx.x; t < n_trees; t += blockDim.x) {
        double* hg = heap_gain + t * heap_width;
        long long* ho = heap_order + t * heap_width;
        long long* hn = heap_node + t * heap_width;
        node_state[t] = 1;
        long long size = 0, pushed = 0, leaves = 1;
        unsigned long long short_of_max = 0ULL;
        if (node_feature[t] >= 0) size = best_first_push(hg, ho, hn, size, node_gain[t], pushed++, t);
        while (size > 0 && leaves < max_leaves) {
            const long long g = best_first_pop(hg, ho, hn, size);
            size -= 1;
            leaves += 1;
            node_state[g] = 2;
            if (node_left[g] >= 0) {
                for (int side = 0; side < 2; ++side) {
                    const long long c = side == 0 ? node_left[g] : node_right[g];
                    node_state[c] = 1;
                    if (node_feature[c] >= 0)
                        size = best_first_push(hg, ho, hn, size, node_gain[c], pushed++, c);
                }
            } else {
                best_first_write_row(b, g, node_feature[g], node_bin[g], node_missing_left[g],
                                     node_gain[g]);
                if (leaves < max_leaves) short_of_max += 1ULL;
            }
        }
        if (short_of_max) atomicAdd((unsigned long long*)pending, short_of_max);
    }
}
