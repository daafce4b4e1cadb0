"""gpurpo.dask against the single-machine fit: a forest and a boosting fit on 1, 2, ... workers.

Every configuration fits the same data in one run: the single-machine estimator on one
thread, then the :mod:`gpurpo.dask` estimator on a ``distributed.LocalCluster`` of
``w`` worker processes with one thread each, for every ``w`` of ``--workers``. Reported
per fit: wall time and its ratio to the single-machine fit, the test score of both
(LRAP for the multi-label forest, aRRMSE for the multi-target boosting), whether the
predictions are equal, and the bytes moved:

* forests, ``data="replicate"``: the setup copied to every worker (uint8 codes, the
  outputs and, for Random Forests, the raw X) and the pickled trees sent back per tree;
* forests, ``data="local"``: the pickled trees per tree (no row data moves);
* boosting: the array payload per tree level (``bytes_moved_per_level_``: partial
  histograms to the client, splits broadcast, the workers' replies).

On one machine the workers share its cores and memory bandwidth, so the timings show
the overhead of the distribution, not the speed-up of a cluster; the bytes per tree and
per level are what a network would carry.
"""

from __future__ import annotations

import argparse
import os
import pickle
import sys
import time
import warnings
from pathlib import Path

import numpy as np
from _machine import cpu_description
from _results import make_record, write_record


def _forest_data(n: int, p: int, d: int, seed: int = 0):
    from gpurpo.datasets import make_multilabel

    X, Y = make_multilabel(n_samples=n, n_features=p, n_labels=d, random_state=seed,
                           sparse_output=False)
    split = int(0.8 * n)
    return X[:split], Y[:split], X[split:], Y[split:]


def _boosting_data(n: int, p: int, d: int, seed: int = 1):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, p))
    W = rng.normal(size=(p, 8)) / np.sqrt(p)
    Y = np.tanh(X @ W) @ rng.normal(size=(8, d)) + 0.3 * rng.normal(size=(n, d))
    split = int(0.8 * n)
    return X[:split], Y[:split], X[split:], Y[split:]


def _arrmse(Y, P, Y_train):
    return float(np.mean(np.sqrt(((Y - P) ** 2).sum(0) / ((Y - Y_train.mean(0)) ** 2).sum(0))))


