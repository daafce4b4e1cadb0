"""Random-output forests: fit time and test LRAP, gpurpo vs scikit-learn.

On delicious-shaped (n = 12,920 + 3,185 test, p = 500, d = 983, ~19 labels
per row) and mediamill-shaped (n = 30,993 + 12,914 test, p = 120, d = 101)
structured synthetic multi-label data (:func:`gpurpo.datasets.make_delicious_like`,
:func:`gpurpo.datasets.make_mediamill_like`); forests of ``--trees`` (100)
fully grown trees with ``max_features = sqrt(p)`` and bootstrap samples
(Joly, Geurts & Wehenkel 2014, Algorithm 2 with a Gaussian projection of
``m = round(ln d)`` rows per tree):

* ``gpurpo``: :class:`gpurpo.ensemble.RandomForestRegressor` (binning,
  projection, growth in batches and leaf labelling all in the fit time);
* ``sk-proj``: scikit-learn ``DecisionTreeRegressor`` trees on the SAME
  per-tree projections and the SAME bootstrap samples (as weights, the way
  scikit-learn's forests use them), each relabelled with the weighted mean
  original outputs per leaf: the same algorithm, so the same accuracy is
  expected. Projection products and relabelling are in its fit time; trees
  are fitted in parallel with joblib threads (scikit-learn releases the GIL);
* ``sk-full``: scikit-learn ``RandomForestRegressor`` on the full outputs.
  It is very slow and its trees hold (nodes x d) float64 values, so only
  ``--full-trees`` trees are fitted; its fit time is scaled to ``--trees``
  trees (trees are independent, the scaling is linear) and its LRAP is the
  LRAP of those trees, printed beside gpurpo's LRAP with its first
  ``--full-trees`` trees.

Each data set is run with both kinds of inputs and both label containers, one
row each (``--features`` and ``--labels`` choose them; default all four):

* inputs: ``continuous`` (standard normal columns, the generators' default) or
  ``text`` (binary word presence features at ``--feature-density``, 4 % ones
  by default, in a dense array, as text multi-label sets store them; the same
  labels as the continuous inputs);
* labels: ``dense`` (a 0/1 ndarray) or ``csr`` (a SciPy CSR matrix), the
  container that gpurpo and ``sk-proj`` fit on (``sk-proj`` relabels from
  either; leaf means of dense labels are kept as CSR, as gpurpo keeps sparse
  leaves). ``sk-full`` needs dense
  labels: it is fitted once per data set and kind of inputs, and its figures
  are repeated in the rows of both containers.

Everyone runs on ``--n-jobs`` threads (numba threads for gpurpo, ``n_jobs``
for scikit-learn). Fit times are single runs after a warm-up fit that
compiles gpurpo's numba kernels (all of them: its trees have large nodes).

Run ``python bench/forest.py`` (or ``--quick`` for a quarter of the rows,
fewer trees). Results are also written as JSON (``--output``, the schema of
``bench/_results.py``).

On a GPU machine (the same benchmarks at 10x the rows, GPU vs CPU
path), ``--rows-factor 10 --devices cuda,cpu --cpu-trees 10 --skip-proj
--skip-full`` fits gpurpo's forest on the GPU (``device="cuda"``) and on the
CPU path of the same machine, the latter with fewer trees, and compares the
time per tree (trees are independent, so the time is linear in their number).
"""

from __future__ import annotations

import argparse
import math
import platform
import sys
import time
from pathlib import Path

import numpy as np
import scipy.sparse as sp

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _machine import cpu_description  # noqa: E402
from _results import gpu_name, inputs_text, make_record, speedup_text, times_faster, write_record  # noqa: E402

from gpurpo.backend import NUMPY  # noqa: E402
from gpurpo.datasets import make_delicious_like, make_mediamill_like  # noqa: E402
from gpurpo.ensemble import RandomForestRegressor  # noqa: E402
from gpurpo.metrics import label_ranking_average_precision  # noqa: E402
from gpurpo.tree import predict_trees  # noqa: E402

FEATURES = ("continuous", "text")
LABELS = ("dense", "csr")


def _split(X, Y, n_test, seed, labels="csr"):
    """Training and test rows; the training labels in the ``labels`` container, the test labels CSR."""
    rng = np.random.default_rng(seed)
    idx = rng.permutation(X.shape[0])
    te, tr = idx[:n_test], idx[n_test:]
    Y = sp.csr_matrix(Y)
    Ytr = Y[tr] if labels == "csr" else Y[tr].toarray()
    return X[tr], Ytr, X[te], Y[te]


