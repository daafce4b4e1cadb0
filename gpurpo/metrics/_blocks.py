"""Validation of metric inputs and the blocks of rows the metrics work over."""

from __future__ import annotations

from typing import Any

from gpurpo._validation import check_array, check_int
from gpurpo.backend import Backend, resolve_backend

_MEMORY_BUDGET = 128 * 2**20
# Bytes of temporaries per (row, label) cell, per metric (see each kernel).
_CELL_BYTES_RANKING = 120
_CELL_BYTES_ELEMENTWISE = 64


def _validate(
    y_true: Any,
    other: Any,
    other_name: str,
    *,
    binary_true: bool,
    binary_other: bool = False,
) -> tuple[Backend, Any, Any]:
    backend = resolve_backend(y_true, other)
    yt = _summed_duplicates(check_array(y_true, "y_true", backend), backend)
    yo = _summed_duplicates(check_array(other, other_name, backend), backend)
    if yt.shape != yo.shape:
        raise ValueError(
            f"y_true and {other_name} must have the same shape, got {tuple(yt.shape)} "
            f"and {tuple(yo.shape)}"
        )
    if yt.shape[1] < 1:
        raise ValueError(f"y_true must have at least one column, got shape {tuple(yt.shape)}")
    if binary_true:
        _check_binary(yt, "y_true", backend)
    if binary_other:
        _check_binary(yo, other_name, backend)
    return backend, yt, yo


def _summed_duplicates(a: Any, backend: Backend) -> Any:
    """``a``, or for a sparse matrix with repeated entries a copy with them summed.

    The entries of a repeated position add up (SciPy's meaning), so a 0/1
    check must see their sum: entry by entry, two 1s at one position passed
    as 0/1 labels and counted as a 2 (a precision above 1).
    """
    if backend.issparse(a) and not a.has_canonical_format:
        a = a.copy()
        a.sum_duplicates()
    return a


def _check_binary(a: Any, name: str, backend: Backend) -> None:
    """Raise unless every value of ``a`` is 0 or 1; dense input in row blocks.

    The comparisons make boolean temporaries of the checked rows: in blocks
    of about ``_MEMORY_BUDGET / 4`` cells they stay within the metrics'
    memory budget whatever the number of labels.
    """
    xp = backend.xp
    if backend.issparse(a):
        blocks = [a.data]
    else:
        step = max(1, _MEMORY_BUDGET // (4 * max(1, int(a.shape[1]))))
        blocks = (a[r0 : r0 + step] for r0 in range(0, int(a.shape[0]), step))
    for values in blocks:
        if values.size and not bool(xp.all((values == 0) | (values == 1))):
            bad = values[(values != 0) & (values != 1)]
            raise ValueError(
                f"{name} must be a 0/1 label indicator matrix, got the value {float(bad[0])!r}"
            )


def _chunks(n: int, d: int, chunk_size: int | None, cell_bytes: int) -> list[tuple[int, int]]:
    """Row blocks ``(start, stop)``: ``chunk_size`` rows, or what fits the budget."""
    if chunk_size is None:
        size = max(1, _MEMORY_BUDGET // max(1, d * cell_bytes))
    else:
        size = check_int(chunk_size, "chunk_size", low=1)
    return [(start, min(n, start + size)) for start in range(0, n, size)]


def _dense_rows(a: Any, start: int, stop: int, backend: Backend) -> Any:
    """Rows start:stop of ``a`` as a dense array (float32 kept, other types float64)."""
    rows = a[start:stop]
    if backend.issparse(rows):
        rows = rows.toarray()
    if rows.dtype not in (backend.xp.float32, backend.xp.float64):
        rows = rows.astype(backend.xp.float64)
    return rows


def _block(a: Any, start: int, stop: int, backend: Backend) -> Any:
    """Rows start:stop of ``a`` as a dense float64 array."""
    return _dense_rows(a, start, stop, backend).astype(backend.xp.float64, copy=False)


# --------------------------------------------------------------------------
# Ranking metrics
# --------------------------------------------------------------------------
