"""Input validation shared by every public function and estimator.

Every check raises a ``ValueError`` or ``TypeError`` that names the argument,
what was expected and what was received, so bad input never reaches a kernel.
"""

from __future__ import annotations

import math
import numbers
import warnings
from typing import Any

import numpy as np

from gpurpo.backend import (
    Backend,
    device_frame_values,
    is_device_frame,
    is_gpu_array,
    namespace_of,
)


def _shape_of(a: Any) -> tuple[int, ...]:
    shape = getattr(a, "shape", None)
    if shape is None:
        return np.shape(a)
    return tuple(shape)


def check_2d(a: Any, name: str) -> None:
    """Raise if ``a`` is not two-dimensional."""
    shape = _shape_of(a)
    if len(shape) != 2:
        hint = ""
        if len(shape) == 1:
            hint = (
                "; Reshape your data either using array.reshape(-1, 1) if it has a single "
                "feature/output or array.reshape(1, -1) if it contains a single sample"
            )
        raise ValueError(f"{name} must be a 2-D array, got an array of shape {shape}{hint}")


def is_sparse(a: Any) -> bool:
    import scipy.sparse as sp

    if sp.issparse(a):
        return True
    if is_gpu_array(a):
        import cupyx.scipy.sparse as cusparse

        return cusparse.issparse(a)
    return False


def _nullable_frame_as_float(a: Any) -> Any:
    """A pandas frame or series of nullable numeric columns as float64, ``pd.NA`` as NaN.

    NumPy turns such a frame (``Float64``, ``Int64``, ``boolean`` columns)
    into an object array holding ``pd.NA``, which does not convert to float;
    scikit-learn reads ``pd.NA`` as a missing value, and so do we. Anything
    else is returned as it is.
    """
    if not type(a).__module__.startswith("pandas") or not hasattr(a, "to_numpy"):
        return a
    import pandas as pd

    dtypes = [a.dtype] if hasattr(a, "dtype") else list(a.dtypes)
    nullable = any(pd.api.types.is_extension_array_dtype(t) for t in dtypes)
    numeric = all(
        pd.api.types.is_numeric_dtype(t) or pd.api.types.is_bool_dtype(t) for t in dtypes
    )
    if nullable and numeric:
        return a.to_numpy(dtype=np.float64, na_value=np.nan)
    return a


def check_numeric_dtype(dtype: Any, name: str) -> None:
    """Refuse complex values (scikit-learn's message) and non-numeric dtypes, naming ``name``."""
    kind = np.dtype(dtype).kind
    if kind == "c":
        raise ValueError(f"Complex data not supported: {name} has dtype {dtype}")
    if kind in "USVOMm":
        raise ValueError(f"{name} must hold numbers, got dtype {dtype}")


