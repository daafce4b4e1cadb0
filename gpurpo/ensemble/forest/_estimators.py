"""The four forest estimators (regressors and classifiers, Random Forests and Extra-Trees).

The method and its references: :mod:`gpurpo.ensemble.forest`.
"""
from __future__ import annotations

from typing import Any

import numpy as np
from sklearn.base import ClassifierMixin, RegressorMixin
from sklearn.utils.validation import check_is_fitted

from gpurpo._class_targets import ClassTargets, check_y_present, encode_class_targets, labels_from_scores
from gpurpo._top_k import suggests_top_k
from gpurpo._validation import check_array
from gpurpo.backend import Backend, is_gpu_array, resolve_backend, to_host
from gpurpo.ensemble.forest.base import BaseForest
from gpurpo.metrics import label_ranking_average_precision, macro_r2
from gpurpo.tree.binning import DEFAULT_MAX_BINNED_BYTES, MAX_BINS

__all__ = [
    "RandomForestRegressor",
    "RandomForestClassifier",
    "ExtraTreesRegressor",
    "ExtraTreesClassifier",
]


class _ForestRegressorMixin(RegressorMixin):
    """Outputs of the regressors: real (n,) or (n, d), dense or sparse."""

    def fit(self, X: Any, y: Any, sample_weight: Any = None) -> Any:
        """Grow the forest.

        Parameters
        ----------
        X : array or sparse matrix (n, p)
            Inputs (NumPy/SciPy or CuPy/cupyx); NaN marks missing values.
        y : array (n,) or (n, d), or sparse matrix (n, d)
            Outputs, finite. Sparse ``y`` gives sparse leaf values.
        sample_weight : array (n,), optional
            Non-negative weights. With ``bootstrap=True`` each tree draws its rows
            with probabilities proportional to them and is grown on the draw
            counts (as scikit-learn 1.9 does): a zero weight removes a row,
            an integer weight repeats it, in distribution. Without bootstrap the
            trees are grown on the weights themselves.

        Returns
        -------
        self
        """
        y = check_y_present(y, type(self).__name__)
        backend = resolve_backend(X, y, device=self.device)
        one_d = len(y.shape) == 1
        if one_d:
            Y = check_array(y, "y", backend, ensure_2d=False, float32_range=True).reshape(-1, 1)
        else:
            Y = check_array(y, "y", backend, accept_sparse=True, float32_range=True)
        self._y_1d = one_d
        self._fit_forest(X, Y, sample_weight, backend)
        self._drop_oob("oob_score_", "oob_prediction_")
        if self._oob_raw is not None:
            self._set_oob(Y, y, backend, not is_gpu_array(X))
        self._oob_raw = None
        return self

    def _set_fitted_targets(self, y_1d: bool, classes: np.ndarray | None,
                            sparse_y: bool) -> None:
        self._y_1d = y_1d

    def _set_oob(self, Y: Any, y: Any, backend: Backend, host: bool) -> None:
        mean, valid = self._oob_mean(backend)
        pred = mean[:, 0] if self._y_1d else mean
        self.oob_prediction_ = to_host(pred) if host else pred
        if valid.size < 2:
            self.oob_score_ = float("nan")
            return
        rows = backend.asarray(valid)
        if callable(self.oob_score):
            y_host = to_host(y)
            self.oob_score_ = float(self.oob_score(y_host[valid], to_host(pred)[valid]))
        elif valid.size == mean.shape[0]:
            self.oob_score_ = macro_r2(Y, mean)  # no (n, d) copy of the rows
        else:
            self.oob_score_ = macro_r2(Y[rows], mean[rows])

    @suggests_top_k
    def predict(self, X: Any) -> Any:
        """Mean over the trees of the leaf values: (n,) for 1-D y, else dense (n, d).

        Parameters
        ----------
        X : array or sparse matrix (n, p)

        Returns
        -------
        float64 array, in the namespace of ``X``
        """
        out, _, host = self._predict_sum(X)
        if self._y_1d:
            out = out[:, 0]
        return to_host(out) if host else out


