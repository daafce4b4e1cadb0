"""Random projections of the output (label) space.

Joly, Geurts & Wehenkel (2014) grow multi-output trees on a low-dimensional
random projection ``Y Phi^T`` of the output matrix ``Y`` (n x d): the split
score of a tree is the reduction of the summed variance of the outputs, and
their Theorem 1 shows that when ``Phi`` (m x d) satisfies the
Johnson--Lindenstrauss lemma the summed variance of ``Y Phi^T`` is within a
factor ``1 +/- eps`` of that of ``Y`` for every subset of samples, with high
probability. This module draws such matrices and applies them.

Every kind is scaled so that ``E ||Phi y||^2 = ||y||^2`` for every ``y``:

``"gaussian"``
    Entries i.i.d. N(0, 1/m).
``"rademacher"``, ``"achlioptas"``, ``"sparse"``
    Entries ``+sqrt(s/m)`` and ``-sqrt(s/m)`` with probability ``1/(2s)``
    each, 0 otherwise (density ``1/s``): ``s = 1`` (dense signs), ``s = 3``
    (Achlioptas 2003) and ``s = sqrt(d)`` (the "very sparse" projections of
    Li, Hastie & Church 2006; any density can be given).
``"subsample"``
    ``m`` rows of the d x d identity drawn uniformly (with or without
    replacement), scaled by ``sqrt(d/m)``: random output subsampling.
``"hadamard"``
    Subsampled randomized Walsh--Hadamard transform (Ailon & Chazelle 2009)
    for any ``d``: pad to ``d' = 2^ceil(log2 d)``, flip signs at random,
    keep ``m`` rows of the orthonormal Hadamard matrix, scale by
    ``sqrt(d'/m)``.

Matrices are drawn on the host from :func:`gpurpo.backend.check_random_state`
(so one seed gives the same projection on every backend) and moved to the
device by :func:`project` (or by the caller with ``backend.asarray``).
Many projections (one per tree of a forest) are drawn with
:func:`make_projections` and applied in one product by :func:`project`.

References
----------
A. Joly, P. Geurts, L. Wehenkel. Random forests with random projections of
the output space for high dimensional multi-label classification. ECML PKDD
2014.

D. Achlioptas. Database-friendly random projections: Johnson--Lindenstrauss
with binary coins. Journal of Computer and System Sciences 66(4), 2003.

P. Li, T. J. Hastie, K. W. Church. Very sparse random projections. KDD 2006.

N. Ailon, B. Chazelle. The fast Johnson--Lindenstrauss transform and
approximate nearest neighbors. SIAM Journal on Computing 39(1), 2009.
"""

from __future__ import annotations

import math
import numbers
from typing import Any

import numpy as np
import scipy.sparse as sp
from sklearn.base import BaseEstimator, ClassNamePrefixFeaturesOutMixin, TransformerMixin
from sklearn.utils.validation import check_is_fitted

from gpurpo._validation import check_array, check_float
from gpurpo.backend import Backend, check_random_state, resolve_backend, spawn_seeds

__all__ = [
    "GATHER_NNZ_PER_ROW",
    "KINDS",
    "N_COMPONENTS_OPTIONS",
    "dense_times_sparse_t",
    "OutputProjection",
    "johnson_lindenstrauss_min_dim",
    "make_projection",
    "make_projections",
    "project",
    "resolve_n_components",
]

KINDS = ("gaussian", "rademacher", "achlioptas", "sparse", "subsample", "hadamard")
N_COMPONENTS_OPTIONS = ("auto", "log", "sqrt")
_SPARSE_KINDS = ("achlioptas", "sparse", "subsample")

# Upper bound on the number of matrix cells handled at once when drawing a
# sparse Rademacher matrix, so that drawing never needs O(m * d) memory.
_DRAW_CHUNK_CELLS = 1 << 22


# --------------------------------------------------------------------------
# Number of components
# --------------------------------------------------------------------------


def _round_half_up(x: float) -> int:
    return int(math.floor(x + 0.5))


