"""Host-side cost of the GPU's level-wise growth, measured without a GPU.

On CuPy, trees grow level by level: nodes of up to 256 samples go to the
small-node kernel, larger ones to histograms, and nodes of up to
``subtree_size`` samples (the CUDA default: 128 for p = 100) are grown to
completion by one ``tree_grow_subtrees`` launch. Between kernels, the host
keeps the node tables, partitions, and builds the trees (``finish``). That
host code is the same on every backend. This script runs the same path on
the CPU backend (``small_node_size=256`` and the CUDA ``subtree_size``) and
reports the time outside the numba kernels, which is what the host would
spend on a GPU::

    python bench/host_overhead.py                 # 4 trees, n = 400,000, p = 100
    python bench/host_overhead.py --n 100000 --trees 2
    python bench/host_overhead.py --subtree-size 0   # level-wise to the leaves

Data are those of ``bench/gpu_check.py``'s forest section: random X and
Gaussian targets, m = 7, bootstrap weights. The numba kernels are warmed up
first, so compile time is left out.
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
from gpurpo.tree import GrowthParams, grow_trees  # noqa: E402
from gpurpo.tree.binning import BinMapper  # noqa: E402
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
    # warm-up: kernels compiled or loaded from the numba cache
    grow_trees(binned, targets, weights, params, np.random.default_rng(1), NUMPY)
    prof = cProfile.Profile()
    t0 = time.perf_counter()
    prof.enable()
    result = grow_trees(binned, targets, weights, params, np.random.default_rng(1), NUMPY)
    prof.disable()
    wall = time.perf_counter() - t0
    stats = pstats.Stats(prof)
    kernel_s = sum(
        tt for (path, _, _), (_, _, tt, _, _) in stats.stats.items() if KERNEL_DIR in path
    )
    nodes = sum(len(s.feature) for s in result.structures)
    print(f"{args.trees} trees, n = {args.n}, p = {args.p}, small_node_size = {small}, "
          f"subtree_size = {subtree}: {nodes} nodes, grown in {wall:.2f} s")
    print(f"numba kernels {kernel_s:.2f} s; host side {wall - kernel_s:.2f} s "
          f"({1e6 * (wall - kernel_s) / max(nodes, 1):.2f} us per node)\n")
    out = io.StringIO()
    stats.stream = out
    stats.sort_stats("tottime").print_stats(args.rows)
    print("\n".join(ln for ln in out.getvalue().splitlines() if KERNEL_DIR not in ln))
    return 0


if __name__ == "__main__":
    sys.exit(main())
