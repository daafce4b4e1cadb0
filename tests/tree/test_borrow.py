"""The non-owning array views of the numba CPU kernels (gpurpo.tree._borrow)."""

from collections import namedtuple

import numpy as np
import pytest
from numba import njit
from numba.core.errors import TypingError

from gpurpo.tree._borrow import borrow, borrow_all


@njit(cache=False)
def _write_through_borrowed(a, value):
    view = borrow(a)
    for i in range(view.shape[0]):
        for j in range(view.shape[1]):
            view[i, j] = value + i * 10 + j
    inner = view[1:, ::2]  # a view of the borrowed view
    inner[0, 0] = -1.0
    return view.shape[0], view.shape[1], view.strides[0], view.strides[1], view.sum()


@njit(cache=False)
def _borrow_scalar(x):
    return borrow(x)


@njit(cache=False)
def _write_through_borrowed_tuple(a, b):
    va, vb = borrow_all((a, b))
    va[0] = 7.0
    vb[1, 2] = 9
    return va.shape[0], vb.shape[0], vb.shape[1], vb.strides[0]


_Record = namedtuple("_Record", ["values", "scale"])


@njit(cache=False)
def _borrow_all_mixed(record):
    view = borrow_all(record)
    view.values[0] = view.scale
    return view.scale, view.values.shape[0]


def test_borrowed_view_shares_data_shape_and_strides():
    base = np.zeros((6, 7))
    target = base[::2, 1:]  # not contiguous
    shape0, shape1, stride0, stride1, total = _write_through_borrowed(target, 100.0)
    assert (shape0, shape1) == target.shape
    assert (stride0, stride1) == target.strides
    expected = 100.0 + np.arange(3)[:, None] * 10 + np.arange(6)[None, :]
    expected[1, 0] = -1.0
    np.testing.assert_array_equal(target, expected)
    assert total == pytest.approx(expected.sum())
    np.testing.assert_array_equal(base[1::2], 0.0)  # rows outside the view untouched
    np.testing.assert_array_equal(base[::2, 0], 0.0)


def test_borrow_rejects_non_arrays():
    with pytest.raises(TypingError):
        _borrow_scalar(1.0)


def test_borrow_all_views_every_array_of_a_tuple():
    a = np.zeros(5)
    b = np.zeros((4, 6), dtype=np.int32)[:, ::2]  # int32, not contiguous
    assert _write_through_borrowed_tuple(a, b) == (5, 4, 3, b.strides[0])
    assert a[0] == 7.0 and a[1:].sum() == 0.0
    assert b[1, 2] == 9 and b.sum() == 9


def test_borrow_all_keeps_a_namedtuple_and_its_scalars():
    values = np.zeros(3)
    assert _borrow_all_mixed(_Record(values, 2.5)) == (2.5, 3)
    np.testing.assert_array_equal(values, [2.5, 0.0, 0.0])


def test_borrow_all_rejects_non_tuples():
    with pytest.raises(TypingError):
        _borrow_all_mixed(np.zeros(3))
