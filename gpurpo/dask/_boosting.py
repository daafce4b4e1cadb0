"""Multi-output gradient boosting on rows split over Dask workers.

:class:`GradientBoostingRegressor` and :class:`GradientBoostingClassifier`
fit the models of :mod:`gpurpo.ensemble.boosting` (Joly, Wehenkel & Geurts
2019) on a ``dask.array`` chunked by rows, in the data-parallel scheme of
XGBoost (Chen & Guestrin 2016, section 4.1):

1. the bin edges are fitted once, on the client, from the rows the
   single-machine estimator would sample (all rows up to 200,000), and
   shared;
2. each worker bins the row blocks it holds into one
   :class:`~gpurpo.dask._partition.BoostingPartition` (a Dask actor), which
   keeps its rows' codes, outputs, scores and gradients for the whole fit:
   no row data moves after that;
3. per iteration the client draws the projection, the workers project their
   gradients, and the tree is grown by
   :class:`~gpurpo.dask._grower.DistributedGrower`: per level the workers'
   partial histograms of the frontier nodes are summed on the client, the
   splits are chosen there with the library's split scoring and tie rule,
   broadcast, and every worker partitions its rows;
4. leaf values, the per-output step (least squares, or the safeguarded
   Newton search of the logistic loss, whose derivatives are summed over the
   workers at every Newton iteration) and the training loss are sums of
   per-worker statistics.

The random draws (bin sample, projections, root seeds) are made on the
client with the single-machine estimator's generator in its order, so a
``random_state`` gives the single-machine model up to float rounding: the
histograms are float32 sums taken in another order (per worker, then across
workers), and the single-machine grower splits nodes of at most 512 rows
(every node of a sparse ``X``) exactly from their samples rather than from
histograms. Both give the same split up to rounding in near-ties, which the
tie rule absorbs; the sums are not fixed-point, so bit-identity is not
guaranteed.
"""

from __future__ import annotations

import copy
from typing import Any

import dask.array as da
import numpy as np
import scipy.sparse as sp
from sklearn.base import BaseEstimator, ClassifierMixin, RegressorMixin
from sklearn.exceptions import NotFittedError

from gpurpo.backend import NUMPY, check_random_state
from gpurpo.dask._grower import BinEdges, DistributedGrower, Traffic, Workers
from gpurpo.dask._params import CLIENT, init_with
from gpurpo.dask._partition import BoostingPartition, stack_rows
from gpurpo.ensemble.boosting import GradientBoostingClassifier as _LocalClassifier
from gpurpo.ensemble.boosting import GradientBoostingRegressor as _LocalRegressor
from gpurpo.ensemble.boosting.iteration_trees import draw_projection, leaf_means
from gpurpo.ensemble.boosting.losses import log_odds
from gpurpo.ensemble.boosting.staged_model import Stage, StagedModel
from gpurpo.ensemble.boosting.step_sizes import least_squares_ratio, logistic_search
from gpurpo.tree.binning import BinMapper, canonical_csc
from gpurpo.tree.grower import run_best_first, run_level_wise

__all__ = ["GradientBoostingClassifier", "GradientBoostingRegressor"]


# -- input checks on the metadata (before any task runs) ------------------------


def _check_rows(A: Any, name: str, ndims: tuple[int, ...]) -> da.Array:
    if not isinstance(A, da.Array):
        raise TypeError(
            f"{name} must be a dask.array.Array chunked by rows, got {type(A).__name__}; use "
            "gpurpo.ensemble for in-memory arrays"
        )
    if A.ndim not in ndims:
        raise ValueError(f"{name} must be a {' or '.join(f'{k}-D' for k in ndims)} dask array, "
                         f"got shape {A.shape}")
    if any(np.isnan(s) for s in A.shape):
        raise ValueError(f"{name} has unknown chunk sizes (shape {A.shape}); call "
                         f"{name}.compute_chunk_sizes() first")
    if A.ndim == 2 and len(A.chunks[1]) > 1:
        raise ValueError(
            f"{name} must be chunked by rows only (one block of columns), got "
            f"{len(A.chunks[1])} blocks of columns; use {name}.rechunk({{1: -1}})"
        )
    return A


