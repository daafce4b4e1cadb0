// Fused kernels of the multi-label logistic loss (contracts and CPU twins:
// gpurpo/ensemble/boosting/logistic_kernels.py): one pass over the (n, d) scores
// where array expressions make about ten.
//   * boost_logistic_scores        the negative gradient and/or the mean loss of
//                                  every row, from one exponential per entry;
//   * boost_logistic_derivative_partials and boost_logistic_derivatives_finish
//                                  the first and second derivatives of every
//                                  output's objective along the tree's leaf values
//                                  (one evaluation of the step search);
//   * boost_logistic_leaf_partials and boost_logistic_leaf_finish
//                                  the gradient and curvature sums of every
//                                  (leaf, output): one Newton step per leaf;
//   * boost_logistic_search_step   one Newton iteration of the step search for
//                                  every output;
//   * boost_logistic_line and boost_logistic_leaf_exponentials  the search's
//                                  tables: exp(-F) and the labels' signs once, the
//                                  leaves' exp(-rho h) per evaluation.
// Products and sums are rounded separately (__dmul_rn/__dadd_rn/__ddiv_rn: no
// fused multiply-add) and summed in the twins' order.

#include "block_order_sums.cuh"

#define LOGISTIC_WARP 32

// e = exp(-|f|) and sigmoid(f) from it: 1 / (1 + e) for f >= 0, e / (1 + e) below.
__device__ __forceinline__ double logistic_sigmoid(double f, double* e_out)
{
    const double e = exp(-fabs(f));
    const double r = __ddiv_rn(1.0, __dadd_rn(1.0, e));
    *e_out = e;
    return f >= 0.0 ? r : __dmul_rn(e, r);
}

// One warp per row, rows dealt to the warps of the grid. grad[i, j] = [y > 0] -
// sigmoid(f) (when write_grad); loss[i] = the mean of log1p(e) + max(-y f, 0)
// over the row (when write_loss): lane l sums j = l, l + 32, ... in order, then
// the lanes combine by shuffles down (16, 8, 4, 2, 1) into lane 0.
extern "C" __global__ void boost_logistic_scores(
    const double* __restrict__ Y, const double* __restrict__ F, float* __restrict__ grad,
    double* __restrict__ loss, long long n, long long d, int write_grad, int write_loss)
{
    const int lane = threadIdx.x & (LOGISTIC_WARP - 1);
    const long long warps = ((long long)gridDim.x * blockDim.x) / LOGISTIC_WARP;
    for (long long i = ((long long)blockIdx.x * blockDim.x + threadIdx.x) / LOGISTIC_WARP;
         i < n; i += warps) {
        const long long row = i * d;
        double acc = 0.0;
        for (long long j = lane; j < d; j += LOGISTIC_WARP) {
            const double f = F[row + j];
            const double y = Y[row + j];
            double e;
            const double p = logistic_sigmoid(f, &e);
            if (write_grad) grad[row + j] = (float)__dadd_rn(y > 0.0 ? 1.0 : 0.0, -p);
            if (write_loss) {
                const double m = __dmul_rn(y, f);
                acc = __dadd_rn(acc, __dadd_rn(log1p(e), m < 0.0 ? -m : 0.0));
            }
        }
        if (!write_loss) continue;
        for (int offset = LOGISTIC_WARP / 2; offset > 0; offset /= 2)
            acc = __dadd_rn(acc, __shfl_down_sync(0xFFFFFFFFu, acc, offset));
        if (lane == 0) loss[i] = __ddiv_rn(acc, (double)d);
    }
}

