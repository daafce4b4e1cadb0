"""Sweep the CUDA growth thresholds of a forest fit on a GPU (one process, same data).

Fits ``RandomForestClassifier(projection='gaussian', n_components=7, max_features='sqrt')``
on the forest benchmark's data (n rows, p = 100, d = 1000 sparse labels) with the subtree
kernel threshold (``subtree_size``: nodes of at most this many samples are grown to the
leaves in one ``tree_grow_subtrees`` launch) and the small-node threshold
(``default_small_node_size``) patched, and prints the fit time of each pair, twice, in
interleaved order. Used to choose the CUDA defaults in ``gpurpo/tree/grower.py``.

    python bench/gpu_subtree_sweep.py --n 1000000 --trees 4
"""
from __future__ import annotations

import argparse
import itertools
import sys
import tempfile
import time
from pathlib import Path
from unittest import mock

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gpu_check import _make_forest_data  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1_000_000)
    parser.add_argument("--trees", type=int, default=4)
    parser.add_argument("--subtree", default="0,128,256,512,1024")
    parser.add_argument("--small", default="128,256,512")
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args(argv)

    import cupy
    import numpy as np
    import scipy.sparse as sp

    from gpurpo.ensemble import RandomForestClassifier

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "forest.npz"
        _make_forest_data(path, args.n, 100, 1000, 5)
        data = np.load(path)
        X, ind, d = data["X"], data["indices"], int(data["d"])
    rows, per_row = ind.shape
    Y = sp.csr_matrix((np.ones(rows * per_row), ind.ravel(),
                       np.arange(0, rows * per_row + 1, per_row)), shape=(rows, d))

    def fit(subtree: int, small: int, n_rows: int) -> float:
        model = RandomForestClassifier(n_estimators=args.trees, projection="gaussian",
                                       n_components=7, max_features="sqrt", random_state=0,
                                       device="cuda")
        with mock.patch("gpurpo.tree.grower.default_subtree_size", return_value=subtree), \
                mock.patch("gpurpo.tree.grower.default_small_node_size", return_value=small):
            cupy.cuda.Device().synchronize()
            t0 = time.perf_counter()
            model.fit(X[:n_rows], Y[:n_rows])
            cupy.cuda.Device().synchronize()
        return time.perf_counter() - t0

    pairs = list(itertools.product([int(s) for s in args.subtree.split(",")],
                                   [int(s) for s in args.small.split(",")]))
    for subtree, small in pairs:
        fit(subtree, small, 4000)
    times: dict[tuple[int, int], list[float]] = {pair: [] for pair in pairs}
    for _ in range(args.repeats):
        for pair in pairs:
            times[pair].append(fit(*pair, args.n))
    print(f"n = {args.n}, {args.trees} trees; fit seconds per (subtree_size, small_node_size)")
    print("| subtree_size | small_node_size | fit s (each run) | best |")
    print("|---|---|---|---|")
    for pair in pairs:
        runs = " / ".join(f"{t:.2f}" for t in times[pair])
        print(f"| {pair[0]} | {pair[1]} | {runs} | {min(times[pair]):.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
