"""Stacking binned blocks of rows: the binned matrix of the stacked rows, field for field."""

import numpy as np
import pytest
import scipy.sparse as sp

from gpurpo.backend import Backend
from gpurpo.tree.binning import BinMapper, stack_binned

FIELDS = ("zero_code", "row_ptr", "row_features", "row_codes", "col_ptr", "col_rows", "col_codes")


@pytest.mark.parametrize("sparse", [False, True], ids=["dense", "csr"])
def test_stacked_blocks_are_the_binned_stacked_rows(sparse):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 7))
    X[rng.random(X.shape) < 0.6] = 0.0
    X[5, 2] = np.nan
    X = sp.csr_matrix(X) if sparse else X
    backend = Backend("numpy")
    mapper = BinMapper(max_bins=16).fit(X)
    whole = mapper.transform(X, backend)
    parts = [mapper.transform(X[a:b], backend) for a, b in ((0, 100), (100, 101), (101, 300))]
    stacked = stack_binned(mapper, parts, backend)
    assert stacked.shape == whole.shape and stacked.n_bins == whole.n_bins
    for name in ("subtracted_bin", "listed"):
        np.testing.assert_array_equal(getattr(stacked, name), getattr(whole, name))
    np.testing.assert_array_equal(stacked.codes, whole.codes)
    assert (stacked.sparse_codes is None) == (whole.sparse_codes is None) == (not sparse)
    if sparse:
        for name in FIELDS:
            got, want = getattr(stacked.sparse_codes, name), getattr(whole.sparse_codes, name)
            assert got.dtype == want.dtype
            np.testing.assert_array_equal(got, want)


def test_stacking_nothing_or_mixed_parts_is_refused():
    backend = Backend("numpy")
    X = np.arange(12.0).reshape(6, 2)
    mapper = BinMapper().fit(X)
    with pytest.raises(ValueError, match="at least one"):
        stack_binned(mapper, [], backend)
    parts = [mapper.transform(X, backend), mapper.transform(sp.csr_matrix(X), backend)]
    with pytest.raises(ValueError, match="all sparse"):
        stack_binned(mapper, parts, backend)
