"""GPU verification in one command: GPU tests plus GPU benchmarks, written to a report.

Run through ``bash bench/gpu_check.sh`` (``--quick`` for small sizes). Every
section runs inside ``try``/``except`` and a time budget: a failure or a
timeout is written into the report instead of stopping the run. Sections:

1. environment: versions, device, memory bandwidth (theoretical from
   ``memoryClockRate * busWidth * 2``, and measured with a device copy), the
   imports gpurpo needs (and that ``gpurpo`` imports without
   ``array_api_compat``);
2. ``python -m pytest -m gpu tests`` (every test marked gpu);
3. histogram kernel throughput on large nodes, as a fraction of the memory
   bandwidth (compulsory bytes: sample indices, weights, targets, codes), and the node
   statistics of the large nodes at the top of a tree, one block per node against the
   device's blocks shared among them, a level's stable partition of a few large
   nodes and of many small ones, one block per node against nodes shared in parts, and
   the dense leaf values of a forest batch (ordered sums against scatter-adds);
4. explicit device-to-host transfers during a tree fit;
5. randomized SVD on the GPU vs the CPU path vs ``torch.svd_lowrank``;
6. random-forest fit on the GPU vs the CPU path on the same machine
   (100 trees, n = 1,000,000, p = 100, d = 1,000 sparse labels,
   m = 7; each fit runs in a child process with a timeout, with fewer trees
   when the budget requires it, and the per-tree times are compared);
7. the forests of bench/forest.py at ten times the rows (``bench/forest.py --rows-factor 10
   --devices cuda,cpu``: delicious- and mediamill-shaped data, 100 GPU trees against 4
   CPU-path trees on all host cores), time per tree and test LRAP of each;
8. multi-label gradient boosting (relabel_rpo: Gaussian q = 20, and 50 subsampled outputs with
   second-order splits; log loss) on
   mediamill-shaped data on the GPU vs the CPU path: per-round times and the
   test LRAP of each (same algorithm, so close scores are expected);
9. with the budget left, a forest on text-like sparse X on the GPU against
   scikit-learn's trees on the same projections (``bench/sparse_forest.py --device cuda``).

The report goes to ``bench/results/<date>-<device>.md`` (``--out`` to change).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
TOTAL_BUDGET_S = 10 * 60
# share of the budget the forest section leaves to the boosting section
BOOSTING_RESERVE = 0.25
# share of the budget the forest section leaves to the forests at ten times the rows, and
# the smallest budget that runs them (at 400 s the GPU tests and the large forest use
# about 215 s)
ROWS_RESERVE = 0.2
ROWS_MIN_BUDGET_S = 480.0


class Report:
    """Markdown sections collected during the run; ``write(report, final)``, when given,
    is called after every section (``final`` False) so that a run cut short leaves the
    sections it finished."""

    def __init__(self, write: Callable[[Report, bool], Any] | None = None) -> None:
        self.sections: list[tuple[str, str]] = []
        self.start = time.perf_counter()
        self.write = write

    def elapsed(self) -> float:
        return time.perf_counter() - self.start

    def add(self, title: str, body: str) -> None:
        self.sections.append((title, body.rstrip() + "\n"))
        print(f"\n## {title}\n{body}", flush=True)
        if self.write is not None:
            self.write(self, False)

    def run(self, title: str, fn: Callable[[], str]) -> None:
        t0 = time.perf_counter()
        try:
            body = fn()
        except Exception:  # any failure is reported, the run goes on
            body = "FAILED:\n\n```\n" + traceback.format_exc()[-4000:] + "```\n"
        self.add(title, f"{body}\n_section time: {time.perf_counter() - t0:.1f} s_")

    def markdown(self, header: str) -> str:
        parts = [header]
        for title, body in self.sections:
            parts.append(f"## {title}\n\n{body}")
        return "\n".join(parts)


def _table(rows: list[dict[str, Any]]) -> str:
    if not rows:
        return "(no rows)\n"
    cols = list(dict.fromkeys(c for r in rows for c in r))
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for r in rows:
        lines.append("| " + " | ".join(_fmt(r.get(c, "")) for c in cols) + " |")
    return "\n".join(lines) + "\n"


def _fmt(v: Any) -> str:
    """A table cell: floats to 4 significant digits; text on one line, its pipes escaped
    (an error's message stays inside its cell)."""
    if isinstance(v, float):
        return f"{v:.4g}"
    return " ".join(str(v).split()).replace("|", "\\|")


def _host_cores() -> int:
    """The CPU cores this process may run on (its affinity, else the machine's count):
    what numba lets a benchmark set as its threads."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def _version(name: str) -> str:
    try:
        mod = importlib.import_module(name)
    except Exception as exc:  # missing or broken
        return f"MISSING ({exc.__class__.__name__}: {exc})"
    return str(getattr(mod, "__version__", "present"))


# --------------------------------------------------------------------------
# 1. environment
# --------------------------------------------------------------------------


def device_info() -> dict[str, Any]:
    import cupy

    dev = cupy.cuda.Device()
    props = cupy.cuda.runtime.getDeviceProperties(dev.id)
    name = props["name"].decode() if isinstance(props["name"], bytes) else str(props["name"])
    attrs = dev.attributes
    clock_khz = props.get("memoryClockRate") or attrs.get("MemoryClockRate")
    bus_bits = props.get("memoryBusWidth") or attrs.get("GlobalMemoryBusWidth")
    if not clock_khz or not bus_bits:
        try:  # cudaDevAttrMemoryClockRate = 36, cudaDevAttrGlobalMemoryBusWidth = 37
            clock_khz = cupy.cuda.runtime.deviceGetAttribute(36, dev.id)
            bus_bits = cupy.cuda.runtime.deviceGetAttribute(37, dev.id)
        except Exception:
            clock_khz = bus_bits = None
    bandwidth = 2.0 * clock_khz * 1e3 * bus_bits / 8 if clock_khz and bus_bits else None
    free, total = cupy.cuda.runtime.memGetInfo()
    return {
        "name": name,
        "compute_capability": f"{props.get('major')}.{props.get('minor')}",
        "multiprocessors": int(attrs["MultiProcessorCount"]),
        "shared_mem_per_block": int(attrs["MaxSharedMemoryPerBlock"]),
        "shared_mem_per_block_optin": int(attrs.get("MaxSharedMemoryPerBlockOptin", 0)),
        "memory_gib": total / 2**30,
        "memory_clock_khz": clock_khz,
        "bus_width_bits": bus_bits,
        "bandwidth_theoretical_gbs": bandwidth / 1e9 if bandwidth else None,
        "cuda_runtime": cupy.cuda.runtime.runtimeGetVersion(),
        "cuda_driver": cupy.cuda.runtime.driverGetVersion(),
    }


def measured_copy_bandwidth(nbytes: int = 1 << 31) -> float:
    """GB/s of a device-to-device copy, counting bytes read and written."""
    import cupy

    a = cupy.ones(nbytes // 4, dtype=cupy.float32)
    b = cupy.empty_like(a)
    b[...] = a
    cupy.cuda.Device().synchronize()
    times = []
    for _ in range(5):
        start, stop = cupy.cuda.Event(), cupy.cuda.Event()
        start.record()
        b[...] = a
        stop.record()
        stop.synchronize()
        times.append(cupy.cuda.get_elapsed_time(start, stop) / 1e3)
    del a, b
    cupy.get_default_memory_pool().free_all_blocks()
    return 2 * nbytes / min(times) / 1e9


_NO_ARRAY_API_COMPAT = textwrap.dedent(
    """
    import importlib, sys
    class Block:
        def find_spec(self, name, path=None, target=None):
            if name == "array_api_compat" or name.startswith("array_api_compat."):
                raise ImportError("array_api_compat blocked by gpu_check")
            return None
    sys.meta_path.insert(0, Block())
    import gpurpo
    for sub in ("backend", "projections", "linalg", "tree", "ensemble", "metrics", "datasets"):
        importlib.import_module("gpurpo." + sub)
    bad = [m for m in sys.modules if m.startswith("array_api_compat")]
    assert not bad, bad
    print("ok")
    """
)


def section_environment(state: dict[str, Any]) -> str:
    lines = [
        f"- python {platform.python_version()} ({sys.executable}), {platform.platform()}",
        f"- host CPUs: {os.cpu_count()} ({_host_cores()} usable)",
    ]
    required = ("numpy", "scipy", "sklearn", "numba", "cupy", "pytest")
    optional = ("torch", "array_api_compat", "hypothesis", "cuda.bindings")
    missing = []
    for name in required + optional:
        v = _version(name)
        lines.append(f"- {name}: {v}{'' if name in required else ' (optional)'}")
        if v.startswith("MISSING") and name in required:
            missing.append(name)
    state["missing"] = missing
    if missing:
        lines.append(f"- **missing required packages: {', '.join(missing)}**")
    proc = subprocess.run(
        [sys.executable, "-c", _NO_ARRAY_API_COMPAT],
        capture_output=True, text=True, timeout=300, cwd=ROOT,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
    )
    ok = proc.returncode == 0 and proc.stdout.strip().endswith("ok")
    lines.append(
        "- gpurpo and its subpackages import without array_api_compat: "
        + ("yes" if ok else f"NO\n\n```\n{proc.stderr[-2000:]}\n```")
    )
    from gpurpo import backend

    ok_gpu, why = backend._cupy._cupy_status()
    state["gpu"] = ok_gpu
    lines.append(f"- gpurpo.backend.cupy_available(): {ok_gpu} ({why})")
    if ok_gpu:
        info = device_info()
        state["device"] = info
        for k, v in info.items():
            lines.append(f"- {k}: {_fmt(v) if isinstance(v, float) else v}")
        lines.append(f"- gpurpo device_attributes(): {backend.CUPY.device_attributes()}")
        copy_bw = measured_copy_bandwidth()
        state["copy_bw"] = copy_bw
        lines.append(f"- measured device copy bandwidth: {copy_bw:.0f} GB/s (read + write)")
    return "\n".join(lines)


# --------------------------------------------------------------------------
# 2. tests
# --------------------------------------------------------------------------


def section_tests(timeout: float) -> str:
    # every test marked gpu (the CUDA kernels, Dask on GPUs, the label space, linear
    # algebra, metrics and device activity on CuPy arrays)
    cmd = [sys.executable, "-m", "pytest", "-m", "gpu", "-q", "-rA", "-p", "no:cacheprovider",
           "tests"]
    try:
        proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=timeout,
                              env=dict(os.environ, PYTHONPATH=str(ROOT)))
    except subprocess.TimeoutExpired as exc:
        out = (exc.stdout or b"")
        out = out.decode() if isinstance(out, bytes) else out
        return f"TIMEOUT after {timeout:.0f} s\n\n```\n{out[-6000:]}\n```"
    out = proc.stdout + proc.stderr
    summary = [ln for ln in out.splitlines() if re.search(r"\d+ (passed|failed|skipped|error)", ln)]
    return (
        f"`{' '.join(cmd[1:])}` -> exit code {proc.returncode}\n\n"
        f"**{summary[-1] if summary else 'no summary line'}**\n\n```\n{out[-8000:]}\n```"
    )


# --------------------------------------------------------------------------
# 3. histogram throughput
# --------------------------------------------------------------------------


def _time_gpu(fn: Callable[[], Any], reps: int = 5) -> float:
    import cupy

    fn()
    cupy.cuda.Device().synchronize()
    times = []
    for _ in range(reps):
        start, stop = cupy.cuda.Event(), cupy.cuda.Event()
        start.record()
        fn()
        stop.record()
        stop.synchronize()
        times.append(cupy.cuda.get_elapsed_time(start, stop) / 1e3)
    return statistics.median(times)


def histogram_batch(xp: Any, rng: Any, n: int, p: int, m: int, n_nodes: int, k: int,
                    unit: bool) -> tuple[Any, ...]:
    """Inputs of a ``tree_histograms`` call on ``n`` samples split evenly into ``n_nodes``.

    ``xp`` is CuPy (NumPy in the tests) and ``rng`` its generator. Each node
    gets ``k`` distinct features out of ``p``; targets are standard normal,
    weights ones (``unit``) or Poisson(1) bootstrap counts. Returns
    (weights, targets, sample_indices, node_ranges, node_features, node_tree).
    """
    import numpy as np

    weights = (xp.ones((1, n), dtype=xp.float32) if unit
               else rng.poisson(1.0, size=(1, n)).astype(xp.float32))
    targets = rng.standard_normal((n, 1, m), dtype=xp.float32)
    sample_indices = xp.arange(n, dtype=xp.int32)
    bounds = np.linspace(0, n, n_nodes + 1).astype(np.int64)
    node_ranges = xp.asarray(np.stack([bounds[:-1], bounds[1:]], axis=1))
    feats = np.stack([np.random.default_rng(i).choice(p, size=k, replace=False)
                      for i in range(n_nodes)]).astype(np.int32)
    node_tree = xp.zeros(n_nodes, dtype=xp.int32)
    return weights, targets, sample_indices, node_ranges, xp.asarray(feats), node_tree


def section_histograms(state: dict[str, Any], quick: bool) -> str:
    import cupy

    from gpurpo.backend import CUPY
    from gpurpo.tree import _kernels_cuda as kcuda
    from gpurpo.tree.kernels import NodeBatch

    attrs = CUPY.device_attributes()
    bw_theory = (state.get("device") or {}).get("bandwidth_theoretical_gbs")
    bw_copy = state.get("copy_bw")
    n = 1_000_000 if quick else 4_000_000
    p, m, n_bins = 64, 7, 256
    rng = cupy.random.default_rng(0)
    codes = rng.integers(0, n_bins, size=(p, n), dtype=cupy.int64).astype(cupy.uint8)
    rows = []
    for label, n_nodes, k, unit in (("1 root node, k=32, unit weights", 1, 32, True),
                                    ("1 root node, k=10, bootstrap weights", 1, 10, False),
                                    ("64 nodes (one level), k=8, bootstrap weights", 64, 8, False)):
        weights, targets, sample_indices, node_ranges, node_features, node_tree = (
            histogram_batch(cupy, rng, n, p, m, n_nodes, k, unit)
        )
        channels = m + 1 if unit else m + 2
        out = cupy.zeros((n_nodes, k, n_bins, channels), dtype=cupy.float32)

        def run(**plan_overrides: Any) -> None:
            out.fill(0)
            kcuda.histograms(CUPY, codes, NodeBatch(sample_indices, node_ranges, node_tree),
                             node_features, weights, targets, out, **plan_overrides)

        t = _time_gpu(run)
        # the same launches within the shared memory a block gets without opting in
        default_smem = attrs["max_shared_memory_per_block"]
        t_default = _time_gpu(lambda: run(shared_mem_bytes=default_smem))
        zero_t = _time_gpu(lambda: out.fill(0))
        t_kernel = max(t - zero_t, 1e-9)
        compulsory = n * (4 + 4 + 4 * m + k) + out.nbytes
        gbs = compulsory / t_kernel / 1e9
        plan = kcuda.histogram_launch_plan(attrs, n_nodes, k, n_bins, channels, n)
        rows.append({
            "batch": label,
            "samples": n,
            "kernel ms": 1e3 * t_kernel,
            f"kernel ms within {default_smem // 1024} KB shared": 1e3 * max(t_default - zero_t,
                                                                            1e-9),
            "compulsory GB": compulsory / 1e9,
            "GB/s": gbs,
            "% of theoretical BW": 100 * gbs / bw_theory if bw_theory else "n/a",
            "% of measured copy BW": 100 * gbs / bw_copy if bw_copy else "n/a",
            "plan": f"{plan['variant']}, grid {plan['grid']}, block {plan['block']}, "
                    f"chunks {plan['chunks']}, slot tile {plan.get('slot_tile', '-')}/{k}, "
                    f"shared {plan.get('shared_mem', 0) // 1024} KB",
        })
        del weights, targets, out
    for k in (p, max(1, round(p ** 0.5))):
        rows.append(_stored_rows_histograms(rng, n, p, m, n_bins, k))
    cupy.get_default_memory_pool().free_all_blocks()
    return (
        "Compulsory bytes per (node, sample): 4 (sample index) + 4 (weight) + 4m (targets) + "
        "k (codes), plus the histograms written. Target: 40% of the memory bandwidth. "
        "The last two rows: a text-like X (5 % of its codes listed; a sparse X, or a dense "
        "one of mostly zeros) read from its stored rows on all features (boosting) and on "
        "sqrt(p) of them (forests), against the same histograms from its dense codes.\n\n"
        + _table(rows)
    )


def stored_rows_batch(xp: Any, rng: Any, n: int, p: int, n_bins: int,
                      density: float = 0.05) -> tuple[Any, tuple[Any, ...]]:
    """A text-like X's dense codes (p, n) (a ``density`` of them listed, the others
    0, its features' code of 0.0) and its stored rows, the ``rows`` argument of
    ``tree_histograms``: ``(row_ptr, row_features, row_codes, zero_code)``.
    ``xp`` is CuPy (NumPy in the tests) and ``rng`` its generator."""
    listed = rng.random((n, p), dtype=xp.float32) < density
    row, feature = xp.nonzero(listed)  # rows increasing, then features
    del listed
    codes = xp.zeros((p, n), dtype=xp.uint8)
    codes[feature, row] = rng.integers(1, n_bins, size=row.size).astype(xp.uint8)
    row_ptr = xp.zeros(n + 1, dtype=xp.int64)
    row_ptr[1:] = xp.cumsum(xp.bincount(row, minlength=n))
    return codes, (row_ptr, feature.astype(xp.int32), codes[feature, row],
                   xp.zeros(p, dtype=xp.uint8))


def _stored_rows_histograms(rng: Any, n: int, p: int, m: int, n_bins: int,
                            k: int) -> dict[str, Any]:
    """Times the histograms of one root node on ``k`` of the ``p`` features of a
    text-like X (:func:`stored_rows_batch`) from its stored rows and from its dense
    codes; the two must be the same bits."""
    import cupy

    from gpurpo.backend import CUPY
    from gpurpo.tree import _kernels_cuda as kcuda
    from gpurpo.tree.kernels import NodeBatch

    codes, stored = stored_rows_batch(cupy, rng, n, p, n_bins)
    weights, targets, sample_indices, node_ranges, node_features, node_tree = (
        histogram_batch(cupy, rng, n, p, m, 1, k, False))
    batch = NodeBatch(sample_indices, node_ranges, node_tree)
    outs = [cupy.zeros((1, k, n_bins, m + 2), dtype=cupy.float32) for _ in range(2)]
    no_codes = cupy.empty((p, 0), dtype=cupy.uint8)

    def from_rows() -> None:
        outs[0].fill(0)
        kcuda.histograms(CUPY, no_codes, batch, node_features, weights, targets, outs[0],
                         stored)

    def from_codes() -> None:
        outs[1].fill(0)
        kcuda.histograms(CUPY, codes, batch, node_features, weights, targets, outs[1])

    t_rows, t_codes = _time_gpu(from_rows), _time_gpu(from_codes)
    plan = kcuda.histogram_launch_plan(CUPY.device_attributes(), 1, k, n_bins, m + 2, n,
                                       stored=True)
    return {
        "batch": f"1 root node, k={k} of {p}, stored rows ({int(stored[1].size)} entries)",
        "samples": n,
        "kernel ms": 1e3 * t_rows,
        "kernel ms from the dense codes": 1e3 * t_codes,
        "same bits": bool((outs[0] == outs[1]).all()),
        "plan": f"{plan['variant']}, grid {plan['grid']}, block {plan['block']}, "
                f"chunks {plan['chunks']}, slot tile {plan.get('slot_tile', '-')}/{k}, "
                f"shared {plan.get('shared_mem', 0) // 1024} KB",
    }


def node_stats_rows(backend: Any, xp: Any, rng: Any, n: int, m: int,
                    timer: Callable[[Callable[[], Any]], float],
                    p: int = 100) -> list[dict[str, Any]]:
    """Times ``tree_node_stats`` on the large nodes at the top of a tree: ``n`` samples
    of ``m`` targets split evenly into 1, 8 and 64 nodes, with one block per node and
    with the device's blocks shared among them (a growth's counters), and the growers'
    launch of the same statistics with the nodes' ``p`` candidate features drawn
    (``tree_level_large_setup``, shared blocks). ``xp`` and ``backend`` are CuPy's (the
    emulated device's in the tests), ``rng`` the generator of ``xp``, ``timer`` the time
    of one call in seconds."""
    import numpy as np

    from gpurpo.tree import _kernels_cuda as kcuda
    from gpurpo.tree import kernels, level_kernels

    rows = []
    for n_nodes in (1, 8, 64):
        weights, targets, sample_indices, node_ranges, _, node_tree = histogram_batch(
            xp, rng, n, 1, m, n_nodes, 1, False)
        counters = kernels.score_counters(backend, n_nodes)
        seed = xp.arange(1, n_nodes + 1, dtype=xp.uint64)
        draws = (xp.empty(n_nodes, dtype=xp.uint8), xp.empty(n_nodes, dtype=xp.float64),
                 xp.empty((n_nodes, p), dtype=xp.int32), xp.empty((n_nodes, p), dtype=xp.int64),
                 xp.empty((1, 1), dtype=xp.float64))
        outs = {}

        def run(shared: bool) -> None:
            outs[shared] = kernels.node_stats(backend, sample_indices, node_ranges, node_tree,
                                              weights, targets,
                                              node_done=counters if shared else None)

        def run_with_draws() -> None:
            level_kernels.launch(backend, "tree_level_large_setup", sample_indices,
                                 node_ranges, node_tree, weights, targets, counters, seed,
                                 xp.zeros(n_nodes, dtype=xp.int64), p, 0, 1, *draws)

        one, shared = timer(lambda: run(False)), timer(lambda: run(True))
        with_draws = timer(run_with_draws)
        impure = [np.asarray(backend.to_host(a)) for a in (outs[False][0], outs[True][0],
                                                           draws[0])]
        q = [np.asarray(backend.to_host(a)) for a in (outs[False][1], outs[True][1], draws[1])]
        rows.append({
            "nodes": n_nodes, "samples": n, "targets": m,
            "blocks per node": kcuda.node_stats_blocks(backend.device_attributes(), n_nodes,
                                                       True),
            "ms, one block per node": 1e3 * one, "ms, shared blocks": 1e3 * shared,
            "speed-up": one / shared if shared > 0 else "n/a",
            f"ms, shared, with {p} features drawn": 1e3 * with_draws,
            "same purity, Q within 1e-12": bool(
                all((a == impure[0]).all() for a in impure[1:])
                and all(np.allclose(a, q[0], rtol=1e-12) for a in q[1:])),
            "draws are a permutation": bool((np.sort(np.asarray(backend.to_host(draws[2])),
                                                     axis=1) == np.arange(p)).all()),
        })
        del weights, targets
    return rows


def section_node_stats(quick: bool) -> str:
    import cupy

    from gpurpo.backend import CUPY

    n, m = (310_000, 20) if quick else (1_000_000, 20)
    rows = node_stats_rows(CUPY, cupy, cupy.random.default_rng(2), n, m, _time_gpu)
    cupy.get_default_memory_pool().free_all_blocks()
    return ("tree_node_stats (purity and Q = sum w ||y||^2 of every node) on the large nodes "
            "at the top of a tree, one block per node against the device's blocks shared "
            "among the nodes (the growers' counters; the last block of a node adds the "
            "partial sums), and the growers' tree_level_large_setup, which also draws the "
            "nodes' candidate features in the same launch.\n\n" + _table(rows))


def _level_partition(backend: Any, xp: Any, codes: Any, samples: Any, bounds: Any,
                     parts: int) -> tuple[Any, Any]:
    """One level's ``tree_level_split`` and ``tree_level_children`` of the nodes
    ``bounds`` (all small-node choices: feature 0, bin 127, missing right) with ``parts``;
    returns the partitioned samples and the left counts."""
    import numpy as np

    from gpurpo.tree import level_kernels

    n_nodes = len(bounds) - 1
    n = int(codes.shape[1])
    i32, i64 = xp.int32, xp.int64
    front = xp.arange(n_nodes, dtype=i64)
    ranges = xp.asarray(np.stack([bounds[:-1], bounds[1:]], axis=1).astype(np.int64))
    small = (xp.zeros(n_nodes, dtype=i32), xp.full(n_nodes, 127, dtype=i32),
             xp.zeros(n_nodes, dtype=xp.uint8), xp.ones(n_nodes, dtype=xp.float64))
    tree = xp.zeros(n_nodes, dtype=i32)
    cap = 3 * n_nodes
    table = (xp.zeros(cap, dtype=i64), xp.zeros(cap, dtype=i64), xp.zeros(cap, dtype=i32),
             xp.zeros(cap, dtype=i32), xp.zeros(cap, dtype=xp.uint64), xp.zeros(cap, dtype=i64),
             xp.zeros(cap, dtype=i64), xp.zeros(cap, dtype=i64), xp.zeros(cap, dtype=i64),
             xp.zeros(cap, dtype=i32), xp.zeros(cap, dtype=i32), xp.zeros(cap, dtype=xp.uint8),
             xp.zeros(cap, dtype=xp.float64))
    dec = (xp.empty(n_nodes, dtype=i32), xp.empty(n_nodes, dtype=i32),
           xp.empty(n_nodes, dtype=xp.uint8), xp.empty(n_nodes, dtype=i64))
    code_args = (codes, xp.zeros(0, dtype=i64), xp.zeros(0, dtype=i32),
                 xp.zeros(0, dtype=xp.uint8), xp.zeros(codes.shape[0], dtype=xp.uint8))
    scratch = xp.empty(n, dtype=i32)
    part_left = xp.empty(n_nodes * parts, dtype=i64)
    level_kernels.launch(backend, "tree_level_split", *code_args, 255, samples, front, 0,
                         n_nodes, ranges, *small, xp.empty((0, 4), dtype=xp.float64), tree,
                         xp.full(1, float(n)), 1, 0.0, 1, table[9], table[10], table[11],
                         table[12], table[5], *dec, scratch, parts,
                         level_kernels.PART_MIN_SAMPLES, part_left)
    nxt = (xp.empty(2 * n_nodes, dtype=i64), xp.empty((3 * n_nodes, 2), dtype=i64),
           xp.empty(3 * n_nodes, dtype=i32), xp.empty(3 * n_nodes, dtype=xp.uint64),
           xp.empty(3 * n_nodes, dtype=i32), xp.empty(3 * n_nodes, dtype=i64),
           xp.empty(2 * n_nodes, dtype=i64), xp.empty(2 * n_nodes, dtype=i64),
           xp.empty(2 * n_nodes + 1, dtype=i64), xp.empty(7, dtype=i64))
    level_kernels.launch(backend, "tree_level_children", front, 0, n_nodes, 0, ranges, tree,
                         xp.zeros(n_nodes, dtype=i32), xp.zeros(n_nodes, dtype=xp.uint64),
                         dec[0], dec[3], 0, 0, 2, -1, n_nodes, *table, *nxt, *code_args, 255,
                         samples, scratch, dec[1], dec[2], parts,
                         level_kernels.PART_MIN_SAMPLES, part_left)
    return samples, dec[3]


def partition_rows(backend: Any, xp: Any, rng: Any, n: int,
                   timer: Callable[[Callable[[], Any]], float],
                   node_counts: tuple[int, ...] = (1, 8, 64, 1024)) -> list[dict[str, Any]]:
    """Times a level's partition (``tree_level_split`` then ``tree_level_children``) of
    ``n`` samples split evenly into ``node_counts`` nodes, their samples in
    increasing order either contiguous (a root: the codes read in order) or scattered
    over the rows (deeper nodes), with one block per node and with the nodes shared
    among the device's blocks in parts (``level_kernels.partition_parts``), against a
    device copy of the samples. Checks that both give the host's stable partition.
    ``xp`` and ``backend`` are CuPy's (the emulated device's in the tests), ``rng`` a
    NumPy generator, ``timer`` the time of one call in seconds."""
    import numpy as np

    from gpurpo.tree import level_kernels

    codes_h = rng.integers(0, 255, size=(2, n), dtype=np.uint8)
    codes = xp.asarray(codes_h)
    goes_left = codes_h[0] <= 127
    rows = []
    for layout in ("contiguous", "scattered"):
        for n_nodes in node_counts:
            bounds = np.linspace(0, n, n_nodes + 1).astype(np.int64)
            order = (np.arange(n, dtype=np.int32) if layout == "contiguous"
                     else rng.permutation(n).astype(np.int32))
            for a, b in zip(bounds[:-1], bounds[1:]):
                order[a:b].sort()
            expected = np.concatenate([
                np.concatenate([order[a:b][goes_left[order[a:b]]],
                                order[a:b][~goes_left[order[a:b]]]])
                for a, b in zip(bounds[:-1], bounds[1:])])
            counts = np.add.reduceat(goes_left[order].astype(np.int64), bounds[:-1])
            parts = level_kernels.partition_parts(backend, n_nodes)
            row = {"samples": layout, "nodes": n_nodes, "samples per node": n // n_nodes,
                   "parts": parts}
            right = True
            for k, label in ((1, "one block per node"), (parts, "in parts")):
                samples = xp.asarray(order)
                got, n_left = _level_partition(backend, xp, codes, samples, bounds, k)
                right = right and bool((np.asarray(backend.to_host(got)) == expected).all()
                                       and (np.asarray(backend.to_host(n_left)) == counts).all())
                t = timer(lambda: _level_partition(backend, xp, codes, samples, bounds, k))
                row[f"ms, {label}"] = 1e3 * t
            t_copy = timer(lambda: samples.copy())
            row["speed-up"] = (row["ms, one block per node"] / row["ms, in parts"]
                               if row["ms, in parts"] > 0 else "n/a")
            row["ms, a copy of the samples"] = 1e3 * t_copy
            row["stable, left counts right"] = right
            rows.append(row)
    return rows


def section_partition(quick: bool) -> str:
    import cupy
    import numpy as np

    from gpurpo.backend import CUPY

    n = 310_000 if quick else 1_000_000
    rows = partition_rows(CUPY, cupy, np.random.default_rng(3), n, _time_gpu)
    cupy.get_default_memory_pool().free_all_blocks()
    return ("A level's stable partition of its splitting nodes (`tree_level_split`, then "
            "`tree_level_children`, which places the samples of the nodes split in parts), "
            "with one block per node against the nodes shared among the device's blocks in "
            "parts of at least `PART_MIN_SAMPLES` samples: the few large nodes at the top of "
            "a tree and many smaller ones, against a device copy of the samples (the "
            "allocations of a level included).\n\n" + _table(rows))


def leaf_value_rows(backend: Any, xp: Any, rng: Any, n: int, trees: int,
                    cases: tuple[tuple[int, int], ...],
                    timer: Callable[[Callable[[], Any]], float]) -> list[dict[str, Any]]:
    """Times the dense leaf values of a batch of ``trees`` trees over ``n`` samples
    (:func:`gpurpo.tree.batch_leaves.stacked_leaf_values_dense`: a stable sort and
    ordered sums, the CPU's bits) for ``cases`` of (leaves per tree, float32 outputs),
    against per-tree scatter-adds (``xp.add.at``: atomics, the sums in any order) of
    the same values, and checks that the two agree within 1e-9. Bootstrap counts as
    weights. ``xp`` and ``backend`` are CuPy's (the emulated device's in the tests),
    ``rng`` a NumPy generator, ``timer`` the time of one call in seconds."""
    import numpy as np

    from gpurpo.tree.batch_leaves import stacked_leaf_values_dense

    weights = xp.asarray(rng.poisson(1.0, size=(trees, n)).astype(np.float32))
    rows = []
    for n_leaves, d in cases:
        Y = xp.asarray(rng.standard_normal((n, d)).astype(np.float32))
        leaf = xp.asarray(rng.integers(0, n_leaves, size=(trees, n)).astype(np.int32))
        leaf = xp.where(weights > 0, leaf, -1)
        counts = np.full(trees, n_leaves, dtype=np.int64)
        out = {}

        def ordered() -> None:
            out["ordered"] = stacked_leaf_values_dense(Y, leaf, weights, counts, backend)[0]

        def scattered() -> None:
            parts = []
            for t in range(trees):
                inside = leaf[t] >= 0
                w = xp.where(inside, weights[t], 0).astype(xp.float64)
                at = xp.where(inside, leaf[t], 0)
                sums = xp.zeros((n_leaves, d), dtype=xp.float64)
                xp.add.at(sums, at, w[:, None] * Y.astype(xp.float64))
                w_leaf = xp.zeros(n_leaves, dtype=xp.float64)
                xp.add.at(w_leaf, at, w)
                parts.append(sums / xp.where(w_leaf > 0, w_leaf, 1.0)[:, None])
            out["scattered"] = xp.concatenate(parts)

        t_ordered, t_scattered = timer(ordered), timer(scattered)
        a, b = (np.asarray(backend.to_host(out[k])) for k in ("ordered", "scattered"))
        rows.append({
            "trees": trees, "samples": n, "outputs": d, "leaves per tree": n_leaves,
            "ms, ordered sums": 1e3 * t_ordered, "ms, scatter-adds": 1e3 * t_scattered,
            "speed-up": t_scattered / t_ordered if t_ordered > 0 else "n/a",
            "agree within 1e-9": bool(np.allclose(a, b, rtol=1e-9, atol=1e-9)),
        })
    return rows


def section_leaf_values(quick: bool) -> str:
    import cupy
    import numpy as np

    from gpurpo.backend import CUPY

    n = 310_000 if quick else 1_000_000
    rows = leaf_value_rows(CUPY, cupy, np.random.default_rng(4), n, 8,
                           ((64, 5), (64, 101), (4096, 101), (n // 3, 101)), _time_gpu)
    cupy.get_default_memory_pool().free_all_blocks()
    return ("The dense leaf values of a forest batch (8 trees, float32 outputs, bootstrap "
            "counts): one stable sort of the (tree, sample) pairs by leaf and ordered sums "
            "(`tree_segment_row_sums`, the CPU's bits: one thread per (leaf, output), so "
            "few long leaves of few outputs are its slowest case), against per-tree "
            "scatter-adds (atomics), for shallow trees, medium ones and fully grown ones "
            "(about 3 samples a leaf).\n\n" + _table(rows))


# --------------------------------------------------------------------------
# 4. transfers during a fit
# --------------------------------------------------------------------------


def section_transfers(quick: bool) -> str:
    from unittest import mock

    import cupy

    import gpurpo.backend as gb
    from gpurpo.tree import DecisionTreeRegressor

    rng = cupy.random.default_rng(1)
    rows = []
    original = gb.Backend.to_host
    for n, depth in ((50_000, 10), (50_000 if quick else 200_000, None)):
        X = rng.standard_normal((n, 20))
        Y = rng.standard_normal((n, 8))
        calls: list[str] = []

        def counting(self: Any, a: Any, pinned: bool = False, calls: list[str] = calls) -> Any:
            calls.append(type(a).__module__)
            return original(self, a, pinned)

        t0 = time.perf_counter()
        with mock.patch.object(gb.Backend, "to_host", counting):
            model = DecisionTreeRegressor(max_depth=depth, random_state=0).fit(X, Y)
        cupy.cuda.Device().synchronize()
        levels = model.tree_.max_depth + 1
        rows.append({"n": n, "max_depth": depth, "levels": levels,
                     "nodes": model.tree_.node_count, "Backend.to_host calls": len(calls),
                     "per level": len(calls) / levels, "fit s": time.perf_counter() - t0})
    return ("Explicit device-to-host copies (Backend.to_host) during DecisionTreeRegressor.fit on "
            "CuPy inputs; implicit synchronisations (int()/bool() of device scalars) are not "
            "counted.\n\n" + _table(rows))


# --------------------------------------------------------------------------
# 5. randomized SVD
# --------------------------------------------------------------------------


def section_svd(quick: bool) -> str:
    import cupy
    import numpy as np

    from gpurpo.linalg import randomized_svd

    m_rows, n_cols, k, p, q = (5000, 1000, 20, 10, 4) if quick else (20000, 2000, 50, 10, 4)
    rng = np.random.default_rng(0)
    U0, _ = np.linalg.qr(rng.standard_normal((m_rows, 200)))
    V0, _ = np.linalg.qr(rng.standard_normal((n_cols, 200)))
    A = (U0 * (0.97 ** np.arange(200))) @ V0.T + 1e-3 * rng.standard_normal((m_rows, n_cols))
    A_dev = cupy.asarray(A)
    rows = []

    def timed(fn: Callable[[], Any], sync: Callable[[], None], reps: int = 3) -> tuple[float, Any]:
        out = fn()
        sync()
        times = []
        for _ in range(reps):
            t0 = time.perf_counter()
            out = fn()
            sync()
            times.append(time.perf_counter() - t0)
        return statistics.median(times), out

    gpu_sync = cupy.cuda.Device().synchronize
    t_gpu, (_, s_gpu, _) = timed(lambda: randomized_svd(A_dev, k, n_oversamples=p, n_iter=q,
                                                        random_state=0), gpu_sync)
    t_cpu, (_, s_cpu, _) = timed(lambda: randomized_svd(A, k, n_oversamples=p, n_iter=q,
                                                        random_state=0), lambda: None, reps=1)
    s_true = np.linalg.svd(A, compute_uv=False)[:k] if quick else None
    rows.append({"method": "gpurpo.linalg.randomized_svd (GPU, CuPy)", "s": t_gpu,
                 "speed-up vs CPU": t_cpu / t_gpu,
                 "max rel. diff of s vs CPU": float(np.max(np.abs(s_gpu.get() - s_cpu) / s_cpu))})
    rows.append({"method": "gpurpo.linalg.randomized_svd (CPU, NumPy)", "s": t_cpu,
                 "speed-up vs CPU": 1.0, "max rel. diff of s vs CPU": 0.0})
    try:
        import torch

        if torch.cuda.is_available():
            A_t = torch.from_dlpack(A_dev)

            def run_torch() -> Any:
                return torch.svd_lowrank(A_t, q=k + p, niter=q)

            t_torch, (_, s_t, _) = timed(run_torch, torch.cuda.synchronize)
            s_t = s_t[:k].cpu().numpy()
            rows.append({"method": f"torch.svd_lowrank (GPU, torch {torch.__version__})",
                         "s": t_torch, "speed-up vs CPU": t_cpu / t_torch,
                         "max rel. diff of s vs CPU": float(np.max(np.abs(s_t - s_cpu) / s_cpu))})
        else:
            rows.append({"method": "torch.svd_lowrank", "s": "torch sees no CUDA device"})
    except ImportError:
        rows.append({"method": "torch.svd_lowrank", "s": "torch not installed"})
    note = ""
    if s_true is not None:
        note = f"\nmax rel. error of the GPU singular values vs numpy.linalg.svd: " \
               f"{float(np.max(np.abs(s_gpu.get() - s_true) / s_true)):.2e}\n"
    return (f"Dense float64 A of shape ({m_rows}, {n_cols}), rank k = {k}, oversampling "
            f"p = {p}, power iterations q = {q} (torch: q = k + p, niter = q); median of 3 "
            f"after a warm-up (CPU: 1).\n\n" + _table(rows) + note)


# --------------------------------------------------------------------------
# 6. forest fit
# --------------------------------------------------------------------------


def _make_forest_data(path: Path, n: int, p: int, d: int, labels_per_row: int) -> None:
    """X float32 (n, p); Y CSR (n, d): the top labels of a linear score of 20 features."""
    import numpy as np

    try:
        import cupy as xp
    except ImportError:
        xp = np
    rng = np.random.default_rng(0)
    X = rng.standard_normal((n, p), dtype=np.float32)
    W = rng.standard_normal((20, d)).astype(np.float32)
    indices = np.empty((n, labels_per_row), dtype=np.int64)
    Wd = xp.asarray(W)
    for r0 in range(0, n, 100_000):
        Z = xp.asarray(X[r0:r0 + 100_000, :20]) @ Wd
        top = xp.argpartition(-Z, labels_per_row, axis=1)[:, :labels_per_row]
        top = xp.sort(top, axis=1)
        indices[r0:r0 + 100_000] = top.get() if hasattr(top, "get") else top
    np.savez(path, X=X, indices=indices, d=d)


_FOREST_CHILD = """
import json, sys, time
import numpy as np, scipy.sparse as sp
from gpurpo.backend import count_device_activity
from gpurpo.ensemble import RandomForestClassifier
device, n_trees, path = sys.argv[1], int(sys.argv[2]), sys.argv[3]
data = np.load(path)
X, ind, d = data["X"], data["indices"], int(data["d"])
n, r = ind.shape
Y = sp.csr_matrix((np.ones(n * r), ind.ravel(), np.arange(0, n * r + 1, r)), shape=(n, d))
def forest(trees):
    return RandomForestClassifier(n_estimators=trees, projection="gaussian", n_components=7,
                                  max_features="sqrt", random_state=0, device=device)