def _check_X_y(X: Any, y: Any) -> tuple[da.Array, da.Array]:
    X = _check_rows(X, "X", (2,))
    y = _check_rows(y, "y", (1, 2))
    if X.shape[0] != y.shape[0]:
        raise ValueError(f"X and y must have the same number of rows, got {X.shape[0]} and "
                         f"{y.shape[0]}")
    if X.chunks[0] != y.chunks[0]:
        raise ValueError(
            f"X and y must have the same row chunks, got {X.chunks[0]} and {y.chunks[0]}; use "
            "y.rechunk({0: X.chunks[0]})"
        )
    if X.shape[0] < 1 or X.shape[1] < 1:
        raise ValueError(f"X must have at least 1 row and 1 column, got shape {X.shape}")
    return X, y


def _distinct(block: Any) -> np.ndarray:
    """The distinct values of a block (with 0 for the implicit zeros of a sparse one)."""
    if sp.issparse(block):
        values = block.data
        if block.nnz < block.shape[0] * block.shape[1]:
            values = np.concatenate([values, np.zeros(1, dtype=values.dtype)])
        return np.unique(values)
    return np.unique(np.asarray(block))


def _take_rows(block: Any, rows: np.ndarray) -> Any:
    return block[rows]


class _DistributedLine:
    """The logistic line of :func:`logistic_search` with its sums over the workers."""

    def __init__(self, workers: Workers, values: np.ndarray) -> None:
        self.workers = workers
        self.hmax = np.max(workers.call("steps", "line_open", values), axis=0)

    def max_abs_step_direction(self) -> np.ndarray:
        return self.hmax

    def derivatives(self, rho: Any, columns: Any = None) -> tuple[np.ndarray, np.ndarray]:
        columns = np.ones(rho.shape[0], dtype=bool) if columns is None else columns
        parts = self.workers.call("steps", "line_derivatives", np.asarray(rho, dtype=np.float64),
                                  np.asarray(columns, dtype=bool))
        return (np.sum([a for a, _ in parts], axis=0), np.sum([b for _, b in parts], axis=0))


