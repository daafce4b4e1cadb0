"""Matrices seen only through their products: the operator layer of :mod:`gpurpo.linalg`.

Every algorithm of :mod:`gpurpo.linalg` touches its matrix ``A`` (``m x n``)
through two products, ``A @ B`` and ``A.T @ B`` with a dense block ``B``.
:func:`as_operator` wraps dense arrays (NumPy or CuPy), sparse matrices (SciPy
or cupyx) and any object exposing ``shape``, ``matmat`` and ``rmatmat`` (for
instance :class:`scipy.sparse.linalg.LinearOperator`) into one
:class:`MatrixOperator`, validating the input once. Centring
(:func:`centered`) and transposition (:attr:`MatrixOperator.T`) are operators
too, so sparse data are never densified.

The argument checks of the randomized algorithms (:func:`check_n_components`,
:func:`check_n_iter`) live here too: :mod:`gpurpo.dask` runs the same
algorithms on row-split Dask arrays and checks its arguments with them.
"""

from __future__ import annotations

import numbers
from collections.abc import Callable
from typing import Any

import numpy as np

from gpurpo._validation import check_array, check_int, is_sparse
from gpurpo.backend import Backend, is_gpu_array, resolve_backend

__all__ = ["MatrixOperator", "as_operator", "centered", "check_n_components", "check_n_iter"]

_FLOAT_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))


def working_dtype(dtype: Any) -> np.dtype:
    """float32 and float64 are kept; float16 becomes float32; everything else float64."""
    if dtype is None:
        return np.dtype(np.float64)
    dtype = np.dtype(dtype)
    if dtype in _FLOAT_DTYPES:
        return dtype
    if dtype == np.dtype(np.float16):
        return np.dtype(np.float32)
    return np.dtype(np.float64)


