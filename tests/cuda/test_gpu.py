"""The real CUDA path (CuPy), run with ``pytest -m gpu`` on a machine with a GPU.

Skipped, with the reason, where CuPy cannot run a kernel. Checks:

* every CUDA tree kernel on the device against the numba kernel (the same
  inputs as the emulator tests), including the tiled and global-atomics
  histogram variants, the histogram split scores (bitwise) and the scores with
  every node's best slot in one launch;
* CPU/GPU parity of projections, randomized SVD, CSSP, trees (the same tree:
  no ties in the data), forests and boosting (the same accuracy), multi-label
  logistic boosting (both leaf steps), the label-space models (every
  reducer, dense and sparse labels; outputs stay on the GPU) and the metrics;
* a model fitted on the GPU, pickled, and used for prediction in a process
  that sees no GPU (``CUDA_VISIBLE_DEVICES=""``);
* CuPy inputs give CuPy outputs; top-k predictions on the GPU equal the CPU's;
* a forest warm-started on the GPU is the forest of one fit there;
* the explicit device-to-host transfers of a tree fit grow with the depth of
  the tree, not with its number of nodes; the device grower copies one array to
  the host per level and nothing to the device.
"""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
import textwrap
from pathlib import Path
from unittest import mock

import numpy as np
import pytest
import scipy.sparse as sp

import gpurpo.backend as gb
from gpurpo.backend import NUMPY, cupy_available

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(
        not cupy_available(),
        reason=f"needs CuPy and a working CUDA device: {gb._cupy._cupy_status()[1]}",
    ),
]

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def cp():
    import cupy

    return cupy


@pytest.fixture(scope="module")
def gpu():
    return gb.CUPY


def _host(a):
    return a.get() if hasattr(a, "get") and not isinstance(a, np.ndarray) else np.asarray(a)


# --------------------------------------------------------------------------
# tree kernels on the device
# --------------------------------------------------------------------------


def test_histogram_variants_on_device_match_numba(cp, gpu):
    from _split_records import histogram_records
    from test_tree_cuda_kernels import _batch

    from gpurpo.tree import _kernels_cuda as kcuda
    from gpurpo.tree import kernels

    rng = np.random.default_rng(1)
    batch = _batch(rng, n=5000, sizes=(0, 5, 40, 3000, 3, 1500))
    n_bins, k, m = 17, batch[3].shape[1], batch[-1].shape[2]
    for channels in (m + 1, m + 2):
        ref = kernels.build_histograms(NUMPY, *histogram_records(*batch), n_bins, channels)
        for kwargs in ({}, {"shared_mem_bytes": 2 * (4 * n_bins * channels + 4)},
                       {"shared_mem_bytes": 4 * n_bins * 2 + 4}, {"shared_mem_bytes": 4 * n_bins},
                       {"samples_per_block": 64}):
            out = cp.zeros((len(batch[2]), k, n_bins, channels), dtype=cp.float32)
            kcuda.histograms(gpu, *histogram_records(*[cp.asarray(a) for a in batch]), out,
                             **kwargs)
            got = out.get()
            np.testing.assert_array_equal(got[..., 0], ref[..., 0], err_msg=str(kwargs))
            np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-4, err_msg=str(kwargs))


def test_stored_row_histograms_on_device_equal_the_dense_codes(cp, gpu):
    from _sparse_codes import code_rows
    from _split_records import histogram_records
    from test_tree_cuda_kernels import _batch, _make_sparse_like

    from gpurpo.tree import _kernels_cuda as kcuda

    rng = np.random.default_rng(2)
    codes, *rest = _batch(rng, n=5000, sizes=(0, 5, 40, 3000, 3, 1500))
    n_bins, k, m = 17, rest[2].shape[1], rest[-1].shape[2]
    zero_code = _make_sparse_like(rng, codes, 0.9, n_bins).astype(np.uint8)
    stored = code_rows(codes, zero_code)
    rows = tuple(cp.asarray(a) for a in (stored.row_ptr, stored.row_features, stored.row_codes,
                                         zero_code))
    device = [cp.asarray(a) for a in rest]
    for kwargs in ({}, {"samples_per_block": 64}, {"shared_mem_bytes": 8 * n_bins}):
        outs = [cp.zeros((len(rest[1]), k, n_bins, m + 2), dtype=cp.float32) for _ in range(2)]
        kcuda.histograms(gpu, *histogram_records(cp.asarray(codes), *device), outs[0], **kwargs)
        kcuda.histograms(gpu, *histogram_records(cp.empty((codes.shape[0], 0), cp.uint8),
                                                 *device), outs[1], rows, **kwargs)
        np.testing.assert_array_equal(outs[1].get(), outs[0].get(), err_msg=str(kwargs))


