"""Host-side cost of the GPU's level-wise growth, measured without a GPU.

On CUDA backends trees grow level by level with their state on the device
(:mod:`gpurpo.tree.device_grower`): nodes of up to ``subtree_size`` samples
(the CUDA default: 128 for p = 100) are grown to completion by one
``tree_grow_subtrees`` launch, nodes of up to 256 samples go to the
small-node kernel, larger ones to histograms, and the frontier and node table
are kept by kernels. The host code is the same on every backend, so this
script runs it on the CPU backend (the numba twins of the kernels, with
``small_node_size=256`` and the CUDA ``subtree_size``) and reports the time
outside the numba kernels, which is what the host would spend on a GPU, in
total, per level and per node; beside it the host-orchestrated grower of the
CPU path (:mod:`gpurpo.tree.grower`) on the same trees::

    python bench/host_overhead.py                 # 4 trees, n = 400,000, p = 100
    python bench/host_overhead.py --n 100000 --trees 2
    python bench/host_overhead.py --subtree-size 0   # level-wise to the leaves

Data are those of ``bench/gpu_check.py``'s forest section: random X and
Gaussian targets, m = 7, bootstrap weights. The numba kernels are warmed up
first, so compile time is left out.

Beside the timings, the device activity of the CUDA path (kernel launches,
device-to-host and host-to-device copies, synchronisations:
:func:`gpurpo.backend.count_device_activity`) is counted on the emulated
backend, which runs the CUDA code on the CPU, for small data (p = 20, m = 4,
5 features per node, fully grown): a batch of 1 and 8 forest trees, a batch
of 1 and 8 best-first trees (31 leaves, all features: boosting's trees) and
one boosting round (the second of a fit), at 1,000 and 8,000 rows, in total,
per tree level (total / depth of the deepest tree) and at the busiest level
or step::

    python bench/host_overhead.py --activity-rows 1000 --activity-trees 1
    python bench/host_overhead.py --no-activity
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from gpurpo.backend import EMULATED, NUMPY  # noqa: E402
from gpurpo.testing.device_activity import (  # noqa: E402
    best_first_batch_activity,
    boosting_round_activity,
    forest_batch_activity,
)
from gpurpo.tree import GrowthParams, grow_trees  # noqa: E402
from gpurpo.tree.binning import BinMapper  # noqa: E402
from gpurpo.tree.device_grower import grow_trees_on_device  # noqa: E402
from gpurpo.tree.grower import default_small_node_size, default_subtree_size  # noqa: E402

KERNEL_DIR = "/tree/_numba/"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=400_000, help="samples")
    parser.add_argument("--p", type=int, default=100, help="features")
    parser.add_argument("--trees", type=int, default=4, help="trees grown together")
    parser.add_argument("--rows", type=int, default=25, help="host functions listed")
    parser.add_argument("--subtree-size", type=int, default=None,
                        help="largest node grown by the subtree kernel (default: CUDA's for p; "
                             "0: level-wise to the leaves)")
    parser.add_argument("--activity", action=argparse.BooleanOptionalAction, default=True,
                        help="count the device activity on the emulated backend (default: yes)")
    parser.add_argument("--activity-rows", type=_ints, default=(1000, 8000),
                        help="comma-separated rows of the counted growths (default: 1000,8000)")
    parser.add_argument("--activity-trees", type=_ints, default=(1, 8),
                        help="comma-separated forest batch sizes counted (default: 1,8)")
    args = parser.parse_args(argv)
    if args.n < 1000 or args.p < 2 or args.trees < 1:
        parser.error("need --n >= 1000, --p >= 2 and --trees >= 1")
    if args.subtree_size is not None and args.subtree_size < 0:
        parser.error("--subtree-size must be >= 0")
    # the CUDA backends' defaults (EMULATED runs the CUDA kernels; only its defaults are read)
    small = default_small_node_size(EMULATED)
    subtree = default_subtree_size(EMULATED, args.p) if args.subtree_size is None else args.subtree_size
    rng = np.random.default_rng(0)
    X = rng.standard_normal((args.n, args.p), dtype=np.float32)
    binned = BinMapper().fit(X).transform(X, NUMPY)
    targets = rng.standard_normal((args.n, args.trees, 7)).astype(np.float32)
    weights = rng.poisson(1.0, size=(args.trees, args.n)).astype(np.float32)
    params = GrowthParams(
        n_candidates=max(1, round(np.sqrt(args.p))), small_node_size=small, subtree_size=subtree
    )
    for name, grow in (("device-resident", grow_trees_on_device), ("host-orchestrated", grow_trees)):
        print(_host_time(name, grow, binned, targets, weights, params, args.rows))
    print(f"({args.trees} trees, n = {args.n}, p = {args.p}, small_node_size = {small}, "
          f"subtree_size = {subtree})")
    if args.activity:
        print(activity_table(args.activity_rows, args.activity_trees))
    return 0


def _host_time(name: str, grow, binned, targets, weights, params, rows: int) -> str:
    """Profile one growth (after a warm-up); the host time outside the numba kernels in
    total, per level and per node, and the host functions that took longest."""
    levels: list = []
    kwargs = {"level_activity": levels} if grow is grow_trees_on_device else {}
    grow(binned, targets, weights, params, np.random.default_rng(1), NUMPY)
    prof = cProfile.Profile()
    t0 = time.perf_counter()
    prof.enable()
    result = grow(binned, targets, weights, params, np.random.default_rng(1), NUMPY, **kwargs)
    prof.disable()
    wall = time.perf_counter() - t0
    stats = pstats.Stats(prof)
    kernel_s = sum(
        tt for (path, _, _), (_, _, tt, _, _) in stats.stats.items() if KERNEL_DIR in path
    )
    host = wall - kernel_s
    nodes = sum(len(s.feature) for s in result.structures)
    per_level = (f", {len(levels)} levels: {1e3 * host / len(levels):.2f} ms per level"
                 if levels else "")
    out = io.StringIO()
    stats.stream = out
    stats.sort_stats("tottime").print_stats(rows)
    listing = "\n".join(ln for ln in out.getvalue().splitlines() if KERNEL_DIR not in ln)
    return (f"\n== {name}: {nodes} nodes grown in {wall:.2f} s; numba kernels {kernel_s:.2f} s, "
            f"host {host:.2f} s ({1e6 * host / max(nodes, 1):.2f} us per node{per_level})\n"
            + listing)


def _ints(text: str) -> tuple[int, ...]:
    try:
        values = tuple(int(v) for v in text.split(",") if v.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}") from None
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"expected positive integers, got {text!r}")
    return values


ACTIVITY_COLUMNS = ("launches", "d2h", "h2d", "syncs")


def activity_table(rows: tuple[int, ...], trees: tuple[int, ...]) -> str:
    """Device activity of forest batches and boosting rounds on the emulated backend.

    Parameters
    ----------
    rows : tuple of int
        Samples of each measured growth.
    trees : tuple of int
        Forest batch sizes (trees grown together).

    Returns
    -------
    str
        A text table: per case the depth of the deepest tree, the counters in
        total, per tree level (total / depth) and at the busiest level (forest
        batches) or step (best-first batches: an evaluation, or a round of
        selection, split and children). Forest and best-first batches count
        the growth after the data upload; boosting rounds the second round of a
        fit.
    """
    results = []
    for n in rows:
        for t in trees:
            results.append((f"forest batch, {t} tree{'s' if t > 1 else ''}",
                            forest_batch_activity(n, t)))
        for t in trees:
            # best-first trees of 31 leaves on all features: boosting's, without the fit
            results.append((f"best-first batch, {t} tree{'s' if t > 1 else ''}",
                            best_first_batch_activity(n, t)))
        for strategy in ("relabel_rpo", "multi_output"):
            results.append((f"boosting round, {strategy}", boosting_round_activity(n, strategy)))
    header = (f"{'case':<30} {'rows':>6} {'depth':>5} "
              + " ".join(f"{c:>8}" for c in ACTIVITY_COLUMNS) + "   per level: "
              + " ".join(f"{c:>8}" for c in ACTIVITY_COLUMNS) + "   busiest level: "
              + " ".join(f"{c:>8}" for c in ACTIVITY_COLUMNS))
    lines = ["", "Device activity on the emulated backend (p = 20, m = 4, max_features = 5, "
             "fully grown or 31 leaves best first; batches: after the data upload; boosting: the "
             "second round of a fit)", header]
    for case, r in results:
        lines.append(f"{case:<30} {r['n']:>6} {r['depth']:>5} "
                     + " ".join(f"{r[c]:>8}" for c in ACTIVITY_COLUMNS) + "              "
                     + " ".join(f"{r[c + '_per_level']:>8.2f}" for c in ACTIVITY_COLUMNS)
                     + "                  "
                     + " ".join(f"{r.get('level_max_' + c, '-'):>8}" for c in ACTIVITY_COLUMNS))
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