class _ForestClassifierMixin(ClassifierMixin):
    """Outputs of the classifiers: multi-label 0/1 (n, d) or single-label (n,)."""

    def __sklearn_tags__(self) -> Any:
        tags = super().__sklearn_tags__()
        tags.classifier_tags.multi_label = True
        tags.target_tags.multi_output = False
        return tags

    def fit(self, X: Any, y: Any, sample_weight: Any = None) -> Any:
        """Grow the forest on multi-label Y (n, d) of 0/1, or single-label y (n,).

        Parameters
        ----------
        X : array or sparse matrix (n, p)
            Inputs; NaN marks missing values.
        y : array (n,) of class labels, or 0/1 array or sparse matrix (n, d)
            Single-label classes (one-hot encoded internally) or a multi-label
            indicator matrix (sparse ``y`` gives a sparse ``predict``). The leaf
            values are stored sparse when ``y`` has few nonzeros, whatever its
            container (:func:`gpurpo.tree.leaves.relabelling_outputs`).
        sample_weight : array (n,), optional
            Non-negative weights. With ``bootstrap=True`` each tree draws its rows
            with probabilities proportional to them and is grown on the draw
            counts (as scikit-learn 1.9 does): a zero weight removes a row,
            an integer weight repeats it, in distribution. Without bootstrap the
            trees are grown on the weights themselves.

        Returns
        -------
        self
        """
        y = check_y_present(y, type(self).__name__)
        backend = resolve_backend(X, y, device=self.device)
        targets = encode_class_targets(y, backend, regressor="a forest regressor")
        if self._warm():
            self._check_warm_classes(targets)
        self.classes_ = targets.classes
        self._multilabel = targets.multilabel
        if targets.multilabel:
            self._sparse_output = backend.issparse(targets.Y)
        else:
            self.n_classes_ = int(targets.classes.shape[0])
            self._sparse_output = False
            self._encoded = targets.encoded
        Y = targets.Y
        self._fit_forest(X, Y, sample_weight, backend)
        self._drop_oob("oob_score_", "oob_decision_function_")
        if self._oob_raw is not None:
            self._set_oob(Y, y, backend, not is_gpu_array(X))
        self._oob_raw = None
        self.__dict__.pop("_encoded", None)
        return self

    def _set_fitted_targets(self, y_1d: bool, classes: np.ndarray | None,
                            sparse_y: bool) -> None:
        self._multilabel = classes is None
        if classes is None:
            self.classes_ = np.array([0, 1])
            self._sparse_output = bool(sparse_y)
        else:
            self.classes_ = classes
            self.n_classes_ = int(classes.shape[0])
            self._sparse_output = False

    def _set_oob(self, Y: Any, y: Any, backend: Backend, host: bool) -> None:
        xp = backend.xp
        mean, valid = self._oob_mean(backend)
        self.oob_decision_function_ = to_host(mean) if host else mean
        if valid.size == 0:
            self.oob_score_ = float("nan")
            return
        rows = backend.asarray(valid)
        if callable(self.oob_score):
            y_host = to_host(y)
            y_true = y_host[valid]
            pred = self._labels_from_proba(mean[rows], backend)
            self.oob_score_ = float(self.oob_score(y_true, _host_labels(pred)))
        elif self._multilabel and valid.size == mean.shape[0]:
            self.oob_score_ = label_ranking_average_precision(Y, mean)  # no (n, d) copy
        elif self._multilabel:
            self.oob_score_ = label_ranking_average_precision(Y[rows], mean[rows])
        else:
            hits = to_host(xp.argmax(mean[rows], axis=1)) == self._encoded[valid]
            self.oob_score_ = float(np.mean(hits))

    def _labels_from_proba(self, proba: Any, backend: Backend) -> Any:
        xp = backend.xp
        if self._multilabel:
            if self._sparse_output:
                # cupyx holds bool, float and complex data only: 0/1 floats on CUDA
                # backends, int64 once on the host (_host_labels)
                labels = proba > 0.5
                return backend.sparse.csr_matrix(
                    labels.astype(xp.float64 if backend.uses_cuda_kernels else xp.int64))
            return (proba > 0.5).astype(xp.int64)
        return labels_from_scores(proba, self.classes_, backend)

    def _check_warm_classes(self, targets: ClassTargets) -> None:
        """A warm start keeps the kind of target and the classes of the first fit."""
        if targets.multilabel and not self._multilabel:
            raise ValueError(
                f"warm_start: the first fit had single-label y (classes {self.classes_}), "
                "got a 2-D y of multi-label indicators"
            )
        if not targets.multilabel and (
            self._multilabel or not np.array_equal(targets.classes, self.classes_)
        ):
            raise ValueError(
                f"warm_start: y must hold the classes of the first fit, "
                f"{'multi-label indicators' if self._multilabel else self.classes_}, "
                f"got the classes {targets.classes}"
            )

    @suggests_top_k
    def predict_proba(self, X: Any) -> Any:
        """Mean label frequencies of the leaves reached by X.

        Parameters
        ----------
        X : array or sparse matrix (n, p)

        Returns
        -------
        float64 array (n, d) of label probabilities (multi-label), or
        (n, n_classes) (single-label), in the namespace of ``X``
        """
        out, _, host = self._predict_sum(X)
        return to_host(out) if host else out

    @suggests_top_k
    def predict_log_proba(self, X: Any) -> Any:
        """Logarithm of :meth:`predict_proba` (``-inf`` for probability 0).

        Parameters
        ----------
        X : array or sparse matrix (n, p)

        Returns
        -------
        float64 array (n, d) or (n, n_classes), in the namespace of ``X``
        """
        proba, backend, host = self._predict_sum(X)
        with np.errstate(divide="ignore"):
            out = backend.xp.log(proba)
        return to_host(out) if host else out

    @suggests_top_k
    def predict(self, X: Any) -> Any:
        """Labels: 0/1 matrix (probability > 0.5) for multi-label, classes otherwise.

        The multi-label matrix is a CSR matrix when the forest was fitted on
        sparse ``y``, a dense int64 array otherwise; in the namespace of
        ``X``. With sparse ``y`` on the CPU and many labels (or dense scores
        above 256 MiB), the labels come from each row's sums over the columns
        its leaves hold, without the dense (n, d) probabilities; the same
        labels.

        Parameters
        ----------
        X : array or sparse matrix (n, p)

        Returns
        -------
        int64 array or CSR matrix (n, d), or array (n,) of class labels
            Multi-label 0/1 predictions, or the most probable class (first on
            ties) for single-label ``y``; non-numeric classes come back as a
            NumPy array whatever ``X``. A cupyx CSR result (CuPy ``X``) holds
            its 0/1 labels as float64: cupyx matrices hold no integers.
        """
        check_is_fitted(self, "n_outputs_")
        if self._multilabel and self._sparse_output:
            scores = self._sparse_scores(X, above=0.5)
            if scores is not None:
                # the labels straight from the sparse sums, without (n, d) dense scores
                scores.data = np.ones_like(scores.data)
                return scores.astype(np.int64)
        proba, backend, host = self._predict_sum(X)
        labels = self._labels_from_proba(proba, backend)
        return _host_labels(labels) if host else labels


