"""Second-order (Newton) split targets for the weighted-variance tree engine.

XGBoost (Chen & Guestrin 2016, eq. 7) scores a split of a node into ``L`` and
``R`` by the second-order gain, summed over the outputs ``j`` of a vector-leaf
tree,

    gain = sum_j [ G_Lj^2 / (H_Lj + lambda) + G_Rj^2 / (H_Rj + lambda)
                   - G_j^2 / (H_j + lambda) ],

with ``G_j = sum_i g_ij`` and ``H_j = sum_i h_ij`` the node's sums of negative
gradients and hessians (the Newton step of LogitBoost, Friedman, Hastie &
Tibshirani 2000, applied to the split). gpurpo's tree engine scores a split
by the reduction of weighted variance of its targets ``z_i`` (rows of width
``m``) under row weights ``a_i``,

    gain = ||S_L||^2 / A_L + ||S_R||^2 / A_R - ||S||^2 / A,
    S = sum_i a_i z_i,  A = sum_i a_i,

which is the second-order gain as soon as the hessian factors as
``h_ij = a_i b_j`` (one row factor, one output factor): with
``z_ij = c_j g_ij / a_i`` the sums are ``S_j = c_j G_j`` and ``H_j = b_j A``,
so each output contributes ``c_j^2 G_j^2 / A``, and
``c_j = 1 / sqrt(b_j + lambda / A)`` gives ``G_j^2 / (H_j + lambda)``.

:func:`newton_split_targets` builds those targets from the ``(n, d)``
hessian with the rank-one factorisation that keeps every row and column
total, ``a_i = mean_j h_ij`` and ``b_j = sum_i w_i h_ij / sum_i w_i a_i``
(exact when the hessian is rank one, in particular when it is shared by all
outputs, ``b_j = 1``), and evaluates the regulariser at the mean hessian mass
of a leaf, ``A_ref = sum_i w_i a_i / n_leaves`` (the engine's targets are
fixed for the whole tree, so ``lambda / A`` cannot follow the node). The
projections of ``"rpo"`` and ``"relabel_rpo"`` then act on ``z`` instead of
the gradient. Everything is array code of ``xp`` (NumPy or CuPy).
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

__all__ = ["newton_split_targets"]

# Row hessians are floored at this fraction of their weighted mean: a row whose
# outputs are all predicted with certainty keeps a finite target.
_HESSIAN_FLOOR = 1e-9


def newton_split_targets(
    xp: ModuleType, G: Any, hessian: Any, w: Any, reg_lambda: float, n_leaves: int
) -> tuple[Any, Any]:
    """Targets and row weights whose weighted-variance gain is the Newton gain.

    Parameters
    ----------
    xp : module
        NumPy or CuPy.
    G : array of shape (n, d)
        Negative gradient ``g_ij``.
    hessian : array of shape (n, d)
        Second derivatives ``h_ij >= 0`` of the loss.
    w : array of shape (n,)
        Sample weights of the iteration (0 for rows left out).
    reg_lambda : float
        ``lambda >= 0``, the L2 penalty of the leaf values in the gain.
    n_leaves : int
        Leaves of the tree (``A_ref`` is the mean hessian mass of a leaf).

    Returns
    -------
    Z : float32 array of shape (n, d)
        ``z_ij = c_j g_ij / a_i``, ``c_j = 1 / sqrt(b_j + lambda / A_ref)``.
    a : float64 array of shape (n,)
        Row factor ``a_i = mean_j h_ij`` (floored), the row weights of the
        tree (to multiply with ``w``).
    """
    w64 = w.astype(xp.float64)
    a = xp.mean(hessian, axis=1, dtype=xp.float64)
    mass = xp.sum(w64 * a)
    safe_mass = xp.where(mass > 0, mass, 1.0)
    a = xp.maximum(a, _HESSIAN_FLOOR * safe_mass / xp.maximum(xp.sum(w64), 1e-300))
    a = xp.where(a > 0, a, 1.0)
    b = (w64 @ hessian.astype(xp.float64)) / safe_mass
    c = 1.0 / xp.sqrt(b + float(reg_lambda) * n_leaves / safe_mass)
    c = xp.where(xp.isfinite(c), c, 0.0)
    Z = G * c.astype(xp.float32)[None, :] * (1.0 / a).astype(xp.float32)[:, None]
    return xp.ascontiguousarray(Z, dtype=xp.float32), a
