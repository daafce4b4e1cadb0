"""Classifier targets, encoded in one place for every classifier of the library.

A classifier's ``y`` is either

* single-label: 1-D class labels (numbers, strings, booleans). The classes are
  the sorted distinct labels (``np.unique``, as scikit-learn's ``LabelEncoder``)
  and the estimators learn their one-hot indicator columns, so that a leaf's
  mean is the class frequencies (Breiman 2001; Joly, Geurts & Wehenkel 2014,
  section 3.1); or
* multi-label: a 2-D 0/1 label-indicator matrix, dense or sparse, learnt as it
  is (``classes_`` is ``[0, 1]``).

A column vector ``(n, 1)`` is single-label classes, ravelled with scikit-learn's
``DataConversionWarning``. The trees, the forests, the label-space models and
the boosting classifier (which turns the indicator columns into its +1/-1
logistic targets) all encode ``y`` here, and turn scores back into labels here.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np
from sklearn.exceptions import DataConversionWarning

from gpurpo._validation import check_array
from gpurpo.backend import (
    Backend,
    device_frame_values,
    is_device_frame,
    is_gpu_array,
    to_host,
)

__all__ = [
    "ClassTargets",
    "check_y_present",
    "class_indices",
    "class_labels",
    "encode_class_labels",
    "encode_class_targets",
    "labels_from_scores",
    "one_hot",
    "ravel_column_vector",
]


@dataclass(frozen=True)
class ClassTargets:
    """A classifier's ``y`` as indicator columns.

    Attributes
    ----------
    Y : array or sparse matrix (n, n_columns)
        The one-hot columns of single-label ``y`` (dense, or CSR with
        ``sparse_one_hot``), or the validated multi-label indicator matrix,
        in ``dtype`` on the backend.
    classes : ndarray
        The sorted classes (single-label), or ``[0, 1]`` (multi-label); on the host.
    multilabel : bool
    encoded : ndarray (n,) of int or None
        Each row's index in ``classes`` (single-label), on the host.
    """

    Y: Any
    classes: np.ndarray
    multilabel: bool
    encoded: np.ndarray | None


def check_y_present(y: Any, estimator: str) -> Any:
    """Raise scikit-learn's message for a missing ``y``; turn array-likes into arrays
    (a cuDF frame or series into its values, on the device)."""
    if y is None:
        raise ValueError(f"{estimator} requires y to be passed, but the target y is None")
    if is_device_frame(y):
        return device_frame_values(y, "y")
    if not hasattr(y, "shape"):
        y = np.asarray(y)
    return y


def ravel_column_vector(y: Any, backend: Backend, name: str = "y", stacklevel: int = 3) -> Any:
    """A dense ``(n, 1)`` ``y`` ravelled to 1-D class labels, with a ``DataConversionWarning``."""
    if len(y.shape) == 2 and y.shape[1] == 1 and not backend.issparse(y):
        warnings.warn(
            f"A column-vector {name} was passed when a 1d array was expected; it is treated "
            "as single-label classes (ravelled).",
            DataConversionWarning,
            stacklevel=stacklevel,
        )
        return y.reshape(-1)
    return y


def encode_class_labels(y: Any, xp: Any = np) -> tuple[Any, Any]:
    """Sorted distinct class labels of a 1-D ``y`` and each sample's index among them.

    ``np.unique`` with ``return_inverse``; labels that cannot be ordered
    (numbers mixed with strings in an object array) raise a ``TypeError``
    naming ``y`` instead of NumPy's comparison error.
    """
    try:
        classes, encoded = xp.unique(y, return_inverse=True)
    except TypeError as exc:
        kinds = sorted({type(v).__name__ for v in np.asarray(y, dtype=object).ravel()[:1000]})
        raise TypeError(
            f"y's class labels must be of one orderable type (all numbers or all strings), "
            f"got {', '.join(kinds)} ({exc})"
        ) from exc
    return classes, encoded.reshape(-1)


def class_labels(y: np.ndarray, name: str, regressor: str) -> tuple[np.ndarray, np.ndarray]:
    """Classes and each sample's class index of the 1-D host labels ``y`` of a classifier.

    Complex labels, NaN or infinity, and continuous values (``type_of_target``)
    are a ``ValueError``; the last names ``regressor`` as the estimator for
    continuous targets. The classes come from :func:`encode_class_labels`.
    """
    from sklearn.utils.multiclass import type_of_target

    if y.dtype.kind == "c":
        raise ValueError(f"Complex data not supported: {name} has dtype {y.dtype}")
    if y.dtype.kind == "f" and not np.isfinite(y).all():
        raise ValueError(f"{name} contains NaN or infinity")
    classes, encoded = encode_class_labels(y)
    if type_of_target(y) == "continuous":
        raise ValueError(
            f"Unknown label type: continuous values in {name}; a classifier needs class "
            f"labels (use {regressor} for continuous targets)"
        )
    return classes, encoded


def class_indices(labels: np.ndarray, classes: np.ndarray, name: str) -> np.ndarray:
    """Each label's index in the sorted ``classes`` of fit; a ``ValueError`` for labels not there."""
    try:
        pos = np.searchsorted(classes, labels)
    except TypeError as exc:
        raise TypeError(
            f"{name}'s labels cannot be compared with the classes of fit {classes[:5]!r}: {exc}"
        ) from exc
    pos = np.minimum(pos, classes.shape[0] - 1)
    unseen = classes[pos] != labels
    if bool(np.any(unseen)):
        raise ValueError(
            f"{name} holds labels not seen in fit: {np.unique(labels[unseen])[:5].tolist()} "
            f"(the classes are {classes[:10].tolist()})"
        )
    return pos