def check_array(
    a: Any,
    name: str,
    backend: Backend,
    *,
    dtype: Any = None,
    accept_sparse: bool = True,
    allow_nan: bool = False,
    ensure_2d: bool = True,
    min_rows: int = 1,
    float32_range: bool = False,
    check_values: bool = True,
) -> Any:
    """Validate and move ``a`` to ``backend``.

    Parameters
    ----------
    a : array-like, sparse matrix or data frame
        The input (a cuDF frame's values are taken on the device,
        :mod:`gpurpo.backend._frames`).
    name : str
        Argument name used in error messages.
    backend : Backend
        Target backend (the array is moved there).
    dtype : dtype, optional
        Cast to this dtype. Otherwise float32 and float64 inputs are kept, and
        integers, booleans and float16 become float64.
    accept_sparse : bool
        Sparse matrices are accepted (converted to CSR) if True, else an error.
    allow_nan : bool
        NaN is allowed (missing values) if True; infinity never is.
    ensure_2d : bool
        Require a 2-D array.
    min_rows : int
        Minimum number of rows.
    float32_range : bool
        Values must also lie within float32's finite range (the tree models
        bin and store inputs and outputs in float32, where a larger value
        would become infinite: a feature collapsed into one bin, outputs
        that nothing can split), as scikit-learn's trees require.
    check_values : bool
        Check the values (NaN, infinity, float32 range) here. False leaves
        it to the caller, which must then call :func:`validate_values` (or do
        its check in a pass it makes anyway, as
        :meth:`gpurpo.tree.BinMapper.fit_transform` does with
        ``check_range_of``).
    """
    if a is None:
        raise ValueError(f"{name} is required, got None")
    if is_device_frame(a):
        a = device_frame_values(a, name)
    if is_sparse(a):
        if not accept_sparse:
            raise TypeError(
                f"{name} must be a dense array, got a sparse matrix of shape {a.shape}; "
                "convert it with .toarray()"
            )
        check_numeric_dtype(a.dtype, name)
        arr = backend.asarray(a)
        if arr.format != "csr":
            arr = arr.tocsr()
        if dtype is not None and arr.dtype != dtype:
            arr = arr.astype(dtype)
        elif dtype is None and (arr.dtype.kind in "iub" or arr.dtype.itemsize < 4):
            arr = arr.astype(backend.xp.float64)
    else:
        a = _nullable_frame_as_float(a)
        if isinstance(a, (list, tuple)) or not hasattr(a, "dtype"):
            try:
                a = np.asarray(a)
            except Exception as exc:
                raise TypeError(f"{name} could not be converted to an array: {exc}") from exc
        if a.dtype == object:
            try:
                a = np.asarray(a, dtype=np.float64)
            except (TypeError, ValueError) as exc:
                raise type(exc)(
                    f"{name} must hold numbers, got an object array that does not convert "
                    f"to float: {exc}"
                ) from exc
        check_numeric_dtype(a.dtype, name)
        arr = backend.asarray(a, dtype=dtype)
        if arr.dtype.kind not in "fiub":
            raise ValueError(f"{name} must hold numbers, got dtype {arr.dtype}")
        if dtype is None and (arr.dtype.kind in "iub" or arr.dtype.itemsize < 4):
            # integers, booleans and float16 (which no kernel takes) compute in float64
            arr = arr.astype(backend.xp.float64)
    if ensure_2d:
        check_2d(arr, name)
    elif len(_shape_of(arr)) == 0:
        raise ValueError(f"{name} must be an array, got a scalar (shape ())")
    if _shape_of(arr)[0] < min_rows:
        raise ValueError(
            f"{name} must have at least {min_rows} row(s), got shape {_shape_of(arr)}"
        )
    if check_values:
        validate_values(arr, name, allow_nan, float32_range, backend.xp)
    return arr


def validate_values(
    a: Any, name: str, allow_nan: bool, float32_range: bool, xp: Any
) -> None:
    """Raise for NaN (unless allowed), infinity, or (with ``float32_range``) values beyond float32.

    ``a``: a dense array or a sparse matrix (its stored values are checked);
    integer and boolean values pass.

    A max and a min reduction decide, as NaN propagates through both and an
    infinity reaches one of them; neither allocates an array the size of
    ``values`` (``isfinite(values).all()`` made a boolean copy of it). With
    NaN present and allowed, ``nanmax``/``nanmin`` give the magnitude of the
    other values.
    """
    values = a.data if is_sparse(a) else a
    if values.dtype.kind != "f" or not values.size:
        return
    largest, smallest = float(values.max()), float(values.min())
    if math.isnan(largest) or math.isnan(smallest):
        if not allow_nan:
            raise ValueError(f"{name} contains NaN or infinity")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN: nothing to check
            largest, smallest = float(xp.nanmax(values)), float(xp.nanmin(values))
    magnitude = max(abs(largest), abs(smallest))
    if math.isinf(magnitude):
        if allow_nan:
            raise ValueError(f"{name} contains infinity; only NaN (missing) is allowed")
        raise ValueError(f"{name} contains NaN or infinity")
    limit = float(np.finfo(np.float32).max)
    if float32_range and magnitude > limit:
        raise ValueError(
            f"{name} contains a value of magnitude {magnitude:.4g}, beyond float32's largest "
            f"({limit:.4g}): the tree models store {name} in float32; rescale it"
        )