def _nnz(Y):
    return int(Y.nnz) if sp.issparse(Y) else int(np.count_nonzero(Y))


def _timed(fn):
    t0 = time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, out


def _lrap(Y_true, scores):
    if sp.issparse(scores):
        scores = scores.toarray()
    return label_ranking_average_precision(Y_true, np.asarray(scores))


def _relabelled_tree(X, Y, projection, counts, seed):
    """scikit-learn tree on ``Y @ projection.T`` with bootstrap weights, relabelled."""
    from sklearn.tree import DecisionTreeRegressor

    Z = np.asarray(Y @ projection.T)
    tree = DecisionTreeRegressor(max_features="sqrt", random_state=seed)
    tree.fit(X, Z, sample_weight=counts)
    leaf = tree.apply(X)
    inside = np.flatnonzero(counts > 0)
    nodes, inverse = np.unique(leaf[inside], return_inverse=True)
    indicator = sp.csr_matrix(
        (counts[inside], (inverse, inside)), shape=(nodes.size, X.shape[0])
    )
    weight = np.asarray(indicator.sum(axis=1)).ravel()
    if sp.issparse(Y):
        values = (sp.diags(1.0 / weight) @ (indicator @ Y)).tocsr()
    else:  # means of dense 0/1 labels, kept as CSR as gpurpo keeps sparse leaves
        values = sp.csr_matrix((indicator @ Y) / weight[:, None])
    return tree, nodes, values


def _sk_proj_fit(X, Y, forest, n_jobs):
    from joblib import Parallel, delayed

    n = X.shape[0]
    samples = forest.estimators_samples_
    jobs = (
        delayed(_relabelled_tree)(
            X, Y, forest.get_projection(t), np.bincount(samples[t], minlength=n).astype(float), t
        )
        for t in range(forest.n_estimators)
    )
    return Parallel(n_jobs=n_jobs, prefer="threads")(jobs)


def _sk_proj_predict(trees, X):
    total = None
    for tree, nodes, values in trees:
        rows = np.searchsorted(nodes, tree.apply(X))
        part = values[rows]
        total = part if total is None else total + part
    return total / len(trees)


def _fit_synchronized(forest, X, Y, device):
    """Fit; on the GPU, wait for the device to finish before the clock stops."""
    forest.fit(X, Y)
    if device == "cuda":
        import cupy

        cupy.cuda.Device().synchronize()
    return forest


def _host(a):
    return a.get() if hasattr(a, "get") and not isinstance(a, np.ndarray) else a


def _to_cpu_model(forest):
    """A GPU-fitted forest as a CPU model (pickling moves its arrays to the host)."""
    import pickle

    return pickle.loads(pickle.dumps(forest))