class _DaskGradientBoosting(BaseEstimator):
    """The distributed fit and the per-block prediction shared by both estimators."""

    _local_class: type = _LocalRegressor

    # -- parameters ----------------------------------------------------------

    def _local_params(self) -> dict[str, Any]:
        params = self.get_params(deep=False)
        params.pop("client")
        return params

    def _check_distributed(self) -> None:
        """The parameters whose distributed fit is not implemented: a ValueError each."""
        fixed = {"leaf_step": "global", "subsample": 1.0, "n_iter_no_change": None,
                 "warm_start": False, "verbose": 0}
        for name, value in fixed.items():
            if getattr(self, name) != value or type(getattr(self, name)) is not type(value):
                if name == "subsample" and isinstance(self.subsample, (int, float)) and \
                        float(self.subsample) == 1.0:
                    continue
                raise ValueError(
                    f"{name}={getattr(self, name)!r} is not supported by gpurpo.dask's "
                    f"{type(self).__name__}, which fits with {name}={value!r}; use "
                    f"gpurpo.ensemble.{type(self).__name__} on in-memory data for it"
                )
        if self.device not in ("auto", "cpu"):
            raise ValueError(f"device={self.device!r} is not supported by gpurpo.dask: the "
                             "workers fit on their CPUs; use device='auto' or 'cpu'")
        if self.loss == "absolute_error":
            raise ValueError(
                "loss='absolute_error' is not supported by gpurpo.dask: its initial model and "
                "steps are weighted medians over all rows; use loss='squared_error'"
            )

    def _get_client(self) -> Any:
        if self.client is not None:
            return self.client
        import distributed

        try:
            return distributed.get_client()
        except ValueError as exc:
            raise ValueError(
                "no Dask client: pass client=distributed.Client(...) or create one first"
            ) from exc

    # -- fitting --------------------------------------------------------------

    def fit(self, X: Any, y: Any) -> _DaskGradientBoosting:
        """Fit the boosted model on the row-chunked Dask arrays ``X`` and ``y``.

        Parameters
        ----------
        X : dask.array.Array of shape (n_samples, n_features)
            Chunked by rows (one block of columns), NumPy or SciPy sparse
            blocks; NaN marks a missing value.
        y : dask.array.Array of shape (n_samples, n_outputs) or (n_samples,)
            Chunked by rows like ``X``.

        Returns
        -------
        self
        """
        X, y = _check_X_y(X, y)
        self._check_distributed()
        client = self._get_client()
        template = self._local_class(**self._local_params())
        n, p = (int(s) for s in X.shape)
        sizes = np.asarray(X.chunks[0], dtype=np.int64)
        offsets = np.concatenate([[0], np.cumsum(sizes)[:-1]])
        keep = np.flatnonzero(sizes > 0)
        x_futures = client.compute([X.to_delayed().ravel()[i] for i in keep])
        y_futures = client.compute([y.to_delayed().ravel()[i] for i in keep])
        d = self._prepare_targets(template, y, client, y_futures)
        cfg = template.validated_params(n, p, d)
        loss = cfg["loss"]
        rng = check_random_state(self.random_state)
        split_seed = int(rng.integers(0, 2**63 - 1))
        mapper = self._fit_bins(template, client, x_futures, sizes[keep], offsets[keep], rng)

        traffic = Traffic()
        workers = Workers(self._partitions(client, template, mapper, x_futures, y_futures),
                          traffic)
        del x_futures, y_futures
        try:
            model, steps, projections, train = self._boost(
                workers, mapper, cfg, loss, rng, n, p, d)
        finally:
            workers.actors.clear()
        self._finish(template, mapper, model, steps, projections, train, rng, split_seed, p)
        self.bytes_moved_per_level_ = np.asarray(traffic.levels, dtype=np.int64)
        self.bytes_moved_ = dict(traffic.by_kind)
        return self

    def _prepare_targets(self, template: Any, y: da.Array, client: Any,
                         y_futures: list[Any]) -> int:
        """Set the template's target encoding; return the number of outputs d.

        The regressor's encoding depends only on whether ``y`` is 1-D: one row
        of zeros of ``y``'s row shape sets it.
        """
        row = np.zeros((1, *(int(s) for s in y.shape[1:])), dtype=np.float64)
        return int(template.encode_targets(row, NUMPY, fitting=True).shape[1])

    def _fit_bins(self, template: Any, client: Any, x_futures: list[Any], sizes: np.ndarray,
                  offsets: np.ndarray, rng: np.random.Generator) -> BinMapper:
        """The bin edges of the single-machine fit: on the same sample of rows, on the client."""
        mapper = BinMapper(max_bins=int(self.max_bins), max_binned_bytes=self.max_binned_bytes,
                           random_state=rng)
        n = int(sizes.sum())
        if n > int(mapper.subsample):
            rows = np.sort(rng.choice(np.arange(n), size=int(mapper.subsample), replace=False))
            parts = []
            for fut, off, size in zip(x_futures, offsets, sizes):
                local = rows[(rows >= off) & (rows < off + size)] - off
                if len(local):
                    parts.append(client.submit(_take_rows, fut, local))
            blocks = client.gather(parts)
        else:
            blocks = client.gather(x_futures)
        sample = template.check_inputs(stack_rows(blocks), NUMPY)
        if sp.issparse(sample):
            sample = canonical_csc(sample)
        return mapper.fit(sample)

    def _partitions(self, client: Any, template: Any, mapper: BinMapper, x_futures: list[Any],
                    y_futures: list[Any]) -> list[Any]:
        """One :class:`BoostingPartition` actor per worker, built from the blocks it holds."""
        from distributed import wait

        wait(x_futures)
        who = client.who_has(x_futures)
        groups: dict[str, list[int]] = {}
        for i, fut in enumerate(x_futures):
            holders = sorted(who.get(fut.key, ()))
            groups.setdefault(holders[0] if holders else "", []).append(i)
        actors = []
        for address, idx in groups.items():
            actors.append(client.submit(
                BoostingPartition, [x_futures[i] for i in idx], [y_futures[i] for i in idx],
                template, mapper, self.strategy, template.loss, actor=True,
                workers=[address] if address else None, pure=False,
            ))
        return [a.result() for a in actors]

    def _boost(self, workers: Workers, mapper: BinMapper, cfg: dict[str, Any], loss: Any,
               rng: np.random.Generator, n: int, p: int, d: int) -> tuple[Any, ...]:
        """The boosting loop (Algorithms 2-4 with ``leaf_step="global"``) over the workers."""
        sums = workers.call("init", "init_sums")
        mean = np.sum([s for s, _ in sums], axis=0) / np.sum([t for _, t in sums])
        init = mean if loss.name == "squared_error" else log_odds(np, mean)
        workers.call("init", "start", init)
        model = StagedModel(NUMPY, init)
        edges = BinEdges(int(mapper.n_bins_), int(mapper.missing_bin_),
                         mapper.edge_values_, mapper.edge_ptr_)
        # the second-order gain where the loss has a non-constant hessian (for the squared
        # error it is the variance gain, which the single-machine fit then uses)
        newton = self.split_criterion == "newton" and loss.hessian(
            NUMPY, np.zeros((1, 1), dtype=np.float32)) is not None
        params = cfg["growth"]
        if newton:
            from dataclasses import replace

            params = replace(params, criterion="newton", reg_lambda=float(self.reg_lambda),
                             min_child_weight=float(self.min_child_weight)).validated()
        lr = float(self.learning_rate)
        steps, projections, train = [], [], []
        for m in range(int(self.n_estimators)):
            output = m % d if self.strategy == "single_target" else None
            projection = draw_projection(self.strategy, self.projection, cfg["n_components"], d,
                                         rng)
            replies = workers.call("tree_setup", "tree_targets", projection, output, newton)
            n_targets = replies[0][1]
            centre = None if newton else np.sum([r[0] for r in replies], axis=0) / float(n)
            roots = workers.call("tree_setup", "grow_start", centre, params)
            grower = DistributedGrower(workers, edges, n, p, n_targets, params, rng,
                                       [r[0] for r in roots], float(sum(r[1] for r in roots)))
            grow = run_best_first if params.max_leaf_nodes is not None else run_level_wise
            structure = grow(grower).structures[0]
            labels = workers.call("leaf_values", "label_sums", structure.n_leaves)
            values = leaf_means(np, np.sum([w for w, _ in labels], axis=0),
                                np.sum([s for _, s in labels], axis=0))
            if loss.name == "squared_error":
                parts = workers.call("steps", "step_sums", values)
                rho_c = least_squares_ratio(np, np.sum([a for a, _ in parts], axis=0),
                                            np.sum([b for _, b in parts], axis=0))
            else:
                rho_c = logistic_search(NUMPY, _DistributedLine(workers, values),
                                        d if output is None else 1)
            if output is None:
                rho = rho_c
            else:
                rho = np.zeros(d, dtype=np.float64)
                rho[output] = rho_c[0]
            scale = lr * rho
            train.append(np.sum(workers.call("updates", "update", values, scale)) / float(n))
            model.append(Stage(structure=structure, values=values, scale=scale, output=output))
            steps.append(rho)
            if projection is not None:
                projections.append(projection)
        return model, steps, projections, np.asarray(train, dtype=np.float64)

    def _finish(self, local: Any, mapper: BinMapper, model: StagedModel, steps: list[Any],
                projections: list[Any], train: np.ndarray, rng: np.random.Generator,
                split_seed: int, p: int) -> None:
        """The fitted attributes of the single-machine estimator, on ``local`` and here."""
        overflowed = np.flatnonzero(~np.isfinite(train))
        if overflowed.size:
            raise ValueError(
                f"the training loss overflowed at iteration {int(overflowed[0]) + 1} "
                f"(learning_rate={self.learning_rate!r}); lower learning_rate or rescale y"
            )
        local.set_fitted_model(model, steps, projections, train, bin_mapper=mapper,
                               n_features=p, rng=rng, split_seed=split_seed)
        self._local_model = local
        for name in ("n_estimators_", "init_", "steps_", "outputs_", "projections_",
                     "train_loss_", "validation_loss_", "bin_mapper_", "n_features_in_",
                     "n_outputs_", "classes_"):
            if hasattr(local, name):
                setattr(self, name, getattr(local, name))

    # -- the fitted model -------------------------------------------------------

    def to_local(self) -> Any:
        """The fitted model as the single-machine gpurpo estimator (picklable, no Dask).

        Returns
        -------
        gpurpo.ensemble.GradientBoostingRegressor or GradientBoostingClassifier
            A copy, with the parameters of this estimator (less ``client``).
        """
        return copy.deepcopy(self._fitted())

    def _fitted(self) -> Any:
        """The single-machine model of the fit (not a copy)."""
        if not hasattr(self, "_local_model"):
            raise NotFittedError(
                f"This {type(self).__name__} instance is not fitted yet. Call 'fit' with "
                "appropriate arguments before using this estimator."
            )
        return self._local_model

    def _map_blocks(self, X: Any, method: str) -> da.Array:
        """``method`` of the local model on every row block of ``X``, the model scattered once.

        The width and dtype of the result are those of ``method`` on one row of zeros.
        """
        model = self._fitted()
        X = _check_rows(X, "X", (2,))
        if int(X.shape[1]) != self.n_features_in_:
            raise ValueError(f"X has {X.shape[1]} features, but {type(self).__name__} was "
                             f"fitted with {self.n_features_in_} features")
        probe = np.asarray(getattr(model, method)(np.zeros((1, int(X.shape[1])))))
        columns = int(probe.shape[1]) if probe.ndim == 2 else None
        dtype = probe.dtype
        scattered = self._get_client().scatter(model, broadcast=True, hash=False)
        if columns is None:
            return X.map_blocks(_apply, scattered, method, dtype=dtype, drop_axis=1,
                                chunks=(X.chunks[0],), meta=np.empty((0,), dtype=dtype))
        return X.map_blocks(_apply, scattered, method, dtype=dtype,
                            chunks=(X.chunks[0], (columns,)),
                            meta=np.empty((0, 0), dtype=dtype))


