"""Decision tree estimators grown on (randomly projected) outputs.

Joly, Geurts & Wehenkel (2014), section 3.1: a multi-output regression tree
whose splits maximise the reduction of the summed variance of the outputs
projected by a random matrix ``Phi`` (m x d), ``Y Phi^T``, and whose leaves
are labelled with the mean of the ORIGINAL outputs of their training samples.
With ``projection=None`` it is the exact multi-output variance-reduction tree
(Breiman et al. 1984) on binned inputs.
"""

from __future__ import annotations

import math
import numbers
from typing import Any

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin, RegressorMixin, clone
from sklearn.utils.validation import check_is_fitted

from gpurpo._class_targets import check_y_present, encode_class_targets, labels_from_scores
from gpurpo._input_features import check_feature_names, check_n_features
from gpurpo._top_k import PREDICT_TOP_K_DOC, suggests_top_k, top_k_of_row_blocks
from gpurpo._validation import (
    check_array,
    check_choice,
    check_consistent_rows,
    check_has_outputs,
    check_int,
    check_weight_scale,
    validate_values,
)
from gpurpo.backend import Backend, check_random_state, is_gpu_array, resolve_backend, to_host
from gpurpo.tree._dense_csr import dense_to_csr
from gpurpo.tree._params import GrowthParams, n_candidate_features
from gpurpo.tree.binning import DEFAULT_MAX_BINNED_BYTES, MAX_BINS, BinMapper, canonical_csr, check_max_bins
from gpurpo.tree.growth import grow_tree_best_first, grow_trees
from gpurpo.tree.leaf_sums import prefers_leaf_sums, top_k_of_leaf_sums
from gpurpo.tree.leaves import SPARSE_OUTPUT_DENSITY, leaf_values, relabelling_outputs
from gpurpo.tree.predictor import Tree, apply_trees_block
from gpurpo.tree.thresholds import refine_thresholds

__all__ = ["DecisionTreeRegressor", "DecisionTreeClassifier"]

_MAX_DENSE_TARGET_BYTES = 2 * 1024**3


def _check_min_samples(value: Any, name: str, n: int, low_int: int, high_float: float) -> int:
    if isinstance(value, bool):
        raise TypeError(f"{name} must be an int or a float, got {value!r}")
    if isinstance(value, numbers.Integral):
        if value < low_int:
            raise ValueError(f"{name} given as an int must be >= {low_int}, got {value}")
        return int(value)
    if isinstance(value, numbers.Real):
        if not (0.0 < float(value) <= high_float):
            raise ValueError(
                f"{name} given as a float must be in (0, {high_float}], got {value}"
            )
        return max(low_int, int(math.ceil(float(value) * n)))
    raise TypeError(f"{name} must be an int or a float, got {type(value).__name__} {value!r}")


