// Fused kernels of a boosting round (contracts and CPU twins:
// gpurpo/ensemble/boosting/round_kernels.py). Each replaces several passes of
// array operations over the (n, d) score matrix by one:
//   * boost_squared_gradient_row_loss  the squared error's negative gradient and
//                                      the mean loss of every row;
//   * boost_least_squares_partials and boost_least_squares_finish  the
//                                      least-squares step of every output from the
//                                      tree's leaves (no (n, d) matrix of tree
//                                      predictions);
//   * boost_add_leaf_values            the scores' update by the scaled leaf values;
//   * boost_leaf_partials_* and boost_leaf_means  the tree's leaf values, the
//                                      weighted means of the labelling targets.
// Every product and sum is rounded separately (__dmul_rn/__dadd_rn: no fused
// multiply-add), and every sum is taken in the order the contract fixes, so the
// CPU twins give the same bits.

#include "block_order_sums.cuh"

#define BOOST_WARP 32

// One warp per row, rows dealt to the warps of the grid: lane l sums the
// entries j = l, l + 32, ... in order, then the lanes' sums combine by
// shuffles down (offsets 16, 8, 4, 2, 1) into lane 0.
extern "C" __global__ void boost_squared_gradient_row_loss(
    const double* __restrict__ Y, const double* __restrict__ F, float* __restrict__ grad,
    double* __restrict__ loss, long long n, long long d)
{
    const int lane = threadIdx.x & (BOOST_WARP - 1);
    const long long warps = ((long long)gridDim.x * blockDim.x) / BOOST_WARP;
    for (long long i = ((long long)blockIdx.x * blockDim.x + threadIdx.x) / BOOST_WARP; i < n;
         i += warps) {
        const long long row = i * d;
        double acc = 0.0;
        for (long long j = lane; j < d; j += BOOST_WARP) {
            const double r = __dadd_rn(Y[row + j], -F[row + j]);
            grad[row + j] = (float)r;
            acc = __dadd_rn(acc, __dmul_rn(0.5, __dmul_rn(r, r)));
        }
        for (int offset = BOOST_WARP / 2; offset > 0; offset /= 2)
            acc = __dadd_rn(acc, __shfl_down_sync(0xFFFFFFFFu, acc, offset));
        if (lane == 0) loss[i] = __ddiv_rn(acc, (double)d);
    }
}

// Block (b, c): rows b * rows_per_block ... of columns c * blockDim.x + threadIdx.x,
// one column per thread, its rows summed in order into num_part[b, j] and
// den_part[b, j]. The tree predicts h = values[leaf[i], j] (values_cols == d) or
// values[leaf[i], 0] (values_cols == 1).
extern "C" __global__ void boost_least_squares_partials(
    const double* __restrict__ Y, const double* __restrict__ F,
    const double* __restrict__ values, long long values_cols, const int* __restrict__ leaf,
    const double* __restrict__ w, long long n, long long d, long long rows_per_block,
    double* __restrict__ num_part, double* __restrict__ den_part)
{
    const long long j = (long long)blockIdx.y * blockDim.x + threadIdx.x;
    if (j >= d) return;
    const long long b = blockIdx.x;
    const long long first = b * rows_per_block;
    const long long last = first + rows_per_block < n ? first + rows_per_block : n;
    const long long col = values_cols == 1 ? 0 : j;
    double num = 0.0, den = 0.0;
    for (long long i = first; i < last; ++i) {
        const double h = values[(long long)leaf[i] * values_cols + col];
        const double wh = __dmul_rn(w[i], h);
        num = __dadd_rn(num, __dmul_rn(wh, __dadd_rn(Y[i * d + j], -F[i * d + j])));
        den = __dadd_rn(den, __dmul_rn(wh, h));
    }
    num_part[b * d + j] = num;
    den_part[b * d + j] = den;
}

// One thread per column: the row blocks' sums added in block order, the step
// num / den (0 where den is not positive) and the scale learning_rate * step.
extern "C" __global__ void boost_least_squares_finish(
    const double* __restrict__ num_part, const double* __restrict__ den_part,
    long long n_blocks, long long d, double learning_rate, double* __restrict__ rho,
    double* __restrict__ scale)
{
    for (long long j = (long long)blockIdx.x * blockDim.x + threadIdx.x; j < d;
         j += (long long)gridDim.x * blockDim.x) {
        double num, den;
        block_order_sums(num_part, den_part, n_blocks, d, j, &num, &den);
        const double step = den > 0.0 ? __ddiv_rn(num, den) : 0.0;
        rho[j] = step;
        scale[j] = __dmul_rn(learning_rate, step);
    }
}