def test_large_copies_come_back_through_pinned_memory(cp, gpu):
    a = cp.arange(1 << 18, dtype=cp.float64)  # 2 MiB
    host = gpu.to_host(a, pinned=True)
    np.testing.assert_array_equal(host, np.arange(1 << 18, dtype=np.float64))
    attributes = cp.cuda.runtime.pointerGetAttributes(host.ctypes.data)
    assert attributes.type == cp.cuda.runtime.memoryTypeHost
    small = gpu.to_host(cp.arange(10), pinned=True)  # below the limit: pageable
    np.testing.assert_array_equal(small, np.arange(10))


def test_split_small_on_device_matches_numba(cp, gpu):
    from _split_records import split_records
    from test_tree_cuda_kernels import SIZES, _split_problem

    from gpurpo.tree import kernels

    for msl, random_split, k, integer in [(1, False, 7, False), (3, False, 3, True),
                                          (2, True, 7, False)]:
        rng = np.random.default_rng(msl + 10 * k)
        problem = _split_problem(rng, SIZES, integer=integer)
        args = (k, msl, random_split, 11, 1e-5)
        cpu = kernels.split_small(NUMPY, *split_records(*problem, *args))
        dev = kernels.split_small(gpu, *split_records(*[cp.asarray(a) for a in problem], *args))
        for name, a, b in zip(("feature", "bin", "missing_left"), dev[:3], cpu[:3]):
            np.testing.assert_array_equal(a.get(), b, err_msg=name)
        np.testing.assert_allclose(dev[3].get(), cpu[3], rtol=1e-12, atol=0)


def test_grow_subtrees_on_device_matches_numba(cp, gpu):
    from test_tree_cuda_kernels import SUBTREE_SIZES, _split_problem

    from gpurpo.tree import kernels

    for msl, max_depth, random_split, k in [(1, None, False, 7), (2, 4, True, 3)]:
        rng = np.random.default_rng(msl + 10 * k)
        problem = _split_problem(rng, SUBTREE_SIZES)
        depth = np.zeros(len(SUBTREE_SIZES), dtype=np.int32)
        root_weight = problem[5].sum(axis=1, dtype=np.float64)
        outs = []
        for backend, conv in ((NUMPY, np.asarray), (gpu, cp.asarray)):
            arrays = [conv(a.copy()) for a in problem]  # sample_indices is updated in place
            out = kernels.grow_subtrees(
                backend, arrays[0], kernels.NodeBatch(*arrays[1:5], conv(depth)), *arrays[5:7],
                conv(root_weight), kernels.EdgeTable(*arrays[7:]),
                kernels.SplitRules(k, msl, random_split, 11, 1e-5, max_depth=max_depth),
            )
            host = {f: _host(getattr(out, f)) for f in ("count", "offsets", "feature",
                                                              "bin", "gain", "left", "start")}
            outs.append((_host(arrays[1]), host))
        (si_c, c), (si_g, g) = outs
        np.testing.assert_array_equal(si_g, si_c)
        np.testing.assert_array_equal(g["count"], c["count"])
        rows = np.concatenate([np.arange(o, o + n) for o, n in zip(c["offsets"], c["count"])])
        for name in ("feature", "bin", "gain", "left", "start"):
            np.testing.assert_array_equal(g[name][rows], c[name][rows], err_msg=name)


def test_histogram_scores_on_device_match_numba_bitwise(cp, gpu):
    from test_tree_score import run_kernel, sample_problem

    for random_split in (False, True):
        for with_count in (True, False):
            rng = np.random.default_rng(40 + 2 * random_split + with_count)
            hist, feats, thr, u, _ = sample_problem(rng, n_nodes=300, k=9, m=6, with_count=with_count)
            want = run_kernel(NUMPY, hist, feats, 6, 2, random_split, u, thr)
            got = run_kernel(gpu, hist, feats, 6, 2, random_split, u, thr)
            for name, a, b in zip(("gain", "bin", "missing_left", "nonconstant"), got, want):
                np.testing.assert_array_equal(a, b, err_msg=name)


def test_scores_with_best_slots_in_one_launch_match_numba(cp, gpu):
    # many nodes of many slots: blocks of one node finish in any order on a device, and
    # the last one picks; the counters come back to zero for the next launch
    from test_score_best_slot import _edges, _problem, _separate

    from gpurpo.tree import kernels
    from gpurpo.tree.splitting import TIE_ROUNDING, TIE_RTOL

    for random_split in (False, True):
        hist, q, impure, features, order, node_pos, u, m = _problem(7 + random_split,
                                                                     n_nodes=400, k=12)
        want = _separate(NUMPY, hist, q, impure, features, order, node_pos, u, m, random_split,
                         40)
        counters = kernels.score_counters(gpu, 400)
        edges = _edges(40, hist.shape[2])
        edges = kernels.EdgeTable(cp.asarray(edges.edge_values), cp.asarray(edges.edge_ptr))
        for _ in range(3):
            got = kernels.score_best_slots(
                gpu, cp.asarray(hist), cp.asarray(features), m, 2, edges, cp.asarray(q),
                cp.asarray(impure), cp.asarray(order), TIE_RTOL, TIE_ROUNDING, counters,
                random_split=random_split, uniforms=cp.asarray(u),
                node_pos=cp.asarray(node_pos), n_features=40)
            np.testing.assert_array_equal(got.get(), want)
            assert not counters.get().any()


