// Purity and Q of a batch of tree nodes (contract: ``tree_node_stats`` in
// gpurpo/tree/kernels.py; CPU twin: gpurpo/tree/_numba/tree_node_stats.py).
//
// blocks_per_node blocks per node (tasks node * blocks_per_node + part, blocks
// looping over the tasks). The threads of a node's blocks stride over its
// samples: each compares its samples' targets with the node's first sample
// (bitwise equality, as the CPU) and sums w * ||y||^2 in float64; a barrier-OR
// gives the block's purity and a tree reduction its Q (the contract leaves Q's
// summation order free: it only scales the tie tolerance). With one block per
// node it writes the node's outputs; with more, each block writes its partial
// sums and counts itself in node_done (zero, and left at zero), and the node's
// last block adds the partials in block order, read through L2: a node of a
// million samples at the top of a tree is read by the whole device, not by one
// multiprocessor. The launcher's block size is a power of two, at most
// NODE_STATS_THREADS.

#include "node_stats.cuh"

extern "C" __global__ void tree_node_stats(
    const int* __restrict__ sample_indices,
    const long long* __restrict__ node_ranges,
    const int* __restrict__ node_tree,
    const float* __restrict__ weights,
    const float* __restrict__ targets,
    long long n,
    int n_trees,
    int m,
    long long n_nodes,
    int blocks_per_node,
    double* partial_q,
    int* partial_differs,
    unsigned int* __restrict__ node_done,
    unsigned char* __restrict__ out_impure,
    double* __restrict__ out_q)
{
    node_stats_tasks(sample_indices, node_ranges, node_tree, weights, targets, n, n_trees, m,
                     n_nodes, blocks_per_node, partial_q, partial_differs, node_done,
                     out_impure, out_q);
}
