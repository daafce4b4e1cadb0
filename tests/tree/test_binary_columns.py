"""Binning of columns of 0.0 and 1.0 in one pass (:mod:`gpurpo.tree.binning._binary_columns`).

``fit_transform`` codes such columns straight from their bits until a block of
columns holds another value; its edges, codes, bin lows and zero counts must be
those of fitting the edges alone and coding with :meth:`BinMapper.transform`
(the general rule, which never takes that path).
"""

from __future__ import annotations

import numba
import numpy as np
import pytest

from gpurpo.backend import NUMPY
from gpurpo.tree.binning import BinMapper, _mapper

N = 300
P = 59


def _binary(rng, dtype=np.float64):
    """0/1 columns at several densities, an all-zero and an all-one column."""
    X = (rng.random((N, P)) < rng.uniform(0.01, 0.6, P)).astype(dtype)
    X[:, 5] = 0.0
    X[:, 21] = 1.0
    return X


def _with_value(rng, column, row, value):
    X = _binary(rng)
    X[row, column] = value
    return X


CASES = {
    "binary": lambda rng: _binary(rng),
    "binary-float32": lambda rng: _binary(rng, np.float32),
    "half-late": lambda rng: _with_value(rng, 40, N - 1, 0.5),
    "negative-zero": lambda rng: _with_value(rng, 0, 7, -0.0),
    "nan": lambda rng: _with_value(rng, 18, 3, np.nan),
    "two": lambda rng: _with_value(rng, 50, 100, 2.0),
    "continuous": lambda rng: np.column_stack([_binary(rng)[:, :30], rng.normal(size=(N, P - 30))]),
}

# blocks done by the one-pass rule, with one and with two threads
BLOCKS_DONE = {"binary": (4, 4), "binary-float32": (4, 4), "half-late": (2, 3),
               "negative-zero": (0, 2), "nan": (1, 2), "two": (3, 3), "continuous": (1, 1)}


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("case", sorted(CASES))
def test_binary_columns_bin_as_the_general_rule(case, threads, monkeypatch):
    # blocks of 16 columns (as at ~16,000 rows), so that P spans several of them, the
    # last of 11 (a group of 8 and single columns)
    monkeypatch.setattr(_mapper, "_BLOCK_BYTES", 8 * 1024)
    assert _mapper._block_width(N, P) == 16
    done = []
    original = _mapper.binary_blocks

    def counted(*args):
        done.append(original(*args))
        return done[-1]

    monkeypatch.setattr(_mapper, "binary_blocks", counted)
    X = np.ascontiguousarray(CASES[case](np.random.default_rng(len(case))))
    previous = numba.get_num_threads()
    threads = min(threads, numba.config.NUMBA_NUM_THREADS)
    numba.set_num_threads(threads)
    try:
        mapper = BinMapper(max_bins=32)
        assert mapper._fuses(X, NUMPY, None)
        binned = mapper.fit_transform(X, NUMPY)
    finally:
        numba.set_num_threads(previous)
    reference = BinMapper(max_bins=32).fit(X)
    want = reference.transform(X, NUMPY)
    np.testing.assert_array_equal(mapper.n_value_bins_, reference.n_value_bins_)
    np.testing.assert_array_equal(mapper.edge_values_, reference.edge_values_)
    np.testing.assert_array_equal(mapper.bin_low_, reference.bin_low_)
    # signed zeros kept apart: -0.0 is a value of its own for the one-pass rule
    assert np.signbit(mapper.bin_low_).tolist() == np.signbit(reference.bin_low_).tolist()
    np.testing.assert_array_equal(binned.codes, want.codes)
    np.testing.assert_array_equal(binned.subtracted_bin, want.subtracted_bin)
    np.testing.assert_array_equal(binned.listed, want.listed)
    if case.startswith("binary"):
        # codes x != 0, but for the column of 1.0 alone (one bin)
        expected = (X.T != 0).astype(np.uint8)
        expected[21] = 0
        np.testing.assert_array_equal(binned.codes, expected)
        assert mapper.n_value_bins_[5] == mapper.n_value_bins_[21] == 1
    # the blocks of 0/1 columns before each thread's first block holding another value
    # took the one-pass rule (blocks of columns 0, 16, 32, 48; two threads take
    # 0 and 32, and 16 and 48)
    assert sum(done) == BLOCKS_DONE[case][threads - 1]