# warm-up on a slice, with as many trees (the same batching): kernels compiled or loaded;
# 10,000 rows, so that bootstrap roots exceed the CPU's small-node size (4,096 unique
# samples) and the CPU path compiles its large-node kernels here, not in the timed fit
forest(n_trees).fit(X[:10_000], Y[:10_000])
model = forest(n_trees)
t0 = time.perf_counter()
with count_device_activity() as activity:
    model.fit(X, Y)
if device == "cuda":
    import cupy
    cupy.cuda.Device().synchronize()
fit = time.perf_counter() - t0
print(json.dumps({"device": device, "trees": n_trees, "fit_s": fit, **activity.as_dict()}))
"""


def _run_child(script: str, args: list[str], timeout: float, tag: dict[str, Any]) -> dict[str, Any]:
    """Run ``script`` in a child Python; its last JSON line, or ``tag`` with an error."""
    if timeout < 5:
        return {**tag, "error": "no time left in the budget"}
    try:
        proc = subprocess.run(
            [sys.executable, "-c", script, *args],
            cwd=ROOT, capture_output=True, text=True, timeout=timeout,
            env=dict(os.environ, PYTHONPATH=str(ROOT)),
        )
    except subprocess.TimeoutExpired:
        return {**tag, "error": f"timeout after {timeout:.0f} s"}
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if proc.returncode != 0 or not lines:
        return {**tag, "error": f"exit {proc.returncode}: {proc.stderr[-1500:]}"}
    return json.loads(lines[-1])


ACTIVITY_NOTE = ("Device activity (gpurpo.backend.count_device_activity) of the GPU fits: "
                 "on CuPy, launches of the kernels/*.cu kernels and calls of the array "
                 "namespace, and the copies of Backend.asarray/to_host; CuPy's operators, "
                 "methods, indexing and scalar conversions are not seen there (the emulated "
                 "backend counts them: bench/host_overhead.py).")


def _activity_columns(res: dict[str, Any], per: int, unit: str) -> dict[str, Any]:
    """Counters of a GPU fit per tree or round (none for the CPU, which has no device)."""
    if res.get("device") != "cuda" or "launches" not in res:
        return {}
    return {f"{name} per {unit}": res[name] / per for name in ("launches", "d2h", "h2d", "syncs")}


def _cpu_forest_trees(quick: bool) -> int:
    """Trees of a timed CPU-path forest: one per host core (at least 2; 10 with ``quick``).

    The CPU path grows one tree per thread, so a forest of fewer trees than cores leaves
    cores idle and its time per tree overstates that of the full forest.
    """
    return 10 if quick else max(2, _host_cores())


def _forest_child(device: str, n_trees: int, path: Path, timeout: float) -> dict[str, Any]:
    return _run_child(_FOREST_CHILD, [device, str(n_trees), str(path)], timeout,
                      {"device": device, "trees": n_trees})


def section_forest(quick: bool, deadline: float, reserve: float) -> str:
    n, p, d, r = (100_000, 100, 1000, 5) if quick else (1_000_000, 100, 1000, 5)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "forest.npz"
        t0 = time.perf_counter()
        _make_forest_data(path, n, p, d, r)
        gen = time.perf_counter() - t0
        results = []

        def left() -> float:
            return deadline - time.perf_counter()

        # GPU: 10 trees first; the full 100 when that extrapolates into the budget
        g10 = _forest_child("cuda", 10, path, min(240.0, 0.45 * left()))
        results.append(g10)
        if "fit_s" in g10 and 10 * g10["fit_s"] < 0.4 * left():
            results.append(_forest_child("cuda", 100, path, min(300.0, 0.5 * left())))
        # CPU: one tree per host core, so that the forest keeps every core busy as the
        # full 100-tree forest would (two trees on 16 cores gave a per-tree time 5x too long)
        cpu_trees = _cpu_forest_trees(quick)
        results.append(_forest_child("cpu", cpu_trees, path, max(0.0, left() - reserve)))
    rows = []
    per_tree: dict[str, float] = {}
    for res in results:
        row = {"device": res["device"], "trees": res["trees"]}
        if "fit_s" in res:
            row["fit s"] = res["fit_s"]
            row["s per tree"] = res["fit_s"] / res["trees"]
            row.update(_activity_columns(res, res["trees"], "tree"))
            per_tree[res["device"]] = min(per_tree.get(res["device"], 1e300), row["s per tree"])
        else:
            row["fit s"] = res["error"]
        rows.append(row)
    ratio = ""
    if "cuda" in per_tree and "cpu" in per_tree:
        ratio = (f"\n**GPU speed-up per tree: {per_tree['cpu'] / per_tree['cuda']:.1f}x** "
                 "(target: at least 20x)\n")
    return (f"RandomForestClassifier(projection='gaussian', n_components=7, max_features='sqrt') "
            f"on n = {n}, p = {p}, d = {d} sparse labels ({r} per row), fully grown trees; "
            f"data generated in {gen:.1f} s. Each fit is a child process; CPU and GPU on this "
            f"machine ({_host_cores()} CPU cores). {ACTIVITY_NOTE}\n\n" + _table(rows) + ratio)


# --------------------------------------------------------------------------
# 7. bench/forest.py's forests at ten times the rows
# --------------------------------------------------------------------------


def _run_bench_script(cmd: list[str], path: Path, timeout: float) -> tuple[Any, str | None]:
    """Run a ``bench/`` script that writes JSON to ``path``: (its results, None), or
    (None, the report's text on its timeout or failure)."""
    try:
        proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=timeout,
                              env=dict(os.environ, PYTHONPATH=str(ROOT)))
    except subprocess.TimeoutExpired as exc:
        out = exc.stdout.decode() if isinstance(exc.stdout, bytes) else (exc.stdout or "")
        return None, f"TIMEOUT after {timeout:.0f} s\n\n```\n{out[-3000:]}\n```\n"
    if proc.returncode != 0 or not path.exists():
        return None, (f"FAILED (exit {proc.returncode})\n\n```\n"
                      f"{(proc.stdout + proc.stderr)[-3000:]}\n```\n")
    return json.loads(path.read_text()), None


