"""Micro-benchmark of the CPU exact split of small nodes (kernel ``tree_split_small``) by node size.

Times ``split_small_nodes`` (the numba twin of ``tree_split_small``, see
:mod:`gpurpo.tree.kernels`) on a batch of nodes of a given number of samples
with random 8-bit codes, 7 target channels and ``k`` of ``p`` candidate
features (default: the delicious shape, p = 500, k = 22), for the kernel
module of this source tree or another version of it::

    NUMBA_NUM_THREADS=1 python bench/experiments/split_node_micro.py
    git show HEAD~1:gpurpo/tree/_kernels_cpu.py > /tmp/old.py
    NUMBA_NUM_THREADS=1 python bench/experiments/split_node_micro.py --source /tmp/old.py

The kernel is driven through its documented contract (its arguments are
those of ``tree_split_small``), so another version works as long as that
contract is the same; a source whose ``split_small_nodes`` takes other
arguments is refused. The module is compiled in this process
(``cache=False``, about a minute). Each node gathers its samples' weights and
targets, then evaluates its candidate features (``_eval_node``), as in a
fit. The figure is the best of 3 runs, in microseconds per node and
nanoseconds per (sample, candidate feature). Random codes put most samples
in distinct bins, so every sample is a split point: an upper bound of the
work per sample.
"""

from __future__ import annotations

import argparse
import inspect
import sys
import time
import types
from pathlib import Path

import numba
import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

# the documented arguments of tree_split_small, in order (gpurpo.tree.kernels)
CONTRACT = (
    "codes", "subtracted_bin", "listed", "col_ptr", "col_rows", "col_codes", "sample_indices",
    "node_ranges", "node_tree", "node_seed", "weights", "targets", "edge_values", "edge_ptr",
    "n_candidates", "min_samples_leaf", "random_split", "missing_bin", "tie_rtol", "out_feature",
    "out_bin", "out_missing_left", "out_gain",
)


def load(source: Path) -> types.ModuleType:
    """The kernel module compiled from ``source`` (a version of ``_kernels_cpu.py``)."""
    module = types.ModuleType("split_node_micro_kernels")
    module.__file__ = str(ROOT / "gpurpo" / "tree" / "_kernels_cpu.py")
    text = source.read_text().replace("cache=True", "cache=False")
    exec(compile(text, module.__file__, "exec"), module.__dict__)
    split = getattr(module, "split_small_nodes", None)
    if split is None or tuple(inspect.signature(split.py_func).parameters) != CONTRACT:
        raise SystemExit(f"{source}: its split_small_nodes does not take the arguments of "
                         "tree_split_small as documented in gpurpo/tree/kernels.py now")
    return module


class Batch:
    """Inputs of ``split_small_nodes`` for ``n_nodes`` nodes of ``ns`` samples from a pool."""

    def __init__(self, p: int, pool: int, m: int, ns: int, n_nodes: int):
        rng = np.random.default_rng(0)
        self.codes = rng.integers(0, 255, size=(p, pool)).astype(np.uint8)
        self.subtracted_bin = np.full(p, -1, dtype=np.int32)
        self.listed = np.full(p, pool, dtype=np.int64)
        self.columns = (np.empty(0, np.int64), np.empty(0, np.int32), np.empty(0, np.uint8))
        starts = (np.arange(n_nodes, dtype=np.int64) * ns) % (pool - ns)
        self.sample_indices = (starts[:, None] + np.arange(ns)).astype(np.int32).ravel()
        self.node_ranges = np.stack([np.arange(n_nodes) * ns, np.arange(1, n_nodes + 1) * ns],
                                    axis=1).astype(np.int64)
        self.node_tree = np.zeros(n_nodes, dtype=np.int32)
        self.node_seed = np.arange(n_nodes, dtype=np.uint64)
        a = np.arange(pool)
        self.weights = (1.0 + (a % 3)).astype(np.float32)[None, :]
        self.targets = np.sin(a[:, None] * 7.0 + np.arange(m)).astype(np.float32)[:, None, :]
        # 255 edges per feature (all 0.0: the best splits never read them)
        self.edge_values = np.zeros(p * 255)
        self.edge_ptr = np.arange(p + 1, dtype=np.int64) * 255
        self.out = (np.empty(n_nodes, np.int32), np.empty(n_nodes, np.int32),
                    np.empty(n_nodes, np.uint8), np.empty(n_nodes, np.float64))

    def run(self, split, k: int) -> None:
        split(self.codes, self.subtracted_bin, self.listed, *self.columns, self.sample_indices,
              self.node_ranges, self.node_tree, self.node_seed, self.weights, self.targets,
              self.edge_values, self.edge_ptr, k, 1, 0, 255, 1e-9, *self.out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", type=Path, default=ROOT / "gpurpo" / "tree" / "_kernels_cpu.py",
                        help="a version of gpurpo/tree/_kernels_cpu.py")
    parser.add_argument("--features", type=int, default=500)
    parser.add_argument("--candidates", type=int, default=22)
    parser.add_argument("--channels", type=int, default=7)
    parser.add_argument("--sizes", default="2,3,5,8,16,32,64,256")
    args = parser.parse_args(argv)
    pool = 1000
    sizes = [int(s) for s in args.sizes.split(",")]
    if not sizes or min(sizes) < 2 or max(sizes) >= pool:
        parser.error(f"--sizes must lie in [2, {pool - 1}]")
    if not 1 <= args.candidates <= args.features:
        parser.error("--candidates must lie in [1, --features]")
    numba.set_num_threads(1)
    split = load(args.source).split_small_nodes
    for ns in sizes:
        n_nodes = max(200, 200_000 // ns)
        batch = Batch(args.features, pool, args.channels, ns, n_nodes)
        batch.run(split, args.candidates)
        best = float("inf")
        for _ in range(3):
            start = time.perf_counter()
            batch.run(split, args.candidates)
            best = min(best, time.perf_counter() - start)
        if not (batch.out[0] >= 0).all():
            raise SystemExit(f"{ns} samples: a node found no split; the timing would not "
                             "measure the split search")
        per_node = best / n_nodes
        print(f"{ns:5d} samples: {per_node * 1e6:8.2f} us/node  "
              f"{per_node / args.candidates / ns * 1e9:6.1f} ns per sample and feature")
    return 0


if __name__ == "__main__":
    sys.exit(main())