def run_dataset(name, X, Y, n_test, args, features="continuous", labels="csr", full_cache=None):
    """One row: gpurpo and its anchors on one data set, kind of inputs and label container.

    ``full_cache`` (a dict) keeps scikit-learn's full-output forest per data set and kind of
    inputs, so that the rows of the two label containers share one fit of it.
    """
    from sklearn.ensemble import RandomForestRegressor as SkForest

    Xtr, Ytr, Xte, Yte = _split(X, Y, n_test, 0, labels)
    d = Ytr.shape[1]
    m = max(1, int(round(math.log(d))))
    T = args.trees
    x_density = float(np.count_nonzero(Xtr)) / Xtr.size
    print(f"\n== {name}, {features} X ({100 * x_density:.1f} % nonzero), {labels} labels: "
          f"n_train={Xtr.shape[0]} n_test={Xte.shape[0]} p={Xtr.shape[1]} d={d} "
          f"m={m} labels/row={_nnz(Ytr) / Ytr.shape[0]:.1f}; {T} trees, n_jobs={args.n_jobs}",
          flush=True)
    row = dict(dataset=name, features=features, labels=labels, x_density=x_density,
               n_train=int(Xtr.shape[0]), n_test=int(Xte.shape[0]),
               p=int(Xtr.shape[1]), d=int(d), m=m, trees=T, n_jobs=args.n_jobs,
               cpu=cpu_description())

    def gpurpo_forest(n_trees, seed, device="cpu"):
        return RandomForestRegressor(
            n_estimators=n_trees, max_features="sqrt", projection="gaussian", n_components=m,
            random_state=seed, n_jobs=args.n_jobs, device=device,
        )

    devices = [d.strip() for d in args.devices.split(",") if d.strip()]
    per_tree = {}
    for index, device in enumerate(devices):
        n_dev = T if index == 0 else min(T, args.cpu_trees)
        # warm-up: compilation, on up to 10,000 rows, so that bootstrap roots hold more
        # unique samples than the CPU's small-node size (4,096) and the kernels of the large
        # nodes (histograms, scores, node statistics) compile here too; on 6,000 rows (about
        # 3,800 unique) they compiled inside the timed fit: a first delicious-shaped 16-tree
        # fit took 15.8 s on a cold numba cache against 1.2 s for the next
        gpurpo_forest(2, 123, device).fit(Xtr[:10_000], Ytr[:10_000])
        candidate = gpurpo_forest(n_dev, 0, device)
        t_dev, _ = _timed(lambda: _fit_synchronized(candidate, Xtr, Ytr, device))
        lrap_dev = _lrap(Yte, _host(candidate.predict(Xte)))
        per_tree[index] = t_dev / n_dev
        key = "gpurpo" if index == 0 else f"gpurpo_{index}_{device}"
        row.update({f"{key}_device": device, f"{key}_trees": n_dev, f"{key}_fit_s": t_dev,
                    f"{key}_lrap": lrap_dev, f"{key}_batch_size": candidate.batch_size_})
        print(f"gpurpo   fit {t_dev:9.2f} s   test LRAP {lrap_dev:.4f}   ({device}, {n_dev} trees, "
              f"{t_dev / n_dev:.3f} s per tree, batch of {candidate.batch_size_} trees)",
              flush=True)
        if index == 0:
            forest, t_gp, lrap_gp = candidate, t_dev, lrap_dev
    row.update(gpurpo_mean_leaves=float(np.mean([t.n_leaves for t in forest.estimators_])))
    for index, device in enumerate(devices[1:], start=1):
        ratio = per_tree[index] / per_tree[0]
        row[f"per_tree_speedup_vs_{index}_{device}"] = ratio
        print(f"gpurpo on {devices[0]} is {ratio:.1f}x faster per tree than on {device}",
              flush=True)
    if devices[0] != "cpu":
        forest = _to_cpu_model(forest)

    if not args.skip_proj:
        t_sp, trees = _timed(lambda: _sk_proj_fit(Xtr, Ytr, forest, args.n_jobs))
        lrap_sp = _lrap(Yte, _sk_proj_predict(trees, Xte))
        del trees
        row.update(sk_proj_fit_s=t_sp, sk_proj_lrap=lrap_sp, speedup_vs_sk_proj=t_sp / t_gp,
                   lrap_gap_vs_sk_proj=lrap_gp - lrap_sp)
        print(f"sk-proj  fit {t_sp:9.2f} s   test LRAP {lrap_sp:.4f}   "
              f"gpurpo is {t_sp / t_gp:6.1f}x faster, LRAP difference {lrap_gp - lrap_sp:+.4f}",
              flush=True)

    if not args.skip_full:
        k = min(args.full_trees, T)
        cache = {} if full_cache is None else full_cache
        if (name, features) not in cache:
            sk = SkForest(n_estimators=k, max_features="sqrt", n_jobs=args.n_jobs, random_state=0)
            Ydense = Ytr.toarray() if sp.issparse(Ytr) else Ytr
            t_full, _ = _timed(lambda: sk.fit(Xtr, Ydense))
            cache[name, features] = (t_full, _lrap(Yte, sk.predict(Xte)), labels)
            del sk, Ydense
        t_full, lrap_full, fitted_with = cache[name, features]
        scaled = t_full * T / k
        first_k = predict_trees(forest.estimators_[:k], Xte, NUMPY) / k
        lrap_gp_k = _lrap(Yte, first_k)
        row.update(sk_full_trees=k, sk_full_fit_row_labels=fitted_with, sk_full_fit_s=t_full,
                   sk_full_fit_s_scaled=scaled,
                   sk_full_lrap=lrap_full, gpurpo_lrap_first_k=lrap_gp_k,
                   speedup_vs_sk_full=scaled / t_gp)
        shared = "" if fitted_with == labels else f" (the fit of the {fitted_with}-labels row)"
        print(f"sk-full  fit {t_full:9.2f} s for {k} trees -> {scaled:9.2f} s for {T} trees{shared}; "
              f"test LRAP with {k} trees {lrap_full:.4f} (gpurpo's first {k} trees: "
              f"{lrap_gp_k:.4f}); gpurpo is {scaled / t_gp:6.1f}x faster", flush=True)
    return row


