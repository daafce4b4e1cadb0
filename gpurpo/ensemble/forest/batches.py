"""Batches of trees: size from a memory budget, bootstrap draws, threads, OOM.

A forest grows its trees in batches: the ``T`` trees of a batch advance
level by level together in one :func:`gpurpo.tree.grow_trees` call (every
level of every tree is one batch of histogram / split kernels, which keeps a
GPU busy at deep levels where each tree only has small nodes), and their
targets come from one projection product. The batch size trades speed for
memory; :func:`resolve_batch_size` derives it from a budget:

* on the CPU (and the emulated CUDA backend) a fixed ``CPU_BATCH_BYTES``
  shared by the threads, and at most ``CPU_BATCH_TREES`` trees, fewer when that
  leaves a thread without a batch: on the CPU several threads grow one batch
  each (:func:`gpurpo.backend.serial_cpu_kernels`), and a large batch only loses
  cache locality (the mediamill-shaped forest, one thread: 0.138 s per tree in
  batches of 8, 0.152 s in batches of 32);
* on a CUDA device ``GPU_MEMORY_FRACTION`` of the device's TOTAL memory (not
  the free memory, which changes from run to run; the batch size does not
  change the forest, but runs should be repeatable in speed and memory too).

:func:`tree_bytes` is the estimate of the memory one tree of a batch needs
while it is grown and labelled (targets and their float64 temporaries,
weights, per-sample index buffers, its leaf values and their stacked copy);
the histograms have their own budget inside the grower.

These stages (batch sizes, bootstrap draw counts, numba thread limits) are
building blocks of distributed fitting too: :mod:`gpurpo.dask` splits a
forest into the same batches over its workers.
"""

from __future__ import annotations

import contextlib
import numbers
from collections.abc import Iterator
from typing import Any

import numpy as np

from gpurpo.backend import Backend

__all__ = [
    "CPU_BATCH_BYTES",
    "CPU_BATCH_TREES",
    "GPU_MEMORY_FRACTION",
    "tree_bytes",
    "batch_budget_bytes",
    "resolve_batch_size",
    "tree_batches",
    "forest_batches",
    "bootstrap_counts",
    "bootstrap_indices",
    "n_bootstrap_samples",
    "resolve_n_jobs",
    "numba_threads",
    "numba_thread_count",
    "grows_batches_in_parallel",
    "out_of_memory_error",
]

CPU_BATCH_BYTES = 1024**3
CPU_BATCH_TREES = 8
GPU_MEMORY_FRACTION = 0.25
# Bytes per (sample, grown output) and per sample of one tree while it grows:
# float32 targets, their centred copy and float64 temporaries, gathered rows;
# weights, sample buffers, partition scratch and leaf indices.
_BYTES_PER_TARGET_CELL = 28
_BYTES_PER_SAMPLE = 200


def tree_bytes(n_samples: int, n_components: int, leaf_bytes: int) -> int:
    """Estimated peak memory of one tree of a batch (bytes).

    Parameters
    ----------
    n_samples : int
        n.
    n_components : int
        m, the number of outputs the tree is grown on.
    leaf_bytes : int
        Upper bound on the bytes of the tree's leaf values (counted twice:
        per tree and in the batch's stacked table).
    """
    return (
        int(n_samples) * (_BYTES_PER_TARGET_CELL * int(n_components) + _BYTES_PER_SAMPLE)
        + 2 * int(leaf_bytes)
    )


def batch_budget_bytes(backend: Backend) -> int:
    """Memory a batch of trees may use on ``backend`` (see the module docstring)."""
    if backend.is_gpu:
        total = int(backend.xp.cuda.Device().mem_info[1])
        return int(GPU_MEMORY_FRACTION * total)
    return CPU_BATCH_BYTES


