"""Fused kernels of the multi-label logistic loss.

With ``d`` labels every boosting iteration evaluates the logistic function on
the whole (n, d) score matrix several times: once for the gradient, once for
the training loss and two or three times per Newton iteration of the step
search (:func:`gpurpo.ensemble.boosting.step_sizes.logistic_step`). Written as array
expressions each evaluation makes about ten passes over (n, d) temporaries;
these kernels make one pass and allocate nothing of that size.

Kernel contracts (registered with :func:`gpurpo.backend.register_kernel`)
--------------------------------------------------------------------------
``boost_logistic_gradient(Y, F, out)``
    Y float64 (n, d) labels in {-1, 1}; F float64 (n, d) scores;
    out float32 (n, d): ``out = [y > 0] - sigmoid(F)``.
``boost_logistic_row_loss(Y, F, out)``
    out float64 (n,): ``out[i] = mean_j log(1 + exp(-y_ij F_ij))``, summed in
    warp order (lane ``j mod 32`` in order, then the lanes as
    :func:`~gpurpo.ensemble.boosting.round_kernels.warp_lanes_total`).
``boost_logistic_gradient_row_loss(Y, F, grad, loss)``
    Both of the above from one exponential per entry: grad float32 (n, d)
    as ``boost_logistic_gradient`` and loss float64 (n,) as
    ``boost_logistic_row_loss``, with ``e = exp(-|F|)``,
    ``sigmoid(F) = r`` or ``e r`` (``r = 1 / (1 + e)``, F >= 0 or < 0) and
    ``log(1 + exp(-y F)) = log1p(e) + max(-y F, 0)`` (y = +-1).
``boost_logistic_leaf_sums(Y, F, leaf, w, grad, curv)``
    leaf int64 (n,) in [0, L); w float64 (n,); grad, curv float64 (L, d) out.
    With ``p = sigmoid(F_ij)``: ``grad[l, j] = sum_{leaf_i = l} w_i ([y_ij > 0] - p)``
    and ``curv[l, j] = sum_{leaf_i = l} w_i (p (1 - p))``, the per-leaf gradient
    and curvature sums of one Newton step per (leaf, output), rows of weight 0
    left out. Summed in a fixed order, so that every backend gives the same
    sums run after run: each block of rows
    (:func:`~gpurpo.ensemble.boosting.round_kernels.row_blocks` of n and
    ``L d`` sums) in row order from 0, then the blocks in order from 0
    (``boost_logistic_leaf_partials`` and ``boost_logistic_leaf_finish``).
``boost_logistic_search_step(rho, lo, hi, edge_open, todo, edge, direction, hmax,``
``deriv, curv, margin_factor, tol, n_todo)``
    One iteration of the step search for every output ``j`` (float64 (d,)
    arrays; ``edge_open``, ``todo`` uint8 (d,); ``n_todo`` int64 (1,) out), the
    update of :func:`~gpurpo.ensemble.boosting.step_sizes.logistic_search`
    operation for operation: with ``g = deriv_j`` the bracket end on the side
    ``g`` gives moves to ``rho_j``; the Newton point ``rho_j - g / curv_j`` is
    taken (clipped to the bracket) when ``curv_j > 0`` and it lies in the
    bracket widened by ``margin_factor`` of its width or beyond an edge still
    open, else the bracket's middle; an output moves only while to do (and
    ``g != 0``), and stays to do while ``|step change| hmax_j > tol``. An output
    at its edge closes the edge, and stops when still descending there.
    ``n_todo[0]``: the outputs still to do.
``boost_logistic_line(Y, F, positive, E, clamp)``
    Y, F float64 (n, d); positive uint8 (n, d) out: ``[y > 0]``; E float64
    (n, d) out: ``exp(-clip(F, -clamp, clamp))`` (NaN kept).
``boost_logistic_leaf_exponentials(rho, values, T, clamp)``
    rho float64 (d,); values float64 (L, k), k = d or 1; T float64 (L, d) out:
    ``exp(-clip(rho_j values[l, j or 0], -clamp, clamp))``.
``boost_logistic_derivatives(positive, E, leaf, values, T, w, columns, first, second)``
    positive uint8 (n, d): ``[y_ij > 0]``. The tree prediction of sample i for
    output j is ``h_ij = values[leaf_i, j]``
    (``values[leaf_i, 0]`` when values has one column). E float64 (n, d) is
    ``exp(-F)`` (computed once per step search); leaf int64 (n,); values
    float64 (L, k), k = d or 1; T float64 (L, d) is ``exp(-clip(rho_j
    h_lj, -350, 350))`` for the current step ``rho`` (L x d exponentials per
    evaluation instead of n x d); w float64 (n,); columns uint8 (d,):
    outputs with 0 are skipped (their sums are 0); first, second float64
    (d,) out. With ``p = 1 / (1 + E_ij T_{leaf_i j})``
    ``= sigmoid(F_ij + rho_j h_ij)``:
    ``first_j = sum_i (w_i h_ij) (p - positive_ij)`` and
    ``second_j = sum_i (w_i h_ij h_ij) (p (1 - p))``, over the rows of
    positive weight in blocks of 512 (in order within a block, then the
    blocks' sums in block order): the first and second
    derivatives in ``rho_j`` of ``sum_i w_i log(1 + exp(-y_ij (F_ij + rho_j h_ij)))``.
    ``E = exp(-clip(F, -350, 350))``: products ``E T`` stay finite, and the
    clamp changes ``p`` by less than ``exp(-340)`` while the step moves no
    score by more than 10 logits.

The CPU versions are numba loops (rows dealt to threads). The CUDA versions
(``kernels/boost_logistic.cu``: a warp per row for the gradient and the row
losses, a thread per output and row block for the derivatives) sum in the
same order, so they differ from the CPU's at most by the last bits of the
exponentials and logarithms of the device's math library, and not at all in
the derivatives; the per-leaf sums are ``xp`` array expressions on CUDA
backends. Tests hold every version against the others and against plain
NumPy references.

:class:`LogisticLine` is also the per-worker line of distributed boosting
(:mod:`gpurpo.dask`), whose derivatives the client sums over the workers.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from numba import njit, prange

from gpurpo.backend import (
    SERIAL_ELEMENTS,
    Backend,
    cpu_helper,
    launch_block,
    launch_column_tiles,
    launch_grid_stride,
    register_kernel,
)
from gpurpo.ensemble.boosting.round_kernels import (
    CPU_ROW_CHUNK,
    WARP_LANES,
    row_blocks,
    warp_lanes_total,
)

__all__ = [
    "LogisticLine",
    "logistic_search_step",
    "logistic_gradient",
    "logistic_gradient_and_row_loss",
    "logistic_leaf_sums",
    "logistic_row_loss",
    "logistic_derivatives",
    "sigmoid",
]

# Rows per block of the derivative kernel (one partial-sum row per block).
_ROW_BLOCK = 512
# Threads of the search kernel's one block (LOGISTIC_SEARCH_THREADS of the source).
_SEARCH_THREADS = 256
# exp(-F) and exp(-rho h) are clamped to exp(+-350): their product never overflows.
_EXP_CLAMP = 350.0


def sigmoid(xp: Any, S: Any) -> Any:
    """Logistic function ``1 / (1 + exp(-S))``, without overflow and accurate in both tails."""
    e = xp.exp(-xp.abs(S))
    r = 1.0 / (1.0 + e)
    return xp.where(S >= 0, r, e * r)


# --------------------------------------------------------------------------
# numba (CPU)
# --------------------------------------------------------------------------


@njit(inline="always", cache=True)
def _exp_and_sigmoid(f: float) -> tuple[float, float]:
    """``e = exp(-|f|)`` and ``sigmoid(f)`` from it, as the ``xp`` :func:`sigmoid`."""
    e = math.exp(-abs(f))
    r = 1.0 / (1.0 + e)
    return e, (r if f >= 0.0 else e * r)


@njit(inline="always", cache=True)
def _loss_term(y: float, f: float, e: float) -> float:
    """``log(1 + exp(-y f))`` for ``y = +-1`` and ``e = exp(-|f|)``."""
    m = y * f
    return math.log1p(e) + (-m if m < 0.0 else 0.0)


@njit(parallel=True, cache=True)
def _scores_cpu(Y, F, grad, loss, write_grad, write_loss):
    """The gradient (``write_grad``) and the row losses (``write_loss``, in warp
    order) from one exponential per entry, as ``boost_logistic_scores``."""
    n, d = F.shape
    n_chunks = (n + CPU_ROW_CHUNK - 1) // CPU_ROW_CHUNK
    for c in prange(n_chunks):
        lanes = np.empty(WARP_LANES)
        for i in range(c * CPU_ROW_CHUNK, min(n, (c + 1) * CPU_ROW_CHUNK)):
            if write_loss:
                lanes[:] = 0.0
            for j in range(d):
                f = F[i, j]
                e, p = _exp_and_sigmoid(f)
                if write_grad:
                    grad[i, j] = np.float32((1.0 if Y[i, j] > 0 else 0.0) - p)
                if write_loss:
                    lanes[j % WARP_LANES] += _loss_term(Y[i, j], f, e)
            if write_loss:
                loss[i] = warp_lanes_total(lanes) / d


def _gradient_cpu(Y, F, out):
    cpu_helper(_scores_cpu, small=F.size < SERIAL_ELEMENTS)(Y, F, out, np.empty(1), True,
                                                            False)


def _row_loss_cpu(Y, F, out):
    cpu_helper(_scores_cpu, small=F.size < SERIAL_ELEMENTS)(
        Y, F, np.empty((1, 1), dtype=np.float32), out, False, True)


def _gradient_row_loss_cpu(Y, F, grad, loss):
    cpu_helper(_scores_cpu, small=F.size < SERIAL_ELEMENTS)(Y, F, grad, loss, True, True)


@njit(parallel=True, cache=True)
def _leaf_partials_cpu(Y, F, leaf, w, rows_per_block, grad_part, curv_part):
    """Each row block's gradient and curvature sums per (leaf, output), its rows in order
    (``boost_logistic_leaf_partials``); the parts zeroed by the caller."""
    n, d = F.shape
    for b in prange(grad_part.shape[0]):
        for i in range(b * rows_per_block, min(n, (b + 1) * rows_per_block)):
            wi = w[i]
            if wi == 0.0:
                continue
            lf = leaf[i]
            for j in range(d):
                p = _exp_and_sigmoid(F[i, j])[1]
                t = 1.0 if Y[i, j] > 0 else 0.0
                grad_part[b, lf, j] += wi * (t - p)
                curv_part[b, lf, j] += wi * (p * (1.0 - p))


@njit(cache=True)
def _leaf_finish_cpu(grad_part, curv_part, grad, curv):
    """The row blocks' sums added in block order (``boost_logistic_leaf_finish``)."""
    n_leaves, d = grad.shape
    for lf in range(n_leaves):
        for j in range(d):
            g = 0.0
            h = 0.0
            for b in range(grad_part.shape[0]):
                g += grad_part[b, lf, j]
                h += curv_part[b, lf, j]
            grad[lf, j] = g
            curv[lf, j] = h


