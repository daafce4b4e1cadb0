"""gpurpo: learning with very many outputs on NumPy (CPU) or CuPy (CUDA).

Random output projections, multi-output histogram trees grown on projected
outputs with leaves labelled in the original output space, random forests,
extra-trees and multi-output gradient boosting, randomized linear algebra on
the label space (randomized SVD/PCA, PLST, Rembrandt, ML-CSSP).

Subpackages are imported lazily: ``gpurpo.projections``, ``gpurpo.linalg``,
``gpurpo.tree``, ``gpurpo.ensemble``, ``gpurpo.label_space``,
``gpurpo.metrics``, ``gpurpo.datasets``.
"""

from __future__ import annotations

import importlib
from typing import Any

from gpurpo.backend import (
    cupy_available,
    get_backend,
    set_backend,
    show_backend,
    use_backend,
)

__version__ = "0.1.0"

_SUBMODULES = (
    "backend",
    "projections",
    "linalg",
    "tree",
    "ensemble",
    "label_space",
    "metrics",
    "datasets",
    "testing",
)

__all__ = [
    "__version__",
    "cupy_available",
    "get_backend",
    "set_backend",
    "show_backend",
    "use_backend",
    *_SUBMODULES,
]


def __getattr__(name: str) -> Any:
    if name in _SUBMODULES:
        return importlib.import_module(f"gpurpo.{name}")
    raise AttributeError(f"module 'gpurpo' has no attribute {name!r}")
