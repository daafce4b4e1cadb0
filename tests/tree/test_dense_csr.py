"""The two-pass CSR copy of dense outputs equals SciPy's ``csr_matrix``."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from gpurpo.backend import NUMPY
from gpurpo.tree._dense_csr import dense_to_csr
from gpurpo.tree.leaves import SPARSE_OUTPUT_DENSITY, relabelling_outputs


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.int64, np.uint8, np.bool_])
def test_dense_to_csr_equals_scipy(dtype):
    rng = np.random.default_rng(3)
    Y = ((rng.random((200, 37)) < 0.08) * rng.normal(scale=4.0, size=(200, 37))).astype(dtype)
    Y[5] = 0  # an empty row
    Y = Y[:, ::-1]  # not contiguous
    got = dense_to_csr(Y, 0.5)
    want = sp.csr_matrix(Y)
    assert got.dtype == want.dtype and got.shape == want.shape and got.has_canonical_format
    np.testing.assert_array_equal(got.indptr, want.indptr)
    np.testing.assert_array_equal(got.indices, want.indices)
    np.testing.assert_array_equal(got.data, want.data)


def test_dense_to_csr_declines_dense_arrays_and_checks_the_shape():
    Y = np.zeros((10, 10))
    Y[:, :4] = 1.0
    assert dense_to_csr(Y, 0.5) is not None and dense_to_csr(Y, 0.39) is None
    with pytest.raises(ValueError, match="2-D"):
        dense_to_csr(np.zeros(4), 0.5)


def test_relabelling_outputs_copies_mostly_zero_labels_once():
    rng = np.random.default_rng(4)
    Y = (rng.random((300, 40)) < 0.1).astype(np.float64)
    copy, storage = relabelling_outputs(Y, NUMPY)
    assert storage == "by_density" and sp.issparse(copy)
    np.testing.assert_array_equal(copy.toarray(), Y)
    Y[:, : int(40 * SPARSE_OUTPUT_DENSITY) + 2] = 1.0
    same, storage = relabelling_outputs(Y, NUMPY)
    assert storage == "auto" and same is Y
