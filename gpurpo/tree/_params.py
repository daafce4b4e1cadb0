"""Growth parameters shared by the level-wise and best-first growers."""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass
from typing import Any

from gpurpo._validation import check_float, check_int

__all__ = ["GrowthParams", "n_candidate_features", "DEFAULT_MAX_HISTOGRAM_BYTES"]

DEFAULT_MAX_HISTOGRAM_BYTES = 256 * 1024**2


def n_candidate_features(max_features: Any, n_features: int) -> int:
    """Resolve ``max_features`` into the number k of features tried per node.

    Follows scikit-learn: ``None`` -> p; int in [1, p]; float in (0, 1] ->
    ``max(1, int(max_features * p))``; ``"sqrt"`` -> ``max(1, int(sqrt p))``;
    ``"log2"`` -> ``max(1, int(log2 p))``.

    Parameters
    ----------
    max_features : None, int, float or {"sqrt", "log2"}
        The estimator's ``max_features``.
    n_features : int
        p, the number of input features.

    Returns
    -------
    int
        k, in ``[1, p]`` (p itself for ``None``).

    Raises
    ------
    ValueError, TypeError
        Naming ``max_features`` and the received value.
    """
    p = int(n_features)
    if max_features is None:
        return p
    if isinstance(max_features, str):
        if max_features == "sqrt":
            return max(1, int(math.sqrt(p)))
        if max_features == "log2":
            return max(1, int(math.log2(p))) if p > 1 else 1
        raise ValueError(
            "max_features must be None, an int in [1, n_features], a float in (0, 1], "
            f"'sqrt' or 'log2', got {max_features!r}"
        )
    if isinstance(max_features, bool):
        raise TypeError(
            f"max_features must be an int, a float, a str or None, got {max_features!r}"
        )
    if isinstance(max_features, numbers.Integral):
        if not 1 <= int(max_features) <= p:
            raise ValueError(
                f"max_features given as an int must be in [1, n_features={p}], got {max_features}"
            )
        return int(max_features)
    if isinstance(max_features, numbers.Real):
        value = float(max_features)
        if not (math.isfinite(value) and 0.0 < value <= 1.0):
            raise ValueError(f"max_features given as a float must be in (0, 1], got {max_features}")
        return max(1, int(value * p))
    raise TypeError(
        "max_features must be None, an int, a float, 'sqrt' or 'log2', got "
        f"{type(max_features).__name__} {max_features!r}"
    )


@dataclass(frozen=True)
class GrowthParams:
    """Stopping rules and split search options of one growth call.

    Parameters
    ----------
    n_candidates : int or None
        k, the number of features drawn per node, constant ones included; more
        only when all k are constant, up to the first that is not (``None``:
        all features). Resolve ``max_features`` with
        :func:`n_candidate_features`.
    max_depth : int or None
        Nodes at depth ``max_depth`` (root: 0) are leaves.
    min_samples_split : int >= 2
        Nodes with fewer samples are leaves.
    min_samples_leaf : int >= 1
        Minimum number of samples on each side of a split.
    max_leaf_nodes : int >= 2 or None
        Best-first growth stops at this many leaves (used by
        :func:`gpurpo.tree.growth.grow_tree_best_first`).
    min_impurity_decrease : float >= 0
        A split is made only if its weighted impurity decrease, as in
        scikit-learn ``W_t / W * (i(t) - W_L/W_t i(t_L) - W_R/W_t i(t_R))``
        with ``i`` the variance of the (projected) outputs AVERAGED over the
        m outputs, is at least this value.
    splitter : {"best", "random"}
        Best split over all bins, or one random cut per feature (Extra-Trees).
    small_node_size : int or None
        Nodes with at most this many samples are split exactly from their
        samples (kernel ``tree_split_small``) instead of from histograms;
        ``None`` picks a default for the backend, 0 forces histograms.
    subtree_size : int or None
        Level-wise growth only: a node with at most this many samples is
        grown to completion, depth first, by one ``tree_grow_subtrees``
        kernel call on a cache-resident copy of its samples' codes. ``None``
        picks a default for the backend and number of features, 0 disables.
    max_histogram_bytes : int
        Memory budget of the histograms (and their float64 scoring
        temporaries) held at once; the frontier is processed in chunks that
        fit, and histogram subtraction is used only when parents fit too.
    criterion : {"variance", "newton"}
        ``"variance"``: the reduction of summed variance of the m targets
        (Joly et al. 2014, eq. 1-2). ``"newton"``: the second-order gain of
        XGBoost's vector-leaf trees (Chen & Guestrin 2016, eq. 7, summed over
        outputs), ``sum_j G_Lj^2 / (H_Lj + lambda) + G_Rj^2 / (H_Rj + lambda)
        - G_j^2 / (H_j + lambda)``; the targets then hold m / 2 gradient
        columns followed by the m / 2 matching hessian columns. Every node is
        split from histograms (the exact small-node and subtree kernels score
        variance only), and the targets are not centred.
    reg_lambda : float >= 0
        ``lambda`` of the ``"newton"`` gain.
    min_child_weight : float >= 0
        ``"newton"`` only: an output contributes to a side's score only where
        that side's hessian sum ``H_j`` is at least this value (XGBoost's
        per-output rule for vector leaves).

    Counting samples
    ----------------
    ``min_samples_split`` and ``min_samples_leaf`` count the distinct
    training samples with a nonzero weight in the node, as scikit-learn does
    (a sample drawn twice by a bootstrap counts once); the split score and
    the leaf values use the weights.
    """

    n_candidates: int | None = None
    max_depth: int | None = None
    min_samples_split: int = 2
    min_samples_leaf: int = 1
    max_leaf_nodes: int | None = None
    min_impurity_decrease: float = 0.0
    splitter: str = "best"
    small_node_size: int | None = None
    subtree_size: int | None = None
    max_histogram_bytes: int = DEFAULT_MAX_HISTOGRAM_BYTES
    criterion: str = "variance"
    reg_lambda: float = 1.0
    min_child_weight: float = 0.0

    def validated(self) -> GrowthParams:
        """Check every field; return self (raises ValueError/TypeError naming it)."""
        if self.n_candidates is not None:
            check_int(self.n_candidates, "max_features", low=1)
        if self.max_depth is not None:
            check_int(self.max_depth, "max_depth", low=0)
        check_int(self.min_samples_split, "min_samples_split", low=2)
        check_int(self.min_samples_leaf, "min_samples_leaf", low=1)
        if self.max_leaf_nodes is not None:
            check_int(self.max_leaf_nodes, "max_leaf_nodes", low=2)
        check_float(self.min_impurity_decrease, "min_impurity_decrease", low=0.0)
        if self.splitter not in ("best", "random"):
            raise ValueError(f"splitter must be 'best' or 'random', got {self.splitter!r}")
        if self.small_node_size is not None:
            check_int(self.small_node_size, "small_node_size", low=0)
        if self.subtree_size is not None:
            check_int(self.subtree_size, "subtree_size", low=0)
        check_int(self.max_histogram_bytes, "max_histogram_bytes", low=1)
        if self.criterion not in ("variance", "newton"):
            raise ValueError(
                f"criterion must be 'variance' or 'newton', got {self.criterion!r}"
            )
        check_float(self.reg_lambda, "reg_lambda", low=0.0)
        check_float(self.min_child_weight, "min_child_weight", low=0.0)
        return self