def section_forest_rows(quick: bool, deadline: float, reserve: float,
                        devices: str = "cuda,cpu") -> str:
    """``bench/forest.py`` at ten times the rows (twice with ``quick``), GPU against CPU path.

    ``devices`` names gpurpo's two devices, the first fitting the full forest
    (``"cpu,cpu"`` tries the section on a machine without a GPU).
    """
    factor, trees, cpu_trees = (2, 20, 2) if quick else (10, 100, _cpu_forest_trees(quick))
    timeout = min(360.0, deadline - time.perf_counter() - reserve)
    if timeout < 30:
        return "Not run: no time left in the budget.\n"
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "forest.json"
        cmd = [sys.executable, str(ROOT / "bench" / "forest.py"), "--rows-factor", str(factor),
               "--devices", devices, "--trees", str(trees), "--cpu-trees", str(cpu_trees),
               "--skip-proj", "--skip-full", "--n-jobs", "-1", "--features", "continuous",
               "--labels", "csr", "--output", str(path)]
        if quick:
            cmd.append("--quick")
        results, failure = _run_bench_script(cmd, path, timeout)
        if failure is not None:
            return failure
    rows = []
    for res in results["figures"]:  # a record of bench/_results.py
        gpu_tree = res["gpurpo_fit_s"] / res["gpurpo_trees"]
        cpu_tree = res["gpurpo_1_cpu_fit_s"] / res["gpurpo_1_cpu_trees"]
        rows.append({
            "data": res["dataset"], "n train": res["n_train"], "p": res["p"], "d": res["d"],
            "GPU trees": res["gpurpo_trees"], "GPU s per tree": gpu_tree,
            "GPU test LRAP": res["gpurpo_lrap"],
            "CPU trees": res["gpurpo_1_cpu_trees"], "CPU s per tree": cpu_tree,
            "CPU test LRAP": res["gpurpo_1_cpu_lrap"],
            "GPU speed-up per tree": cpu_tree / gpu_tree,
        })
    return (f"`{' '.join(cmd[1:]).replace(str(ROOT) + '/', '')}`: gpurpo's forests of bench/forest.py "
            f"(Gaussian m = round(ln d), max_features = sqrt, fully grown, bootstrap) at {factor}x "
            f"the rows; the CPU path on all {_host_cores()} host cores with fewer trees (its "
            f"LRAP is that of fewer trees). One process, same data.\n\n" + _table(rows))


