"""The estimators: :class:`GradientBoostingRegressor` and :class:`GradientBoostingClassifier`."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
from sklearn.base import ClassifierMixin, RegressorMixin

from gpurpo._class_targets import ravel_column_vector
from gpurpo._top_k import suggests_top_k
from gpurpo._validation import (
    check_array,
)
from gpurpo.backend import (
    Backend,
    device_frame_values,
    is_device_frame,
    to_host,
)
from gpurpo.ensemble.boosting._base import _BaseGradientBoosting
from gpurpo.ensemble.boosting.class_targets import (
    BINARY,
    MULTICLASS,
    MULTILABEL,
    class_columns,
    labels_from_scores,
)
from gpurpo.ensemble.boosting.losses import get_loss
from gpurpo.tree.binning import DEFAULT_MAX_BINNED_BYTES

__all__ = ["GradientBoostingRegressor", "GradientBoostingClassifier"]


def _finish(a: Any, host: bool, one_d: bool) -> Any:
    if host:
        a = to_host(a)
    if one_d:
        a = a[:, 0]
    return a


class GradientBoostingRegressor(RegressorMixin, _BaseGradientBoosting):
    """Multi-output gradient tree boosting for regression.

    Joly, Wehenkel & Geurts (2019): gbmort (Algorithm 2), gbrt-rpo
    (Algorithm 3), gbrt-relabel-rpo (Algorithm 4) or single-target boosting,
    with the squared (l2) or absolute (l1) loss.

    Parameters
    ----------
    strategy : {"rpo", "multi_output", "relabel_rpo", "single_target"}, default="rpo"
        How each iteration's tree is fitted to the ``d`` gradient columns
        (see :mod:`gpurpo.ensemble.boosting.iteration_trees`).
    loss : {"squared_error", "absolute_error"}, default="squared_error"
        ``(y - f)^2 / 2`` or ``|y - f|`` summed over outputs.
    projection : str or None, default="subsample"
        Projection kind of ``"rpo"`` and ``"relabel_rpo"`` (any kind of
        :mod:`gpurpo.projections`; ``"subsample"`` draws outputs at random,
        as in the paper). ``None`` is the identity (``"relabel_rpo"`` then
        grows the gbmort tree).
    n_components : int, float or {"log", "sqrt", "auto"}, default="log"
        q, the number of projections of ``"relabel_rpo"`` (see
        :func:`gpurpo.projections.resolve_n_components`). ``"rpo"`` always
        uses one.
    leaf_step : {"global", "per_leaf"}, default="global"
        ``"global"``: the paper's step, one ``rho_m`` per output fitted over
        all samples (eqs. 20 and 23 for l2, a line search otherwise), the
        leaves keeping their fitted values. ``"per_leaf"``: every (leaf,
        output) pair gets its own optimal value (Friedman's TreeBoost; the
        leaf mean of the residuals for l2, their weighted median for l1, a
        Newton step for the log loss, as in XGBoost's vector leaves) and
        ``rho_m = 1``; trees of ``"rpo"`` and ``"single_target"`` then carry
        ``d`` (resp. one) values per leaf. Only the leaf values change, not
        the tree structure.
    split_criterion : {"gradient", "newton"}, default="gradient"
        Split gain of the trees. ``"gradient"``: the paper's reduction of the
        variance of the (projected) negative gradients ``g_ij``, sample
        weighted. ``"newton"``: the second-order gain of XGBoost's
        vector-leaf trees (Chen & Guestrin 2016, eq. 7; the Newton step of
        LogitBoost, Friedman, Hastie & Tibshirani 2000), ``sum_j G_Lj^2 /
        (H_Lj + lambda) + G_Rj^2 / (H_Rj + lambda) - G_j^2 / (H_j + lambda)``
        with ``G_j``, ``H_j`` the sample-weighted sums of ``g_ij`` and of the
        hessians ``h_ij`` in a node, over the tree's outputs. ``"rpo"`` and
        ``"relabel_rpo"`` score the directions of their projection rows
        ``phi``: ``G = sum_i phi . g_i`` and ``H = sum_i sum_j phi_j^2 h_ij``
        (the curvature of the loss along ``phi``), which for
        ``projection="subsample"`` is the gain of the sampled outputs and for
        the identity that of all outputs. The trees carry one hessian
        histogram channel per gradient channel, and every node is split from
        histograms. For the squared error (constant hessian) it gives the
        same trees as ``"gradient"``; the absolute error does not accept it.
        Leaf values and steps are unchanged (``leaf_step``).
    reg_lambda : float >= 0, default=1.0
        ``lambda`` of the ``"newton"`` split gain (XGBoost's default); unused
        by ``"gradient"``.
    min_child_weight : float >= 0, default=1.0
        ``"newton"`` only: an output (or projection row) counts in the score
        of a side only where that side's hessian sum ``H_j`` reaches this
        value, as in XGBoost's vector leaves (same default).
    learning_rate : float, default=0.1
        Shrinkage ``mu`` applied to every step.
    n_estimators : int, default=100
        Number of boosting iterations (trees); for ``"single_target"`` the
        total over all outputs.
    max_leaf_nodes : int or None, default=31
        Leaves per tree, grown best-first; None grows level-wise to
        ``max_depth``.
    max_depth : int or None, default=None
    max_features : int, float, {"sqrt", "log2"} or None, default=None
        Features tried per node.
    min_samples_leaf : int, default=1
    subsample : float in (0, 1], default=1.0
        Fraction of rows drawn (without replacement) for each tree and step.
    max_bins : int in [2, 255], default=255
        Quantile bins per feature (one more bin holds missing values).
    max_binned_bytes : int, default=4294967296 (4 GiB)
        Largest binned copy of X a fit may make (uint8 codes, n x p bytes); a
        larger X is refused with a ValueError. A sparse X is binned at its stored
        entries only (on the CPU and the GPU) and needs no such copy.
    validation_fraction : float in (0, 1), default=0.1
        Rows held out for early stopping when ``n_iter_no_change`` is set and
        no ``eval_set`` is given.
    n_iter_no_change : int or None, default=None
        Stop after this many iterations without a relative improvement of
        ``tol`` of the validation loss, and keep the best iteration.
    tol : float, default=1e-4
    warm_start : bool, default=False
        Add iterations to the fitted model up to ``n_estimators``.
    random_state : None, int or Generator, default=None
    device : {"auto", "cpu", "cuda"}, default="auto"
        Where to compute; ``"auto"`` follows the data (CuPy input -> CUDA) and the
        global setting (:func:`gpurpo.set_backend`). Other values are for testing
        (:mod:`gpurpo.testing`).
    verbose : int, default=0
        ``verbose >= 1`` shows a progress bar over the boosting iterations
        (tqdm: in a terminal or a notebook, on stderr) with the latest
        training loss, and validation loss when there is a validation set
        (``eval_set`` or early stopping); ``verbose >= 2`` also prints a line
        per iteration (iteration, train loss, validation loss and macro-R2,
        elapsed time).

    Attributes
    ----------
    n_estimators_ : int
        Number of iterations kept (after early stopping).
    init_ : ndarray (d,)
        Constant initial model.
    steps_ : ndarray (n_estimators_, d)
        ``rho_m`` of every iteration (before the learning rate).
    outputs_ : list
        For ``"single_target"``, the output of each iteration.
    projections_ : list
        Projection matrix of each iteration (``"rpo"``, ``"relabel_rpo"``).
    train_loss_ : ndarray (n_estimators_,)
        Mean training loss per sample and output after each iteration.
    validation_loss_ : ndarray
        Validation loss of the initial model and after each iteration run.
    bin_mapper_ : BinMapper
    n_features_in_, n_outputs_ : int
    feature_names_in_ : ndarray of str, shape (n_features_in_,)
        Column names of the data frame ``X`` given to ``fit``, when they are all
        strings; absent otherwise. Later inputs must have the same names in the
        same order.
    """

    _losses = ("squared_error", "absolute_error")
    _score_name = "R2"

    def __init__(
        self,
        strategy: str = "rpo",
        loss: str = "squared_error",
        projection: str | None = "subsample",
        n_components: int | float | str = "log",
        leaf_step: str = "global",
        split_criterion: str = "gradient",
        reg_lambda: float = 1.0,
        min_child_weight: float = 1.0,
        learning_rate: float = 0.1,
        n_estimators: int = 100,
        max_leaf_nodes: int | None = 31,
        max_depth: int | None = None,
        max_features: Any = None,
        min_samples_leaf: int = 1,
        subsample: float = 1.0,
        max_bins: int = 255,
        max_binned_bytes: int = DEFAULT_MAX_BINNED_BYTES,
        validation_fraction: float = 0.1,
        n_iter_no_change: int | None = None,
        tol: float = 1e-4,
        warm_start: bool = False,
        random_state: Any = None,
        device: str = "auto",
        verbose: int = 0,
    ) -> None:
        self.strategy = strategy
        self.loss = loss
        self.projection = projection
        self.n_components = n_components
        self.leaf_step = leaf_step
        self.split_criterion = split_criterion
        self.reg_lambda = reg_lambda
        self.min_child_weight = min_child_weight
        self.learning_rate = learning_rate
        self.n_estimators = n_estimators
        self.max_leaf_nodes = max_leaf_nodes
        self.max_depth = max_depth
        self.max_features = max_features
        self.min_samples_leaf = min_samples_leaf
        self.subsample = subsample
        self.max_bins = max_bins
        self.max_binned_bytes = max_binned_bytes
        self.validation_fraction = validation_fraction
        self.n_iter_no_change = n_iter_no_change
        self.tol = tol
        self.warm_start = warm_start
        self.random_state = random_state
        self.device = device
        self.verbose = verbose

    def encode_targets(self, Y: Any, backend: Backend, fitting: bool) -> Any:
        """The outputs as float64 columns (n, d), dense; a 1-D ``y`` is one column.

        Hook of the extension API, as in the base class of the estimators:
        with ``fitting=True`` it records whether ``y`` is 1-D (:meth:`predict`
        then returns (n,)).
        """
        name = "y" if fitting else "eval_set[1]"
        Y = check_array(Y, name, backend, accept_sparse=True, ensure_2d=False, float32_range=True)
        if Y.ndim == 1:
            Y = Y[:, None]
            one_d = True
        elif Y.ndim == 2:
            one_d = False
        else:
            raise ValueError(f"{name} must be 1-D or 2-D, got shape {tuple(Y.shape)}")
        if backend.issparse(Y):
            Y = Y.toarray()
        if fitting:
            self._one_d = one_d
        return backend.xp.ascontiguousarray(Y, dtype=backend.xp.float64)

    def _validation_score(self, Y: Any, F: Any) -> float:
        from gpurpo.metrics import macro_r2

        return macro_r2(Y, F) if Y.shape[0] >= 2 else float("nan")

    @suggests_top_k
    def predict(self, X: Any) -> Any:
        """Predicted outputs: (n, d), or (n,) when fitted on a 1-D ``y``.

        Parameters
        ----------
        X : array or sparse matrix of shape (n_samples, n_features)
            Inputs; NaN marks a missing value.

        Returns
        -------
        float64 array of shape (n_samples, n_outputs) or (n_samples,)
            ``F_M(X)``, the initial model plus the shrunken steps of every
            kept iteration. On the host for host ``X``, else on the backend
            of fit.
        """
        F, host = self._raw_predict(X)
        return _finish(F, host, self._one_d)

    def staged_predict(self, X: Any) -> Iterator[Any]:
        """Predictions after each iteration (a generator).

        Parameters
        ----------
        X : array or sparse matrix of shape (n_samples, n_features)
            Inputs; NaN marks a missing value.

        Yields
        ------
        float64 array of shape (n_samples, n_outputs) or (n_samples,)
            ``F_m(X)`` for m = 1, ..., ``n_estimators_``, as :meth:`predict`;
            a new array each time.
        """
        for F, host in self._staged_raw_predict(X):
            yield _finish(F, host, self._one_d)

    def __sklearn_tags__(self) -> Any:
        tags = super().__sklearn_tags__()
        tags.target_tags.multi_output = True
        tags.input_tags.allow_nan = True
        tags.input_tags.sparse = True
        return tags


class GradientBoostingClassifier(ClassifierMixin, _BaseGradientBoosting):
    """Multi-label (and binary or multi-class) gradient tree boosting with the logistic loss.

    Joly, Wehenkel & Geurts (2019): gbmort (Algorithm 2), gbrt-rpo
    (Algorithm 3), gbrt-relabel-rpo (Algorithm 4) or single-target boosting
    with the multi-label logistic loss (eq. 8). A 2-D ``y`` holds label
    indicators, 0/1 or -1/1 (dense or sparse); the score ``F`` is the
    log-odds of each label, and ``predict_proba`` its sigmoid. A 1-D ``y``
    holds class labels (numbers, strings or booleans): two classes give one
    binary label (the second class of ``classes_`` against the first); K >= 3
    classes give K one-vs-rest labels, the predicted class is the one of
    largest score and ``predict_proba`` divides each row's K sigmoids by
    their sum (as scikit-learn's ``OneVsRestClassifier``; not a softmax).

    Parameters
    ----------
    strategy, projection, n_components, leaf_step, split_criterion, reg_lambda,
    min_child_weight, learning_rate, n_estimators,
    max_leaf_nodes, max_depth, max_features, min_samples_leaf, subsample,
    max_bins, validation_fraction, n_iter_no_change, tol, warm_start,
    random_state, device, verbose
        As in :class:`GradientBoostingRegressor` (the lines of ``verbose >= 2``
        report the validation label ranking average precision).
    loss : {"log_loss"}, default="log_loss"

    Attributes
    ----------
    classes_ : ndarray
        1-D ``y``: its sorted distinct class labels. 2-D ``y``: the indicator
        values, ``[0, 1]``, ``[-1, 1]`` or ``[False, True]``, as given in fit.
    n_estimators_, init_, steps_, outputs_, projections_, train_loss_,
    validation_loss_, bin_mapper_, n_features_in_, n_outputs_
        As in :class:`GradientBoostingRegressor`.

    Notes
    -----
    Measured on structured multi-label data (``bench/boosting.py``, 30
    rounds of 31 leaves, one CPU thread; ``bench/results/``): with 101
    labels, ``strategy="relabel_rpo", projection="subsample",
    n_components=50, split_criterion="newton"`` reached the test LRAP of
    XGBoost's vector-leaf trees 15x to 22x faster; ``projection="gaussian",
    n_components=20`` with the default gradient split was about 70x faster,
    0.004 LRAP lower. With about a thousand mostly rare labels, the Gaussian
    projections were the better trade (50 subsampled labels per tree were
    too few), and XGBoost ran out of memory. ``"rpo"`` grows one projection
    per tree: the fastest rounds, but far more of them are needed.
    """

    _losses = ("log_loss",)
    _score_name = "LRAP"

    def __init__(
        self,
        strategy: str = "rpo",
        loss: str = "log_loss",
        projection: str | None = "subsample",
        n_components: int | float | str = "log",
        leaf_step: str = "global",
        split_criterion: str = "gradient",
        reg_lambda: float = 1.0,
        min_child_weight: float = 1.0,
        learning_rate: float = 0.1,
        n_estimators: int = 100,
        max_leaf_nodes: int | None = 31,
        max_depth: int | None = None,
        max_features: Any = None,
        min_samples_leaf: int = 1,
        subsample: float = 1.0,
        max_bins: int = 255,
        max_binned_bytes: int = DEFAULT_MAX_BINNED_BYTES,
        validation_fraction: float = 0.1,
        n_iter_no_change: int | None = None,
        tol: float = 1e-4,
        warm_start: bool = False,
        random_state: Any = None,
        device: str = "auto",
        verbose: int = 0,
    ) -> None:
        self.strategy = strategy
        self.loss = loss
        self.projection = projection
        self.n_components = n_components
        self.leaf_step = leaf_step
        self.split_criterion = split_criterion
        self.reg_lambda = reg_lambda
        self.min_child_weight = min_child_weight
        self.learning_rate = learning_rate
        self.n_estimators = n_estimators
        self.max_leaf_nodes = max_leaf_nodes
        self.max_depth = max_depth
        self.max_features = max_features
        self.min_samples_leaf = min_samples_leaf
        self.subsample = subsample
        self.max_bins = max_bins
        self.max_binned_bytes = max_binned_bytes
        self.validation_fraction = validation_fraction
        self.n_iter_no_change = n_iter_no_change
        self.tol = tol
        self.warm_start = warm_start
        self.random_state = random_state
        self.device = device
        self.verbose = verbose

    def encode_targets(self, Y: Any, backend: Backend, fitting: bool) -> Any:
        """The label columns of -1/+1 (n, d): multi-label indicators, or 1-D class labels
        as one binary column (two classes) or K one-vs-rest columns.

        Hook of the extension API, as in the base class of the estimators:
        with ``fitting=True`` it records ``classes_`` and the kind of target
        (binary, multi-class or multi-label) from the values of ``y``;
        otherwise ``y`` must be of that kind and hold classes of ``classes_``.
        """
        name = "y" if fitting else "eval_set[1]"
        if is_device_frame(Y):
            Y = device_frame_values(Y, name)
        elif Y is not None and not hasattr(Y, "shape"):
            Y = np.asarray(Y)
        if Y is not None:
            Y = ravel_column_vector(Y, backend, name, stacklevel=5)
        if Y is not None and not backend.issparse(Y) and len(Y.shape) == 1:
            return self._encode_classes(Y, backend, fitting, name)
        if not fitting and self._kind != MULTILABEL:
            raise ValueError(
                f"{name} must be 1-D class labels like the y of fit, got shape "
                f"{tuple(Y.shape)}"
            )
        xp = backend.xp
        boolean = getattr(getattr(Y, "dtype", None), "kind", None) == "b"
        Y = check_array(Y, name, backend, accept_sparse=True, ensure_2d=False)
        if Y.ndim != 2:
            raise ValueError(f"{name} must be 1-D or 2-D, got shape {tuple(Y.shape)}")
        if backend.issparse(Y):
            Y = Y.toarray()
        Y = xp.asarray(Y, dtype=xp.float64)
        has_neg = bool((Y == -1).any())
        has_zero = bool((Y == 0).any())
        bad = ~((Y == 1) | (Y == 0) | (Y == -1))
        if bool(bad.any()) or (has_neg and has_zero):
            found = np.unique(to_host(Y))[:10].tolist()
            raise ValueError(
                f"{name} must hold multi-label indicators, 0/1 or -1/1 (not both), got the "
                f"values {found}; a 1-D y holds class labels"
            )
        if fitting:
            self._check_warm_kind(MULTILABEL, None)
            self._kind = MULTILABEL
            self._one_d = False
            if boolean:
                self.classes_ = np.array([False, True])
            else:
                self.classes_ = np.array([-1, 1] if has_neg else [0, 1])
        return xp.where(Y > 0, 1.0, -1.0)

    def _encode_classes(self, y: Any, backend: Backend, fitting: bool, name: str) -> Any:
        """The label columns of the 1-D class labels ``y`` (:func:`class_columns`)."""
        if not fitting:
            if self._kind == MULTILABEL:
                raise ValueError(
                    f"{name} must be a 2-D label-indicator matrix like the y of fit, got "
                    f"shape {tuple(y.shape)}"
                )
            return class_columns(y, name, backend, self.classes_)[0]
        columns, classes, kind = class_columns(y, name, backend)
        self._check_warm_kind(kind, classes)
        self._kind = kind
        self._one_d = kind == BINARY
        self.classes_ = classes
        return columns

    def _check_warm_kind(self, kind: str, classes: np.ndarray | None) -> None:
        """A warm start keeps the kind of target and the classes of the first fit."""
        if not (bool(self.warm_start) and hasattr(self, "_model")):
            return
        same = kind == self._kind and (
            classes is None or (classes.shape == self.classes_.shape
                                and bool(np.all(classes == self.classes_))))
        if not same:
            first = (f"classes {self.classes_.tolist()}" if self._kind != MULTILABEL
                     else "multi-label indicators")
            now = f"classes {classes.tolist()}" if classes is not None else "multi-label indicators"
            raise ValueError(
                f"warm_start: y held {first} in the first fit, got {now}; fit with "
                "warm_start=False to change them"
            )

    @property
    def _kind(self) -> str:
        # models pickled before multi-class targets record only whether y was 1-D
        return self.__dict__.get("_target_kind") or (BINARY if self._one_d else MULTILABEL)

    @_kind.setter
    def _kind(self, kind: str) -> None:
        self._target_kind = kind

    def _validation_score(self, Y: Any, F: Any) -> float:
        from gpurpo.metrics import label_ranking_average_precision

        xp = self._model.backend.xp
        return label_ranking_average_precision((Y > 0).astype(xp.float64), F)

    @suggests_top_k
    def decision_function(self, X: Any) -> Any:
        """Scores (log-odds) of each label: (n, d); (n,) for two classes, (n, K) for K classes.

        Parameters
        ----------
        X : array or sparse matrix of shape (n_samples, n_features)
            Inputs; NaN marks a missing value.

        Returns
        -------
        float64 array of shape (n_samples, n_outputs) or (n_samples,)
            The raw scores ``F_M(X)``, in the order of ``classes_`` for K >= 3
            classes (a positive score of two classes favours the second). On
            the host for host ``X``, else on the backend of fit.
        """
        F, host = self._raw_predict(X)
        return _finish(F, host, self._one_d)

    @suggests_top_k
    def predict_proba(self, X: Any) -> Any:
        """Probability of each label, ``sigmoid(F)``: (n, d); (n, n_classes) for a 1-D ``y``.

        Parameters
        ----------
        X : array or sparse matrix of shape (n_samples, n_features)
            Inputs; NaN marks a missing value.

        Returns
        -------
        float64 array of shape (n_samples, n_outputs) or (n_samples, n_classes)
            For two classes the columns are ``1 - sigmoid(F)`` and
            ``sigmoid(F)``; for K >= 3 classes the K sigmoids divided by
            their sum; in the order of ``classes_``. On the host for host
            ``X``, else on the backend of fit.
        """
        F, host = self._raw_predict(X)
        P = self._to_proba(F)
        return _finish(P, host, False)

    def _ranked_outputs(self, F: Any) -> Any:
        return get_loss("log_loss").raw_to_output(self._model.backend, F)

    def _to_proba(self, F: Any) -> Any:
        xp = self._model.backend.xp
        P = get_loss("log_loss").raw_to_output(self._model.backend, F)
        if self._kind == BINARY:
            P = xp.concatenate([1.0 - P, P], axis=1)
        elif self._kind == MULTICLASS:
            P = P / P.sum(axis=1, keepdims=True)
        return P

    @suggests_top_k
    def predict(self, X: Any) -> Any:
        """Predicted labels (probability > 0.5), or classes for a 1-D ``y``.

        Parameters
        ----------
        X : array or sparse matrix of shape (n_samples, n_features)
            Inputs; NaN marks a missing value.

        Returns
        -------
        array of shape (n_samples, n_outputs) or (n_samples,)
            2-D ``y``: int64 indicators in the encoding of fit (0/1 or -1/1;
            ``F > 0`` gives the larger one), or bool for a bool ``y``. 1-D
            ``y``: the class of ``classes_`` with the largest probability
            (the second of two where ``F > 0``; first on ties). On the host
            for host ``X``, else on the backend of fit (non-numeric classes
            come back as a NumPy array).
        """
        F, host = self._raw_predict(X)
        return self._labels(F, host)

    def _labels(self, F: Any, host: bool) -> Any:
        """The predictions of :meth:`predict` from the scores ``F``."""
        backend = self._model.backend
        if self._kind != MULTILABEL:
            labels = labels_from_scores(F, self.classes_, self._kind, backend)
            return to_host(labels) if host else labels
        if self.classes_.dtype == bool:
            return _finish(F > 0, host, False)
        neg, pos = (int(v) for v in self.classes_)
        return _finish(backend.xp.where(F > 0, pos, neg).astype(backend.xp.int64), host, False)

    def staged_predict(self, X: Any) -> Iterator[Any]:
        """Predicted labels after each iteration (a generator).

        Parameters
        ----------
        X : array or sparse matrix of shape (n_samples, n_features)
            Inputs; NaN marks a missing value.

        Yields
        ------
        array of shape (n_samples, n_outputs) or (n_samples,)
            The labels of :meth:`predict` after iterations 1, ...,
            ``n_estimators_``.
        """
        for F, host in self._staged_raw_predict(X):
            yield self._labels(F, host)

    def staged_predict_proba(self, X: Any) -> Iterator[Any]:
        """Label probabilities after each iteration (a generator).

        Parameters
        ----------
        X : array or sparse matrix of shape (n_samples, n_features)
            Inputs; NaN marks a missing value.

        Yields
        ------
        float64 array of shape (n_samples, n_outputs) or (n_samples, 2)
            The probabilities of :meth:`predict_proba` after iterations 1,
            ..., ``n_estimators_``.
        """
        for F, host in self._staged_raw_predict(X):
            yield _finish(self._to_proba(F), host, False)

    def staged_decision_function(self, X: Any) -> Iterator[Any]:
        """Scores after each iteration (a generator).

        Parameters
        ----------
        X : array or sparse matrix of shape (n_samples, n_features)
            Inputs; NaN marks a missing value.

        Yields
        ------
        float64 array of shape (n_samples, n_outputs) or (n_samples,)
            The scores of :meth:`decision_function` after iterations 1, ...,
            ``n_estimators_``.
        """
        for F, host in self._staged_raw_predict(X):
            yield _finish(F, host, self._one_d)

    def __sklearn_tags__(self) -> Any:
        tags = super().__sklearn_tags__()
        tags.target_tags.multi_output = True
        tags.classifier_tags.multi_label = True
        tags.input_tags.allow_nan = True
        tags.input_tags.sparse = True
        return tags