def _host_labels(labels: Any) -> Any:
    """Labels on the host; a CSR matrix of them with int64 data, as the CPU gives (a CUDA
    backend's have float64 data)."""
    labels = to_host(labels)
    if hasattr(labels, "tocsr") and labels.dtype != np.int64:
        return labels.astype(np.int64)
    return labels


_PARAMETERS = """
    Parameters
    ----------
    n_estimators : int, default=100
        Number of trees.
    projection : None, str or OutputProjection, default=None
        Output space the trees are grown in. ``None``: the original outputs
        (exact multi-output trees). A kind of :mod:`gpurpo.projections`:
        ``"gaussian"`` (N(0, 1/m) entries), ``"rademacher"``,
        ``"achlioptas"``, ``"sparse"`` (density 1/sqrt(d)), ``"subsample"``
        (random output subsampling), ``"hadamard"``, drawn with
        ``n_components`` rows. An :class:`~gpurpo.projections.OutputProjection`:
        each projection is a clone of it drawn with its own seed, with its own
        ``n_components``; its ``random_state``, if set, fixes the shared
        projection (per-tree projections come from the forest's
        ``random_state``).
    n_components : int, float or {{"log", "sqrt", "auto"}}, default="log"
        Size m of a projection given by name: an int, a fraction of d,
        ``round(ln d)``, ``round(sqrt d)`` or the Johnson-Lindenstrauss bound
        for n samples (:func:`gpurpo.projections.resolve_n_components`). The
        paper finds m = ln d enough for forests with per-tree projections.
    shared_projection : bool, default=False
        One projection for all trees (Algorithm 1) instead of a fresh one per
        tree (Algorithm 2).
    max_depth : int or None, default=None
        Maximum depth of the trees (None: grown until the other rules stop).
    min_samples_split : int or float, default=2
        Minimum number of samples to split a node (float: fraction of n).
    min_samples_leaf : int or float, default=1
        Minimum number of samples in each leaf (float: fraction of n). A
        sample drawn several times by the bootstrap counts once.
    max_features : int, float, {{"sqrt", "log2"}} or None, default={max_features!r}
        Number k of candidate features drawn per node (scikit-learn's meaning:
        features constant in the node count among the k; more are drawn only
        when all k are constant, up to the first that is not).
    max_leaf_nodes : int or None, default=None
        When set, trees are grown best-first up to this many leaves.
    min_impurity_decrease : float, default=0.0
        Minimum weighted impurity decrease of a split (scikit-learn's
        definition, with the impurity averaged over the grown outputs).
    bootstrap : bool, default={bootstrap!r}
        Grow each tree on a bootstrap sample (Breiman 2001).
    oob_score : bool or callable, default=False
        Score the forest on the out-of-bag samples (needs ``bootstrap``):
        {oob_metric}; a callable ``score(y_true, y_pred)`` gets the
        out-of-bag {oob_pred}. The (n, d) out-of-bag predictions are kept
        dense in float64; where they would exceed 2 GiB, a fit on sparse ``y``
        on the CPU keeps them as a CSR matrix (the same values at the columns
        the leaves hold, zeros elsewhere), and other fits are refused.
    max_samples : None, int or float, default=None
        Bootstrap sample size: n, an int in [1, n], or a fraction of n.
    max_bins : int in [2, {max_bins}], default={max_bins}
        Maximum number of quantile bins per feature (one more holds NaN).
    max_binned_bytes : int, default=4294967296 (4 GiB)
        Largest binned copy of X a fit may make (uint8 codes, n x p bytes); a
        larger X is refused with a ValueError. A sparse X is binned at its stored
        entries only (on the CPU and the GPU) and needs no such copy.
    batch_size : int or "auto", default="auto"
        Largest number of trees grown together (level by level, one
        projection product per batch); the trees are dealt into batches as
        even as possible. ``"auto"``: as many as fit a memory budget (1 GiB on
        the CPU, a quarter of the GPU's memory), and on the CPU at most 8,
        since larger batches only cost cache locality there, in a multiple of
        the threads when batches grow in parallel (as many trees per thread).
        Lower it if memory runs out; it does not change the forest.
    n_jobs : int or None, default=None
        CPU threads during fit and predict (joblib's convention: -1 all, -2
        all but one; None: numba's setting). On the CPU, fit grows that many
        batches of trees at once, one thread each, when there are at least
        half as many trees as threads (else the kernels of one batch use all
        the threads); the forest does not depend on ``n_jobs``. Prediction
        runs the kernels on all the threads.
    random_state : None, int or numpy Generator, default=None
        Seeds the binning subsample, bootstrap samples, projections and
        per-node randomness. The same seed gives the same forest on a
        backend, whatever ``batch_size``, and the same first trees whatever
        ``n_estimators``.
    verbose : int, default=0
        ``verbose >= 1`` shows a progress bar over the trees (tqdm: in a
        terminal or a notebook, on stderr); ``verbose >= 2`` also prints a
        line when each batch of trees starts.
    warm_start : bool, default=False
        When the forest is fitted, ``fit`` keeps its trees and grows more, up
        to ``n_estimators`` (scikit-learn's meaning). The added trees are those
        one fit with the larger ``n_estimators`` grows: fitting 50 trees and
        then 100 on the same data gives the forest of a single 100-tree fit
        with the same ``random_state``. The bin edges and projections of the
        first fit are kept, so ``projection``, ``n_components``,
        ``shared_projection`` and ``max_bins`` cannot change, nor can the
        device or the outputs; ``oob_score`` then scores all the trees.
    device : {{"auto", "cpu", "cuda"}}, default="auto"
        Where to compute; ``"auto"`` follows the data (CuPy input -> CUDA)
        and the global setting (:func:`gpurpo.set_backend`).
        Other values are for testing (:mod:`gpurpo.testing`).
        Results are returned in the namespace of the input.

    Attributes
    ----------
    estimators_ : list of gpurpo.tree.Tree
        The fitted trees (node arrays; leaf values in the original space).
    estimators_samples_ : list of ndarray
        Indices of the samples drawn for each tree.
    feature_importances_ : ndarray (n_features,)
        Mean decrease of impurity (in the grown, projected, space), normalised.
    n_features_in_ : int
    feature_names_in_ : ndarray of str, shape (n_features_in_,)
        Column names of the data frame ``X`` given to ``fit``, when they are all
        strings; absent otherwise. Later inputs must have the same names in the
        same order.
    n_outputs_ : int
        d, the number of original outputs{n_outputs_extra}.
    n_projected_outputs_ : int
        m, the number of outputs each tree is grown on (d without projection).
    projection_ : ndarray, sparse matrix or None
        The shared projection (m, d) (Algorithm 1); None otherwise (see
        :meth:`get_projection` for the per-tree ones).
    bin_mapper_ : gpurpo.tree.BinMapper
    batch_size_ : int
        Number of trees grown together.
    oob_score_ : float
        Out-of-bag score (with ``oob_score``).{extra_attributes}

    References
    ----------
    A. Joly, P. Geurts, L. Wehenkel. Random forests with random projections
    of the output space for high dimensional multi-label classification.
    ECML PKDD 2014.

    L. Breiman. Random forests. Machine Learning 45(1), 2001.

    P. Geurts, D. Ernst, L. Wehenkel. Extremely randomized trees. Machine
    Learning 63(1), 2006.
"""

