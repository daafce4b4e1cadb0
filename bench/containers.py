"""The same inputs in a dense array and in a CSR matrix, side by side.

Text features are often handed over densely (a bag of words after
``.toarray()``, a pandas frame of word counts). This benchmark draws, for each
``--kinds`` of input, an ``--rows`` x ``--features`` X with ``--density``
nonzeros per cell and ``--labels`` 0/1 labels thresholded from sparse linear
scores of X, and fits on the same ``--n-jobs`` threads, with X dense and with X
CSR (the anchor: gpurpo's sparse path, which reads the stored entries only):

* ``forest``: :class:`gpurpo.ensemble.RandomForestRegressor`, 4 trees,
  ``max_features="sqrt"``, a Gaussian projection of ``round(ln d)`` rows;
* ``extra``: :class:`gpurpo.ensemble.ExtraTreesRegressor`, the same settings;
* ``boosting``: :class:`gpurpo.ensemble.GradientBoostingRegressor`,
  ``relabel_rpo`` with 20 Gaussian projections, 15 rounds.

Kinds: ``text`` (word presence: the nonzeros are 1.0) and ``tfidf`` (the
nonzeros are positive reals, exponentially distributed). Prints the fit times
(best of ``--repeats``, binning included), the ratio dense / CSR and whether
both containers predict the same; ``--output`` writes them as JSON (the schema
of ``bench/_results.py``).
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import numpy as np
import scipy.sparse as sp

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _machine import cpu_description  # noqa: E402
from _results import make_record, write_record  # noqa: E402

from gpurpo.ensemble import (  # noqa: E402
    ExtraTreesRegressor,
    GradientBoostingRegressor,
    RandomForestRegressor,
)

KINDS = ("text", "tfidf")


def make_inputs(kind: str, n_rows: int, n_features: int, density: float, n_labels: int,
                seed: int = 0) -> tuple[sp.csr_matrix, np.ndarray]:
    """CSR X of ``kind`` and dense 0/1 labels thresholded from sparse linear scores of X."""
    rng = np.random.default_rng(seed)
    if kind == "text":
        values = np.ones
    else:
        def values(size):
            return rng.exponential(size=size)
    X = sp.random(n_rows, n_features, density=density, format="csr", random_state=seed,
                  data_rvs=values)
    W = rng.normal(size=(n_features, n_labels)) * (rng.random((n_features, n_labels)) < 0.05)
    Y = (np.asarray(X @ W) > 0.3).astype(np.float64)
    return X, Y


def estimators(n_labels: int, n_jobs: int) -> dict:
    """The estimators' factories by name."""
    m = max(1, round(math.log(n_labels)))
    forest = dict(n_estimators=4, projection="gaussian", n_components=m, max_features="sqrt",
                  random_state=0, n_jobs=n_jobs)
    return {
        "forest": lambda: RandomForestRegressor(**forest),
        "extra": lambda: ExtraTreesRegressor(**forest),
        "boosting": lambda: GradientBoostingRegressor(
            strategy="relabel_rpo", projection="gaussian", n_components=20, n_estimators=15,
            random_state=0),
    }


def _best_fit(make, X, Y, repeats: int):
    """(fastest fit in seconds, the last model)."""
    best, model = float("inf"), None
    for _ in range(repeats):
        start = time.perf_counter()
        model = make().fit(X, Y)
        best = min(best, time.perf_counter() - start)
    return best, model


def summarize(rows: list[dict]) -> list[dict]:
    """Rows of the docs table: each fit on the dense array against the CSR matrix."""
    return [{
        "data": (f"{row['estimator']}, {row['kind']} X {row['rows']:,} x {row['features']:,} "
                 f"({row['density'] * 100:g} % nonzero), d = {row['labels']}, dense array"),
        "anchor": "gpurpo on the same X as CSR",
        "gpurpo": (f"{row['dense_s'] / row['csr_s']:.2f}x the CSR fit time, "
                   f"{'the same' if row['same_predictions'] else 'other'} predictions"),
    } for row in rows]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=20000)
    parser.add_argument("--features", type=int, default=500)
    parser.add_argument("--density", type=float, default=0.02)
    parser.add_argument("--labels", type=int, default=50)
    parser.add_argument("--kinds", default=",".join(KINDS), help="text, tfidf or both")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--n-jobs", type=int, default=1)
    parser.add_argument("--output", type=Path, default=None)
    parser.add_argument("--quick", action="store_true", help="a smoke run: 2,000 rows")
    args = parser.parse_args(argv)
    if args.quick:
        args.rows, args.repeats = 2000, 1
    kinds = [kind.strip() for kind in args.kinds.split(",")]
    unknown = sorted(set(kinds) - set(KINDS))
    if unknown:
        parser.error(f"--kinds: unknown kind(s) {', '.join(unknown)}; use {', '.join(KINDS)}")

    import numba

    numba.set_num_threads(args.n_jobs)
    print(f"{cpu_description()}, {args.n_jobs} thread(s)")
    rows = []
    for kind in kinds:
        X, Y = make_inputs(kind, args.rows, args.features, args.density, args.labels)
        dense = X.toarray()
        for name, make in estimators(args.labels, args.n_jobs).items():
            make().fit(dense[:300], Y[:300])  # compiles or loads the kernels
            make().fit(X[:300], Y[:300])
            dense_s, dense_model = _best_fit(make, dense, Y, args.repeats)
            csr_s, csr_model = _best_fit(make, X, Y, args.repeats)
            same = bool(np.array_equal(dense_model.predict(dense[:1000]),
                                       csr_model.predict(X[:1000])))
            print(f"{kind:6s} {name:9s} dense {dense_s:7.2f} s   CSR {csr_s:7.2f} s   "
                  f"dense / CSR {dense_s / csr_s:5.2f}   same predictions: {same}")
            rows.append({"kind": kind, "estimator": name, "rows": args.rows,
                         "features": args.features, "density": args.density,
                         "labels": args.labels, "n_jobs": args.n_jobs, "dense_s": dense_s,
                         "csr_s": csr_s, "same_predictions": same})
    if args.output is not None:
        write_record(args.output, make_record("containers", rows, summarize(rows)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
