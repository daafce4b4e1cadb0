"""Shared fitting and prediction of the random-output forests.

Joly, Geurts & Wehenkel (2014), Algorithms 1 and 2: every tree of a Random
Forest (Breiman 2001: bootstrap sample, ``k`` random candidate features per
node) or of an Extra-Trees ensemble (Geurts, Ernst & Wehenkel 2006: random
cut points) is grown on a random projection ``Y Phi_t^T`` of the outputs --
one shared ``Phi`` (Algorithm 1) or a fresh ``Phi_t`` per tree (Algorithm 2)
-- and its leaves are labelled with the mean ORIGINAL outputs of their
training samples; the forest predicts the average of its trees.

Fitting, in order (one seeded generator, ``random_state``):

1. inputs binned once (:class:`gpurpo.tree.BinMapper`);
2. three seeds per tree drawn up front, row after row: its bootstrap
   sample, its projection and its root (the node seeds of its growth), so
   none depends on how trees are batched, nor on ``n_estimators``;
3. trees grown in batches (:mod:`gpurpo.ensemble.forest.batches`): the
   targets of a batch come from one projection product
   (:mod:`gpurpo.ensemble.forest.projection_plan`), the batch grows level by
   level in one :func:`gpurpo.tree.grow_trees` call, each tree's leaves are
   labelled in the original space (:func:`gpurpo.tree.leaf_values`, sparse
   for sparse ``Y``), and the batch is packed for prediction
   (:mod:`gpurpo.ensemble.forest.tree_chunks`), where out-of-bag sums are
   accumulated if asked.

A forest is reproducible from ``random_state``, does not depend on the
batch size, and its first trees are those of a forest with fewer trees and
the same ``random_state``, which is what a warm start adds trees to.

:class:`BaseForest` is also the single-machine model that the Dask forests of
:mod:`gpurpo.dask` fit in stages over their workers and hand back (``to_local``).
Its extension API for such fits: :meth:`BaseForest.validated_params` (every
parameter checked, the trees' growth parameters), :meth:`BaseForest.check_sample_weight`
and :meth:`BaseForest.set_fitted_forest` (the fitted state from trees grown
elsewhere, :class:`~gpurpo.ensemble.forest.fitted_trees.FittedTrees`).
"""

from __future__ import annotations

import contextlib
import math
import numbers
import warnings
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
from sklearn.base import BaseEstimator
from sklearn.utils.validation import check_is_fitted
from threadpoolctl import threadpool_limits
from tqdm.auto import tqdm

from gpurpo._input_features import check_feature_names, check_n_features
from gpurpo._top_k import PREDICT_TOP_K_DOC, top_k_of_row_blocks
from gpurpo._validation import (
    check_array,
    check_choice,
    check_consistent_rows,
    check_has_outputs,
    check_int,
    check_weight_scale,
    is_sparse,
)
from gpurpo.backend import (
    DEVICE_NAMES,
    Backend,
    check_random_state,
    is_gpu_array,
    resolve_backend,
    serial_cpu_kernels,
    to_host,
)
from gpurpo.ensemble.forest.batches import (
    bootstrap_indices,
    forest_batches,
    n_bootstrap_samples,
    numba_threads,
    resolve_n_jobs,
)
from gpurpo.ensemble.forest.fitted_trees import FittedTrees
from gpurpo.ensemble.forest.growth import TreeGrowth
from gpurpo.ensemble.forest.projection_plan import ProjectionPlan
from gpurpo.ensemble.forest.tree_chunks import TreeChunk, chunk_leaf_rows, sparse_oob_mean
from gpurpo.ensemble.forest.warm_start import (
    WARM_FIXED,
    WARM_NO_NEW_TREES,
    Sampling,
    draw_counts,
    generator_at,
    param_key,
)
from gpurpo.tree import (
    BinMapper,
    GrowthParams,
    n_candidate_features,
    relabelling_outputs,
)
from gpurpo.tree.binning import check_max_bins
from gpurpo.tree.leaf_sums import leaf_sums_csr, prefers_leaf_sums, top_k_of_leaf_sums
from gpurpo.tree.predictor import Tree, apply_trees_block, row_blocks

__all__ = ["BaseForest", "OOB_MAX_BYTES"]

#: ``oob_score=True`` keeps the (n, d) float64 out-of-bag predictions
#: (``oob_decision_function_`` / ``oob_prediction_``); above it, sparse y on the CPU keeps
#: them as a CSR matrix, and other fits are refused.
OOB_MAX_BYTES = 2 * 1024**3