_REGRESSOR_DOC = dict(
    oob_metric="macro-averaged R^2 (Joly et al. eq. 26, scikit-learn's ``r2_score``)",
    oob_pred="predictions",
    n_outputs_extra="",
    extra_attributes="""
    oob_prediction_ : ndarray (n,) or (n, d), or CSR matrix (n, d)
        Mean prediction of the trees that did not see each training sample
        (NaN where every tree saw it; no entries there in a CSR matrix).""",
)
_CLASSIFIER_DOC = dict(
    oob_metric="LRAP (Joly et al. eq. 6) for multi-label y, accuracy for single-label y",
    oob_pred="predicted labels",
    n_outputs_extra=" (labels), or the number of classes",
    extra_attributes="""
    oob_decision_function_ : ndarray (n, d) or (n, n_classes), or CSR matrix (n, d)
        Out-of-bag label probabilities (NaN where every tree saw the sample; no
        entries there in a CSR matrix).
    classes_ : ndarray
        Class labels (single-label y); ``array([0, 1])`` for multi-label y.""",
)


class RandomForestRegressor(_ForestRegressorMixin, BaseForest):
    _splitter = "best"

    def __init__(
        self,
        n_estimators: int = 100,
        *,
        projection: Any = None,
        n_components: Any = "log",
        shared_projection: bool = False,
        max_depth: int | None = None,
        min_samples_split: int | float = 2,
        min_samples_leaf: int | float = 1,
        max_features: Any = 1.0,
        max_leaf_nodes: int | None = None,
        min_impurity_decrease: float = 0.0,
        bootstrap: bool = True,
        oob_score: Any = False,
        max_samples: Any = None,
        max_bins: int = MAX_BINS,
        max_binned_bytes: int = DEFAULT_MAX_BINNED_BYTES,
        batch_size: Any = "auto",
        n_jobs: int | None = None,
        random_state: Any = None,
        verbose: int = 0,
        warm_start: bool = False,
        device: str = "auto",
    ) -> None:
        self.n_estimators = n_estimators
        self.projection = projection
        self.n_components = n_components
        self.shared_projection = shared_projection
        self.max_depth = max_depth
        self.min_samples_split = min_samples_split
        self.min_samples_leaf = min_samples_leaf
        self.max_features = max_features
        self.max_leaf_nodes = max_leaf_nodes
        self.min_impurity_decrease = min_impurity_decrease
        self.bootstrap = bootstrap
        self.oob_score = oob_score
        self.max_samples = max_samples
        self.max_bins = max_bins
        self.max_binned_bytes = max_binned_bytes
        self.batch_size = batch_size
        self.n_jobs = n_jobs
        self.random_state = random_state
        self.verbose = verbose
        self.warm_start = warm_start
        self.device = device