def _leaf_sums_cpu(Y, F, leaf, w, grad, curv):
    n_leaves, d = grad.shape
    blocks, rows = row_blocks(F.shape[0], n_leaves * d)
    grad_part = np.zeros((blocks, n_leaves, d))
    curv_part = np.zeros((blocks, n_leaves, d))
    cpu_helper(_leaf_partials_cpu, small=F.size < SERIAL_ELEMENTS)(
        Y, F, leaf, w, rows, grad_part, curv_part)
    _leaf_finish_cpu(grad_part, curv_part, grad, curv)


@njit(parallel=True, cache=True)
def _derivatives_cpu(positive, E, leaf, values, T, w, columns, first, second):
    n, d = E.shape
    narrow = values.shape[1] == 1
    cols = np.nonzero(columns)[0]
    n_cols = cols.shape[0]
    every = n_cols == d
    n_blocks = (n + _ROW_BLOCK - 1) // _ROW_BLOCK
    part1 = np.zeros((n_blocks, d))
    part2 = np.zeros((n_blocks, d))
    for b in prange(n_blocks):
        p1 = part1[b]
        p2 = part2[b]
        for i in range(b * _ROW_BLOCK, min(n, (b + 1) * _ROW_BLOCK)):
            wi = w[i]
            if wi == 0.0:
                continue
            lf = leaf[i]
            e_row = E[i]
            t_row = T[lf]
            positive_row = positive[i]
            if narrow and every:
                # the common case (one tree output for all labels): a vectorisable loop
                h = values[lf, 0]
                wh = wi * h
                whh = wh * h
                for j in range(d):
                    p = 1.0 / (1.0 + e_row[j] * t_row[j])
                    t = 1.0 if positive_row[j] else 0.0
                    p1[j] += wh * (p - t)
                    p2[j] += whh * (p * (1.0 - p))
            else:
                for c in range(n_cols):
                    j = cols[c]
                    h = values[lf, 0] if narrow else values[lf, j]
                    p = 1.0 / (1.0 + e_row[j] * t_row[j])
                    t = 1.0 if positive_row[j] else 0.0
                    wh = wi * h
                    p1[j] += wh * (p - t)
                    p2[j] += wh * h * (p * (1.0 - p))
    first[:] = 0.0
    second[:] = 0.0
    for b in range(n_blocks):
        for c in range(n_cols):
            j = cols[c]
            first[j] += part1[b, j]
            second[j] += part2[b, j]


