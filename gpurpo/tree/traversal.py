"""Wrappers of the tree traversal kernels: leaves reached, neighbouring values, leaf sums.

The contracts of ``tree_apply``, ``tree_apply_csr``, ``tree_neighbour_values``,
``tree_neighbour_values_csr``, ``tree_sum_leaves_dense`` and
``tree_sum_leaves_csr`` are documented, and the kernels registered, in
:mod:`gpurpo.tree.kernels`; these wrappers type the arguments, allocate the
outputs and dispatch. A sparse X (SciPy or cupyx CSR) is read in its canonical
CSR form, never densified.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from gpurpo.backend import Backend
from gpurpo.tree.binning import _sparse
from gpurpo.tree.kernels import _c

__all__ = ["apply_trees", "neighbour_values", "sum_leaves_dense", "sum_leaves_csr"]


def apply_trees(
    backend: Backend,
    X: Any,
    feature: Any,
    threshold: Any,
    missing_left: Any,
    left: Any,
    right: Any,
    roots: Any,
) -> Any:
    """Leaf node reached by every (row, tree): int32 (n, T).

    A sparse ``X`` (SciPy or cupyx) goes through ``tree_apply_csr`` without
    being densified. Every ``feature`` is below ``X.shape[1]``, sparse or dense.
    """
    xp = backend.xp
    sparse, rows = _raw_rows(backend, X)
    out = xp.empty((X.shape[0], int(roots.shape[0])), dtype=xp.int32)
    if X.shape[0]:
        columns = (int(X.shape[1]),) if sparse else ()
        backend.kernel("tree_apply_csr" if sparse else "tree_apply")(
            *rows, *columns,
            *_traversal(backend, feature, threshold, missing_left, left, right, roots), out
        )
    return out


def _raw_rows(backend: Backend, X: Any) -> tuple[bool, tuple]:
    """``X`` as the traversal kernels read it: ``(True, (indptr int64, indices int32, data
    float64))`` of its canonical CSR form, or ``(False, (X,))`` C-ordered in float32 or
    float64 (other dtypes become float64)."""
    xp = backend.xp
    if backend.issparse(X):
        X = _sparse.canonical_csr(X)
        return True, (_c(backend, X.indptr, xp.int64), _c(backend, X.indices, xp.int32),
                      _c(backend, X.data, xp.float64))
    X = xp.ascontiguousarray(X)
    if X.dtype not in (xp.float32, xp.float64):
        X = X.astype(xp.float64)
    return False, (X,)


def neighbour_values(
    backend: Backend,
    X: Any,
    weights: Any,
    feature: Any,
    threshold: Any,
    missing_left: Any,
    left: Any,
    right: Any,
    roots: Any,
) -> tuple[Any, Any]:
    """Largest value sent left and smallest sent right at every node: float64 (N,) each.

    ``weights`` (T, n) float32 marks each tree's training rows (nonzero);
    nodes no row reaches on a side keep ``-inf`` / ``+inf``. A sparse ``X``
    goes through ``tree_neighbour_values_csr`` without being densified.
    """
    xp = backend.xp
    n_nodes = int(feature.shape[0])
    low = xp.full(n_nodes, -np.inf, dtype=xp.float64)
    high = xp.full(n_nodes, np.inf, dtype=xp.float64)
    nodes = _traversal(backend, feature, threshold, missing_left, left, right, roots)
    sparse, rows = _raw_rows(backend, X)
    if X.shape[0]:
        backend.kernel("tree_neighbour_values_csr" if sparse else "tree_neighbour_values")(
            *rows, _c(backend, weights, xp.float32), *nodes, low, high
        )
    return low, high


def _traversal(backend: Backend, feature: Any, threshold: Any, missing_left: Any, left: Any,
               right: Any, roots: Any) -> tuple:
    """The packed node arguments of ``tree_apply`` and ``tree_apply_csr``, typed."""
    xp = backend.xp
    return (_c(backend, feature, xp.int32), _c(backend, threshold, xp.float64),
            _c(backend, missing_left, xp.uint8), _c(backend, left, xp.int32),
            _c(backend, right, xp.int32), _c(backend, roots, xp.int32))


def sum_leaves_dense(backend: Backend, leaf_rows: Any, values: Any, out: Any) -> Any:
    """``out[i] += sum_t values[leaf_rows[i, t]]`` (dense leaf values)."""
    xp = backend.xp
    backend.kernel("tree_sum_leaves_dense")(
        _c(backend, leaf_rows, xp.int32), _c(backend, values, xp.float64), out
    )
    return out


def sum_leaves_csr(backend: Backend, leaf_rows: Any, values: Any, out: Any) -> Any:
    """``out[i] += sum_t values[leaf_rows[i, t]]`` (CSR leaf values).

    The numba kernel reads SciPy's int32 (or int64) index arrays as they are:
    converting them to int64 copied every tree's leaf entries at each call, one
    call per block of rows (a 4-tree forest of 23 million leaf entries:
    ``predict_top_k`` of 2,000 rows 1.4 s, three quarters of it the copies).
    The CUDA kernel takes int64.
    """
    xp = backend.xp
    if backend.uses_cuda_kernels:
        indptr = _c(backend, values.indptr, xp.int64)
        indices = _c(backend, values.indices, xp.int64)
    else:
        indptr = _index_array(backend, values.indptr)
        indices = _index_array(backend, values.indices)
    backend.kernel("tree_sum_leaves_csr")(
        _c(backend, leaf_rows, xp.int32), indptr, indices, _c(backend, values.data, xp.float64),
        out,
    )
    return out


def _index_array(backend: Backend, a: Any) -> Any:
    """``a`` itself when a contiguous int32 or int64 array, else a contiguous int64 copy."""
    xp = backend.xp
    if a.dtype in (xp.int32, xp.int64):
        return xp.ascontiguousarray(a)
    return _c(backend, a, xp.int64)