_OOB_WARNING = (
    "Some inputs do not have OOB scores: every tree was grown on them. This probably "
    "means too few trees were used to compute reliable OOB estimates; their OOB "
    "predictions are NaN (no entries, when kept sparse) and they are left out of oob_score_."
)


def _check_min_samples(value: Any, name: str, n: int, low_int: int) -> int:
    if isinstance(value, bool):
        raise TypeError(f"{name} must be an int or a float, got {value!r}")
    if isinstance(value, numbers.Integral):
        if value < low_int:
            raise ValueError(f"{name} given as an int must be >= {low_int}, got {value}")
        return int(value)
    if isinstance(value, numbers.Real):
        if not 0.0 < float(value) <= 1.0:
            raise ValueError(f"{name} given as a float must be in (0, 1], got {value}")
        return max(low_int, int(math.ceil(float(value) * n)))
    raise TypeError(f"{name} must be an int or a float, got {type(value).__name__} {value!r}")


def _check_optional_int(value: Any, name: str, low: int) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be an int or None, got {type(value).__name__} {value!r}")
    if value < low:
        raise ValueError(f"{name} must be >= {low} or None, got {value}")
    return int(value)


class BaseForest(BaseEstimator):
    """Fit/predict machinery shared by the four forest estimators.

    Subclasses define ``__init__`` (parameters and defaults, see
    :mod:`gpurpo.ensemble.forest`), ``_splitter`` ("best" for Random
    Forests, "random" for Extra-Trees) and the output handling of
    regression or classification.

    Extension API (for fits made elsewhere, as the distributed forests of
    :mod:`gpurpo.dask` make them): :meth:`validated_params`,
    :meth:`check_sample_weight` and :meth:`set_fitted_forest`.
    """

    _splitter = "best"

    def __sklearn_tags__(self) -> Any:
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = True
        tags.input_tags.sparse = True
        tags.target_tags.multi_output = True
        return tags

    # ------------------------------------------------------------ validation

    def validated_params(self, n_samples: int, n_features: int) -> GrowthParams:
        """Check every parameter of a fit on ``n_samples`` rows of ``n_features``.

        Hook of the extension API: the distributed forests of :mod:`gpurpo.dask`
        call it before any task runs, so that a bad parameter raises on the
        client as :meth:`fit` raises it, and grow their trees with what it
        returns. It changes nothing on the estimator.

        Parameters
        ----------
        n_samples, n_features : int
            The rows the trees are grown on (a fraction ``min_samples_leaf`` or
            ``min_samples_split`` is of these) and the features of ``X``.

        Returns
        -------
        GrowthParams
            The growth parameters of every tree, as :meth:`fit` grows them.

        Raises
        ------
        TypeError, ValueError
            Naming the parameter, for a value :meth:`fit` refuses.
        """
        self._check_forest_params()
        check_int(self.max_binned_bytes, "max_binned_bytes", low=1)
        return self._growth_params(n_samples, n_features)

    def _growth_params(self, n: int, p: int) -> GrowthParams:
        max_depth = _check_optional_int(self.max_depth, "max_depth", 1)
        max_leaf_nodes = _check_optional_int(self.max_leaf_nodes, "max_leaf_nodes", 2)
        min_split = _check_min_samples(self.min_samples_split, "min_samples_split", n, 2)
        min_leaf = _check_min_samples(self.min_samples_leaf, "min_samples_leaf", n, 1)
        mid = self.min_impurity_decrease
        if isinstance(mid, bool) or not isinstance(mid, numbers.Real):
            raise TypeError(f"min_impurity_decrease must be a float, got {mid!r}")
        if not (mid >= 0 and math.isfinite(mid)):
            raise ValueError(f"min_impurity_decrease must be a finite float >= 0, got {mid}")
        return GrowthParams(
            n_candidates=n_candidate_features(self.max_features, p),
            max_depth=max_depth,
            min_samples_split=min_split,
            min_samples_leaf=min_leaf,
            max_leaf_nodes=max_leaf_nodes,
            min_impurity_decrease=float(mid),
            splitter=self._splitter,
        )

    def _check_forest_params(self) -> None:
        n_est = self.n_estimators
        if isinstance(n_est, bool) or not isinstance(n_est, numbers.Integral):
            raise TypeError(
                f"n_estimators must be an int, got {type(n_est).__name__} {n_est!r}"
            )
        if n_est < 1:
            raise ValueError(f"n_estimators must be >= 1, got {n_est}")
        if not isinstance(self.bootstrap, (bool, np.bool_)):
            raise TypeError(f"bootstrap must be a bool, got {self.bootstrap!r}")
        if not (isinstance(self.oob_score, (bool, np.bool_)) or callable(self.oob_score)):
            raise TypeError(
                f"oob_score must be a bool or a callable score(y_true, y_pred), "
                f"got {self.oob_score!r}"
            )
        if self.oob_score is not False and not self.bootstrap:
            raise ValueError(
                "oob_score needs bootstrap=True (out-of-bag samples exist only with "
                f"bootstrap sampling), got oob_score={self.oob_score!r} with bootstrap=False"
            )
        check_max_bins(self.max_bins)
        if not isinstance(self.verbose, numbers.Integral) or self.verbose < 0:
            raise ValueError(f"verbose must be an int >= 0, got {self.verbose!r}")
        resolve_n_jobs(self.n_jobs)
        check_choice(self.device, "device", DEVICE_NAMES)
        self._warm()

    def _warm(self) -> bool:
        """Whether ``fit`` adds trees to the fitted forest (``warm_start``)."""
        if not isinstance(self.warm_start, (bool, np.bool_)):
            raise TypeError(f"warm_start must be a bool, got {self.warm_start!r}")
        return bool(self.warm_start) and "_chunks" in self.__dict__

    def _check_warm_start(self, backend: Backend, n: int, d: int, want_oob: bool) -> None:
        """Refuse a warm start that would change what the fitted trees share, or remove
        trees; warn when it adds none. ``n``, ``d``: the rows and outputs of this fit."""
        if "_tree_seed_state" not in self.__dict__:
            raise ValueError(
                "warm_start: this forest was fitted by a gpurpo without warm starts for "
                "forests; fit it again with warm_start=False first"
            )
        n_trees, n_old = int(self.n_estimators), self._n_trees
        if n_trees < n_old:
            raise ValueError(
                f"n_estimators={n_trees} must be larger or equal to len(estimators_)="
                f"{n_old} when warm_start=True"
            )
        if n_trees == n_old:
            warnings.warn(WARM_NO_NEW_TREES, UserWarning, stacklevel=4)
        other_rows = {s.n_samples for s in self._samplings()} - {n}
        if want_oob and other_rows:
            raise ValueError(
                f"warm_start with oob_score: X has {n} rows, but fitted trees drew their "
                f"samples from {min(other_rows)}; fit on the same training set, or "
                "without oob_score"
            )
        fixed = self.__dict__.get("_warm_fixed", {})
        for name in WARM_FIXED:
            if name in fixed and param_key(getattr(self, name)) != fixed[name]:
                raise ValueError(
                    f"warm_start: {name} differs from the first fit's (the fitted trees share "
                    f"it), got {getattr(self, name)!r}; fit with warm_start=False to change it"
                )
        fitted_on = self.__dict__.get("_backend_name")
        if fitted_on is not None and backend.name != fitted_on:
            raise ValueError(
                f"warm_start: the forest was fitted on the {fitted_on!r} backend, got data for "
                f"{backend.name!r}"
            )
        if d != self.n_outputs_:
            raise ValueError(
                f"warm_start: y must have {self.n_outputs_} outputs as in the first fit, got {d}"
            )

    def _check_X(self, X: Any, backend: Backend, reset: bool) -> Any:
        check_feature_names(self, X, reset=reset)
        Xv = check_array(X, "X", backend, allow_nan=True, accept_sparse=True, float32_range=True)
        if Xv.shape[1] < 1:
            raise ValueError(
                f"X has 0 feature(s) (shape={tuple(Xv.shape)}) while a minimum of 1 is required."
            )
        if Xv.dtype not in (backend.xp.float32, backend.xp.float64):
            Xv = Xv.astype(backend.xp.float64)
        if not backend.issparse(Xv):
            # C order: row blocks are contiguous for the traversal kernels, and the
            # binning never works on a view of the caller's array
            Xv = backend.xp.ascontiguousarray(Xv)
        check_n_features(self, Xv.shape[1], reset=reset)
        return Xv

    def check_sample_weight(self, sample_weight: Any, n_samples: int) -> np.ndarray | None:
        """The sample weights of a fit, validated, as :meth:`fit` uses them.

        Hook of the extension API, which :meth:`fit` also uses.

        Parameters
        ----------
        sample_weight : array (n_samples,) or None
            Finite non-negative weights (NumPy or CuPy) with a positive sum,
            within float32's range.
        n_samples : int
            The rows of ``X``.

        Returns
        -------
        float64 host ndarray (n_samples,), or None for None

        Raises
        ------
        TypeError
            For a sparse matrix or values that are not numbers.
        ValueError
            For another shape, or weights that are negative, not finite, all
            zero or beyond float32.
        """
        n = n_samples
        if sample_weight is None:
            return None
        if is_sparse(sample_weight):
            raise TypeError(
                "sample_weight must be a dense array of shape (n_samples,), got a sparse "
                f"matrix of shape {sample_weight.shape}"
            )
        try:
            w = np.asarray(to_host(sample_weight), dtype=np.float64)
        except (TypeError, ValueError) as exc:
            raise TypeError(f"sample_weight must be an array of numbers: {exc}") from exc
        if w.ndim != 1 or w.shape[0] != n:
            raise ValueError(
                f"sample_weight must have shape (n_samples,) = ({n},), got {tuple(w.shape)}"
            )
        if not np.isfinite(w).all() or (w < 0).any():
            raise ValueError("sample_weight must be finite and non-negative")
        check_weight_scale(w)
        return w

    # -------------------------------------------------------------- fitting

    def _fit_forest(self, X: Any, Y: Any, sample_weight: Any, backend: Backend) -> None:
        """Grow the forest on validated outputs ``Y`` (n, d) on ``backend``.

        Sets every fitted attribute except the output-specific ones (which
        the subclasses set) and returns nothing; out-of-bag sums, when asked
        for, are left in ``self._oob_raw`` for the subclass to score.

        With ``warm_start`` and a fitted forest, grows trees
        ``len(estimators_)`` to ``n_estimators - 1`` only: the bin edges and
        the projection plan of the first fit are reused, and the seeds of the
        new trees are drawn from the generator state the first fit drew its
        trees' seeds from (kept in ``_tree_seed_state``), so they are the
        trees a single fit with the larger ``n_estimators`` grows.
        """
        self._check_forest_params()
        warm = self._warm()
        X = self._check_X(X, backend, reset=not warm)
        check_consistent_rows(X=X, y=Y)
        check_has_outputs(Y)
        n, p = (int(s) for s in X.shape)
        d = int(Y.shape[1])
        sw = self.check_sample_weight(sample_weight, n)
        params = self._growth_params(n, p)
        n_draws = n_bootstrap_samples(self.max_samples, n, bool(self.bootstrap))
        draw_p = sw / sw.sum() if sw is not None and self.bootstrap else None
        n_trees = int(self.n_estimators)
        n_old = self._n_trees if warm else 0
        xp = backend.xp
        want_oob = self.oob_score is not False
        if warm:
            self._check_warm_start(backend, n, d, want_oob)
            mapper = self.bin_mapper_
            plan = self._plan
            rng = generator_at(self._tree_seed_state)
            with numba_threads(self.n_jobs):
                binned = mapper.transform(X, backend) if n_trees > n_old else None
        else:
            rng = check_random_state(self.random_state)
            mapper = BinMapper(
                max_bins=int(self.max_bins), max_binned_bytes=self.max_binned_bytes,
                random_state=rng,
            )
            with numba_threads(self.n_jobs):
                binned = mapper.fit_transform(
                    X, backend, None if sw is None else backend.asarray(sw)
                )
            plan = ProjectionPlan(
                self.projection, self.n_components, self.shared_projection, n, d, rng
            )
            self._tree_seed_state = rng.bit_generator.state
        m = plan.n_components
        # Three seeds per tree, row after row from the same generator state: tree t's
        # (bootstrap, projection, root) seeds do not depend on n_estimators, so a warm
        # start that draws them again for more trees gives the first trees theirs.
        drawn = rng.integers(0, 2**63 - 1, size=(n_trees, 3), dtype=np.int64)
        root_seeds = drawn[:, 2].astype(np.uint64)
        seeds = drawn[:, :2]
        if warm:
            seeds = np.concatenate([self._seeds, seeds[n_old:]])
        n_new = n_trees - n_old
        sparse_y = backend.issparse(Y)
        in_bag = min(n, n_draws)
        # the leaves' storage follows the outputs' density, not their container; the
        # projections of few-nonzero outputs are taken from the same CSR copy
        Y_leaves, leaf_storage = relabelling_outputs(Y, backend)
        Y_targets = Y_leaves if Y_leaves.dtype == xp.float32 else Y_leaves.astype(xp.float32)
        leaf_bytes = 12 * int(Y_leaves.nnz) if backend.issparse(Y_leaves) else 8 * d * in_bag
        batch, batches, workers = forest_batches(
            self.batch_size, n_old, n_new, n, m, leaf_bytes, backend, self.n_jobs
        )
        # Out-of-bag predictions: a dense (n, d) float64 sum, or, where that would exceed
        # OOB_MAX_BYTES for sparse outputs on the CPU, the sums of each row's leaf entries
        # over its out-of-bag trees once every tree is grown (gpurpo.tree.leaf_sums)
        sparse_oob = (
            want_oob and 8 * n * d > OOB_MAX_BYTES and sparse_y and backend.name == "numpy"
            and (not warm or self._csr_leaf_values(backend) is not None)
        )
        if want_oob and 8 * n * d > OOB_MAX_BYTES and not sparse_oob:
            raise ValueError(
                f"oob_score=True keeps the out-of-bag predictions as a dense float64 array of "
                f"shape {(n, d)} ({8 * n * d} bytes), more than {OOB_MAX_BYTES} (only sparse "
                "y on the CPU keeps them sparse); fit without oob_score and score a held-out "
                "set (the metrics and predict_top_k work in row blocks)"
            )
        oob_sum = xp.zeros((n, d), dtype=xp.float64) if want_oob and not sparse_oob else None
        oob_count = np.zeros(n, dtype=np.int64)
        in_bag = np.zeros((n_trees, n), dtype=bool) if sparse_oob else None
        sampling = Sampling(n_old, n_trees, n, n_draws, draw_p, bool(self.bootstrap))
        growth = TreeGrowth(
            binned, Y_leaves, Y_targets, leaf_storage, sw, bool(self.bootstrap), sampling,
            seeds, root_seeds, plan, params, backend, rng, type(self).__name__, self.verbose, X,
        )
        grow_batch = growth.grow

        def grow_batch_serially(b0: int, b1: int) -> tuple[TreeChunk, np.ndarray, float]:
            with serial_cpu_kernels():
                return grow_batch(b0, b1)

        def add_oob(chunk: TreeChunk, counts: Any, first_tree: int) -> None:
            counts = np.asarray(backend.to_host(counts))  # drawn on the device: one copy
            oob_count[:] += (counts == 0).sum(axis=0).astype(np.int64)
            if sparse_oob:
                in_bag[first_tree : first_tree + chunk.n_trees] = counts > 0
                return
            skip = backend.asarray(np.ascontiguousarray((counts > 0).T))
            chunk.accumulate(X, backend, oob_sum, skip=skip)

        chunks: list[TreeChunk] = list(self._chunks) if warm else []
        samplings = self._samplings() if warm else []
        with numba_threads(self.n_jobs), contextlib.ExitStack() as stack:
            # a progress bar over the trees (terminal or notebook), on stderr
            bar = stack.enter_context(tqdm(
                total=n_trees, initial=n_old, desc=type(self).__name__, unit="tree",
                disable=not self.verbose, leave=True,
            ))
            if want_oob and warm:
                start = 0
                for chunk in chunks:
                    stop = start + chunk.n_trees
                    add_oob(chunk, self._tree_counts(samplings, start, stop), start)
                    start = stop
            if workers > 1:
                if not plan.per_tree:
                    plan.targets(Y_targets, seeds[:1, 1], backend)  # the shared targets, once
                # one BLAS thread per batch thread (dense projection products)
                stack.enter_context(threadpool_limits(limits=1, user_api="blas"))
                pool = stack.enter_context(ThreadPoolExecutor(max_workers=workers))
                futures = [pool.submit(grow_batch_serially, b0, b1) for b0, b1 in batches]
                stack.callback(lambda: [f.cancel() for f in futures])
                grown: Any = (f.result() for f in futures)
            else:
                grown = (grow_batch(b0, b1) for b0, b1 in batches)
            for (b0, b1), (chunk, counts, seconds) in zip(batches, grown):
                chunks.append(chunk)
                if want_oob:
                    add_oob(chunk, counts, b0)
                if self.verbose:
                    bar.set_postfix_str(
                        f"batch of {b1 - b0} in {seconds:.2f} s on {backend.name}"
                        f"{f', {workers} batches at a time' if workers > 1 else ''}",
                        refresh=False,
                    )
                    bar.update(b1 - b0)
            if sparse_oob:
                oob_mean = sparse_oob_mean(X, chunks, in_bag, oob_count, backend)
        plan.clear()
        if n_new > 0:
            samplings.append(sampling)
        self._set_fitted(chunks, plan, seeds, samplings, mapper, d, int(batch), backend.name,
                         fixed_now=not warm)
        self._oob_raw = None
        if want_oob:
            self._oob_raw = (oob_mean, oob_count, True) if sparse_oob else (oob_sum, oob_count,
                                                                             False)

    def _set_fitted(
        self, chunks: list[TreeChunk], plan: ProjectionPlan, seeds: np.ndarray,
        samplings: list[Sampling], mapper: BinMapper, n_outputs: int, batch: int,
        backend_name: str, fixed_now: bool,
    ) -> None:
        """Set the fitted attributes shared by every forest from its grown trees.

        ``seeds``: every tree's (bootstrap, projection) seeds; ``samplings``: how
        each fit call's trees drew their rows; ``fixed_now``: record the
        parameters the trees share (a first fit, not a warm start).
        """
        self._chunks = chunks
        self._plan = plan
        self._seeds = seeds
        self._sampling_records = samplings
        self._n_trees = int(seeds.shape[0])
        self._estimators_cache = None
        self._backend_name = backend_name
        if fixed_now:
            self._warm_fixed = {name: param_key(getattr(self, name)) for name in WARM_FIXED}
        self.bin_mapper_ = mapper
        self.n_outputs_ = int(n_outputs)
        self.n_projected_outputs_ = int(plan.n_components)
        self.projection_ = plan.shared_components
        self.batch_size_ = int(batch)

    def set_fitted_forest(self, trees: FittedTrees, n_features: int, *, y_1d: bool,
                          classes: np.ndarray | None = None, sparse_y: bool = False) -> None:
        """Make this estimator the forest of trees grown elsewhere.

        Hook of the extension API: the distributed forests of :mod:`gpurpo.dask`
        grow the trees on Dask workers exactly as :meth:`fit` grows them
        (:mod:`gpurpo.ensemble.forest.growth`) and hand them over here; the
        estimator then predicts, pickles and warm-starts as if :meth:`fit` had
        grown them. It sets every fitted attribute (``estimators_``,
        ``n_outputs_``, ``bin_mapper_``, ``n_features_in_``, ``classes_``,
        ...; no out-of-bag ones) and records the parameters that the trees
        share (:data:`~gpurpo.ensemble.forest.warm_start.WARM_FIXED`) from this
        estimator's, which must be those the trees were grown with.

        Parameters
        ----------
        trees : FittedTrees
            Every tree, in order, and what they share.
        n_features : int
            The features of ``X``.
        y_1d : bool
            Whether ``y`` was 1-D (the regressors then predict (n,); the
            classifiers' 1-D ``y`` holds single-label classes).
        classes : ndarray or None, default=None
            The classifiers' sorted classes of single-label ``y`` (one output
            per class); None for multi-label ``y`` (and for the regressors,
            which ignore it).
        sparse_y : bool, default=False
            Whether the validated multi-label ``y`` is a sparse matrix (the
            classifiers' ``predict`` is then a CSR matrix); the regressors
            ignore it.
        """
        self._set_fitted(trees.chunks, trees.plan, trees.seeds, trees.samplings,
                         trees.bin_mapper, trees.n_outputs, trees.batch_size,
                         trees.backend_name, fixed_now=True)
        self._tree_seed_state = trees.seed_state
        self._oob_raw = None
        check_n_features(self, n_features, reset=True)
        self._set_fitted_targets(y_1d, classes, sparse_y)

    def _set_fitted_targets(self, y_1d: bool, classes: np.ndarray | None,
                            sparse_y: bool) -> None:
        """The output-specific fitted state of :meth:`set_fitted_forest` (subclasses)."""
        raise NotImplementedError

    def _samplings(self) -> list[Sampling]:
        """How each fit call's trees drew their rows, in tree order."""
        records = self.__dict__.get("_sampling_records")
        if records is not None:
            return list(records)
        # a forest pickled before warm starts: one fit call grew every tree
        return [
            Sampling(0, self._n_trees, self._n_samples_fit, self._n_draws,
                      self.__dict__.get("_draw_p"), self._bootstrap)
        ]

    def _tree_counts(self, samplings: list[Sampling], start: int, stop: int) -> np.ndarray:
        """Draw counts (T, n) of the trees ``start`` to ``stop - 1``."""
        rows = []
        for s in samplings:
            lo, hi = max(start, s.start), min(stop, s.stop)
            if lo < hi:
                rows.append(draw_counts(s, self._seeds[lo:hi, 0]))
        return np.concatenate(rows)

    # ------------------------------------------------------------ prediction

    def _predict_sum(self, X: Any) -> tuple[Any, Backend, bool]:
        """Mean over the trees of the leaf values reached by X: float64 (n, d).

        Returns the array on the computing backend, the backend, and whether
        the result must go back to the host (host input computed on a GPU).
        """
        check_is_fitted(self, "n_outputs_")
        backend = resolve_backend(X, device=self.device)
        to_host_after = not is_gpu_array(X)
        X = self._check_X(X, backend, reset=False)
        xp = backend.xp
        out = xp.zeros((int(X.shape[0]), self.n_outputs_), dtype=xp.float64)
        with numba_threads(self.n_jobs):
            for chunk in self._chunks:
                chunk.accumulate(X, backend, out)
        out /= float(self._n_trees)
        return out, backend, to_host_after

    def _sparse_scores(self, X: Any, above: float | None = None) -> Any:
        """The mean leaf values as a CSR matrix, where the trees' leaves are sparse.

        On the CPU (host X) with CSR leaves, when summing each row's leaf
        entries beats dense blocks (:func:`gpurpo.tree.leaf_sums.prefers_leaf_sums`)
        or the dense (n, d) scores would exceed 256 MiB: the scores of
        :meth:`_predict_sum` at the columns the leaves hold (only those above
        ``above`` when given), bit for bit, and zeros elsewhere. None otherwise.
        """
        check_is_fitted(self, "n_outputs_")
        backend = resolve_backend(X, device=self.device)
        values = self._csr_leaf_values(backend)
        if values is None:
            return None
        X = self._check_X(X, backend, reset=False)
        n, d = int(X.shape[0]), int(self.n_outputs_)
        if not (prefers_leaf_sums(values, self._n_trees, d) or 8 * n * d > 256 * 1024**2):
            return None
        leaf_rows_of = chunk_leaf_rows(self._chunks, X, backend)
        with numba_threads(self.n_jobs):
            return leaf_sums_csr(n, d, float(self._n_trees), values, leaf_rows_of, above=above)

    def _csr_leaf_values(self, backend: Backend) -> list[Any] | None:
        """The chunks' CSR leaf values, on the CPU backend; None otherwise (the leaf
        sums of :mod:`gpurpo.tree.leaf_sums` are CPU kernels)."""
        if backend.name != "numpy":
            return None
        values = [chunk.values_on(backend) for chunk in self._chunks]
        return values if all(backend.issparse(v) for v in values) else None

    def predict_top_k(self, X: Any, k: int = 5) -> tuple[Any, Any]:
        check_is_fitted(self, "n_outputs_")
        k = check_int(k, "k", low=1, high=self.n_outputs_)
        backend = resolve_backend(X, device=self.device)
        to_host_after = not is_gpu_array(X)
        X = self._check_X(X, backend, reset=False)
        xp = backend.xp
        n, d = int(X.shape[0]), int(self.n_outputs_)
        values = self._csr_leaf_values(backend)
        if values is not None and prefers_leaf_sums(values, self._n_trees, d):
            # each row's sums over the columns its leaves reach (gpurpo.tree.leaf_sums)
            leaf_rows_of = chunk_leaf_rows(self._chunks, X, backend)
            with numba_threads(self.n_jobs):
                return top_k_of_leaf_sums(n, d, k, float(self._n_trees), values, leaf_rows_of)

        def block_scores(r0: int, r1: int) -> Any:
            block = xp.zeros((r1 - r0, d), dtype=xp.float64)
            for chunk in self._chunks:
                chunk.accumulate(X[r0:r1], backend, block)
            block /= float(self._n_trees)
            return block

        with numba_threads(self.n_jobs):
            indices, scores = top_k_of_row_blocks(n, d, k, block_scores, backend)
        if to_host_after:
            return to_host(indices), to_host(scores)
        return indices, scores

    predict_top_k.__doc__ = PREDICT_TOP_K_DOC.format(
        scores="Their predictions: those of predict_proba for classifiers and of predict "
        "for regressors.")

    def apply(self, X: Any) -> Any:
        """Index of the leaf reached by each row in each tree: int (n, n_estimators).

        Node indices refer to each tree's own node arrays
        (``estimators_[t].children_left`` etc.), as in scikit-learn.

        Parameters
        ----------
        X : array or sparse matrix (n, p)
            Inputs (NumPy/SciPy or CuPy/cupyx); NaN marks missing values.

        Returns
        -------
        int64 array (n, n_estimators)
            In the namespace of ``X``.
        """
        check_is_fitted(self, "n_outputs_")
        backend = resolve_backend(X, device=self.device)
        host = not is_gpu_array(X)
        X = self._check_X(X, backend, reset=False)
        xp = backend.xp
        out = xp.empty((int(X.shape[0]), self._n_trees), dtype=xp.int64)
        col = 0
        for chunk in self._chunks:
            offsets = backend.asarray(chunk.packed.node_offsets.astype(np.int64))
            for r0, block in row_blocks(X, backend, chunk.n_trees):
                nodes = apply_trees_block(chunk.packed, block, backend).astype(xp.int64)
                out[r0 : r0 + block.shape[0], col : col + chunk.n_trees] = nodes - offsets[None, :]
            col += chunk.n_trees
        return to_host(out) if host else out

    # ------------------------------------------------------------ inspection

    @property
    def estimators_(self) -> list[Tree]:
        """The fitted trees (:class:`gpurpo.tree.Tree`: node arrays and leaf values)."""
        if "_chunks" not in self.__dict__:
            raise AttributeError(f"{type(self).__name__} has no estimators_ before fit")
        if self._estimators_cache is None:
            self._estimators_cache = [c.tree(i) for c in self._chunks for i in range(c.n_trees)]
        return self._estimators_cache

    @property
    def estimators_samples_(self) -> list[np.ndarray]:
        """Indices of the samples drawn for each tree (with repeats; all without bootstrap)."""
        check_is_fitted(self, "n_outputs_")
        samples = []
        for s in self._samplings():
            for seed in self._seeds[s.start : s.stop, 0]:
                samples.append(
                    bootstrap_indices(seed, s.n_samples, s.n_draws, s.draw_p) if s.bootstrap
                    else np.arange(s.n_samples)
                )
        return samples

    @property
    def feature_importances_(self) -> np.ndarray:
        """Mean decrease of impurity per feature, normalised to sum to 1.

        Each tree's importances are the summed gains of its splits on each
        feature -- the weighted decrease of the summed variance of the
        outputs the tree was grown on (the projected outputs, Joly et al.
        2014) -- normalised per tree, then averaged over the trees that have
        at least one split and normalised again (Breiman 2001; as
        scikit-learn). All zeros when no tree has a split.
        """
        check_is_fitted(self, "n_outputs_")
        p = self.n_features_in_
        per_tree = []
        for chunk in self._chunks:
            for s in chunk.structures:
                internal = s.feature >= 0
                if not internal.any():
                    continue
                imp = np.bincount(
                    s.feature[internal], weights=np.maximum(s.gain[internal], 0.0), minlength=p
                )
                total = imp.sum()
                per_tree.append(imp / total if total > 0 else imp)
        if not per_tree:
            return np.zeros(p)
        mean = np.mean(per_tree, axis=0)
        total = mean.sum()
        return mean / total if total > 0 else mean

    def get_projection(self, i: int) -> Any:
        """The projection matrix (m, d) tree ``i`` was grown on (None without projection).

        Per-tree projections are not stored (100 trees x m x d could be
        large); they are drawn again from the tree's seed, on the host.

        Parameters
        ----------
        i : int
            Index of the tree, ``0 <= i < n_estimators``.

        Returns
        -------
        ndarray, SciPy CSR matrix or None
            ``Phi_i`` (m, d) on the host (the shared ``projection_`` for
            every ``i`` with ``shared_projection=True``); None with
            ``projection=None``.

        Raises
        ------
        ValueError
            If ``i`` is out of range.
        """
        check_is_fitted(self, "n_outputs_")
        i = check_int(i, "i")
        if not 0 <= i < self._n_trees:
            raise ValueError(f"i must be in [0, n_estimators={self._n_trees}), got {i}")
        return self._plan.components(int(self._seeds[i, 1]))

    def __setstate__(self, state: dict) -> None:
        # forests pickled before warm_start existed
        state.setdefault("warm_start", False)
        super().__setstate__(state)

    def __getstate__(self) -> dict:
        # Leaf values (TreeChunk) and out-of-bag arrays go to the host, so a model
        # fitted on a GPU unpickles on a machine without one.
        state = dict(super().__getstate__())
        state["_estimators_cache"] = None
        for name in ("oob_prediction_", "oob_decision_function_"):
            if name in state:
                state[name] = to_host(state[name])
        return state

    # ---------------------------------------------------------------- oob

    def _drop_oob(self, *names: str) -> None:
        """Forget the out-of-bag attributes of an earlier fit (they scored other trees)."""
        for name in names:
            self.__dict__.pop(name, None)

    def _oob_mean(self, backend: Backend) -> tuple[Any, np.ndarray]:
        """OOB mean predictions and the valid rows (those some tree left out).

        Dense: NaN rows where no tree left the sample out. Sparse (a CSR
        matrix, see :func:`_sparse_oob_mean`): no entries in those rows.
        """
        oob_sum, oob_count, is_mean = self._oob_raw
        xp = backend.xp
        valid = oob_count > 0
        if not valid.all():
            warnings.warn(_OOB_WARNING, UserWarning, stacklevel=3)
        if is_mean:
            return oob_sum, np.flatnonzero(valid)
        count = backend.asarray(np.maximum(oob_count, 1).astype(np.float64))
        # in place: the (n, d) sums become the means, without a copy of that size
        mean = oob_sum
        mean /= count[:, None]
        if not valid.all():
            mean[backend.asarray(np.flatnonzero(~valid))] = xp.nan
        return mean, np.flatnonzero(valid)
