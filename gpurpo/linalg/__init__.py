"""Randomized linear algebra on the label space.

All functions accept dense arrays (NumPy or CuPy), sparse matrices (SciPy or
cupyx) and implicit operators (any object with ``shape``, ``matmat(B)`` =
``A @ B`` and ``rmatmat(B)`` = ``A.T @ B``, e.g.
:class:`scipy.sparse.linalg.LinearOperator`). They compute where the data live
and return results in the input's namespace; float32 stays float32. Random
test matrices are drawn on the host from ``random_state`` and moved to the
device, so a seed gives the same numbers on every backend.

* :func:`randomized_range_finder`, :func:`randomized_svd` - Halko, Martinsson
  & Tropp (2011), Algorithms 4.4 and 5.1;
* :func:`randomized_pca` (implicit centring), :func:`plst` (Tai & Lin 2012);
* :func:`leverage_scores`, :func:`cssp_select` (Bi & Kwok 2013, Algorithm 1;
  Boutsidis, Mahoney & Drineas 2009);
* :func:`rembrandt` (Mineiro & Karampatziakis, Algorithm 2) and the ridge
  solvers it uses, :func:`ridge_solve`;
* :func:`as_operator`, :class:`MatrixOperator` - the operator layer.
"""

from gpurpo.linalg.cssp import cssp_select
from gpurpo.linalg.operators import MatrixOperator, as_operator, centered
from gpurpo.linalg.pca import PCAResult, plst, randomized_pca
from gpurpo.linalg.qr import orthonormalize, qr_factor
from gpurpo.linalg.randomized import leverage_scores, randomized_range_finder, randomized_svd
from gpurpo.linalg.rembrandt import rembrandt
from gpurpo.linalg.ridge import RidgeSolver, ridge_solve

__all__ = [
    "MatrixOperator",
    "PCAResult",
    "RidgeSolver",
    "as_operator",
    "centered",
    "cssp_select",
    "leverage_scores",
    "orthonormalize",
    "plst",
    "qr_factor",
    "randomized_pca",
    "randomized_range_finder",
    "randomized_svd",
    "rembrandt",
    "ridge_solve",
]
