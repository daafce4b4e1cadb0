"""Multi-output gradient boosting: gpurpo vs XGBoost vector-leaf trees.

Joly, Wehenkel & Geurts (2019) strategies of
:class:`gpurpo.ensemble.GradientBoostingRegressor` /
:class:`~gpurpo.ensemble.GradientBoostingClassifier` (``rpo``,
``relabel_rpo``, ``multi_output``, optionally ``single_target``) against
XGBoost's multi-output trees (``xgboost``: ``multi_strategy="multi_output_tree"``,
``tree_method="hist"``) or, where those do not fit in memory, XGBoost's
default of one tree per output and round (``xgboost_per_output``:
``multi_strategy="one_output_per_tree"``), with the same number of rounds, the
same number of leaves (best-first / ``grow_policy="lossguide"``), the same
learning rate and the same number of bins, on

* d = 16: friedman1-chain, -group and -ind (:func:`gpurpo.datasets.make_friedman1_multioutput`),
  squared error, test macro-R2;
* d = 101: mediamill-shaped structured multi-label data
  (:func:`gpurpo.datasets.make_mediamill_like`), logistic loss, test LRAP;
* d = 983: delicious-shaped structured multi-label data
  (:func:`gpurpo.datasets.make_delicious_like`), logistic loss, test LRAP;
* d = 53: enron-shaped text data (``text``: 1,123 training and 579 test rows,
  1,001 binary word presence features at 4 % ones, about 3.4 labels per row;
  :func:`gpurpo.datasets.make_multilabel` with ``features="text"``), logistic
  loss, test LRAP.

Each fit runs in its own subprocess (same thread count for everyone:
``--threads`` numba threads for gpurpo, ``n_jobs`` for XGBoost) under an
address-space limit (``--memory-gb``) and a time limit (``--timeout``), so a
method that runs out of memory or time is reported as such instead of taking
the machine down: XGBoost's histograms grow with the number of targets
(bins x features x d x 2 gradient statistics per node). The anchor of a data
set is the first of ``xgboost`` and ``xgboost_per_output`` that fits. gpurpo's fit time
includes binning; a warm-up fit of two rounds on the same data in the same
subprocess compiles or loads the numba kernels first.

    python bench/boosting.py                 # all data sets, full size
    python bench/boosting.py --quick         # a quarter of the rows, 30 rounds
    python bench/boosting.py --datasets delicious --methods rpo,xgboost --json out.json

``--json`` writes the results in the schema of ``bench/_results.py``: one figure row per data
set and method, with the run's settings.

A method is a strategy, optionally followed by ``:KIND`` to choose the output
projection of ``rpo`` and ``relabel_rpo`` (default: ``subsample``, the
estimators' default) and, for ``relabel_rpo``, by ``:Q`` for the number of
projections (default ``"log"``); a final ``@per_leaf`` sets
``leaf_step="per_leaf"`` (one Newton step per leaf and label instead of the
paper's one step per label) and a final ``+newton`` sets
``split_criterion="newton"`` (XGBoost's second-order split gain, per-output
hessian sums; ``relabel_rpo:subsample:50+newton`` is the default list's
configuration that reaches XGBoost's test LRAP at d = 101), e.g.
``--methods rpo,relabel_rpo:gaussian:20,relabel_rpo@per_leaf,multi_output+newton,xgboost``.

Equal score (``--match-score``, on by default): rpo and relabel_rpo trade
accuracy per round for cheaper rounds (Joly et al. need more rounds for
them), so at the same number of rounds they may score below XGBoost. For
each of them the benchmark also finds, from staged predictions of a fit with
up to ``--match-factor`` times the rounds, the first round count whose test
score reaches XGBoost's (checked on a grid of about 50 round counts), refits
with exactly that many rounds and reports that fit's time ("time to
XGBoost's score"). XGBoost runs first so that its score is known.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import scipy.sparse as sp

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _results import load_record, make_record, times_faster, write_record  # noqa: E402

DATASETS = ("friedman1-chain", "friedman1-group", "friedman1-ind", "mediamill", "delicious",
            "text")
METHODS = ("rpo", "relabel_rpo", "multi_output", "single_target", "xgboost",
           "xgboost_per_output")
# XGBoost's strategies, in the order in which they are tried as the anchor
ANCHORS = {"xgboost": "multi_output_tree", "xgboost_per_output": "one_output_per_tree"}
DEFAULT_METHODS = ("xgboost", "rpo", "relabel_rpo", "relabel_rpo:gaussian:20",
                   "relabel_rpo:subsample:50+newton", "multi_output")


# --------------------------------------------------------------------------
# Data
# --------------------------------------------------------------------------


def make_data(name: str, quick: bool, seed: int = 0) -> dict:
    from gpurpo.datasets import (
        make_delicious_like,
        make_friedman1_multioutput,
        make_mediamill_like,
        make_multilabel,
    )

    scale = 4 if quick else 1
    if name.startswith("friedman1"):
        kind = name.split("-")[1]
        n_train, n_test = 10_000 // scale, 5_000 // scale
        X, Y = make_friedman1_multioutput(kind, n_train + n_test, 16, random_state=seed)
        task = "regression"
    elif name == "text":
        # MULAN's enron: 1,123 + 579 rows, 1,001 binary features, 53 labels
        n_train, n_test = 1123 // scale, 579 // scale
        X, Y = make_multilabel(n_train + n_test, 1001, 53, label_cardinality=3.4,
                               features="text", sparse_output=False, random_state=seed)
        Y = np.asarray(Y)
        task = "multilabel"
    else:
        maker = make_mediamill_like if name == "mediamill" else make_delicious_like
        n_total = (30_993 if name == "mediamill" else 12_920) // scale
        X, Y = maker(random_state=seed, n_samples=n_total)
        Y = Y.toarray() if sp.issparse(Y) else np.asarray(Y)
        n_test = n_total // 5
        n_train = n_total - n_test
        task = "multilabel"
    rng = np.random.default_rng(seed + 1)
    perm = rng.permutation(X.shape[0])
    tr, te = perm[:n_train], perm[n_train : n_train + n_test]
    return {
        "X_train": np.ascontiguousarray(X[tr]),
        "Y_train": np.ascontiguousarray(Y[tr], dtype=np.float64),
        "X_test": np.ascontiguousarray(X[te]),
        "Y_test": np.ascontiguousarray(Y[te], dtype=np.float64),
        "task": task,
    }


# --------------------------------------------------------------------------
# One fit (runs in a subprocess)
# --------------------------------------------------------------------------


def _score(task: str, Y_test: np.ndarray, pred: np.ndarray) -> float:
    from gpurpo.metrics import label_ranking_average_precision, macro_r2

    if task == "regression":
        return float(macro_r2(Y_test, pred))
    return float(label_ranking_average_precision(Y_test, pred))


def run_one(method: str, data_path: str, cfg: dict) -> dict:
    data = dict(np.load(data_path))
    task = str(data["task"])
    X, Y, Xt, Yt = data["X_train"], data["Y_train"], data["X_test"], data["Y_test"]
    rounds, leaves, lr, bins, threads = (
        cfg["rounds"], cfg["leaves"], cfg["lr"], cfg["max_bins"], cfg["threads"]
    )
    if method in ANCHORS:
        import xgboost as xgb

        common = dict(
            tree_method="hist", multi_strategy=ANCHORS[method], n_estimators=rounds,
            max_leaves=leaves, grow_policy="lossguide", max_depth=0, learning_rate=lr,
            max_bin=bins, n_jobs=threads, random_state=0,
        )
        if task == "regression":
            model = xgb.XGBRegressor(objective="reg:squarederror", **common)
        else:
            model = xgb.XGBClassifier(objective="binary:logistic", **common)
        start = time.perf_counter()
        model.fit(X, Y)
        fit_time = time.perf_counter() - start
        pred = model.predict(Xt) if task == "regression" else model.predict_proba(Xt)
        return {"fit_s": fit_time, "score": _score(task, Yt, np.asarray(pred)),
                "peak_rss_gb": _peak_rss_gb(), "xgboost": xgb.__version__}

    import numba

    numba.set_num_threads(min(threads, numba.config.NUMBA_NUM_THREADS))
    from gpurpo.ensemble import GradientBoostingClassifier, GradientBoostingRegressor

    Est = GradientBoostingRegressor if task == "regression" else GradientBoostingClassifier
    strategy, projection, q, leaf_step, criterion = parse_method(method)
    params = dict(strategy=strategy, n_estimators=rounds, max_leaf_nodes=leaves, learning_rate=lr,
                  max_bins=bins, random_state=0, leaf_step=leaf_step)
    if criterion != "gradient":
        params["split_criterion"] = criterion
    if projection:
        params["projection"] = projection
    if q is not None:
        params["n_components"] = q
    # two rounds on the whole training set compile (or load) every kernel that the timed
    # fit takes: a fit on a few hundred rows skips the paths of large nodes, whose
    # compilation then landed in the timed fit when the numba cache was cold
    Est(**{**params, "n_estimators": 2}).fit(X, Y)

    def timed_fit(n_rounds: int):
        model = Est(**{**params, "n_estimators": n_rounds})
        start = time.perf_counter()
        model.fit(X, Y)
        return model, time.perf_counter() - start

    model, fit_time = timed_fit(rounds)
    pred = model.predict(Xt) if task == "regression" else model.predict_proba(Xt)
    result = {"fit_s": fit_time, "score": _score(task, Yt, pred), "peak_rss_gb": _peak_rss_gb()}
    target = cfg.get("target_score")
    if target is not None and strategy in ("rpo", "relabel_rpo"):
        result.update(rounds_to_score(timed_fit, task, Xt, Yt, target, rounds * cfg["match_factor"]))
    return result


def rounds_to_score(timed_fit, task, Xt, Yt, target, max_rounds):
    """Fewest rounds (on a grid) whose test score reaches ``target``, and that fit's time."""
    model, _ = timed_fit(max_rounds)
    stages = model.staged_predict(Xt) if task == "regression" else model.staged_predict_proba(Xt)
    step = max(1, max_rounds // 50)
    best = (-np.inf, 0)
    for r, pred in enumerate(stages, start=1):
        if r % step and r != model.n_estimators_:
            continue
        score = _score(task, Yt, pred)
        best = max(best, (score, r))
        if score >= target:
            _, fit_s = timed_fit(r)
            return {"match_rounds": r, "match_fit_s": fit_s, "match_score": score}
    return {"match_rounds": None, "match_best_score": best[0], "match_best_rounds": best[1]}


def parse_method(method: str) -> tuple[str, str | None, int | None, str, str]:
    """``strategy[:kind[:q]][@leaf_step][+split_criterion]``.

    Returns (strategy, kind or None, q or None, leaf_step, split_criterion).
    """
    method, _, criterion = method.partition("+")
    spec, _, leaf_step = method.partition("@")
    parts = spec.split(":")
    strategy = parts[0]
    projection = parts[1] if len(parts) > 1 and parts[1] else None
    q = int(parts[2]) if len(parts) > 2 else None
    return strategy, projection, q, leaf_step or "global", criterion or "gradient"


def _peak_rss_gb() -> float:
    """Peak resident memory of this process (Linux reports kilobytes)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024**2


def _limit_memory(gigabytes: float) -> None:
    limit = int(gigabytes * 1024**3)
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


def run_isolated(method: str, data_path: str, cfg: dict) -> dict:
    cmd = [sys.executable, __file__, "--worker", method, "--data", data_path,
           "--config", json.dumps(cfg)]
    env = dict(os.environ, OMP_NUM_THREADS=str(cfg["threads"]),
               NUMBA_NUM_THREADS=str(max(1, cfg["threads"])))
    try:
        proc = subprocess.run(
            cmd, capture_output=True, text=True, timeout=cfg["timeout"], env=env,
            preexec_fn=lambda: _limit_memory(cfg["memory_gb"]),
        )
    except subprocess.TimeoutExpired:
        return {"error": f"timeout after {cfg['timeout']} s"}
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
    if proc.returncode != 0 or not lines:
        text = proc.stderr + proc.stdout
        oom = any(k in text for k in ("MemoryError", "bad_alloc", "bad_malloc",
                                      "Failed to allocate", "Cannot allocate", "out of memory"))
        if oom or proc.returncode in (-9, 137):
            return {"error": f"out of memory (address space limit {cfg['memory_gb']} GB)"}
        errors = [ln for ln in text.splitlines() if "Error" in ln] or text.splitlines()[-1:]
        return {"error": f"exit {proc.returncode}: {errors[-1][:200] if errors else ''}"}
    return json.loads(lines[-1][len("RESULT "):])


# --------------------------------------------------------------------------
# Results
# --------------------------------------------------------------------------


def figure_rows(results: dict) -> list[dict]:
    """One flat row per data set and method: the run's settings, the data's shape, the fit's results."""
    settings = {**results["config"], "quick": results["quick"]}
    rows = []
    for name, run in results["runs"].items():
        shape = {key: value for key, value in run.items() if key != "methods"}
        for method, res in run["methods"].items():
            rows.append({**settings, "dataset": name, **shape, "method": method, **res})
    return rows


def anchor_runs(by_method: dict) -> tuple[list[dict], list[dict]]:
    """(the anchors that fitted, the anchors that ran and failed) among ``by_method``
    (method -> result of one data set), each in the order of :data:`ANCHORS`: the first
    that fitted is the one compared against."""
    ran = [by_method[m] for m in ANCHORS if m in by_method]
    return ([res for res in ran if "fit_s" in res], [res for res in ran if "fit_s" not in res])


def summarize(rows: list[dict]) -> list[dict]:
    """Rows of the docs table from the figures, one per data set.

    Against XGBoost (the first of :data:`ANCHORS` that fitted): the fastest gpurpo method
    whose score reaches XGBoost's (else the best scoring one), the range over all methods,
    the equal-score refit where one ran and the same method against XGBoost's other
    strategy where it fitted too. Without an XGBoost fit: the best scoring method's
    score, time and memory.
    """
    summary = []
    for name in dict.fromkeys(row["dataset"] for row in rows):
        runs = [row for row in rows if row["dataset"] == name]
        first = runs[0]
        metric = first["metric"]
        data = f"boosting, {name} (n = {first['n_train']:,}, d = {first['d']:,}), {first['rounds']} rounds"
        anchors, failed = anchor_runs({row["method"]: row for row in runs})
        fitted = [row for row in runs if row["method"] not in ANCHORS and "fit_s" in row]
        if not fitted:
            continue
        best = max(fitted, key=lambda row: row["score"])
        if not anchors:
            failure = "; ".join(row.get("error", "failed") for row in failed) or "not run"
            summary.append({"data": data, "anchor": f"XGBoost `multi_output_tree`: {failure}",
                            "gpurpo": f"`{best['method']}`: {metric} {best['score']:.4f} in {best['fit_s']:.1f} s, "
                                      f"peak memory {best['peak_rss_gb']:.2f} GB"})
            continue
        xgb, others = anchors[0], anchors[1:]
        anchor = f"XGBoost `{ANCHORS[xgb['method']]}`" + "".join(
            f"; `{ANCHORS[row['method']]}`: {row.get('error', 'failed')}" for row in failed)
        reaching = [row for row in fitted if row["score"] >= xgb["score"]]
        pick = min(reaching, key=lambda row: row["fit_s"]) if reaching else best
        text = (f"`{pick['method']}` {times_faster(xgb['fit_s'], pick['fit_s'])}, "
                f"{metric} {pick['score'] - xgb['score']:+.4f}")
        if len(fitted) > 1:
            ratios = sorted(xgb["fit_s"] / row["fit_s"] for row in fitted)
            which = f"the fastest at XGBoost's {metric} or above" if reaching else f"the best {metric}"
            text += f" ({which}; {len(fitted)} configurations {ratios[0]:.1f}x-{ratios[-1]:.1f}x faster)"
        for row in fitted:
            if row.get("match_rounds"):
                who = "" if row is pick else f" `{row['method']}`"
                text += (f";{who} reaches XGBoost's {metric} in {row['match_rounds']} rounds "
                         f"(that fit {times_faster(xgb['fit_s'], row['match_fit_s'])})")
        for other in others:
            text += (f"; against XGBoost `{ANCHORS[other['method']]}` ({other['fit_s']:.1f} s, "
                     f"{metric} {other['score']:.4f}): {times_faster(other['fit_s'], pick['fit_s'])}, "
                     f"{metric} {pick['score'] - other['score']:+.4f}")
        summary.append({"data": data, "anchor": anchor, "gpurpo": text})
    return summary


# --------------------------------------------------------------------------
# Driver
# --------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a quarter of the rows, 30 rounds")
    parser.add_argument("--datasets", default=",".join(DATASETS))
    parser.add_argument("--methods", default=",".join(DEFAULT_METHODS))
    parser.add_argument("--rounds", type=int, default=None, help="boosting rounds (100)")
    parser.add_argument("--leaves", type=int, default=31)
    parser.add_argument("--lr", type=float, default=0.1)
    parser.add_argument("--max-bins", type=int, default=255)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--timeout", type=float, default=3600.0, help="seconds per fit")
    parser.add_argument("--memory-gb", type=float, default=16.0, help="address space per fit")
    parser.add_argument("--no-match-score", dest="match_score", action="store_false",
                        help="skip the rounds-to-XGBoost's-score measure")
    parser.add_argument("--match-factor", type=int, default=10,
                        help="at most this many times the rounds for the equal-score measure")
    parser.add_argument("--reuse-xgboost", default=None, metavar="JSON",
                        help="take XGBoost's results from this earlier --json output (same "
                             "data sets and settings) instead of fitting it again")
    parser.add_argument("--json", default=None, help="write the results here")
    parser.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--data", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--config", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()

    if args.worker:
        result = run_one(args.worker, args.data, json.loads(args.config))
        print("RESULT " + json.dumps(result), flush=True)
        return

    datasets = [d for d in args.datasets.split(",") if d]
    methods = [m for m in args.methods.split(",") if m]
    for d in datasets:
        if d not in DATASETS:
            parser.error(f"unknown data set {d!r}; choose from {DATASETS}")
    for m in methods:
        try:
            strategy, projection, q, leaf_step, criterion = parse_method(m)
        except ValueError:
            strategy, projection, q, leaf_step, criterion = "?", None, None, "global", "gradient"
        if (strategy not in METHODS or (projection and strategy not in ("rpo", "relabel_rpo"))
                or (q is not None and strategy != "relabel_rpo")
                or len(m.partition("+")[0].partition("@")[0].split(":")) > 3
                or leaf_step not in ("global", "per_leaf")
                or criterion not in ("gradient", "newton")
                or (strategy in ANCHORS and ("@" in m or "+" in m))):
            parser.error(
                f"unknown method {m!r}; choose from {METHODS}, with ':KIND' (a projection "
                "kind, e.g. rpo:gaussian) after rpo and relabel_rpo, ':Q' (an integer "
                "number of projections) after relabel_rpo:KIND, '@per_leaf' after any "
                "gpurpo strategy and a final '+newton' for the second-order split gain"
            )
    # XGBoost first, so that its score is the equal-score target
    methods = [m for m in ANCHORS if m in methods] + [m for m in methods if m not in ANCHORS]
    cfg = {
        "rounds": args.rounds or (30 if args.quick else 100),
        "leaves": args.leaves,
        "lr": args.lr,
        "max_bins": args.max_bins,
        "threads": args.threads,
        "timeout": args.timeout,
        "memory_gb": args.memory_gb,
        "match_factor": args.match_factor,
    }
    print(f"python {platform.python_version()} on {platform.machine()}, {os.cpu_count()} CPUs; "
          f"rounds={cfg['rounds']} leaves={cfg['leaves']} lr={cfg['lr']} "
          f"max_bins={cfg['max_bins']} threads={cfg['threads']} memory<={cfg['memory_gb']} GB",
          flush=True)
    results = {"config": cfg, "runs": {}}
    reused = {}
    if args.reuse_xgboost:
        same = ("rounds", "leaves", "lr", "max_bins", "threads")
        for row in load_record(args.reuse_xgboost)["figures"]:
            if row["method"] not in ANCHORS:
                continue
            if any(row.get(k) != cfg[k] for k in same) or row.get("quick") != args.quick:
                parser.error(f"--reuse-xgboost: {args.reuse_xgboost} was run with other settings "
                             f"({ {k: row.get(k) for k in same} }, quick={row.get('quick')})")
            context = set(cfg) | {"quick", "dataset", "n_train", "p", "d", "metric", "method"}
            reused[row["dataset"], row["method"]] = {k: v for k, v in row.items()
                                                     if k not in context}
    results["quick"] = args.quick
    with tempfile.TemporaryDirectory() as tmp:
        for name in datasets:
            data = make_data(name, args.quick)
            path = os.path.join(tmp, f"{name}.npz")
            np.savez(path, **data)
            n, p = data["X_train"].shape
            d = data["Y_train"].shape[1]
            metric = "macro-R2" if data["task"] == "regression" else "LRAP"
            print(f"\n{name}: n_train={n} n_test={data['X_test'].shape[0]} p={p} d={d} "
                  f"(test {metric})", flush=True)
            runs = {}
            target = None
            for method in methods:
                run_cfg = dict(cfg, target_score=target if args.match_score else None)
                if (name, method) in reused:
                    res = dict(reused[name, method], reused_from=args.reuse_xgboost)
                else:
                    res = run_isolated(method, path, run_cfg)
                runs[method] = res
                if "error" in res:
                    print(f"  {method:>22}: {res['error']}", flush=True)
                    continue
                print(f"  {method:>22}: fit {res['fit_s']:9.2f} s   {metric} "
                      f"{res['score']:.4f}   peak RSS {res['peak_rss_gb']:.2f} GB", flush=True)
                if method in ANCHORS and target is None:
                    target = res["score"]
                if res.get("match_rounds"):
                    print(f"  {'':>22}  reaches XGBoost's {metric} in {res['match_rounds']} rounds: "
                          f"fit {res['match_fit_s']:.2f} s ({metric} {res['match_score']:.4f})",
                          flush=True)
                elif "match_best_score" in res:
                    print(f"  {'':>22}  does not reach XGBoost's {metric} within "
                          f"{cfg['rounds'] * cfg['match_factor']} rounds (best "
                          f"{res['match_best_score']:.4f} at {res['match_best_rounds']})", flush=True)
            anchors, failed = anchor_runs(runs)
            if anchors:
                ref = anchors[0]
                for method, res in runs.items():
                    if method not in ANCHORS and "fit_s" in res:
                        line = (f"  {method:>22}: {ref['fit_s'] / res['fit_s']:7.2f}x faster than "
                                f"XGBoost, score {res['score'] - ref['score']:+.4f}")
                        if res.get("match_rounds"):
                            line += (f"; at XGBoost's score: {ref['fit_s'] / res['match_fit_s']:.2f}x "
                                     "faster")
                        print(line, flush=True)
            elif failed and "error" in failed[0]:
                print(f"  XGBoost failed ({failed[0]['error']}): no ratio", flush=True)
            results["runs"][name] = {"n_train": n, "p": p, "d": d, "metric": metric,
                                     "methods": runs}
    if args.json:
        rows = figure_rows(results)
        write_record(args.json, make_record("boosting", rows, summarize(rows)))


if __name__ == "__main__":
    main()