def johnson_lindenstrauss_min_dim(n_samples: int, eps: float = 0.1) -> int:
    """Smallest ``m`` of the Johnson--Lindenstrauss lemma.

    ``m >= 4 ln(n) / (eps^2 / 2 - eps^3 / 3)`` (Dasgupta & Gupta's form of the
    lemma, the bound used by Joly et al. 2014, Theorem 1): a random projection
    to ``m`` dimensions preserves all pairwise squared distances among ``n``
    points, hence their summed variance, within ``1 +/- eps`` with high
    probability. The value is truncated to an integer like
    :func:`sklearn.random_projection.johnson_lindenstrauss_min_dim`, and is at
    least 1.

    Parameters
    ----------
    n_samples : int
        Number of points (samples), at least 1.
    eps : float
        Distortion, in (0, 1).

    Returns
    -------
    int
    """
    if isinstance(n_samples, bool) or not isinstance(n_samples, numbers.Integral) or n_samples < 1:
        raise ValueError(f"n_samples must be an int >= 1, got {n_samples!r}")
    if isinstance(eps, bool) or not isinstance(eps, numbers.Real) or not 0.0 < float(eps) < 1.0:
        raise ValueError(f"eps must be a float in (0, 1), got {eps!r}")
    eps = float(eps)
    denominator = eps**2 / 2.0 - eps**3 / 3.0
    return max(1, int(4.0 * math.log(int(n_samples)) / denominator))


def resolve_n_components(
    n_components: int | float | str,
    n_outputs: int,
    n_samples: int | None = None,
    eps: float = 0.1,
) -> int:
    """Turn an ``n_components`` specification into a number of rows ``m``.

    Parameters
    ----------
    n_components : int, float, {"auto", "log", "sqrt"}
        ``int >= 1``: that number (it may exceed ``n_outputs``).
        ``float`` in (0, 1]: that fraction of ``n_outputs``, rounded half up,
        at least 1. ``"log"``: ``round(ln d)``, at least 1. ``"sqrt"``:
        ``round(sqrt d)``, at least 1. ``"auto"``: the Johnson--Lindenstrauss
        bound :func:`johnson_lindenstrauss_min_dim` for ``n_samples`` points
        and distortion ``eps`` (Joly et al. 2014, Theorem 1).
    n_outputs : int
        Number of outputs ``d`` (columns of Y), at least 1.
    n_samples : int, optional
        Number of samples; required for ``"auto"``.
    eps : float
        Distortion for ``"auto"``, in (0, 1).

    Returns
    -------
    int
        The number of components, at least 1.

    Raises
    ------
    ValueError
        Naming the argument and the received value, for anything else.
    """
    if isinstance(n_outputs, bool) or not isinstance(n_outputs, numbers.Integral) or n_outputs < 1:
        raise ValueError(f"n_outputs must be an int >= 1, got {n_outputs!r}")
    d = int(n_outputs)
    if isinstance(n_components, str):
        if n_components == "log":
            return max(1, _round_half_up(math.log(d)))
        if n_components == "sqrt":
            return max(1, _round_half_up(math.sqrt(d)))
        if n_components == "auto":
            if n_samples is None:
                raise ValueError(
                    "n_components='auto' needs n_samples (the Johnson-Lindenstrauss "
                    "bound depends on the number of samples), got n_samples=None"
                )
            return johnson_lindenstrauss_min_dim(n_samples, eps)
        raise ValueError(
            f"n_components must be an int >= 1, a float in (0, 1] or one of "
            f"{N_COMPONENTS_OPTIONS}, got {n_components!r}"
        )
    if isinstance(n_components, bool):
        raise ValueError(f"n_components must be an int >= 1, got the bool {n_components!r}")
    if isinstance(n_components, numbers.Integral):
        if n_components < 1:
            raise ValueError(f"n_components must be >= 1, got {int(n_components)}")
        return int(n_components)
    if isinstance(n_components, numbers.Real):
        frac = float(n_components)
        if not (math.isfinite(frac) and 0.0 < frac <= 1.0):
            raise ValueError(
                "n_components given as a float is a fraction of n_outputs and must be "
                f"in (0, 1]; pass an int for an absolute number; got {n_components!r}"
            )
        return max(1, _round_half_up(frac * d))
    raise ValueError(
        f"n_components must be an int >= 1, a float in (0, 1] or one of "
        f"{N_COMPONENTS_OPTIONS}, got {type(n_components).__name__} {n_components!r}"
    )


# --------------------------------------------------------------------------
# Drawing projection matrices (host side)
# --------------------------------------------------------------------------


def _check_kind(kind: Any) -> str:
    if not isinstance(kind, str) or kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
    return kind


def _check_dtype(dtype: Any) -> np.dtype:
    try:
        dt = np.dtype(dtype)
    except TypeError as exc:
        raise TypeError(f"dtype must be a floating dtype, got {dtype!r}") from exc
    if dt.kind != "f":
        raise TypeError(f"dtype must be a floating dtype (float32 or float64), got {dt}")
    return dt


