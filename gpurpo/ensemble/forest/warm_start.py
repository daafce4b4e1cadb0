"""What a fitted forest keeps to grow more trees later (``warm_start``).

* The generator state its trees' seeds were drawn from: each tree's
  (bootstrap, projection, root) seeds are one row of a single draw of
  ``(n_estimators, 3)`` from that state, so a warm start draws them again for
  the larger forest and the new trees get the seeds one fit would give them
  (:func:`generator_at`).
* The parameters its trees share, which a warm start may not change
  (:data:`WARM_FIXED`, compared through :func:`param_key`).
* How each fit call's trees drew their rows (:class:`Sampling`), so that
  ``estimators_samples_`` and out-of-bag scores stay right when a warm start
  draws from other rows or weights (:func:`draw_counts`).

:class:`Sampling` is also how :mod:`gpurpo.dask` records the rows the
trees of a distributed fit drew, so that its fitted forest is a plain
single-machine forest.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from sklearn.base import BaseEstimator

from gpurpo.backend import Backend
from gpurpo.ensemble.forest.batches import bootstrap_counts, bootstrap_indices

__all__ = [
    "WARM_FIXED", "WARM_NO_NEW_TREES", "Sampling", "draw_counts", "draw_counts_on",
    "generator_at", "param_key",
]

#: Parameters that the trees of a forest share (its bin edges and its projections): a
#: warm start refuses to change them.
WARM_FIXED = ("projection", "n_components", "shared_projection", "max_bins")

WARM_NO_NEW_TREES = "Warm-start fitting without increasing n_estimators does not fit new trees."


def param_key(value: Any) -> Any:
    """A comparable snapshot of a parameter (an estimator by its type and parameters)."""
    if isinstance(value, BaseEstimator):
        return (type(value), repr(sorted(value.get_params(deep=False).items())))
    return value


def generator_at(state: dict) -> np.random.Generator:
    """A generator whose bit generator is at ``state`` (``bit_generator.state``)."""
    bit_generator = getattr(np.random, state["bit_generator"])()
    bit_generator.state = state
    return np.random.Generator(bit_generator)


@dataclass(frozen=True)
class Sampling:
    """How the trees ``start`` to ``stop - 1`` drew their rows (one per fit call)."""

    start: int
    stop: int
    n_samples: int
    n_draws: int
    draw_p: np.ndarray | None
    bootstrap: bool


def draw_counts(sampling: Sampling, boot_seeds: np.ndarray) -> np.ndarray:
    """Draw counts (T, n) of the trees whose bootstrap seeds are ``boot_seeds``.

    Ones (every row once) for trees grown without bootstrap.
    """
    n = sampling.n_samples
    if not sampling.bootstrap:
        return np.ones((len(boot_seeds), n), dtype=np.float64)
    return np.stack(
        [bootstrap_counts(s, n, sampling.n_draws, sampling.draw_p) for s in boot_seeds]
    )


def draw_counts_on(sampling: Sampling, boot_seeds: np.ndarray, backend: Backend) -> Any:
    """:func:`draw_counts` as float32 (T, n) on ``backend``, the same counts.

    On CUDA backends with bootstrap, the rows are drawn on the host (the same
    streams as :func:`bootstrap_indices`) and counted on the device, in one
    ``bincount`` of the batch's draws: the host's share is the draws alone,
    not the counting (a scattered pass over ``n`` counts per tree, most of the
    host's time per tree at a million rows) nor a ``(T, n)`` copy of counts.
    """
    if not (sampling.bootstrap and backend.uses_cuda_kernels):
        return backend.asarray(draw_counts(sampling, boot_seeds).astype(np.float32))
    xp, n, n_trees = backend.xp, sampling.n_samples, len(boot_seeds)
    # tree t's rows counted at t n + row: one count array for the batch; int32 when
    # that fits (half the bytes to copy, the same pass over the draws)
    dtype = np.int32 if n_trees * n < 2**31 else np.int64
    draws = np.empty((n_trees, sampling.n_draws), dtype=dtype)
    for t, seed in enumerate(boot_seeds):
        draws[t] = bootstrap_indices(seed, n, sampling.n_draws, sampling.draw_p)
    draws += (np.arange(n_trees, dtype=dtype) * n)[:, None]
    counts = xp.bincount(backend.asarray(draws.ravel()), minlength=n_trees * n)
    return counts.reshape(n_trees, n).astype(xp.float32)
