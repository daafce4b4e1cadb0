"""Label-space meta-estimators and the Rembrandt classification pipeline.

:class:`LabelSpaceRegressor` and :class:`LabelSpaceClassifier` encode the
targets with a linear reducer (:mod:`gpurpo.label_space.reducers`), fit any
scikit-learn-style regressor on the ``k`` codes and decode its predictions to
the ``d`` outputs (Tai & Lin 2012; Bi & Kwok 2013; Hsu et al. 2009; Mineiro
& Karampatziakis 2014). :class:`RembrandtClassifier` is Algorithm 3 of
Mineiro & Karampatziakis: Rembrandt embedding, least-squares map to the
embedding, optional random Fourier features, then a softmax / sigmoid (or
least-squares) decoder.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin, MultiOutputMixin, RegressorMixin, clone
from sklearn.utils.validation import check_is_fitted

from gpurpo._class_targets import check_y_present, encode_class_targets, labels_from_scores
from gpurpo._input_features import check_feature_names, check_n_features
from gpurpo._top_k import PREDICT_TOP_K_DOC, suggests_top_k, top_k_of_row_blocks
from gpurpo._validation import (
    check_array,
    check_choice,
    check_float,
    check_int,
)
from gpurpo.backend import Backend, check_random_state, resolve_backend
from gpurpo.label_space._decoders import fit_logistic_decoder, logistic_scores
from gpurpo.label_space._feature_maps import KERNELS, RandomFourierFeatures
from gpurpo.label_space._ridge_estimator import RidgeRegression, in_namespace_of, ridge_fit
from gpurpo.label_space.reducers import REDUCERS, RembrandtReducer, make_reducer

__all__ = ["LabelSpaceRegressor", "LabelSpaceClassifier", "RembrandtClassifier"]

DECODERS = ("linear", "logistic")
FEATURE_MAPS = (None, "rff")

#: Bytes of dense scores per block of rows in multi-label ``predict``.
_PREDICT_BLOCK_BYTES = 64 * 2**20


# --------------------------------------------------------------------------
# Validation shared by the three estimators
# --------------------------------------------------------------------------


def _check_X(est: BaseEstimator, X: Any, backend: Backend, reset: bool) -> Any:
    check_feature_names(est, X, reset=reset)
    Xv = check_array(X, "X", backend, accept_sparse=True)
    if Xv.shape[1] < 1:
        raise ValueError(
            f"X has 0 feature(s) (shape={tuple(Xv.shape)}) while a minimum of 1 is required."
        )
    check_n_features(est, Xv.shape[1], reset=reset)
    return Xv


def _check_rows(X: Any, Y: Any, name: str) -> int:
    n = int(X.shape[0])
    if int(Y.shape[0]) != n:
        raise ValueError(
            f"inconsistent numbers of rows: X has {n} and y has {int(Y.shape[0])}"
        )
    if n < 2:
        raise ValueError(f"{name} needs at least 2 samples to fit, got {n} sample")
    return n


def _check_n_components(value: Any) -> int:
    return check_int(value, "n_components", low=1)


def _check_n_iter(value: Any) -> int | str:
    if isinstance(value, str):
        if value != "auto":
            raise ValueError(f"n_iter must be a non-negative int or 'auto', got {value!r}")
        return value
    return check_int(value, "n_iter", low=0)


def _check_n_oversamples(value: Any) -> int | None:
    return None if value is None else check_int(value, "n_oversamples", low=0)


def _check_bool(value: Any, name: str) -> bool:
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} must be a bool, got {type(value).__name__} {value!r}")
    return bool(value)


def _encode_labels(y: Any, backend: Backend, name: str) -> tuple[Any, np.ndarray, bool]:
    """Labels as a float64 0/1 matrix on ``backend``: one-hot CSR for 1-D class labels.

    Returns ``(Y, classes, multilabel)``; ``classes`` lives on the host
    (:func:`gpurpo._class_targets.encode_class_targets`).
    """
    targets = encode_class_targets(
        check_y_present(y, name), backend, regressor="LabelSpaceRegressor", dtype=np.float64,
        sparse_one_hot=True, min_classes=2,
    )
    return targets.Y, targets.classes, targets.multilabel


def _top_k_scores(est: BaseEstimator, X: Any, k: int, rows_scores: Any) -> tuple[Any, Any]:
    """``predict_top_k`` of a fitted label-space model.

    ``rows_scores(Xv_rows, backend)`` gives the dense scores (rows, n_outputs_)
    of validated rows; they are formed by blocks of rows, so the (n, d)
    matrix never exists.
    """
    backend = resolve_backend(X, device=est.device)
    Xv = _check_X(est, X, backend, reset=False)
    k = check_int(k, "k", low=1, high=est.n_outputs_)
    indices, scores = top_k_of_row_blocks(
        int(Xv.shape[0]), int(est.n_outputs_), k,
        lambda r0, r1: rows_scores(Xv[r0:r1], backend), backend,
    )
    return in_namespace_of(indices, X), in_namespace_of(scores, X)


class _LabelOutputs:
    """Turn (n, C) label scores into the classifier outputs (shared by both classifiers)."""

    def _scores_to_classes(self, scores: Any, backend: Backend) -> Any:
        return labels_from_scores(scores, self.classes_, backend)

    def _threshold(self) -> float:
        return check_float(self.threshold, "threshold")

    def _multilabel_predict(self, X: Any, values: Any) -> Any:
        """``values(X_block, backend) >= threshold`` by blocks of rows of the validated ``X``.

        Sparse training labels give a CSR matrix of float64 0/1 values (the
        dtype sparse matrices support on both SciPy and cupyx), assembled
        block by block so that the dense (n, d) scores never exist in full;
        dense training labels give a dense int64 array.
        """
        backend = resolve_backend(X, device=self.device)
        xp = backend.xp
        Xv = _check_X(self, X, backend, reset=False)
        threshold = self._threshold()
        step = max(1, _PREDICT_BLOCK_BYTES // (8 * self.n_outputs_))
        blocks = []
        for start in range(0, int(Xv.shape[0]), step):
            block = values(Xv[start : start + step], backend) >= threshold
            if self.sparse_output_:
                blocks.append(backend.sparse.csr_matrix(block.astype(xp.float64)))
            else:
                blocks.append(block.astype(xp.int64))
        if self.sparse_output_:
            out = backend.sparse.vstack(blocks, format="csr")
        else:
            out = xp.concatenate(blocks, axis=0)
        return in_namespace_of(out, X)

    def _decision(self, scores: Any) -> Any:
        """(n, C) scores, or the 1-D ``s_1 - s_0`` for two classes (positive: ``classes_[1]``)."""
        if not self.multilabel_ and scores.shape[1] == 2:
            return scores[:, 1] - scores[:, 0]
        return scores

    def _clipped_proba(self, scores: Any, backend: Backend) -> Any:
        """Scores clipped to [0, 1]; rows normalised to sum to one for single-label y."""
        xp = backend.xp
        proba = xp.clip(scores, 0.0, 1.0)
        if self.multilabel_:
            return proba
        total = xp.sum(proba, axis=1, keepdims=True)
        uniform = xp.full_like(proba, 1.0 / proba.shape[1])
        return xp.where(total > 0, proba / xp.where(total > 0, total, 1.0), uniform)


# --------------------------------------------------------------------------
# LabelSpaceRegressor / LabelSpaceClassifier
# --------------------------------------------------------------------------


class _BaseLabelSpace(BaseEstimator):
    """Encode the targets, regress the codes with ``estimator``, decode the predictions."""

    def __init__(
        self,
        reducer: str = "plst",
        estimator: Any = None,
        n_components: int = 20,
        alpha: float = 1.0,
        n_oversamples: int | None = None,
        n_iter: int | str = "auto",
        random_state: Any = None,
        device: str = "auto",
    ) -> None:
        self.reducer = reducer
        self.estimator = estimator
        self.n_components = n_components
        self.alpha = alpha
        self.n_oversamples = n_oversamples
        self.n_iter = n_iter
        self.random_state = random_state
        self.device = device

    def __sklearn_tags__(self) -> Any:
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        return tags

    def _make_estimator(self) -> Any:
        if self.estimator is None:
            return RidgeRegression(alpha=self.alpha, device=self.device)
        if not (hasattr(self.estimator, "fit") and hasattr(self.estimator, "predict")):
            raise TypeError(
                "estimator must be None or a regressor with fit and predict methods, got "
                f"{type(self.estimator).__name__} {self.estimator!r}"
            )
        return clone(self.estimator)

    def _fit_codes(self, X: Any, Y: Any, backend: Backend) -> None:
        """Fit ``reducer_`` on the labels ``Y`` (n, d) and ``estimator_`` on the codes."""
        reducer = check_choice(self.reducer, "reducer", REDUCERS)
        k = _check_n_components(self.n_components)
        alpha = check_float(self.alpha, "alpha", low=0.0)
        n_oversamples = _check_n_oversamples(self.n_oversamples)
        n_iter = _check_n_iter(self.n_iter)
        estimator = self._make_estimator()
        n = _check_rows(X, Y, type(self).__name__)
        k = min(k, n, int(Y.shape[1]))
        rng = check_random_state(self.random_state)
        self.reducer_ = make_reducer(
            reducer, k, alpha=alpha, random_state=rng, n_oversamples=n_oversamples, n_iter=n_iter
        ).fit(Y, X, backend)
        Z = self.reducer_.encode(Y)
        estimator.fit(X, Z[:, 0] if k == 1 else Z)
        self.estimator_ = estimator
        self.n_components_ = k
        self.n_outputs_ = int(Y.shape[1])

    def _decoded(self, X: Any) -> tuple[Any, Backend]:
        """Decoded predictions (n, d) on the backend of ``X``."""
        check_is_fitted(self, "estimator_")
        backend = resolve_backend(X, device=self.device)
        return self._decoded_rows(_check_X(self, X, backend, reset=False), backend), backend

    def _decoded_rows(self, Xv: Any, backend: Backend) -> Any:
        """Decoded predictions (n, d) of validated inputs ``Xv`` on ``backend``."""
        codes = backend.asarray(self.estimator_.predict(Xv), dtype=backend.xp.float64)
        codes = codes.reshape(int(Xv.shape[0]), self.n_components_)
        return self.reducer_.decode(codes, backend)

    def predict_top_k(self, X: Any, k: int = 5) -> tuple[Any, Any]:
        check_is_fitted(self, "estimator_")
        return _top_k_scores(self, X, k, self._decoded_rows)

    predict_top_k.__doc__ = PREDICT_TOP_K_DOC.format(
        scores="The decoded scores: the regressor's predictions, the classifier's "
        "decision_function (before clipping to [0, 1]).")

_SHARED_PARAMS = """    reducer : {"plst", "rembrandt", "random", "cssp"}, default="plst"
        How the targets are encoded and decoded (see
        :mod:`gpurpo.label_space.reducers`): PLST (PCA of Y with its mean,
        Tai & Lin 2012), Rembrandt (top eigenvectors of ``Y^T P_X Y``, uses
        X; Mineiro & Karampatziakis, Algorithm 2), a Gaussian projection with
        least-squares decoding (compressed sensing, Hsu et al. 2009), or
        ML-CSSP label selection decoded with ``Y_C^+ Y`` (Bi & Kwok 2013,
        Algorithm 1).
    estimator : regressor or None, default=None
        Any scikit-learn-style regressor fitted on the ``k`` codes (cloned;
        it receives ``X`` in the namespace of the computation and a 1-D
        target when ``k = 1``). ``None``: :class:`RidgeRegression` with
        ``alpha``, computed on the active backend.
    n_components : int, default=20
        Code length ``k``; values above ``min(n_samples, n_outputs)`` are
        reduced to it (:attr:`n_components_` holds the value used).
    alpha : float, default=1.0
        Ridge penalty of the default estimator and of Rembrandt's
        least-squares fits.
    n_oversamples : int or None, default=None
        Oversampling of the randomized range finders (PLST, Rembrandt,
        CSSP); None uses the :mod:`gpurpo.linalg` defaults.
    n_iter : int or "auto", default="auto"
        Power iterations of the randomized SVD (PLST, CSSP) or range-finder
        passes of Rembrandt; ``"auto"`` uses the :mod:`gpurpo.linalg` defaults.
    random_state : None, int or numpy Generator
        Seeds the reducer (same seed, same model on the same backend).
    device : {"auto", "cpu", "cuda"}, default="auto"
        Where to compute; ``"auto"`` follows the data (CuPy input stays on
        the GPU). Results come back in the namespace of the input.
