"""The bin mapper: fits the bin edges of every feature and codes the inputs.

The rule and the code layout are described in :mod:`gpurpo.tree.binning`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import scipy.sparse as sp

from gpurpo._validation import check_int, validate_values
from gpurpo.backend import Backend, check_random_state
from gpurpo.tree import kernels
from gpurpo.tree.binning import _row_sort
from gpurpo.tree.binning._bin_lows import bin_lows, block_lows, edge_lows
from gpurpo.tree.binning._binary_columns import binary_blocks, one_bits
from gpurpo.tree.binning._bucket_edges import bucket_edges_rows, needs_sort, row_ranges
from gpurpo.tree.binning._code_tables import bin_codes_fitted
from gpurpo.tree.binning._quantile_rule import quantile_edges
from gpurpo.tree.binning._sorted_edges import edges_from_sorted, transpose_block_to_float32
from gpurpo.tree.binning._sparse import (
    MOSTLY_ZERO_SHARE,
    SparseCodes,
    canonical_csc,
    dense_codes_of,
    listed_share,
    sparse_codes,
    sparse_codes_of_dense,
    sparse_codes_of_values,
    sparse_codes_on_device,
    sparse_column_edges,
    zero_codes_ragged,
)
from gpurpo.tree.binning._weighted_edges import weighted_column_edges

__all__ = ["BinMapper", "BinnedMatrix", "MAX_BINS", "DEFAULT_MAX_BINNED_BYTES"]

# codes compared at once when counting each feature's zero codes
_COUNT_BLOCK_CELLS = 1 << 24

MAX_BINS = 255
DEFAULT_SUBSAMPLE = 200_000
DEFAULT_MAX_BINNED_BYTES = 4 * 1024**3
_DENSE_FIT_BYTES = 256 * 1024**2
# bytes of float32 values of a block of features in _bin_by_blocks
_BLOCK_BYTES = 1 << 20
# the code _bin_by_blocks gives NaN until the missing bin is known (value codes are
# at most MAX_BINS - 1)
_NAN_CODE = 255


def check_max_bins(max_bins: Any) -> int:
    """The ``max_bins`` parameter of every binned estimator, checked once for all.

    Parameters
    ----------
    max_bins : object
        The value given.

    Returns
    -------
    int
        ``max_bins`` as an int in ``[2, MAX_BINS]``.

    Raises
    ------
    TypeError
        If it is not an integer (booleans included).
    ValueError
        If it is outside ``[2, MAX_BINS]``.
    """
    if isinstance(max_bins, bool) or not isinstance(max_bins, (int, np.integer)):
        raise TypeError(f"max_bins must be an int, got {type(max_bins).__name__} {max_bins!r}")
    if not 2 <= int(max_bins) <= MAX_BINS:
        raise ValueError(f"max_bins must be in [2, {MAX_BINS}], got {max_bins}")
    return int(max_bins)


@dataclass
class BinnedMatrix:
    """A binned input matrix on one backend.

    Attributes
    ----------
    dense_codes : uint8 array of shape (n_features, n_samples), C-contiguous, or None
        Feature-major bin codes; ``missing_bin`` marks NaN. None for a sparse
        X (its stored entries are binned alone) and, on the NumPy backend, for
        a dense one whose codes are mostly their feature's code of 0.0 (at
        most ``MOSTLY_ZERO_SHARE`` of them differ, counted as
        :func:`~gpurpo.tree.binning._sparse.listed_share` does: word presence
        features): its codes are listed in ``sparse_codes`` only, which every
        CPU kernel reads instead (a feature then costs its entries other than
        0.0, not every sample of a node). On CUDA backends such a dense X
        keeps its codes, read by the kernels that look codes up (small nodes,
        partitions), and is listed too: the histograms of large nodes add the
        listed entries only. :attr:`codes` builds the dense matrix on first
        use (inspection).
    n_bins : int
        Histogram width: value bins of the widest feature plus the missing
        bin. Codes lie in ``[0, n_bins - 1]``.
    missing_bin : int
        ``n_bins - 1``.
    edge_values : float64 array of shape (2 n_edges + n_features,), on the backend
        Every feature's increasing bin edges, feature after feature
        (:attr:`BinMapper.edge_values_`): edge ``b`` of feature ``f``,
        ``edge_values[edge_ptr[f] + b]``, is the largest raw value of bin
        ``b`` (the split "code <= b" is "x <= edge"). The last value bin of a
        feature has no edge (``+inf``). The kernels read this ragged table, not
        a ``(n_features, n_bins - 1)`` one padded with ``+inf``, which would
        hold 2 GB at a million features (:attr:`BinMapper.thresholds_`).
        The edges (``n_edges = edge_ptr[-1]``) are followed by each value
        bin's smallest fitted value (:attr:`BinMapper.bin_low_`), bin ``b``
        of feature ``f`` at ``n_edges + edge_ptr[f] + f + b``: the raw scale
        of the Extra-Trees draw (:mod:`gpurpo.tree.binning._bin_lows`).
    edge_ptr : int64 array of shape (n_features + 1,), on the backend
        Feature ``f``'s edges are ``edge_values[edge_ptr[f]:edge_ptr[f + 1]]``.
    edge_values_host, edge_ptr_host : ndarray
        The same two arrays on the host.
    backend : Backend
    subtracted_bin : int32 array of shape (n_features,), on the backend
        The code of 0.0 for the features where at least half the codes are
        it, else -1: the bin whose sums the split search of large nodes
        derives from the node's totals (a sparse feature then costs its
        nonzeros). Computed from the codes, so dense and sparse X agree.
    sparse_codes : SparseCodes or None
        For a sparse X, the codes of its stored entries by row and by column
        (the other codes are each feature's code of 0.0); for a dense X whose
        codes are mostly their feature's code of 0.0, its other codes, listed
        the same way; else None.
    listed : int64 array of shape (n_features,), on the backend
        Each feature's number of codes other than its code of 0.0 (for a
        sparse X, the length of its column in ``sparse_codes``): the split
        kernels sum a feature with a subtracted bin from a table instead of
        sorting a node's codes when the node has more samples than this.
    shape : (int, int)
        ``(n_features, n_samples)``; from ``dense_codes`` when not given.
    max_dense_bytes : int or None
        The largest dense codes matrix :attr:`codes` may build (None: no limit).
    """

    dense_codes: Any
    n_bins: int
    missing_bin: int
    edge_values: Any
    edge_ptr: Any
    edge_values_host: np.ndarray
    edge_ptr_host: np.ndarray
    backend: Backend = field(repr=False)
    subtracted_bin: Any = field(default=None, repr=False)
    sparse_codes: SparseCodes | None = field(default=None, repr=False)
    listed: Any = field(default=None, repr=False)
    shape: tuple[int, int] | None = None
    max_dense_bytes: int | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        xp = self.backend.xp
        if self.shape is None:
            if self.dense_codes is None:
                raise ValueError("BinnedMatrix needs shape when dense_codes is None")
            self.shape = (int(self.dense_codes.shape[0]), int(self.dense_codes.shape[1]))
        if self.dense_codes is None and self.sparse_codes is None:
            raise ValueError("BinnedMatrix needs dense_codes or sparse_codes")
        p, n = self.shape
        if self.subtracted_bin is None:
            self.subtracted_bin = xp.full(p, -1, dtype=xp.int32)
        if self.listed is None:
            self.listed = xp.full(p, n, dtype=xp.int64)

    @property
    def n_features(self) -> int:
        return int(self.shape[0])

    @property
    def n_samples(self) -> int:
        return int(self.shape[1])

    @property
    def codes(self) -> Any:
        """The dense feature-major codes, built from ``sparse_codes`` on first use.

        Raises
        ------
        ValueError
            If building them needs more than ``max_dense_bytes``.
        """
        if self.dense_codes is None:
            p, n = self.shape
            if self.max_dense_bytes is not None and n * p > self.max_dense_bytes:
                raise ValueError(
                    f"the dense codes of the sparse X of shape {(n, p)} need {n * p} "
                    f"bytes (uint8 codes), more than max_binned_bytes="
                    f"{self.max_dense_bytes}; the CPU kernels read its stored entries "
                    "instead (sparse_codes); raise max_binned_bytes to build them"
                )
            self.dense_codes = dense_codes_of(self.sparse_codes, n, self.backend.xp)
        return self.dense_codes

    @property
    def kernel_sparse_codes(self) -> SparseCodes | None:
        """The ``sparse_codes`` that the split kernels read beside :attr:`kernel_codes`:
        the lists, except on CUDA backends when the dense codes are held (their kernels
        then read a code where the lists would be searched for it)."""
        if self.dense_codes is not None and self.backend.uses_cuda_kernels:
            return None
        return self.sparse_codes

    @property
    def stored_rows_held(self) -> bool:
        """Whether the CUDA histogram kernels add this matrix's listed entries
        (``sparse_codes``' rows) rather than read all its codes: on CUDA backends, for
        a sparse X and for a dense one listed as mostly zeros."""
        return self.sparse_codes is not None and self.backend.uses_cuda_kernels

    @property
    def kernel_codes(self) -> Any:
        """The ``codes`` argument of the CPU split kernels: the dense codes, or a
        ``(n_features, 0)`` array when there are none (the kernels then read
        ``sparse_codes``' columns)."""
        if self.dense_codes is None:
            xp = self.backend.xp
            return xp.empty((self.n_features, 0), dtype=xp.uint8)
        return self.dense_codes


class BinMapper:
    """Fit per-feature quantile bin edges and turn raw inputs into codes.

    Parameters
    ----------
    max_bins : int in [2, 255]
        Maximum number of bins for non-missing values of each feature; one
        more bin holds missing values.
    subsample : int
        Edges are fitted on at most this many rows (drawn without
        replacement) when n is larger.
    random_state : None, int or Generator
        Seed of the subsample.
    max_binned_bytes : int
        Upper bound on the size of the dense binned matrix (n_samples *
        n_features bytes). A sparse X on the NumPy backend is binned at its
        stored entries, and the bound applies when a fit builds its dense
        codes (:attr:`BinnedMatrix.codes`).

    Attributes
    ----------
    edge_values_ : float64 ndarray of shape (n_value_bins_.sum() - n_features,)
        Every feature's increasing edges, feature after feature: all the
        fitted mapper keeps (a few per feature on text-like inputs).
    edges_ : list of float64 ndarray
        Increasing edges of each feature (``len = n_value_bins - 1``), copied
        from ``edge_values_``.
    bin_low_ : float64 ndarray of shape (n_value_bins_.sum(),)
        Each value bin's smallest fitted value, feature after feature
        (:func:`gpurpo.tree.binning._bin_lows.bin_lows`).
    n_value_bins_ : int32 ndarray of shape (n_features,)
        Number of value bins of each feature (at least 1).
    n_bins_ : int
        ``max(n_value_bins_) + 1`` (the last bin holds missing values).
    missing_bin_ : int
        ``n_bins_ - 1``.
    thresholds_ : float64 ndarray of shape (n_features, n_bins_ - 1)
        See :class:`BinnedMatrix`. Built from ``edge_values_`` on each access
        (the +inf padding of the table is not stored: at 200,000 features with
        a few of 255 bins it would be 406 MB in every fitted model).
    edge_ptr_ : int64 ndarray of shape (n_features + 1,)
        Feature ``f``'s edges are ``edge_values_[edge_ptr_[f]:edge_ptr_[f + 1]]``
        (from ``n_value_bins_``).
    n_features_in_ : int
    """

    def __init__(
        self,
        max_bins: int = MAX_BINS,
        subsample: int = DEFAULT_SUBSAMPLE,
        random_state: Any = None,
        max_binned_bytes: int = DEFAULT_MAX_BINNED_BYTES,
    ) -> None:
        self.max_bins = max_bins
        self.subsample = subsample
        self.random_state = random_state
        self.max_binned_bytes = max_binned_bytes

    def _check_params(self) -> None:
        check_max_bins(self.max_bins)
        check_int(self.subsample, "subsample", low=1)
        check_int(self.max_binned_bytes, "max_binned_bytes", low=1)

    def fit(self, X: Any, sample_weight: Any = None) -> BinMapper:
        """Fit the bin edges on (a subsample of) ``X``.

        Parameters
        ----------
        X : array or sparse matrix of shape (n, p)
            Raw inputs (NumPy, CuPy, SciPy or cupyx sparse), already
            validated: finite or NaN.
        sample_weight : array (n,), optional
            Rows with weight 0 are ignored; quantiles are weighted.

        Returns
        -------
        self
            With ``edge_values_``, ``n_value_bins_``, ``n_bins_``,
            ``missing_bin_`` and ``n_features_in_`` set (host NumPy).
        """
        self._check_params()
        n, p = X.shape
        rng = check_random_state(self.random_state)
        weights = None
        candidates = np.arange(n)
        if sample_weight is not None:
            weights = np.asarray(_host_rows(sample_weight, None), dtype=np.float64)
            candidates = np.flatnonzero(weights > 0)
        rows = candidates
        if len(candidates) > self.subsample:
            rows = np.sort(rng.choice(candidates, size=int(self.subsample), replace=False))
        if weights is not None:
            weights = weights[rows]
        sample = _host_rows(X, None if len(rows) == n else rows)
        max_bins = int(self.max_bins)
        if sp.issparse(sample) and weights is None:
            self._set_edges(*_fit_edges_sparse(sample, max_bins))
        else:
            self._set_edges(*_fit_edges_columns(sample, weights, max_bins))
        self.bin_low_ = bin_lows(sample, self.edge_values_, self.edge_ptr_)
        return self

    def _set_edges(self, edge_values: np.ndarray, n_edges: np.ndarray) -> None:
        """The fitted attributes from the edges: feature after feature, ``n_edges[f]``
        increasing edges each (one array: a list of p arrays would cost an object
        per feature)."""
        p = n_edges.shape[0]
        self.n_value_bins_ = (n_edges + 1).astype(np.int32)
        self.n_bins_ = int(self.n_value_bins_.max()) + 1 if p else 2
        self.missing_bin_ = self.n_bins_ - 1
        self.edge_values_ = np.ascontiguousarray(edge_values, dtype=np.float64)
        self.n_features_in_ = p

    @property
    def edge_ptr_(self) -> np.ndarray:
        """Offsets of each feature's edges in ``edge_values_`` (int64, ``n_features + 1``)."""
        if "edge_values_" not in self.__dict__:
            raise AttributeError("edge_ptr_: the BinMapper is not fitted")
        ptr = np.zeros(self.n_value_bins_.shape[0] + 1, dtype=np.int64)
        np.cumsum(self.n_value_bins_.astype(np.int64) - 1, out=ptr[1:])
        return ptr

    @property
    def thresholds_(self) -> np.ndarray:
        """The ``(n_features, n_bins_ - 1)`` table of the edges, +inf padded (a new array)."""
        if "edge_values_" not in self.__dict__:
            raise AttributeError("thresholds_: the BinMapper is not fitted")
        n_edges = self.n_value_bins_.astype(np.int64) - 1
        width = self.n_bins_ - 1
        table = np.full((n_edges.shape[0], width), np.inf, dtype=np.float64)
        table[np.arange(width) < n_edges[:, None]] = self.edge_values_
        return table

    @property
    def edges_(self) -> list[np.ndarray]:
        """Increasing edges of each feature (``len = n_value_bins_[f] - 1``), float64."""
        if "edge_values_" not in self.__dict__:
            raise AttributeError("edges_: the BinMapper is not fitted")
        if self.n_features_in_ == 0:
            return []
        return [e.copy() for e in np.split(self.edge_values_,
                                           np.cumsum(self.n_value_bins_[:-1] - 1))]

    def __setstate__(self, state: dict[str, Any]) -> None:
        # mappers pickled with a padded (p, max_bins - 1) table of thresholds
        table = state.pop("thresholds_", None)
        if table is not None:
            n_edges = state["n_value_bins_"].astype(np.int64) - 1
            state["edge_values_"] = np.ascontiguousarray(
                table[np.arange(table.shape[1]) < n_edges[:, None]])
        self.__dict__.update(state)

    def fit_transform(
        self, X: Any, backend: Backend, sample_weight: Any = None,
        check_range_of: str | None = None,
    ) -> BinnedMatrix:
        """Fit the bin edges on ``X`` and bin ``X``: ``fit(X, sample_weight).transform(X, backend)``.

        Same edges and codes. On the NumPy backend, for C-ordered dense float
        inputs fitted on all their rows without weights, each block of
        features is transposed to float32 once, for its edges (a sorted copy)
        and its codes (contiguous reads), in :func:`_bin_by_blocks`; the
        float64 values decide for the features where float32 codes could
        differ (see :func:`gpurpo.tree.binning._code_tables.float32_codes_agree`).

        ``check_range_of``: the name of ``X`` in errors, to check its values
        here, as ``check_array(X, name, allow_nan=True, float32_range=True)``
        does (:func:`gpurpo._validation.validate_values`: infinity, or a
        magnitude beyond float32's largest, is a ``ValueError``). On the
        fused path this costs no pass over ``X``: a float64 value beyond
        float32's range rounds to float32's largest or to infinity, so only
        when a sorted block starts or ends (NaN aside) at such a magnitude is
        ``X`` checked in full, for the exact error.
        """
        if not self._fuses(X, backend, sample_weight):
            if check_range_of is not None:
                validate_values(X, check_range_of, True, True, backend.xp)
            if backend.issparse(X):
                X = canonical_csc(X)  # once, for the edges, the codes and the entry views
            return self.fit(X, sample_weight).transform(X, backend)
        self._check_params()
        n, p = X.shape
        self._check_binned_size(n, p)
        codes = np.empty((p, n), dtype=np.uint8)
        n_zero = np.empty(p, dtype=np.int64)
        lows = (np.empty((p, int(self.max_bins)), dtype=np.float64), np.empty(p, dtype=np.bool_))
        out, n_edges, has_nan, extreme = _bin_by_blocks(X, int(self.max_bins), codes, n_zero,
                                                        lows)
        if check_range_of is not None and extreme:
            validate_values(X, check_range_of, True, True, np)
        self._set_edges(*_table_edges(out, n_edges))
        self.bin_low_ = bin_lows(X, self.edge_values_, self.edge_ptr_, codes, _NAN_CODE, lows)
        if self.missing_bin_ != _NAN_CODE:
            for f in np.flatnonzero(has_nan):
                codes[f][codes[f] == _NAN_CODE] = self.missing_bin_
        return self._binned(codes, backend, n_zero=n_zero)

    def _binned(
        self, codes: Any, backend: Backend, X_sparse: Any = None, n_zero: Any = None,
        stored: SparseCodes | None = None,
    ) -> BinnedMatrix:
        """The codes with this mapper's bins and edges, on ``backend``.

        ``X_sparse``: the sparse X the codes are of, in canonical CSC form.
        ``codes`` None (with ``X_sparse``): the stored entries are binned from
        their values (on the host for NumPy, in ``xp`` on CUDA backends) and the
        dense codes are not built.
        ``stored``: the codes of the stored entries of a sparse X when already
        listed (then neither ``X_sparse`` nor ``codes`` is needed).
        ``n_zero``: each feature's number of codes equal to its code of 0.0,
        when already counted (else counted here).
        """
        xp = backend.xp
        edge_ptr_host = self.edge_ptr_
        low = self.__dict__.get("bin_low_")
        if low is None:
            low = edge_lows(self.edge_values_, edge_ptr_host)
        edge_values_host = np.concatenate([self.edge_values_, low])
        edge_values = backend.asarray(edge_values_host)
        edge_ptr = backend.asarray(edge_ptr_host)
        zero_code = zero_codes_ragged(edge_values, edge_ptr, xp)
        if stored is not None:
            p, n = self.n_features_in_, int(stored.row_ptr.shape[0]) - 1
        elif codes is None and backend.name == "numpy":
            stored = sparse_codes_of_values(X_sparse, edge_values_host, edge_ptr_host,
                                            self.missing_bin_, zero_code)
            p, n = self.n_features_in_, X_sparse.shape[0]
        elif codes is None:
            stored = sparse_codes_on_device(X_sparse, backend.asarray(self.thresholds_),
                                            self.missing_bin_, zero_code, backend)
            p, n = self.n_features_in_, X_sparse.shape[0]
        else:
            stored = (None if X_sparse is None
                      else sparse_codes(X_sparse, codes, zero_code, backend))
            p, n = codes.shape
        if stored is not None:
            n_zero = n - xp.diff(stored.col_ptr)
        elif n_zero is None:
            n_zero = xp.empty(p, dtype=xp.int64)
            step = max(1, _COUNT_BLOCK_CELLS // max(n, 1))
            for f0 in range(0, p, step):
                block = codes[f0 : f0 + step] == zero_code[f0 : f0 + step, None]
                n_zero[f0 : f0 + step] = block.sum(axis=1)
        subtracted = xp.where(2 * n_zero >= n, zero_code.astype(xp.int32), xp.int32(-1))
        if stored is None and (
                listed_share(subtracted, n - n_zero, n, xp) <= MOSTLY_ZERO_SHARE):
            # mostly zeros (word presence features in a dense array): listed as the
            # sparse X of these values would be. The CPU kernels read the lists instead
            # of the codes; the CUDA histograms add the listed entries and the other
            # CUDA kernels read the dense codes (one read per code, no lookup)
            stored = sparse_codes_of_dense(codes, zero_code, xp)
            if backend.name == "numpy":
                codes = None
        return BinnedMatrix(
            dense_codes=codes,
            n_bins=self.n_bins_,
            missing_bin=self.missing_bin_,
            edge_values=edge_values,
            edge_ptr=edge_ptr,
            edge_values_host=edge_values_host,
            edge_ptr_host=edge_ptr_host,
            backend=backend,
            subtracted_bin=xp.ascontiguousarray(subtracted),
            sparse_codes=stored,
            listed=xp.ascontiguousarray((n - n_zero).astype(xp.int64)),
            shape=(int(p), int(n)),
            max_dense_bytes=int(self.max_binned_bytes),
        )

    def _fuses(self, X: Any, backend: Backend, sample_weight: Any) -> bool:
        """Whether :meth:`fit_transform` can bin from the copy the edge fit sorts."""
        if backend.name != "numpy" or sample_weight is not None:
            return False
        if not isinstance(X, np.ndarray) or X.ndim != 2 or not X.flags.c_contiguous:
            return False
        if X.dtype not in (np.float32, np.float64):
            return False
        return 0 < X.shape[0] <= int(self.subsample)

    def _check_binned_size(self, n: int, p: int) -> None:
        if n * p > self.max_binned_bytes:
            raise ValueError(
                f"binning X of shape {(n, p)} needs {n * p} bytes (uint8 codes), more than "
                f"max_binned_bytes={self.max_binned_bytes}; reduce the number of rows or "
                "features (e.g. select features), or raise max_binned_bytes"
            )

    def transform(self, X: Any, backend: Backend) -> BinnedMatrix:
        """Bin ``X`` on ``backend`` into a feature-major uint8 matrix.

        A sparse X is binned at its stored entries only (``sparse_codes``), on
        every backend: memory proportional to its nonzeros, and no
        ``max_binned_bytes`` check until something needs the dense codes
        (:attr:`BinnedMatrix.codes`); the CPU kernels read its columns, the CUDA
        growth kernels its rows.

        Parameters
        ----------
        X : array or sparse matrix of shape (n, p), on ``backend``
        backend : Backend

        Returns
        -------
        BinnedMatrix
        """
        n, p = X.shape
        if p != self.n_features_in_:
            raise ValueError(
                f"X has {p} features, but the bin mapper was fitted with "
                f"{self.n_features_in_} features"
            )
        if backend.issparse(X):
            # the stored entries only: the dense codes are built if a fit needs them
            # (BinnedMatrix.codes, which checks max_binned_bytes then)
            return self._binned(None, backend, X_sparse=canonical_csc(X))
        self._check_binned_size(n, p)
        codes = backend.xp.empty((p, n), dtype=backend.xp.uint8)
        if backend.issparse(X):
            X = canonical_csc(X)  # once, for the codes and the stored-entry views
        self._bin_into(X, backend, codes)
        return self._binned(codes, backend, X_sparse=X if backend.issparse(X) else None)

    def _bin_into(self, X: Any, backend: Backend, codes: Any) -> None:
        """``codes`` (p, n) of a dense, or CUDA sparse, ``X`` from the binning kernels,
        which read the +inf padded table (:attr:`thresholds_`, freed on return)."""
        table = backend.asarray(self.thresholds_)
        n_edges = backend.asarray(self.n_value_bins_ - 1)
        if backend.issparse(X):
            kernels.bin_codes_sparse(backend, X, table, n_edges, self.missing_bin_, codes)
        else:
            kernels.bin_codes(backend, X, table, n_edges, self.missing_bin_, codes)


def _fit_edges_sorted(sample: np.ndarray, max_bins: int) -> list[np.ndarray]:
    """Unweighted edges of every column of a dense sample (:func:`_bin_by_blocks`)."""
    out, n_edges = _bin_by_blocks(sample, max_bins)[:2]
    return [out[f, : n_edges[f]].copy() for f in range(n_edges.shape[0])]


def _block_width(n: int, p: int) -> int:
    """Features per block of :func:`_bin_by_blocks`: about ``_BLOCK_BYTES`` of float32
    values, and a multiple of 8 (whole 64-byte lines of a float64 row: with fewer,
    each block would read every line of ``X`` for a part of it); at least 16 while
    that holds at most 4 ``_BLOCK_BYTES``, for the transposition's groups of 16
    (two lines a row); wider blocks leave the cache."""
    width = max(8, _BLOCK_BYTES // max(4 * n, 1))
    if width < 16 and 16 * 4 * n <= 4 * _BLOCK_BYTES:
        width = 16
    return min(width - width % 8, max(p, 1))


def _float32_block(sample: Any, f0: int, out: np.ndarray, lo: np.ndarray, hi: np.ndarray,
                   exact: np.ndarray) -> None:
    """``out[j] = float32(sample[:, f0 + j])``, and in ``lo[j]``, ``hi[j]`` its smallest
    and largest non-NaN values (:func:`gpurpo.tree.binning._bucket_edges.row_ranges`), in
    ``exact[j]`` whether float32 holds each of its values exactly (NaN none)."""
    if sample.dtype in (np.float32, np.float64) and sample.flags.c_contiguous:
        transpose_block_to_float32(sample, f0, out, lo, hi, exact)
        return
    columns = sample[:, f0 : f0 + out.shape[0]].T
    with np.errstate(over="ignore"):  # beyond float32's range: infinite, as intended
        out[...] = columns
    exact[...] = (out == columns).all(axis=1)
    row_ranges(out, lo, hi)


def _sorted_edges(
    rows: np.ndarray, block: np.ndarray, sorted_block: np.ndarray, radix: bool, max_bins: int,
    out: np.ndarray, n_edges: np.ndarray, float32_ok: np.ndarray,
) -> None:
    """Edges of the ``rows`` of a float32 block that bucket selection left, from their
    sorted values (:func:`gpurpo.tree.binning._row_sort.sort_rows`,
    :func:`gpurpo.tree.binning._sorted_edges.edges_from_sorted`); ``out``, ``n_edges`` and
    ``float32_ok`` are the block's."""
    values = np.ascontiguousarray(block[rows])
    ordered = sorted_block[: rows.size]
    _row_sort.sort_rows(values, ordered, radix)
    edges = np.empty((rows.size, out.shape[1]), dtype=np.float64)
    counts = np.zeros(rows.size, dtype=np.int64)
    agree = np.zeros(rows.size, dtype=np.bool_)
    edges_from_sorted(ordered, max_bins, edges, counts, agree)
    out[rows] = edges
    n_edges[rows] = counts
    float32_ok[rows] = agree


def _bin_by_blocks(
    sample: np.ndarray,
    max_bins: int,
    codes: np.ndarray | None = None,
    n_zero: np.ndarray | None = None,
    lows: tuple[np.ndarray, np.ndarray] | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, bool]:
    """Unweighted edges (and codes) of every column, block of features by block.

    Each block of about ``_BLOCK_BYTES`` of values is transposed to float32
    (``a``, feature-major), with each feature's range
    (:func:`gpurpo.tree.binning._sorted_edges.transpose_block_to_float32`). The edges
    of most features come from bucket selection
    (:func:`gpurpo.tree.binning._bucket_edges.bucket_edges_rows`, which reads a
    fraction of the sorted values); the features it leaves (few distinct
    values, crowded buckets, infinite values, short columns) are sorted into ``b``
    (:func:`gpurpo.tree.binning._row_sort.sort_rows`: NumPy's sort or a radix sort,
    whichever is faster here) and take
    :func:`gpurpo.tree.binning._sorted_edges.edges_from_sorted`. Both rules place the
    same edges: midpoints of float32-rounded values, in float64. When
    ``codes`` is given, the block's codes come from the buckets of the
    features done by buckets (their bucket ids, read through a table of codes:
    :func:`gpurpo.tree.binning._bucket_edges._codes_from_buckets`), from ``a`` for the
    others (:func:`gpurpo.tree.binning._code_tables.bin_codes_fitted`, which also
    settles in float64 the values next to a float32 tie edge), NaN coded
    ``_NAN_CODE``, and in ``n_zero`` each feature's count of the code of 0.0;
    with ``lows`` (a float64 (p, max_bins) table and a bool (p,) mask, with
    ``codes``), each feature whose values float32 holds exactly has its bins'
    smallest values in its row of the table, found from the block's float32
    rows and codes while they are in the cache
    (:func:`gpurpo.tree.binning._bin_lows.block_lows`), and True in the mask.
    The two buffers of a block stay in the cache and are reused by the next
    block: no float32 copy of the whole sample is made. With ``codes`` and
    ``lows``, each thread's blocks of columns of 0.0 and 1.0 only (word presence
    features) are first binned in one pass from the bits of the values, until a
    block holds another value
    (:func:`gpurpo.tree.binning._binary_columns.binary_blocks`: the same edges, codes
    and lows, with no float32 copy). Blocks are dealt to
    numba's thread count of Python threads (the kernels and the sort release
    the GIL). Features with many distinct values skip the sort by bucket
    selection (see :mod:`gpurpo.tree.binning._bucket_edges`).

    Codes are always computed by comparing float64 values with the float64
    edges, so the rule ``code <= b iff x <= edges[b]`` is exact whatever the
    edges. Float64 inputs whose values differ only below float32 precision
    may share a bin.

    Returns
    -------
    out : float64 ndarray of shape (p, max(max_bins - 1, 1))
        Feature ``f``'s edges are ``out[f, :n_edges[f]]``.
    n_edges : int64 ndarray of shape (p,)
    has_nan : bool ndarray of shape (p,)
        Which features hold NaN.
    extreme : bool
        Whether a feature reaches float32's largest magnitude (or infinity)
        after rounding to float32: a float64 value beyond float32's range
        becomes float32's largest or infinity, so without such a feature the
        sample holds no float64 value out of range (the check of
        ``check_range_of`` in :meth:`BinMapper.fit_transform`).
    """
    import numba

    n, p = sample.shape
    out = np.empty((p, max(max_bins - 1, 1)), dtype=np.float64)
    n_edges = np.zeros(p, dtype=np.int64)
    float32_ok = np.zeros(p, dtype=np.bool_)
    has_nan = np.zeros(p, dtype=np.bool_)
    extreme = np.zeros(p, dtype=np.bool_)
    width = _block_width(n, p)
    starts = list(range(0, p, width))

    radix = _row_sort.radix_is_faster()  # timed once per process, before any thread starts
    # columns of 0.0 and 1.0 only are coded in one pass (gpurpo.tree.binning._binary_columns)
    # until a block holds another value
    binary = (codes is not None and lows is not None and sample.flags.c_contiguous
              and sample.dtype in (np.float32, np.float64))
    bits, one = one_bits(sample) if binary else (None, None)

    def run(block_starts: list[int]) -> None:
        if binary:
            done = binary_blocks(bits, one, np.asarray(block_starts, dtype=np.int64), width,
                                 codes, n_zero, out, n_edges, float32_ok, has_nan, extreme,
                                 lows[0], lows[1])
            block_starts = block_starts[done:]
            if not block_starts:
                return
        a = np.empty((width, n), dtype=np.float32)
        b = np.empty((width, n), dtype=np.float32)
        lo = np.empty(width, dtype=np.float32)
        hi = np.empty(width, dtype=np.float32)
        status = np.empty(width, dtype=np.int8)
        exact = np.empty(width, dtype=np.bool_)
        coded = np.zeros(width, dtype=np.bool_)
        no_codes = np.empty((0, n), dtype=np.uint8)
        for f0 in block_starts:
            f1 = min(p, f0 + width)
            q = f1 - f0
            a_blk = a[:q]
            _float32_block(sample, f0, a_blk, lo[:q], hi[:q], exact[:q])
            bucket_edges_rows(a_blk, lo[:q], hi[:q], max_bins, out[f0:f1], n_edges[f0:f1],
                              float32_ok[f0:f1], has_nan[f0:f1], extreme[f0:f1], status[:q],
                              _NAN_CODE, no_codes if codes is None else codes[f0:f1], coded[:q])
            left = needs_sort(status[:q])
            if left.size:
                _sorted_edges(left, a_blk, b, radix, max_bins, out[f0:f1], n_edges[f0:f1],
                              float32_ok[f0:f1])
            if codes is not None:
                bin_codes_fitted(a_blk, sample, f0, out[f0:f1], n_edges[f0:f1],
                                 float32_ok[f0:f1], _NAN_CODE, coded[:q], codes[f0:f1],
                                 n_zero[f0:f1])
                if lows is not None:
                    block_lows(a_blk, codes[f0:f1], exact[:q], _NAN_CODE, lows[0][f0:f1])
                    lows[1][f0:f1] = exact[:q]

    threads = min(int(numba.get_num_threads()), len(starts))
    if threads <= 1:
        run(starts)
    else:
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(max_workers=threads) as pool:
            list(pool.map(run, [starts[t::threads] for t in range(threads)]))
    return out, n_edges, has_nan, bool(extreme.any())


def _fit_edges_columns(
    sample: Any, weights: np.ndarray | None, max_bins: int
) -> tuple[np.ndarray, np.ndarray]:
    """Edges of a dense sample, or of a weighted sparse one: feature after feature,
    and their numbers (:meth:`BinMapper._set_edges`).

    A sparse sample of at most 256 MiB as dense float64 is densified; the
    unweighted dense sample is sorted by blocks (:func:`_bin_by_blocks`), the
    weighted one takes :func:`gpurpo.tree.binning._weighted_edges.weighted_column_edges`
    (the edges of :func:`quantile_edges`, in one kernel); the columns of a
    weighted sparse sample take :func:`quantile_edges` one by one.
    """
    p = sample.shape[1]
    if sp.issparse(sample) and sample.shape[0] * p * 8 <= _DENSE_FIT_BYTES:
        sample = sample.toarray()
    if weights is None:
        return _table_edges(*_bin_by_blocks(np.asarray(sample), max_bins)[:2])
    if not sp.issparse(sample):
        return _table_edges(*weighted_column_edges(sample, weights, max_bins))
    edges = _weighted_column_edges(sample, weights, max_bins)
    n_edges = np.array([e.size for e in edges], dtype=np.int64)
    return (np.concatenate(edges) if p else np.empty(0)), n_edges


def _weighted_column_edges(sample: Any, weights: np.ndarray, max_bins: int) -> list[np.ndarray]:
    """Weighted edges of each column (:func:`quantile_edges`)."""
    p = sample.shape[1]
    edges = []
    if sp.issparse(sample):
        csc = canonical_csc(sample)
        n_sub = csc.shape[0]
        for f in range(p):
            data = csc.data[csc.indptr[f] : csc.indptr[f + 1]]
            n_zero = n_sub - data.size
            col = np.concatenate([data, np.zeros(n_zero, dtype=data.dtype)])
            ok = ~np.isnan(col)
            nz = csc.indices[csc.indptr[f] : csc.indptr[f + 1]]
            zero_rows = np.setdiff1d(np.arange(n_sub), nz)
            w_f = weights[np.concatenate([nz, zero_rows])][ok]
            edges.append(quantile_edges(col[ok], max_bins, w_f))
        return edges
    sample = np.asarray(sample)
    for f in range(p):
        col = sample[:, f]
        ok = ~np.isnan(col)
        edges.append(quantile_edges(col[ok], max_bins, weights[ok]))
    return edges


def _fit_edges_sparse(sample: Any, max_bins: int) -> tuple[np.ndarray, np.ndarray]:
    """Unweighted edges of a SciPy sparse sample, from its stored entries: every
    feature's edges one after the other, and their numbers (:meth:`BinMapper._set_edges`).

    Same edges as :func:`quantile_edges` on each densified column
    (:func:`gpurpo.tree.binning._sparse.sparse_column_edges`); duplicate
    entries are summed first, as densifying would. Memory follows the stored
    entries: a column of s of them has at most s + 1 distinct values (its zeros
    one of them), so at most s edges, and gets min(max_bins - 1, s) slots (on a
    Zipf-like 50,000 x 200,000 X, a table of 255 slots per feature would take
    408 MB).
    """
    csc = canonical_csc(sample)
    p = csc.shape[1]
    slots = np.minimum(np.diff(csc.indptr).astype(np.int64), max_bins - 1)
    slot_ptr = np.zeros(p + 1, dtype=np.int64)
    np.cumsum(slots, out=slot_ptr[1:])
    out = np.empty(int(slot_ptr[-1]), dtype=np.float64)
    n_edges = np.zeros(p, dtype=np.int64)
    sparse_column_edges(csc.indptr.astype(np.int64), csc.data, int(csc.shape[0]), int(max_bins),
                        slot_ptr, out, n_edges)
    used = np.arange(out.shape[0]) - np.repeat(slot_ptr[:-1], slots) < np.repeat(n_edges, slots)
    return out[used], n_edges


def _table_edges(out: np.ndarray, n_edges: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The edges of a table whose row ``f`` starts with feature ``f``'s ``n_edges[f]``
    edges, one feature after the other, and ``n_edges`` (:meth:`BinMapper._set_edges`)."""
    width = min(int(n_edges.max()) if n_edges.shape[0] else 0, out.shape[1])
    return out[:, :width][np.arange(width) < n_edges[:, None]], n_edges


def _host_rows(X: Any, rows: np.ndarray | None) -> Any:
    """Rows of X (all when ``rows`` is None) as a NumPy array / SciPy matrix."""
    from gpurpo.backend import is_gpu_array

    if rows is not None:
        if is_gpu_array(X):
            import cupy

            X = X[cupy.asarray(rows)]
        else:
            X = X[rows]
    if is_gpu_array(X):
        X = X.get()
    return X