def test_node_statistics_of_shared_nodes_on_device_match_numba(cp, gpu):
    # a few large nodes (every block of the device on them) and many small ones
    from gpurpo.tree import kernels

    rng = np.random.default_rng(11)
    for sizes in ([300_000, 200_000, 1], [300] * 2000):
        n, m = sum(sizes), 6
        targets = rng.normal(size=(n, 1, m)).astype(np.float32)
        targets[: sizes[-1]] = 1.0  # the last node pure
        weights = rng.uniform(0.5, 2.0, size=(1, n)).astype(np.float32)
        sample_indices = rng.permutation(n)[::-1].astype(np.int32)
        sample_indices[-sizes[-1]:] = np.arange(sizes[-1])
        starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
        ranges = np.stack([starts, starts + np.array(sizes)], 1).astype(np.int64)
        tree = np.zeros(len(sizes), dtype=np.int32)
        want = kernels.node_stats(NUMPY, sample_indices, ranges, tree, weights, targets)
        counters = kernels.score_counters(gpu, len(sizes))
        for _ in range(2):
            impure, q = kernels.node_stats(
                gpu, cp.asarray(sample_indices), cp.asarray(ranges), cp.asarray(tree),
                cp.asarray(weights), cp.asarray(targets), node_done=counters)
            np.testing.assert_array_equal(impure.get(), want[0])
            np.testing.assert_allclose(q.get(), want[1], rtol=1e-12)
            assert not counters.get().any()


def test_leaf_and_prediction_kernels_on_device_match_numba(cp, gpu):
    from _packed_trees import random_packed_trees

    from gpurpo.tree import kernels, traversal

    rng = np.random.default_rng(3)
    for n, d, n_leaves in ((3000, 12, 6), (500, 40, 300)):
        leaf = rng.integers(-1, n_leaves, size=n).astype(np.int32)
        w = rng.uniform(0, 2, size=n)
        for dtype in (np.float32, np.float64):
            Y = ((rng.random((n, d)) < 0.3) * rng.normal(size=(n, d))).astype(dtype)
            ref = kernels.accumulate_leaves_dense(NUMPY, leaf, w, Y, n_leaves)
            # each leaf's samples in sample order, products rounded before the sums (no
            # fused multiply-add): numba's bits, run after run
            for _ in range(2):
                got = kernels.accumulate_leaves_dense(gpu, cp.asarray(leaf), cp.asarray(w),
                                                      cp.asarray(Y), n_leaves)
                np.testing.assert_array_equal(got.get(), ref)
        import cupyx.scipy.sparse as csp

        Yc = csp.csr_matrix(sp.csr_matrix(Y))
        got = kernels.accumulate_leaves_csr(gpu, cp.asarray(leaf), cp.asarray(w), Yc, n_leaves)
        np.testing.assert_array_equal(got.get(), ref)
    trees = random_packed_trees(rng)
    X = rng.normal(size=(2000, 5))
    X[rng.random(X.shape) < 0.2] = np.nan
    for dtype in (np.float32, np.float64):
        ref = traversal.apply_trees(NUMPY, X.astype(dtype), *trees)
        got = traversal.apply_trees(gpu, cp.asarray(X.astype(dtype)), *[cp.asarray(a) for a in trees])
        np.testing.assert_array_equal(got.get(), ref)
    rows = rng.integers(-1, 30, size=(700, 6)).astype(np.int32)
    values = (rng.random((30, 50)) < 0.2) * rng.normal(size=(30, 50))
    ref = np.ones((700, 50))
    traversal.sum_leaves_dense(NUMPY, rows, values, ref)
    out = cp.ones((700, 50))
    traversal.sum_leaves_dense(gpu, cp.asarray(rows), cp.asarray(values), out)
    np.testing.assert_array_equal(out.get(), ref)
    import cupyx.scipy.sparse as csp

    want = np.ones((700, 50))
    traversal.sum_leaves_csr(NUMPY, rows, sp.csr_matrix(values), want)
    for _ in range(3):  # the numba kernel's additions in its order, run after run
        out = cp.ones((700, 50))
        traversal.sum_leaves_csr(gpu, cp.asarray(rows), csp.csr_matrix(sp.csr_matrix(values)),
                                 out)
        np.testing.assert_array_equal(out.get(), want)