def _derivatives_launch(positive, E, leaf, values, T, w, columns, first, second):
    """:func:`_derivatives_cpu`, on one thread for fewer than ``SERIAL_ELEMENTS`` entries."""
    cpu_helper(_derivatives_cpu, small=E.size < SERIAL_ELEMENTS)(
        positive, E, leaf, values, T, w, columns, first, second)


@njit(cache=True)
def _search_step_cpu(rho, lo, hi, edge_open, todo, edge, direction, hmax, deriv, curv,
                     margin_factor, tol, n_todo):
    count = 0
    for j in range(rho.shape[0]):
        r = rho[j]
        g = deriv[j]
        c = curv[j]
        at_edge = r == edge[j]
        is_open = edge_open[j] != 0 and not at_edge
        to_do = todo[j] != 0 and not (at_edge and g * direction[j] < 0.0)
        low = r if g < 0.0 else lo[j]
        high = r if g > 0.0 else hi[j]
        newton = r - g / (c if c > 0.0 else 1.0)
        margin = margin_factor * (high - low)
        beyond = is_open and direction[j] * (newton - edge[j]) > 0.0
        inside = c > 0.0 and ((newton >= low - margin and newton <= high + margin) or beyond)
        nxt = min(max(newton, low), high) if inside else 0.5 * (low + high)
        if not (to_do and g != 0.0):
            nxt = r
        to_do = to_do and abs(nxt - r) * hmax[j] > tol
        rho[j] = nxt
        lo[j] = low
        hi[j] = high
        edge_open[j] = 1 if is_open else 0
        todo[j] = 1 if to_do else 0
        count += 1 if to_do else 0
    n_todo[0] = count