def resolve_batch_size(
    batch_size: Any,
    n_estimators: int,
    per_tree_bytes: int,
    backend: Backend,
    n_threads: int | None = None,
) -> int:
    """Number of trees grown together.

    ``"auto"``: as many trees as fit :func:`batch_budget_bytes` at
    ``per_tree_bytes`` each (at least 1, at most ``n_estimators``); on the CPU
    the budget is shared by ``n_threads`` concurrent batches (None: numba's
    current thread count), and the trees are dealt in ``R`` rounds of
    ``n_threads`` batches of at most ``CPU_BATCH_TREES`` trees, as evenly as
    possible: ``ceil(n_estimators / (n_threads R))`` trees per batch with
    ``R = ceil(n_estimators / (n_threads CPU_BATCH_TREES))``. An int is used
    as given (capped at ``n_estimators``).
    """
    if isinstance(batch_size, str):
        if batch_size != "auto":
            raise ValueError(f"batch_size must be 'auto' or an int >= 1, got {batch_size!r}")
        if backend.is_gpu:
            fit = batch_budget_bytes(backend) // max(1, int(per_tree_bytes))
        else:
            threads = max(1, int(n_threads if n_threads is not None else numba_thread_count()))
            # rounds of `threads` batches of at most CPU_BATCH_TREES trees, evened out
            rounds = -(-int(n_estimators) // (threads * CPU_BATCH_TREES))
            fit = min(
                batch_budget_bytes(backend) // max(1, int(per_tree_bytes) * threads),
                -(-int(n_estimators) // (threads * rounds)),
            )
        return int(max(1, min(n_estimators, fit)))
    if isinstance(batch_size, bool) or not isinstance(batch_size, numbers.Integral):
        raise TypeError(
            f"batch_size must be 'auto' or an int >= 1, got {type(batch_size).__name__} "
            f"{batch_size!r}"
        )
    if batch_size < 1:
        raise ValueError(f"batch_size must be 'auto' or an int >= 1, got {batch_size}")
    return int(min(n_estimators, batch_size))


def tree_batches(n_estimators: int, batch_size: int, workers: int = 1) -> list[tuple[int, int]]:
    """Consecutive ranges ``(b0, b1)`` of trees grown together, as even as possible.

    At most ``batch_size`` trees each; with several ``workers`` (threads that
    each grow one batch at a time) the number of batches is a multiple of
    ``workers`` when there are enough trees, so that every thread gets the
    same number of trees: 100 trees in batches of at most 8 on two threads
    are 14 batches of 7 or 8 (50 trees per thread), where batches of 8 and
    one of 4 would leave one thread 52 trees and the other 48. The batches
    do not change the forest, only the speed.
    """
    n = int(n_estimators)
    if n < 1:
        return []
    size = max(1, int(batch_size))
    k = -(-n // size)
    if workers > 1:
        k = min(n, -(-k // workers) * workers)
    bounds = [(j * n) // k for j in range(k + 1)]
    return [(bounds[j], bounds[j + 1]) for j in range(k)]


def grows_batches_in_parallel(backend: Backend, n_trees: int, threads: int) -> bool:
    """Whether a forest grows several batches at once, one thread each.

    On the CPU backend with several threads and at least half as many trees
    as threads; otherwise one batch at a time, its kernels on all threads
    (each thread busy with its own trees beats kernels shared by all threads,
    whose small nodes leave threads idle, as long as few threads idle for
    lack of trees).
    """
    return backend.name == "numpy" and threads > 1 and 2 * int(n_trees) >= threads


def forest_batches(
    batch_size: Any, n_old: int, n_new: int, n_samples: int, n_components: int,
    leaf_bytes: int, backend: Backend, n_jobs: Any,
) -> tuple[int, list[tuple[int, int]], int]:
    """How a fit grows its new trees ``n_old`` to ``n_old + n_new - 1``.

    Returns
    -------
    batch : int
        The batch size (:func:`resolve_batch_size`, on the threads of ``n_jobs``).
    batches : list of (int, int)
        The ranges of trees grown together (:func:`tree_batches`; ``"auto"``
        batches are dealt evenly over the threads when batches grow in
        parallel, an int is the size asked for).
    workers : int
        How many batches grow at once (:func:`grows_batches_in_parallel`).
    """
    threads = resolve_n_jobs(n_jobs)
    if threads is None:
        threads = numba_thread_count()
    tree_parallel = grows_batches_in_parallel(backend, max(n_new, 1), threads)
    batch = resolve_batch_size(
        batch_size, max(n_new, 1), tree_bytes(n_samples, n_components, leaf_bytes), backend,
        n_threads=threads if tree_parallel else 1,
    )
    even_over = threads if tree_parallel and isinstance(batch_size, str) else 1
    batches = [(n_old + b0, n_old + b1) for b0, b1 in tree_batches(n_new, batch, even_over)]
    workers = min(threads, len(batches)) if tree_parallel else 1
    return batch, batches, workers


def numba_thread_count() -> int:
    import numba

    return int(numba.get_num_threads())


def n_bootstrap_samples(max_samples: Any, n_samples: int, bootstrap: bool) -> int:
    """Size of each bootstrap sample, as in scikit-learn.

    ``None``: n; an int in [1, n]; a float in (0, 1]: ``max(round(f n), 1)``.
    """
    if max_samples is None:
        return int(n_samples)
    if not bootstrap:
        raise ValueError(
            "max_samples must be None when bootstrap=False (it sets the size of the "
            f"bootstrap sample), got max_samples={max_samples!r}"
        )
    if isinstance(max_samples, bool):
        raise TypeError(f"max_samples must be None, an int or a float, got {max_samples!r}")
    if isinstance(max_samples, numbers.Integral):
        if not 1 <= max_samples <= n_samples:
            raise ValueError(
                f"max_samples given as an int must be in [1, n_samples={n_samples}], "
                f"got {max_samples}"
            )
        return int(max_samples)
    if isinstance(max_samples, numbers.Real):
        if not 0.0 < float(max_samples) <= 1.0:
            raise ValueError(
                f"max_samples given as a float must be in (0, 1], got {max_samples}"
            )
        return max(int(round(float(max_samples) * n_samples)), 1)
    raise TypeError(
        "max_samples must be None, an int or a float, got "
        f"{type(max_samples).__name__} {max_samples!r}"
    )


def bootstrap_indices(
    seed: int, n_samples: int, n_draws: int, probabilities: np.ndarray | None = None
) -> np.ndarray:
    """Indices drawn with replacement for the tree whose bootstrap seed is ``seed``.

    ``probabilities``: each row's chance per draw, the normalised sample
    weights (None: uniform). As in scikit-learn 1.9, a weighted forest
    draws rows in proportion to their weights and grows each tree on the
    counts alone, so that a zero weight removes a row and an integer weight
    repeats it (in distribution), and a tree never draws only rows of zero
    weight.
    """
    rng = np.random.default_rng(int(seed))
    if probabilities is None:
        return rng.integers(0, n_samples, size=n_draws)
    return rng.choice(n_samples, size=n_draws, replace=True, p=probabilities)


def bootstrap_counts(
    seed: int, n_samples: int, n_draws: int, probabilities: np.ndarray | None = None
) -> np.ndarray:
    """How often each sample is drawn (Breiman 2001): float64 (n_samples,).

    ``probabilities`` as for :func:`bootstrap_indices`.
    """
    idx = bootstrap_indices(seed, n_samples, n_draws, probabilities)
    return np.bincount(idx, minlength=n_samples).astype(np.float64)


def resolve_n_jobs(n_jobs: Any) -> int | None:
    """Number of CPU threads for ``n_jobs`` (joblib's convention), None to leave as is."""
    if n_jobs is None:
        return None
    if isinstance(n_jobs, bool) or not isinstance(n_jobs, numbers.Integral):
        raise TypeError(f"n_jobs must be None or an int, got {type(n_jobs).__name__} {n_jobs!r}")
    if n_jobs == 0:
        raise ValueError("n_jobs must be a nonzero int or None, got 0")
    import numba

    available = int(numba.config.NUMBA_NUM_THREADS)
    if n_jobs < 0:
        return max(1, available + 1 + int(n_jobs))
    return min(int(n_jobs), available)


@contextlib.contextmanager
def numba_threads(n_jobs: Any) -> Iterator[None]:
    """Run the CPU kernels on ``n_jobs`` threads inside the block (None: unchanged)."""
    threads = resolve_n_jobs(n_jobs)
    if threads is None:
        yield
        return
    import numba

    previous = numba.get_num_threads()
    numba.set_num_threads(threads)
    try:
        yield
    finally:
        numba.set_num_threads(previous)


def out_of_memory_error(
    exc: BaseException, backend: Backend, batch: int, n_samples: int, n_components: int,
    n_outputs: int,
) -> MemoryError:
    """A MemoryError that says what ran out and which parameters to lower."""
    where = "the GPU" if backend.is_gpu else "the host"
    return MemoryError(
        f"out of memory on {where} while growing a batch of {batch} trees "
        f"(n_samples={n_samples}, trees grown on m={n_components} outputs, "
        f"d={n_outputs} original outputs): lower batch_size (this batch had {batch} "
        "trees; batch_size=1 needs the least memory), n_components, or max_bins, or limit "
        f"the trees (max_depth, min_samples_leaf). Original error: {exc}"
    )
