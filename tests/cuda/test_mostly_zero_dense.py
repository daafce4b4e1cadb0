"""A dense X of mostly zeros (word presence in a dense array) on CUDA backends.

The CPU lists such an X's entries instead of its codes. CUDA backends keep the
dense codes, which the kernels that look a sample's code up read (the exact split
of small nodes, subtrees, the level's partition), and list the entries too: the
histograms of large nodes add the listed entries of the samples' rows and derive
each feature's cell of its code of 0.0, as for a sparse X. The lists are those the
CPU makes; the trees are the CPU's.
"""

from __future__ import annotations

import contextlib
import shutil

import numpy as np
import pytest
import scipy.sparse as sp
from test_stored_rows import _text_like

from gpurpo.backend import EMULATED, NUMPY, _registry, count_device_activity
from gpurpo.ensemble import GradientBoostingRegressor, RandomForestRegressor
from gpurpo.tree.binning import BinMapper
from gpurpo.tree.kernels import SparseColumns

pytestmark = pytest.mark.skipif(
    shutil.which("g++") is None, reason="the CUDA emulator needs g++ (C++20) on PATH"
)

_LISTS = ("zero_code", "row_ptr", "row_features", "row_codes", "col_ptr", "col_rows",
          "col_codes")


def _word_presence(seed):
    """A text-like dense X (about 5 % nonzero counts, a NaN and a negative value) and
    outputs of a few of its words."""
    rng = np.random.default_rng(seed)
    _, dense, Y = _text_like(rng)
    dense[3, 5] = np.nan
    dense[10, 7] = -2.0
    return dense, Y


@pytest.mark.parametrize("counting", [False, True], ids=["numpy-arrays", "device-arrays"])
def test_binning_keeps_the_codes_and_lists_the_entries_as_the_cpu(counting):
    dense, _ = _word_presence(7)
    mapper = BinMapper(max_bins=16).fit(dense)
    host = mapper.transform(dense, NUMPY)
    of_csr = mapper.transform(sp.csr_matrix(dense), NUMPY)
    # inside the block the backend's arrays are device arrays: the lists come from xp
    with count_device_activity() if counting else contextlib.nullcontext():
        device = mapper.transform(dense, EMULATED)
    assert host.dense_codes is None and device.dense_codes is not None
    np.testing.assert_array_equal(np.asarray(device.dense_codes), host.codes)
    for name in _LISTS:
        want = getattr(host.sparse_codes, name)
        np.testing.assert_array_equal(np.asarray(getattr(device.sparse_codes, name)), want,
                                      err_msg=name)
        np.testing.assert_array_equal(getattr(of_csr.sparse_codes, name), want, err_msg=name)
    assert device.stored_rows_held and not host.stored_rows_held
    # the split kernels read the dense codes on CUDA backends, the lists on the CPU
    assert device.kernel_sparse_codes is None
    assert host.kernel_sparse_codes is host.sparse_codes


def test_a_dense_x_of_other_values_is_not_listed():
    rng = np.random.default_rng(2)
    X = rng.normal(size=(300, 12))
    X[:, :6] *= rng.random((300, 6)) < 0.05  # half the features mostly zero: 52 % listed
    device = BinMapper(max_bins=16).fit(X).transform(X, EMULATED)
    assert device.sparse_codes is None and not device.stored_rows_held


def _recording(monkeypatch):
    """Which codes the CUDA kernels get: the histograms (dense codes read, or rows whose
    entries are added) and the kernels that look codes up (dense codes, or rows)."""
    seen: dict[str, set] = {"histograms": set(), "lookups": set()}

    def lookups(codes, row_ptr):
        return "dense" if codes.shape[1] > 0 and row_ptr.shape[0] == 0 else "rows"

    def histograms(codes, args, kwargs):
        rows = args[5] if len(args) > 5 else kwargs.get("rows")
        return "histograms", "rows" if codes.shape[1] == 0 and rows is not None else "dense"

    def split_small(codes, args, kwargs):
        sparse = next(a for a in (*args, *kwargs.values()) if isinstance(a, SparseColumns))
        return "lookups", lookups(codes, sparse.sparse_codes.row_ptr)

    def level_split(codes, args, kwargs):
        return "lookups", "dense" if codes.shape[1] > 0 else "rows"

    for name, kind in (("tree_histograms", histograms), ("tree_split_small", split_small),
                       ("tree_grow_subtrees", split_small), ("tree_level_split", level_split)):
        impls = _registry._KERNELS[name]

        def record(backend, codes, *args, _run=impls["cuda"], _kind=kind, **kwargs):
            key, value = _kind(codes, args, kwargs)
            seen[key].add(value)
            return _run(backend, codes, *args, **kwargs)

        monkeypatch.setitem(impls, "cuda", record)
    return seen


@pytest.mark.parametrize("estimator", [
    RandomForestRegressor(n_estimators=3, max_features=0.3, random_state=0,
                          min_samples_leaf=2),
    GradientBoostingRegressor(n_estimators=4, max_leaf_nodes=8, random_state=0),
], ids=["forest", "boosting"])
def test_growth_adds_listed_entries_and_reads_dense_codes_for_lookups(estimator, monkeypatch):
    dense, Y = _word_presence(8)
    want = estimator.set_params(device="cpu").fit(dense, Y).predict(dense)
    seen = _recording(monkeypatch)
    got = estimator.set_params(device="cuda-emulated").fit(dense, Y).predict(dense)
    assert want.std() > 0
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
    assert seen == {"histograms": {"rows"}, "lookups": {"dense"}}, seen