"""

_SHARED_ATTRIBUTES = """    reducer_ : LabelReducer
        The fitted reducer (``encode``/``decode``, ``decoder_``, ``mean_``).
    estimator_ : regressor
        The fitted estimator on the codes.
    n_components_ : int
        Code length used.
    n_outputs_ : int
        Number of outputs (labels) d.
    n_features_in_ : int
    feature_names_in_ : ndarray of str, shape (n_features_in_,)
        Column names of the data frame ``X`` given to ``fit``, when they are all
        strings; absent otherwise. Later inputs must have the same names in the
        same order.
"""


class LabelSpaceRegressor(MultiOutputMixin, RegressorMixin, _BaseLabelSpace):
    __doc__ = (
        """Multi-output regression through a low-dimensional label space.

    Fit: ``Z = encode(Y)`` (n x k), ``estimator.fit(X, Z)``; predict:
    ``decode(estimator.predict(X))`` (n x d). With the default ridge
    estimator and ``reducer="rembrandt"`` this is reduced-rank (ridge)
    regression: the prediction ``P_X Y_c R R^T`` projects the least-squares
    fit on the top-``k`` eigenvectors ``R`` of ``Y_c^T P_X Y_c``. ``Y`` may be
    sparse (never densified); predictions are dense.

    Parameters
    ----------