def summarize(rows):
    """Rows of the docs table from the figures: gpurpo against each anchor that ran."""
    summary = []
    for row in rows:
        where = "" if row.get("gpurpo_device", "cpu") == "cpu" else f", on {row['gpurpo_device']}"
        data = (f"forest, {row['trees']} trees, {row['dataset']} (n = {row['n_train']:,}, d = {row['d']:,}), "
                f"{inputs_text(row)}{where}")
        if "sk_proj_fit_s" in row:
            summary.append({"data": data, "anchor": "scikit-learn trees on the same projections",
                            "gpurpo": f"{times_faster(row['sk_proj_fit_s'], row['gpurpo_fit_s'])}, "
                                      f"LRAP {row['lrap_gap_vs_sk_proj']:+.4f}"})
        if "sk_full_fit_s_scaled" in row:
            summary.append({"data": data, "anchor": "scikit-learn's forest on the full labels",
                            "gpurpo": times_faster(row["sk_full_fit_s_scaled"], row["gpurpo_fit_s"])})
        for key, ratio in row.items():
            if key.startswith("per_tree_speedup_vs_"):
                other = key.rsplit("_", 1)[1]
                summary.append({"data": data, "anchor": f"gpurpo on {other}",
                                "gpurpo": f"{speedup_text(ratio)} per tree"})
    return summary


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true",
                        help="a quarter of the rows, 50 trees, 2 full-output trees")
    parser.add_argument("--trees", type=int, default=100, help="trees per forest")
    parser.add_argument("--full-trees", type=int, default=10,
                        help="trees fitted by scikit-learn on the full outputs (slow)")
    parser.add_argument("--n-jobs", type=int, default=1, help="threads for everyone")
    parser.add_argument("--skip-full", action="store_true", help="skip sklearn on full outputs")
    parser.add_argument("--skip-proj", action="store_true",
                        help="skip sklearn on projected outputs")
    parser.add_argument("--dataset", choices=["delicious", "mediamill", "both"], default="both")
    parser.add_argument("--features", nargs="+", choices=FEATURES, default=list(FEATURES),
                        help="kinds of inputs: continuous columns, binary text-like word presence")
    parser.add_argument("--labels", nargs="+", choices=LABELS, default=list(LABELS),
                        help="label containers gpurpo and sk-proj fit on: 0/1 ndarray, CSR matrix")
    parser.add_argument("--feature-density", type=float, default=0.04,
                        help="fraction of ones of the text-like inputs")
    parser.add_argument("--rows-factor", type=int, default=1,
                        help="multiply the training and test rows (10: the GPU comparison's sizes)")
    parser.add_argument("--devices", default="cpu",
                        help="gpurpo's devices, e.g. 'cuda,cpu': the first fits --trees trees "
                             "(and is compared with scikit-learn), the others --cpu-trees")
    parser.add_argument("--cpu-trees", type=int, default=10,
                        help="trees of the devices after the first (per-tree times compared)")
    parser.add_argument("--output", type=Path,
                        default=Path(__file__).parent / "out" / "forest.json")
    args = parser.parse_args(argv)
    if args.quick:
        args.trees = min(args.trees, 50)
        args.full_trees = min(args.full_trees, 2)
    import numba
    import sklearn

    print(f"python {platform.python_version()}, numpy {np.__version__}, scikit-learn "
          f"{sklearn.__version__}, numba {numba.__version__}, "
          f"{cpu_description()}, {numba.config.NUMBA_NUM_THREADS} "
          f"cores visible; n_jobs={args.n_jobs}")
    if args.rows_factor < 1 or args.cpu_trees < 1:
        parser.error("--rows-factor and --cpu-trees must be >= 1")
    if not 0 < args.feature_density < 1:
        parser.error("--feature-density must be in (0, 1)")
    scale = 4 if args.quick else 1
    rows = []
    full_cache = {}
    # training/test sizes of MULAN's delicious (12,920 + 3,185) and mediamill (30,993 + 12,914)
    shapes = [("delicious", "delicious-like", make_delicious_like, 12920, 3185),
              ("mediamill", "mediamill-like", make_mediamill_like, 30993, 12914)]
    for key, name, make, n_train, n_test in shapes:
        if args.dataset not in (key, "both"):
            continue
        n_tr, n_te = n_train * args.rows_factor // scale, n_test * args.rows_factor // scale
        for features in dict.fromkeys(args.features):
            X, Y = make(random_state=0, n_samples=n_tr + n_te, features=features,
                        feature_density=args.feature_density)
            for labels in dict.fromkeys(args.labels):
                rows.append(run_dataset(name, X, Y, n_te, args, features, labels, full_cache))
            del X, Y
    if args.output is not None:
        gpu = gpu_name() if "cuda" in args.devices else None
        write_record(args.output, make_record("forest", rows, summarize(rows), gpu=gpu))
    return rows


if __name__ == "__main__":
    main()