def _apply(block: Any, model: Any, method: str) -> np.ndarray:
    return getattr(model, method)(block)


class GradientBoostingRegressor(RegressorMixin, _DaskGradientBoosting):
    """:class:`gpurpo.ensemble.GradientBoostingRegressor` fitted on row-chunked Dask arrays.

    The method and what moves between the machines: :mod:`gpurpo.dask._boosting`.
    For the same ``random_state`` the model is the single-machine one up to
    float rounding of the summed histograms.

    Parameters
    ----------
    strategy, loss, projection, n_components, leaf_step, split_criterion, reg_lambda,
    min_child_weight, learning_rate, n_estimators, max_leaf_nodes, max_depth,
    max_features, min_samples_leaf, subsample, max_bins, max_binned_bytes,
    validation_fraction, n_iter_no_change, tol, warm_start, random_state, device, verbose
        As in :class:`gpurpo.ensemble.GradientBoostingRegressor`. Distributed:
        every ``strategy``, ``split_criterion``, ``projection``,
        ``n_components``, ``max_leaf_nodes`` (best-first) or ``max_depth``
        (level-wise), ``max_features`` and ``min_samples_leaf``, with
        ``loss="squared_error"``; ``loss="absolute_error"``,
        ``leaf_step="per_leaf"``, ``subsample < 1``, ``n_iter_no_change``,
        ``warm_start=True``, ``verbose > 0`` and ``device="cuda"`` raise a
        ValueError naming the parameter.
    client : distributed.Client or None, default=None
        None: the current client (``distributed.get_client()``).

    Attributes
    ----------
    n_estimators_, init_, steps_, outputs_, projections_, train_loss_,
    validation_loss_, bin_mapper_, n_features_in_, n_outputs_
        As in the single-machine estimator.
    bytes_moved_per_level_ : int64 ndarray
        Bytes of array payload moved per tree level (all trees, in order):
        the workers' partial histograms sent to the client, the split
        decisions broadcast to every worker, and the workers' replies (rows
        sent left, the children's statistics).
    bytes_moved_ : dict
        Bytes moved over the whole fit by kind: ``"histograms"``,
        ``"splits"``, ``"tree_setup"``, ``"leaf_values"``, ``"steps"``,
        ``"updates"``, ``"init"``.
    """

    _local_class = _LocalRegressor
    __init__ = init_with(_LocalRegressor, CLIENT)

    def predict(self, X: Any) -> da.Array:
        """Predicted outputs of every row block: (n, d), or (n,) when fitted on a 1-D ``y``.

        Parameters
        ----------
        X : dask.array.Array of shape (n_samples, n_features), chunked by rows

        Returns
        -------
        dask.array.Array of float64, chunked by rows like ``X`` (lazy)
        """
        return self._map_blocks(X, "predict")