class _BaseTree(BaseEstimator):
    """Shared fit/predict logic of the tree estimators."""

    def __init__(
        self,
        *,
        projection: Any = None,
        n_components: Any = "sqrt",
        splitter: str = "best",
        max_depth: int | None = None,
        min_samples_split: int | float = 2,
        min_samples_leaf: int | float = 1,
        max_leaf_nodes: int | None = None,
        max_features: Any = None,
        min_impurity_decrease: float = 0.0,
        max_bins: int = MAX_BINS,
        max_binned_bytes: int = DEFAULT_MAX_BINNED_BYTES,
        random_state: Any = None,
        device: str = "auto",
    ) -> None:
        self.projection = projection
        self.n_components = n_components
        self.splitter = splitter
        self.max_depth = max_depth
        self.min_samples_split = min_samples_split
        self.min_samples_leaf = min_samples_leaf
        self.max_leaf_nodes = max_leaf_nodes
        self.max_features = max_features
        self.min_impurity_decrease = min_impurity_decrease
        self.max_bins = max_bins
        self.max_binned_bytes = max_binned_bytes
        self.random_state = random_state
        self.device = device

    def __sklearn_tags__(self) -> Any:
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = True
        tags.input_tags.sparse = True
        tags.target_tags.multi_output = True
        return tags

    # ------------------------------------------------------------ validation

    def _growth_params(self, n: int, p: int) -> GrowthParams:
        if self.max_depth is not None:
            if isinstance(self.max_depth, bool) or not isinstance(self.max_depth, numbers.Integral):
                raise TypeError(f"max_depth must be an int or None, got {self.max_depth!r}")
            if self.max_depth < 1:
                raise ValueError(f"max_depth must be >= 1 or None, got {self.max_depth}")
        if self.max_leaf_nodes is not None:
            if isinstance(self.max_leaf_nodes, bool) or not isinstance(
                self.max_leaf_nodes, numbers.Integral
            ):
                raise TypeError(
                    f"max_leaf_nodes must be an int or None, got {self.max_leaf_nodes!r}"
                )
            if self.max_leaf_nodes < 2:
                raise ValueError(f"max_leaf_nodes must be >= 2 or None, got {self.max_leaf_nodes}")
        check_choice(self.splitter, "splitter", ("best", "random"))
        min_split = _check_min_samples(self.min_samples_split, "min_samples_split", n, 2, 1.0)
        min_leaf = _check_min_samples(self.min_samples_leaf, "min_samples_leaf", n, 1, 1.0)
        if isinstance(self.min_impurity_decrease, bool) or not isinstance(
            self.min_impurity_decrease, numbers.Real
        ):
            raise TypeError(
                f"min_impurity_decrease must be a float, got {self.min_impurity_decrease!r}"
            )
        if not (self.min_impurity_decrease >= 0 and math.isfinite(self.min_impurity_decrease)):
            raise ValueError(
                "min_impurity_decrease must be a finite float >= 0, got "
                f"{self.min_impurity_decrease}"
            )
        k = n_candidate_features(self.max_features, p)
        return GrowthParams(
            n_candidates=k,
            max_depth=None if self.max_depth is None else int(self.max_depth),
            min_samples_split=min_split,
            min_samples_leaf=min_leaf,
            max_leaf_nodes=None if self.max_leaf_nodes is None else int(self.max_leaf_nodes),
            min_impurity_decrease=float(self.min_impurity_decrease),
            splitter=self.splitter,
        )

    def _check_sample_weight(self, sample_weight: Any, n: int, backend: Backend) -> Any:
        if sample_weight is None:
            return None
        xp = backend.xp
        w = backend.asarray(sample_weight, dtype=xp.float64)
        if w.ndim != 1 or w.shape[0] != n:
            raise ValueError(
                f"sample_weight must have shape (n_samples,) = ({n},), got {tuple(w.shape)}"
            )
        if not bool(xp.isfinite(w).all()) or bool((w < 0).any()):
            raise ValueError("sample_weight must be finite and non-negative")
        check_weight_scale(w)
        return w

    def _check_X(self, X: Any, backend: Backend, reset: bool, check_values: bool = True) -> Any:
        """``X`` validated on ``backend``; ``check_values=False`` leaves its values to the caller."""
        check_feature_names(self, X, reset=reset)
        Xv = check_array(X, "X", backend, allow_nan=True, accept_sparse=True, float32_range=True,
                         check_values=check_values)
        if Xv.shape[1] < 1:
            raise ValueError(
                f"X has 0 feature(s) (shape={tuple(Xv.shape)}) while a minimum of 1 is required."
            )
        if Xv.dtype not in (backend.xp.float32, backend.xp.float64):
            Xv = Xv.astype(backend.xp.float64)
        check_n_features(self, Xv.shape[1], reset=reset)
        return Xv

    # -------------------------------------------------------------- fitting

    def _targets(self, Y: Any, backend: Backend, rng: np.random.Generator,
                 Y_sparse: Any = None) -> Any:
        """Projected (or original) outputs as a dense float32 (n, m) array.

        ``Y_sparse``: a CSR copy of a dense ``Y`` (or None); a projection drawn by
        name multiplies it, a product over the nonzeros only, in the order of a
        CSR ``Y`` (the same targets for either container).
        """
        from gpurpo import projections

        xp = backend.xp
        n, d = Y.shape
        proj = self.projection
        if proj is None:
            # unused, but validated (scikit-learn checks unused parameters too)
            projections.resolve_n_components(self.n_components, d, n_samples=n)
            if backend.issparse(Y):
                if 4 * n * d > _MAX_DENSE_TARGET_BYTES:
                    raise ValueError(
                        f"projection=None needs the outputs as a dense float32 array of shape "
                        f"{(n, d)} ({4 * n * d} bytes); pass a projection (e.g. "
                        "projection='gaussian') for sparse outputs this wide"
                    )
                Y = Y.toarray()
            self.projection_ = None
            return xp.asarray(Y, dtype=xp.float32)
        if isinstance(proj, str):
            check_choice(proj, "projection", (None,) + projections.KINDS)
            components = projections.make_projection(proj, self.n_components, d, rng, n_samples=n)
            self.projection_ = components
            product = projections.project(Y if Y_sparse is None else Y_sparse, components, backend)
            return xp.asarray(product, dtype=xp.float32)
        if isinstance(proj, projections.OutputProjection):
            est = clone(proj)
            if est.random_state is None:
                est.set_params(random_state=int(rng.integers(0, 2**31 - 1)))
            est.fit(Y)
            self.projection_ = est.components_
            return xp.asarray(est.transform(Y), dtype=xp.float32)
        raise TypeError(
            "projection must be None, a kind name in "
            f"{projections.KINDS} or an OutputProjection, got {type(proj).__name__} {proj!r}"
        )

    def _fit(self, X: Any, Y: Any, sample_weight: Any, relabelling: tuple[Any, str] | None = None,
             sparse_y: bool | None = None) -> _BaseTree:
        """Grow the tree on outputs ``Y``.

        ``relabelling``: :func:`relabelling_outputs` of ``Y`` when already made (the
        fit's CSR copy of mostly-zero dense outputs); ``sparse_y``: whether the
        outputs of ``predict`` are sparse (by default: whether ``Y`` is).
        """
        backend = resolve_backend(X, Y, device=self.device)
        # X's values (infinity, float32 range) are checked by the binning's own pass
        X = self._check_X(X, backend, reset=True, check_values=False)
        check_consistent_rows(X=X, y=Y)
        check_has_outputs(Y)
        n = int(X.shape[0])
        if n < 1:
            raise ValueError("X must have at least one sample")
        sample_weight = self._check_sample_weight(sample_weight, n, backend)
        params = self._growth_params(n, int(X.shape[1]))
        rng = check_random_state(self.random_state)
        check_max_bins(self.max_bins)
        mapper = BinMapper(
            max_bins=int(self.max_bins), max_binned_bytes=self.max_binned_bytes, random_state=rng
        )
        binned = mapper.fit_transform(X, backend, sample_weight, check_range_of="X")
        # the leaves' storage follows the outputs' density, not their container
        Y_leaves, storage = relabelling_outputs(Y, backend) if relabelling is None else relabelling
        Y_sparse = Y_leaves if storage == "by_density" else None
        targets = self._targets(Y, backend, rng, Y_sparse)
        self.n_projected_outputs_ = int(targets.shape[1])
        weights = None
        if sample_weight is not None:
            weights = sample_weight.astype(backend.xp.float32)[None, :]
        grow = grow_tree_best_first if params.max_leaf_nodes is not None else grow_trees
        result = grow(binned, targets[:, None, :], weights, params, rng, backend)
        structure = result.structures[0]
        if params.splitter == "best":
            # the node-local midpoint of the neighbouring values (gpurpo.tree.thresholds)
            refine_thresholds(result.structures, X, weights, backend, np.diff(binned.edge_ptr_host))
        self._sparse_y = backend.issparse(Y) if sparse_y is None else sparse_y
        leaves = leaf_values(
            Y_leaves, result.leaf_of_sample[0], sample_weight, structure.n_leaves, backend, storage
        )
        self.tree_ = Tree(structure, leaves)
        self.bin_mapper_ = mapper
        return self

    # ------------------------------------------------------------ inspection

    def get_depth(self) -> int:
        """Depth of the tree.

        Returns
        -------
        int
            The largest number of splits from the root to a leaf (root alone: 0).
        """
        check_is_fitted(self, "tree_")
        return self.tree_.max_depth

    def get_n_leaves(self) -> int:
        """Number of leaves.

        Returns
        -------
        int
            The number of leaf nodes of ``tree_``.
        """
        check_is_fitted(self, "tree_")
        return self.tree_.n_leaves

    @property
    def feature_importances_(self) -> np.ndarray:
        """Normalised total gain (weighted variance decrease in the grown space) per feature."""
        check_is_fitted(self, "tree_")
        s = self.tree_.structure
        internal = s.feature >= 0
        imp = np.bincount(
            s.feature[internal], weights=np.maximum(s.gain[internal], 0.0),
            minlength=self.n_features_in_,
        ).astype(np.float64)  # bincount of no entry is int64
        total = imp.sum()
        return imp / total if total > 0 else imp

    def apply(self, X: Any) -> Any:
        """Index of the leaf node reached by each row (int, in X's namespace).

        Parameters
        ----------
        X : array or sparse matrix (n, p)
            Inputs; NaN marks missing values.

        Returns
        -------
        int32 array (n,)
            Node index of the leaf (into ``tree_.children_left`` etc.).
            In ``X``'s namespace: CuPy/cupyx for CuPy/cupyx ``X``, else
            NumPy/SciPy (copied back when computed with ``device="cuda"``).
        """
        check_is_fitted(self, "tree_")
        backend = resolve_backend(X, device=self.device)
        Xv = self._check_X(X, backend, reset=False)
        return _in_namespace_of(X, self.tree_.apply(Xv, backend))

    def _raw_predict(self, X: Any) -> tuple[Any, Backend]:
        check_is_fitted(self, "tree_")
        backend = resolve_backend(X, device=self.device)
        X = self._check_X(X, backend, reset=False)
        # outputs keep the container of the y of fit, whatever the leaves' storage
        sparse = self.__dict__.get("_sparse_y", self.tree_.leaves.is_sparse)
        return self.tree_.predict(X, backend, dense_output=not sparse), backend

    def predict_top_k(self, X: Any, k: int = 5) -> tuple[Any, Any]:
        check_is_fitted(self, "tree_")
        k = check_int(k, "k", low=1, high=self.n_outputs_)
        backend = resolve_backend(X, device=self.device)
        Xv = self._check_X(X, backend, reset=False)
        n, d = int(Xv.shape[0]), int(self.n_outputs_)
        values = self.tree_.leaves.to(backend).values
        if (backend.name == "numpy" and backend.issparse(values)
                and prefers_leaf_sums([values], 1, d)):
            # the columns each row's leaf holds (gpurpo.tree.leaf_sums)
            if backend.issparse(Xv):
                Xv = canonical_csr(Xv)
            packed = self.tree_.packed

            def leaf_rows_of(r0: int, r1: int) -> list[Any]:
                return [packed.on(backend)[6][apply_trees_block(packed, Xv[r0:r1], backend)]]

            return top_k_of_leaf_sums(n, d, k, 1.0, [values], leaf_rows_of)
        indices, scores = top_k_of_row_blocks(
            n, d, k,
            lambda r0, r1: self.tree_.predict(Xv[r0:r1], backend, dense_output=True),
            backend,
        )
        if is_gpu_array(X):
            return indices, scores
        return to_host(indices), to_host(scores)

    predict_top_k.__doc__ = PREDICT_TOP_K_DOC.format(
        scores="Their leaf values (predict of the regressor, predict_proba of the "
        "classifier).")


