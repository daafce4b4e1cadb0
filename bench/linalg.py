"""Benchmark: gpurpo.linalg.randomized_svd against scikit-learn's randomized_svd.

Both run in one process on the same matrices with the same rank, oversampling,
number of power iterations and power-iteration normalizer, interleaved
repetition by repetition so that load on the machine affects both alike. The
table reports the median wall time of each, the ratio sklearn / gpurpo (> 1:
gpurpo faster) and the relative approximation error of each,

    ||A - U diag(s) Vt||_F / ||A||_F,

computed without densifying sparse A from the identity (U, V orthonormal)

    ||A - U S Vt||_F^2 = ||A||_F^2 - 2 sum_i s_i u_i^T A v_i + sum_i s_i^2.

scikit-learn's normalizers are "QR" (scipy.linalg.qr) and "LU" (its default
for more than two power iterations); gpurpo's "QR" is Cholesky QR2 with a
Householder fallback, so both sklearn rows are compared with it.

Usage::

    python bench/linalg.py                   # 20000x2000 dense, 200000x20000 sparse
    python bench/linalg.py --quick           # small matrices, a few seconds
    python bench/linalg.py --blas-threads 1  # stable timings on a shared machine

``--output`` writes the rows as JSON, in the schema of ``bench/_results.py``.

On an oversubscribed machine multi-threaded OpenBLAS calls on tall-skinny
blocks can stall for seconds (threads spin while a sibling is descheduled);
``--blas-threads 1`` removes that noise for both libraries alike.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import scipy.sparse as sp
from sklearn.utils.extmath import randomized_svd as sk_randomized_svd

try:
    from gpurpo.linalg import randomized_svd as gp_randomized_svd
except ImportError:  # run from a source checkout without installing
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from gpurpo.linalg import randomized_svd as gp_randomized_svd

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _results import make_record, times_faster, write_record  # noqa: E402


def dense_low_rank_plus_noise(m, n, rank, seed, dtype=np.float64):
    rng = np.random.default_rng(seed)
    U = np.linalg.qr(rng.standard_normal((m, rank)))[0]
    V = np.linalg.qr(rng.standard_normal((n, rank)))[0]
    spectrum = np.geomspace(100.0, 5.0, rank) * np.sqrt(m)
    A = (U * spectrum) @ V.T
    A += rng.standard_normal((m, n))
    return A.astype(dtype)


def sparse_random(m, n, density, seed, dtype=np.float64):
    rng = np.random.default_rng(seed)
    nnz = int(round(m * n * density))
    rows = rng.integers(0, m, nnz)
    cols = rng.integers(0, n, nnz)
    # rows and columns with skewed activity give a spectrum worth approximating
    scale = (1.0 + rng.pareto(2.0, m))[rows] * (1.0 + rng.pareto(2.0, n))[cols]
    A = sp.csr_matrix((rng.random(nnz) * scale, (rows, cols)), shape=(m, n))
    A.sum_duplicates()
    return A.astype(dtype)


def relative_error(A, U, s, Vt):
    U = np.asarray(U, dtype=np.float64)
    s = np.asarray(s, dtype=np.float64)
    V = np.asarray(Vt, dtype=np.float64).T
    if sp.issparse(A):
        norm_sq = float(np.sum(A.data.astype(np.float64) ** 2))
        AV = np.asarray(A.astype(np.float64) @ V)
    else:
        A64 = A.astype(np.float64, copy=False)
        norm_sq = float(np.sum(A64 * A64))
        AV = A64 @ V
    cross = float(np.sum(s * np.sum(U * AV, axis=0)))
    err_sq = max(norm_sq - 2 * cross + float(np.sum(s * s)), 0.0)
    return np.sqrt(err_sq / norm_sq)


def time_call(fn):
    start = time.perf_counter()
    out = fn()
    return time.perf_counter() - start, out


def run_case(name, A, k, p, n_iter, sk_normalizer, repeats, seed):
    sk_times, gp_times = [], []
    sk_out = gp_out = None
    for r in range(repeats):
        t, sk_out = time_call(
            lambda: sk_randomized_svd(
                A,
                k,
                n_oversamples=p,
                n_iter=n_iter,
                power_iteration_normalizer=sk_normalizer,
                random_state=seed + r,
            )
        )
        sk_times.append(t)
        t, gp_out = time_call(
            lambda: gp_randomized_svd(
                A,
                k,
                n_oversamples=p,
                n_iter=n_iter,
                random_state=seed + r,
                power_iteration_normalizer="QR",
            )
        )
        gp_times.append(t)
    sk_t = statistics.median(sk_times)
    gp_t = statistics.median(gp_times)
    return {
        "case": name,
        "rows": int(A.shape[0]),
        "cols": int(A.shape[1]),
        "dtype": str(A.dtype),
        "nnz": int(A.nnz) if sp.issparse(A) else int(A.size),
        "k": k,
        "oversamples": p,
        "n_iter": n_iter,
        "sklearn_normalizer": sk_normalizer,
        "gpurpo_normalizer": "QR",
        "sklearn_s": sk_t,
        "gpurpo_s": gp_t,
        "ratio_sklearn_over_gpurpo": sk_t / gp_t,
        "sklearn_rel_error": relative_error(A, *sk_out),
        "gpurpo_rel_error": relative_error(A, *gp_out),
    }


def summarize(rows):
    """Rows of the docs table from the figures, one per matrix: gpurpo against scikit-learn with
    each of its normalizers, and both approximation errors."""
    summary = []
    for case in dict.fromkeys(row["case"] for row in rows):
        runs = [row for row in rows if row["case"] == case]
        first = runs[0]
        speed = ", ".join(f"{times_faster(row['sklearn_s'], row['gpurpo_s'])} than {row['sklearn_normalizer']}"
                          for row in runs)
        errors = ", ".join(f"{row['sklearn_rel_error']:.6f} ({row['sklearn_normalizer']})" for row in runs)
        summary.append({
            "data": (f"randomized SVD, {case} {first['rows']:,} x {first['cols']:,}, k = {first['k']}, "
                     f"{first['n_iter']} power iterations"),
            "anchor": "scikit-learn's `randomized_svd` (QR / LU normalizer)",
            "gpurpo": f"{speed}; relative error {first['gpurpo_rel_error']:.6f} against {errors}",
        })
    return summary


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="small matrices (seconds)")
    parser.add_argument("--repeats", type=int, default=None, help="repetitions per case (median)")
    parser.add_argument("--rank", type=int, default=10, help="n_components k")
    parser.add_argument("--oversamples", type=int, default=10, help="n_oversamples p")
    parser.add_argument("--n-iter", type=int, default=None, help="power iterations (default: sklearn's auto)")
    parser.add_argument("--output", type=Path, default=None, help="also write the rows as JSON here")
    parser.add_argument(
        "--blas-threads",
        type=int,
        default=None,
        help="limit BLAS threads (threadpoolctl) for both libraries; default: leave as is",
    )
    args = parser.parse_args(argv)
    if args.blas_threads is not None:
        from threadpoolctl import threadpool_limits

        with threadpool_limits(limits=args.blas_threads, user_api="blas"):
            return _run(args)
    return _run(args)


def _run(args):
    if args.quick:
        dense_shape, sparse_shape, density, repeats = (4000, 500), (40000, 4000), 2e-3, 3
    else:
        dense_shape, sparse_shape, density, repeats = (20000, 2000), (200000, 20000), 1e-3, 3
    repeats = args.repeats or repeats
    k, p = args.rank, args.oversamples

    matrices = [
        ("dense f64", dense_low_rank_plus_noise(*dense_shape, rank=2 * k, seed=0)),
        ("dense f32", dense_low_rank_plus_noise(*dense_shape, rank=2 * k, seed=0, dtype=np.float32)),
        ("sparse f64", sparse_random(*sparse_shape, density, seed=1)),
        ("sparse.T f64", sparse_random(*sparse_shape, density, seed=2).T.tocsr()),
    ]
    rows = []
    for name, A in matrices:
        n_iter = args.n_iter
        if n_iter is None:
            n_iter = 7 if k < 0.1 * min(A.shape) else 4
        for normalizer in ("QR", "LU"):
            rows.append(run_case(name, A, k, p, n_iter, normalizer, repeats, seed=0))

    header = (
        f"{'case':<13} {'shape':>15} {'q':>2} {'sk norm':>7} {'sklearn s':>10} {'gpurpo s':>9} "
        f"{'sk/gp':>6} {'sk rel err':>11} {'gp rel err':>11}"
    )
    print(header)
    print("-" * len(header))
    for r in rows:
        shape = f"{r['rows']}x{r['cols']}"
        print(
            f"{r['case']:<13} {shape:>15} {r['n_iter']:>2} {r['sklearn_normalizer']:>7} "
            f"{r['sklearn_s']:>10.3f} {r['gpurpo_s']:>9.3f} {r['ratio_sklearn_over_gpurpo']:>6.2f} "
            f"{r['sklearn_rel_error']:>11.6f} {r['gpurpo_rel_error']:>11.6f}"
        )
    threads = "default" if args.blas_threads is None else args.blas_threads
    print(
        f"\nk={k}, p={p}, median of {repeats} interleaved runs; gpurpo normalizer: QR; "
        f"BLAS threads: {threads}"
    )
    if args.output is not None:
        write_record(args.output, make_record("linalg", rows, summarize(rows)))
    return rows


if __name__ == "__main__":
    main()