@njit(inline="always", cache=True)
def _clamped_exp(x, clamp):
    """``exp(-clip(x, -clamp, clamp))``, NaN kept."""
    if x < -clamp:
        x = -clamp
    elif x > clamp:
        x = clamp
    return math.exp(-x)


@njit(parallel=True, cache=True)
def _line_cpu(Y, F, positive, E, clamp):
    n, d = F.shape
    for i in prange(n):
        for j in range(d):
            positive[i, j] = 1 if Y[i, j] > 0 else 0
            E[i, j] = _clamped_exp(F[i, j], clamp)


def _line_launch(Y, F, positive, E, clamp):
    """:func:`_line_cpu`, on one thread for fewer than ``SERIAL_ELEMENTS`` entries."""
    cpu_helper(_line_cpu, small=F.size < SERIAL_ELEMENTS)(Y, F, positive, E, clamp)


@njit(cache=True)
def _leaf_exponentials_cpu(rho, values, T, clamp):
    n_leaves, d = T.shape
    per_output = values.shape[1] != 1
    for at in range(n_leaves):
        for j in range(d):
            T[at, j] = _clamped_exp(rho[j] * values[at, j if per_output else 0], clamp)


# --------------------------------------------------------------------------
# CUDA (kernels/boost_logistic.cu); the leaf sums as array expressions
# --------------------------------------------------------------------------


_SOURCE = "boost_logistic.cu"


