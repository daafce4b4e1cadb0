"""Where the GPU time of a fit goes: host profile and the GPU time of each kernel.

Run on a machine with an NVIDIA GPU, from the source tree::

    python bench/gpu_profile.py --out bench/results/profile      # about 2 minutes
    python bench/gpu_profile.py --sections forest,boosting        # the fits only
    python bench/gpu_profile.py --sections boosting-newton        # second-order splits

For each fit (a random forest on the data of ``bench/gpu_check.py``'s forest
section, and multi-label boosting on mediamill-shaped data), after a warm-up
fit that compiles and loads the kernels:

* the wall time of the fit and the number of growth levels;
* a host profile (``cProfile``): the Python functions by cumulative and by own
  time. Device work is asynchronous, so its time shows up where the host
  waits for it (``Backend.to_host``, ``int()`` of device scalars);
* when PyTorch is installed, a device profile through ``torch.profiler``
  (CUPTI records every kernel of the process, CuPy's included): kernels by
  total GPU time, with launch counts, and the total GPU time against
  the wall time (a small ratio means launch and host overhead dominate);
* the histogram-kernel variants of ``bench/gpu_histogram_variants.cu``
  timed against the library kernel on large nodes (their sums checked against
  the library's), and whether NVRTC/nvcc turn a float ``atomicAdd`` on shared
  memory into a native instruction or a compare-and-swap loop.

The report is written to ``<out>/<date>-gpu-profile.md``.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import re
import shutil
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any
from unittest import mock

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from gpu_check import _make_forest_data, _table, _time_gpu, histogram_batch  # noqa: E402

VARIANTS = ROOT / "bench" / "gpu_histogram_variants.cu"


def _sync() -> None:
    import cupy

    cupy.cuda.Device().synchronize()


def host_profile(fit: Callable[[], Any], rows: int = 30) -> tuple[float, str]:
    """Wall time of ``fit()`` under cProfile and the two tables."""
    prof = cProfile.Profile()
    t0 = time.perf_counter()
    prof.enable()
    fit()
    _sync()
    prof.disable()
    wall = time.perf_counter() - t0
    out = io.StringIO()
    stats = pstats.Stats(prof, stream=out)
    stats.strip_dirs().sort_stats("cumulative").print_stats(rows)
    stats.sort_stats("tottime").print_stats(rows)
    return wall, out.getvalue()


def device_profile(fit: Callable[[], Any], rows: int = 25) -> str:
    """Per-kernel GPU kernel times of ``fit()`` through torch.profiler, if present."""
    try:
        import torch
        from torch.profiler import ProfilerActivity, profile
    except ImportError:
        return "torch is not installed: no device profile\n"
    if not torch.cuda.is_available():
        return "torch sees no CUDA device: no device profile\n"
    torch.cuda.init()
    t0 = time.perf_counter()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        fit()
        _sync()
    wall = time.perf_counter() - t0
    events = prof.key_averages()
    total_us = 0.0
    kernels = 0
    for ev in events:
        dev = getattr(ev, "self_device_time_total", None)
        if dev is None:
            dev = getattr(ev, "self_cuda_time_total", 0.0)
        if dev and getattr(ev, "device_type", None) is not None and "CUDA" in str(ev.device_type):
            total_us += dev
            kernels += ev.count
    table = ""
    for key in ("self_device_time_total", "self_cuda_time_total"):
        try:
            table = events.table(sort_by=key, row_limit=rows, max_name_column_width=70)
            break
        except Exception:  # older/newer torch names the column differently
            continue
    return (f"wall under the profiler {wall:.2f} s; GPU time of all kernels and copies "
            f"{total_us / 1e6:.2f} s in {kernels} launches "
            f"({100 * total_us / 1e6 / wall:.0f} % of the wall time)\n\n```\n{table}\n```\n")


def _guarded(profiler: Callable[[Callable[[], Any]], str], fit: Callable[[], Any]) -> str:
    try:
        return profiler(fit)
    except Exception:  # the host profile above is still worth reporting
        return "FAILED:\n\n```\n" + traceback.format_exc()[-3000:] + "```\n"


def _cpu_speedup(warm_up: Callable[[], Any], fit: Callable[[], Any], units: int,
                 gpu_per_unit: float, unit: str) -> str:
    """Report line: the CPU path's time per ``unit`` (after a warm-up) and the GPU speed-up."""
    warm_up()
    t0 = time.perf_counter()
    fit()
    per_unit = (time.perf_counter() - t0) / units
    return (f"- CPU path on this machine, {units} {unit}s: {per_unit:.3f} s per {unit}; "
            f"**GPU speed-up per {unit} {per_unit / gpu_per_unit:.1f}x**\n")