# --------------------------------------------------------------------------
# parity of the shared xp code
# --------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["gaussian", "achlioptas", "subsample"])
@pytest.mark.parametrize("sparse_y", [False, True])
def test_projection_parity(cp, kind, sparse_y):
    import cupyx.scipy.sparse as csp

    from gpurpo.projections import make_projection, project

    rng = np.random.default_rng(0)
    Y = (rng.random((300, 120)) < 0.1) * rng.normal(size=(300, 120))
    phi = make_projection(kind, 16, 120, random_state=0)
    Y_dev = csp.csr_matrix(sp.csr_matrix(Y)) if sparse_y else cp.asarray(Y)
    Y_host = sp.csr_matrix(Y) if sparse_y else Y
    got = project(Y_dev, phi)
    assert isinstance(got, cp.ndarray)
    np.testing.assert_allclose(got.get(), _host(project(Y_host, phi)), rtol=1e-10, atol=1e-12)


def test_randomized_svd_parity(cp):
    from gpurpo.linalg import randomized_svd

    rng = np.random.default_rng(1)
    U0, _ = np.linalg.qr(rng.normal(size=(800, 60)))
    V0, _ = np.linalg.qr(rng.normal(size=(200, 60)))
    A = (U0 * 0.8 ** np.arange(60)) @ V0.T
    U, s, Vt = randomized_svd(cp.asarray(A), 10, random_state=0)
    assert all(isinstance(a, cp.ndarray) for a in (U, s, Vt))
    Uc, sc, Vtc = randomized_svd(A, 10, random_state=0)
    np.testing.assert_allclose(s.get(), sc, rtol=1e-10)
    np.testing.assert_allclose(np.linalg.svd(A, compute_uv=False)[:10], sc, rtol=1e-8)
    # signs are fixed by the largest entry of each row of Vt: the factors agree too
    np.testing.assert_allclose(Vt.get(), Vtc, atol=1e-8)
    np.testing.assert_allclose(U.get(), Uc, atol=1e-8)


def test_cssp_parity(cp):
    from gpurpo.linalg import cssp_select

    rng = np.random.default_rng(2)
    Y = (rng.random((500, 60)) < 0.2).astype(np.float64)
    Y[:, :5] += 3 * rng.normal(size=(500, 5))  # five dominant labels
    idx, n_trials = cssp_select(cp.asarray(Y), 5, random_state=0)
    idx_c, n_trials_c = cssp_select(Y, 5, random_state=0)
    assert isinstance(idx, cp.ndarray)
    np.testing.assert_array_equal(idx.get(), _host(idx_c))
    assert n_trials == n_trials_c


def _canonical(structure, node=0):
    f = int(structure.feature[node])
    if f < 0:
        return (int(structure.n_node_samples[node]),)
    return (f, float(structure.threshold[node]), int(structure.missing_go_left[node]),
            _canonical(structure, structure.children_left[node]),
            _canonical(structure, structure.children_right[node]))


def _regression_data(rng, n=1500, p=8, d=4):
    X = rng.normal(size=(n, p))
    X[rng.random(X.shape) < 0.05] = np.nan
    Y = np.nan_to_num(X[:, :d]) * np.arange(1, d + 1) + 0.3 * rng.normal(size=(n, d))
    return X, Y


def test_tree_parity_same_tree(cp):
    from gpurpo.tree import DecisionTreeRegressor

    rng = np.random.default_rng(3)
    X, Y = _regression_data(rng)
    params = dict(max_depth=8, min_samples_leaf=3, random_state=0)
    cpu = DecisionTreeRegressor(**params).fit(X, Y)
    gpu_model = DecisionTreeRegressor(**params).fit(cp.asarray(X), cp.asarray(Y))
    assert _canonical(gpu_model.tree_.structure) == _canonical(cpu.tree_.structure)
    pred = gpu_model.predict(cp.asarray(X))
    assert isinstance(pred, cp.ndarray)
    np.testing.assert_array_equal(pred.get(), cpu.predict(X))


@pytest.mark.parametrize("max_leaf_nodes", [None, 31])
def test_nodes_partitioned_in_parts_on_the_gpu_grow_the_cpu_trees(cp, monkeypatch,
                                                                   max_leaf_nodes):
    # parts of 64 samples: the top nodes' partitions are shared by many blocks (counted
    # by tree_level_split, placed by tree_level_children's other blocks), level-wise and
    # best first: the CPU's trees and predictions, bit for bit
    from gpurpo.ensemble import RandomForestRegressor
    from gpurpo.tree import level_kernels

    monkeypatch.setattr(level_kernels, "PART_MIN_SAMPLES", 64)
    rng = np.random.default_rng(21)
    X, Y = _regression_data(rng, n=20_000)
    params = dict(n_estimators=3, max_features=0.5, max_leaf_nodes=max_leaf_nodes,
                  random_state=0)
    cpu = RandomForestRegressor(**params).fit(X, Y)
    gpu_model = RandomForestRegressor(**params).fit(cp.asarray(X), cp.asarray(Y))
    for a, b in zip(cpu.estimators_, gpu_model.estimators_):
        assert _canonical(b.structure) == _canonical(a.structure)
    np.testing.assert_array_equal(_host(gpu_model.predict(cp.asarray(X[:500]))),
                                  cpu.predict(X[:500]))