// Block (b, c): rows b * rows_per_block ... of column j = c * blockDim.x +
// threadIdx.x, in order, rows of weight 0 skipped; p = 1 / (1 + E[i, j] T[leaf, j]),
// h = values[leaf, j] (values_cols == d) or values[leaf, 0]:
// part1[b, j] = sum (w h) (p - positive), part2[b, j] = sum (w h h) (p (1 - p)),
// with positive[i, j] = [y_ij > 0] (one byte).
// Columns with columns[j] == 0 get 0.
extern "C" __global__ void boost_logistic_derivative_partials(
    const unsigned char* __restrict__ positive, const double* __restrict__ E,
    const long long* __restrict__ leaf, const double* __restrict__ values,
    long long values_cols, const double* __restrict__ T, const double* __restrict__ w,
    const unsigned char* __restrict__ columns, long long n, long long d,
    long long rows_per_block, double* __restrict__ part1, double* __restrict__ part2)
{
    const long long j = (long long)blockIdx.y * blockDim.x + threadIdx.x;
    if (j >= d) return;
    const long long b = blockIdx.x;
    double p1 = 0.0, p2 = 0.0;
    if (columns[j]) {
        const long long first = b * rows_per_block;
        const long long last = first + rows_per_block < n ? first + rows_per_block : n;
        const long long col = values_cols == 1 ? 0 : j;
        for (long long i = first; i < last; ++i) {
            const double wi = w[i];
            if (wi == 0.0) continue;
            const long long lf = leaf[i];
            const double h = values[lf * values_cols + col];
            const double p = __ddiv_rn(1.0, __dadd_rn(1.0, __dmul_rn(E[i * d + j], T[lf * d + j])));
            const double t = positive[i * d + j] ? 1.0 : 0.0;
            const double wh = __dmul_rn(wi, h);
            p1 = __dadd_rn(p1, __dmul_rn(wh, __dadd_rn(p, -t)));
            p2 = __dadd_rn(p2, __dmul_rn(__dmul_rn(wh, h), __dmul_rn(p, __dadd_rn(1.0, -p))));
        }
    }
    part1[b * d + j] = p1;
    part2[b * d + j] = p2;
}

// One thread per column: first[j] and second[j], the row blocks' sums added in
// block order to 0, for the columns with columns[j] != 0 (0 for the others).
extern "C" __global__ void boost_logistic_derivatives_finish(
    const double* __restrict__ part1, const double* __restrict__ part2, long long n_blocks,
    long long d, const unsigned char* __restrict__ columns, double* __restrict__ first,
    double* __restrict__ second)
{
    for (long long j = (long long)blockIdx.x * blockDim.x + threadIdx.x; j < d;
         j += (long long)gridDim.x * blockDim.x) {
        if (!columns[j]) {
            first[j] = 0.0;
            second[j] = 0.0;
            continue;
        }
        block_order_sums(part1, part2, n_blocks, d, j, &first[j], &second[j]);
    }
}

// Block (b, c): rows b * rows_per_block ... of column j = c * blockDim.x +
// threadIdx.x, in order, rows of weight 0 skipped; with p = sigmoid(F[i, j]) and
// t = [y_ij > 0]: grad_part[b, leaf_i, j] += w_i (t - p) and
// curv_part[b, leaf_i, j] += w_i (p (1 - p)). Each thread first clears its cells of
// block b; no cell is written by two threads.
extern "C" __global__ void boost_logistic_leaf_partials(
    const double* __restrict__ Y, const double* __restrict__ F,
    const long long* __restrict__ leaf, const double* __restrict__ w, long long n, long long d,
    long long n_leaves, long long rows_per_block, double* __restrict__ grad_part,
    double* __restrict__ curv_part)
{
    const long long j = (long long)blockIdx.y * blockDim.x + threadIdx.x;
    if (j >= d) return;
    const long long b = blockIdx.x;
    double* grad = grad_part + b * n_leaves * d;
    double* curv = curv_part + b * n_leaves * d;
    for (long long l = 0; l < n_leaves; ++l) {
        grad[l * d + j] = 0.0;
        curv[l * d + j] = 0.0;
    }
    const long long first = b * rows_per_block;
    const long long last = first + rows_per_block < n ? first + rows_per_block : n;
    for (long long i = first; i < last; ++i) {
        const double wi = w[i];
        if (wi == 0.0) continue;
        const long long at = leaf[i] * d + j;
        double e;
        const double p = logistic_sigmoid(F[i * d + j], &e);
        const double t = Y[i * d + j] > 0.0 ? 1.0 : 0.0;
        grad[at] = __dadd_rn(grad[at], __dmul_rn(wi, __dadd_rn(t, -p)));
        curv[at] = __dadd_rn(curv[at], __dmul_rn(wi, __dmul_rn(p, __dadd_rn(1.0, -p))));
    }
}

// One thread per (leaf, column) cell: the row blocks' sums added in block order to 0.
extern "C" __global__ void boost_logistic_leaf_finish(
    const double* __restrict__ grad_part, const double* __restrict__ curv_part,
    long long n_blocks, long long cells, double* __restrict__ grad, double* __restrict__ curv)
{
    for (long long e = (long long)blockIdx.x * blockDim.x + threadIdx.x; e < cells;
         e += (long long)gridDim.x * blockDim.x) {
        block_order_sums(grad_part, curv_part, n_blocks, cells, e, &grad[e], &curv[e]);
    }
}