def section_sparse_forest(quick: bool, deadline: float, device: str = "cuda") -> str:
    """``bench/sparse_forest.py`` with gpurpo on ``device``: a forest on text-like sparse X
    against scikit-learn's trees on the same projections, both on all host cores."""
    timeout = min(150.0, deadline - time.perf_counter())
    if timeout < 30:
        return "Not run: no time left in the budget.\n"
    threads = _host_cores()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "sparse.json"
        cmd = [sys.executable, str(ROOT / "bench" / "sparse_forest.py"), "--device", device,
               "--rows", "2000" if quick else "5000", "--n-jobs", str(threads),
               "--output", str(path)]
        record, failure = _run_bench_script(cmd, path, timeout)
        if failure is not None:
            return failure
    res = record["figures"][0]  # a record of bench/_results.py
    row = {"n train": res["rows"], "p": res["features"], "density": res["density"],
           "trees": res["trees"], f"gpurpo ({device}) s": res["gpurpo_s"],
           "scikit-learn s": res["sk_proj_s"], "speed-up": res["sk_proj_s"] / res["gpurpo_s"],
           "gpurpo LRAP": res["gpurpo_lrap"], "scikit-learn LRAP": res["sk_proj_lrap"],
           "gpurpo predict s": res["gpurpo_predict_s"],
           "scikit-learn predict s": res["sk_proj_predict_s"],
           "gpurpo predict 10 rows s": res["gpurpo_predict_small_s"],
           "scikit-learn predict 10 rows s": res["sk_proj_predict_small_s"]}
    return (f"`{' '.join(cmd[1:]).replace(str(ROOT) + '/', '')}`: text-like sparse X, "
            f"Gaussian m = 7, max_features = sqrt, fully grown; scikit-learn on the same "
            f"projections with {threads} threads; predict: the 1,000 test rows, best of 3, "
            f"and 10 of them, best of 20. One process, same data.\n\n" + _table([row]))


