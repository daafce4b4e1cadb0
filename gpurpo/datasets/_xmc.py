"""Reader for the Extreme Classification Repository's text format.

The data sets of the Extreme Classification Repository (Bhatia et al.) come
as text files whose first line is ``n_samples n_features n_labels`` and whose
following lines hold one sample each::

    l1,l2,l3 f1:v1 f2:v2 ...

a comma-separated list of label ids (empty for a sample without labels: the
line then starts with a space or with the first feature) followed by sparse
``feature:value`` pairs. Ids are zero-based in the repository.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import scipy.sparse as sp

from gpurpo.datasets._base import MultiLabelDataset, open_text, source_name

__all__ = ["load_xmc"]


class _Error(ValueError):
    def __init__(self, line: int, message: str) -> None:
        super().__init__(message)
        self.line = line
        self.message = message


#: label and feature ids must stay below this (int64 arithmetic on them is exact)
_MAX_ID = 2**62


def _parse_header(text: str | None) -> tuple[int, int, int]:
    if text is None:
        raise _Error(1, "expected a header 'n_samples n_features n_labels', got an empty file")
    parts = text.split()
    try:
        values = [int(t) for t in parts]
    except ValueError:
        values = []
    if len(parts) != 3 or len(values) != 3 or min(values) < 0:
        raise _Error(
            1, f"expected a header of three non-negative integers "
            f"'n_samples n_features n_labels', got {text.strip()!r}"
        )
    return values[0], values[1], values[2]


def _parse_line(
    text: str, line: int, labels: list[Any], fcols: list[Any], fvals: list[Any]
) -> tuple[int, int]:
    """Append one sample's label ids and features; return how many of each."""
    if not text.strip():
        return 0, 0
    rest = text
    n_lab = 0
    if not text[0].isspace():
        head, _, tail = text.partition(" ")
        head = head.split("\t", 1)[0]
        if ":" not in head:
            try:
                ids = _ids(head.split(","), line, "label")
            except _Error:
                raise
            except ValueError:
                raise _Error(
                    line, f"expected comma-separated integer label ids, got {head!r}"
                ) from None
            labels.append(ids)
            n_lab = len(ids)
            rest = text[len(head) :]
    tokens = rest.split()
    if not tokens:
        return n_lab, 0
    pairs = _fast_pairs(rest, len(tokens))
    if pairs is None:
        cols, vals = [], []
        for tok in tokens:
            index, sep, value = tok.partition(":")
            if not sep:
                raise _Error(line, f"expected a 'feature:value' pair, got {tok!r}")
            try:
                cols.extend(_ids([index], line, "feature"))
                vals.append(float(value))
            except _Error:
                raise
            except ValueError:
                raise _Error(
                    line, f"expected a 'feature:value' pair of numbers, got {tok!r}"
                ) from None
        pairs = np.asarray(cols, dtype=np.int64), np.asarray(vals, dtype=np.float64)
    fcols.append(pairs[0])
    fvals.append(pairs[1])
    return n_lab, len(tokens)


def _fast_pairs(rest: str, n_tokens: int) -> tuple[np.ndarray, np.ndarray] | None:
    """Parse ``f:v f:v ...`` with one NumPy conversion; None if anything is unusual."""
    if rest.count(":") != n_tokens:
        return None
    tokens = rest.replace(":", " ").split()
    if len(tokens) != 2 * n_tokens or not "".join(tokens[0::2]).isdigit():
        return None  # feature ids must be plain integers ("1.0:" and "1e0:" are not)
    try:
        numbers = np.array(tokens, dtype=np.float64)
    except ValueError:
        return None
    index = numbers[0::2]
    if not bool(np.all(index < 2**53)):
        return None  # beyond float64's integers: the exact parse decides
    return index.astype(np.int64), numbers[1::2]


def _ids(tokens: list[str], line: int, what: str) -> list[int]:
    """Integer ids of the tokens, which must fit in 63 bits."""
    ids = [int(t) for t in tokens]
    for v in ids:
        if abs(v) >= _MAX_ID:
            raise _Error(line, f"expected {what} ids below 2**62, got {v}")
    return ids