"""
        + _SHARED_PARAMS
        + """
    Attributes
    ----------
"""
        + _SHARED_ATTRIBUTES
    )

    def fit(self, X: Any, y: Any) -> LabelSpaceRegressor:
        """Fit on ``X`` (n, p) and targets ``y`` (n,) or (n, d), dense or sparse."""
        y = check_y_present(y, type(self).__name__)
        backend = resolve_backend(X, y, device=self.device)
        Xv = _check_X(self, X, backend, reset=True)
        Y = check_array(y, "y", backend, accept_sparse=True, ensure_2d=False)
        if Y.ndim not in (1, 2):
            raise ValueError(f"y must be 1-D or 2-D, got shape {tuple(Y.shape)}")
        self._y_1d = Y.ndim == 1
        Y = Y.reshape(-1, 1) if self._y_1d else Y
        self._fit_codes(Xv, Y.astype(backend.xp.float64), backend)
        return self

    @suggests_top_k
    def predict(self, X: Any) -> Any:
        """Decoded predictions, (n,) or (n, d), in the namespace of ``X``."""
        out, _ = self._decoded(X)
        return in_namespace_of(out[:, 0] if self._y_1d else out, X)


class LabelSpaceClassifier(_LabelOutputs, ClassifierMixin, _BaseLabelSpace):
    __doc__ = (
        """Multi-label (or single-label) classification through a low-dimensional label space.

    The 0/1 label matrix ``Y`` (n x d, dense or sparse) is encoded, the codes
    are regressed on ``X`` and the predictions decoded to real label scores
    ``s`` (Tai & Lin 2012; Bi & Kwok 2013). :meth:`decision_function` returns
    ``s``, :meth:`predict_proba` the scores clipped to [0, 1] (for ranking),
    :meth:`predict` the rounded scores ``s >= threshold`` (0.5: rounding, as
    in the papers). Single-label ``y`` (n,) of class ids is one-hot encoded:
    :meth:`predict` returns the class of largest score and
    :meth:`predict_proba` the clipped scores normalised to sum to one.

    Parameters
    ----------