def _scores_cuda(backend: Backend, Y, F, grad, loss, write_grad: int, write_loss: int) -> None:
    n, d = (int(s) for s in F.shape)
    if n * d == 0:
        return
    launch_grid_stride(backend, _SOURCE, "boost_logistic_scores", n * WARP_LANES,
                       (Y, F, grad, loss, np.int64(n), np.int64(d), np.int32(write_grad),
                        np.int32(write_loss)))


def _gradient_cuda(backend: Backend, Y, F, out):
    _scores_cuda(backend, Y, F, out, backend.xp.empty(1, dtype=backend.xp.float64), 1, 0)


def _row_loss_cuda(backend: Backend, Y, F, out):
    _scores_cuda(backend, Y, F, backend.xp.empty(1, dtype=backend.xp.float32), out, 0, 1)


def _gradient_row_loss_cuda(backend: Backend, Y, F, grad, loss):
    _scores_cuda(backend, Y, F, grad, loss, 1, 1)


def _derivatives_cuda(backend: Backend, positive, E, leaf, values, T, w, columns, first,
                      second):
    xp = backend.xp
    n, d = (int(s) for s in E.shape)
    if d == 0:
        return
    n_blocks = max(1, (n + _ROW_BLOCK - 1) // _ROW_BLOCK)
    part1 = xp.empty((n_blocks, d), dtype=xp.float64)
    part2 = xp.empty((n_blocks, d), dtype=xp.float64)
    launch_column_tiles(backend, _SOURCE, "boost_logistic_derivative_partials", n_blocks, d,
                        (positive, E, leaf, values, np.int64(values.shape[1]), T, w, columns,
                         np.int64(n), np.int64(d), np.int64(_ROW_BLOCK), part1, part2))
    launch_grid_stride(backend, _SOURCE, "boost_logistic_derivatives_finish", d,
                       (part1, part2, np.int64(n_blocks), np.int64(d), columns, first, second))


def _search_step_cuda(backend: Backend, rho, lo, hi, edge_open, todo, edge, direction, hmax,
                      deriv, curv, margin_factor, tol, n_todo):
    block = launch_block(backend.device_attributes(), _SEARCH_THREADS)
    backend.load_module(_SOURCE).get_function("boost_logistic_search_step")(
        (1,), (block,),
        (rho, lo, hi, edge_open, todo, edge, direction, hmax, deriv, curv,
         np.int64(rho.shape[0]), np.float64(margin_factor), np.float64(tol), n_todo))


def _line_cuda(backend: Backend, Y, F, positive, E, clamp):
    total = int(F.size)
    launch_grid_stride(backend, _SOURCE, "boost_logistic_line", total,
                       (Y, F, positive, E, np.int64(total), np.float64(clamp)))


def _leaf_exponentials_cuda(backend: Backend, rho, values, T, clamp):
    n_leaves, d = (int(s) for s in T.shape)
    launch_grid_stride(backend, _SOURCE, "boost_logistic_leaf_exponentials", n_leaves * d,
                       (rho, values, np.int64(values.shape[1]), T, np.int64(n_leaves),
                        np.int64(d), np.float64(clamp)))


def _leaf_sums_cuda(backend: Backend, Y, F, leaf, w, grad, curv):
    xp = backend.xp
    n, d = (int(s) for s in F.shape)
    n_leaves = int(grad.shape[0])
    if n_leaves * d == 0:
        return
    blocks, rows = row_blocks(n, n_leaves * d)
    grad_part = xp.empty((blocks, n_leaves, d), dtype=xp.float64)
    curv_part = xp.empty((blocks, n_leaves, d), dtype=xp.float64)
    launch_column_tiles(backend, _SOURCE, "boost_logistic_leaf_partials", blocks, d,
                        (Y, F, leaf, w, np.int64(n), np.int64(d), np.int64(n_leaves),
                         np.int64(rows), grad_part, curv_part))
    launch_grid_stride(backend, _SOURCE, "boost_logistic_leaf_finish", n_leaves * d,
                       (grad_part, curv_part, np.int64(blocks), np.int64(n_leaves * d), grad,
                        curv))


register_kernel("boost_logistic_gradient", cpu=_gradient_cpu, cuda=_gradient_cuda)
register_kernel("boost_logistic_row_loss", cpu=_row_loss_cpu, cuda=_row_loss_cuda)
register_kernel("boost_logistic_derivatives", cpu=_derivatives_launch, cuda=_derivatives_cuda)
register_kernel("boost_logistic_leaf_sums", cpu=_leaf_sums_cpu, cuda=_leaf_sums_cuda)
register_kernel(
    "boost_logistic_gradient_row_loss", cpu=_gradient_row_loss_cpu, cuda=_gradient_row_loss_cuda
)
register_kernel("boost_logistic_search_step", cpu=_search_step_cpu, cuda=_search_step_cuda)
register_kernel("boost_logistic_line", cpu=_line_launch, cuda=_line_cuda)
register_kernel("boost_logistic_leaf_exponentials", cpu=_leaf_exponentials_cpu,
                cuda=_leaf_exponentials_cuda)


# --------------------------------------------------------------------------
# allocating wrappers
# --------------------------------------------------------------------------


def _f64(xp: Any, a: Any) -> Any:
    return xp.ascontiguousarray(a, dtype=xp.float64)


def logistic_gradient(backend: Backend, Y: Any, F: Any) -> Any:
    """``[y > 0] - sigmoid(F)``: float32 (n, d)."""
    xp = backend.xp
    out = xp.empty(F.shape, dtype=xp.float32)
    backend.kernel("boost_logistic_gradient")(_f64(xp, Y), _f64(xp, F), out)
    return out


def logistic_row_loss(backend: Backend, Y: Any, F: Any) -> Any:
    """Mean logistic loss of every row: float64 (n,)."""
    xp = backend.xp
    out = xp.empty(F.shape[0], dtype=xp.float64)
    backend.kernel("boost_logistic_row_loss")(_f64(xp, Y), _f64(xp, F), out)
    return out


def logistic_gradient_and_row_loss(backend: Backend, Y: Any, F: Any) -> tuple[Any, Any]:
    """``[y > 0] - sigmoid(F)`` (float32 (n, d)) and the mean loss of every row (float64 (n,))."""
    xp = backend.xp
    grad = xp.empty(F.shape, dtype=xp.float32)
    loss = xp.empty(F.shape[0], dtype=xp.float64)
    backend.kernel("boost_logistic_gradient_row_loss")(_f64(xp, Y), _f64(xp, F), grad, loss)
    return grad, loss


def logistic_leaf_sums(
    backend: Backend, Y: Any, F: Any, leaf: Any, w: Any, n_leaves: int
) -> tuple[Any, Any]:
    """Per-(leaf, output) sums ``w ([y > 0] - p)`` and ``w p (1 - p)``, ``p = sigmoid(F)``.

    Returns two float64 arrays of shape (n_leaves, d).
    """
    xp = backend.xp
    d = F.shape[1]
    grad = xp.empty((int(n_leaves), d), dtype=xp.float64)
    curv = xp.empty((int(n_leaves), d), dtype=xp.float64)
    backend.kernel("boost_logistic_leaf_sums")(
        _f64(xp, Y), _f64(xp, F), xp.ascontiguousarray(xp.reshape(leaf, (-1,)), dtype=xp.int64),
        _f64(xp, w), grad, curv,
    )
    return grad, curv


def logistic_search_step(backend: Backend, state: dict[str, Any], deriv: Any, curv: Any,
                         margin_factor: float, tol: float) -> int:
    """One Newton iteration of :func:`gpurpo.ensemble.boosting.step_sizes.logistic_search`
    for every output (kernel ``boost_logistic_search_step``), in place on ``state``;
    returns the number of outputs still to do (one copy to the host).

    ``state`` holds float64 (d,) arrays ``rho``, ``lo``, ``hi`` (updated), ``edge``,
    ``direction``, ``hmax`` and uint8 (d,) ``edge_open``, ``todo`` (updated).
    """
    xp = backend.xp
    n_todo = xp.empty(1, dtype=xp.int64)
    backend.kernel("boost_logistic_search_step")(
        state["rho"], state["lo"], state["hi"], state["edge_open"], state["todo"],
        state["edge"], state["direction"], state["hmax"], _f64(xp, deriv), _f64(xp, curv),
        float(margin_factor), float(tol), n_todo)
    return int(backend.to_host(n_todo)[0])


class LogisticLine:
    """The per-output logistic objective along a tree's predictions, ready for many ``rho``.

    ``phi_j(rho) = sum_i w_i log(1 + exp(-y_ij (F_ij + rho h_ij)))`` with
    ``h_ij = values[leaf_i, j]`` (or ``values[leaf_i, 0]``). ``exp(-F)`` is
    computed once here; every evaluation then needs only the ``L x d``
    exponentials ``exp(-rho_j h_lj)`` (kernel ``boost_logistic_derivatives``).

    Parameters
    ----------
    backend : Backend
    Y, F : arrays of shape (n, d)
        Labels in {-1, 1} and current scores.
    H : array of shape (n, d) or (n, 1)
        Tree predictions; used to find the leaves when ``leaf`` is None (one
        column: its distinct values; ``d`` columns: one leaf per sample).
    w : array of shape (n,)
    leaf : int array of shape (n,), optional
        Leaf of each sample, with ``values`` (L, d) or (L, 1) such that
        ``H = values[leaf]``.
    values : array, optional
    """

    def __init__(
        self, backend: Backend, Y: Any, F: Any, H: Any, w: Any, leaf: Any = None,
        values: Any = None,
    ) -> None:
        xp = backend.xp
        self.backend = backend
        # the labels as one byte each (the derivatives read them every iteration)
        # and exp(-F), in one pass
        F = _f64(xp, F)
        self.positive = xp.empty(F.shape, dtype=xp.uint8)
        self.E = xp.empty(F.shape, dtype=xp.float64)
        backend.kernel("boost_logistic_line")(_f64(xp, Y), F, self.positive, self.E,
                                              _EXP_CLAMP)
        self.w = _f64(xp, w)
        if leaf is None or values is None:
            H = _f64(xp, H)
            if H.shape[1] == 1:
                values, leaf = xp.unique(H[:, 0], return_inverse=True)
                values = values[:, None]
            else:
                leaf, values = xp.arange(H.shape[0]), H
        self.leaf = xp.ascontiguousarray(xp.reshape(leaf, (-1,)), dtype=xp.int64)
        self.values = _f64(xp, values)
        self.d = self.E.shape[1]

    def max_abs_step_direction(self) -> Any:
        """``max_i |h_ij|`` over the samples of positive weight, per output (d,).

        Computed on the (L, d) leaf values of the leaves that hold such a
        sample, not on the (n, d) predictions: the same maximum.
        """
        xp = self.backend.xp
        n_leaves = self.values.shape[0]
        # a scatter-add of known size: a boolean index would read its size back
        held = xp.zeros(n_leaves, dtype=xp.float64)
        xp.add.at(held, self.leaf, (self.w > 0).astype(xp.float64))
        hmax = xp.max(xp.where(held[:, None] > 0, xp.abs(self.values), 0.0), axis=0)
        return xp.broadcast_to(hmax, (self.d,))

    def derivatives(self, rho: Any, columns: Any = None) -> tuple[Any, Any]:
        """First and second derivatives of every ``phi_j`` at ``rho`` (d,).

        ``columns`` (bool (d,), default all): outputs to compute, the others get 0.
        """
        xp = self.backend.xp
        d = self.d
        T = xp.empty((self.values.shape[0], d), dtype=xp.float64)
        self.backend.kernel("boost_logistic_leaf_exponentials")(_f64(xp, rho), self.values, T,
                                                               _EXP_CLAMP)
        first = xp.empty(d, dtype=xp.float64)
        second = xp.empty(d, dtype=xp.float64)
        mask = xp.ones(d, dtype=xp.uint8) if columns is None else xp.asarray(columns, dtype=xp.uint8)
        self.backend.kernel("boost_logistic_derivatives")(
            self.positive, self.E, self.leaf, self.values, T, self.w, xp.ascontiguousarray(mask),
            first, second,
        )
        return first, second


def logistic_derivatives(
    backend: Backend, Y: Any, F: Any, H: Any, w: Any, rho: Any, columns: Any = None
) -> tuple[Any, Any]:
    """First and second derivatives in ``rho`` of the per-output logistic objective.

    One evaluation of :class:`LogisticLine` (``H`` (n, d) or (n, 1), the tree
    predictions); ``columns`` (bool (d,), default all): outputs to compute,
    the others get 0.
    """
    return LogisticLine(backend, Y, F, H, w).derivatives(rho, columns)
