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

The kinds of targets (:data:`BINARY`, :data:`MULTICLASS`, :data:`MULTILABEL`)
are shared with the Dask boosting classifier of :mod:`gpurpo.dask`.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from gpurpo._class_targets import class_indices, class_labels, host_labels, one_hot
from gpurpo._class_targets import labels_from_scores as _argmax_labels
from gpurpo.backend import Backend

__all__ = ["BINARY", "MULTICLASS", "MULTILABEL", "class_columns", "labels_from_scores"]

BINARY = "binary"
MULTICLASS = "multiclass"
MULTILABEL = "multilabel"


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
    labels = host_labels(y)
    found, encoded = class_labels(labels, name, "GradientBoostingRegressor")
    if classes is None:
        classes = found
        if classes.shape[0] < 2:
            raise ValueError(
                f"{name} holds one class ({classes[0]}); a classifier needs samples of at "
                "least two classes"
            )
    else:
        encoded = class_indices(labels, classes, name)
    columns = one_hot(encoded, int(classes.shape[0]), on=1.0, off=-1.0, dtype=np.float64)
    if classes.shape[0] == 2:
        return backend.asarray(columns[:, 1:]), classes, BINARY
    return backend.asarray(columns), classes, MULTICLASS


def labels_from_scores(F: Any, classes: np.ndarray, kind: str, backend: Backend) -> Any:
    """The predicted class of each row of the scores ``F`` (n, 1) or (n, K).

    The second class where the binary score is positive (probability above
    0.5), else the column of largest score (first on ties). Numeric classes
    stay on ``backend``; other labels come back as a NumPy array.
    """
    if kind == BINARY:
        F = backend.xp.concatenate([backend.xp.zeros_like(F), F], axis=1)
    return _argmax_labels(F, classes, backend)
