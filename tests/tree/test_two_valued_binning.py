"""Binning of two-valued columns (binary features) without sorting them.

A column whose values are two distinct numbers (NaN aside) gets their
midpoint as its one edge and its codes in one pass
(:func:`gpurpo.tree.binning._bucket_edges.bucket_edges_rows`); the edges must be
those of the quantile rule on the float32-rounded values and the codes
``#{edges < x}`` in float64, as for every other column.
"""

from __future__ import annotations

import numpy as np
import pytest

from gpurpo.backend import NUMPY
from gpurpo.tree.binning import BinMapper
from gpurpo.tree.binning._quantile_rule import quantile_edges


def _two_valued_columns(rng, n):
    """Columns of two values: 0/1 at several densities, -1/0, signed zeros with 1,
    adjacent float32 numbers, float64 values that share their float32 rounding, NaN,
    a constant and a three-valued column (sorted as before), and a continuous one."""
    tiny = np.float32(1.5)
    columns = [
        np.arange(n) % 25 == 3,
        rng.random(n) < 0.5,
        rng.random(n) < 0.97,
        -(rng.random(n) < 0.2).astype(float),
        np.where(rng.random(n) < 0.3, 1.0, np.where(rng.random(n) < 0.5, -0.0, 0.0)),
        np.where(rng.random(n) < 0.4, tiny, np.nextafter(tiny, np.float32(np.inf))),
        np.where(rng.random(n) < 0.4, 1.0, 2.0) + 1e-12 * rng.random(n),
        np.where(rng.random(n) < 0.1, np.nan, (rng.random(n) < 0.1) * 3.0),
        np.full(n, 2.0),
        rng.integers(0, 3, n).astype(float),
        rng.normal(size=n),
    ]
    # a long run of one value before the other appears: past the first values read
    late = np.zeros(n)
    late[n // 2:: 7] = 5.0
    columns.append(late)
    return np.ascontiguousarray(np.stack(columns, axis=1).astype(np.float64))


@pytest.mark.parametrize("n", [40, 3000])
def test_two_valued_columns_bin_by_the_quantile_rule(n):
    rng = np.random.default_rng(n)
    X = _two_valued_columns(rng, n)
    mapper = BinMapper(max_bins=16)
    assert mapper._fuses(X, NUMPY, None)
    binned = mapper.fit_transform(X, NUMPY)
    edges = mapper.edges_
    for f in range(X.shape[1]):
        x = X[:, f]
        ok = ~np.isnan(x)
        want = quantile_edges(x[ok].astype(np.float32), 16)
        np.testing.assert_array_equal(edges[f], want, err_msg=f"feature {f}")
        codes = np.where(ok, np.searchsorted(edges[f], x, side="left"), mapper.missing_bin_)
        np.testing.assert_array_equal(binned.codes[f], codes, err_msg=f"feature {f}")
    assert [e.size for e in edges[:8]] == [1] * 8
    # fit alone (the edges without the codes) and transform agree with fit_transform
    reference = BinMapper(max_bins=16).fit(X)
    np.testing.assert_array_equal(reference.edge_values_, mapper.edge_values_)
    np.testing.assert_array_equal(reference.transform(X, NUMPY).codes, binned.codes)
    # the subtracted bins: the code of 0.0 where at least half the codes are it
    zero = np.array([np.searchsorted(e, 0.0, side="left") for e in edges])
    share = (binned.codes == zero[:, None]).mean(axis=1)
    np.testing.assert_array_equal(np.asarray(binned.subtracted_bin),
                                  np.where(share >= 0.5, zero, -1))
