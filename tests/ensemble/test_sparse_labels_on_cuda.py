"""Sparse 0/1 labels on CUDA backends, whose sparse module (cupyx) holds no integers.

cupyx.scipy.sparse matrices hold bool, float32, float64 and complex data only
and raise ValueError for integers. The emulated backend's sparse module is SciPy,
which takes them; here it is made as strict as cupyx, so that a forest classifier
fitted on sparse labels on a CUDA backend predicts its int64 CSR labels without
building an integer matrix there.
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from gpurpo.backend import Backend
from gpurpo.ensemble import ExtraTreesClassifier, RandomForestClassifier


class _CupyxLike:
    """SciPy's sparse module with cupyx's rule on the dtypes of its matrices."""

    def __getattr__(self, name):
        return getattr(sp, name)

    @staticmethod
    def csr_matrix(arg, *args, **kwargs):
        matrix = sp.csr_matrix(arg, *args, **kwargs)
        if matrix.dtype.char not in "?fdFD":
            raise ValueError("Only bool, float32, float64, complex64 and complex128 are "
                             "supported")
        return matrix


@pytest.fixture
def strict_sparse(monkeypatch):
    original = Backend.sparse

    def sparse(self):
        return _CupyxLike() if self.name == "emulated" else original.fget(self)

    monkeypatch.setattr(Backend, "sparse", property(sparse))


@pytest.mark.parametrize("forest", [RandomForestClassifier, ExtraTreesClassifier])
def test_sparse_labels_predicted_on_a_cuda_backend(forest, strict_sparse):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 6))
    Y = sp.csr_matrix((X[:, :4] + 0.3 * rng.normal(size=(300, 4)) > 0.5).astype(np.int64))
    params = dict(n_estimators=20, random_state=0, bootstrap=True,
                  oob_score=lambda y, p: float((y != p).nnz))
    want = forest(**params, device="cpu").fit(X, Y)
    got = forest(**params, device="cuda-emulated").fit(X, Y)
    labels = got.predict(X)
    assert sp.issparse(labels) and labels.dtype == np.int64
    assert (labels != want.predict(X)).nnz == 0 and labels.nnz > 0
    # the out-of-bag callable gets the same int64 labels
    assert got.oob_score_ == want.oob_score_
