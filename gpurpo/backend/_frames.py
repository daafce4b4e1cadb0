"""cuDF data frames and series as CuPy arrays.

RAPIDS users hold their data in cuDF, the GPU's pandas. The estimators take a
cuDF ``DataFrame`` or ``Series`` wherever they take an array, as they take a
pandas one: it is a GPU input (:func:`~gpurpo.backend.resolve_backend` computes
on CuPy, and its values never leave the device), its string column names
become ``feature_names_in_`` (:mod:`gpurpo._input_features`), and its null
entries are read as NaN, missing values, as scikit-learn reads pandas' ``NA``.

cuDF is never imported: a frame is recognised by the module of its type and
converted with its own ``to_cupy``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["is_device_frame", "device_frame_values"]


def is_device_frame(a: Any) -> bool:
    """True for a cuDF ``DataFrame``, ``Series`` or ``Index`` (a type from a ``cudf``
    module with a ``to_cupy`` method)."""
    module = type(a).__module__ or ""
    return module.split(".", 1)[0] == "cudf" and hasattr(a, "to_cupy")


def _column_dtypes(frame: Any) -> list[Any]:
    """The dtype of every column of a frame (its ``dtypes``, a pandas series), or the one
    of a series or index."""
    if not hasattr(frame, "columns"):
        return [frame.dtype]
    dtypes = frame.dtypes
    return list(dtypes.values if hasattr(dtypes, "values") else dtypes)


def _kind(dtype: Any) -> str:
    """NumPy's kind of ``dtype``; "O" for the extension dtypes (categories, lists)."""
    try:
        return np.dtype(dtype).kind
    except TypeError:
        return "O"


def device_frame_values(frame: Any, name: str) -> Any:
    """The values of the cuDF frame or series ``frame`` as a CuPy array, on the device.

    Columns of numbers or booleans are kept in their dtype (the caller's
    validation casts them as it casts arrays); with any null entry the
    values come as float64 with NaN for the nulls.

    Parameters
    ----------
    frame : cudf.DataFrame, cudf.Series or cudf.Index
        The input.
    name : str
        Argument name used in error messages.

    Raises
    ------
    ValueError
        If a column does not hold numbers (strings, categories, dates).
    """
    bad = sorted({str(dtype) for dtype in _column_dtypes(frame) if _kind(dtype) not in "biuf"})
    if bad:
        raise ValueError(
            f"{name} must hold numbers, got a cuDF {type(frame).__name__} with column "
            f"dtype(s) {', '.join(bad)}; encode those columns first"
        )
    nulls = frame.isnull()  # a frame, a series, or for an index a CuPy array
    if bool(getattr(nulls, "values", nulls).any()):
        return frame.to_cupy(dtype=np.float64, na_value=np.nan)
    return frame.to_cupy()
