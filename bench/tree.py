"""Single-tree fit time and accuracy: gpurpo vs scikit-learn.

On delicious-shaped (n = 12,920, p = 500, d = 983, ~19 labels per row) and
mediamill-shaped (n = 30,993, p = 120, d = 101) structured synthetic
multi-label data (:func:`gpurpo.datasets.make_delicious_like`,
:func:`gpurpo.datasets.make_mediamill_like`), fully grown trees with
``max_features = sqrt(p)`` and a Gaussian output projection with
``m = round(ln d)`` (Joly et al. 2014):

* ``gpurpo``: :class:`gpurpo.tree.DecisionTreeRegressor` (binning, projection,
  growth and leaf labelling all included in the fit time);
* ``sk-full``: scikit-learn ``DecisionTreeRegressor`` on the full outputs;
* ``sk-proj``: scikit-learn ``DecisionTreeRegressor`` on the SAME projected
  outputs, then relabelled with the mean original outputs per leaf (the
  projection product and the relabelling are included in its time);
* ``gpurpo-grow``: gpurpo's growth alone (binned inputs and projected
  targets given), the part a forest repeats for every tree.

Each data set is run with both kinds of inputs and both label containers, one
set of rows each (``--features`` and ``--labels`` choose them; default all four):

* inputs: ``continuous`` (standard normal columns, the generators' default) or
  ``text`` (binary word presence features at ``--feature-density``, 4 % ones
  by default, in a dense array, as text multi-label sets store them; the same
  labels as the continuous inputs);
* labels: ``dense`` (a 0/1 ndarray) or ``csr`` (a SciPy CSR matrix), the
  container that gpurpo, ``gpurpo-grow`` and ``sk-proj`` fit on (``sk-proj``
  relabels from either; leaf means of dense labels are kept as CSR, as gpurpo
  keeps sparse leaves). ``sk-full``
  needs dense labels: its trees are fitted once per data set and kind of
  inputs, and their figures are repeated in the rows of both containers.

Times are reported as wall-clock and process-CPU medians (on a shared,
loaded machine the CPU time of single-threaded runs is the steadier figure).

Everyone runs on the same number of threads (scikit-learn trees use one;
gpurpo's numba kernels are limited to ``--threads``, default 1). Several
trees are fitted per method (different seeds), the methods taking turns seed
by seed; medians and ratios are printed with the test LRAP of each method.

Run ``python bench/tree.py`` (or ``--quick`` for a fast smoke run at a
quarter of the rows); ``--output`` also writes the medians as JSON, in the
schema of ``bench/_results.py``.
"""

from __future__ import annotations

import argparse
import math
import platform
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import scipy.sparse as sp

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _machine import cpu_description  # noqa: E402
from _results import inputs_text, make_record, speedup_text, write_record  # noqa: E402

from gpurpo.backend import NUMPY  # noqa: E402
from gpurpo.datasets import make_delicious_like, make_mediamill_like  # noqa: E402
from gpurpo.metrics import label_ranking_average_precision  # noqa: E402
from gpurpo.projections import make_projection  # noqa: E402
from gpurpo.tree import (  # noqa: E402
    BinMapper,
    DecisionTreeRegressor,
    GrowthParams,
    grow_trees,
    n_candidate_features,
)

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


def _relabel(leaf_train, Y_train, leaf_test):
    """Mean original outputs of the training samples of each leaf (sparse product)."""
    leaves, inverse = np.unique(leaf_train, return_inverse=True)
    n = leaf_train.shape[0]
    ind = sp.csr_matrix((np.ones(n), (inverse, np.arange(n))), shape=(leaves.size, n))
    counts = np.asarray(ind.sum(axis=1)).ravel()
    rows = np.searchsorted(leaves, leaf_test)
    if not sp.issparse(Y_train):  # means of dense 0/1 labels, kept as CSR as gpurpo keeps sparse leaves
        return sp.csr_matrix((ind @ Y_train) / counts[:, None])[rows]
    values = sp.diags(1.0 / counts) @ (ind @ Y_train)
    return values.tocsr()[rows]


def _timed(fn):
    t0, c0 = time.perf_counter(), time.process_time()
    out = fn()
    return (time.perf_counter() - t0, time.process_time() - c0), out


def _lrap(Y_test, scores):
    if sp.issparse(scores):
        scores = scores.toarray()
    return label_ranking_average_precision(Y_test, np.asarray(scores))