def profile_forest(n: int, trees: int, cpu_trees: int = 0) -> str:
    import numpy as np
    import scipy.sparse as sp

    from gpurpo.ensemble import RandomForestClassifier

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "forest.npz"
        _make_forest_data(path, n, 100, 1000, 5)
        data = np.load(path)
        X, ind, d = data["X"], data["indices"], int(data["d"])
    rows, per_row = ind.shape
    Y = sp.csr_matrix((np.ones(rows * per_row), ind.ravel(),
                       np.arange(0, rows * per_row + 1, per_row)), shape=(rows, d))

    def forest(n_trees: int = trees, device: str = "cuda") -> Any:
        return RandomForestClassifier(n_estimators=n_trees, projection="gaussian", n_components=7,
                                      max_features="sqrt", random_state=0, device=device)

    forest().fit(X[:2000], Y[:2000])
    _sync()
    t0 = time.perf_counter()
    model = forest().fit(X, Y)
    _sync()
    plain = time.perf_counter() - t0
    try:
        depths = [int(getattr(est, "tree_", est).max_depth) for est in model.estimators_[:8]]
    except Exception as exc:  # the depth is context, not the measurement
        depths = [f"unknown ({exc.__class__.__name__})"]
    # A/B in the same run: the same forest grown level-wise to the leaves (no subtree kernel)
    with mock.patch("gpurpo.tree.grower.default_subtree_size", return_value=0):
        _sync()
        t0 = time.perf_counter()
        forest().fit(X, Y)
        _sync()
        levelwise = time.perf_counter() - t0
    wall, host = host_profile(lambda: forest().fit(X, Y))
    device = _guarded(device_profile, lambda: forest().fit(X, Y))
    cpu = ""
    if cpu_trees > 0:
        # the CPU warm-up on 10,000 rows: bootstrap roots above the CPU's small-node size
        # (4,096 unique samples), so that its large-node kernels compile before the timing
        cpu = _cpu_speedup(lambda: forest(cpu_trees, "cpu").fit(X[:10_000], Y[:10_000]),
                           lambda: forest(cpu_trees, "cpu").fit(X, Y), cpu_trees,
                           plain / trees, "tree")
    return (f"RandomForestClassifier(n_estimators={trees}, gaussian m = 7, max_features='sqrt', "
            f"device='cuda') on n = {n}, p = 100, d = 1000 (5 labels per row)\n\n"
            f"- fit {plain:.2f} s ({plain / trees:.3f} s per tree); under cProfile {wall:.2f} s\n"
            f"- level-wise to the leaves (subtree kernel off): {levelwise:.2f} s; "
            f"**subtree kernel speed-up {levelwise / plain:.2f}x**\n"
            f"- tree depths: {depths[:8]}\n{cpu}\n### host profile\n\n```\n{host[-12000:]}\n```\n\n"
            f"### device profile\n\n{device}")


#: boosting configurations of the profile: the paper's Gaussian relabel_rpo, and the
#: exact second-order splits on 50 subsampled outputs
BOOSTING_CONFIGS = {
    "boosting": {"projection": "gaussian", "n_components": 20},
    "boosting-newton": {"projection": "subsample", "n_components": 50,
                        "split_criterion": "newton"},
}