class ExtraTreesRegressor(_ForestRegressorMixin, BaseForest):
    _splitter = "random"

    def __init__(
        self,
        n_estimators: int = 100,
        *,
        projection: Any = None,
        n_components: Any = "log",
        shared_projection: bool = False,
        max_depth: int | None = None,
        min_samples_split: int | float = 2,
        min_samples_leaf: int | float = 1,
        max_features: Any = 1.0,
        max_leaf_nodes: int | None = None,
        min_impurity_decrease: float = 0.0,
        bootstrap: bool = False,
        oob_score: Any = False,
        max_samples: Any = None,
        max_bins: int = MAX_BINS,
        max_binned_bytes: int = DEFAULT_MAX_BINNED_BYTES,
        batch_size: Any = "auto",
        n_jobs: int | None = None,
        random_state: Any = None,
        verbose: int = 0,
        warm_start: bool = False,
        device: str = "auto",
    ) -> None:
        self.n_estimators = n_estimators
        self.projection = projection
        self.n_components = n_components
        self.shared_projection = shared_projection
        self.max_depth = max_depth
        self.min_samples_split = min_samples_split
        self.min_samples_leaf = min_samples_leaf
        self.max_features = max_features
        self.max_leaf_nodes = max_leaf_nodes
        self.min_impurity_decrease = min_impurity_decrease
        self.bootstrap = bootstrap
        self.oob_score = oob_score
        self.max_samples = max_samples
        self.max_bins = max_bins
        self.max_binned_bytes = max_binned_bytes
        self.batch_size = batch_size
        self.n_jobs = n_jobs
        self.random_state = random_state
        self.verbose = verbose
        self.warm_start = warm_start
        self.device = device


