"""Each value bin's smallest fitted value (the raw scale of the Extra-Trees draw)."""

import numpy as np
import scipy.sparse as sp

from gpurpo.backend import NUMPY
from gpurpo.tree.binning import BinMapper
from gpurpo.tree.binning._bin_lows import bin_lows


def _reference(X, mapper):
    """NumPy: the smallest value of each feature's values coded into each bin."""
    out = []
    for f, edges in enumerate(mapper.edges_):
        col = X[:, f][~np.isnan(X[:, f])]
        codes = np.searchsorted(edges, col, side="left")
        out.append([col[codes == b].min() for b in range(edges.size + 1)])
    return np.concatenate(out)


def test_bin_lows_are_each_bins_smallest_value_on_every_fit_path():
    rng = np.random.default_rng(3)
    # counts of a few values (one bin each) and a continuous feature of more values than bins
    X = np.column_stack([np.round(np.exp(rng.normal(3, 1, 600)) / 5) * 5,
                         rng.normal(size=600), rng.integers(0, 3, 600).astype(float)])
    X[::9, 1] = np.nan
    X[rng.random(600) < 0.7, 2] = 0.0
    fused = BinMapper(max_bins=32)
    fused.fit_transform(X, NUMPY)
    want = _reference(X, fused)
    np.testing.assert_array_equal(fused.bin_low_, want)
    np.testing.assert_array_equal(BinMapper(max_bins=32).fit(X).bin_low_, want)
    # float32 values: every feature's lows from its float32 row, the first one with a
    # value float32 rounds (-0.0 and 0.0 of another: the first in row order stays)
    X32 = X.astype(np.float32)
    X32[:5, 2] = [0.0, -0.0, 1.0, -0.0, 2.0]
    for sample in (X32, np.column_stack([X32[:, :1] + 1e-9, X32[:, 1:].astype(np.float64)])):
        mapper = BinMapper(max_bins=32)
        mapper.fit_transform(sample, NUMPY)
        np.testing.assert_array_equal(mapper.bin_low_, _reference(sample, mapper))
        searched = BinMapper(max_bins=32).fit(sample).bin_low_
        np.testing.assert_array_equal(np.signbit(mapper.bin_low_), np.signbit(searched))
    dense_no_nan = np.nan_to_num(X[:, [0, 2]])
    sparse = BinMapper(max_bins=32).fit(sp.csr_matrix(dense_no_nan))
    np.testing.assert_array_equal(sparse.bin_low_, _reference(dense_no_nan, sparse))
    weighted = BinMapper(max_bins=32).fit(X, sample_weight=np.ones(600))
    np.testing.assert_array_equal(
        weighted.bin_low_, bin_lows(X, weighted.edge_values_, weighted.edge_ptr_))


def test_binned_edge_table_holds_the_lows_after_the_edges():
    X = np.array([[0.0], [5.0], [5.0], [40.0], [900.0]])
    mapper = BinMapper()
    binned = mapper.fit_transform(X, NUMPY)
    np.testing.assert_array_equal(binned.edge_values_host, [2.5, 22.5, 470.0, 0.0, 5.0, 40.0, 900.0])