// One thread per entry (grid-stride): F[i, j] += values[leaf[i], j or 0] * scale[j].
extern "C" __global__ void boost_add_leaf_values(
    double* __restrict__ F, const double* __restrict__ values, long long values_cols,
    const int* __restrict__ leaf, const double* __restrict__ scale, long long n, long long d)
{
    const long long total = n * d;
    for (long long e = (long long)blockIdx.x * blockDim.x + threadIdx.x; e < total;
         e += (long long)gridDim.x * blockDim.x) {
        const long long i = e / d;
        const long long j = e - i * d;
        const double h = values[(long long)leaf[i] * values_cols + (values_cols == 1 ? 0 : j)];
        F[e] = __dadd_rn(F[e], __dmul_rn(h, scale[j]));
    }
}

// Block (b, c): rows b * rows_per_block ... of columns c * blockDim.x + threadIdx.x,
// one column per thread. Each thread clears its own cells of block b's partial
// sums, then adds its rows' weighted labels in row order into the cell of each
// row's leaf (rows of leaf < 0 are out of the tree); thread 0 of column tile 0
// does the same for the leaves' weights. No cell is written by two threads.
template <typename T>
__device__ void leaf_partials(const int* __restrict__ leaf, const double* __restrict__ w,
                              const T* __restrict__ labels, long long n, long long k,
                              long long n_leaves, long long rows_per_block,
                              double* __restrict__ sum_part, double* __restrict__ weight_part)
{
    const long long b = blockIdx.x;
    const long long first = b * rows_per_block;
    const long long last = first + rows_per_block < n ? first + rows_per_block : n;
    if (blockIdx.y == 0 && threadIdx.x == 0) {
        double* weight = weight_part + b * n_leaves;
        for (long long l = 0; l < n_leaves; ++l) weight[l] = 0.0;
        for (long long i = first; i < last; ++i)
            if (leaf[i] >= 0) weight[leaf[i]] = __dadd_rn(weight[leaf[i]], w[i]);
    }
    const long long j = (long long)blockIdx.y * blockDim.x + threadIdx.x;
    if (j >= k) return;
    double* sums = sum_part + b * n_leaves * k;
    for (long long l = 0; l < n_leaves; ++l) sums[l * k + j] = 0.0;
    for (long long i = first; i < last; ++i) {
        const long long l = leaf[i];
        if (l < 0) continue;
        sums[l * k + j] = __dadd_rn(sums[l * k + j], __dmul_rn(w[i], (double)labels[i * k + j]));
    }
}

extern "C" __global__ void boost_leaf_partials_f32(
    const int* __restrict__ leaf, const double* __restrict__ w, const float* __restrict__ labels,
    long long n, long long k, long long n_leaves, long long rows_per_block,
    double* __restrict__ sum_part, double* __restrict__ weight_part)
{
    leaf_partials<float>(leaf, w, labels, n, k, n_leaves, rows_per_block, sum_part,
                         weight_part);
}

extern "C" __global__ void boost_leaf_partials_f64(
    const int* __restrict__ leaf, const double* __restrict__ w, const double* __restrict__ labels,
    long long n, long long k, long long n_leaves, long long rows_per_block,
    double* __restrict__ sum_part, double* __restrict__ weight_part)
{
    leaf_partials<double>(leaf, w, labels, n, k, n_leaves, rows_per_block, sum_part,
                          weight_part);
}

// One thread per (leaf, column) cell: the row blocks' sums and weights added in
// block order, then values = sum * (1 / weight) (1 / 1 for a leaf without weight).
extern "C" __global__ void boost_leaf_means(
    const double* __restrict__ sum_part, const double* __restrict__ weight_part,
    long long n_blocks, long long k, long long n_leaves, double* __restrict__ values)
{
    const long long cells = n_leaves * k;
    for (long long e = (long long)blockIdx.x * blockDim.x + threadIdx.x; e < cells;
         e += (long long)gridDim.x * blockDim.x) {
        const long long l = e / k;
        double sum = 0.0, weight = 0.0;
        for (long long b = 0; b < n_blocks; ++b) {
            sum = __dadd_rn(sum, sum_part[b * cells + e]);
            weight = __dadd_rn(weight, weight_part[b * n_leaves + l]);
        }
        values[e] = __dmul_rn(sum, __ddiv_rn(1.0, weight > 0.0 ? weight : 1.0));
    }
}