def run_dataset(name, X, Y, n_test, args, features="continuous", labels="csr", full_cache=None):
    """The rows of one data set, kind of inputs and label container, one per method.

    ``full_cache`` (a dict) keeps the figures of scikit-learn's full-output trees per data set
    and kind of inputs, so that the rows of the two label containers share one set of fits.
    """
    from sklearn.tree import DecisionTreeRegressor as SkTree

    Xtr, Ytr, Xte, Yte = _split(X, Y, n_test, 0, labels)
    d = Ytr.shape[1]
    m = max(1, int(round(math.log(d))))
    x_density = float(np.count_nonzero(Xtr)) / Xtr.size
    print(f"\n== {name}, {features} X ({100 * x_density:.1f} % nonzero), {labels} labels: "
          f"n_train={Xtr.shape[0]} p={Xtr.shape[1]} d={d} m={m} "
          f"labels/row={_nnz(Ytr) / Ytr.shape[0]:.1f}")
    results = {}

    # gpurpo: one warm-up fit compiles / loads the numba kernels; on all the rows, so that
    # the kernels of nodes above the small-node size (4,096 samples) are loaded too (a
    # warm-up on 500 rows leaves them unloaded, and the first timed fit then pays their
    # loading: 0.25-0.36 s against 0.18-0.22 s for the next fits, delicious-shaped, one thread)
    DecisionTreeRegressor(projection="gaussian", n_components=m, max_features="sqrt",
                          random_state=123).fit(Xtr, Ytr)
    # gpurpo growth alone, on inputs binned once
    binned = BinMapper().fit(Xtr).transform(Xtr, NUMPY)
    k = n_candidate_features("sqrt", Xtr.shape[1])

    def fit_gpurpo(seed):
        est = DecisionTreeRegressor(projection="gaussian", n_components=m,
                                    max_features="sqrt", random_state=seed)
        t, _ = _timed(lambda: est.fit(Xtr, Ytr))
        return t, _lrap(Yte, est.predict(Xte)), est.get_n_leaves()

    def grow_gpurpo(seed):
        P = make_projection("gaussian", m, d, random_state=seed)
        targets = np.ascontiguousarray(np.asarray(Ytr @ P.T, dtype=np.float32)[:, None, :])
        t, res = _timed(lambda: grow_trees(binned, targets, None, GrowthParams(n_candidates=k),
                                           np.random.default_rng(seed), NUMPY))
        return t, float("nan"), res.structures[0].n_leaves

    def fit_sk_proj(seed):
        # scikit-learn on the same projected outputs, relabelled
        P = make_projection("gaussian", m, d, random_state=seed)

        def fit_proj():
            Yp = np.asarray(Ytr @ P.T)
            sk = SkTree(max_features="sqrt", random_state=seed).fit(Xtr, Yp)
            leaf_train = sk.apply(Xtr)
            return sk, leaf_train

        t, (sk, leaf_train) = _timed(fit_proj)
        return t, _lrap(Yte, _relabel(leaf_train, Ytr, sk.apply(Xte))), sk.get_n_leaves()

    # the methods take turns, seed by seed, so that a change of the machine's load
    # between repeats reaches all of them alike
    methods = {"gpurpo": fit_gpurpo, "gpurpo-grow": grow_gpurpo, "sk-proj": fit_sk_proj}
    runs = {key: ([], [], []) for key in methods}
    for seed in range(args.repeats):
        for key, method in methods.items():
            t, lrap, n_leaves = method(seed)
            runs[key][0].append(t)
            runs[key][1].append(lrap)
            runs[key][2].append(n_leaves)
    results.update(runs)

    # scikit-learn on the full output space
    full_fit_labels = None
    if not args.skip_full:
        cache = {} if full_cache is None else full_cache
        if (name, features) not in cache:
            times, lraps, leaves = [], [], []
            Ydense = Ytr.toarray() if sp.issparse(Ytr) else Ytr
            for seed in range(args.full_repeats):
                sk = SkTree(max_features="sqrt", random_state=seed)
                t, _ = _timed(lambda: sk.fit(Xtr, Ydense))
                times.append(t)
                leaves.append(sk.get_n_leaves())
                lraps.append(_lrap(Yte, sk.predict(Xte)))
            cache[name, features] = ((times, lraps, leaves), labels)
        results["sk-full"], full_fit_labels = cache[name, features]
        if full_fit_labels != labels:
            print(f"(sk-full: the trees of the {full_fit_labels}-labels rows)")

    base_wall = statistics.median(t[0] for t in results["gpurpo"][0])
    base_cpu = statistics.median(t[1] for t in results["gpurpo"][0])
    print(f"{'method':12s} {'wall (s)':>9s} {'cpu (s)':>9s} {'wall/gpurpo':>12s} "
          f"{'cpu/gpurpo':>11s} {'test LRAP':>10s} {'leaves':>7s}")
    for key, (times, lraps, leaves) in results.items():
        wall = statistics.median(t[0] for t in times)
        cpu = statistics.median(t[1] for t in times)
        print(f"{key:12s} {wall:9.3f} {cpu:9.3f} {wall / base_wall:12.2f} {cpu / base_cpu:11.2f} "
              f"{statistics.mean(lraps):10.4f} {int(statistics.median(leaves)):7d}")
    grow_cpu = statistics.median(t[1] for t in results["gpurpo-grow"][0])
    for key in ("sk-proj", "sk-full"):
        if key in results:
            cpu = statistics.median(t[1] for t in results[key][0])
            print(f"  {key} / gpurpo: {cpu / base_cpu:.1f}x (fit), "
                  f"{cpu / grow_cpu:.1f}x (growth only)  [CPU-time medians]")
    shape = dict(dataset=name, features=features, labels=labels, x_density=x_density,
                 n_train=int(Xtr.shape[0]), n_test=int(Xte.shape[0]), p=int(Xtr.shape[1]),
                 d=int(d), m=m, labels_per_row=_nnz(Ytr) / Ytr.shape[0], threads=args.threads)
    rows = []
    for key, (times, lraps, leaves) in results.items():
        wall = statistics.median(t[0] for t in times)
        cpu = statistics.median(t[1] for t in times)
        row = dict(shape, method=key, trees=len(times), wall_s=wall, cpu_s=cpu, wall_ratio=wall / base_wall,
                   cpu_ratio=cpu / base_cpu, test_lrap=statistics.mean(lraps),
                   leaves=int(statistics.median(leaves)))
        if key.startswith("sk-"):
            row["cpu_ratio_growth"] = cpu / grow_cpu
        if key == "sk-full":
            row["fit_row_labels"] = full_fit_labels
        rows.append(row)
    return rows


