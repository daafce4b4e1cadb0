"""Stacking binned blocks of rows: the binned matrix of the stacked rows, field for field."""

import numpy as np
import pytest
import scipy.sparse as sp

from gpurpo.backend import Backend
from gpurpo.tree.binning import BinMapper, stack_binned

FIELDS = ("zero_code", "row_ptr", "row_features", "row_codes", "col_ptr", "col_rows", "col_codes")


def _data(kind, rng):
    X = rng.normal(size=(300, 7))
    X[rng.random(X.shape) < (0.97 if kind == "mostly zeros" else 0.6)] = 0.0
    if kind == "mixed blocks":
        X[100:][rng.random((200, 7)) < 0.99] = 0.0  # the last block alone is mostly zeros
    X[5, 2] = np.nan
    return sp.csr_matrix(X) if kind == "csr" else X


@pytest.mark.parametrize("kind", ["dense", "csr", "mostly zeros", "mixed blocks"])
def test_stacked_blocks_are_the_binned_stacked_rows(kind):
    X = _data(kind, np.random.default_rng(0))
    backend = Backend("numpy")
    mapper = BinMapper(max_bins=16).fit(X)
    whole = mapper.transform(X, backend)
    parts = [mapper.transform(X[a:b], backend) for a, b in ((0, 100), (100, 101), (101, 300))]
    if kind == "mixed blocks":
        assert [part.sparse_codes is None for part in parts] == [True, False, False]
    stacked = stack_binned(mapper, parts, backend)
    assert stacked.shape == whole.shape and stacked.n_bins == whole.n_bins
    for name in ("subtracted_bin", "listed"):
        np.testing.assert_array_equal(getattr(stacked, name), getattr(whole, name))
    np.testing.assert_array_equal(stacked.codes, whole.codes)
    listed = kind in ("csr", "mostly zeros")
    assert (stacked.sparse_codes is None) == (whole.sparse_codes is None) == (not listed)
    if listed:
        for name in FIELDS:
            got, want = getattr(stacked.sparse_codes, name), getattr(whole.sparse_codes, name)
            assert got.dtype == want.dtype
            np.testing.assert_array_equal(got, want)


def test_stacking_nothing_is_refused():
    backend = Backend("numpy")
    mapper = BinMapper().fit(np.arange(12.0).reshape(6, 2))
    with pytest.raises(ValueError, match="at least one"):
        stack_binned(mapper, [], backend)