class RandomForestClassifier(_ForestClassifierMixin, BaseForest):
    _splitter = "best"

    def __init__(
        self,
        n_estimators: int = 100,
        *,
        projection: Any = None,
        n_components: Any = "log",
        shared_projection: bool = False,
        max_depth: int | None = None,
        min_samples_split: int | float = 2,
        min_samples_leaf: int | float = 1,
        max_features: Any = "sqrt",
        max_leaf_nodes: int | None = None,
        min_impurity_decrease: float = 0.0,
        bootstrap: bool = True,
        oob_score: Any = False,
        max_samples: Any = None,
        max_bins: int = MAX_BINS,
        max_binned_bytes: int = DEFAULT_MAX_BINNED_BYTES,
        batch_size: Any = "auto",
        n_jobs: int | None = None,
        random_state: Any = None,
        verbose: int = 0,
        warm_start: bool = False,
        device: str = "auto",
    ) -> None:
        self.n_estimators = n_estimators
        self.projection = projection
        self.n_components = n_components
        self.shared_projection = shared_projection
        self.max_depth = max_depth
        self.min_samples_split = min_samples_split
        self.min_samples_leaf = min_samples_leaf
        self.max_features = max_features
        self.max_leaf_nodes = max_leaf_nodes
        self.min_impurity_decrease = min_impurity_decrease
        self.bootstrap = bootstrap
        self.oob_score = oob_score
        self.max_samples = max_samples
        self.max_bins = max_bins
        self.max_binned_bytes = max_binned_bytes
        self.batch_size = batch_size
        self.n_jobs = n_jobs
        self.random_state = random_state
        self.verbose = verbose
        self.warm_start = warm_start
        self.device = device