def profile_boosting(n: int, rounds: int, cpu_rounds: int = 0, config: str = "boosting") -> str:
    from gpurpo.datasets import make_mediamill_like
    from gpurpo.ensemble import GradientBoostingClassifier

    X, Y = make_mediamill_like(random_state=0, n_samples=n)
    Y = Y.toarray()
    params = dict(strategy="relabel_rpo", max_leaf_nodes=31, learning_rate=0.1,
                  random_state=0, device="cuda", **BOOSTING_CONFIGS[config])
    GradientBoostingClassifier(**{**params, "n_estimators": 2}).fit(X[:500], Y[:500])
    _sync()

    def fit(n_rounds: int = rounds, device: str = "cuda") -> Any:
        return GradientBoostingClassifier(
            **{**params, "n_estimators": n_rounds, "device": device}
        ).fit(X, Y)

    t0 = time.perf_counter()
    fit()
    _sync()
    plain = time.perf_counter() - t0
    wall, host = host_profile(fit)
    device = _guarded(device_profile, fit)
    cpu = ""
    if cpu_rounds > 0:
        cpu = _cpu_speedup(
            lambda: GradientBoostingClassifier(**{**params, "n_estimators": 2, "device": "cpu"})
            .fit(X[:500], Y[:500]),
            lambda: fit(cpu_rounds, "cpu"), cpu_rounds, plain / rounds, "round",
        )
    label = ", ".join(f"{k}={v}" for k, v in BOOSTING_CONFIGS[config].items())
    return (f"GradientBoostingClassifier(relabel_rpo, {label}, max_leaf_nodes=31, "
            f"{rounds} rounds, device='cuda') on mediamill-shaped n = {n}\n\n"
            f"- fit {plain:.2f} s ({plain / rounds:.3f} s per round); under cProfile "
            f"{wall:.2f} s\n{cpu}\n### host profile\n\n```\n{host[-12000:]}\n```\n\n"
            f"### device profile\n\n{device}")


def histogram_variants() -> str:
    """Library histogram kernel against the experimental variants, same inputs."""
    import cupy
    import numpy as np

    from gpurpo.backend import CUPY
    from gpurpo.tree import _kernels_cuda as kcuda
    from gpurpo.tree.kernels import NodeBatch

    module = cupy.RawModule(code=VARIANTS.read_text(), options=("--std=c++17",))
    attrs = CUPY.device_attributes()
    n, p, m, n_bins = 4_000_000, 64, 7, 256
    rng = cupy.random.default_rng(0)
    codes = rng.integers(0, n_bins, size=(p, n), dtype=cupy.int64).astype(cupy.uint8)
    # exponentially distributed bins: a few bins hold most samples (atomics collide)
    skewed = cupy.minimum(-3.0 * cupy.log(rng.random((p, n))), n_bins - 1).astype(cupy.uint8)
    rows = []
    for label, data, n_nodes, k in (("1 node, k=32, uniform bins", codes, 1, 32),
                                    ("1 node, k=32, skewed bins", skewed, 1, 32),
                                    ("64 nodes, k=8, uniform bins", codes, 64, 8)):
        weights, targets, sample_indices, node_ranges, node_features, node_tree = (
            histogram_batch(cupy, rng, n, p, m, n_nodes, k, unit=False)
        )
        C = m + 2
        ref = cupy.zeros((n_nodes, k, n_bins, C), dtype=cupy.float32)

        def library() -> None:
            ref.fill(0)
            kcuda.histograms(CUPY, data, NodeBatch(sample_indices, node_ranges, node_tree),
                             node_features, weights, targets, ref)

        zero_t = _time_gpu(lambda: ref.fill(0), reps=7)
        t_lib = _time_gpu(library, reps=7) - zero_t
        row: dict[str, Any] = {"batch": label, "library ms": 1e3 * t_lib}
        plan = kcuda.histogram_launch_plan(attrs, n_nodes, k, n_bins, C, n)
        for name in ("hist_sample_major", "hist_lanes_int_ceiling"):
            out = cupy.zeros_like(ref)
            kernel = module.get_function(name)
            if plan["shared_mem"] > attrs["max_shared_memory_per_block"]:
                kernel.max_dynamic_shared_size_bytes = plan["shared_mem"]
            args = (data, sample_indices, node_ranges, node_features, node_tree, weights, targets,
                    out, np.int64(n), np.int32(k), np.int32(n_bins), np.int32(C), np.int32(m),
                    np.int32(1), np.int32(plan["slot_tile"]), np.int32(plan["chan_tile"]),
                    np.int32(plan["n_slot_tiles"]), np.int32(plan["n_chan_tiles"]),
                    np.int32(plan["chunks"]))

            def run(kernel: Any = kernel, args: tuple = args, out: Any = out) -> None:
                out.fill(0)
                kernel((plan["grid"],), (plan["block"],), args, shared_mem=plan["shared_mem"])

            t = _time_gpu(run, reps=7) - zero_t
            if name.endswith("ceiling"):
                row[f"{name} ms (sums not exact)"] = 1e3 * t
            else:
                err = float(cupy.max(cupy.abs(out - ref)) / max(float(cupy.max(cupy.abs(ref))), 1))
                row[f"{name} ms"] = 1e3 * t
                row[f"{name} rel. err"] = err
        rows.append(row)
        del weights, targets, ref
    cupy.get_default_memory_pool().free_all_blocks()
    return (f"n = {n} samples, m = {m}, bootstrap weights (C = m + 2 channels), launch plan of "
            f"the library kernel for every variant; times are kernel times (zeroing subtracted)."
            f"\n\n" + _table(rows) + "\n" + shared_atomic_sass())


