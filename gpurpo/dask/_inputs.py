"""Checks of Dask array inputs made on their metadata, before any task runs."""

from __future__ import annotations

from typing import Any

import dask.array as da
import numpy as np

from gpurpo._validation import check_numeric_dtype

__all__ = ["check_rows_chunked", "check_same_row_chunks", "row_starts"]


def check_rows_chunked(a: Any, name: str, ndims: tuple[int, ...], numeric: bool = True) -> da.Array:
    """A Dask array of ``ndims`` dimensions split by rows only, with known chunk sizes.

    Parameters
    ----------
    a : object
        The argument.
    name : str
        Its name in errors.
    ndims : tuple of int
        The numbers of dimensions allowed.
    numeric : bool
        Refuse complex (and non-numeric) dtypes.

    Returns
    -------
    dask.array.Array

    Raises
    ------
    TypeError
        If ``a`` is not a Dask array.
    ValueError
        On another number of dimensions, unknown chunk sizes, several chunks
        of columns, no rows, or a complex dtype.
    """
    if not isinstance(a, da.Array):
        raise TypeError(
            f"{name} must be a dask.array.Array, got {type(a).__name__}; use the estimators "
            "of gpurpo.ensemble for in-memory arrays"
        )
    if a.ndim not in ndims:
        expected = " or ".join(f"{d}-D" for d in ndims)
        raise ValueError(f"{name} must be a {expected} dask array, got shape {a.shape}")
    if any(np.isnan(s) for s in a.shape):
        raise ValueError(
            f"{name} has unknown chunk sizes (shape {a.shape}); call {name}.compute_chunk_sizes() "
            "first"
        )
    if a.ndim == 2 and len(a.chunks[1]) > 1:
        raise ValueError(
            f"{name} must be chunked by rows only (one chunk of columns), got {len(a.chunks[1])} "
            f"chunks of columns {a.chunks[1]}; use {name}.rechunk({{1: -1}})"
        )
    if int(a.shape[0]) < 1:
        raise ValueError(f"{name} must have at least 1 row, got shape {a.shape}")
    if numeric:
        check_numeric_dtype(a.dtype, name)
    elif a.dtype.kind == "c":
        raise ValueError(f"Complex data not supported: {name} has dtype {a.dtype}")
    return a


def check_same_row_chunks(X: da.Array, name: str, other: da.Array) -> None:
    """``other`` (named ``name``) must be split into the row chunks of ``X``."""
    if X.chunks[0] != other.chunks[0]:
        raise ValueError(
            f"X and {name} must have the same row chunks (each task reads rows of both), got "
            f"{X.chunks[0]} for X and {other.chunks[0]} for {name}; use "
            f"{name}.rechunk({{0: X.chunks[0]}})"
        )


def row_starts(chunks: tuple[int, ...]) -> np.ndarray:
    """The first row of each chunk, and the number of rows last (``len(chunks) + 1``)."""
    return np.concatenate([[0], np.cumsum(chunks)]).astype(np.int64)
