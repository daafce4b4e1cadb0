"""Fused kernels of a boosting round: one pass over the (n, d) scores each.

After growing its tree, a boosting round labels the leaves (weighted means of
the labelling targets), and with the squared error computes the step of every
output (:func:`gpurpo.ensemble.boosting.step_sizes.least_squares_step`, on the
tree's predictions ``h_ij = values[leaf_i, j]``), updates the scores, then
takes the training loss and the next negative gradient. As array
operations that is some twenty passes over (n, d) temporaries, each a kernel
launch on a GPU (and the (n, d) matrix of predictions); these kernels make
one pass each and allocate nothing of that size. Every sum is taken in the
order the contract fixes, so the numba (CPU) and CUDA (``kernels/boost_round.cu``)
versions give the same bits.

Kernel contracts (registered with :func:`gpurpo.backend.register_kernel`)
--------------------------------------------------------------------------
``boost_squared_gradient_row_loss(Y, F, grad, loss)``
    Y, F float64 (n, d) C order; grad float32 (n, d): ``float32(y - f)``, the
    negative gradient of the half squared error; loss float64 (n,): the mean
    over the row of ``0.5 (y - f)^2``, summed in WARP order: lane ``l < 32``
    sums the entries ``j = l, l + 32, ...`` in order, and the lanes' sums combine
    as ``s[l] += s[l + o]`` for ``o = 16, 8, 4, 2, 1``; the result ``s[0] / d``.
``boost_least_squares_step(Y, F, values, leaf, w, learning_rate, rho, scale)``
    values float64 (L, k) C order, k = d or 1 (one column predicts every
    output); leaf int32 (n,) in [0, L); w float64 (n,); rho, scale float64 (d,)
    out. With ``h_ij = values[leaf_i, j]`` (k = d) or ``values[leaf_i, 0]``:
    ``num_j = sum_i (w_i h_ij) (y_ij - f_ij)`` and ``den_j = sum_i (w_i h_ij) h_ij``,
    each summed over the row blocks of ``row_blocks(n, d)`` (in order within a
    block, then the blocks' sums in block order); ``rho_j = num_j / den_j`` (0
    where ``den_j <= 0``) and ``scale_j = learning_rate * rho_j``.
``boost_add_leaf_values(F, values, leaf, scale)``
    F float64 (n, d) C order, updated in place:
    ``F[i, j] += values[leaf_i, j or 0] * scale[j]`` (the product rounded, then
    the sum).
``boost_leaf_label_means(leaf, w, labels, values)``
    leaf int32 (n,) in [-1, L) (-1: out of the tree); w float64 (n,); labels
    float32|float64 (n, k) C order; values float64 (L, k) out: ``values[l, j] =
    S_lj * (1 / W_l)`` with ``W_l = sum_{leaf_i = l} w_i`` (1 where it is not
    positive) and ``S_lj = sum_{leaf_i = l} w_i labels_ij``, each summed over
    the row blocks of ``row_blocks(n, L k)`` as above.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numba import njit, prange

from gpurpo.backend import (
    SERIAL_ELEMENTS,
    Backend,
    cpu_helper,
    launch_column_tiles,
    launch_grid_stride,
    register_kernel,
)

__all__ = ["PARTIAL_CELLS", "ROWS_PER_BLOCK", "add_leaf_values", "leaf_label_means",
           "least_squares_step_from_leaves", "row_blocks", "squared_gradient_and_row_loss",
           "warp_lanes_total"]

#: rows per partial sum of the least-squares step and the leaf values (the CUDA
#: version's grid rows), unless the partial sums would pass ``PARTIAL_CELLS``
ROWS_PER_BLOCK = 256
#: the most float64 partial sums a kernel keeps (32 MiB): fewer, longer row blocks past it
PARTIAL_CELLS = 1 << 22
#: lanes of the row sums of ``boost_squared_gradient_row_loss`` (a CUDA warp)
WARP_LANES = 32
#: rows per task of the CPU row kernels (their lanes allocated once per task)
CPU_ROW_CHUNK = 1024

_i64, _f64 = np.int64, np.float64


def row_blocks(n: int, cells_per_block: int) -> tuple[int, int]:
    """``(blocks, rows_per_block)`` of the partial sums over ``n`` rows: blocks of
    ``ROWS_PER_BLOCK`` rows, or as many equal blocks as ``PARTIAL_CELLS`` allows
    when each keeps ``cells_per_block`` sums. A function of the sizes only, so
    that every backend sums in the same order."""
    blocks = max(1, min(-(-n // ROWS_PER_BLOCK), PARTIAL_CELLS // max(1, cells_per_block)))
    rows = max(1, -(-n // blocks))
    return max(1, -(-n // rows)), rows


# --------------------------------------------------------------------------
# numba (CPU)
# --------------------------------------------------------------------------


@njit(inline="always", cache=True)
def warp_lanes_total(lanes):
    """The sum of 32 lanes' partial sums as a CUDA warp takes it with shuffles down:
    ``s[l] += s[l + o]`` for ``o = 16, 8, 4, 2, 1``, then ``s[0]`` (``lanes`` is
    overwritten)."""
    offset = WARP_LANES // 2
    while offset > 0:
        for lane in range(offset):
            lanes[lane] += lanes[lane + offset]
        offset //= 2
    return lanes[0]


@njit(parallel=True, cache=True)
def _squared_gradient_row_loss_cpu(Y, F, grad, loss):
    n, d = F.shape
    n_chunks = (n + CPU_ROW_CHUNK - 1) // CPU_ROW_CHUNK
    for c in prange(n_chunks):
        lanes = np.empty(WARP_LANES)
        for i in range(c * CPU_ROW_CHUNK, min(n, (c + 1) * CPU_ROW_CHUNK)):
            lanes[:] = 0.0
            for j in range(d):
                r = Y[i, j] - F[i, j]
                grad[i, j] = np.float32(r)
                lanes[j % WARP_LANES] += 0.5 * (r * r)
            loss[i] = warp_lanes_total(lanes) / d


@njit(parallel=True, cache=True)
def _least_squares_partials_cpu(Y, F, values, leaf, w, rows_per_block, num_part, den_part):
    n, d = F.shape
    per_output = values.shape[1] != 1
    for b in prange(num_part.shape[0]):
        first = b * rows_per_block
        last = min(n, first + rows_per_block)
        for i in range(first, last):
            row = values[leaf[i]]
            for j in range(d):
                h = row[j] if per_output else row[0]
                wh = w[i] * h
                num_part[b, j] += wh * (Y[i, j] - F[i, j])
                den_part[b, j] += wh * h


@njit(cache=True)
def _least_squares_finish_cpu(num_part, den_part, learning_rate, rho, scale):
    d = rho.shape[0]
    for j in range(d):
        num = 0.0
        den = 0.0
        for b in range(num_part.shape[0]):
            num += num_part[b, j]
            den += den_part[b, j]
        step = num / den if den > 0.0 else 0.0
        rho[j] = step
        scale[j] = learning_rate * step


def _least_squares_step_cpu(Y, F, values, leaf, w, learning_rate, rho, scale):
    n, d = F.shape
    blocks, rows = row_blocks(n, d)
    num_part = np.zeros((blocks, d))
    den_part = np.zeros((blocks, d))
    cpu_helper(_least_squares_partials_cpu, small=F.size < SERIAL_ELEMENTS)(
        Y, F, values, leaf, w, rows, num_part, den_part)
    _least_squares_finish_cpu(num_part, den_part, float(learning_rate), rho, scale)


@njit(parallel=True, cache=True)
def _leaf_partials_cpu(leaf, w, labels, rows_per_block, sum_part, weight_part):
    n, k = labels.shape
    for b in prange(sum_part.shape[0]):
        first = b * rows_per_block
        last = min(n, first + rows_per_block)
        for i in range(first, last):
            at = leaf[i]
            if at < 0:
                continue
            weight_part[b, at] += w[i]
            for j in range(k):
                sum_part[b, at, j] += w[i] * np.float64(labels[i, j])


@njit(cache=True)
def _leaf_means_cpu(sum_part, weight_part, values):
    n_leaves, k = values.shape
    for at in range(n_leaves):
        weight = 0.0
        for b in range(weight_part.shape[0]):
            weight += weight_part[b, at]
        inv = 1.0 / (weight if weight > 0.0 else 1.0)
        for j in range(k):
            total = 0.0
            for b in range(sum_part.shape[0]):
                total += sum_part[b, at, j]
            values[at, j] = total * inv


def _leaf_label_means_cpu(leaf, w, labels, values):
    n_leaves, k = values.shape
    blocks, rows = row_blocks(labels.shape[0], n_leaves * k)
    sum_part = np.zeros((blocks, n_leaves, k))
    weight_part = np.zeros((blocks, n_leaves))
    cpu_helper(_leaf_partials_cpu, small=labels.size < SERIAL_ELEMENTS)(
        leaf, w, labels, rows, sum_part, weight_part)
    _leaf_means_cpu(sum_part, weight_part, values)


@njit(parallel=True, cache=True)
def _add_leaf_values_cpu(F, values, leaf, scale):
    n, d = F.shape
    per_output = values.shape[1] != 1
    for i in prange(n):
        row = values[leaf[i]]
        for j in range(d):
            h = row[j] if per_output else row[0]
            F[i, j] += h * scale[j]


def _add_leaf_values_launch(F, values, leaf, scale):
    """:func:`_add_leaf_values_cpu`, on one thread for fewer than ``SERIAL_ELEMENTS``
    entries of ``F``."""
    cpu_helper(_add_leaf_values_cpu, small=F.size < SERIAL_ELEMENTS)(F, values, leaf, scale)


# --------------------------------------------------------------------------
# CUDA
# --------------------------------------------------------------------------


_SOURCE = "boost_round.cu"


def _squared_gradient_row_loss_cuda(backend: Backend, Y, F, grad, loss) -> None:
    n, d = (int(s) for s in F.shape)
    launch_grid_stride(backend, _SOURCE, "boost_squared_gradient_row_loss", n * WARP_LANES,
                       (Y, F, grad, loss, _i64(n), _i64(d)))


def _least_squares_step_cuda(backend: Backend, Y, F, values, leaf, w, learning_rate, rho,
                             scale) -> None:
    xp = backend.xp
    n, d = (int(s) for s in F.shape)
    if d == 0:
        return
    blocks, rows = row_blocks(n, d)
    num_part = xp.empty((blocks, d), dtype=xp.float64)
    den_part = xp.empty((blocks, d), dtype=xp.float64)
    launch_column_tiles(backend, _SOURCE, "boost_least_squares_partials", blocks, d,
                        (Y, F, values, _i64(values.shape[1]), leaf, w, _i64(n), _i64(d),
                         _i64(rows), num_part, den_part))
    launch_grid_stride(backend, _SOURCE, "boost_least_squares_finish", d,
                       (num_part, den_part, _i64(blocks), _i64(d), _f64(learning_rate), rho,
                        scale))


def _leaf_label_means_cuda(backend: Backend, leaf, w, labels, values) -> None:
    xp = backend.xp
    n, k = (int(s) for s in labels.shape)
    n_leaves = int(values.shape[0])
    if n_leaves * k == 0:
        return
    blocks, rows = row_blocks(n, n_leaves * k)
    sum_part = xp.empty((blocks, n_leaves, k), dtype=xp.float64)
    weight_part = xp.empty((blocks, n_leaves), dtype=xp.float64)
    suffix = "f32" if labels.dtype == xp.float32 else "f64"
    launch_column_tiles(backend, _SOURCE, f"boost_leaf_partials_{suffix}", blocks, k,
                        (leaf, w, labels, _i64(n), _i64(k), _i64(n_leaves), _i64(rows),
                         sum_part, weight_part))
    launch_grid_stride(backend, _SOURCE, "boost_leaf_means", n_leaves * k,
                       (sum_part, weight_part, _i64(blocks), _i64(k), _i64(n_leaves), values))


def _add_leaf_values_cuda(backend: Backend, F, values, leaf, scale) -> None:
    n, d = (int(s) for s in F.shape)
    launch_grid_stride(backend, _SOURCE, "boost_add_leaf_values", n * d,
                       (F, values, _i64(values.shape[1]), leaf, scale, _i64(n), _i64(d)))


register_kernel("boost_squared_gradient_row_loss", cpu=_squared_gradient_row_loss_cpu,
                cuda=_squared_gradient_row_loss_cuda)
register_kernel("boost_least_squares_step", cpu=_least_squares_step_cpu,
                cuda=_least_squares_step_cuda)
register_kernel("boost_add_leaf_values", cpu=_add_leaf_values_launch,
                cuda=_add_leaf_values_cuda)
register_kernel("boost_leaf_label_means", cpu=_leaf_label_means_cpu, cuda=_leaf_label_means_cuda)


# --------------------------------------------------------------------------
# callers
# --------------------------------------------------------------------------


def _c(xp: Any, a: Any, dtype: Any) -> Any:
    return xp.ascontiguousarray(a, dtype=dtype)


def _checked_leaves(xp: Any, values: Any, leaf: Any, n: int, d: int) -> tuple[Any, Any]:
    if values.ndim != 2 or values.shape[1] not in (1, d):
        raise ValueError(f"values must have shape (n_leaves, {d}) or (n_leaves, 1), "
                         f"got {values.shape}")
    if leaf.shape != (n,):
        raise ValueError(f"leaf must have shape ({n},), got {leaf.shape}")
    return _c(xp, values, xp.float64), _c(xp, leaf, xp.int32)


def squared_gradient_and_row_loss(backend: Backend, Y: Any, F: Any) -> tuple[Any, Any]:
    """The half squared error's negative gradient ``y - f`` (float32 (n, d)) and the
    mean loss ``0.5 (y - f)^2`` of every row (float64 (n,)), in one pass
    (``boost_squared_gradient_row_loss``)."""
    xp = backend.xp
    F = _c(xp, F, xp.float64)
    Y = _c(xp, Y, xp.float64)
    if Y.shape != F.shape:
        raise ValueError(f"Y and F must have the same shape, got {Y.shape} and {F.shape}")
    grad = xp.empty(F.shape, dtype=xp.float32)
    loss = xp.empty(F.shape[0], dtype=xp.float64)
    backend.kernel("boost_squared_gradient_row_loss")(Y, F, grad, loss)
    return grad, loss


def least_squares_step_from_leaves(backend: Backend, Y: Any, F: Any, values: Any, leaf: Any,
                                   w: Any, learning_rate: float) -> tuple[Any, Any]:
    """The least-squares step of every output for a tree's predictions
    ``h_ij = values[leaf_i, j]`` and its scale ``learning_rate * step``
    (``boost_least_squares_step``): float64 (d,) each.

    The step minimises ``sum_i w_i (y_ij - f_ij - rho_j h_ij)^2``
    (:func:`gpurpo.ensemble.boosting.step_sizes.least_squares_step`); rows of
    weight 0 (left out by subsampling) do not count.
    """
    xp = backend.xp
    n, d = (int(s) for s in F.shape)
    values, leaf = _checked_leaves(xp, values, leaf, n, d)
    rho = xp.empty(d, dtype=xp.float64)
    scale = xp.empty(d, dtype=xp.float64)
    backend.kernel("boost_least_squares_step")(
        _c(xp, Y, xp.float64), _c(xp, F, xp.float64), values, leaf, _c(xp, w, xp.float64),
        float(learning_rate), rho, scale)
    return rho, scale


def add_leaf_values(backend: Backend, F: Any, values: Any, leaf: Any, scale: Any) -> None:
    """``F += values[leaf] * scale`` in place, without the (n, d) matrix
    ``values[leaf]`` (``boost_add_leaf_values``); ``F`` must be C-contiguous float64."""
    xp = backend.xp
    n, d = (int(s) for s in F.shape)
    if F.dtype != xp.float64 or not F.flags.c_contiguous:
        raise ValueError("F must be a C-contiguous float64 array")
    values, leaf = _checked_leaves(xp, values, leaf, n, d)
    backend.kernel("boost_add_leaf_values")(F, values, leaf, _c(xp, scale, xp.float64))


def leaf_label_means(backend: Backend, leaf: Any, weights: Any, labels: Any,
                     n_leaves: int) -> Any:
    """The value of every leaf: the weighted mean of its rows' labelling targets,
    float64 (n_leaves, k), 0 for a leaf without weight (``boost_leaf_label_means``).

    The values of :func:`gpurpo.ensemble.boosting.iteration_trees.leaf_means` on
    :func:`~gpurpo.ensemble.boosting.iteration_trees.leaf_label_sums`, in two
    launches and in a fixed order of summation. Rows with ``leaf < 0`` (out of
    the tree) count nowhere.
    """
    xp = backend.xp
    if labels.ndim != 2 or labels.shape[0] != leaf.shape[0]:
        raise ValueError(f"labels must have shape ({leaf.shape[0]}, k), got {labels.shape}")
    if labels.dtype not in (xp.float32, xp.float64):
        labels = labels.astype(xp.float64)
    values = xp.empty((int(n_leaves), int(labels.shape[1])), dtype=xp.float64)
    backend.kernel("boost_leaf_label_means")(
        _c(xp, leaf, xp.int32), _c(xp, weights, xp.float64), xp.ascontiguousarray(labels),
        values)
    return values
