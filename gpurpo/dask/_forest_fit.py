"""One distributed forest fit: bin edges, seeds, then ranges of trees as Dask tasks.

The steps (:mod:`gpurpo.dask._forest` describes them): the rows of the bin
edges are drawn on the client as :class:`gpurpo.tree.BinMapper` draws them
and fitted in one task; the projection plan and every tree's seeds are drawn
on the client in the single-machine order; the rows are binned on the
workers and the ranges of trees grown by tasks
(:mod:`gpurpo.dask._forest_tasks`), from one growth copied to every worker
(``data="replicate"``) or one growth per worker on its own rows
(``data="local"``).
"""

from __future__ import annotations

from typing import Any

import dask
import dask.array as da
import numpy as np
from sklearn.base import is_classifier
from tqdm.auto import tqdm

from gpurpo.backend import check_random_state
from gpurpo.dask import _forest_tasks as tasks
from gpurpo.dask._cluster import Cluster
from gpurpo.dask._inputs import row_starts
from gpurpo.ensemble.forest.base import BaseForest
from gpurpo.ensemble.forest.batches import forest_batches, n_bootstrap_samples, tree_batches
from gpurpo.ensemble.forest.fitted_trees import FittedTrees
from gpurpo.ensemble.forest.projection_plan import ProjectionPlan
from gpurpo.ensemble.forest.warm_start import Sampling
from gpurpo.tree import GrowthParams
from gpurpo.tree.binning import BinMapper

__all__ = ["DistributedFit", "RANGES_PER_WORKER", "static_task"]

#: Tasks (ranges of trees) per worker: a lost worker costs about this fraction of its trees.
RANGES_PER_WORKER = 4