class ExtraTreesClassifier(_ForestClassifierMixin, BaseForest):
    _splitter = "random"

    def __init__(
        self,
        n_estimators: int = 100,
        *,
        projection: Any = None,
        n_components: Any = "log",
        shared_projection: bool = False,
        max_depth: int | None = None,
        min_samples_split: int | float = 2,
        min_samples_leaf: int | float = 1,
        max_features: Any = "sqrt",
        max_leaf_nodes: int | None = None,
        min_impurity_decrease: float = 0.0,
        bootstrap: bool = False,
        oob_score: Any = False,
        max_samples: Any = None,
        max_bins: int = MAX_BINS,
        max_binned_bytes: int = DEFAULT_MAX_BINNED_BYTES,
        batch_size: Any = "auto",
        n_jobs: int | None = None,
        random_state: Any = None,
        verbose: int = 0,
        warm_start: bool = False,
        device: str = "auto",
    ) -> None:
        self.n_estimators = n_estimators
        self.projection = projection
        self.n_components = n_components
        self.shared_projection = shared_projection
        self.max_depth = max_depth
        self.min_samples_split = min_samples_split
        self.min_samples_leaf = min_samples_leaf
        self.max_features = max_features
        self.max_leaf_nodes = max_leaf_nodes
        self.min_impurity_decrease = min_impurity_decrease
        self.bootstrap = bootstrap
        self.oob_score = oob_score
        self.max_samples = max_samples
        self.max_bins = max_bins
        self.max_binned_bytes = max_binned_bytes
        self.batch_size = batch_size
        self.n_jobs = n_jobs
        self.random_state = random_state
        self.verbose = verbose
        self.warm_start = warm_start
        self.device = device


RandomForestRegressor.__doc__ = (
    """Random Forest of multi-output regression trees on random output projections.

    Each tree is grown on a bootstrap sample, choosing the best split among
    ``max_features`` random features per node, on a random projection of
    the outputs (Joly, Geurts & Wehenkel 2014, Algorithm 2, or Algorithm 1
    with ``shared_projection=True``); leaves hold the mean ORIGINAL outputs
    of their samples and the forest averages its trees.
"""
    + _PARAMETERS.format(max_features=1.0, bootstrap=True, max_bins=MAX_BINS, **_REGRESSOR_DOC)
)
ExtraTreesRegressor.__doc__ = (
    """Extra-Trees of multi-output regression trees on random output projections.

    Like :class:`RandomForestRegressor` but each candidate feature gets one
    uniformly random cut point between its minimum and maximum in the node
    (Geurts, Ernst & Wehenkel 2006), and trees see the whole training set
    by default (``bootstrap=False``).
"""
    + _PARAMETERS.format(max_features=1.0, bootstrap=False, max_bins=MAX_BINS, **_REGRESSOR_DOC)
)
RandomForestClassifier.__doc__ = (
    """Random Forest for multi-label (or single-label) classification on random output projections.

    Multi-label ``Y`` (n, d) with 0/1 entries, dense or sparse, is treated as
    d outputs: trees are grown on a random projection of Y (Joly, Geurts &
    Wehenkel 2014, Algorithm 2, or Algorithm 1 with
    ``shared_projection=True``), leaves hold the label frequencies of their
    samples, ``predict_proba`` returns the (n, d) mean label probabilities
    and ``predict`` thresholds them at 0.5 (strictly greater). Single-label
    ``y`` (n,) is one-hot encoded; ``predict_proba`` returns
    (n, n_classes) and ``predict`` the most probable class.
"""
    + _PARAMETERS.format(
        max_features="sqrt", bootstrap=True, max_bins=MAX_BINS, **_CLASSIFIER_DOC
    )
)
ExtraTreesClassifier.__doc__ = (
    """Extra-Trees for multi-label (or single-label) classification on random output projections.

    As :class:`RandomForestClassifier`, with random cut points (Geurts,
    Ernst & Wehenkel 2006) and no bootstrap by default.
"""
    + _PARAMETERS.format(
        max_features="sqrt", bootstrap=False, max_bins=MAX_BINS, **_CLASSIFIER_DOC
    )
)