def shared_atomic_sass() -> str:
    """Whether float atomicAdd on shared memory is one instruction (SASS of the library kernel)."""
    nvcc = shutil.which("nvcc")
    cuobjdump = shutil.which("cuobjdump")
    if not nvcc or not cuobjdump:
        return "nvcc/cuobjdump not found: SASS not inspected\n"
    with tempfile.TemporaryDirectory() as tmp:
        cubin = Path(tmp) / "h.cubin"
        subprocess.run([nvcc, "-cubin", "-arch=sm_90", "-o", str(cubin),
                        str(ROOT / "kernels" / "tree_histograms.cu")], check=True,
                       capture_output=True, timeout=120)
        sass = subprocess.run([cuobjdump, "-sass", str(cubin)], capture_output=True, text=True,
                              timeout=60).stdout
    ops = sorted(set(re.findall(r"\b(?:ATOMS|ATOMG|ATOM|RED)\.[A-Z0-9_.]+", sass)))
    return "Atomic instructions in the SASS of kernels/tree_histograms.cu (sm_90): " + \
        ", ".join(f"`{o}`" for o in ops) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(ROOT / "bench" / "results"), help="report folder")
    parser.add_argument("--forest-n", type=int, default=1_000_000)
    parser.add_argument("--forest-trees", type=int, default=4)
    parser.add_argument("--boosting-n", type=int, default=310_000)
    parser.add_argument("--boosting-rounds", type=int, default=20)
    parser.add_argument("--cpu-trees", type=int, default=2,
                        help="trees of a CPU-path forest timed for the ratio (0: none)")
    parser.add_argument("--cpu-rounds", type=int, default=3,
                        help="rounds of CPU-path boosting timed for the ratio (0: none)")
    parser.add_argument("--sections", default="histograms,forest,boosting",
                        help="comma-separated subset of histograms, forest, boosting, "
                             "boosting-newton")
    args = parser.parse_args(argv)
    available = {
        "histograms": ("Histogram kernel variants", histogram_variants),
        "forest": ("Forest fit", lambda: profile_forest(args.forest_n, args.forest_trees,
                                                         args.cpu_trees)),
        "boosting": ("Boosting fit", lambda: profile_boosting(args.boosting_n,
                                                              args.boosting_rounds,
                                                              args.cpu_rounds)),
        "boosting-newton": ("Boosting fit, second-order splits",
                            lambda: profile_boosting(args.boosting_n, args.boosting_rounds,
                                                     args.cpu_rounds, "boosting-newton")),
    }
    chosen = [name.strip() for name in args.sections.split(",") if name.strip()]
    unknown = sorted(set(chosen) - set(available))
    if unknown:
        parser.error(f"--sections: unknown {unknown}; choose from {sorted(available)}")
    sections = []
    for title, fn in (available[name] for name in chosen):
        t0 = time.perf_counter()
        try:
            body = fn()
        except Exception:
            body = "FAILED:\n\n```\n" + traceback.format_exc()[-4000:] + "```\n"
        body += f"\n_section time: {time.perf_counter() - t0:.1f} s_\n"
        print(f"\n## {title}\n\n{body}", flush=True)
        sections.append(f"## {title}\n\n{body}")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{time.strftime('%Y-%m-%d')}-gpu-profile.md"
    path.write_text("# gpurpo GPU profile\n\n" + "\n".join(sections))
    print(f"report written to {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
