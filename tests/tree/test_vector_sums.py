"""A node's totals summed in SIMD lanes (:func:`gpurpo.tree._numba._vector_sums.node_totals8`).

Each lane must make the additions of a plain sequential float64 sum over the
node's positions in order (the scalar chains of the CUDA twin), so the
reference is a Python loop over the same rows, compared bit for bit.
"""

from __future__ import annotations

import numpy as np
import pytest
from numba import njit

from gpurpo.tree._numba._vector_sums import node_totals8


@njit(cache=True)
def _totals(rows, d0, ns, w, wy, y, S, LS):
    return node_totals8(rows, d0, ns, w, wy, y, S, LS)


def _reference(rows, d0, ns, w, wy, y):
    W = 0.0
    S = [0.0] * 8
    LS = [0.0] * 8
    for a in range(d0, d0 + ns):
        r = int(rows[a])
        W += float(w[r])
        for c in range(8):
            S[c] += float(wy[r, c])
            LS[c] += float(wy[r, c]) * float(y[r, c])
    return W, np.array(S), np.array(LS)


@pytest.mark.parametrize("m", [1, 5, 8])
@pytest.mark.parametrize("ns", [0, 1, 2, 7, 300])
def test_totals_match_a_sequential_sum(m, ns):
    rng = np.random.default_rng(10 * m + ns)
    n = 500
    w = rng.random(n) * 3.0
    y = np.zeros((n, 8), dtype=np.float32)
    y[:, :m] = (rng.standard_normal((n, m)) * 10.0 ** rng.integers(-6, 6, (n, m))).astype(
        np.float32)
    wy = np.zeros((n, 8))
    wy[:, :m] = w[:, None] * y[:, :m]
    rows = rng.permutation(n).astype(np.int32)
    d0 = 13
    S = np.full(8, np.nan)
    LS = np.full(8, np.nan)
    W = _totals(rows, d0, ns, w, wy, y, S, LS)
    W_ref, S_ref, LS_ref = _reference(rows, d0, ns, w, wy, y)
    assert W == W_ref
    np.testing.assert_array_equal(S.view(np.int64), S_ref.view(np.int64))
    np.testing.assert_array_equal(LS.view(np.int64), LS_ref.view(np.int64))
    assert not np.any(S[m:]) and not np.any(LS[m:])
