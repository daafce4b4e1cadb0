"""Leaf values in the ORIGINAL output space.

Joly, Geurts & Wehenkel (2014), section 3.1: a tree grown on projected
outputs ``Y Phi^T`` is labelled with the mean of the original outputs ``y``
of the training samples that reach each leaf (for 0/1 labels, the vector of
label frequencies). With weights ``w`` the value of leaf ``l`` is

    v_l = sum_{i in l} w_i y_i / sum_{i in l} w_i.

Dense ``Y``: per-leaf sums by the ``tree_accumulate_leaves_dense`` kernel,
stored dense float64 (L, d). Sparse ``Y`` (CSR): by default the values are
stored sparse, ``diag(1/W) A^T diag(w) Y`` with ``A`` the (n x L) sample-leaf
indicator, so memory grows with the labels present in each leaf, not with
``L * d`` (d = 100,000 labels fit); ``storage="dense"`` uses the CSR kernel.
A dense ``Y`` of few nonzeros (dense 0/1 labels) is labelled through a CSR copy
(:func:`relabelling_outputs`) and its leaves are stored by their own density:
sparse, unless most of their values are nonzero.

On the CPU these are numba kernels that visit the samples in increasing
order. On a CUDA backend the values come from the batch kernels of
:mod:`gpurpo.tree.batch_leaves` (one tree): the same sums bit for bit, with
no atomics, so a GPU fit gives the CPU's leaf values (and its ties).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.sparse as sp

from gpurpo.backend import Backend, bincount, to_host
from gpurpo.tree import kernels
from gpurpo.tree._dense_csr import dense_to_csr
from gpurpo.tree._sparse_leaves import leaf_values_csr, stack_csr_arrays
from gpurpo.tree.batch_leaves import (
    inverse_leaf_weights,
    require_index_room,
    stacked_leaf_values_csr,
    stacked_leaf_values_dense,
)

__all__ = ["LeafValues", "leaf_values", "relabelling_outputs", "stack_leaf_values", "SPARSE_OUTPUT_DENSITY"]

#: A dense ``Y`` with at most this fraction of nonzeros labels the leaves through a CSR
#: copy: the leaves of deep trees hold a few samples each, so their means are about as
#: sparse as ``Y``'s rows (a few labels of a multi-label row), whatever ``Y``'s container.
SPARSE_OUTPUT_DENSITY = 1 / 3
#: Sparse leaf values denser than this are stored dense: a CSR entry costs 12 bytes
#: (value and column), a dense one 8.
DENSE_LEAF_DENSITY = 2 / 3


@dataclass
class LeafValues:
    """Values of the L leaves of a tree: dense float64 (L, d) or sparse CSR (L, d)."""

    values: Any

    @property
    def is_sparse(self) -> bool:
        return not hasattr(self.values, "ndim") or _is_sparse(self.values)

    @property
    def shape(self) -> tuple[int, int]:
        return tuple(int(s) for s in self.values.shape)  # type: ignore[return-value]

    def to(self, backend: Backend) -> LeafValues:
        """The same values on ``backend`` (no copy when already there)."""
        return LeafValues(backend.asarray(self.values))

    def to_host(self) -> LeafValues:
        """The same values on the host.

        Returns
        -------
        LeafValues
            With a NumPy array or SciPy CSR matrix (not copied when already
            on the host).
        """
        return LeafValues(to_host(self.values))


def _is_sparse(a: Any) -> bool:
    import scipy.sparse as sp

    if sp.issparse(a):
        return True
    module = type(a).__module__ or ""
    return module.startswith("cupyx")


def leaf_values(
    Y: Any,
    leaf_of_sample: Any,
    weights: Any,
    n_leaves: int,
    backend: Backend,
    storage: str = "auto",
) -> LeafValues:
    """Weighted mean of the original outputs of the samples in each leaf.

    Parameters
    ----------
    Y : array (n, d) or CSR matrix, on ``backend``
        Original outputs.
    leaf_of_sample : int32 array (n,)
        Leaf of each training sample (-1: not in the tree).
    weights : array (n,) or None
        Sample weights (None: ones).
    n_leaves : int
    backend : Backend
    storage : {"auto", "dense", "sparse", "by_density"}
        ``"auto"``: sparse when Y is sparse. ``"by_density"``: sparse, then
        dense when more than ``DENSE_LEAF_DENSITY`` of the values are
        nonzero (the leaves' own density decides, for a ``Y`` made sparse
        by :func:`relabelling_outputs`).

    Returns
    -------
    LeafValues
    """
    xp = backend.xp
    if storage not in ("auto", "dense", "sparse", "by_density"):
        raise ValueError(f"storage must be 'auto', 'dense', 'sparse' or 'by_density', got {storage!r}")
    if storage == "by_density":
        values = leaf_values(Y, leaf_of_sample, weights, n_leaves, backend, "sparse")
        size = int(values.values.shape[0]) * int(values.values.shape[1])
        if int(values.values.nnz) > DENSE_LEAF_DENSITY * size:
            return LeafValues(values.values.toarray())
        return values
    if backend.uses_cuda_kernels:
        return _leaf_values_in_cpu_order(Y, leaf_of_sample, weights, n_leaves, backend, storage)
    n = Y.shape[0]
    leaf = xp.asarray(leaf_of_sample, dtype=xp.int32)
    w = xp.ones(n, dtype=xp.float64) if weights is None else xp.asarray(weights, dtype=xp.float64)
    inside = leaf >= 0
    w = xp.where(inside, w, 0.0)
    w_leaf = bincount(xp, xp.where(inside, leaf, 0), int(n_leaves), weights=w)
    inv = inverse_leaf_weights(xp, w_leaf)
    sparse_y = backend.issparse(Y)
    sparse_out = storage == "sparse" or (storage == "auto" and sparse_y)
    if sparse_out:
        Yc = (Y if sparse_y else sp.csr_matrix(Y)).tocsr()
        # the weighted sums first, then each leaf's division: the dense kernels' order,
        # so that equal label frequencies stay exactly equal (ties in predict)
        indptr, indices, data = leaf_values_csr(
            leaf, w, inv, Yc.indptr, Yc.indices, Yc.data, int(n_leaves), int(Y.shape[1]),
        )
        return LeafValues(sp.csr_matrix((data, indices, indptr), shape=(int(n_leaves), Y.shape[1])))
    if sparse_y:
        Yc = Y.tocsr()
        sums = kernels.accumulate_leaves_csr(backend, leaf, w, Yc, n_leaves)
    else:
        sums = kernels.accumulate_leaves_dense(backend, leaf, w, Y, n_leaves)
    return LeafValues(sums * inv[:, None])


def _leaf_values_in_cpu_order(Y: Any, leaf_of_sample: Any, weights: Any, n_leaves: int,
                              backend: Backend, storage: str) -> LeafValues:
    """:func:`leaf_values` on a CUDA backend through the batch kernels with one tree
    (:mod:`gpurpo.tree.batch_leaves`): the CPU's sums, bit for bit, without atomics."""
    xp = backend.xp
    leaf = xp.asarray(leaf_of_sample, dtype=xp.int32)[None]
    w = None if weights is None else xp.asarray(weights, dtype=xp.float64)[None]
    sparse_y = backend.issparse(Y)
    sparse_out = storage == "sparse" or (storage == "auto" and sparse_y)
    if sparse_out or sparse_y:
        Ys = Y.tocsr() if sparse_y else backend.sparse.csr_matrix(Y)
        values, _ = stacked_leaf_values_csr(Ys, leaf, w, [int(n_leaves)], backend)
        return LeafValues(values if sparse_out else values.toarray())
    values, _ = stacked_leaf_values_dense(Y, leaf, w, [int(n_leaves)], backend)
    return LeafValues(values)


