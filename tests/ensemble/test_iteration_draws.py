"""Boosting iterations' random draws made ahead in blocks (:mod:`gpurpo.ensemble.boosting.iteration_draws`).

References: the same generator drawn iteration by iteration (subsample rows, then
the projection, then the root seed), and the product ``G Phi^T`` computed with
NumPy on the dense projection.
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from gpurpo.backend import EMULATED, NUMPY, count_device_activity
from gpurpo.ensemble.boosting import iteration_draws
from gpurpo.ensemble.boosting.iteration_draws import BLOCK, IterationDraws
from gpurpo.ensemble.boosting.iteration_trees import (
    GatheredProjection,
    draw_projection,
    project_gradient,
    squared_projection,
)
from gpurpo.tree.grower import draw_root_seeds

D, N = 30, 50

CASES = [
    ("relabel_rpo", "subsample", None),
    ("relabel_rpo", "gaussian", 35),
    ("relabel_rpo", "achlioptas", None),
    ("relabel_rpo", "sparse", 20),
    ("relabel_rpo", "hadamard", None),
    ("rpo", "gaussian", None),
    ("rpo", "subsample", 40),
    ("multi_output", None, 25),
    ("relabel_rpo", None, None),
]


def _reference(strategy, kind, n_in, seed, iterations):
    """Iteration by iteration: (rows, projection, root seed)."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(iterations):
        rows = None if n_in is None else np.sort(rng.choice(N, size=n_in, replace=False))
        projection = draw_projection(strategy, kind, 6, D, rng)
        out.append((rows, projection, draw_root_seeds(rng, 1)[0]))
    return out


def _dense(projection):
    return projection.toarray() if sp.issparse(projection) else np.asarray(projection)


@pytest.mark.parametrize("strategy, kind, n_in", CASES)
@pytest.mark.parametrize("backend", [NUMPY, EMULATED], ids=["numpy", "emulated"])
def test_blocks_draw_what_iterations_drawn_one_by_one_draw(strategy, kind, n_in, backend):
    iterations = 2 * BLOCK + 5  # three blocks, the last one short
    draws = IterationDraws(backend, strategy, kind, 6, D, N, n_in)
    rng = np.random.default_rng(11)
    got = [draws.next(rng, iterations - m) for m in range(iterations)]
    expected = _reference(strategy, kind, n_in, 11, iterations)
    G = np.random.default_rng(5).standard_normal((N, D)).astype(np.float32)
    for draw, (rows, projection, seed) in zip(got, expected):
        assert backend.to_host(draw.root_seed).tolist() == [seed]
        if rows is None:
            assert draw.rows is None
        else:
            np.testing.assert_array_equal(backend.to_host(draw.rows), rows)
        if projection is None:
            assert draw.projection is None and draw.device_projection is None
            continue
        np.testing.assert_array_equal(_dense(draw.projection), _dense(projection))
        for on_device, phi in ((draw.device_projection, _dense(projection)),
                               (squared_projection(draw.device_projection),
                                _dense(projection) ** 2)):
            product = backend.to_host(project_gradient(backend, backend.asarray(G), on_device))
            assert product.dtype == np.float32 and product.shape == (N, phi.shape[0])
            np.testing.assert_allclose(product, G.astype(np.float64) @ phi.T, rtol=1e-5,
                                       atol=1e-5)


def test_the_generator_ends_where_drawing_one_by_one_leaves_it():
    draws = IterationDraws(NUMPY, "relabel_rpo", "gaussian", 6, D, N, 20)
    rng = np.random.default_rng(3)
    for m in range(BLOCK + 3):
        draws.next(rng, BLOCK + 3 - m)
    reference = np.random.default_rng(3)
    _ = [(np.sort(reference.choice(N, size=20, replace=False)),
          draw_projection("relabel_rpo", "gaussian", 6, D, reference),
          draw_root_seeds(reference, 1)) for _ in range(BLOCK + 3)]
    assert rng.integers(1 << 62) == reference.integers(1 << 62)


@pytest.mark.parametrize("kind, form", [("gaussian", "dense"), ("subsample", "gathered"),
                                        ("achlioptas", "host")])
def test_one_copy_to_the_device_per_block_and_none_per_iteration(kind, form):
    draws = IterationDraws(EMULATED, "relabel_rpo", kind, 6, D, N, 30)
    rng = np.random.default_rng(0)
    with count_device_activity() as first:
        draw = draws.next(rng, BLOCK + 1)
    with count_device_activity() as rest:
        for m in range(1, BLOCK):
            draws.next(rng, BLOCK + 1 - m)
    assert first.h2d == 1 and rest.h2d == 0 and rest.launches == 0
    if form == "dense":
        assert not sp.issparse(draw.device_projection)
        assert not isinstance(draw.device_projection, GatheredProjection)
    elif form == "gathered":
        assert isinstance(draw.device_projection, GatheredProjection)
    else:
        # more than four nonzeros per row: the host matrix, copied when used
        assert sp.issparse(draw.device_projection)


def test_blocks_of_dense_projections_fit_the_byte_budget(monkeypatch):
    monkeypatch.setattr(iteration_draws, "BLOCK_BYTES", 3 * 4 * 6 * D)
    draws = IterationDraws(NUMPY, "relabel_rpo", "gaussian", 6, D, N, None)
    assert draws._block_size(100) == 3
    assert draws._block_size(2) == 2
    monkeypatch.setattr(iteration_draws, "BLOCK_BYTES", 1)
    assert draws._block_size(100) == 1