class DecisionTreeRegressor(RegressorMixin, _BaseTree):
    """Multi-output regression tree on randomly projected outputs.

    Splits maximise the reduction of the summed variance of the outputs
    projected by ``projection`` (Joly, Geurts & Wehenkel 2014, eq. 1-2);
    leaves hold the weighted mean of the ORIGINAL outputs of their samples.
    Inputs are binned into at most ``max_bins`` quantile bins per feature
    (plus one for NaN); thresholds are real values, so prediction uses raw X.

    Parameters
    ----------
    projection : None, str or OutputProjection
        ``None``: grow on the original outputs (exact multi-output tree).
        A kind of :mod:`gpurpo.projections` (``"gaussian"``,
        ``"rademacher"``, ``"achlioptas"``, ``"sparse"``, ``"subsample"``,
        ``"hadamard"``) drawn with ``n_components`` rows, or an
        :class:`~gpurpo.projections.OutputProjection` (cloned and fitted).
    n_components : int, float or {"sqrt", "log", "auto"}
        Size m of a projection given by name (see
        :func:`gpurpo.projections.resolve_n_components`). Default
        ``"sqrt"``: a single tree has no averaging over trees to make up for
        the distortion of a very small projection (Theorem 1 of the paper
        bounds it by m); forests use smaller m.
    splitter : {"best", "random"}
        Best split over all bin boundaries, or one uniformly random cut per
        candidate feature (Extra-Trees, Geurts et al. 2006).
    max_depth : int or None
    min_samples_split : int or float
        Minimum number of samples to split a node (float: fraction of n).
    min_samples_leaf : int or float
        Minimum number of samples in each leaf (float: fraction of n).
        Samples are counted, not weighted (a weight-2 sample counts once),
        as in scikit-learn.
    max_leaf_nodes : int or None
        When set, the tree is grown best-first up to this many leaves.
    max_features : int, float, {"sqrt", "log2"} or None
        Number k of features drawn per node, as in scikit-learn: features
        constant in the node count among the k, and only when all k are
        constant are more drawn, up to the first that is not.
    min_impurity_decrease : float
        Minimum weighted impurity decrease of a split (scikit-learn's
        definition, with the impurity averaged over the grown outputs).
    max_bins : int in [2, 255]
        Maximum number of bins per feature for non-missing values.
    max_binned_bytes : int, default=4294967296 (4 GiB)
        Largest binned copy of X a fit may make (uint8 codes, n x p bytes); a
        larger X is refused with a ValueError. A sparse X is binned at its stored
        entries only (on the CPU and the GPU) and needs no such copy.
    random_state : None, int or Generator
        Seeds binning subsample, projection and per-node randomness.
    device : {"auto", "cpu", "cuda"}
        Where to compute; "auto" follows the data.

    Attributes
    ----------
    tree_ : gpurpo.tree.predictor.Tree
        Node arrays (``node_count``, ``max_depth``, ``n_leaves``, ...) and
        leaf values in the original output space.
    n_features_in_ : int
    feature_names_in_ : ndarray of str, shape (n_features_in_,)
        Column names of the data frame ``X`` given to ``fit``, when they are all
        strings; absent otherwise. Later inputs must have the same names in the
        same order.
    n_outputs_ : int
        d, the number of original outputs.
    n_projected_outputs_ : int
        m, the number of outputs the tree was grown on.
    projection_ : ndarray, sparse matrix or None
        The projection matrix (m x d) used.
    bin_mapper_ : BinMapper
    """

    def fit(self, X: Any, y: Any, sample_weight: Any = None) -> DecisionTreeRegressor:
        """Grow the tree.

        Parameters
        ----------
        X : array or sparse matrix (n, p)
            Inputs; NaN marks missing values, infinity is an error.
        y : array (n,) or (n, d), or sparse matrix (n, d)
            Outputs, finite.
        sample_weight : array (n,), optional
            Non-negative weights; 0 removes a sample.

        Returns
        -------
        self
        """
        y = check_y_present(y, type(self).__name__)
        backend = resolve_backend(X, y, device=self.device)
        Y = _as_2d_outputs(y, backend)
        self._y_1d = _is_1d(y)
        self.n_outputs_ = int(Y.shape[1])
        # a dense Y of few nonzeros is copied to CSR in one pass, and its values are
        # checked on the copy's entries (zeros pass every check)
        relabelling = relabelling_outputs(Y, backend)
        validate_values(relabelling[0], "y", False, True, backend.xp)
        return self._fit(X, Y, sample_weight, relabelling)

    @suggests_top_k
    def predict(self, X: Any) -> Any:
        """Mean training output of the leaf of each row: (n,) or (n, d) (CSR for sparse leaves).

        Parameters
        ----------
        X : array or sparse matrix (n, p)
            Inputs; NaN marks missing values.

        Returns
        -------
        float64 array (n,) or (n, d), or CSR matrix (n, d)
            The leaf value ``v_l`` (weighted mean of the original outputs,
            Joly et al. 2014 section 3.1): (n,) when fitted on a 1-D ``y``,
            CSR when fitted on a sparse ``y``. In ``X``'s namespace: CuPy/cupyx
            for CuPy/cupyx ``X``, else NumPy/SciPy (copied back when computed
            with ``device="cuda"``).
        """
        out, _ = self._raw_predict(X)
        if self._y_1d and not hasattr(out, "tocsr"):
            out = out[:, 0]
        return _in_namespace_of(X, out)