def test_forest_on_sparse_x_on_the_gpu_equals_the_cpu(cp):
    # cupyx CSR X: its stored-entry codes are built on the device (SparseCodes), the
    # subtree kernel copies roots from them, and nodes above 256 samples derive their
    # zero bins from their totals, as the CPU kernels do: the same trees
    import cupyx.scipy.sparse as csp

    from gpurpo.ensemble import RandomForestRegressor

    rng = np.random.default_rng(12)
    dense = np.where(rng.random((1500, 60)) < 0.1, rng.normal(size=(1500, 60)), 0.0)
    Y = dense[:, :4] @ rng.normal(size=(4, 6)) + 0.1 * rng.normal(size=(1500, 6))
    params = dict(n_estimators=4, projection="gaussian", n_components=3, max_features=0.5,
                  random_state=0)
    cpu = RandomForestRegressor(**params).fit(sp.csr_matrix(dense), Y)
    gpu_model = RandomForestRegressor(**params).fit(csp.csr_matrix(sp.csr_matrix(dense)),
                                                    cp.asarray(Y))
    for a, b in zip(cpu.estimators_, gpu_model.estimators_):
        assert _canonical(b.structure) == _canonical(a.structure)
    # leaf values summed in sample order and predictions in tree order: the CPU's bits
    np.testing.assert_array_equal(_host(gpu_model.predict(cp.asarray(dense))), cpu.predict(dense))


def test_warm_started_forest_on_the_gpu_is_the_forest_of_one_fit(cp):
    # the bin edges and projection plan of the first fit are reused on the device,
    # and the new trees' seeds continue the first fit's: the trees of one fit
    from gpurpo.ensemble import RandomForestClassifier

    rng = np.random.default_rng(13)
    X = cp.asarray(rng.normal(size=(2000, 12)))
    Y = cp.asarray((rng.random((2000, 30)) < 0.2).astype(np.float64))
    params = dict(projection="gaussian", n_components=4, max_features="sqrt", random_state=3)
    cold = RandomForestClassifier(n_estimators=6, **params).fit(X, Y)
    warm = RandomForestClassifier(n_estimators=2, warm_start=True, **params).fit(X, Y)
    warm.set_params(n_estimators=6).fit(X, Y)
    for a, b in zip(cold.estimators_, warm.estimators_):
        assert _canonical(b.structure) == _canonical(a.structure)
    np.testing.assert_array_equal(_host(warm.apply(X)), _host(cold.apply(X)))
    np.testing.assert_allclose(_host(warm.predict_proba(X)), _host(cold.predict_proba(X)),
                               rtol=1e-12, atol=0.0)


@pytest.mark.parametrize("name", ["forest", "extra", "boosting"])
def test_ensemble_parity_same_accuracy(cp, name):
    from sklearn.metrics import r2_score

    from gpurpo.ensemble import ExtraTreesRegressor, GradientBoostingRegressor, RandomForestRegressor

    make = {
        "forest": lambda: RandomForestRegressor(n_estimators=10, projection="gaussian",
                                                n_components=3, random_state=0),
        "extra": lambda: ExtraTreesRegressor(n_estimators=10, random_state=0),
        "boosting": lambda: GradientBoostingRegressor(n_estimators=30, random_state=0),
    }[name]
    rng = np.random.default_rng(4)
    X, Y = _regression_data(rng)
    X_test, Y_test = _regression_data(rng, n=500)
    cpu = make().fit(X, Y)
    gpu_model = make().fit(cp.asarray(X), cp.asarray(Y))
    pred_gpu = gpu_model.predict(cp.asarray(X_test))
    assert isinstance(pred_gpu, cp.ndarray)
    r2_cpu = r2_score(Y_test, cpu.predict(X_test))
    r2_gpu = r2_score(Y_test, pred_gpu.get())
    assert r2_cpu > 0.5
    assert abs(r2_gpu - r2_cpu) < 0.02, (r2_cpu, r2_gpu)