class GradientBoostingClassifier(ClassifierMixin, _DaskGradientBoosting):
    """:class:`gpurpo.ensemble.GradientBoostingClassifier` fitted on row-chunked Dask arrays.

    The method and what moves between the machines: :mod:`gpurpo.dask._boosting`.
    For the same ``random_state`` the model is the single-machine one up to
    float rounding of the summed histograms.

    Parameters
    ----------
    strategy, loss, projection, n_components, leaf_step, split_criterion, reg_lambda,
    min_child_weight, learning_rate, n_estimators, max_leaf_nodes, max_depth,
    max_features, min_samples_leaf, subsample, max_bins, max_binned_bytes,
    validation_fraction, n_iter_no_change, tol, warm_start, random_state, device, verbose
        As in :class:`gpurpo.ensemble.GradientBoostingClassifier`
        (``loss="log_loss"``); the same parameters as in
        :class:`GradientBoostingRegressor` are supported distributed.
    client : distributed.Client or None, default=None
        None: the current client (``distributed.get_client()``).

    Attributes
    ----------
    classes_, n_estimators_, init_, steps_, outputs_, projections_, train_loss_,
    validation_loss_, bin_mapper_, n_features_in_, n_outputs_
        As in the single-machine estimator.
    bytes_moved_per_level_, bytes_moved_
        As in :class:`GradientBoostingRegressor`.
    """

    _local_class = _LocalClassifier
    __init__ = init_with(_LocalClassifier, CLIENT)

    def _prepare_targets(self, template: Any, y: da.Array, client: Any,
                         y_futures: list[Any]) -> int:
        """The classes (or indicator values) from the distinct values of every block."""
        parts = client.gather([client.submit(_distinct, f) for f in y_futures])
        values = np.unique(np.concatenate(parts))
        if y.ndim == 2:
            values = np.tile(values[:, None], (1, int(y.shape[1])))
            if isinstance(y._meta, sp.spmatrix) or sp.issparse(y._meta):
                values = sp.csr_matrix(values)
        return int(template.encode_targets(values, NUMPY, fitting=True).shape[1])

    def predict(self, X: Any) -> da.Array:
        """Predicted labels of every row block (as the single-machine ``predict``).

        Returns
        -------
        dask.array.Array, chunked by rows like ``X`` (lazy)
        """
        return self._map_blocks(X, "predict")

    def predict_proba(self, X: Any) -> da.Array:
        """Label (or class) probabilities of every row block (float64, lazy)."""
        return self._map_blocks(X, "predict_proba")

    def decision_function(self, X: Any) -> da.Array:
        """Scores (log-odds) of every row block (float64, lazy)."""
        return self._map_blocks(X, "decision_function")