class DecisionTreeClassifier(ClassifierMixin, _BaseTree):
    """Multi-label (or single-label) classification tree on projected outputs.

    Multi-label ``Y`` (n, d) with 0/1 entries (dense or sparse) is treated as
    d outputs; leaves hold the label frequencies of their samples, so
    ``predict_proba`` returns an (n, d) matrix of label probabilities and
    ``predict`` thresholds it at 0.5 (strictly greater). Single-label ``y``
    (n,) is one-hot encoded; ``predict_proba`` returns (n, n_classes) and
    ``predict`` the most probable class (first on ties). Parameters as in
    :class:`DecisionTreeRegressor` (Joly, Geurts & Wehenkel 2014).

    Attributes
    ----------
    classes_ : ndarray
        Class labels (single-label y); ``array([0, 1])`` for multi-label Y.
    n_outputs_ : int
        d (multi-label) or the number of classes.
    tree_, n_features_in_, n_projected_outputs_, projection_, bin_mapper_
        As in :class:`DecisionTreeRegressor`.
    """

    def __sklearn_tags__(self) -> Any:
        tags = super().__sklearn_tags__()
        tags.classifier_tags.multi_label = True
        tags.target_tags.multi_output = False
        return tags

    def fit(self, X: Any, y: Any, sample_weight: Any = None) -> DecisionTreeClassifier:
        """Grow the tree on multi-label Y (n, d) of 0/1, or single-label y (n,).

        Parameters
        ----------
        X : array or sparse matrix (n, p)
            Inputs; NaN marks missing values, infinity is an error.
        y : array (n,) of class labels, or 0/1 array or sparse matrix (n, d)
            Single-label classes (one-hot encoded; a column vector (n, 1) is
            ravelled with a DataConversionWarning) or a multi-label indicator
            matrix. The leaf values are stored sparse when ``y`` has few
            nonzeros, whatever its container; outputs keep ``y``'s container.
        sample_weight : array (n,), optional
            Non-negative weights; 0 removes a sample.

        Returns
        -------
        self

        Raises
        ------
        ValueError
            If single-label ``y`` is continuous or holds NaN/infinity, or if
            multi-label ``y`` holds values other than 0 and 1.
        """
        y = check_y_present(y, type(self).__name__)
        backend = resolve_backend(X, y, device=self.device)
        # dense labels of few nonzeros are checked, cast and projected as their CSR copy
        # (one pass over y); a fitted OutputProjection still sees y's own container
        copy = _csr_copy_of_dense_labels(y, backend) if isinstance(self.projection, str) else None
        targets = encode_class_targets(y if copy is None else copy, backend,
                                       regressor="DecisionTreeRegressor")
        self.classes_ = targets.classes
        self._multilabel = targets.multilabel
        Y = targets.Y
        self.n_outputs_ = int(Y.shape[1])
        if copy is not None:
            return self._fit(X, Y, sample_weight, (Y, "by_density"), sparse_y=False)
        return self._fit(X, Y, sample_weight)

    @suggests_top_k
    def predict_proba(self, X: Any) -> Any:
        """Label probabilities: (n, d) multi-label (CSR with sparse leaves), else (n, n_classes).

        Parameters
        ----------
        X : array or sparse matrix (n, p)
            Inputs; NaN marks missing values.

        Returns
        -------
        float64 array or CSR matrix (n, d), or float64 array (n, n_classes)
            The label frequencies of the leaf of each row (Joly et al. 2014
            section 3.1); classes in the order of ``classes_``. In ``X``'s
            namespace: CuPy/cupyx for CuPy/cupyx ``X``, else NumPy/SciPy
            (copied back when computed with ``device="cuda"``).
        """
        out, _ = self._raw_predict(X)
        return _in_namespace_of(X, out)

    @suggests_top_k
    def predict(self, X: Any) -> Any:
        """0/1 label matrix (multi-label), or class labels (single-label).

        Parameters
        ----------
        X : array or sparse matrix (n, p)
            Inputs; NaN marks missing values.

        Returns
        -------
        int64 array or CSR matrix (n, d), or array (n,)
            Multi-label: 1 where :meth:`predict_proba` is > 0.5 (CSR with
            sparse leaves; float64 data in a cupyx CSR, which holds no
            integers). Single-label: the most probable class of
            ``classes_`` (first on ties). In ``X``'s namespace (CuPy/cupyx
            for CuPy/cupyx ``X``, else NumPy/SciPy); non-numeric classes come
            back as a NumPy array.
        """
        proba, backend = self._raw_predict(X)
        xp = backend.xp
        if self._multilabel:
            if hasattr(proba, "tocsr"):
                out = proba.tocsr()
                out.data = (out.data > 0.5).astype(out.data.dtype)
                out.eliminate_zeros()
                if is_gpu_array(X):
                    return out  # cupyx holds no integers: 0/1 floats
                return to_host(out).astype(np.int64)
            return _in_namespace_of(X, (proba > 0.5).astype(xp.int64))
        labels = labels_from_scores(proba, self.classes_, backend)
        return _in_namespace_of(X, labels) if self.classes_.dtype.kind in "biuf" else labels