class MatrixOperator:
    """A real ``m x n`` matrix accessed through ``A @ B`` and ``A.T @ B``.

    Build it with :func:`as_operator`; algorithm code only calls
    :meth:`matmat`, :meth:`rmatmat`, :attr:`T` and the reductions below.

    Parameters
    ----------
    shape : tuple of int
        ``(m, n)``.
    dtype : numpy.dtype
        Working precision (float32 or float64); products are returned in it.
    backend : Backend
        Where the products are computed.
    matmat, rmatmat : callable
        ``B -> A @ B`` for ``B`` of shape ``(n, l)`` and ``B -> A.T @ B`` for
        ``B`` of shape ``(m, l)``.
    kind : {"dense", "sparse", "operator"}
        What the operator wraps; ``data`` holds the dense or sparse matrix.
    data : array or sparse matrix, optional
        The wrapped matrix for ``kind`` ``"dense"``/``"sparse"``.
    input_on_gpu : bool
        Whether the user's input lived on the GPU; :meth:`output` moves
        results back to the host otherwise ("results in the input's namespace").
    """

    def __init__(
        self,
        shape: tuple[int, int],
        dtype: Any,
        backend: Backend,
        matmat: Callable[[Any], Any],
        rmatmat: Callable[[Any], Any],
        *,
        kind: str = "operator",
        data: Any = None,
        input_on_gpu: bool = False,
    ) -> None:
        self.shape = (int(shape[0]), int(shape[1]))
        self.dtype = np.dtype(dtype)
        self.backend = backend
        self._matmat = matmat
        self._rmatmat = rmatmat
        self.kind = kind
        self.data = data
        self.input_on_gpu = input_on_gpu

    @property
    def xp(self) -> Any:
        return self.backend.xp

    def matmat(self, B: Any) -> Any:
        """``A @ B`` for a dense ``(n, l)`` block, returned ``(m, l)`` in :attr:`dtype`."""
        return self._matmat(B)

    def rmatmat(self, B: Any) -> Any:
        """``A.T @ B`` for a dense ``(m, l)`` block, returned ``(n, l)`` in :attr:`dtype`."""
        return self._rmatmat(B)

    @property
    def T(self) -> MatrixOperator:
        """The transpose, sharing the data (no copy)."""
        data = None if self.data is None else self.data.T
        return MatrixOperator(
            self.shape[::-1],
            self.dtype,
            self.backend,
            self._rmatmat,
            self._matmat,
            kind=self.kind,
            data=data,
            input_on_gpu=self.input_on_gpu,
        )

    def column_means(self) -> Any:
        """Mean of each column, shape ``(n,)``, in :attr:`dtype`.

        Dense data are reduced with a float64 accumulator; sparse data and
        implicit operators through one product ``A.T @ 1 / m``.
        """
        xp = self.xp
        m = self.shape[0]
        if self.kind == "dense":
            return xp.mean(self.data, axis=0, dtype=xp.float64).astype(self.dtype)
        ones = xp.ones((m, 1), dtype=self.dtype)
        return self.rmatmat(ones)[:, 0] / m

    def gram(self) -> Any:
        """``A.T @ A`` as a dense float64 ``(n, n)`` array.

        float32 dense data are accumulated in float64 by blocks of rows, so
        the extra memory stays bounded; sparse data use one sparse product.
        """
        xp = self.xp
        m, n = self.shape
        if self.kind == "dense":
            if self.dtype == np.float64:
                return self.data.T @ self.data
            gram = xp.zeros((n, n), dtype=xp.float64)
            step = max(1, (1 << 22) // max(n, 1))
            for start in range(0, m, step):
                block = self.data[start : start + step].astype(xp.float64)
                gram += block.T @ block
            return gram
        if self.kind == "sparse":
            data = self.data.astype(np.float64)
            return xp.asarray((data.T @ data).toarray(), dtype=xp.float64)
        eye = xp.eye(n, dtype=self.dtype)
        return xp.asarray(self.rmatmat(self.matmat(eye)), dtype=xp.float64)

    def output(self, *arrays: Any) -> Any:
        """Return ``arrays`` in the namespace of the user's input (host unless GPU input)."""
        if not self.input_on_gpu:
            arrays = tuple(self.backend.to_host(a) for a in arrays)
        return arrays[0] if len(arrays) == 1 else arrays

    def __repr__(self) -> str:
        return (
            f"MatrixOperator(shape={self.shape}, dtype={self.dtype}, kind={self.kind!r}, "
            f"backend={self.backend.name!r})"
        )


def _is_array_like(A: Any) -> bool:
    if isinstance(A, (list, tuple)):
        return True
    for attr in ("__array__", "__array_interface__", "__cuda_array_interface__"):
        if hasattr(A, attr):
            return True
    return is_sparse(A)


def _implicit_operator(A: Any, name: str, backend: Backend) -> MatrixOperator:
    shape = getattr(A, "shape", None)
    if shape is None or len(tuple(shape)) != 2:
        raise ValueError(
            f"{name} must be 2-D: an operator needs a shape (m, n), got shape {shape!r}"
        )
    shape = tuple(shape)
    for axis, size in enumerate(shape):
        if not isinstance(size, numbers.Integral) or size < 1:
            raise ValueError(
                f"{name} must have a positive integer shape, got {shape!r} (axis {axis})"
            )
    dtype = working_dtype(getattr(A, "dtype", None))
    xp = backend.xp

    def checked(method: Callable[[Any], Any], label: str, rows: int) -> Callable[[Any], Any]:
        def product(B: Any) -> Any:
            out = backend.asarray(method(B), dtype=dtype)
            if out.ndim == 1 and B.ndim == 2 and B.shape[1] == 1:
                out = out[:, None]
            if tuple(out.shape) != (rows, B.shape[1]):
                raise ValueError(
                    f"{name}.{label} returned an array of shape {tuple(out.shape)}, "
                    f"expected {(rows, B.shape[1])} for an input of shape {tuple(B.shape)}"
                )
            if not bool(xp.isfinite(out).all()):
                raise ValueError(f"{name}.{label} returned NaN or infinity")
            return out

        return product

    return MatrixOperator(
        shape,
        dtype,
        backend,
        checked(A.matmat, "matmat", shape[0]),
        checked(A.rmatmat, "rmatmat", shape[1]),
        kind="operator",
        input_on_gpu=is_gpu_array(A),
    )


def as_operator(A: Any, name: str = "A", backend: Backend | None = None) -> MatrixOperator:
    """Validate ``A`` and wrap it as a :class:`MatrixOperator`.

    Parameters
    ----------
    A : array-like, sparse matrix or operator
        A dense 2-D array (NumPy or CuPy), a SciPy/cupyx sparse matrix or
        array, or any object with a 2-D ``shape`` and methods ``matmat(B)``
        (``A @ B``) and ``rmatmat(B)`` (``A.T @ B``), with an optional
        ``dtype``. Implicit operators receive blocks ``B`` of the resolved
        backend (NumPy unless the global backend or the operator says CuPy).
    name : str
        Argument name used in error messages.
    backend : Backend, optional
        Backend to compute on; resolved from ``A`` ("compute follows data")
        when omitted.

    Returns
    -------
    MatrixOperator
        float32 inputs stay float32; integer, boolean and other inputs are
        computed in float64.

    Raises
    ------
    ValueError
        If ``A`` is not 2-D, is empty, or holds NaN or infinity.
    TypeError
        If ``A`` is neither an array, a sparse matrix nor an operator.
    """
    if isinstance(A, MatrixOperator):
        return A
    if backend is None:
        backend = resolve_backend(A)
    if _is_array_like(A):
        arr = check_array(A, name, backend, accept_sparse=True)
        shape = tuple(arr.shape)
        if shape[1] < 1:
            raise ValueError(f"{name} must have at least one column, got shape {shape}")
        dtype = working_dtype(arr.dtype)
        if arr.dtype != dtype:
            arr = arr.astype(dtype)
        sparse = backend.issparse(arr)
        return MatrixOperator(
            shape,
            dtype,
            backend,
            arr.__matmul__,
            arr.T.__matmul__,
            kind="sparse" if sparse else "dense",
            data=arr,
            input_on_gpu=is_gpu_array(A),
        )
    if callable(getattr(A, "matmat", None)) and callable(getattr(A, "rmatmat", None)):
        return _implicit_operator(A, name, backend)
    raise TypeError(
        f"{name} must be a 2-D array, a sparse matrix or an operator with shape, "
        f"matmat and rmatmat; got {type(A).__name__}"
    )


def centered(op: MatrixOperator, mean: Any) -> MatrixOperator:
    """The implicitly centred operator ``C = A - 1 mean^T`` (never formed).

    Products follow from distributivity: ``C @ B = A @ B - 1 (mean^T B)`` and
    ``C.T @ B = A.T @ B - mean (1^T B)``; each costs one product with ``A``
    plus ``O((m + n) l)``.

    Parameters
    ----------
    op : MatrixOperator
        ``A``, of shape (m, n).
    mean : array of shape (n,)
        The row vector subtracted from every row of ``A`` (usually
        ``op.column_means()``), on the backend of ``op``; cast to
        ``op.dtype``.

    Returns
    -------
    MatrixOperator
        ``C``, of the same shape, dtype, backend and ``input_on_gpu`` as
        ``op``, with ``kind="operator"`` (no ``data``).
    """
    xp = op.xp
    mean = xp.asarray(mean, dtype=op.dtype)
    row_mean = mean[None, :]
    col_mean = mean[:, None]

    def matmat(B: Any) -> Any:
        return op.matmat(B) - row_mean @ B

    def rmatmat(B: Any) -> Any:
        return op.rmatmat(B) - col_mean * xp.sum(B, axis=0, keepdims=True)

    return MatrixOperator(
        op.shape,
        op.dtype,
        op.backend,
        matmat,
        rmatmat,
        kind="operator",
        input_on_gpu=op.input_on_gpu,
    )


def check_n_components(value: Any, shape: tuple[int, int], matrix: str, name: str = "n_components") -> int:
    """Check ``1 <= value <= min(shape)`` with an error naming everything."""
    value = check_int(value, name)
    limit = min(shape)
    if not 1 <= value <= limit:
        raise ValueError(
            f"{name} must be between 1 and min(n_rows, n_columns) = {limit} for {matrix} "
            f"of shape {tuple(shape)}, got {value}"
        )
    return value


def check_n_iter(value: Any, n_components: int, shape: tuple[int, int]) -> int:
    """``"auto"`` gives 7 power iterations when ``k < 0.1 min(shape)``, else 4."""
    if isinstance(value, str):
        if value != "auto":
            raise ValueError(f"n_iter must be a non-negative int or 'auto', got {value!r}")
        return 7 if n_components < 0.1 * min(shape) else 4
    return check_int(value, "n_iter", low=0)
