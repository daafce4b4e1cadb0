"""The input features an estimator was fitted on: their number and, for data frames, names.

scikit-learn's convention (SLEP007, scikit-learn >= 1.0), which users of
DataFrames rely on:

* ``fit`` sets ``n_features_in_`` and, when ``X`` is a data frame whose column
  names are all strings, ``feature_names_in_`` (an object array); refitting
  on data without names removes ``feature_names_in_``;
* every later method that takes ``X`` checks the number of columns, and
  the names when both the fitted and the new ``X`` have them: other names, or
  the same names in another order, raise a ``ValueError`` (a reordered frame
  would otherwise be predicted silently wrong); names on one side only give a
  ``UserWarning``.

The error messages are those of scikit-learn's own estimators, so that code
(and scikit-learn's ``check_dataframe_column_names_consistency``) matching
them works unchanged.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np

__all__ = ["check_feature_names", "check_n_features", "input_feature_names"]

#: Names listed per kind (unseen, missing) in a mismatch message.
_MAX_LISTED_NAMES = 5


def input_feature_names(X: Any) -> np.ndarray | None:
    """The column names of a data frame ``X`` when all are strings, else None.

    Any two-dimensional container with a ``columns`` attribute counts as a
    data frame (pandas, polars, cuDF); arrays and sparse matrices have no
    names. Names that are all non-strings (pandas' default integer columns)
    are ignored, as in scikit-learn.

    Raises
    ------
    TypeError
        If the names mix strings and other types.
    """
    columns = getattr(X, "columns", None)
    if columns is None or isinstance(X, np.ndarray) or len(getattr(X, "shape", ())) != 2:
        return None
    names = np.asarray(list(columns), dtype=object)
    if names.size == 0:
        return None
    kinds = sorted({type(name).__qualname__ for name in names})
    if kinds == ["str"]:
        return names
    if "str" in kinds:
        raise TypeError(
            "Feature names are only supported if all input features have string names, "
            f"but your input has {kinds} as feature name / column name types. Convert "
            "them all to strings (for example X.columns = X.columns.astype(str)) to have "
            "them stored and checked, or to a non-string type to have them ignored."
        )
    return None


def _listed(names: list[Any]) -> str:
    lines = [f"- {name}\n" for name in names[:_MAX_LISTED_NAMES]]
    if len(names) > _MAX_LISTED_NAMES:
        lines.append("- ...\n")
    return "".join(lines)


def _check_names(estimator: Any, X: Any) -> None:
    fitted = getattr(estimator, "feature_names_in_", None)
    given = input_feature_names(X)
    cls = type(estimator).__name__
    if fitted is None and given is None:
        return
    if fitted is None:
        warnings.warn(f"X has feature names, but {cls} was fitted without feature names",
                      UserWarning, stacklevel=4)
        return
    if given is None:
        warnings.warn(f"X does not have valid feature names, but {cls} was fitted with "
                      "feature names", UserWarning, stacklevel=4)
        return
    if len(fitted) == len(given) and bool(np.all(fitted == given)):
        return
    unseen = sorted(set(given) - set(fitted))
    missing = sorted(set(fitted) - set(given))
    message = "The feature names should match those that were passed during fit.\n"
    if unseen:
        message += "Feature names unseen at fit time:\n" + _listed(unseen)
    if missing:
        message += "Feature names seen at fit time, yet now missing:\n" + _listed(missing)
    if not unseen and not missing:
        message += "Feature names must be in the same order as they were in fit.\n"
    raise ValueError(message)


def check_feature_names(estimator: Any, X: Any, *, reset: bool) -> None:
    """Record (``reset=True``, in ``fit``) or check the column names of a data frame ``X``.

    Called on ``X`` AS THE USER GAVE IT, before any conversion to an array
    (which drops the names), and before the values are validated, so that a
    frame with unexpected columns is reported as such.

    Raises
    ------
    ValueError
        When ``reset`` is False and both the fitted and the new ``X`` have
        names, but not the same names in the same order.
    """
    if reset:
        names = input_feature_names(X)
        if names is not None:
            estimator.feature_names_in_ = names
        elif hasattr(estimator, "feature_names_in_"):
            del estimator.feature_names_in_
        return
    _check_names(estimator, X)


def check_n_features(estimator: Any, n_features: int, *, reset: bool) -> None:
    """Record (``reset=True``) or check ``estimator.n_features_in_``.

    Raises
    ------
    ValueError
        When ``reset`` is False and ``n_features`` differs from the number
        seen in ``fit``.
    """
    if reset:
        estimator.n_features_in_ = int(n_features)
    elif n_features != estimator.n_features_in_:
        raise ValueError(
            f"X has {n_features} features, but {type(estimator).__name__} is expecting "
            f"{estimator.n_features_in_} features as input"
        )