# --------------------------------------------------------------------------
# 8. boosting fit
# --------------------------------------------------------------------------

_BOOST_CHILD = """
import json, sys, time
import numpy as np
from gpurpo.backend import count_device_activity
from gpurpo.datasets import make_mediamill_like
from gpurpo.ensemble import GradientBoostingClassifier
from gpurpo.metrics import label_ranking_average_precision
device, rounds, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
config = json.loads(sys.argv[4])
X, Y = make_mediamill_like(random_state=0, n_samples=n)
Y = Y.toarray()
n_test = n // 5
X, Xt, Y, Yt = X[n_test:], X[:n_test], Y[n_test:], Y[:n_test]
params = dict(strategy="relabel_rpo", max_leaf_nodes=31, learning_rate=0.1, random_state=0,
              device=device, **config)
GradientBoostingClassifier(**{**params, "n_estimators": 2}).fit(X[:500], Y[:500])
model = GradientBoostingClassifier(**{**params, "n_estimators": rounds})
t0 = time.perf_counter()
with count_device_activity() as activity:
    model.fit(X, Y)
if device == "cuda":
    import cupy
    cupy.cuda.Device().synchronize()
fit = time.perf_counter() - t0
proba = model.predict_proba(Xt)
proba = proba.get() if hasattr(proba, "get") else np.asarray(proba)
print(json.dumps({"device": device, "rounds": rounds, "fit_s": fit,
                  "lrap": float(label_ranking_average_precision(Yt, proba)),
                  **activity.as_dict()}))
"""


