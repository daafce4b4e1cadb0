"""The dataset record returned by the loaders and the text-input helper they share."""

from __future__ import annotations

import contextlib
import io
import os
from collections.abc import Iterator
from typing import IO, Any, NamedTuple

__all__ = ["MultiLabelDataset", "open_text"]


class MultiLabelDataset(NamedTuple):
    """A multi-label data set as loaded from a file.

    Attributes
    ----------
    X : ndarray of shape (n_samples, n_features) or scipy.sparse.csr_matrix
        Inputs (float64).
    Y : scipy.sparse.csr_matrix of shape (n_samples, n_labels)
        0/1 label matrix (float64 values, sorted indices).
    feature_names : list of str or None
        Names of the input features, when the format has them.
    label_names : list of str or None
        Names of the labels, when the format has them.
    """

    X: Any
    Y: Any
    feature_names: list[str] | None
    label_names: list[str] | None


def source_name(source: Any) -> str:
    """A printable name for a path or file-like object (used in error messages)."""
    if isinstance(source, (str, os.PathLike)):
        return os.fspath(source)
    return str(getattr(source, "name", "<stream>"))


@contextlib.contextmanager
def open_text(source: Any, name: str) -> Iterator[IO[str]]:
    """Open a path, or wrap a text/binary file-like object, as UTF-8 text.

    Parameters
    ----------
    source : str, os.PathLike or file-like object
        The file. File-like objects are read from their current position and
        not closed.
    name : str
        Argument name used in the TypeError for other inputs.
    """
    if isinstance(source, (str, os.PathLike)):
        with open(source, encoding="utf-8", newline=None) as fh:
            yield fh
        return
    if not hasattr(source, "read"):
        raise TypeError(
            f"{name} must be a path (str or os.PathLike) or a file-like object, "
            f"got {type(source).__name__}"
        )
    probe = source.read(0)
    if isinstance(probe, bytes):
        wrapper = io.TextIOWrapper(source, encoding="utf-8", newline=None)
        try:
            yield wrapper
        finally:
            wrapper.detach()
        return
    yield source