def test_gpu_model_predicts_in_a_cpu_only_process(cp, tmp_path):
    from gpurpo.ensemble import RandomForestClassifier

    rng = np.random.default_rng(5)
    X = rng.normal(size=(600, 6))
    Y = (X[:, :4] + 0.5 * rng.normal(size=(600, 4)) > 0).astype(np.float64)
    model = RandomForestClassifier(n_estimators=5, random_state=0).fit(cp.asarray(X), cp.asarray(Y))
    expected = _host(model.predict_proba(cp.asarray(X)))
    (tmp_path / "model.pkl").write_bytes(pickle.dumps(model))
    np.save(tmp_path / "X.npy", X)
    script = textwrap.dedent(
        """
        import pickle, sys
        import numpy as np
        from gpurpo.backend import cupy_available
        assert not cupy_available()
        model = pickle.loads(open(sys.argv[1], "rb").read())
        proba = model.predict_proba(np.load(sys.argv[2]))
        assert type(proba).__module__.startswith(("numpy", "scipy")), type(proba)
        np.save(sys.argv[3], proba.toarray() if hasattr(proba, "toarray") else np.asarray(proba))
        """
    )
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="", PYTHONPATH=str(ROOT))
    env.pop("GPURPO_BACKEND", None)
    proc = subprocess.run(
        [sys.executable, "-c", script, str(tmp_path / "model.pkl"), str(tmp_path / "X.npy"),
         str(tmp_path / "proba.npy")],
        env=env, capture_output=True, text=True, timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = np.load(tmp_path / "proba.npy")
    dense = expected.toarray() if sp.issparse(expected) else expected
    np.testing.assert_allclose(got, dense, rtol=1e-12, atol=1e-12)


def test_cupy_in_cupy_out(cp):
    from gpurpo.projections import OutputProjection
    from gpurpo.tree import DecisionTreeClassifier

    rng = np.random.default_rng(6)
    Y = (rng.random((200, 30)) < 0.2).astype(np.float64)
    Z = OutputProjection(n_components=5, random_state=0).fit_transform(cp.asarray(Y))
    assert isinstance(Z, cp.ndarray) and Z.shape == (200, 5)
    X = rng.normal(size=(200, 4))
    clf = DecisionTreeClassifier(max_depth=4, random_state=0).fit(cp.asarray(X), cp.asarray(Y))
    for out in (clf.predict(cp.asarray(X)), clf.predict_proba(cp.asarray(X)), clf.apply(cp.asarray(X))):
        assert type(out).__module__.startswith("cupy"), type(out)


def test_host_input_gets_host_output_from_a_gpu_tree(cp):
    # device="cuda" computes on the GPU; NumPy X gets NumPy results, as from the forests
    from gpurpo.tree import DecisionTreeClassifier, DecisionTreeRegressor

    rng = np.random.default_rng(3)
    X = rng.normal(size=(200, 5))
    Y = (rng.random((200, 4)) < 0.3).astype(float)
    tree = DecisionTreeRegressor(max_depth=4, device="cuda", random_state=0).fit(X, Y)
    clf = DecisionTreeClassifier(max_depth=4, device="cuda", random_state=0).fit(X, Y)
    cpu = DecisionTreeClassifier(max_depth=4, device="cpu", random_state=0).fit(X, Y)
    for out in (tree.predict(X), tree.apply(X), clf.predict(X), clf.predict_proba(X)):
        assert isinstance(out, np.ndarray), type(out)
    np.testing.assert_allclose(clf.predict_proba(X), cpu.predict_proba(X), atol=1e-12)


def test_predict_top_k_on_the_gpu_equals_the_cpu(cp):
    # the CUDA backends' top-k (CuPy primitives) against the numba kernel, on a forest
    from gpurpo.datasets import make_multilabel
    from gpurpo.ensemble import RandomForestClassifier

    X, Y = make_multilabel(600, 8, 300, sparse_output=True, random_state=0)[:2]
    X = np.asarray(X)
    kwargs = dict(n_estimators=5, projection="gaussian", n_components=5, random_state=0)
    cpu = RandomForestClassifier(device="cpu", **kwargs).fit(X, Y)
    gpu_model = RandomForestClassifier(device="cuda", **kwargs).fit(cp.asarray(X), Y)
    idx, scores = gpu_model.predict_top_k(cp.asarray(X), k=7)
    assert isinstance(idx, cp.ndarray) and isinstance(scores, cp.ndarray)
    ref_idx, ref_scores = cpu.predict_top_k(X, k=7)
    np.testing.assert_allclose(_host(scores), ref_scores, atol=1e-9)
    # indices agree wherever the scores are not tied within rounding
    proba = cpu.predict_proba(X)
    np.testing.assert_allclose(np.take_along_axis(proba, _host(idx), axis=1), ref_scores, atol=1e-9)


def test_explicit_transfers_are_bounded_per_level(cp):
    # Counts Backend.to_host calls (the growers' explicit device->host copies: split
    # decisions and node sizes of each level) during fit; implicit synchronisations
    # (int() or bool() of a device scalar) are not seen by this count.
    from gpurpo.tree import DecisionTreeRegressor

    rng = np.random.default_rng(7)
    original = gb.Backend.to_host
    for n, depth in ((2000, 8), (16000, 8), (4000, None)):
        X = cp.asarray(rng.normal(size=(n, 8)))
        Y = cp.asarray(rng.normal(size=(n, 4)))
        calls = []

        def counting(self, a, pinned=False, calls=calls):
            calls.append(type(a).__module__)
            return original(self, a, pinned)

        with mock.patch.object(gb.Backend, "to_host", counting):
            model = DecisionTreeRegressor(max_depth=depth, random_state=0).fit(X, Y)
        levels = model.tree_.max_depth + 1
        print(f"n={n}: {len(calls)} explicit transfers for {levels} levels and "
              f"{model.tree_.node_count} nodes")
        # one per level of the device grower, plus a fixed number per fit
        assert len(calls) <= levels + 8


def test_device_growth_copies_one_array_per_level(cp, gpu):
    # the device grower on CuPy, counted level by level: one copy to the host per level,
    # none to the device after the upload (CuPy's operators are not counted: the
    # launches are a lower bound)
    from gpurpo.testing.device_activity import forest_batch_activity

    for n, trees, k in ((20000, 8, 5), (20000, 2, 20)):
        result = forest_batch_activity(n, trees, n_candidates=k, backend=gpu)
        print(f"n={n}, {trees} trees, max_features={k}: levels {result['levels']}, "
              f"launches per level {result['level_launches']}")
        assert result["levels"] >= 3
        assert result["level_d2h"] == [int(sum(g[1:]) > 0) for g in result["level_groups"]]
        assert result["h2d"] == 0
        assert max(result["level_launches"]) <= 12


def test_device_best_first_rounds_copy_one_array(cp, gpu):
    # boosting's best-first trees on CuPy, counted step by step: one copy to the host per
    # round, none per evaluation and none to the device after the upload; the trees are
    # the host driver's on the CPU
    from gpurpo.testing.device_activity import best_first_batch_activity

    for n, trees, k in ((20000, 1, None), (20000, 4, 5)):
        result = best_first_batch_activity(n, trees, n_candidates=k, backend=gpu)
        print(f"n={n}, {trees} trees, max_features={k}: depth {result['depth']}, "
              f"steps {result['levels']}, launches per step {result['level_launches']}")
        assert result["n_leaves"] == [31] * trees
        rounds = result["level_d2h"][1::2]
        assert rounds == [1] * len(rounds)
        assert len(rounds) in (result["depth"], result["depth"] + 1)
        assert set(result["level_d2h"][0::2]) == {0}
        assert result["h2d"] == 0
        cpu = best_first_batch_activity(n, trees, n_candidates=k, backend=NUMPY)
        assert cpu["n_leaves"] == result["n_leaves"] and cpu["depth"] == result["depth"]


def test_newton_histogram_scores_on_device_match_numba_bitwise(cp, gpu):
    from test_tree_score import run_kernel, sample_problem

    for n_bins in (12, 256):
        rng = np.random.default_rng(70 + n_bins)
        hist, feats, thr, u, _ = sample_problem(rng, n_nodes=200, k=7, n_bins=n_bins, m=8,
                                                hessian=True)
        want = run_kernel(NUMPY, hist, feats, 8, 1, False, u, thr, (1.0, 0.3))
        got = run_kernel(gpu, hist, feats, 8, 1, False, u, thr, (1.0, 0.3))
        for name, a, b in zip(("gain", "bin", "missing_left", "nonconstant"), got, want):
            np.testing.assert_array_equal(a, b, err_msg=name)


@pytest.mark.parametrize("leaf_step, criterion",
                         [("global", "gradient"), ("per_leaf", "gradient"), ("global", "newton")])
def test_logistic_boosting_parity(cp, leaf_step, criterion):
    from gpurpo.datasets import make_multilabel
    from gpurpo.ensemble import GradientBoostingClassifier
    from gpurpo.metrics import label_ranking_average_precision

    X, Y = make_multilabel(1500, 12, 40, label_cardinality=3.0, sparse_output=False,
                           random_state=8)
    Y = Y.toarray() if sp.issparse(Y) else np.asarray(Y)
    params = dict(strategy="relabel_rpo", projection="gaussian", n_components=8,
                  leaf_step=leaf_step, split_criterion=criterion, n_estimators=25,
                  random_state=0)
    cpu = GradientBoostingClassifier(**params).fit(X[:1200], Y[:1200])
    dev = GradientBoostingClassifier(**params).fit(cp.asarray(X[:1200]), cp.asarray(Y[:1200]))
    proba = dev.predict_proba(cp.asarray(X[1200:]))
    assert isinstance(proba, cp.ndarray)
    lrap_cpu = label_ranking_average_precision(Y[1200:], cpu.predict_proba(X[1200:]))
    lrap_gpu = label_ranking_average_precision(Y[1200:], proba.get())
    assert lrap_cpu > 0.3
    assert abs(lrap_gpu - lrap_cpu) < 0.02, (lrap_cpu, lrap_gpu)
    np.testing.assert_allclose(_host(dev.train_loss_), cpu.train_loss_, rtol=0.05)


@pytest.mark.parametrize("strategy, leaf_step", [("rpo", "global"), ("relabel_rpo", "per_leaf")])
def test_absolute_error_boosting_parity(cp, strategy, leaf_step):
    # weighted medians: the array version on CuPy, the selection kernels on the CPU
    from gpurpo.datasets import make_friedman1_multioutput
    from gpurpo.ensemble import GradientBoostingRegressor

    X, Y = make_friedman1_multioutput("group", n_samples=1500, n_outputs=6, random_state=3)
    params = dict(strategy=strategy, loss="absolute_error", leaf_step=leaf_step,
                  n_estimators=20, random_state=0)
    cpu = GradientBoostingRegressor(**params).fit(X[:1200], Y[:1200])
    dev = GradientBoostingRegressor(**params).fit(cp.asarray(X[:1200]), cp.asarray(Y[:1200]))
    pred = dev.predict(cp.asarray(X[1200:]))
    assert isinstance(pred, cp.ndarray)
    mae_cpu = float(np.abs(cpu.predict(X[1200:]) - Y[1200:]).mean())
    mae_gpu = float(np.abs(pred.get() - Y[1200:]).mean())
    assert mae_cpu < float(np.abs(Y[1200:] - np.median(Y[:1200], axis=0)).mean())
    assert abs(mae_gpu - mae_cpu) < 0.05 * mae_cpu, (mae_cpu, mae_gpu)


def test_multiclass_boosting_on_the_gpu(cp):
    # class labels on the GPU: numeric classes come back on the GPU, and the
    # accuracy is the CPU model's
    from sklearn.datasets import make_classification

    from gpurpo.ensemble import GradientBoostingClassifier

    X, y = make_classification(n_samples=1500, n_features=12, n_informative=6, n_classes=4,
                               n_clusters_per_class=1, random_state=0)
    params = dict(n_estimators=30, max_leaf_nodes=15, random_state=0)
    cpu = GradientBoostingClassifier(**params).fit(X[:1000], y[:1000])
    dev = GradientBoostingClassifier(**params).fit(cp.asarray(X[:1000]), cp.asarray(y[:1000]))
    np.testing.assert_array_equal(dev.classes_, [0, 1, 2, 3])
    pred = dev.predict(cp.asarray(X[1000:]))
    assert isinstance(pred, cp.ndarray)
    proba = dev.predict_proba(cp.asarray(X[1000:]))
    np.testing.assert_allclose(proba.sum(axis=1).get(), 1.0)
    acc_cpu = float((cpu.predict(X[1000:]) == y[1000:]).mean())
    acc_gpu = float((pred.get() == y[1000:]).mean())
    assert acc_cpu > 0.6
    assert abs(acc_gpu - acc_cpu) < 0.03, (acc_cpu, acc_gpu)


@pytest.mark.parametrize("reducer", ["plst", "rembrandt", "cssp", "random"])
@pytest.mark.parametrize("sparse_y", [False, True])
def test_label_space_models_stay_on_the_gpu(cp, reducer, sparse_y):
    import cupyx.scipy.sparse as csp

    from gpurpo.datasets import make_multilabel
    from gpurpo.label_space import LabelSpaceClassifier

    X, Y = make_multilabel(1200, 30, 80, label_cardinality=4.0, sparse_output=True,
                           random_state=9)
    X = np.asarray(X)
    Y = sp.csr_matrix(Y)
    Y_dev = csp.csr_matrix(Y) if sparse_y else cp.asarray(Y.toarray())
    params = dict(reducer=reducer, n_components=10, random_state=0)
    cpu = LabelSpaceClassifier(**params).fit(X, Y if sparse_y else Y.toarray())
    dev = LabelSpaceClassifier(**params).fit(cp.asarray(X), Y_dev)
    scores = dev.decision_function(cp.asarray(X))
    assert isinstance(scores, cp.ndarray)
    pred = dev.predict(cp.asarray(X))
    assert type(pred).__module__.startswith("cupy"), type(pred)
    want = _host(cpu.decision_function(X))
    # the same model up to floating-point rounding (reducers draw on the host)
    np.testing.assert_allclose(scores.get(), want, rtol=1e-6, atol=1e-6)


def test_metrics_on_cupy_equal_numpy(cp):
    from gpurpo import metrics

    rng = np.random.default_rng(10)
    T = (rng.random((400, 50)) < 0.1).astype(np.float64)
    S = np.round(rng.random((400, 50)), 2)  # ties
    for name in ("label_ranking_average_precision", "micro_auprc", "macro_r2", "rmse"):
        fn = getattr(metrics, name)
        np.testing.assert_allclose(float(fn(cp.asarray(T), cp.asarray(S))), float(fn(T, S)),
                                   rtol=1e-10, err_msg=name)
    np.testing.assert_allclose(
        float(metrics.precision_at_k(cp.asarray(T), cp.asarray(S), k=5)),
        float(metrics.precision_at_k(T, S, k=5)), rtol=1e-10,
    )
    P = (S > 0.5).astype(np.float64)
    np.testing.assert_allclose(float(metrics.hamming_loss(cp.asarray(T), cp.asarray(P))),
                               float(metrics.hamming_loss(T, P)), rtol=1e-12)
