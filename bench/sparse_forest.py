"""Random-output forests on text-like SPARSE inputs: gpurpo vs scikit-learn.

Extreme multi-label data usually comes with bag-of-words or tf-idf features:
many columns, few nonzeros per row. This benchmark draws such a problem
(``--rows`` training rows + 1,000 test rows, ``--features`` columns with
``--density`` nonzeros, 1,000 labels that are thresholded sparse linear
functions of the features, so that trees can learn them) and compares, on
the same ``--n-jobs`` threads:

* ``gpurpo``: :class:`gpurpo.ensemble.RandomForestRegressor` on the CSR
  input (on ``--device``), ``max_features="sqrt"``, a Gaussian projection of
  ``m = round(ln d)`` rows per tree, fully grown (binning, projection,
  growth and leaf labelling in the fit time);
* ``sk-proj``: scikit-learn trees on the SAME projections and bootstrap
  samples, relabelled (``bench/forest.py``'s ``sk-proj``): the same
  algorithm, whose splitter works on the nonzeros of each feature
  (scikit-learn's sparse splitter).

Prints fit times, their ratio, both test LRAPs and the time to predict the
test rows in one call and 10 of them in another (a small request, where the
cost per call rather than per row shows; gpurpo reads a sparse X at its stored
entries, scikit-learn's ``apply`` takes CSR input); ``--output`` writes them as
JSON (the schema of ``bench/_results.py``).
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import numpy as np
import scipy.sparse as sp

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _machine import cpu_description  # noqa: E402
from _results import gpu_name, make_record, times_faster, write_record  # noqa: E402
from forest import _lrap, _sk_proj_fit, _sk_proj_predict, _timed  # noqa: E402

from gpurpo.ensemble import RandomForestRegressor  # noqa: E402

N_TEST = 1000
N_LABELS = 1000
N_SMALL = 10


def _random_sparse(n_rows: int, n_cols: int, density: float, seed: int) -> sp.csr_matrix:
    """``scipy.sparse.random`` (uniform values in [0, 1)), or for more than 2^31 cells
    (where SciPy permutes every cell index) positions drawn with replacement, repeats
    dropped: a density a little below ``density``."""
    if n_rows * n_cols < 2**31:
        return sp.random(n_rows, n_cols, density=density, format="csr", random_state=seed,
                         dtype=np.float64)
    rng = np.random.default_rng(seed)
    size = int(round(density * n_rows * n_cols))
    cells = np.unique(rng.integers(0, n_rows * n_cols, size=size, dtype=np.int64))
    rows, cols = np.divmod(cells, n_cols)
    return sp.csr_matrix((rng.random(cells.size), (rows, cols)), shape=(n_rows, n_cols))


def _best_of(repeats: int, run):
    """(fastest of ``repeats`` timed runs in seconds, the last result)."""
    best = float("inf")
    for _ in range(repeats):
        seconds, result = _timed(run)
        best = min(best, seconds)
    return best, result


def make_text_like(n_rows: int, n_features: int, density: float, seed: int = 0):
    """Sparse nonnegative X (CSR) and sparse 0/1 labels thresholded from sparse linear scores."""
    X = _random_sparse(n_rows, n_features, density, seed)
    W = _random_sparse(n_features, N_LABELS, 0.002, seed + 1)
    Y = sp.csr_matrix(((X @ W).toarray() > 0.05).astype(np.float64))
    return X, Y


def summarize(rows: list[dict]) -> list[dict]:
    """Rows of the docs table from the figures: gpurpo against scikit-learn's trees."""
    summary = []
    for row in rows:
        where = "" if row.get("device", "cpu") == "cpu" else f", on {row['device']}"
        data = (f"forest, sparse X {row['rows']:,} x {row['features']:,} ({row['density'] * 100:g} % nonzero), "
                f"d = {row.get('labels', N_LABELS):,}, {row['trees']} trees{where}")
        text = (f"{times_faster(row['sk_proj_s'], row['gpurpo_s'])}, "
                f"LRAP {row['gpurpo_lrap'] - row['sk_proj_lrap']:+.4f}")
        if "gpurpo_predict_s" in row:
            text += f"; predict {times_faster(row['sk_proj_predict_s'], row['gpurpo_predict_s'])}"
        if "gpurpo_predict_small_s" in row:
            text += (f", {N_SMALL} rows "
                     f"{times_faster(row['sk_proj_predict_small_s'], row['gpurpo_predict_small_s'])}")
        summary.append({"data": data, "anchor": "scikit-learn trees on the same projections",
                        "gpurpo": text})
    return summary


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=5000, help="training rows")
    parser.add_argument("--features", type=int, default=20000)
    parser.add_argument("--density", type=float, default=0.005)
    parser.add_argument("--trees", type=int, default=10)
    parser.add_argument("--n-jobs", type=int, default=1)
    parser.add_argument("--device", default="cpu", help="gpurpo's device: cpu or cuda")
    parser.add_argument("--output", type=Path, default=None)
    parser.add_argument("--quick", action="store_true",
                        help="a smoke run: 1,000 rows, 5,000 features, 3 trees")
    args = parser.parse_args(argv)
    if args.quick:
        args.rows, args.features, args.trees = 1000, 5000, 3

    import numba

    numba.set_num_threads(args.n_jobs)
    X, Y = make_text_like(args.rows + N_TEST, args.features, args.density)
    X_train, X_test = X[: args.rows], X[args.rows :]
    Y_train, Y_test = Y[: args.rows], Y[args.rows :]
    m = max(1, round(math.log(N_LABELS)))
    print(f"{cpu_description()}, {args.n_jobs} thread(s), gpurpo on {args.device}")
    print(f"text-like: n_train={args.rows} p={args.features} density={args.density} "
          f"(nnz/row {X_train.nnz / args.rows:.1f}) d={N_LABELS} "
          f"(labels/row {Y_train.nnz / args.rows:.1f}) m={m} trees={args.trees}")

    def forest(n_trees):
        return RandomForestRegressor(n_estimators=n_trees, projection="gaussian",
                                     n_components=m, max_features="sqrt", random_state=0,
                                     n_jobs=args.n_jobs, device=args.device)

    forest(2).fit(X_train[:300], Y_train[:300])  # compiles or loads the kernels
    gp_time, model = _timed(lambda: forest(args.trees).fit(X_train, Y_train))
    gp_predict, scores = _best_of(3, lambda: model.predict(X_test))
    X_small = X_test[:N_SMALL]
    gp_small, _ = _best_of(20, lambda: model.predict(X_small))
    gp_lrap = _lrap(Y_test, scores.get() if hasattr(scores, "get") else scores)
    depth = max(tree.max_depth for tree in model.estimators_)
    sk_time, trees = _timed(lambda: _sk_proj_fit(X_train.tocsc(), Y_train, model, args.n_jobs))
    X_test32 = X_test.astype(np.float32)  # scikit-learn's trees predict from float32
    sk_predict, sk_scores = _best_of(3, lambda: _sk_proj_predict(trees, X_test32))
    X_small32 = X_test32[:N_SMALL]
    sk_small, _ = _best_of(20, lambda: _sk_proj_predict(trees, X_small32))
    sk_lrap = _lrap(Y_test, sk_scores)
    print(f"gpurpo   fit {gp_time:7.2f} s   LRAP {gp_lrap:.4f}   deepest tree {depth}")
    print(f"sk-proj  fit {sk_time:7.2f} s   LRAP {sk_lrap:.4f}")
    print(f"sk-proj / gpurpo: {sk_time / gp_time:.2f}x")
    print(f"predict {N_TEST} rows (best of 3): gpurpo {gp_predict:.3f} s, sk-proj "
          f"{sk_predict:.3f} s, {sk_predict / gp_predict:.2f}x")
    print(f"predict {N_SMALL} rows (best of 20): gpurpo {gp_small * 1e3:.2f} ms, sk-proj "
          f"{sk_small * 1e3:.2f} ms, {sk_small / gp_small:.2f}x")
    if args.output is not None:
        settings = {key: value for key, value in vars(args).items() if key != "output"}
        row = {**settings, "labels": N_LABELS, "gpurpo_s": gp_time, "sk_proj_s": sk_time,
               "gpurpo_lrap": gp_lrap, "sk_proj_lrap": sk_lrap, "deepest_tree": depth,
               "gpurpo_predict_s": gp_predict, "sk_proj_predict_s": sk_predict,
               "gpurpo_predict_small_s": gp_small, "sk_proj_predict_small_s": sk_small}
        gpu = gpu_name() if args.device == "cuda" else None
        write_record(args.output, make_record("sparse_forest", [row], summarize([row]), gpu=gpu))
    return 0


if __name__ == "__main__":
    sys.exit(main())
