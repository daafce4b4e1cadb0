"""Boosting's elementwise CPU kernels run on one thread below ``SERIAL_ELEMENTS`` entries.

Their launchers take the serial twin of the compiled kernel for small arrays (a
parallel region per call costs more than it saves there) and the parallel kernel
above; both give the same bits.
"""

from __future__ import annotations

import numpy as np
import pytest

from gpurpo import backend as B
from gpurpo.backend import NUMPY
from gpurpo.ensemble.boosting import logistic_kernels, round_kernels


def _spy(monkeypatch, module):
    chosen = []
    original = B.cpu_helper

    def spy(fn, **kwargs):
        chosen.append(kwargs.get("small", False))
        return original(fn, **kwargs)

    monkeypatch.setattr(module, "cpu_helper", spy)
    return chosen


@pytest.mark.parametrize("name", ["boost_logistic_line", "boost_add_leaf_values"])
def test_small_arrays_take_the_serial_twin_with_the_same_result(monkeypatch, name):
    module = logistic_kernels if name == "boost_logistic_line" else round_kernels
    chosen = _spy(monkeypatch, module)
    rng = np.random.default_rng(0)
    n, d = 300, 7
    Y = (rng.random((n, d)) < 0.3).astype(np.float64)
    F = rng.normal(scale=20.0, size=(n, d))
    values = rng.normal(size=(4, d))
    leaf = (np.arange(n) % 4).astype(np.int32)
    scale = np.linspace(0.1, 1.0, d)
    results = []
    for limit in (B.SERIAL_ELEMENTS, 0):
        monkeypatch.setattr(module, "SERIAL_ELEMENTS", limit)
        if name == "boost_logistic_line":
            positive = np.empty((n, d), dtype=np.uint8)
            E = np.empty((n, d), dtype=np.float64)
            NUMPY.kernel(name)(Y, F, positive, E, 30.0)
            results.append((positive, E))
        else:
            out = F.copy()
            NUMPY.kernel(name)(out, values, leaf, scale)
            results.append((out,))
    assert chosen == [True, False]
    for a, b in zip(*results):
        np.testing.assert_array_equal(a, b)
    # the definitions of the contracts
    if name == "boost_logistic_line":
        np.testing.assert_array_equal(results[0][0], Y > 0)
        np.testing.assert_allclose(results[0][1], np.exp(-np.clip(F, -30.0, 30.0)), rtol=1e-15)
    else:
        np.testing.assert_allclose(results[0][0], F + values[leaf] * scale, rtol=1e-15)
