"""Per-output optimal steps ``rho_m`` of multi-output gradient boosting.

After the tree ``h_m`` of iteration ``m`` is fitted, Joly, Wehenkel & Geurts
(2019) choose, for each output ``j`` separately,

    rho_mj = argmin_rho sum_i w_i l_j(y_ij, f_{m-1,j}(x_i) + rho h_mj(x_i)),

a one-dimensional problem per output (Algorithm 3 line 6, Algorithm 4 line 7;
with a single-output tree ``h_mj = h_m`` for every ``j``). The functions here
solve all ``d`` problems at once with array operations of ``xp`` (NumPy or
CuPy); the tree predictions ``H`` are ``(n, d)`` or ``(n, 1)`` (one column
broadcast to every output, the gbrt-rpo case, which keeps it a
matrix-vector product).

* :func:`least_squares_step` -- closed form for the squared error (the
  paper's eqs. 20 and 23): ``rho_j = <w g_j, h_j> / <w h_j, h_j>``.
* :func:`weighted_median_step` -- exact minimiser for the absolute error: a
  weighted median of ``r_ij / h_ij`` with weights ``w_i |h_ij|``.
* :func:`logistic_step` -- safeguarded Newton search for the logistic loss:
  Newton steps kept inside a bracket on which the derivative changes sign,
  bisection whenever a Newton step leaves it, and the step bounded so that no
  score moves by more than :data:`MAX_LOGIT_STEP` (the minimiser is infinite
  when a label is separated by the tree).

The least-squares step and the logistic search are also building blocks of
distributed boosting (:mod:`gpurpo.dask`): :func:`least_squares_sums` of row
blocks add up, and :func:`logistic_search` runs along any line whose
derivatives are summed over the machines that hold the rows.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

from gpurpo.backend import Backend
from gpurpo.ensemble.boosting import _median_kernels  # noqa: F401  (registers the median kernels)
from gpurpo.ensemble.boosting.logistic_kernels import LogisticLine, logistic_search_step

__all__ = [
    "MAX_LOGIT_STEP",
    "least_squares_ratio",
    "least_squares_step",
    "least_squares_sums",
    "logistic_search",
    "logistic_step",
    "weighted_median_step",
]

MAX_LOGIT_STEP = 10.0
_NEWTON_MAX_ITER = 40
_NEWTON_TOL = 1e-5
_BRACKET_MARGIN = 1e-6


def least_squares_step(xp: ModuleType, G: Any, H: Any, w: Any) -> Any:
    """Least-squares step per output, ``rho_j = sum_i w_i g_ij h_ij / sum_i w_i h_ij^2``.

    Parameters
    ----------
    xp : module
    G : array of shape (n, d)
        Residuals ``y - f_{m-1}`` (the negative gradient of the half squared
        error).
    H : array of shape (n, d) or (n, 1)
        Tree predictions.
    w : array of shape (n,)
        Sample weights.

    Returns
    -------
    array of shape (d,), float64
        0 for outputs whose tree predictions are all 0 (the step does not
        matter there).
    """
    return least_squares_ratio(xp, *least_squares_sums(xp, G, H, w))


def least_squares_sums(xp: ModuleType, G: Any, H: Any, w: Any) -> tuple[Any, Any]:
    """The sums over samples of :func:`least_squares_step`: ``(sum_i w_i g_ij h_ij,
    sum_i w_i h_ij^2)``, float64 (d,) each; sums of row blocks add up."""
    w64 = w.astype(xp.float64)
    if H.shape[1] == 1:
        wh = w64 * H[:, 0].astype(xp.float64)
        num = wh @ G.astype(xp.float64)
        den = xp.sum(wh * H[:, 0])
        return num, xp.full(num.shape, den)
    WH = w64[:, None] * H.astype(xp.float64)
    return xp.sum(WH * G, axis=0), xp.sum(WH * H, axis=0)


def least_squares_ratio(xp: ModuleType, num: Any, den: Any) -> Any:
    """``num / den`` of :func:`least_squares_sums`, 0 where ``den`` is 0."""
    safe = den > 0
    return xp.where(safe, num / xp.where(safe, den, 1.0), 0.0)


def weighted_median_step(backend: Backend, R: Any, H: Any, w: Any) -> Any:
    """Exact step for the absolute error: ``argmin_rho sum_i w_i |r_ij - rho h_ij|`` per output.

    The objective equals ``sum_i w_i |h_ij| |r_ij / h_ij - rho|`` over the
    samples with ``h_ij != 0`` (plus a constant), so its minimiser is the
    weighted median of the ratios with weights ``w_i |h_ij|``, taken by the
    kernel ``boost_weighted_median_step``
    (:mod:`gpurpo.ensemble.boosting._median_kernels`: a selection on the CPU).

    Parameters
    ----------
    backend : Backend
    R : array of shape (n, d)
        Residuals ``y - f_{m-1}``.
    H : array of shape (n, d) or (n, 1)
    w : array of shape (n,)

    Returns
    -------
    array of shape (d,), float64
    """
    return backend.kernel("boost_weighted_median_step")(R, H, w)


def logistic_step(
    backend: Backend,
    Y: Any,
    F: Any,
    H: Any,
    w: Any,
    leaf: Any = None,
    values: Any = None,
    max_logit_step: float = MAX_LOGIT_STEP,
    max_iter: int = _NEWTON_MAX_ITER,
    tol: float = _NEWTON_TOL,
) -> Any:
    """Safeguarded Newton search for the logistic step of every output.

    Minimises the convex ``phi_j(rho) = sum_i w_i log(1 + exp(-y_ij (F_ij +
    rho h_ij)))`` over ``|rho| <= max_logit_step / max_i |h_ij|`` (no score
    moves by more than ``max_logit_step`` logits). The derivative at 0 tells
    on which side of 0 the minimiser lies; if the derivative still has the
    same sign at the bound (evaluated only when a Newton step reaches it),
    the bound is returned. A bracket ``[lo, hi]`` with ``phi'(lo) <= 0 <=
    phi'(hi)`` is kept, a Newton step is taken when it lands inside the
    bracket (up to a rounding margin) and a bisection step otherwise, until
    no score of the output moves by more than ``tol`` logits between two
    iterations; after ``max_iter`` iterations an unfinished output gets the
    end of its bracket on the side of 0, where the objective is below its
    value at 0 (so the training loss never increases). All outputs iterate
    together; converged outputs are skipped by the derivative kernel (one
    host synchronisation per iteration, for the stopping test).

    Parameters
    ----------
    backend : Backend
        The derivatives are computed by the fused kernel
        ``boost_logistic_derivatives`` (:mod:`gpurpo.ensemble.boosting.logistic_kernels`)
        through a :class:`~gpurpo.ensemble.boosting.logistic_kernels.LogisticLine`:
        ``exp(-F)`` once, then only one exponential per (leaf, output) per
        iteration.
    Y : array of shape (n, d)
        Labels in {-1, 1}.
    F : array of shape (n, d)
        Current scores (log-odds).
    H : array of shape (n, d) or (n, 1), or None
        Tree predictions (None when ``leaf`` and ``values`` are given).
    w : array of shape (n,)
        Sample weights.
    leaf, values : optional
        The tree's leaf of each sample (n,) and its leaf values (L, d) or
        (L, 1), ``H = values[leaf]``; found from ``H`` when not given.
    max_logit_step, max_iter, tol
        Safeguards.

    Returns
    -------
    array of shape (d,), float64
    """
    xp = backend.xp
    if H is not None:
        H = xp.ascontiguousarray(H, dtype=xp.float64)
    w = xp.ascontiguousarray(w, dtype=xp.float64)
    line = LogisticLine(backend, Y, F, H, w, leaf, values)
    return logistic_search(backend, line, int(F.shape[1]), max_logit_step, max_iter, tol)


def logistic_search(
    backend: Backend,
    line: Any,
    d: int,
    max_logit_step: float = MAX_LOGIT_STEP,
    max_iter: int = _NEWTON_MAX_ITER,
    tol: float = _NEWTON_TOL,
) -> Any:
    """The search of :func:`logistic_step` along ``line``, for ``d`` outputs, on
    ``backend`` (one kernel launch and one copy to the host per iteration:
    :func:`~gpurpo.ensemble.boosting.logistic_kernels.logistic_search_step`).

    ``line`` provides ``max_abs_step_direction()`` (d,) and
    ``derivatives(rho, columns)`` (two (d,) arrays), as
    :class:`~gpurpo.ensemble.boosting.logistic_kernels.LogisticLine` does; a
    line whose rows are split over machines sums its derivatives over them.
    """
    xp = backend.xp
    hmax = xp.ascontiguousarray(line.max_abs_step_direction(), dtype=xp.float64)
    active = hmax > 0
    cap = xp.where(active, max_logit_step / xp.where(active, hmax, 1.0), 0.0)
    zero = xp.zeros(d, dtype=xp.float64)

    d0, curv = line.derivatives(zero)
    direction = xp.where(d0 < 0, 1.0, -1.0)
    # the derivative at the bound is only computed when a Newton step reaches it
    # (edge_open); an output still descending at its bound stops there (the
    # constrained minimiser); a Newton step landing on the bracket's end by rounding
    # is kept (clipped), one beyond a bound whose derivative is unknown goes to it
    state = {
        "rho": xp.zeros(d, dtype=xp.float64),
        "lo": xp.where(direction > 0, zero, -cap),
        "hi": xp.where(direction > 0, cap, zero),
        "edge": direction * cap,
        "direction": direction,
        "hmax": hmax,
        "edge_open": xp.ones(d, dtype=xp.uint8),
        "todo": (active & (d0 != 0)).astype(xp.uint8),
    }
    deriv = d0
    for _ in range(max_iter):
        if not logistic_search_step(backend, state, deriv, curv, _BRACKET_MARGIN, tol):
            break
        deriv, curv = line.derivatives(state["rho"], state["todo"])
    else:
        # out of iterations: the bracket end on the side of 0 is a point where the
        # objective has only decreased from 0 (convexity), a safe step
        rho = state["rho"]
        lo = xp.where(deriv < 0, rho, state["lo"])
        hi = xp.where(deriv > 0, rho, state["hi"])
        state["rho"] = xp.where(state["todo"] != 0, xp.where(direction > 0, lo, hi), rho)
    return xp.where(active & (d0 != 0), state["rho"], 0.0)
