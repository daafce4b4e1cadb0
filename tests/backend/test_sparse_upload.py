"""The dtypes in which a SciPy sparse matrix goes to the GPU.

cupyx.scipy.sparse matrices hold bool, float32, float64 and complex data only,
and raise ValueError for others; word counts and label indicators often come as
integer CSR (CountVectorizer, MultiLabelBinarizer), so the CuPy backend casts
those on the host first.
"""

from __future__ import annotations

import numpy as np
import pytest

from gpurpo.backend._backend import CUPYX_SPARSE_DTYPES, device_sparse_dtype


@pytest.mark.parametrize("dtype, want", [
    (np.int64, np.float64), (np.int32, np.float64), (np.int8, np.float64),
    (np.uint16, np.float64), (np.float16, np.float32), (np.float32, np.float32),
    (np.float64, np.float64), (np.bool_, np.bool_), (np.complex64, np.complex64),
])
def test_dtypes_cupyx_holds_are_kept_and_others_cast(dtype, want):
    got = device_sparse_dtype(dtype)
    assert got == np.dtype(want)
    assert got.char in CUPYX_SPARSE_DTYPES
    # every value of the input is a value of the output
    info = np.iinfo(dtype) if np.issubdtype(dtype, np.integer) else None
    if info is not None and info.bits <= 32:
        assert np.array([info.min, info.max], dtype=dtype).astype(got).tolist() == [info.min,
                                                                                     info.max]


def test_a_requested_dtype_wins():
    assert device_sparse_dtype(np.int64, np.float32) == np.dtype(np.float32)
