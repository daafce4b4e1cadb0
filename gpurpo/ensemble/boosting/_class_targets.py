"""Single-label class targets of the boosting classifier, as label-indicator columns.

:class:`gpurpo.ensemble.GradientBoostingClassifier` learns one logistic score
per label column (the multi-label loss of Joly, Wehenkel & Geurts 2019, eq. 8).
A 1-D ``y`` of class labels becomes such columns:

* two classes: one column, +1 for the second class of ``classes_`` and -1 for
  the first (binary logistic regression, as scikit-learn's binary boosting);
* K >= 3 classes: K one-vs-rest columns, +1 where the row's class is the
  column's; the predicted class is the column of largest score, and
  ``predict_proba`` divides each row's K sigmoids by their sum (the
  normalisation of scikit-learn's ``OneVsRestClassifier``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from gpurpo._validation import class_labels
from gpurpo.backend import Backend, is_gpu_array, to_host

__all__ = ["BINARY", "MULTICLASS", "MULTILABEL", "class_columns", "labels_from_scores"]

BINARY = "binary"
MULTICLASS = "multiclass"
MULTILABEL = "multilabel"


def _host_labels(y: Any, name: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A 1-D ``y`` as a NumPy array, its classes and class indices (:func:`class_labels`)."""
    labels = np.asarray(to_host(y)) if is_gpu_array(y) else np.asarray(y)
    if labels.dtype.kind == "c":
        raise ValueError(f"Complex data not supported: {name} has dtype {labels.dtype}")
    return (labels, *class_labels(labels, name, "GradientBoostingRegressor"))


def class_columns(
    y: Any, name: str, backend: Backend, classes: np.ndarray | None = None
) -> tuple[Any, np.ndarray, str]:
    """The +1/-1 label columns of the class labels ``y`` (1-D), on ``backend``.

    Parameters
    ----------
    y : array-like of shape (n,)
        Class labels (numbers, strings, booleans).
    name : str
        Name of ``y`` in errors.
    backend : Backend
    classes : ndarray, optional
        The classes of fit (sorted): ``y``'s labels must be among them. None
        (fitting): the sorted distinct labels of ``y``, at least two.

    Returns
    -------
    columns : float64 array of shape (n, 1) for two classes, (n, K) for K >= 3
    classes : ndarray
    kind : ``BINARY`` or ``MULTICLASS``
    """
    labels, found, encoded = _host_labels(y, name)
    if classes is None:
        classes = found
        if classes.shape[0] < 2:
            raise ValueError(
                f"{name} holds one class ({classes[0]}); a classifier needs samples of at "
                "least two classes"
            )
    else:
        encoded = _index_among(labels, classes, name)
    n = labels.shape[0]
    if classes.shape[0] == 2:
        columns = np.where(encoded == 1, 1.0, -1.0)[:, None]
        kind = BINARY
    else:
        columns = np.full((n, classes.shape[0]), -1.0)
        columns[np.arange(n), encoded] = 1.0
        kind = MULTICLASS
    return backend.asarray(columns), classes, kind


def _index_among(labels: np.ndarray, classes: np.ndarray, name: str) -> np.ndarray:
    """Each label's index in the sorted ``classes``; a ``ValueError`` for labels not there."""
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


def labels_from_scores(F: Any, classes: np.ndarray, kind: str, backend: Backend) -> Any:
    """The predicted class of each row of the scores ``F`` (n, 1) or (n, K).

    The second class where the binary score is positive (probability above
    0.5), else the column of largest score (first on ties). Numeric classes
    stay on ``backend``; other labels come back as a NumPy array.
    """
    xp = backend.xp
    index = (F[:, 0] > 0).astype(xp.int64) if kind == BINARY else xp.argmax(F, axis=1)
    if classes.dtype.kind in "biuf":
        return backend.asarray(classes)[index]
    return classes[to_host(index)]
