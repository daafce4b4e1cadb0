"""Where the tasks of a distributed fit run: a ``distributed.Client`` or Dask's scheduler.

:class:`Cluster` gives the few operations a fit needs (persist, compute,
replicate, the workers holding blocks, running a list of tasks with
progress) over either a ``distributed.Client`` -- the one given, or the
current one (``distributed.default_client``) -- or, when there is none,
Dask's default scheduler (``dask.persist`` / ``dask.compute``), so that the
estimators also run without a cluster.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import dask

__all__ = ["Cluster"]


def _current_client() -> Any:
    """The current ``distributed.Client``, or None (no client, or no distributed)."""
    try:
        from distributed import default_client
    except ImportError:  # pragma: no cover - distributed is part of the dask extra
        return None
    try:
        return default_client()
    except ValueError:
        return None


def _flat_keys(keys: Any) -> list[Any]:
    """The keys of a collection's blocks, row block after row block."""
    if isinstance(keys, list):
        return [key for sub in keys for key in _flat_keys(sub)]
    return [keys]


class Cluster:
    """The scheduler a fit runs its tasks on.

    Parameters
    ----------
    client : distributed.Client or None
        None: the current client, else Dask's default scheduler.
    """

    def __init__(self, client: Any = None) -> None:
        if client is not None and not hasattr(client, "submit"):
            raise TypeError(
                f"client must be a distributed.Client or None, got {type(client).__name__}"
            )
        self.client = client if client is not None else _current_client()

    @property
    def n_workers(self) -> int:
        """Workers of the cluster (1 on Dask's default scheduler)."""
        if self.client is None:
            return 1
        return max(1, len(self.client.scheduler_info().get("workers", {})))

    def persist(self, *objs: Any, worker: str | None = None) -> tuple[Any, ...]:
        """Dask collections computed and kept in memory (on ``worker`` first, when given)."""
        if self.client is None:
            return tuple(dask.persist(*objs))
        if worker is None:
            return tuple(self.client.persist(list(objs)))
        return tuple(self.client.persist(list(objs), workers=[worker], allow_other_workers=True))

    def compute(self, *objs: Any) -> tuple[Any, ...]:
        """Results of Dask collections, on the client."""
        if self.client is None:
            return tuple(dask.compute(*objs))
        return tuple(self.client.gather(self.client.compute(list(objs))))

    def replicate(self, *objs: Any) -> None:
        """Copy the data of persisted collections to every worker.

        A range of trees then starts where its worker stands, and the loss of a
        worker leaves the data on the others (and recomputable from its graph).
        """
        if self.client is None:
            return
        from distributed import futures_of

        futures = futures_of(list(objs))
        if futures and self.n_workers > 1:
            self.client.replicate(futures)

    def block_workers(self, array: Any) -> list[str | None]:
        """The worker holding each block of rows of a persisted Dask ``array``
        (None on Dask's default scheduler)."""
        keys = _flat_keys(array.__dask_keys__())
        if self.client is None:
            return [None] * len(keys)
        from distributed import futures_of, wait

        futures = futures_of(array)
        wait(futures)
        who_has = self.client.who_has(futures)
        return [min(who_has[key]) if who_has.get(key) else None for key in keys]

    def run(
        self, tasks: Sequence[Any], workers: Sequence[str | None], done: Callable[[int], None],
    ) -> list[Any]:
        """Results of the delayed ``tasks`` in order; ``done(i)`` as task ``i`` completes.

        With a client, task ``i`` runs on ``workers[i]`` when given (and
        elsewhere if that worker is lost).
        """
        if self.client is None:
            return self._run_locally(tasks, done)
        from distributed import as_completed

        futures = [
            self.client.compute(task, workers=None if w is None else [w],
                                allow_other_workers=True)
            for task, w in zip(tasks, workers)
        ]
        index = {future.key: i for i, future in enumerate(futures)}
        results: list[Any] = [None] * len(futures)
        try:
            for future, result in as_completed(futures, loop=self.client.loop,
                                               with_results=True):
                results[index[future.key]] = result
                done(index[future.key])
        finally:
            for future in futures:
                future.cancel()
        return results

    @staticmethod
    def _run_locally(tasks: Sequence[Any], done: Callable[[int], None]) -> list[Any]:
        from dask.callbacks import Callback

        keys = {task.key: i for i, task in enumerate(tasks)}

        def posttask(key: Any, result: Any, dsk: Any, state: Any, worker_id: Any) -> None:
            if key in keys:
                done(keys[key])

        with Callback(posttask=posttask):
            return list(dask.compute(*tasks))