def _spread(client, A, n_chunks: int):
    """``A`` as a Dask array of ``n_chunks`` row chunks dealt in turn to the workers."""
    import dask.array as da

    workers = sorted(client.scheduler_info()["workers"])
    step = -(-A.shape[0] // n_chunks)
    parts = []
    for k, start in enumerate(range(0, A.shape[0], step)):
        block = A[start:start + step]
        future = client.scatter(block, workers=[workers[k % len(workers)]])
        parts.append(da.from_delayed(future, shape=block.shape, dtype=block.dtype))
    return da.concatenate(parts)


def _timed(fn):
    start = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - start


def run(workers: list[int], n_forest: int, n_boost: int, trees: int, rounds: int) -> list[dict]:
    import distributed
    from sklearn.metrics import label_ranking_average_precision_score as lrap

    from gpurpo import dask as gdask
    from gpurpo import ensemble

    warnings.filterwarnings("ignore", message="Sending large graph")
    rows = []
    Xf, Yf, Xf_test, Yf_test = _forest_data(n_forest, 100, 200)
    Xb, Yb, Xb_test, Yb_test = _boosting_data(n_boost, 100, 200)
    forest_kw = dict(n_estimators=trees, projection="gaussian", n_components="log",
                     max_features="sqrt", random_state=0)
    boost_kw = dict(strategy="relabel_rpo", projection="gaussian", n_components=20,
                    n_estimators=rounds, max_leaf_nodes=31, random_state=0)
    single = {}
    with_threads = dict(n_jobs=1)
    # compile the kernels first (the workers load them from the same on-disk cache)
    ensemble.RandomForestClassifier(**dict(forest_kw, n_estimators=2), **with_threads).fit(
        Xf[:500], Yf[:500])
    ensemble.GradientBoostingRegressor(**dict(boost_kw, n_estimators=2)).fit(Xb[:500], Yb[:500])
    # the machine may be shared: the single-machine times are the best of two fits
    fits = [_timed(lambda: ensemble.RandomForestClassifier(**forest_kw, **with_threads).fit(Xf, Yf))
            for _ in range(2)]
    ref_forest, single["forest"] = fits[0][0], min(s for _, s in fits)
    fits = [_timed(lambda: ensemble.GradientBoostingRegressor(**boost_kw).fit(Xb, Yb))
            for _ in range(2)]
    ref_boost, single["boosting"] = fits[0][0], min(s for _, s in fits)
    forest_score = lrap(Yf_test, ref_forest.predict_proba(Xf_test))
    boost_score = _arrmse(Yb_test, ref_boost.predict(Xb_test), Yb)
    print(f"single machine: forest {single['forest']:.2f} s (LRAP {forest_score:.4f}), "
          f"boosting {single['boosting']:.2f} s (aRRMSE {boost_score:.4f})", flush=True)
    for w in workers:
        cluster = distributed.LocalCluster(n_workers=w, threads_per_worker=1, processes=True,
                                           dashboard_address=None, silence_logs=40)
        with distributed.Client(cluster) as client:
            # the data live on the workers before the clock starts, as loaded data would
            Xd, Yd = (_spread(client, a, 2 * w) for a in (Xf, Yf))
            for mode in ("replicate", "local"):
                est, seconds = _timed(lambda: gdask.RandomForestClassifier(
                    **forest_kw, **with_threads, data=mode, client=client).fit(Xd, Yd))
                local = est.to_local()
                score = lrap(Yf_test, local.predict_proba(Xf_test))
                per_tree = len(pickle.dumps(local)) / trees
                setup = 0
                if mode == "replicate":
                    setup = w * (Xf.size + Yf.size * 4 + Xf.nbytes)
                row = dict(fit="forest", mode=mode, workers=w, trees=trees, n_train=Xf.shape[0],
                           p=Xf.shape[1], d=Yf.shape[1], wall_s=seconds,
                           single_machine_s=single["forest"],
                           ratio_to_single=seconds / single["forest"], score="LRAP",
                           dask_score=float(score), single_machine_score=float(forest_score),
                           same_predictions=bool(np.array_equal(
                               local.predict_proba(Xf_test), ref_forest.predict_proba(Xf_test))),
                           setup_bytes=int(setup), bytes_per_tree=int(per_tree))
                rows.append(row)
                print(f"forest {mode:9s} {w} workers: {seconds:.2f} s "
                      f"({row['ratio_to_single']:.2f}x single), LRAP {score:.4f}, "
                      f"{per_tree / 1e3:.0f} kB per tree, setup {setup / 1e6:.1f} MB, "
                      f"same predictions {row['same_predictions']}", flush=True)
            Xd, Yd = (_spread(client, a, w) for a in (Xb, Yb))
            est, seconds = _timed(lambda: gdask.GradientBoostingRegressor(
                **boost_kw, client=client).fit(Xd, Yd))
            predicted = est.to_local().predict(Xb_test)
            levels = np.asarray(est.bytes_moved_per_level_)
            row = dict(fit="boosting", mode="summed histograms", workers=w, trees=rounds,
                       n_train=Xb.shape[0], p=Xb.shape[1], d=Yb.shape[1], wall_s=seconds,
                       single_machine_s=single["boosting"],
                       ratio_to_single=seconds / single["boosting"], score="aRRMSE",
                       dask_score=_arrmse(Yb_test, predicted, Yb),
                       single_machine_score=boost_score,
                       same_predictions=bool(np.allclose(predicted, ref_boost.predict(Xb_test),
                                                         rtol=1e-5, atol=1e-8)),
                       levels=int(levels.size), median_bytes_per_level=int(np.median(levels)),
                       bytes_per_tree=int(levels.sum() / rounds))
            rows.append(row)
            print(f"boosting {w} workers: {seconds:.2f} s ({row['ratio_to_single']:.2f}x single), "
                  f"aRRMSE {row['dask_score']:.4f}, {row['median_bytes_per_level'] / 1e6:.2f} MB "
                  f"per level, same predictions {row['same_predictions']}", flush=True)
        cluster.close()
    return rows


def summarize(rows: list[dict]) -> list[dict]:
    """Docs rows: the forest (replicate) and the boosting fit on the most workers."""
    most = max(row["workers"] for row in rows)
    out = []
    for fit, mode in (("forest", "replicate"), ("boosting", "summed histograms")):
        row = next(r for r in rows if r["fit"] == fit and r["mode"] == mode and r["workers"] == most)
        moved = (f"{row['bytes_per_tree'] / 1e3:.0f} kB per tree" if fit == "forest"
                 else f"{row['median_bytes_per_level'] / 1e6:.1f} MB per level")
        out.append({
            "data": f"{fit}, {row['n_train']:,} x {row['p']} X, d = {row['d']}, {most} local workers",
            "anchor": f"gpurpo's single-machine {fit} on one thread",
            "gpurpo": (f"{row['ratio_to_single']:.2f}x its time, same predictions: "
                       f"{'yes' if row['same_predictions'] else 'no'}, {moved}"),
        })
    return out


def main(argv: list[str] | None = None) -> int:
    # one thread everywhere, before numba starts: the single-machine fits and every worker
    # process (which inherits the environment)
    os.environ["NUMBA_NUM_THREADS"] = "1"
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--forest-rows", type=int, default=20_000)
    parser.add_argument("--boosting-rows", type=int, default=20_000)
    parser.add_argument("--trees", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--output", type=Path, default=None)
    args = parser.parse_args(argv)
    print(f"{cpu_description()}; workers of one thread each")
    rows = run(args.workers, args.forest_rows, args.boosting_rows, args.trees, args.rounds)
    if args.output is not None:
        notes = ("Local workers share one machine's cores and memory bandwidth: the times show "
                 "the cost of distributing, not a cluster's speed-up. On a multi-GPU machine the "
                 "same code runs on dask-cuda's LocalCUDACluster, one worker per GPU, with CuPy "
                 "chunks; the bytes per tree and per level are what the interconnect carries.")
        write_record(args.output, make_record("dask_scaling", rows, summarize(rows), notes=notes))
    return 0


if __name__ == "__main__":
    sys.exit(main())