# the boosting configurations timed: the paper's Gaussian relabel_rpo, and the exact
# second-order splits on 50 subsampled outputs (the CPU's fastest at XGBoost's accuracy)
BOOSTING_CONFIGS = (
    {"projection": "gaussian", "n_components": 20},
    {"projection": "subsample", "n_components": 50, "split_criterion": "newton"},
)


def section_boosting(quick: bool, deadline: float) -> str:
    n = 40_000 if quick else 310_000
    rounds = {"cuda": 30 if quick else 100, "cpu": 5 if quick else 10}
    runs = [(config, device) for config in BOOSTING_CONFIGS for device in ("cuda", "cpu")]
    rows, ratios = [], []
    for index, (config, device) in enumerate(runs):
        budget = min(300.0, (deadline - time.perf_counter()) / (len(runs) - index))
        res = _run_child(_BOOST_CHILD, [device, str(rounds[device]), str(n), json.dumps(config)],
                         budget, {"device": device, "rounds": rounds[device]})
        label = ", ".join(f"{k}={v}" for k, v in config.items())
        row = {"configuration": label, "device": res["device"], "rounds": res["rounds"]}
        if "fit_s" in res:
            row.update({"fit s": res["fit_s"], "s per round": res["fit_s"] / res["rounds"],
                        "test LRAP": res["lrap"]})
            row.update(_activity_columns(res, res["rounds"], "round"))
        else:
            row["fit s"] = res["error"]
        rows.append(row)
    for config in BOOSTING_CONFIGS:
        label = ", ".join(f"{k}={v}" for k, v in config.items())
        per_round = {r["device"]: r["s per round"] for r in rows
                     if r["configuration"] == label and "s per round" in r}
        if len(per_round) == 2:
            ratios.append(f"**GPU speed-up per round ({label}): "
                          f"{per_round['cpu'] / per_round['cuda']:.1f}x**")
    return (f"GradientBoostingClassifier(strategy='relabel_rpo', max_leaf_nodes=31, log loss) "
            f"on mediamill-shaped data, n = {n} (20 % held out), p = 120, d = 101, in two "
            f"configurations; the CPU runs fewer rounds (its LRAP is not comparable to the "
            f"GPU's), per-round times are. Each fit is a child process. {ACTIVITY_NOTE}\n\n"
            + _table(rows) + ("\n" + "\n\n".join(ratios) + "\n" if ratios else ""))


