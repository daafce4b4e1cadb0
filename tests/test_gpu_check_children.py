"""The benchmark runs of bench/gpu_check.py, end to end at small sizes, without a GPU.

A GPU is lent for minutes at a time, so a script error found there costs the
measurements. The GPU check times its forests and boosting fits in child
processes (and the sparse forest through bench/sparse_forest.py) that take the
device as an argument: here they run on the CPU path and on the emulated CUDA
backend, and must print the results the report reads.
"""

from __future__ import annotations

import json
import time

import pytest
from test_gpu_check_report import _gpu_check


@pytest.fixture(scope="module")
def gpu_check():
    return _gpu_check()


@pytest.mark.parametrize("config", [0, 1], ids=["gaussian", "subsample newton"])
def test_the_boosting_child_prints_its_fit(gpu_check, config):
    res = gpu_check._run_child(
        gpu_check._BOOST_CHILD,
        ["cpu", "2", "800", json.dumps(gpu_check.BOOSTING_CONFIGS[config])], 120,
        {"device": "cpu"})
    assert "error" not in res, res.get("error")
    assert res["device"] == "cpu" and res["rounds"] == 2
    assert res["fit_s"] > 0 and 0 < res["lrap"] <= 1
    # the counters of a CPU fit: nothing on a device
    assert res["launches"] == res["d2h"] == res["h2d"] == 0


def test_the_forest_child_counts_the_emulated_device(gpu_check, tmp_path):
    path = tmp_path / "forest.npz"
    gpu_check._make_forest_data(path, 1500, 20, 50, 3)
    res = gpu_check._forest_child("cuda-emulated", 2, path, 240)
    assert "error" not in res, res.get("error")
    assert res["device"] == "cuda-emulated" and res["trees"] == 2 and res["fit_s"] > 0
    # the fit after the upload launches kernels and copies each way
    assert res["launches"] > 0 and res["d2h"] > 0 and res["h2d"] > 0
    assert gpu_check._activity_columns({**res, "device": "cuda"}, 2, "tree")[
        "launches per tree"] == res["launches"] / 2


def test_the_sparse_forest_section_reports_both_libraries(gpu_check):
    text = gpu_check.section_sparse_forest(True, time.perf_counter() + 240, device="cpu")
    assert "FAILED" not in text and "TIMEOUT" not in text, text
    header, _, row = text.strip().splitlines()[-3:]
    cells = dict(zip([c.strip() for c in header.strip("|").split("|")],
                     [c.strip() for c in row.strip("|").split("|")]))
    assert float(cells["gpurpo (cpu) s"]) > 0 and float(cells["scikit-learn s"]) > 0
    assert 0 < float(cells["gpurpo LRAP"]) <= 1 and 0 < float(cells["scikit-learn LRAP"]) <= 1
    assert float(cells["gpurpo predict 10 rows s"]) > 0
    assert float(cells["scikit-learn predict 10 rows s"]) > 0


def test_the_node_statistics_rows_compare_both_launches(gpu_check):
    # the section's rows on the emulated device (CuPy's place): both launches give the
    # same purity and Q, and the shared launch gives a node several blocks
    import numpy as np

    from gpurpo.backend import EMULATED

    rows = gpu_check.node_stats_rows(EMULATED, np, np.random.default_rng(0), 6000, 3,
                                     lambda fn: (fn(), 1e-3)[1])
    assert [r["nodes"] for r in rows] == [1, 8, 64]
    assert all(r["same purity, Q within 1e-12"] for r in rows)
    assert all(r["draws are a permutation"] for r in rows)
    assert rows[0]["blocks per node"] > 1 and rows[-1]["blocks per node"] == 1


def test_the_partition_rows_check_the_partition(gpu_check, monkeypatch):
    # the section's rows on the emulated device, with parts of 64 samples: both launches
    # give the stable partition and the left counts, the top nodes in several parts
    import numpy as np

    from gpurpo.backend import EMULATED
    from gpurpo.tree import level_kernels

    monkeypatch.setattr(level_kernels, "PART_MIN_SAMPLES", 32)
    rows = gpu_check.partition_rows(EMULATED, np, np.random.default_rng(0), 1024,
                                    lambda fn: (fn(), 1e-3)[1], node_counts=(1, 4, 32))
    assert [(r["samples"], r["nodes"]) for r in rows] == [
        (layout, k) for layout in ("contiguous", "scattered") for k in (1, 4, 32)]
    assert all(r["stable, left counts right"] for r in rows)
    assert rows[0]["parts"] > 1 and rows[2]["parts"] == 1


def test_the_leaf_value_rows_agree_with_scatter_adds(gpu_check):
    # the section's rows on the emulated device: the ordered sums and the scatter-adds
    # give the same leaf values, for shallow and deep trees
    import numpy as np

    from gpurpo.backend import EMULATED

    rows = gpu_check.leaf_value_rows(EMULATED, np, np.random.default_rng(0), 600, 3,
                                     ((4, 2), (200, 5)), lambda fn: (fn(), 1e-3)[1])
    assert [(r["leaves per tree"], r["outputs"]) for r in rows] == [(4, 2), (200, 5)]
    assert all(r["agree within 1e-9"] for r in rows)