def one_hot(
    encoded: np.ndarray, n_classes: int, *, on: float = 1.0, off: float = 0.0, dtype: Any = np.float32
) -> np.ndarray:
    """The (n, n_classes) host matrix holding ``on`` at each row's class and ``off`` elsewhere."""
    n = encoded.shape[0]
    out = np.full((n, n_classes), off, dtype=dtype)
    out[np.arange(n), encoded] = on
    return out


def host_labels(y: Any) -> np.ndarray:
    """A 1-D ``y`` (NumPy, CuPy or array-like) as a NumPy array."""
    return np.asarray(to_host(y)) if is_gpu_array(y) else np.asarray(y)


def encode_class_targets(
    y: Any,
    backend: Backend,
    *,
    regressor: str,
    dtype: Any = np.float32,
    sparse_one_hot: bool = False,
    min_classes: int = 1,
) -> ClassTargets:
    """Encode a classifier's ``y``: the one-hot columns of 1-D labels, or a checked 0/1 matrix.

    Parameters
    ----------
    y : array-like (n,) or (n, 1) of class labels, or 0/1 array or sparse matrix (n, d)
        The target of ``fit``, already past :func:`check_y_present`.
    backend : Backend
        Where ``Y`` is placed.
    regressor : str
        The estimator to name in errors for continuous or real-valued targets.
    dtype : dtype, default=float32
        The dtype of ``Y``.
    sparse_one_hot : bool, default=False
        Give the one-hot columns of single-label ``y`` as a CSR matrix.
    min_classes : int, default=1
        The fewest classes single-label ``y`` may hold.

    Returns
    -------
    ClassTargets

    Raises
    ------
    ValueError
        Complex values; single-label ``y`` with NaN, infinity, continuous
        values or fewer than ``min_classes`` classes; a multi-label matrix
        with values other than 0 and 1; a ``y`` of more than two dimensions.
    """
    y = ravel_column_vector(y, backend, stacklevel=4)
    xp = backend.xp
    if len(y.shape) == 1:
        labels = host_labels(y)
        classes, encoded = class_labels(labels, "y", regressor)
        if 0 < classes.shape[0] < min_classes:  # no rows at all: the check of X names them
            raise ValueError(
                f"y holds one class ({classes[0]}); a classifier needs samples of at least "
                f"{min_classes} classes"
            )
        n, k = labels.shape[0], int(classes.shape[0])
        if sparse_one_hot:
            Y = backend.sparse.csr_matrix(
                (xp.ones(n, dtype=dtype), backend.asarray(encoded, dtype=xp.int32),
                 xp.arange(n + 1, dtype=xp.int32)),
                shape=(n, k),
            )
        else:
            Y = backend.asarray(one_hot(encoded, k, dtype=dtype))
        return ClassTargets(Y, classes, False, encoded)
    if len(y.shape) != 2:
        raise ValueError(
            f"y must be 1-D class labels or a 2-D label-indicator matrix, got shape {tuple(y.shape)}"
        )
    Y = check_array(y, "y", backend, accept_sparse=True)
    values = Y.data if backend.issparse(Y) else Y
    if bool(((values != 0) & (values != 1)).any()):
        raise ValueError(
            "multi-label y must contain only 0 and 1 (a label indicator matrix); got other "
            f"values; use {regressor} for real-valued outputs"
        )
    return ClassTargets(Y.astype(dtype), np.array([0, 1]), True, None)


def labels_from_scores(scores: Any, classes: np.ndarray, backend: Backend) -> Any:
    """The class of largest score in each row of ``scores`` (n, n_classes), first on ties.

    Numeric classes stay on ``backend``; other labels (strings, objects) come
    back as a NumPy array.
    """
    index = backend.xp.argmax(scores, axis=1)
    if classes.dtype.kind in "biuf":
        return backend.asarray(classes)[index]
    return classes[to_host(index)]