def _is_1d(y: Any) -> bool:
    return len(y.shape) == 1


def _csr_copy_of_dense_labels(y: Any, backend: Backend) -> Any:
    """A CSR copy of a dense host label matrix ``y`` (n, d > 1) of at most
    ``SPARSE_OUTPUT_DENSITY`` nonzeros (:func:`gpurpo.tree._dense_csr.dense_to_csr`), else None."""
    if (backend.name != "numpy" or not isinstance(y, np.ndarray) or y.ndim != 2 or y.shape[1] < 2
            or not (y.dtype.kind in "iub" or y.dtype in (np.float32, np.float64))):
        return None
    return dense_to_csr(y, SPARSE_OUTPUT_DENSITY)


def _as_2d_outputs(y: Any, backend: Backend) -> Any:
    """``y`` as a validated (n, d) array or CSR matrix; its values are left to the caller."""
    if _is_1d(y):
        arr = check_array(y, "y", backend, ensure_2d=False, check_values=False)
        return arr.reshape(-1, 1)
    return check_array(y, "y", backend, accept_sparse=True, check_values=False)


def _in_namespace_of(X: Any, out: Any) -> Any:
    """``out`` as CuPy/cupyx for a CuPy or cupyx ``X``, else copied to NumPy/SciPy.

    A tree computing on the GPU for host input (``device="cuda"``) returns
    host results, as the forests and boosting do.
    """
    return out if is_gpu_array(X) else to_host(out)