// One iteration of the safeguarded Newton search of the logistic step, for every
// output j at once (one block; the update of gpurpo/ensemble/boosting/step_sizes.py's
// logistic_search, operation for operation): the bracket [lo, hi] moves to rho on the
// side its derivative gives, a Newton step inside the bracket (up to margin_factor of
// its width, or beyond an edge whose derivative is unknown) is clipped to it, else the
// bracket is bisected; outputs still to do (todo) move, and stay to do while a score
// moves by more than tol. n_todo[0]: the outputs still to do.
#define LOGISTIC_SEARCH_THREADS 256

extern "C" __global__ void boost_logistic_search_step(
    double* __restrict__ rho, double* __restrict__ lo, double* __restrict__ hi,
    unsigned char* __restrict__ edge_open, unsigned char* __restrict__ todo,
    const double* __restrict__ edge, const double* __restrict__ direction,
    const double* __restrict__ hmax, const double* __restrict__ deriv,
    const double* __restrict__ curv, long long d, double margin_factor, double tol,
    long long* __restrict__ n_todo)
{
    __shared__ long long counts[LOGISTIC_SEARCH_THREADS];
    long long mine = 0;
    for (long long j = threadIdx.x; j < d; j += blockDim.x) {
        const double r = rho[j], g = deriv[j], c = curv[j], dir = direction[j];
        const bool at_edge = r == edge[j];
        const bool open = edge_open[j] && !at_edge;
        bool to_do = todo[j] && !(at_edge && __dmul_rn(g, dir) < 0.0);
        const double low = g < 0.0 ? r : lo[j];
        const double high = g > 0.0 ? r : hi[j];
        const double newton = __dadd_rn(r, -__ddiv_rn(g, c > 0.0 ? c : 1.0));
        const double margin = __dmul_rn(margin_factor, __dadd_rn(high, -low));
        const bool beyond = open && __dmul_rn(dir, __dadd_rn(newton, -edge[j])) > 0.0;
        const bool inside = c > 0.0 && ((newton >= __dadd_rn(low, -margin)
                                         && newton <= __dadd_rn(high, margin)) || beyond);
        double next = inside ? fmin(fmax(newton, low), high) : __dmul_rn(0.5, __dadd_rn(low, high));
        if (!(to_do && g != 0.0)) next = r;
        to_do = to_do && __dmul_rn(fabs(__dadd_rn(next, -r)), hmax[j]) > tol;
        rho[j] = next;
        lo[j] = low;
        hi[j] = high;
        edge_open[j] = open ? 1 : 0;
        todo[j] = to_do ? 1 : 0;
        mine += to_do ? 1 : 0;
    }
    counts[threadIdx.x] = mine;
    __syncthreads();
    if (threadIdx.x == 0) {
        long long total = 0;
        for (int t = 0; t < (int)blockDim.x; ++t) total += counts[t];
        n_todo[0] = total;
    }
}

// exp(-clip(x, -clamp, clamp)), NaN kept.
__device__ __forceinline__ double logistic_clamped_exp(double x, double clamp)
{
    const double c = x < -clamp ? -clamp : (x > clamp ? clamp : x);
    return exp(-c);
}

// One thread per entry (grid-stride) of the (n, d) scores: E = exp(-clip(F)) and
// positive = [y > 0], the line's tables of the step search.
extern "C" __global__ void boost_logistic_line(
    const double* __restrict__ Y, const double* __restrict__ F,
    unsigned char* __restrict__ positive, double* __restrict__ E, long long total,
    double clamp)
{
    for (long long e = (long long)blockIdx.x * blockDim.x + threadIdx.x; e < total;
         e += (long long)gridDim.x * blockDim.x) {
        positive[e] = Y[e] > 0.0 ? 1 : 0;
        E[e] = logistic_clamped_exp(F[e], clamp);
    }
}

// One thread per (leaf, output) cell (grid-stride): T[l, j] = exp(-clip(rho[j] *
// values[l, j or 0])), the leaves' factors exp(-rho h) of one evaluation.
extern "C" __global__ void boost_logistic_leaf_exponentials(
    const double* __restrict__ rho, const double* __restrict__ values, long long values_cols,
    double* __restrict__ T, long long n_leaves, long long d, double clamp)
{
    const long long cells = n_leaves * d;
    for (long long e = (long long)blockIdx.x * blockDim.x + threadIdx.x; e < cells;
         e += (long long)gridDim.x * blockDim.x) {
        const long long l = e / d;
        const long long j = e - l * d;
        const double h = values[l * values_cols + (values_cols == 1 ? 0 : j)];
        T[e] = logistic_clamped_exp(__dmul_rn(rho[j], h), clamp);
    }
}