def summarize(rows):
    """Rows of the docs table from the figures: scikit-learn's trees against gpurpo's, CPU-time medians."""
    summary = []
    for case in dict.fromkeys((row["dataset"], row["features"], row["labels"]) for row in rows):
        runs = {row["method"]: row for row in rows
                if (row["dataset"], row["features"], row["labels"]) == case}
        gp = runs["gpurpo"]
        data = (f"one tree, fully grown, {case[0]} (n = {gp['n_train']:,}, d = {gp['d']:,}), "
                f"{inputs_text(gp)}")
        anchors = {"sk-proj": "scikit-learn tree on the same projections, binning included",
                   "sk-full": "scikit-learn tree on the full labels"}
        for key, anchor in anchors.items():
            if key in runs:
                sk = runs[key]
                summary.append({"data": data, "anchor": anchor,
                                "gpurpo": f"{speedup_text(sk['cpu_ratio'])} (growth alone "
                                          f"{sk['cpu_ratio_growth']:.1f}x), "
                                          f"LRAP {gp['test_lrap'] - sk['test_lrap']:+.4f}"})
    return summary


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="quarter of the rows, 2 repeats")
    parser.add_argument("--repeats", type=int, default=5, help="trees per method")
    parser.add_argument("--full-repeats", type=int, default=2,
                        help="trees for scikit-learn on the full outputs (slow)")
    parser.add_argument("--threads", type=int, default=1, help="numba threads for gpurpo")
    parser.add_argument("--skip-full", action="store_true", help="skip sklearn on full outputs")
    parser.add_argument("--dataset", choices=["delicious", "mediamill", "both"], default="both")
    parser.add_argument("--features", nargs="+", choices=FEATURES, default=list(FEATURES),
                        help="kinds of inputs: continuous columns, binary text-like word presence")
    parser.add_argument("--labels", nargs="+", choices=LABELS, default=list(LABELS),
                        help="label containers the trees fit on: 0/1 ndarray, CSR matrix")
    parser.add_argument("--feature-density", type=float, default=0.04,
                        help="fraction of ones of the text-like inputs")
    parser.add_argument("--output", type=Path, default=None, help="also write the medians as JSON here")
    args = parser.parse_args(argv)
    if args.quick:
        args.repeats = min(args.repeats, 2)
        args.full_repeats = 1
    import numba

    numba.set_num_threads(min(args.threads, numba.config.NUMBA_NUM_THREADS))
    print(f"python {platform.python_version()}, numba threads {numba.get_num_threads()}, "
          f"{cpu_description()}")
    if not 0 < args.feature_density < 1:
        parser.error("--feature-density must be in (0, 1)")
    scale = 4 if args.quick else 1
    rows = []
    full_cache = {}
    # training sizes of MULAN's delicious (12,920 + 3,185 test) and mediamill
    # (30,993 + 12,914 test)
    shapes = [("delicious", "delicious-like", make_delicious_like, 12920, 3185),
              ("mediamill", "mediamill-like", make_mediamill_like, 30993, 12914)]
    for key, name, make, n_train, n_test in shapes:
        if args.dataset not in (key, "both"):
            continue
        n_tr, n_te = n_train // scale, n_test // scale
        for features in dict.fromkeys(args.features):
            X, Y = make(random_state=0, n_samples=n_tr + n_te, features=features,
                        feature_density=args.feature_density)
            for labels in dict.fromkeys(args.labels):
                rows += run_dataset(name, X, Y, n_te, args, features, labels, full_cache)
            del X, Y
    if args.output is not None:
        write_record(args.output, make_record("tree", rows, summarize(rows)))
    return rows


if __name__ == "__main__":
    main()