def check_consistent_rows(**arrays: Any) -> None:
    """Raise if the named arrays do not all have the same number of rows."""
    rows = {k: _shape_of(v)[0] for k, v in arrays.items() if v is not None}
    if len(set(rows.values())) > 1:
        desc = ", ".join(f"{k} has {n}" for k, n in rows.items())
        raise ValueError(f"inconsistent numbers of rows: {desc}")


def check_has_outputs(Y: Any, name: str = "y") -> None:
    """Raise if the 2-D outputs ``Y`` have no column (nothing to learn, as scikit-learn says)."""
    shape = _shape_of(Y)
    if len(shape) == 2 and shape[1] < 1:
        raise ValueError(f"{name} must have at least one output column, got shape {shape}")


def check_int(value: Any, name: str, *, low: int | None = None, high: int | None = None) -> int:
    """Check an integer parameter within ``[low, high]``."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be an int, got {type(value).__name__} {value!r}")
    value = int(value)
    if low is not None and value < low:
        raise ValueError(f"{name} must be >= {low}, got {value}")
    if high is not None and value > high:
        raise ValueError(f"{name} must be <= {high}, got {value}")
    return value


def check_float(
    value: Any,
    name: str,
    *,
    low: float | None = None,
    high: float | None = None,
    low_inclusive: bool = True,
    high_inclusive: bool = True,
) -> float:
    """Check a real parameter within the given interval."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a real number, got {type(value).__name__} {value!r}")
    value = float(value)
    if not math.isfinite(value):
        raise ValueError(f"{name} must be finite, got {value}")
    if low is not None and (value < low or (not low_inclusive and value == low)):
        op = ">=" if low_inclusive else ">"
        raise ValueError(f"{name} must be {op} {low}, got {value}")
    if high is not None and (value > high or (not high_inclusive and value == high)):
        op = "<=" if high_inclusive else "<"
        raise ValueError(f"{name} must be {op} {high}, got {value}")
    return value


def check_choice(value: Any, name: str, choices: tuple[Any, ...]) -> Any:
    """Check that ``value`` is one of ``choices``."""
    if value not in choices:
        raise ValueError(f"{name} must be one of {choices}, got {value!r}")
    return value


def check_weight_scale(weights: Any, name: str = "sample_weight") -> None:
    """Reject non-negative weights with no positive sum, or that float32 cannot hold.

    The tree kernels store each weight in float32 (sums and products are
    formed in float64): a weight above float32's largest value would become
    infinite, and when the largest weight is below float32's smallest
    normal number every weight rounds to zero or loses most of its digits,
    leaving nothing to split. ``weights`` is a validated 1-D array (NumPy or
    CuPy) of finite non-negative values.
    """
    if not float(weights.sum()) > 0:
        raise ValueError(f"{name} must have a positive sum, got all zeros")
    limits = np.finfo(np.float32)
    largest = float(weights.max())
    if largest > float(limits.max):
        raise ValueError(
            f"{name} must be at most {float(limits.max):.4g} (weights are stored in float32), "
            f"got a weight of {largest:.4g}; divide the weights by a common factor"
        )
    if largest < float(limits.tiny):
        raise ValueError(
            f"{name} must have a weight of at least {float(limits.tiny):.4g} (weights are stored "
            f"in float32), got at most {largest:.4g}; multiply the weights by a common factor"
        )


def check_finite_product(a: Any, what: str, inputs: str) -> None:
    """Raise a ``ValueError`` when a product formed from the inputs overflowed.

    Finite inputs of huge magnitude (say 1e300) give an infinite Gram matrix
    or cross product, on which a factorisation or eigendecomposition fails
    with an unhelpful ``LinAlgError``; this names the inputs to rescale.
    """
    if not bool(namespace_of(a).isfinite(a).all()):
        raise ValueError(
            f"{what} overflows float64: the values of {inputs} are too large to "
            f"multiply; rescale {inputs}"
        )