def relabelling_outputs(Y: Any, backend: Backend) -> tuple[Any, str]:
    """The outputs that label the leaves, and the ``storage`` of :func:`leaf_values` for them.

    A dense ``Y`` with at most ``SPARSE_OUTPUT_DENSITY`` nonzeros (dense 0/1
    labels, say) becomes a CSR copy, made once for all trees, labelled with
    ``"by_density"``: the leaf sums cost its nonzeros instead of ``n x d``,
    and the leaves are stored sparse unless they turn out dense. Other
    outputs are returned as they are, with ``"auto"``.
    """
    if backend.issparse(Y) or Y.size == 0:
        return Y, "auto"
    if backend.name == "numpy" and isinstance(Y, np.ndarray) and Y.ndim == 2 and (
            Y.dtype.kind in "fiub"):
        # counted and copied in two passes over Y (see gpurpo.tree._dense_csr)
        copy = dense_to_csr(Y, SPARSE_OUTPUT_DENSITY)
        return (Y, "auto") if copy is None else (copy, "by_density")
    nonzero = int(backend.xp.count_nonzero(Y))
    if nonzero > SPARSE_OUTPUT_DENSITY * Y.size:
        return Y, "auto"
    return backend.sparse.csr_matrix(Y), "by_density"


def stack_leaf_values(parts: list[LeafValues], backend: Backend) -> tuple[Any, np.ndarray]:
    """Stack the leaf values of several trees; return (values, row offsets).

    Tree ``t``'s leaf ``l`` is row ``offsets[t] + l`` of the result (dense
    float64 array, or CSR when any part is sparse).

    Parameters
    ----------
    parts : list of LeafValues
        The leaf values of each tree, all with the same d; moved to
        ``backend``.
    backend : Backend

    Returns
    -------
    values : float64 array or CSR matrix (sum of L_t, d), on ``backend``
        The stacked values.
    offsets : int64 ndarray (T,)
        Host row offset of each tree's first leaf.
    """
    xp = backend.xp
    sizes = np.array([p.shape[0] for p in parts], dtype=np.int64)
    offsets = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64)
    arrays = [p.to(backend).values for p in parts]
    if any(p.is_sparse for p in parts):
        mats = [a.tocsr() if _is_sparse(a) else backend.sparse.csr_matrix(a) for a in arrays]
        if backend.name == "numpy":
            shape = (int(sizes.sum()), int(mats[0].shape[1]))
            return sp.csr_matrix(stack_csr_arrays(mats), shape=shape), offsets
        stacked = backend.sparse.vstack(mats, format="csr")
        require_index_room(stacked, sum(int(m.nnz) for m in mats), "the stacked leaf values")
        return stacked, offsets
    return xp.concatenate(arrays, axis=0), offsets
