"""The grown trees of a forest fit and everything they share, as one record.

A forest's fitted model is its trees packed for prediction
(:mod:`gpurpo.ensemble.forest.tree_chunks`) together with what the trees
share and what a warm start needs to grow more of them
(:mod:`gpurpo.ensemble.forest.warm_start`): the bin edges, the projection
plan, every tree's seeds, the generator state the seeds were drawn from and
how each tree drew its rows. :class:`FittedTrees` gathers them so that a fit
made elsewhere -- the distributed forests of :mod:`gpurpo.dask`, which grow
ranges of trees on Dask workers -- hands them to the single-machine estimator
in one call (:meth:`gpurpo.ensemble.forest.base.BaseForest.set_fitted_forest`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from gpurpo.ensemble.forest.projection_plan import ProjectionPlan
from gpurpo.ensemble.forest.tree_chunks import TreeChunk
from gpurpo.ensemble.forest.warm_start import Sampling
from gpurpo.tree.binning import BinMapper

__all__ = ["FittedTrees"]


@dataclass
class FittedTrees:
    """The trees of one forest fit, in tree order, and what they share.

    Attributes
    ----------
    chunks : list of TreeChunk
        The grown trees packed for prediction, in tree order.
    plan : ProjectionPlan
        The output space of every tree.
    seeds : int64 array (n_trees, 2)
        Every tree's (bootstrap, projection) seeds.
    samplings : list of Sampling
        How the trees drew their rows, in tree order, covering every tree.
    bin_mapper : BinMapper
        The fitted bin edges of every tree.
    n_outputs : int
        d, the number of original outputs (columns of the encoded ``y``).
    batch_size : int
        The largest number of trees grown together.
    backend_name : str
        The backend the trees were grown on (``Backend.name``).
    seed_state : dict
        ``bit_generator.state`` of the generator right before the trees'
        seeds were drawn (as ``(n_trees, 3)`` int64 in ``[0, 2**63 - 1)``:
        bootstrap, projection and root seed per tree); a warm start draws
        from it again (:func:`gpurpo.ensemble.forest.warm_start.generator_at`).
    """

    chunks: list[TreeChunk]
    plan: ProjectionPlan
    seeds: np.ndarray
    samplings: list[Sampling]
    bin_mapper: BinMapper
    n_outputs: int
    batch_size: int
    backend_name: str
    seed_state: dict[str, Any]
