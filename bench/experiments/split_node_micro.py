"""Micro-benchmark of the CPU per-node exact split (``_eval_node``) by node size.

Times one ``_eval_node`` call on nodes of a given number of samples with
random 8-bit codes, 7 target channels (padded to 8) and ``k`` of ``p``
candidate features (default: the delicious shape, p = 500, k = 22), for the
kernel module of this source tree or another version of it::

    NUMBA_NUM_THREADS=1 python bench/experiments/split_node_micro.py
    git show HEAD~1:gpurpo/tree/_kernels_cpu.py > /tmp/old.py
    NUMBA_NUM_THREADS=1 python bench/experiments/split_node_micro.py --source /tmp/old.py

The source must call this tree's ``_random`` helpers as they are now
(``feistel_params`` compiled, ``small_feature_order_nb`` taking the seed): older
versions are refused. The module is compiled in this process
(``cache=False``); the figure is the best of 3 runs, in microseconds per node
and nanoseconds per (sample, candidate feature). Random codes put most samples in distinct bins, so every
sample is a split point: an upper bound of the work per sample. As the kernels
do, the loop passes borrowed views (:mod:`gpurpo.tree._borrow`): with owned
arrays each call counted references to some twenty arrays, 0.3 us per node
on a Xeon, more than a 2-sample node's work.
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

from gpurpo.tree._borrow import borrow  # noqa: E402


def load(source: Path) -> types.ModuleType:
    """The kernel module compiled from ``source`` (a version of ``_kernels_cpu.py``)."""
    module = types.ModuleType("split_node_micro_kernels")
    module.__file__ = str(ROOT / "gpurpo" / "tree" / "_kernels_cpu.py")
    text = source.read_text().replace("cache=True", "cache=False")
    exec(compile(text, module.__file__, "exec"), module.__dict__)
    return module


def make_bench(kernels: types.ModuleType, p: int, k: int, m: int, pool: int):
    """A jitted loop evaluating ``reps`` nodes of ``ns`` samples taken from a pool."""
    mp = ((m + 7) // 8) * 8
    eval_node = kernels._eval_node
    scratch = kernels._eval_scratch
    if not hasattr(kernels, "feistel_params"):
        # older sources pass other Feistel parameters to this tree's _random module
        raise SystemExit("--source predates the feature-order helpers of "
                         "gpurpo/tree/_random.py that this tree's kernels call")
    feistel = kernels.feistel_params
    # sources from session 9 on take the rows of the node's data (here the identity,
    # cols) and more scratch buffers (after cand_ml) than the sixteen of earlier ones:
    # the loop is generated for the source's signature
    names = list(inspect.signature(eval_node.py_func).parameters)
    rows = "cols, " if "rows" in names else ""
    n_extra = len(names) - names.index("cand_ml") - 2
    extra_names = [f"extra{i}" for i in range(n_extra)]
    extra = "".join(f"{name}, " for name in extra_names)
    unpack_extra = "".join(f"    {name} = borrow(buffers[{16 + i}])\n" for i, name in enumerate(extra_names))
    # as the kernels do, the node loop passes views that hold no reference (borrowed
    # from the arguments of ``run``, which ``bench`` keeps alive): a call passing owned
    # arrays would count references to each of them, some 0.3 us per node
    text = f"""
def bench(block, cols, edge_table, ns, reps):
    return run(block, cols, edge_table, ns, reps, scratch(pool, mp, 256, k))


def run(block, cols, edge_table, ns, reps, buffers):
    block = borrow(block)
    cols = borrow(cols)
    edge_values, edge_ptr = borrow(edge_table[0]), borrow(edge_table[1])
    (w, wy, y, S, code_buf, order, hist, bin_pos, LS, MS, keys, perm,
     cand_f, cand_g, cand_b, cand_ml) = buffers[:16]
    w, wy, y, S = borrow(w), borrow(wy), borrow(y), borrow(S)
    code_buf, order, hist, bin_pos = borrow(code_buf), borrow(order), borrow(hist), borrow(bin_pos)
    LS, MS, keys, perm = borrow(LS), borrow(MS), borrow(keys), borrow(perm)
    cand_f, cand_g, cand_b, cand_ml = borrow(cand_f), borrow(cand_g), borrow(cand_b), borrow(cand_ml)
{unpack_extra}    for a in range(pool):
        w[a] = 1.0 + (a % 3)
        for c in range(m):
            y[a, c] = np.float32(np.sin(a * 7.0 + c))
            wy[a, c] = w[a] * y[a, c]
    first, second = feistel(p)
    total = 0.0
    for r in range(reps):
        a0 = (r * ns) % (pool - ns)
        f, b, ml, g = eval_node(
            block, cols, a0, ns, w, wy, y, {rows}a0, np.uint64(r), k, 1, 0, 255, 1e-9,
            edge_values, edge_ptr, first, second, S, code_buf, order, hist, bin_pos, LS, MS, keys,
            perm, cand_f, cand_g, cand_b, cand_ml, {extra}m,
        )
        total += g
    return total
"""
    namespace = {"np": np, "scratch": scratch, "eval_node": eval_node, "feistel": feistel,
                 "pool": pool, "mp": mp, "k": k, "m": m, "p": p, "borrow": borrow}
    exec(text, namespace)
    namespace["run"] = numba.njit(namespace["run"])
    bench = numba.njit(namespace["bench"])
    return bench


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
    rng = np.random.default_rng(0)
    block = rng.integers(0, 255, size=(args.features, pool)).astype(np.uint8)
    cols = np.arange(pool, dtype=np.int32)
    # the ragged edge table of 255 edges per feature (all 0.0: best splits never read it)
    edge_table = (np.zeros(args.features * 255), np.arange(args.features + 1) * 255)
    bench = make_bench(load(args.source), args.features, args.candidates, args.channels, pool)
    for ns in sizes:
        reps = max(200, 200_000 // ns)
        bench(block, cols, edge_table, ns, 10)
        best = float("inf")
        for _ in range(3):
            start = time.perf_counter()
            bench(block, cols, edge_table, ns, reps)
            best = min(best, time.perf_counter() - start)
        per_node = best / reps
        print(f"{ns:5d} samples: {per_node * 1e6:8.2f} us/node  "
              f"{per_node / args.candidates / ns * 1e9:6.1f} ns per sample and feature")
    return 0


if __name__ == "__main__":
    sys.exit(main())