def _check_ids(
    ids: np.ndarray, counts: np.ndarray, first_line: int, size: int, what: str, base: int
) -> np.ndarray:
    """Shift ids to zero-based, check their range and uniqueness per row."""
    ids = ids - base
    rows = np.repeat(np.arange(counts.size), counts)
    bad = (ids < 0) | (ids >= size)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise _Error(
            first_line + int(rows[i]),
            f"expected {what} ids in [{base}, {size + base}), got {int(ids[i]) + base}",
        )
    if ids.size:
        order = np.lexsort((ids, rows))
        same = (rows[order][1:] == rows[order][:-1]) & (ids[order][1:] == ids[order][:-1])
        if same.any():
            i = int(order[1:][same][0])
            raise _Error(
                first_line + int(rows[i]),
                f"expected each {what} id at most once per line, got {int(ids[i]) + base} twice",
            )
    return ids


def _concat(parts: list[Any], dtype: Any) -> np.ndarray:
    if not parts:
        return np.empty(0, dtype=dtype)
    return np.concatenate([np.asarray(x, dtype=dtype) for x in parts])


def load_xmc(
    path: Any, *, zero_based: bool = True, dtype: Any = np.float64
) -> MultiLabelDataset:
    """Load a data set in the Extreme Classification Repository format.

    Parameters
    ----------
    path : str, os.PathLike or file-like object
        The text file (header ``n_samples n_features n_labels``, then one line
        ``l1,l2,... f:v f:v ...`` per sample; a sample without labels has an
        empty label list, i.e. its line starts with a space or a feature).
    zero_based : bool, default=True
        Whether label and feature ids start at 0 (as in the repository) or
        at 1.
    dtype : numpy dtype, default=numpy.float64
        Data type of the feature values.

    Returns
    -------
    MultiLabelDataset
        ``X`` CSR of shape (n_samples, n_features), ``Y`` CSR 0/1 of shape
        (n_samples, n_labels); ``feature_names`` and ``label_names`` are None.

    Raises
    ------
    ValueError
        For malformed files, with the line number and what was expected:
        a bad header, unparsable tokens, ids out of range or repeated within
        a line, or a number of sample lines different from ``n_samples``.
    """
    if not isinstance(zero_based, bool):
        raise TypeError(f"zero_based must be a bool, got {type(zero_based).__name__}")
    try:
        value_dtype = np.dtype(dtype)
    except TypeError as exc:
        raise TypeError(f"dtype must be a NumPy float dtype, got {dtype!r}") from exc
    if value_dtype not in (np.float32, np.float64):
        raise TypeError(f"dtype must be float32 or float64, got {value_dtype}")
    base = 0 if zero_based else 1
    name = source_name(path)
    labels: list[Any] = []
    fcols: list[Any] = []
    fvals: list[Any] = []
    try:
        with open_text(path, "path") as fh:
            header = fh.readline()
            if header.startswith("\ufeff"):
                header = header[1:]
            n, p, d = _parse_header(header if header else None)
            label_counts = np.zeros(n, dtype=np.int64)
            feature_counts = np.zeros(n, dtype=np.int64)
            row = 0
            for number, raw in enumerate(fh, start=2):
                text = raw.rstrip("\r\n")
                if row >= n:
                    if text.strip():
                        raise _Error(
                            number, f"expected {n} sample lines as the header says, got more"
                        )
                    continue
                label_counts[row], feature_counts[row] = _parse_line(
                    text, number, labels, fcols, fvals
                )
                row += 1
            if row < n:
                raise _Error(
                    row + 2, f"expected {n} sample lines as the header says, got {row}"
                )
        label_ids = _check_ids(_concat(labels, np.int64), label_counts, 2, d, "label", base)
        feature_ids = _check_ids(_concat(fcols, np.int64), feature_counts, 2, p, "feature", base)
        values = _concat(fvals, dtype)
    except _Error as exc:
        raise ValueError(f"{name}, line {exc.line}: {exc.message}") from None
    index_dtype = np.int32 if max(p, d, values.size, label_ids.size) < 2**31 else np.int64
    X = sp.csr_matrix(
        (
            values,
            feature_ids.astype(index_dtype),
            np.concatenate([[0], np.cumsum(feature_counts)]).astype(index_dtype),
        ),
        shape=(n, p),
    )
    Y = sp.csr_matrix(
        (
            np.ones(label_ids.size),
            label_ids.astype(index_dtype),
            np.concatenate([[0], np.cumsum(label_counts)]).astype(index_dtype),
        ),
        shape=(n, d),
    )
    X.sort_indices()
    Y.sort_indices()
    return MultiLabelDataset(X, Y, None, None)