# --------------------------------------------------------------------------
# main
# --------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes (about 2 minutes)")
    parser.add_argument("--skip-tests", action="store_true", help="benchmarks only")
    parser.add_argument("--out", default=str(ROOT / "bench" / "results"), help="report folder")
    parser.add_argument("--budget", type=float, default=TOTAL_BUDGET_S,
                        help=f"seconds for the whole run (default {TOTAL_BUDGET_S}); the tests "
                             "get at most 50 %% of it (300 s), the boosting section 25 %%, the "
                             "forests at ten times the rows 20 %% (from 480 s on)")
    args = parser.parse_args(argv)
    if args.budget < 60:
        parser.error(f"--budget must be at least 60 seconds, got {args.budget}")
    state: dict[str, Any] = {}

    def write(report: Report, final: bool) -> Path:
        device = (state.get("device") or {}).get("name", "no-gpu")
        slug = re.sub(r"[^A-Za-z0-9]+", "-", device).strip("-")
        out_dir = Path(args.out)
        out_dir.mkdir(parents=True, exist_ok=True)
        path = out_dir / f"gpu-check-{slug}{'-quick' if args.quick else ''}.md"
        # only a finished run names its commit as "git <hash>", which
        # .ci/gpu_verification.py reads as verified
        verified = (f"git {_git_rev()}" if final else
                    f"unfinished after {len(report.sections)} sections, commit {_git_rev()}")
        header = (
            f"# gpurpo GPU check: {device}\n\n"
            f"{time.strftime('%Y-%m-%d %H:%M:%S %Z')}, `bash bench/gpu_check.sh"
            f"{' --quick' if args.quick else ''}"
            f"{f' --budget {args.budget:g}' if args.budget != TOTAL_BUDGET_S else ''}`, "
            f"total {report.elapsed():.0f} s, {verified}\n"
        )
        path.write_text(report.markdown(header))
        return path

    report = Report(write)
    deadline = time.perf_counter() + args.budget
    # the GPU suite took 133 s on an H200 (kernel compilation included); on a fresh machine
    # with cold numba and NVRTC caches, 19 of its then 36 tests ran in 210 s (numba and
    # NVRTC compiling from cold), all 36 in 42 s once compiled
    tests_timeout = min(180.0 if args.quick else 300.0, 0.5 * args.budget)
    report.run("Environment", lambda: section_environment(state))
    if not state.get("gpu"):
        report.add("Skipped", "No working CUDA device (see above): GPU tests and benchmarks "
                              "were not run.")
    else:
        if not args.skip_tests:
            report.run("GPU tests", lambda: section_tests(timeout=tests_timeout))
        report.run("Histogram kernel throughput", lambda: section_histograms(state, args.quick))
        report.run("Node statistics of large nodes", lambda: section_node_stats(args.quick))
        report.run("Partition of large nodes", lambda: section_partition(args.quick))
        report.run("Leaf values of a forest batch", lambda: section_leaf_values(args.quick))
        report.run("Device-to-host transfers during a tree fit",
                   lambda: section_transfers(args.quick))
        report.run("Randomized SVD", lambda: section_svd(args.quick))
        # the forests at ten times the rows get their share only from ROWS_MIN_BUDGET_S on:
        # below it, their reserve would leave the large forest no time for its CPU fit
        with_rows = args.quick or args.budget >= ROWS_MIN_BUDGET_S
        reserve = (BOOSTING_RESERVE + (ROWS_RESERVE if with_rows else 0.0)) * args.budget
        report.run("Forest fit, GPU vs CPU", lambda: section_forest(args.quick, deadline,
                                                                reserve))
        if with_rows:
            report.run("Forests at ten times the rows (bench/forest.py), GPU vs CPU",
                       lambda: section_forest_rows(args.quick, deadline,
                                                   BOOSTING_RESERVE * args.budget))
        else:
            report.add("Forests at ten times the rows (bench/forest.py), GPU vs CPU",
                       f"Not run: needs --budget {ROWS_MIN_BUDGET_S:g} or more.")
        report.run("Boosting fit, GPU vs CPU", lambda: section_boosting(args.quick, deadline))
        report.run("Forest on text-like sparse X, GPU vs scikit-learn",
                   lambda: section_sparse_forest(args.quick, deadline))
    path = write(report, True)
    print(f"\nreport written to {path}")
    return 0


def _git_rev() -> str:
    """The commit this run verified (``.ci/gpu_verification.py`` reads it), flagged when the tree has changes."""
    with contextlib.suppress(Exception):
        rev = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                             text=True, timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT,
                               capture_output=True, text=True, timeout=10).stdout.strip()
        if rev:
            return f"{rev} (with uncommitted changes)" if dirty else rev
    return "unknown"


if __name__ == "__main__":
    sys.exit(main())
