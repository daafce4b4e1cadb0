"""The rows sort of the binning's edge fit (gpurpo.tree.binning._row_sort) against NumPy's sort.

The radix sort must give ``np.sort``'s values, NaN last whatever their sign or
payload, keeping every other value's bits; and the binning must give the same
edges and codes whichever of the two sorts :func:`sort_rows` picks (it picks the
faster one on the machine, so each test forces both).
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpurpo.backend import NUMPY
from gpurpo.tree import BinMapper
from gpurpo.tree.binning import _row_sort
from gpurpo.tree.binning._row_sort import radix_sort_rows, sort_rows


def _radix_sorted(values: np.ndarray) -> np.ndarray:
    values = np.ascontiguousarray(values, dtype=np.float32)
    out = np.empty_like(values)
    scratch = np.empty((2, values.shape[1]), dtype=np.uint32)
    radix_sort_rows(values.view(np.uint32), out.view(np.uint32), scratch)
    return out


def _assert_sorted_like_numpy(got: np.ndarray, values: np.ndarray) -> None:
    """``got`` equals ``np.sort(values, axis=1)`` (NaN last; -0.0 and 0.0 equal) and
    holds, row by row, the very bits of the non-NaN values other than zeros (NumPy's
    AVX-512 sort itself may turn -0.0 into 0.0)."""
    np.testing.assert_array_equal(got, np.sort(values, axis=1))
    zero = np.float32(0.0)
    for row_got, row in zip(got, values):
        kept = ~np.isnan(row)
        assert np.isnan(row_got).sum() == (~kept).sum()
        np.testing.assert_array_equal(np.sort((row_got[: kept.sum()] + zero).view(np.uint32)),
                                      np.sort((row[kept] + zero).view(np.uint32)))


def _special_rows(n: int, rng: np.random.Generator) -> np.ndarray:
    neg_nan = np.copysign(np.float32(np.nan), np.float32(-1.0))
    payload_nan = np.array([0xFF800001, 0x7F800001, 0x7FFFFFFF], dtype=np.uint32).view(np.float32)
    rows = [
        rng.standard_normal(n),
        rng.choice(np.r_[np.float32(np.nan), neg_nan, payload_nan, np.float32(np.inf),
                         np.float32(-np.inf), np.float32(0.0), np.float32(-0.0),
                         np.float32(1e-45), np.float32(-1e-45), np.float32(3.4e38)], n),
        rng.integers(0, 2, n),  # keys that share their two low digits: one pass
        np.full(n, 7.5),  # keys that share every digit: no pass
        rng.integers(-3, 3, n) * 2.0**-130,  # subnormals
        rng.standard_cauchy(n),
    ]
    return np.array(rows, dtype=np.float32)


@pytest.mark.parametrize("n", [0, 1, 2, 3, 17, 2048, 12_920])
def test_radix_sort_gives_numpys_sorted_rows(n):
    values = _special_rows(n, np.random.default_rng(n))
    _assert_sorted_like_numpy(_radix_sorted(values), values)


@settings(max_examples=200, deadline=None)
@given(bits=st.lists(st.integers(0, 2**32 - 1), min_size=1, max_size=200))
def test_radix_sort_of_fuzzed_float32_bit_patterns(bits):
    values = np.array(bits, dtype=np.uint32).view(np.float32)[None, :]
    _assert_sorted_like_numpy(_radix_sorted(values), values)


@pytest.mark.parametrize("radix", [True, False])
def test_sort_rows_sorts_by_either_way(radix, monkeypatch):
    monkeypatch.setattr(_row_sort, "radix_is_faster", lambda: radix)
    values = _special_rows(500, np.random.default_rng(1))
    out = np.empty_like(values)
    sort_rows(values, out)
    _assert_sorted_like_numpy(out, values)


def test_radix_is_faster_is_a_bool_decided_once():
    first = _row_sort.radix_is_faster()
    assert isinstance(first, bool)
    assert _row_sort.radix_is_faster() is first


def _columns(rng: np.random.Generator, n: int) -> np.ndarray:
    return np.column_stack([
        rng.normal(size=n),
        np.where(rng.random(n) < 0.2, np.nan, rng.standard_cauchy(n)),
        rng.choice([-0.0, 0.0, 1.0, -2.5], n),  # zeros of both signs
        rng.integers(0, 600, n) * 0.25,  # more distinct values than bins, with ties
        rng.normal(size=n) * 1e-42,  # float32 subnormals
        np.full(n, 3.0),
    ])


@pytest.mark.parametrize("max_bins", [255, 16])
def test_binning_edges_and_codes_do_not_depend_on_the_sort(max_bins, monkeypatch):
    """The radix sort gives the edges NumPy's sort gives (fused fit_transform and
    plain fit), and the codes "#edges < x" (searchsorted), NaN in the missing bin."""
    X = _columns(np.random.default_rng(max_bins), 3000)
    fits = {}
    for radix in (True, False):
        monkeypatch.setattr(_row_sort, "radix_is_faster", lambda: radix)
        fused = BinMapper(max_bins=max_bins)
        fits[radix] = (fused, fused.fit_transform(X, NUMPY), BinMapper(max_bins=max_bins).fit(X))
    (fused, binned, plain), (reference, _, _) = fits[True], fits[False]
    assert np.all(reference.n_value_bins_[:4] > 2)
    for mapper in (fused, plain):
        np.testing.assert_array_equal(mapper.thresholds_, reference.thresholds_)
        np.testing.assert_array_equal(mapper.n_value_bins_, reference.n_value_bins_)
    for f in range(X.shape[1]):
        edges = reference.thresholds_[f, : reference.n_value_bins_[f] - 1]
        col = X[:, f]
        codes = np.where(np.isnan(col), reference.missing_bin_,
                         np.searchsorted(edges, col, side="left"))
        np.testing.assert_array_equal(binned.codes[f], codes)