"""
        + _SHARED_PARAMS
        + """    threshold : float, default=0.5
        Multi-label predictions are ``decision_function(X) >= threshold``.

    Attributes
    ----------
"""
        + _SHARED_ATTRIBUTES
        + """    classes_ : ndarray
        Class labels (single-label y); ``array([0, 1])`` for multi-label Y.
    multilabel_ : bool
        Whether ``y`` was a 2-D label matrix.
    sparse_output_ : bool
        Whether ``predict`` returns CSR (float64 0/1 values; multi-label ``Y``
        given as sparse) rather than a dense int64 array.
"""
    )

    def __init__(
        self,
        reducer: str = "plst",
        estimator: Any = None,
        n_components: int = 20,
        alpha: float = 1.0,
        n_oversamples: int | None = None,
        n_iter: int | str = "auto",
        random_state: Any = None,
        device: str = "auto",
        threshold: float = 0.5,
    ) -> None:
        super().__init__(
            reducer=reducer,
            estimator=estimator,
            n_components=n_components,
            alpha=alpha,
            n_oversamples=n_oversamples,
            n_iter=n_iter,
            random_state=random_state,
            device=device,
        )
        self.threshold = threshold

    def __sklearn_tags__(self) -> Any:
        tags = super().__sklearn_tags__()
        tags.classifier_tags.multi_label = True
        return tags

    def fit(self, X: Any, y: Any) -> LabelSpaceClassifier:
        """Fit on ``X`` (n, p) and a 0/1 label matrix (n, d) or class ids (n,)."""
        self._threshold()
        y = check_y_present(y, type(self).__name__)
        backend = resolve_backend(X, y, device=self.device)
        Xv = _check_X(self, X, backend, reset=True)
        Y, self.classes_, self.multilabel_ = _encode_labels(y, backend, type(self).__name__)
        self.sparse_output_ = bool(self.multilabel_ and backend.issparse(Y))
        self._fit_codes(Xv, Y, backend)
        return self

    @suggests_top_k
    def decision_function(self, X: Any) -> Any:
        """Decoded label scores: (n, d) multi-label, (n, n_classes) or (n,) for two classes."""
        scores, _ = self._decoded(X)
        return in_namespace_of(self._decision(scores), X)

    @suggests_top_k
    def predict_proba(self, X: Any) -> Any:
        """Scores clipped to [0, 1] (multi-label), normalised per row for single-label y."""
        scores, backend = self._decoded(X)
        return in_namespace_of(self._clipped_proba(scores, backend), X)

    @suggests_top_k
    def predict(self, X: Any) -> Any:
        """0/1 label matrix (rounded scores) or the class of largest score."""
        check_is_fitted(self, "estimator_")
        if self.multilabel_:
            return self._multilabel_predict(X, self._decoded_rows)
        scores, backend = self._decoded(X)
        return in_namespace_of(self._scores_to_classes(scores, backend), X)


# --------------------------------------------------------------------------
# Rembrandt classification pipeline
# --------------------------------------------------------------------------


class RembrandtClassifier(_LabelOutputs, ClassifierMixin, BaseEstimator):
    """Rembrandt classification pipeline (Mineiro & Karampatziakis, arXiv:1412.6547, Algorithm 3).

    1. Embed the labels: ``R`` (d x k), the top eigenvectors of
       ``Y_c^T P_X Y_c`` (Algorithm 2, :class:`~gpurpo.label_space.reducers.RembrandtReducer`);
    2. ``W = argmin_W ||Y_c R - X_c W||^2 + alpha ||W||^2`` (ridge with intercept);
    3. ``H = phi(X W + c)`` with ``phi`` the identity or random Fourier
       features (Gaussian frequencies: RBF kernel; Cauchy: Laplacian kernel);
    4. the decoder ``Q`` from ``H`` to the labels: ``"logistic"`` minimises
       the log loss (softmax for single-label multiclass y, independent
       sigmoids for multi-label Y) plus ``decoder_alpha/2 ||Q||^2`` by
       full-batch L-BFGS with early stopping on a held-out fraction of the
       rows; ``"linear"`` is the ridge least-squares fit of ``Y`` on ``H``.

    Everything runs on the backend of the data (CuPy stays on the GPU);
    sparse ``Y`` is never densified; the same ``random_state`` gives the same
    model on the same backend.

    Parameters
    ----------
    n_components : int, default=20
        Embedding dimension ``k`` (reduced to ``min(n_samples, n_labels)``).
    decoder : {"logistic", "linear"}, default="logistic"
    feature_map : {None, "rff"}, default=None
        Random Fourier features on the predicted embedding.
    kernel : {"rbf", "laplacian"}, default="rbf"
        Kernel approximated by ``feature_map="rff"``.
    n_random_features : int, default=1000
        Number of random Fourier features.
    gamma : float or None, default=None
        Kernel parameter (see :class:`RandomFourierFeatures`).
    alpha : float, default=1.0
        Ridge penalty of Rembrandt's least-squares fits, of ``W`` and of the
        linear decoder.
    decoder_alpha : float, default=1e-4
        L2 penalty of the logistic decoder, on the coefficients of the
        standardised columns of ``H`` (mean log loss + ``decoder_alpha/2 ||Q||^2``).
    max_iter : int, default=300
        Maximum L-BFGS iterations of the logistic decoder.
    tol : float, default=1e-4
        Held-out loss improvement that counts (early stopping), or gradient
        tolerance without early stopping.
    early_stopping : bool, default=True
        Hold out ``validation_fraction`` of the rows and keep the iterate
        with the lowest held-out log loss, stopping after
        ``n_iter_no_change`` iterations without improvement.
    validation_fraction : float, default=0.1
        In (0, 1).
    n_iter_no_change : int, default=10
    n_oversamples, n_iter
        Rembrandt's oversampling and range-finder passes (None / "auto":
        :func:`gpurpo.linalg.rembrandt` defaults).
    threshold : float, default=0.5
        Multi-label predictions are ``predict_proba(X) >= threshold``
        (logistic) or ``decision_function(X) >= threshold`` (linear).
    random_state : None, int or numpy Generator
    device : {"auto", "cpu", "cuda"}, default="auto"
    verbose : int, default=0
        Print the decoder's losses every iteration when positive.

    Attributes
    ----------
    embedding_ : array, shape (n_labels, k)
        ``R``.
    embedding_mean_ : array, shape (n_labels,)
        Mean label vector removed before embedding.
    regression_coef_ : array, shape (n_features, k)
        ``W``.
    regression_intercept_ : array, shape (k,)
    feature_map_ : RandomFourierFeatures or None
    decoder_coef_ : array, shape (D, n_labels)
        ``Q`` (``D = k`` without feature map).
    decoder_intercept_ : array, shape (n_labels,)
    n_iter_ : int
        L-BFGS iterations run (1 for the linear decoder: one exact solve).
    best_iteration_ : int
        Iteration kept by early stopping.
    validation_loss_ : list of float
        Held-out log loss after each iteration.
    classes_, multilabel_, sparse_output_, n_components_, n_features_in_
        As in :class:`LabelSpaceClassifier`.
    """

    def __init__(
        self,
        n_components: int = 20,
        decoder: str = "logistic",
        feature_map: str | None = None,
        kernel: str = "rbf",
        n_random_features: int = 1000,
        gamma: float | None = None,
        alpha: float = 1.0,
        decoder_alpha: float = 1e-4,
        max_iter: int = 300,
        tol: float = 1e-4,
        early_stopping: bool = True,
        validation_fraction: float = 0.1,
        n_iter_no_change: int = 10,
        n_oversamples: int | None = None,
        n_iter: int | str = "auto",
        threshold: float = 0.5,
        random_state: Any = None,
        device: str = "auto",
        verbose: int = 0,
    ) -> None:
        self.n_components = n_components
        self.decoder = decoder
        self.feature_map = feature_map
        self.kernel = kernel
        self.n_random_features = n_random_features
        self.gamma = gamma
        self.alpha = alpha
        self.decoder_alpha = decoder_alpha
        self.max_iter = max_iter
        self.tol = tol
        self.early_stopping = early_stopping
        self.validation_fraction = validation_fraction
        self.n_iter_no_change = n_iter_no_change
        self.n_oversamples = n_oversamples
        self.n_iter = n_iter
        self.threshold = threshold
        self.random_state = random_state
        self.device = device
        self.verbose = verbose

    def __sklearn_tags__(self) -> Any:
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        tags.classifier_tags.multi_label = True
        return tags

    def _check_params(self) -> dict[str, Any]:
        params = dict(
            k=_check_n_components(self.n_components),
            decoder=check_choice(self.decoder, "decoder", DECODERS),
            feature_map=check_choice(self.feature_map, "feature_map", FEATURE_MAPS),
            alpha=check_float(self.alpha, "alpha", low=0.0),
            decoder_alpha=check_float(self.decoder_alpha, "decoder_alpha", low=0.0),
            max_iter=check_int(self.max_iter, "max_iter", low=1),
            tol=check_float(self.tol, "tol", low=0.0),
            early_stopping=_check_bool(self.early_stopping, "early_stopping"),
            validation_fraction=check_float(
                self.validation_fraction, "validation_fraction", low=0.0, high=1.0,
                low_inclusive=False, high_inclusive=False,
            ),
            n_iter_no_change=check_int(self.n_iter_no_change, "n_iter_no_change", low=1),
            n_oversamples=_check_n_oversamples(self.n_oversamples),
            n_iter=_check_n_iter(self.n_iter),
            verbose=check_int(self.verbose, "verbose", low=0),
        )
        check_choice(self.kernel, "kernel", KERNELS)
        check_int(self.n_random_features, "n_random_features", low=1)
        if self.gamma is not None:
            check_float(self.gamma, "gamma", low=0.0, low_inclusive=False)
        self._threshold()
        return params

    def fit(self, X: Any, y: Any) -> RembrandtClassifier:
        """Fit on ``X`` (n, p) and a 0/1 label matrix (n, d) or class ids (n,)."""
        params = self._check_params()
        y = check_y_present(y, type(self).__name__)
        backend = resolve_backend(X, y, device=self.device)
        xp = backend.xp
        Xv = _check_X(self, X, backend, reset=True)
        Y, self.classes_, self.multilabel_ = _encode_labels(y, backend, type(self).__name__)
        self.sparse_output_ = bool(self.multilabel_ and backend.issparse(Y))
        n = _check_rows(Xv, Y, type(self).__name__)
        k = min(params["k"], n, int(Y.shape[1]))
        rng = check_random_state(self.random_state)

        reducer = RembrandtReducer(
            k, alpha=params["alpha"], random_state=rng,
            n_oversamples=params["n_oversamples"], n_iter=params["n_iter"],
        ).fit(Y, Xv, backend)
        W, c, _ = ridge_fit(Xv, reducer.encode(Y), backend, params["alpha"])
        E = xp.asarray(Xv @ W) + c[None, :]
        if params["feature_map"] == "rff":
            self.feature_map_ = RandomFourierFeatures(
                n_components=self.n_random_features, kernel=self.kernel, gamma=self.gamma,
                random_state=rng, device=self.device,
            ).fit(E)
            H = backend.asarray(self.feature_map_.transform(E))
        else:
            self.feature_map_ = None
            H = E
        if params["decoder"] == "logistic":
            result = fit_logistic_decoder(
                H, Y, backend,
                multiclass=not self.multilabel_,
                alpha=params["decoder_alpha"],
                max_iter=params["max_iter"],
                tol=params["tol"],
                validation_fraction=params["validation_fraction"] if params["early_stopping"] else None,
                n_iter_no_change=params["n_iter_no_change"],
                rng=rng,
                verbose=params["verbose"],
            )
            Q, b = result.coef, result.intercept
            self.n_iter_, self.best_iteration_ = result.n_iter, result.best_iteration
            self.validation_loss_ = result.validation_loss
        else:
            Q, b, _ = ridge_fit(H, Y, backend, params["alpha"])
            self.n_iter_, self.best_iteration_, self.validation_loss_ = 1, 1, []
        self.embedding_ = xp.ascontiguousarray(reducer.decoder_.T)
        self.embedding_mean_ = reducer.mean_
        self.regression_coef_, self.regression_intercept_ = W, c
        self.decoder_coef_, self.decoder_intercept_ = Q, b
        self.n_components_ = k
        self.n_outputs_ = int(Y.shape[1])
        return self

    def _scores(self, X: Any) -> tuple[Any, Any, Backend]:
        """Decoder scores (logits or least-squares scores) and probabilities (logistic only)."""
        check_is_fitted(self, "decoder_coef_")
        backend = resolve_backend(X, device=self.device)
        return self._scores_rows(_check_X(self, X, backend, reset=False), backend)

    def _scores_rows(self, Xv: Any, backend: Backend) -> tuple[Any, Any, Backend]:
        """:meth:`_scores` of validated inputs ``Xv`` on ``backend``."""
        xp = backend.xp
        W = backend.asarray(self.regression_coef_)
        E = xp.asarray(Xv @ W) + backend.asarray(self.regression_intercept_)[None, :]
        H = E if self.feature_map_ is None else backend.asarray(self.feature_map_.transform(E))
        Q = backend.asarray(self.decoder_coef_)
        b = backend.asarray(self.decoder_intercept_)
        if self.decoder == "logistic":
            logits, proba = logistic_scores(H, Q, b, not self.multilabel_, xp)
            return logits, proba, backend
        return H @ Q + b[None, :], None, backend

    def predict_top_k(self, X: Any, k: int = 5) -> tuple[Any, Any]:
        check_is_fitted(self, "decoder_coef_")
        return _top_k_scores(self, X, k, lambda rows, backend: self._scores_rows(rows, backend)[0])

    predict_top_k.__doc__ = PREDICT_TOP_K_DOC.format(
        scores="The decoder's scores: logits (logistic decoder) or least-squares "
        "scores (linear decoder), as in decision_function.")

    @suggests_top_k
    def decision_function(self, X: Any) -> Any:
        """Logits (logistic) or least-squares scores (linear); (n,) for two classes."""
        scores, _, _ = self._scores(X)
        return in_namespace_of(self._decision(scores), X)

    @suggests_top_k
    def predict_proba(self, X: Any) -> Any:
        """Softmax / sigmoid probabilities, or clipped least-squares scores (normalised for multiclass)."""
        scores, proba, backend = self._scores(X)
        if proba is None:
            proba = self._clipped_proba(scores, backend)
        return in_namespace_of(proba, X)

    @suggests_top_k
    def predict(self, X: Any) -> Any:
        """Class of largest score (single-label) or the thresholded label matrix (multi-label)."""
        check_is_fitted(self, "decoder_coef_")
        if self.multilabel_:

            def values(rows: Any, backend: Backend) -> Any:
                scores, proba, _ = self._scores_rows(rows, backend)
                return scores if proba is None else proba

            return self._multilabel_predict(X, values)
        scores, _, backend = self._scores(X)
        return in_namespace_of(self._scores_to_classes(scores, backend), X)