def _rademacher_s(kind: str, n_outputs: int, density: float | None) -> float:
    """The ``s`` of a Rademacher kind: entries are nonzero with probability 1/s."""
    if kind == "rademacher":
        return 1.0
    if kind == "achlioptas":
        return 3.0
    if density is None:
        return math.sqrt(n_outputs)
    return 1.0 / density


def _check_density(kind: str, density: Any) -> float | None:
    if density is None:
        return None
    if kind != "sparse":
        raise ValueError(
            f"density applies to kind='sparse' only (kind={kind!r} has a fixed "
            f"density); got density={density!r}"
        )
    return check_float(density, "density", low=0.0, high=1.0, low_inclusive=False)


def _draw_sparse_rademacher(
    rng: np.random.Generator, m: int, d: int, s: float, dtype: np.dtype
) -> sp.csr_matrix:
    # Each cell is nonzero independently with probability 1/s: the number of
    # nonzeros of a block of cells is binomial, and given that number their
    # positions are a uniform subset of the block. Values are +-sqrt(s/m).
    density = min(1.0, 1.0 / s)
    value = math.sqrt(s / m)
    rows_per_chunk = max(1, _DRAW_CHUNK_CELLS // d)
    indices_parts = []
    counts = np.zeros(m, dtype=np.int64)
    for start in range(0, m, rows_per_chunk):
        stop = min(m, start + rows_per_chunk)
        cells = (stop - start) * d
        nnz = int(rng.binomial(cells, density))
        flat = np.sort(rng.choice(cells, size=nnz, replace=False))
        rows, cols = np.divmod(flat, d)
        counts[start:stop] = np.bincount(rows, minlength=stop - start)
        indices_parts.append(cols)
    indices = np.concatenate(indices_parts) if indices_parts else np.zeros(0, np.int64)
    signs = rng.integers(0, 2, size=indices.size, dtype=np.int8)
    data = np.where(signs == 1, value, -value).astype(dtype)
    indptr = np.concatenate([[0], np.cumsum(counts)])
    mat = sp.csr_matrix((data, indices, indptr), shape=(m, d))
    mat.has_sorted_indices = True
    return mat


def _draw_hadamard(
    rng: np.random.Generator, m: int, d: int, replace: bool, dtype: np.dtype
) -> np.ndarray:
    padded = 1 << max(0, (d - 1).bit_length())
    if not replace and m > padded:
        raise ValueError(
            f"kind='hadamard' without replacement needs n_components <= {padded} "
            f"(n_outputs={d} padded to a power of two), got n_components={m}; "
            "pass replace=True or a smaller n_components"
        )
    rows = rng.choice(padded, size=m, replace=replace)
    signs = np.where(rng.integers(0, 2, size=d, dtype=np.int8) == 1, 1.0, -1.0)
    # Sylvester Hadamard matrix: H[r, j] = (-1)^popcount(r & j). With the
    # orthonormal H / sqrt(d') and the scale sqrt(d'/m), entries are +-1/sqrt(m).
    masked = rows[:, None].astype(np.int64) & np.arange(d, dtype=np.int64)[None, :]
    parity = np.zeros(masked.shape, dtype=np.int64)
    for bit in range(max(1, padded.bit_length() - 1)):
        parity ^= (masked >> bit) & 1
    hadamard = 1.0 - 2.0 * parity
    return (hadamard * (signs / math.sqrt(m))).astype(dtype)


def make_projection(
    kind: str,
    n_components: int | float | str,
    n_outputs: int,
    random_state: Any = None,
    *,
    density: float | None = None,
    replace: bool = False,
    dtype: Any = np.float64,
    n_samples: int | None = None,
    eps: float = 0.1,
) -> np.ndarray | sp.csr_matrix:
    """Draw one random projection matrix ``Phi`` (m x d) of the output space.

    The matrix is drawn on the HOST from
    :func:`gpurpo.backend.check_random_state` and returned as a NumPy array
    (``"gaussian"``, ``"rademacher"``, ``"hadamard"``) or a SciPy CSR matrix
    (``"achlioptas"``, ``"sparse"``, ``"subsample"``), so that one seed gives
    the same projection on every backend; :func:`project` moves it to the
    device of Y (or move it yourself with ``backend.asarray``).
    Every kind satisfies ``E ||Phi y||^2 = ||y||^2``.

    Parameters
    ----------
    kind : {"gaussian", "rademacher", "achlioptas", "sparse", "subsample", "hadamard"}
        See the module docstring. ``"achlioptas"`` is Achlioptas (2003),
        ``"sparse"`` the very sparse projection of Li et al. (2006),
        ``"hadamard"`` the subsampled randomized Hadamard transform of Ailon &
        Chazelle (2009) extended to any d by zero padding.
    n_components : int, float or {"auto", "log", "sqrt"}
        Number of rows m, see :func:`resolve_n_components`.
    n_outputs : int
        Number of outputs d.
    random_state : None, int, SeedSequence, Generator or RandomState
        Seed.
    density : float in (0, 1], optional
        Density of ``kind="sparse"`` (default ``1/sqrt(d)``); not allowed for
        other kinds.
    replace : bool
        Draw the rows of ``"subsample"`` and ``"hadamard"`` with replacement.
        Without replacement m must not exceed d (``"subsample"``) or d padded
        to a power of two (``"hadamard"``).
    dtype : floating dtype
        dtype of the matrix.
    n_samples, eps
        Used by ``n_components="auto"``.

    Returns
    -------
    ndarray or scipy.sparse.csr_matrix of shape (m, d)
    """
    kind = _check_kind(kind)
    if isinstance(n_outputs, bool) or not isinstance(n_outputs, numbers.Integral) or n_outputs < 1:
        raise ValueError(f"n_outputs must be an int >= 1, got {n_outputs!r}")
    d = int(n_outputs)
    m = resolve_n_components(n_components, d, n_samples=n_samples, eps=eps)
    density = _check_density(kind, density)
    dtype = _check_dtype(dtype)
    if not isinstance(replace, (bool, np.bool_)):
        raise TypeError(f"replace must be a bool, got {type(replace).__name__} {replace!r}")
    rng = check_random_state(random_state)

    if kind == "gaussian":
        return (rng.standard_normal((m, d)) / math.sqrt(m)).astype(dtype)
    if kind == "rademacher":
        signs = rng.integers(0, 2, size=(m, d), dtype=np.int8)
        value = 1.0 / math.sqrt(m)
        return np.where(signs == 1, value, -value).astype(dtype)
    if kind in ("achlioptas", "sparse"):
        return _draw_sparse_rademacher(rng, m, d, _rademacher_s(kind, d, density), dtype)
    if kind == "subsample":
        if not replace and m > d:
            raise ValueError(
                f"kind='subsample' without replacement needs n_components <= n_outputs={d}, "
                f"got n_components={m}; pass replace=True or a smaller n_components"
            )
        cols = rng.choice(d, size=m, replace=bool(replace)).astype(np.int64)
        data = np.full(m, math.sqrt(d / m), dtype=dtype)
        return sp.csr_matrix((data, cols, np.arange(m + 1)), shape=(m, d))
    return _draw_hadamard(rng, m, d, bool(replace), dtype)


def make_projections(
    kind: str,
    n_components: int | float | str,
    n_outputs: int,
    n_projections: int,
    random_state: Any = None,
    *,
    density: float | None = None,
    replace: bool = False,
    dtype: Any = np.float64,
    n_samples: int | None = None,
    eps: float = 0.1,
) -> np.ndarray | sp.csr_matrix:
    """Draw ``T`` independent projections stacked into one (T*m, d) matrix.

    Rows ``t*m`` to ``(t+1)*m`` are exactly ``make_projection(kind, ...,
    random_state=seeds[t])`` with ``seeds = spawn_seeds(random_state, T)``,
    so a forest can give tree ``t`` its own projection (Joly et al. 2014,
    Algorithm 2) and project Y for all trees in one :func:`project` call.
    Drawn on the host like :func:`make_projection`.

    Parameters
    ----------
    kind, n_components, n_outputs, density, replace, dtype, n_samples, eps
        As in :func:`make_projection`.
    n_projections : int
        Number of projections T, at least 1.
    random_state : None, int, SeedSequence, Generator or RandomState
        Seed from which the T seeds are spawned.

    Returns
    -------
    ndarray or scipy.sparse.csr_matrix of shape (T*m, d)
    """
    if (
        isinstance(n_projections, bool)
        or not isinstance(n_projections, numbers.Integral)
        or n_projections < 1
    ):
        raise ValueError(f"n_projections must be an int >= 1, got {n_projections!r}")
    _check_kind(kind)
    seeds = spawn_seeds(random_state, int(n_projections))
    blocks = [
        make_projection(
            kind,
            n_components,
            n_outputs,
            seed,
            density=density,
            replace=replace,
            dtype=dtype,
            n_samples=n_samples,
            eps=eps,
        )
        for seed in seeds
    ]
    if sp.issparse(blocks[0]):
        return sp.vstack(blocks, format="csr")
    return np.vstack(blocks)


# --------------------------------------------------------------------------
# Applying projections
# --------------------------------------------------------------------------


def _shape(a: Any) -> tuple[int, ...]:
    return tuple(getattr(a, "shape", np.shape(a)))


#: Dense Y times sparse components with at most this many nonzeros per row (e.g.
#: output sub-sampling, one per row) gathers the columns of Y it needs instead of
#: multiplying the transposed Y (which the sparse product would copy whole).
GATHER_NNZ_PER_ROW = 4


def dense_times_sparse_t(xp: Any, Y: Any, C: Any, dtype: Any) -> Any:
    """``Y @ C.T`` as a C-ordered ``dtype`` array, for a dense ``Y`` (n, d) and a CSR ``C`` (k, d).

    With at most ``GATHER_NNZ_PER_ROW`` nonzeros per row of ``C`` (output
    sub-sampling has one), the ``nnz`` needed columns of ``Y`` are gathered,
    scaled and summed into their rows; otherwise the sparse product
    ``(C @ Y.T).T`` is used.
    """
    nnz, k = int(C.nnz), C.shape[0]
    if nnz > GATHER_NNZ_PER_ROW * k:
        return xp.ascontiguousarray((C @ Y.T).T, dtype=dtype)
    if nnz == 0:
        return xp.zeros((Y.shape[0], k), dtype=dtype)
    entries = xp.arange(nnz)
    row_of = xp.searchsorted(C.indptr, entries, side="right") - 1
    to_rows = xp.zeros((nnz, k), dtype=dtype)
    to_rows[entries, row_of] = 1
    return xp.ascontiguousarray((Y[:, C.indices] * C.data[None, :]) @ to_rows, dtype=dtype)


def project(Y: Any, components: Any, backend: Backend | None = None) -> Any:
    """Project the outputs: ``Y @ components.T`` as a dense array.

    One product applies every stacked projection (e.g. from
    :func:`make_projections`), giving each tree of a forest its projected
    targets ``Y Phi_t^T`` (Joly et al. 2014, Section 3). Sparse Y (CSR) is
    never densified: with sparse components the product is sparse-sparse and
    only the (n, k) result is made dense; with dense components it is a
    sparse-dense product.

    Parameters
    ----------
    Y : array or sparse matrix of shape (n, d)
        NumPy/CuPy array or SciPy/cupyx sparse matrix.
    components : array or sparse matrix of shape (k, d)
        Projection matrix (host or device); moved to the backend of Y.
    backend : Backend, optional
        Where to compute; by default the backend of Y
        (:func:`gpurpo.backend.resolve_backend`).

    Returns
    -------
    array of shape (n, k)
        Dense, in the namespace of the backend, float32 when Y is float32 and
        float64 otherwise.
    """
    if backend is None:
        backend = resolve_backend(Y)
    if components is None:
        raise ValueError("components is required, got None")
    comp_shape = _shape(components)
    if len(comp_shape) != 2:
        raise ValueError(f"components must be a 2-D matrix, got shape {comp_shape}")
    Y = check_array(Y, "Y", backend, accept_sparse=True)
    if Y.shape[1] != comp_shape[1]:
        raise ValueError(
            f"Y has {Y.shape[1]} columns but components has {comp_shape[1]} "
            f"(shape {comp_shape}); they must match"
        )
    xp = backend.xp
    dtype = xp.float32 if Y.dtype == xp.float32 else xp.float64
    if Y.dtype != dtype:
        Y = Y.astype(dtype)
    C = backend.asarray(components, dtype=dtype)
    if not bool(xp.isfinite(C.data if backend.issparse(C) else C).all()):
        raise ValueError("components contains NaN or infinity")
    if backend.issparse(C):
        C = C.tocsr()
        if backend.issparse(Y):
            return (Y @ C.T.tocsr()).toarray()
        return dense_times_sparse_t(xp, Y, C, dtype)
    if backend.issparse(Y):
        return xp.ascontiguousarray(Y @ C.T)
    return Y @ C.T


# --------------------------------------------------------------------------
# scikit-learn transformer
# --------------------------------------------------------------------------


class OutputProjection(ClassNamePrefixFeaturesOutMixin, TransformerMixin, BaseEstimator):
    """Random projection of an output matrix Y (n x d) to m dimensions.

    A scikit-learn transformer over the label/output matrix: ``fit`` draws a
    projection ``Phi`` (m x d) with :func:`make_projection`, ``transform``
    returns ``Y Phi^T`` (Joly, Geurts & Wehenkel 2014). Y may be dense or CSR,
    NumPy or CuPy; the result is dense, in the namespace of Y.

    Parameters
    ----------
    kind : {"gaussian", "rademacher", "achlioptas", "sparse", "subsample", "hadamard"}
        Projection family (Achlioptas 2003; Li et al. 2006 for ``"sparse"``;
        Ailon & Chazelle 2009 for ``"hadamard"``). Every kind satisfies
        ``E ||Phi y||^2 = ||y||^2``.
    n_components : int, float or {"auto", "log", "sqrt"}
        Number of components, see :func:`resolve_n_components`; ``"auto"``
        is the Johnson--Lindenstrauss bound for the number of samples in fit.
    eps : float
        Distortion for ``n_components="auto"``, in (0, 1).
    density : float, optional
        Density of ``kind="sparse"`` (default ``1/sqrt(d)``).
    replace : bool
        Rows of ``"subsample"``/``"hadamard"`` drawn with replacement.
    random_state : None, int, SeedSequence, Generator or RandomState
        Seed.

    Attributes
    ----------
    components_ : ndarray or scipy.sparse.csr_matrix of shape (m, d)
        The projection, on the host as drawn.
    n_components_ : int
        m.
    n_outputs_ : int
        d.
    n_features_in_ : int
        d (scikit-learn's name for the number of input columns).
    density_ : float
        Fraction of nonzero entries drawn for (density 1 for dense kinds,
        ``1/d`` for ``"subsample"``).
    """

    def __init__(
        self,
        kind: str = "gaussian",
        n_components: int | float | str = "auto",
        eps: float = 0.1,
        density: float | None = None,
        replace: bool = False,
        random_state: Any = None,
    ) -> None:
        self.kind = kind
        self.n_components = n_components
        self.eps = eps
        self.density = density
        self.replace = replace
        self.random_state = random_state

    def __sklearn_tags__(self) -> Any:
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        tags.transformer_tags.preserves_dtype = ["float64", "float32"]
        return tags

    def _validate_Y(self, Y: Any, backend: Backend) -> Any:
        Y = check_array(Y, "Y", backend, accept_sparse=True)
        if Y.shape[1] < 1:
            raise ValueError(
                f"Y has 0 feature(s) (shape={tuple(Y.shape)}) while a minimum of 1 is "
                "required: it needs at least one output column"
            )
        return Y

    def fit(self, Y: Any, y: Any = None) -> OutputProjection:
        """Draw the projection for an output matrix of Y's width.

        Parameters
        ----------
        Y : array or sparse matrix of shape (n, d)
            Output matrix; must be 2-D and finite.
        y : None
            Ignored (pipeline compatibility).

        Returns
        -------
        self
        """
        kind = _check_kind(self.kind)
        Y = self._validate_Y(Y, resolve_backend(Y))
        n, d = Y.shape
        self.components_ = make_projection(
            kind,
            self.n_components,
            d,
            self.random_state,
            density=self.density,
            replace=self.replace,
            n_samples=n,
            eps=self.eps,
        )
        self.n_components_ = int(self.components_.shape[0])
        self.n_outputs_ = int(d)
        self.n_features_in_ = int(d)
        if sp.issparse(self.components_):
            self.density_ = self.components_.nnz / float(self.n_components_ * d)
        else:
            self.density_ = 1.0
        return self

    def transform(self, Y: Any) -> Any:
        """Return ``Y @ components_.T`` (dense, on the backend of Y).

        Parameters
        ----------
        Y : array or sparse matrix of shape (n, d)

        Returns
        -------
        array of shape (n, n_components_)
        """
        check_is_fitted(self, "components_")
        backend = resolve_backend(Y)
        Y = self._validate_Y(Y, backend)
        if Y.shape[1] != self.n_outputs_:
            raise ValueError(
                f"X has {Y.shape[1]} features, but {type(self).__name__} is expecting "
                f"{self.n_outputs_} features as input (Y must have the {self.n_outputs_} "
                "output columns seen in fit)"
            )
        return project(Y, self.components_, backend)

    @property
    def _n_features_out(self) -> int:
        return self.n_components_