def _split(items: list[Any], parts: int) -> list[list[Any]]:
    """``items`` in at most ``parts`` consecutive groups as even as possible."""
    parts = max(1, min(parts, len(items)))
    bounds = [(j * len(items)) // parts for j in range(parts + 1)]
    return [items[bounds[j] : bounds[j + 1]] for j in range(parts)]


def _binning_rows(n: int, weights: np.ndarray | None, subsample: int,
                  rng: np.random.Generator) -> np.ndarray | None:
    """The rows the bin edges are fitted on (None: all), drawn as ``BinMapper.fit`` draws them."""
    candidates = np.arange(n) if weights is None else np.flatnonzero(weights > 0)
    if len(candidates) > subsample:
        return np.sort(rng.choice(candidates, size=int(subsample), replace=False))
    return None if len(candidates) == n else candidates


def static_task(value: Any) -> Any:
    """``value`` as a task argument handed over as it is (Dask does not look inside)."""
    return dask.delayed(value, traverse=False)


class DistributedFit:
    """One distributed fit: the steps of the module docstring.

    ``local`` is the single-machine forest of the Dask estimator ``est``'s
    parameters, ``params`` its :meth:`~BaseForest.validated_params` of every
    row; ``run`` makes it the fitted forest.
    """

    def __init__(self, est: Any, local: BaseForest, params: GrowthParams, cluster: Cluster,
                 backend: Any, X: da.Array, y: da.Array,
                 sample_weight: np.ndarray | None) -> None:
        self.est = est
        self.local = local
        self.params = params
        self.cluster = cluster
        self.backend = backend
        self.classifier = is_classifier(est)
        self.kind = "classification" if self.classifier else "regression"
        self.sw = sample_weight
        self.bootstrap = bool(local.bootstrap)
        self.n, self.p = (int(s) for s in X.shape)
        self.y_1d = y.ndim == 1
        self.X, self.y = X, y
        self.x_blocks: list[Any] = []
        self.y_blocks: list[Any] = []
        self.starts = row_starts(X.chunks[0])
        self.name = type(est).__name__
        self.regressor = self.name.replace("Classifier", "Regressor")

    def run(self) -> BaseForest:
        local, n, p = self.local, self.n, self.p
        params = self.params
        n_draws = n_bootstrap_samples(local.max_samples, n, self.bootstrap)
        single_label = self.classifier and self.y_1d
        if not single_label:
            d = 1 if self.y_1d else int(self.y.shape[1])
            if d < 1:
                raise ValueError(
                    f"y must have at least one output column, got shape {self.y.shape}")
            # the projection parameters checked before any task runs (nothing drawn is kept)
            ProjectionPlan(local.projection, local.n_components, local.shared_projection, n, d,
                           np.random.default_rng(0))
        self.X, self.y = self.cluster.persist(self.X, self.y)
        self.x_blocks = self.X.to_delayed().ravel().tolist()
        self.y_blocks = self.y.to_delayed().ravel().tolist()
        classes = self._classes()
        if single_label:
            d = int(classes.shape[0])
        rng = check_random_state(local.random_state)
        template = BinMapper(max_bins=int(local.max_bins),
                             max_binned_bytes=local.max_binned_bytes, random_state=rng)
        mapper_task = self._mapper_task(template, rng)
        groups = self._row_groups()
        (mapper_task,) = self.cluster.persist(mapper_task)
        # each group's outputs where its rows are (all rows on any worker, for "replicate")
        outputs = [
            self.cluster.persist(
                dask.delayed(tasks.outputs_of)(self.kind, classes, self.regressor,
                                               self.backend, *[self.y_blocks[i] for i in blocks]),
                worker=worker)[0]
            for worker, blocks in groups
        ]
        mapper, *summaries = self.cluster.compute(
            mapper_task, *[dask.delayed(tasks.outputs_summary)(o, self.backend) for o in outputs])
        mapper.random_state = rng
        # the generator's draws in the single-machine order: edges' rows, plan, seeds
        plan = ProjectionPlan(local.projection, local.n_components, local.shared_projection, n,
                              d, rng)
        seed_state = rng.bit_generator.state
        n_trees = int(local.n_estimators)
        drawn = rng.integers(0, 2**63 - 1, size=(n_trees, 3), dtype=np.int64)
        seeds, root_seeds = drawn[:, :2], drawn[:, 2].astype(np.uint64)
        spec = dict(bootstrap=self.bootstrap, seeds=seeds, root_seeds=root_seeds, plan=plan,
                    backend=self.backend, rng=None, name=self.name, verbose=local.verbose)
        if self.est.data == "replicate":
            growths, samplings, ranges, batch = self._replicate(
                mapper_task, outputs[0], summaries[0], spec, params, n_draws, d, n_trees)
        else:
            growths, samplings, ranges, batch = self._local(
                mapper_task, groups, outputs, summaries, spec, d, n_trees)
        chunks = self._grow(growths, ranges, n_trees)
        trees = FittedTrees(chunks, plan, seeds, samplings, mapper, d, batch, self.backend.name,
                            seed_state)
        local.set_fitted_forest(trees, p, y_1d=self.y_1d, classes=classes,
                                sparse_y=summaries[0][1])
        return local

    # -------------------------------------------------------------- outputs

    def _classes(self) -> np.ndarray | None:
        """The classes of single-label ``y`` over every block (None otherwise)."""
        if not self.classifier or not self.y_1d:
            return None
        per_block = self.cluster.compute(*[
            dask.delayed(tasks.block_classes)(block, self.regressor) for block in self.y_blocks
        ])
        return np.unique(np.concatenate(per_block))

    # ------------------------------------------------------------- binning

    def _mapper_task(self, template: BinMapper, rng: np.random.Generator) -> Any:
        """The task fitting the bin edges on the rows drawn as the single machine draws them."""
        rows = _binning_rows(self.n, self.sw, template.subsample, rng)
        pieces = []
        for i, block in enumerate(self.x_blocks):
            lo, hi = self.starts[i], self.starts[i + 1]
            local_rows = None
            if rows is not None:
                local_rows = rows[(rows >= lo) & (rows < hi)] - lo
                if local_rows.size == 0:
                    continue
            pieces.append(dask.delayed(tasks.rows_of_block)(block, local_rows, self.backend))
        weights = None
        if self.sw is not None:
            weights = self.sw if rows is None else self.sw[rows]
        fitted = BinMapper(max_bins=template.max_bins, subsample=template.subsample,
                           max_binned_bytes=template.max_binned_bytes)
        return dask.delayed(tasks.fit_mapper)(static_task(fitted), weights, *pieces)

    def _row_groups(self) -> list[tuple[str | None, list[int]]]:
        """Blocks grouped by the worker holding them (``data="local"``), else one group."""
        everything = list(range(len(self.x_blocks)))
        if self.est.data == "replicate":
            return [(None, everything)]
        groups: dict[str | None, list[int]] = {}
        for i, worker in enumerate(self.cluster.block_workers(self.X)):
            groups.setdefault(worker, []).append(i)
        return list(groups.items())

    # ------------------------------------------------------------- growing

    def _replicate(self, mapper_task: Any, outputs: Any, summary: tuple[int | None, bool],
                   spec: dict[str, Any], params: Any, n_draws: int, d: int,
                   n_trees: int) -> tuple[list[Any], list[Sampling], list[Any], int]:
        """One growth of every row, on every worker; ranges of the single-machine batches."""
        n, sw = self.n, self.sw
        nnz = summary[0]
        leaf_bytes = 12 * nnz if nnz is not None else 8 * d * min(n, n_draws)
        batch, batches, _ = forest_batches(self.local.batch_size, 0, n_trees, n,
                                           spec["plan"].n_components, leaf_bytes, self.backend,
                                           self.local.n_jobs)
        draw_p = sw / sw.sum() if sw is not None and self.bootstrap else None
        sampling = Sampling(0, n_trees, n, n_draws, draw_p, self.bootstrap)
        parts = [dask.delayed(tasks.bin_block)(mapper_task, block, self.backend)
                 for block in self.x_blocks]
        binned = dask.delayed(tasks.stack_binned_blocks)(mapper_task, self.backend, *parts)
        growth = dask.delayed(tasks.make_growth)(
            binned, outputs,
            static_task(dict(spec, sample_weight=sw, sampling=sampling, params=params)),
            *self.x_blocks)
        (growth,) = self.cluster.persist(growth)
        self.cluster.replicate(growth)
        wanted = RANGES_PER_WORKER * self.cluster.n_workers
        if len(batches) < wanted:
            # fewer batches than ranges (large batches on a GPU): smaller batches, one a
            # range; a tree does not depend on its batch
            batches = tree_batches(n_trees, -(-n_trees // wanted))
        ranges = [(growth, group, None) for group in _split(batches, wanted)]
        return [growth], [sampling], ranges, batch

    def _local(self, mapper_task: Any, groups: list[tuple[str | None, list[int]]],
               outputs: list[Any], summaries: list[tuple[int | None, bool]],
               spec: dict[str, Any], d: int, n_trees: int,
               ) -> tuple[list[Any], list[Sampling], list[Any], int]:
        """A growth per worker on its own rows, and its share of the trees."""
        local = self.local
        bounds = [(j * n_trees) // len(groups) for j in range(len(groups) + 1)]
        growths, samplings, ranges, batch = [], [], [], 1
        for g, (worker, blocks) in enumerate(groups):
            t0, t1 = bounds[g], bounds[g + 1]
            if t1 == t0:
                continue
            rows = np.concatenate([np.arange(self.starts[i], self.starts[i + 1]) for i in blocks])
            n_g = int(rows.shape[0])
            max_samples = local.max_samples
            if isinstance(max_samples, (int, np.integer)) and not isinstance(max_samples, bool):
                max_samples = min(int(max_samples), n_g)
            n_draws = n_bootstrap_samples(max_samples, n_g, self.bootstrap)
            sw = None if self.sw is None else self.sw[rows]
            if sw is not None and self.bootstrap and not sw.sum() > 0:
                raise ValueError(
                    f"sample_weight is zero on every row held by worker {worker}; with "
                    "data='local' each worker draws from its own rows: use data='replicate'"
                )
            draw_p = sw / sw.sum() if sw is not None and self.bootstrap else None
            sampling = Sampling(t0, t1, n_g, n_draws, draw_p, self.bootstrap)
            nnz = summaries[g][0]
            leaf_bytes = 12 * nnz if nnz is not None else 8 * d * min(n_g, n_draws)
            size, batches, _ = forest_batches(local.batch_size, t0, t1 - t0, n_g,
                                              spec["plan"].n_components, leaf_bytes,
                                              self.backend, local.n_jobs)
            batch = max(batch, size)
            binned = dask.delayed(tasks.bin_rows)(mapper_task, self.backend,
                                                  *[self.x_blocks[i] for i in blocks])
            growth = dask.delayed(tasks.make_growth)(
                binned, outputs[g],
                static_task(dict(spec, sample_weight=sw, sampling=sampling,
                             params=local.validated_params(n_g, self.p))),
                *[self.x_blocks[i] for i in blocks])
            (growth,) = self.cluster.persist(growth, worker=worker)
            growths.append(growth)
            samplings.append(sampling)
            ranges += [(growth, group, worker) for group in _split(batches, RANGES_PER_WORKER)]
        return growths, samplings, ranges, batch

    def _grow(self, growths: list[Any], ranges: list[Any], n_trees: int) -> list[Any]:
        """Run the ranges of trees (a progress bar over the trees with ``verbose``)."""
        range_tasks = [dask.delayed(tasks.grow_range)(growth, group, self.local.n_jobs)
                       for growth, group, _ in ranges]
        sizes = [sum(b1 - b0 for b0, b1 in group) for _, group, _ in ranges]
        with tqdm(total=n_trees, desc=self.name, unit="tree",
                  disable=not self.local.verbose, leave=True) as bar:
            results = self.cluster.run(range_tasks, [w for _, _, w in ranges],
                                       lambda i: bar.update(sizes[i]))
        order = np.argsort([group[0][0] for _, group, _ in ranges], kind="stable")
        return [chunk for i in order for chunk in results[i]]
