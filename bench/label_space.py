"""Benchmark: label-space encodings (PLST, Rembrandt, CSSP, random) against scikit-learn's TruncatedSVD.

Two sparse label matrices, built by :mod:`gpurpo.datasets`:

* ``delicious``: shaped like MULAN's delicious (500 features, 983 labels,
  about 19 labels per sample; 12,920 samples, 3,000 with ``--quick``);
* ``100k labels``: :func:`gpurpo.datasets.make_multilabel` with 100,000 labels
  (sparse output, 4 labels per sample; 20,000 samples, 5,000 with ``--quick``).

Encoding time
    Time to learn the rank-``k`` encoding of the training labels and encode
    them: ``TruncatedSVD(algorithm="randomized").fit_transform(Y)`` (its
    defaults: 5 power iterations, 10 oversamples) against gpurpo's
    :class:`~gpurpo.label_space.PLSTReducer` (PCA of Y, implicitly centred),
    :class:`~gpurpo.label_space.CSSPReducer` (randomized SVD + leverage
    sampling + ``Y_C^+ Y`` decoder), both with the same 5 power iterations and
    10 oversamples, :class:`~gpurpo.label_space.RembrandtReducer` (uses X;
    its defaults: the cheapest of the exact, precomputed-cross-product and
    factored routes of :func:`gpurpo.linalg.rembrandt`, which all need the
    ridge factorisation of ``X^T X``) and
    :class:`~gpurpo.label_space.RandomReducer`. The runs are interleaved
    repetition by repetition; the table reports the best (minimum) and the
    median time of each and the ratio of the best times TruncatedSVD / gpurpo
    (> 1: gpurpo faster). The minimum is the figure least disturbed by other
    load on the machine.
Accuracy
    Each reducer inside :class:`~gpurpo.label_space.LabelSpaceClassifier`
    with the same estimator (ridge regression, ``alpha=1``) and the same
    ``k``, on a held-out 20 % of the samples: LRAP (Joly et al. eq. 6, on the
    decoded scores) and RMSE (Bi & Kwok eq. 6, on the decoded real-valued
    predictions); the label-frequency baseline for reference. Scores of the
    100,000-label problem are evaluated by blocks of rows (at most 2,000
    test rows) so the dense score matrix never exists in full.

Usage::

    python bench/label_space.py                    # full sizes
    python bench/label_space.py --quick            # small sizes, about a minute
    python bench/label_space.py --blas-threads 1   # one BLAS thread for every method

``--output`` writes the results as JSON, in the schema of ``bench/_results.py``.
``--blas-threads`` (threadpoolctl) gives every method the same BLAS thread
budget; on a machine shared with other jobs, oversubscribed BLAS threads make
the many small products of the randomized range finders erratic.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np
from sklearn.decomposition import TruncatedSVD
from threadpoolctl import threadpool_limits

try:
    import gpurpo  # noqa: F401
except ImportError:  # run from a source checkout without installing
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from gpurpo.datasets import make_delicious_like, make_multilabel
from gpurpo.label_space import (
    CSSPReducer,
    LabelSpaceClassifier,
    PLSTReducer,
    RandomReducer,
    RembrandtReducer,
)
from gpurpo.metrics import label_ranking_average_precision, rmse

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _results import make_record, times_faster, write_record  # noqa: E402

ENCODERS = ("plst", "rembrandt", "cssp", "random")
# the names of the encoders in the docs table
DISPLAY = {"plst": "PLST", "cssp": "CSSP", "rembrandt": "Rembrandt", "random": "random"}


def problems(quick: bool):
    n_delicious, n_big = (3000, 5000) if quick else (12920, 20000)
    X, Y = make_delicious_like(random_state=0, n_samples=n_delicious)
    yield "delicious", X, Y
    X, Y = make_multilabel(
        n_big, 100, 100_000, label_cardinality=4.0, sparse_output=True, random_state=1
    )
    yield "100k labels", X, Y


def encode_fns(X, Y, k, n_iter, seed):
    """One zero-argument function per method, each fitting and encoding ``Y``."""
    return {
        "TruncatedSVD": lambda: TruncatedSVD(
            k, algorithm="randomized", n_iter=n_iter, random_state=seed
        ).fit_transform(Y),
        "plst": lambda: PLSTReducer(k, random_state=seed, n_iter=n_iter, n_oversamples=10)
        .fit(Y)
        .encode(Y),
        "rembrandt": lambda: RembrandtReducer(k, random_state=seed).fit(Y, X).encode(Y),
        "cssp": lambda: CSSPReducer(k, random_state=seed, n_iter=n_iter, n_oversamples=10)
        .fit(Y)
        .encode(Y),
        "random": lambda: RandomReducer(k, random_state=seed).fit(Y).encode(Y),
    }


def time_encoders(X, Y, k, n_iter, repeats):
    times = {name: [] for name in ("TruncatedSVD",) + ENCODERS}
    for r in range(repeats):
        for name, fn in encode_fns(X, Y, k, n_iter, seed=r).items():
            start = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - start)
    return {name: (min(t), statistics.median(t)) for name, t in times.items()}


def blocked_metrics(score_fn, Xs, Ys, block):
    """LRAP and RMSE over row blocks, weighted like the full-matrix metrics."""
    lrap_sum, lrap_rows, sq_sum = 0.0, 0, 0.0
    n, d = Ys.shape
    for start in range(0, n, block):
        S = score_fn(Xs[start : start + block])
        T = Ys[start : start + block]
        has = int(np.count_nonzero(np.diff(T.indptr)))
        if has:
            lrap_sum += label_ranking_average_precision(T, S) * has
            lrap_rows += has
        sq_sum += rmse(T, S) ** 2 * T.shape[0] * d
    return lrap_sum / lrap_rows, float(np.sqrt(sq_sum / (n * d)))


def accuracy(X, Y, k, seed, max_test=2000, block=250):
    n = X.shape[0]
    perm = np.random.default_rng(seed).permutation(n)
    n_test = n // 5
    test, train = np.sort(perm[:n_test][:max_test]), np.sort(perm[n_test:])
    Xt, Yt, Xs, Ys = X[train], Y[train], X[test], Y[test]
    out = {}
    for reducer in ENCODERS:
        model = LabelSpaceClassifier(reducer=reducer, n_components=k, alpha=1.0, random_state=seed)
        start = time.perf_counter()
        model.fit(Xt, Yt)
        fit_s = time.perf_counter() - start
        lrap, err = blocked_metrics(model.decision_function, Xs, Ys, block)
        out[reducer] = {"lrap": lrap, "rmse": err, "fit_s": fit_s}
    freq = np.asarray(Yt.mean(axis=0)).ravel()
    lrap, err = blocked_metrics(lambda rows: np.tile(freq, (rows.shape[0], 1)), Xs, Ys, block)
    out["label frequency"] = {"lrap": lrap, "rmse": err, "fit_s": 0.0}
    return out


def figure_rows(problem: dict) -> list[dict]:
    """One flat row per method of a problem: encoding times (best, median) and accuracy."""
    shape = {"X_rows": problem["shape_X"][0], "X_cols": problem["shape_X"][1],
             "Y_rows": problem["shape_Y"][0], "Y_cols": problem["shape_Y"][1]}
    settings = {key: problem[key] for key in ("nnz_Y", "k", "n_iter", "repeats", "blas_threads")}
    rows = []
    for method in dict.fromkeys([*problem["encode_s"], *problem["accuracy"]]):
        row = {"problem": problem["problem"], **shape, **settings, "method": method}
        if method in problem["encode_s"]:
            row.update(encode_best_s=problem["encode_s"][method]["best"],
                       encode_median_s=problem["encode_s"][method]["median"])
        if method in problem["accuracy"]:
            row.update(problem["accuracy"][method])
        rows.append(row)
    return rows


def summarize(rows: list[dict]) -> list[dict]:
    """Rows of the docs table from the figures, one per problem: best encoding times against
    TruncatedSVD's, and the LRAP of each encoder's classifier."""
    summary = []
    for name in dict.fromkeys(row["problem"] for row in rows):
        runs = {row["method"]: row for row in rows if row["problem"] == name}
        ref = runs["TruncatedSVD"]
        encoders = [runs[m] for m in ("plst", "cssp", "rembrandt") if m in runs]
        speed = ", ".join(f"{DISPLAY[row['method']]} {times_faster(ref['encode_best_s'], row['encode_best_s'])}"
                          for row in encoders)
        lraps = ", ".join(f"{DISPLAY[row['method']]} {row['lrap']:.4f}" for row in encoders
                          if row.get("lrap") is not None)
        data = (f"label-space encoding, {name}: Y {ref['Y_rows']:,} x {ref['Y_cols']:,} "
                f"({ref['nnz_Y']:,} nonzeros), k = {ref['k']}")
        text = f"{speed} (best of {ref['repeats']})"
        if lraps:
            text += f"; LRAP {lraps}"
            if "label frequency" in runs:
                text += f" (label frequency {runs['label frequency']['lrap']:.4f})"
        summary.append({"data": data, "anchor": "scikit-learn's `TruncatedSVD`", "gpurpo": text})
    return summary


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="small problems (under a minute)")
    parser.add_argument("--rank", type=int, default=20, help="n_components k (default 20)")
    parser.add_argument("--n-iter", type=int, default=5, help="power iterations of the SVDs (TruncatedSVD's default 5)")
    parser.add_argument("--repeats", type=int, default=None, help="timing repetitions (best and median reported)")
    parser.add_argument("--blas-threads", type=int, default=None, help="limit BLAS threads (threadpoolctl)")
    parser.add_argument("--output", type=Path, default=None, help="also write the results as JSON here")
    args = parser.parse_args(argv)
    if args.blas_threads is not None:
        with threadpool_limits(limits=args.blas_threads, user_api="blas"):
            return run(args)
    return run(args)


def run(args):
    repeats = args.repeats or (3 if args.quick else 5)
    k = args.rank

    results = []
    for name, X, Y in problems(args.quick):
        times = time_encoders(X, Y, k, args.n_iter, repeats)
        acc = accuracy(X, Y, k, seed=0)
        results.append(
            {"problem": name, "shape_X": list(X.shape), "shape_Y": list(Y.shape), "nnz_Y": int(Y.nnz),
             "k": k, "n_iter": args.n_iter, "repeats": repeats, "blas_threads": args.blas_threads,
             "encode_s": {name: {"best": t[0], "median": t[1]} for name, t in times.items()},
             "accuracy": acc}
        )
        print(f"\n{name}: X {X.shape[0]}x{X.shape[1]}, Y {Y.shape[0]}x{Y.shape[1]} sparse "
              f"(nnz {Y.nnz}), k={k}, {repeats} interleaved runs, BLAS threads: "
              f"{args.blas_threads or 'default'}")
        ref = times["TruncatedSVD"][0]
        print(f"  {'method':<15} {'best s':>8} {'median s':>9} {'TSVD/this':>10} {'LRAP':>7} "
              f"{'RMSE':>8} {'fit s':>7}")
        print(f"  {'TruncatedSVD':<15} {ref:>8.3f} {times['TruncatedSVD'][1]:>9.3f} {1.0:>10.2f} "
              f"{'-':>7} {'-':>8} {'-':>7}")
        for method in ENCODERS + ("label frequency",):
            a = acc[method]
            if method in times:
                best, median = times[method]
                enc = f"{best:>8.3f} {median:>9.3f} {ref / best:>10.2f}"
            else:
                enc = f"{'-':>8} {'-':>9} {'-':>10}"
            print(f"  {method:<15} {enc} {a['lrap']:>7.4f} {a['rmse']:>8.5f} {a['fit_s']:>7.2f}")
    if args.output is not None:
        rows = [row for problem in results for row in figure_rows(problem)]
        write_record(args.output, make_record("label_space", rows, summarize(rows)))
    return results


if __name__ == "__main__":
    main()
