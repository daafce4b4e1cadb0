"""The boosting loop shared by the regressor and the classifier (Algorithms 2-4).

The method and its references: :mod:`gpurpo.ensemble.boosting`.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
from sklearn.base import BaseEstimator
from sklearn.exceptions import NotFittedError

from gpurpo._input_features import check_feature_names, check_n_features
from gpurpo._top_k import PREDICT_TOP_K_DOC, top_k_of_row_blocks
from gpurpo._validation import (
    check_array,
    check_choice,
    check_consistent_rows,
    check_float,
    check_has_outputs,
    check_int,
    check_weight_scale,
)
from gpurpo.backend import (
    Backend,
    check_random_state,
    is_gpu_array,
    resolve_backend,
    to_host,
)
from gpurpo.ensemble.boosting._early_stopping import EarlyStopping, validation_split
from gpurpo.ensemble.boosting._progress import BoostingProgress
from gpurpo.ensemble.boosting.iteration_draws import IterationDraw, IterationDraws
from gpurpo.ensemble.boosting.iteration_trees import (
    STRATEGIES,
    StageTreeFitter,
    leaves_of,
)
from gpurpo.ensemble.boosting.losses import Loss, get_loss, weighted_mean
from gpurpo.ensemble.boosting.round_kernels import add_leaf_values
from gpurpo.ensemble.boosting.staged_model import Stage, StagedModel
from gpurpo.projections import KINDS, resolve_n_components
from gpurpo.tree import GrowthParams, n_candidate_features
from gpurpo.tree.binning import BinMapper, check_max_bins

__all__ = ["LEAF_STEPS", "SPLIT_CRITERIA"]


#: ``leaf_step`` values: one step per output (the paper) or per (leaf, output).
LEAF_STEPS = ("global", "per_leaf")
#: ``split_criterion`` values: first-order (the paper) or second-order (XGBoost) split gain.
SPLIT_CRITERIA = ("gradient", "newton")


def _out_of_memory_error(exc: BaseException, name: str, X: Any, y: Any) -> MemoryError:
    """A MemoryError that says what boosting keeps per output and what to lower.

    Gradient boosting on d outputs keeps dense (n, d) arrays: the outputs, the
    raw scores and the gradients (float64), whatever the projection the trees
    are grown on (Joly, Wehenkel & Geurts 2019 relabel the leaves in the full
    output space).
    """
    where = "the GPU" if is_gpu_array(X) or is_gpu_array(y) else "the host"
    n, d = _n_rows(X), _n_outputs(y)
    size = ""
    if n is not None and d is not None:
        size = (f" (n={n}, d={d}: {8 * n * d / 2**30:.2f} GiB for each (n, d) float64 "
                "array)")
    return MemoryError(
        f"out of memory on {where} while fitting {name}: gradient boosting keeps dense "
        f"(n, d) arrays of the outputs, raw scores and gradients{size}. Lower d (e.g. "
        "gpurpo.label_space.LabelSpaceClassifier with reducer='cssp' or 'plst' around a "
        "boosting model), fit on fewer rows, or use a random-output forest "
        "(gpurpo.ensemble.RandomForestClassifier), whose leaves stay sparse for sparse y. "
        f"Original error: {exc}"
    )


def _n_rows(X: Any) -> int | None:
    shape = getattr(X, "shape", None)
    return int(shape[0]) if shape is not None and len(shape) >= 1 else None


def _n_outputs(y: Any) -> int | None:
    shape = getattr(y, "shape", None)
    return int(shape[1]) if shape is not None and len(shape) == 2 else None


class _BaseGradientBoosting(BaseEstimator):
    """Fitting loop shared by the regressor and the multi-label classifier.

    Extension API (for fits made elsewhere, as the distributed boosting of
    :mod:`gpurpo.dask` makes them from the stages of the public modules of
    :mod:`gpurpo.ensemble.boosting`): :meth:`validated_params`,
    :meth:`check_inputs`, :meth:`encode_targets` and :meth:`set_fitted_model`.
    """

    _losses: tuple[str, ...] = ()

    # -- subclass hooks ----------------------------------------------------

    def encode_targets(self, Y: Any, backend: Backend, fitting: bool) -> Any:
        """The outputs (n, d) that the loss is fitted to, from ``y`` as :meth:`fit` takes it.

        Hook of the extension API, which :meth:`fit` also uses (and the
        subclasses define). With ``fitting=True`` it also records what
        ``y`` says about the outputs (whether it is 1-D; the classifier's
        ``classes_`` and kind of target), as :meth:`fit` does: a fit made
        elsewhere calls it once with ``fitting=True`` on ``y`` or on rows
        holding every distinct value of ``y`` (the classifier's classes come
        from the values), then with ``fitting=False`` on the blocks of ``y``.

        Parameters
        ----------
        Y : array or sparse matrix (n,) or (n, d)
            The targets (outputs, or the classifier's labels).
        backend : Backend
            Where the result goes.
        fitting : bool
            True for the ``y`` of a fit; False for other targets of the same
            kind (``eval_set``), checked against what the fit recorded
            (errors then name ``eval_set[1]``).

        Returns
        -------
        float64 array (n, d) on ``backend``
            The regressor's outputs, or the classifier's label columns of
            -1/+1.
        """
        raise NotImplementedError

    def _validation_score(self, Y: Any, F: Any) -> float:
        raise NotImplementedError

    _score_name = ""

    # -- parameters ----------------------------------------------------------

    def validated_params(self, n_samples: int, n_features: int, n_outputs: int) -> dict[str, Any]:
        """Check every parameter of a fit on data of this shape.

        Hook of the extension API, which :meth:`fit` also uses: it changes
        nothing on the estimator.

        Parameters
        ----------
        n_samples, n_features : int
            The rows and features of ``X``.
        n_outputs : int
            d, the columns of :meth:`encode_targets`.

        Returns
        -------
        dict
            ``"loss"``: the :class:`~gpurpo.ensemble.boosting.losses.Loss`;
            ``"n_components"``: the projections per iteration
            (``strategy="relabel_rpo"``; 1 otherwise); ``"growth"``: the
            validated :class:`~gpurpo.tree.GrowthParams` of every tree;
            ``"n_leaves"``: the most leaves a tree may have.

        Raises
        ------
        TypeError, ValueError
            Naming the parameter, for a value :meth:`fit` refuses.
        """
        check_choice(self.strategy, "strategy", STRATEGIES)
        loss = get_loss(self.loss, self._losses)
        if self.projection is not None and self.projection not in KINDS:
            raise ValueError(f"projection must be one of {KINDS} or None, got {self.projection!r}")
        if self.projection is None and self.strategy == "rpo":
            raise ValueError(
                "strategy='rpo' grows each tree on one random projection of the gradient and "
                f"needs a projection kind from {KINDS}, got projection=None"
            )
        # validated whatever the strategy (scikit-learn checks unused parameters too)
        resolved = resolve_n_components(self.n_components, n_outputs, n_samples)
        n_components = 1
        if self.strategy == "relabel_rpo" and self.projection is not None:
            n_components = resolved
            if self.projection in ("subsample",) and n_components > n_outputs:
                raise ValueError(
                    f"n_components={self.n_components!r} gives {n_components} components, more "
                    f"than the {n_outputs} outputs that projection='subsample' can draw "
                    "without replacement"
                )
        check_choice(self.leaf_step, "leaf_step", LEAF_STEPS)
        check_choice(self.split_criterion, "split_criterion", SPLIT_CRITERIA)
        check_float(self.reg_lambda, "reg_lambda", low=0.0)
        check_float(self.min_child_weight, "min_child_weight", low=0.0)
        if self.split_criterion == "newton":
            if not loss.twice_differentiable:
                raise ValueError(
                    f"split_criterion='newton' needs the second derivative of the loss; "
                    f"loss={loss.name!r} has none (it is piecewise linear): use "
                    "split_criterion='gradient'"
                )
        check_float(self.learning_rate, "learning_rate", low=0.0, low_inclusive=False)
        check_int(self.n_estimators, "n_estimators", low=1)
        if self.max_leaf_nodes is None and self.max_depth is None:
            raise ValueError(
                "max_leaf_nodes and max_depth are both None: boosting needs small trees, "
                "set at least one of them"
            )
        if self.max_leaf_nodes is not None:
            check_int(self.max_leaf_nodes, "max_leaf_nodes", low=2)
        if self.max_depth is not None:
            check_int(self.max_depth, "max_depth", low=1)
        check_int(self.min_samples_leaf, "min_samples_leaf", low=1)
        check_float(self.subsample, "subsample", low=0.0, high=1.0, low_inclusive=False)
        check_max_bins(self.max_bins)
        check_float(
            self.validation_fraction, "validation_fraction", low=0.0, high=1.0,
            low_inclusive=False, high_inclusive=False,
        )
        if self.n_iter_no_change is not None:
            check_int(self.n_iter_no_change, "n_iter_no_change", low=1)
        check_float(self.tol, "tol", low=0.0)
        check_int(self.verbose, "verbose", low=0)
        if not isinstance(self.warm_start, (bool, np.bool_)):
            raise TypeError(f"warm_start must be a bool, got {self.warm_start!r}")
        params = GrowthParams(
            n_candidates=n_candidate_features(self.max_features, n_features),
            max_depth=self.max_depth,
            min_samples_leaf=int(self.min_samples_leaf),
            max_leaf_nodes=self.max_leaf_nodes,
        ).validated()
        n_leaves = (
            int(self.max_leaf_nodes) if self.max_leaf_nodes is not None
            else 2 ** min(int(self.max_depth), 30)
        )
        return {"loss": loss, "n_components": n_components, "growth": params,
                "n_leaves": n_leaves}

    # -- input handling -----------------------------------------------------

    def check_inputs(self, X: Any, backend: Backend, name: str = "X") -> Any:
        """``X`` validated and converted as :meth:`fit` and the predictions take it.

        Hook of the extension API, which :meth:`fit` also uses: a fit made
        elsewhere validates its blocks of rows with it, so that the stacked
        blocks are the validated whole.

        Parameters
        ----------
        X : array or sparse matrix (n, p)
            Inputs, finite or NaN (a missing value).
        backend : Backend
            Where the result goes.
        name : str, default="X"
            The name of ``X`` in error messages.

        Returns
        -------
        array or sparse matrix (n, p) on ``backend``
            float32 or float64 (other dtypes become float64 when dense).

        Raises
        ------
        ValueError
            For infinite values, values beyond float32, or no feature.
        """
        X = check_array(X, name, backend, accept_sparse=True, allow_nan=True, float32_range=True)
        if X.shape[1] < 1:
            raise ValueError(
                f"Found array with 0 feature(s) (shape={tuple(X.shape)}) while a minimum of 1 "
                f"is required by {type(self).__name__}."
            )
        if not backend.issparse(X) and X.dtype not in (backend.xp.float32, backend.xp.float64):
            X = X.astype(backend.xp.float64)
        return X

    def _check_sample_weight(self, sample_weight: Any, n: int, backend: Backend) -> Any:
        xp = backend.xp
        if sample_weight is None:
            return xp.ones(n, dtype=xp.float64), True
        w = check_array(sample_weight, "sample_weight", backend, accept_sparse=False,
                        ensure_2d=False, dtype=None)
        if w.ndim != 1 or w.shape[0] != n:
            raise ValueError(
                f"sample_weight must have shape ({n},), got {tuple(w.shape)}"
            )
        w = w.astype(xp.float64)
        if bool((w < 0).any()):
            raise ValueError("sample_weight must be non-negative, got a negative weight")
        check_weight_scale(w)
        return w, bool((w == 1).all())

    def _predict_input(self, X: Any) -> tuple[Any, bool]:
        """X validated and moved to the model's backend; whether results go back to the host."""
        if not hasattr(self, "_model"):
            raise NotFittedError(
                f"This {type(self).__name__} instance is not fitted yet. Call 'fit' with "
                "appropriate arguments before using this estimator."
            )
        backend = self._model.backend
        to_host_out = not is_gpu_array(X)
        check_feature_names(self, X, reset=False)
        Xb = self.check_inputs(X, backend)
        check_n_features(self, Xb.shape[1], reset=False)
        return Xb, to_host_out

    # -- fitting --------------------------------------------------------------

    def fit(
        self,
        X: Any,
        y: Any,
        sample_weight: Any = None,
        eval_set: tuple[Any, Any] | None = None,
    ) -> _BaseGradientBoosting:
        """Fit the boosted model.

        Parameters
        ----------
        X : array or sparse matrix of shape (n_samples, n_features)
            Inputs (NumPy, CuPy, SciPy or cupyx sparse); NaN marks a missing
            value.
        y : array or sparse matrix of shape (n_samples, n_outputs) or (n_samples,)
            Targets (outputs, or labels for the classifier).
        sample_weight : array of shape (n_samples,), optional
            Non-negative sample weights.
        eval_set : (X_val, Y_val), optional
            Validation data for early stopping and progress reports; when
            absent and ``n_iter_no_change`` is set, a ``validation_fraction``
            of the training rows is held out.

        Returns
        -------
        self
        """
        if y is None:
            raise ValueError(
                f"{type(self).__name__} requires y to be passed, but the target y is None"
            )
        try:
            return self._fit(X, y, sample_weight, eval_set)
        except MemoryError as exc:
            raise _out_of_memory_error(exc, type(self).__name__, X, y) from exc

    def _fit(self, X: Any, y: Any, sample_weight: Any, eval_set: Any) -> _BaseGradientBoosting:
        """:meth:`fit`, whose memory errors say what to lower."""
        backend = resolve_backend(X, y, device=self.device)
        # a warm start checks the names of the first fit; a new fit records them
        check_feature_names(self, X, reset=not (bool(self.warm_start) and hasattr(self, "_model")))
        X = self.check_inputs(X, backend)
        Yb = self.encode_targets(y, backend, fitting=True)
        check_consistent_rows(X=X, Y=Yb)
        check_has_outputs(Yb)
        n, p = X.shape
        d = Yb.shape[1]
        cfg = self.validated_params(n, p, d)
        loss: Loss = cfg["loss"]
        w, unit = self._check_sample_weight(sample_weight, n, backend)
        xp = backend.xp

        warm = bool(self.warm_start) and hasattr(self, "_model")
        if warm:
            self._check_warm_start(backend, p, d)
            if self.n_estimators < len(self._model):
                raise ValueError(
                    f"n_estimators={self.n_estimators} must be larger or equal to the "
                    f"{len(self._model)} iterations already fitted when warm_start=True"
                )
        else:
            check_n_features(self, p, reset=True)
            self._rng = check_random_state(self.random_state)
            self._split_seed = int(self._rng.integers(0, 2**63 - 1))

        X, Yb, w, X_val, Y_val = self._validation_data(eval_set, X, Yb, w, backend)
        n = X.shape[0]

        binned = None
        if not warm:
            mapper = BinMapper(
                max_bins=int(self.max_bins), max_binned_bytes=self.max_binned_bytes,
                random_state=self._rng,
            )
            # bin edges from the rows that carry weight (a zero weight removes a row)
            if unit:
                binned = mapper.fit_transform(X, backend)
            else:
                mapper.fit(X[xp.nonzero(w > 0)[0]])
            self.bin_mapper_ = mapper
            self._warm_fixed = {name: getattr(self, name) for name in self._WARM_FIXED}
            self._model = StagedModel(backend, loss.init_estimate(backend, Yb, w))
            self._steps: list[Any] = []
            self._outputs: list[int | None] = []
            self.projections_ = []
            self.train_loss_ = np.zeros(0)
            self.validation_loss_ = np.zeros(0)
            self.n_outputs_ = d
            self.backend_ = backend
        if binned is None:
            binned = self.bin_mapper_.transform(X, backend)
        model = self._model
        F = model.raw_predict(X) if len(model) else xp.broadcast_to(model.init, (n, d)).copy()
        F_val = None
        if X_val is not None:
            F_val = model.raw_predict(X_val)

        fitter = StageTreeFitter(
            backend, binned, X, self.strategy, cfg["growth"], float(self.reg_lambda),
            float(self.min_child_weight),
        )
        stopper = EarlyStopping(self.n_iter_no_change, self.tol)
        if F_val is not None:
            stopper.start(len(model), float(loss.loss(backend, Y_val, F_val)))
        train_losses = []
        rng = self._rng
        n_rounds = int(self.n_estimators)
        progress = BoostingProgress(
            type(self).__name__, self.verbose, n_rounds, len(model), F_val is not None,
            self._score_name,
        )

        def score() -> float:
            return self._validation_score(Y_val, F_val)

        n_in = (max(1, int(round(float(self.subsample) * n))) if self.subsample < 1.0
                else None)
        draws = IterationDraws(backend, self.strategy, self.projection, cfg["n_components"],
                               d, n, n_in)
        G = loss.negative_gradient(backend, Yb, F)
        with progress:
            for m in range(len(model), n_rounds):
                stage, rho, projection = self._boost_one(
                    m, loss, cfg, fitter, backend, Yb, F, G, w, unit,
                    draws.next(rng, n_rounds - m), rng
                )
                model.append(stage)
                self._steps.append(rho)
                self._outputs.append(stage.output)
                if projection is not None:
                    self.projections_.append(projection)
                # the training loss of this iteration and the gradient of the next, in one pass
                G, rows = loss.gradient_and_row_loss(backend, Yb, F)
                train_losses.append(weighted_mean(backend, rows, None if unit else w))

                stop = False
                if F_val is not None:
                    val_leaf = leaves_of(stage.structure, X_val, backend)
                    F_val += stage.values[val_leaf] * stage.scale[None, :]
                    stop = stopper.update(len(model), float(loss.loss(backend, Y_val, F_val)))
                progress.update(
                    m + 1, train_losses[-1], stopper.history[-1] if F_val is not None else None,
                    score if F_val is not None else None, last=stop or m + 1 == n_rounds,
                )
                if stop:
                    progress.stopped(m + 1, stopper.best_iteration, int(self.n_iter_no_change))
                    break

        if self.n_iter_no_change is not None and F_val is not None:
            best = stopper.best_iteration
            if best < len(model):
                model.truncate(best)
                del self._steps[best:]
                del self._outputs[best:]
                del self.projections_[best:]
        new_train = (
            np.asarray(to_host(xp.stack(train_losses)), dtype=np.float64)
            if train_losses
            else np.zeros(0)
        )
        overflowed = np.flatnonzero(~np.isfinite(new_train))
        if overflowed.size:
            # checked once after the loop: a check per iteration would sync the device
            iteration = len(self.train_loss_) + int(overflowed[0]) + 1
            raise ValueError(
                f"the training loss overflowed at iteration {iteration} "
                f"(learning_rate={self.learning_rate!r}); lower learning_rate or rescale y"
            )
        self.train_loss_ = np.concatenate([self.train_loss_, new_train])[: len(model)]
        if F_val is not None:
            self.validation_loss_ = np.asarray(stopper.history)
        self.n_estimators_ = len(model)
        self.init_ = np.asarray(to_host(model.init))
        self.steps_ = (
            np.asarray(to_host(xp.stack([xp.asarray(r) for r in self._steps])))
            if self._steps else np.zeros((0, d))
        )
        self.outputs_ = list(self._outputs)
        return self

    def _validation_data(
        self, eval_set: Any, X: Any, Yb: Any, w: Any, backend: Backend
    ) -> tuple[Any, Any, Any, Any, Any]:
        """(X, Y, w) to train on and (X_val, Y_val), or Nones without validation."""
        n, p = X.shape
        d = Yb.shape[1]
        if eval_set is not None:
            if not isinstance(eval_set, (tuple, list)) or len(eval_set) != 2:
                raise ValueError(
                    "eval_set must be a pair (X_val, Y_val), got "
                    f"{type(eval_set).__name__} {eval_set!r:.80}"
                )
            check_feature_names(self, eval_set[0], reset=False)
            X_val = self.check_inputs(eval_set[0], backend, "eval_set[0]")
            Y_val = self.encode_targets(eval_set[1], backend, fitting=False)
            check_consistent_rows(**{"eval_set[0]": X_val, "eval_set[1]": Y_val})
            if X_val.shape[1] != p or Y_val.shape[1] != d:
                raise ValueError(
                    f"eval_set must have {p} features and {d} outputs like the training data, "
                    f"got X_val of shape {tuple(X_val.shape)} and Y_val of shape "
                    f"{tuple(Y_val.shape)}"
                )
            return X, Yb, w, X_val, Y_val
        if self.n_iter_no_change is None:
            return X, Yb, w, None, None
        train_idx, val_idx = validation_split(
            n, float(self.validation_fraction), np.random.default_rng(self._split_seed)
        )
        tr = backend.asarray(train_idx)
        va = backend.asarray(val_idx)
        if not float(w[tr].sum()) > 0:
            raise ValueError(
                "the rows left for training after holding out validation_fraction have "
                "zero total sample_weight"
            )
        return X[tr], Yb[tr], w[tr], X[va], Yb[va]

    def _boost_one(
        self,
        m: int,
        loss: Loss,
        cfg: dict[str, Any],
        fitter: StageTreeFitter,
        backend: Backend,
        Yb: Any,
        F: Any,
        G: Any,
        w: Any,
        unit: bool,
        draw: IterationDraw,
        rng: np.random.Generator,
    ) -> tuple[Stage, Any, Any]:
        """Iteration ``m`` (Algorithms 2-4, lines 4-8) from the gradient ``G`` at ``F``,
        with the iteration's random ``draw`` (subsample, projection, root seed).

        Updates ``F`` in place.

        Returns the stage, the step ``rho_m`` and the projection drawn.
        """
        xp = backend.xp
        n, d = F.shape
        rows = draw.rows
        w_iter, unit_iter = w, unit
        if rows is not None:
            # stochastic gradient boosting: the tree and the step see a random subset
            mask = xp.zeros(n, dtype=xp.float64)
            mask[rows] = 1.0
            w_iter, unit_iter = w * mask, False
            if not unit and not float(w_iter.sum()) > 0:
                w_iter, unit_iter, rows = w, unit, None
        output = m % d if self.strategy == "single_target" else None
        projection = draw.projection
        # second-order split: the loss's hessian (None for the squared error, whose
        # constant hessian makes the gain the variance criterion's)
        hessian = loss.hessian(backend, G) if self.split_criterion == "newton" else None
        structure, values, leaf = fitter.fit(
            G, w_iter, unit_iter, draw.device_projection, output, rng, hessian, draw.root_seed
        )
        lr = float(self.learning_rate)
        if self.leaf_step == "per_leaf":
            # every (leaf, output) gets its optimal value; the step is 1
            cols = slice(None) if output is None else slice(output, output + 1)
            values = loss.leaf_values(
                backend, Yb[:, cols], F[:, cols], G[:, cols], w_iter, leaf, int(values.shape[0])
            )
            rho = xp.zeros(d, dtype=xp.float64)
            rho[cols] = 1.0
            scale = lr * rho
        elif output is None:
            rho, scale = loss.fit_step_from_leaves(backend, Yb, F, w_iter, rows, G, leaf,
                                                   values, lr)
        else:
            H = values[leaf]
            if rows is not None:
                sel = rows
                Ys, Fs, Hs, ws, Gs, leaf_s = (Yb[sel], F[sel], H[sel], w_iter[sel], G[sel],
                                              leaf[sel])
            else:
                Ys, Fs, Hs, ws, Gs, leaf_s = Yb, F, H, w_iter, G, leaf
            j = output
            rho_j = loss.fit_step(
                backend, Ys[:, j : j + 1], Fs[:, j : j + 1], Hs, ws, Gs[:, j : j + 1],
                leaf=leaf_s, values=values,
            )
            rho = xp.zeros(d, dtype=xp.float64)
            rho[j] = rho_j[0]
            scale = lr * rho
        # the scores move by the scaled leaf values: every output, or the one of the stage
        if output is None:
            add_leaf_values(backend, F, values, leaf, scale)
        else:
            F[:, output] += scale[output] * values[leaf][:, 0]
        stage = Stage(structure=structure, values=values, scale=scale, output=output)
        return stage, rho, projection

    #: parameters that shape the stages already fitted: a warm start keeps them
    _WARM_FIXED = ("loss", "strategy", "max_bins")

    def set_fitted_model(
        self, model: StagedModel, steps: list[Any], projections: list[Any],
        train_loss: np.ndarray, *, bin_mapper: BinMapper, n_features: int,
        rng: np.random.Generator, split_seed: int,
    ) -> None:
        """Make this estimator the model of stages fitted elsewhere.

        Hook of the extension API: the distributed boosting of :mod:`gpurpo.dask`
        runs the iterations over Dask workers with the stages of
        :mod:`gpurpo.ensemble.boosting` and hands the model over here; the
        estimator then predicts, pickles and warm-starts as if :meth:`fit` had
        fitted it. :meth:`encode_targets` must have been called with
        ``fitting=True`` on this estimator (it records what ``y`` says about
        the outputs). Sets every fitted attribute (``n_estimators_``,
        ``init_``, ``steps_``, ``outputs_``, ``projections_``,
        ``train_loss_``, ``bin_mapper_``, ``n_features_in_``, ``n_outputs_``,
        ...; ``validation_loss_`` empty) and records the parameters that a
        warm start keeps from this estimator's, which must be those of the fit.

        Parameters
        ----------
        model : StagedModel
            The initial model and every iteration's stage, in order.
        steps : list of float64 arrays (d,)
            Every iteration's step ``rho_m`` (before the learning rate).
        projections : list of arrays
            The projection drawn at every iteration that draws one.
        train_loss : float64 ndarray (n_stages,)
            The training loss after every iteration.
        bin_mapper : BinMapper
            The bin edges the trees were grown on.
        n_features : int
            The features of ``X``.
        rng : numpy Generator
            The generator of the fit after its last draw (a warm start draws on).
        split_seed : int
            The seed of the validation split, the fit's first draw from
            ``random_state``.
        """
        self._rng = rng
        self._split_seed = int(split_seed)
        self.bin_mapper_ = bin_mapper
        self._warm_fixed = {name: getattr(self, name) for name in self._WARM_FIXED}
        self._model = model
        self._steps = list(steps)
        self._outputs = [stage.output for stage in model.stages]
        self.projections_ = list(projections)
        self.train_loss_ = train_loss
        self.validation_loss_ = np.zeros(0)
        self.n_outputs_ = model.n_outputs
        self.backend_ = model.backend
        self.n_features_in_ = int(n_features)
        self.n_estimators_ = len(model)
        self.init_ = np.asarray(to_host(model.init))
        self.steps_ = (np.stack([np.asarray(to_host(r)) for r in self._steps]) if self._steps
                       else np.zeros((0, self.n_outputs_)))
        self.outputs_ = list(self._outputs)

    def _check_warm_start(self, backend: Backend, p: int, d: int) -> None:
        fixed = self.__dict__.get("_warm_fixed", {})
        for name in self._WARM_FIXED:
            if name in fixed and getattr(self, name) != fixed[name]:
                raise ValueError(
                    f"warm_start: {name} was {fixed[name]!r} in the first fit, got "
                    f"{getattr(self, name)!r}; fit with warm_start=False to change it"
                )
        if backend.name != self._model.backend.name:
            raise ValueError(
                f"warm_start: the model was fitted on the {self._model.backend.name!r} backend, "
                f"got data for {backend.name!r}"
            )
        if p != self.n_features_in_ or d != self.n_outputs_:
            raise ValueError(
                f"warm_start: X and Y must have {self.n_features_in_} features and "
                f"{self.n_outputs_} outputs as in the first fit, got {p} and {d}"
            )

    # -- prediction -----------------------------------------------------------

    def _raw_predict(self, X: Any) -> tuple[Any, bool]:
        Xb, host = self._predict_input(X)
        return self._model.raw_predict(Xb), host

    def predict_top_k(self, X: Any, k: int = 5) -> tuple[Any, Any]:
        Xb, host = self._predict_input(X)
        k = check_int(k, "k", low=1, high=self.n_outputs_)
        indices, scores = top_k_of_row_blocks(
            int(Xb.shape[0]), int(self.n_outputs_), k,
            lambda r0, r1: self._ranked_outputs(self._model.raw_predict(Xb[r0:r1])),
            self._model.backend,
        )
        return (to_host(indices), to_host(scores)) if host else (indices, scores)

    predict_top_k.__doc__ = PREDICT_TOP_K_DOC.format(
        scores="Their predictions (predict of the regressor, the label probabilities "
        "sigmoid(F) of the classifier).")

    def _ranked_outputs(self, F: Any) -> Any:
        """The (rows, d) values :meth:`predict_top_k` ranks, from the raw scores ``F``."""
        return F

    def _staged_raw_predict(self, X: Any) -> Iterator[tuple[Any, bool]]:
        Xb, host = self._predict_input(X)
        for F in self._model.staged_raw_predict(Xb):
            yield F, host

    def apply(self, X: Any) -> Any:
        """Leaf reached by every sample in every iteration's tree: int (n, n_estimators_).

        Parameters
        ----------
        X : array or sparse matrix of shape (n_samples, n_features)
            Inputs; NaN marks a missing value.

        Returns
        -------
        int32 array of shape (n_samples, n_estimators_)
            Column m holds the index of the leaf of iteration m's tree, in
            ``[0, n_leaves)`` (a leaf index, not a node index as in the
            forests' ``apply``). On the host for host ``X``, else on the
            backend of fit.
        """
        Xb, host = self._predict_input(X)
        leaves = self._model.apply(Xb)
        return to_host(leaves) if host else leaves
