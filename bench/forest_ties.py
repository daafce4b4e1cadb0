"""Forests on tie-heavy multi-target data: gpurpo's error against scikit-learn's.

Real multi-target regression sets (a few hundred rows of correlated,
heavy-tailed counts, duplicated columns, few-valued integers) have many splits
of equal gain at every node. This benchmark measures how close gpurpo's forests
come to scikit-learn's on such data: the aRRMSE (mean over targets of
``sqrt(SSE / SSE of the training mean)``, lower is better) of
``RandomForestRegressor`` and ``ExtraTreesRegressor`` under k-fold
cross-validation, on the generators of :mod:`gpurpo.datasets`
(``make_correlated_counts`` at the size of the classic reproducer, 400 x 300
with 16 targets; ``make_duplicated_features``; ``make_few_valued_features``),
with ``max_features`` 1.0 (the regressors' default), 0.33 and 1.0 without
bootstrap. Both libraries get the same folds and the same number of trees;
``--output`` writes the figures in the schema of ``bench/_results.py``.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _machine import cpu_description  # noqa: E402
from _results import make_record, write_record  # noqa: E402

from gpurpo.datasets import (  # noqa: E402
    make_correlated_counts,
    make_duplicated_features,
    make_few_valued_features,
)

DATA = {
    "correlated-counts": lambda seed: make_correlated_counts(random_state=seed),
    "duplicated-features": lambda seed: make_duplicated_features(random_state=seed),
    "few-valued-features": lambda seed: make_few_valued_features(random_state=seed),
}
SETTINGS = {
    "max_features=1.0": {"max_features": 1.0},
    "max_features=0.33": {"max_features": 0.33},
    "max_features=1.0, no bootstrap": {"max_features": 1.0, "bootstrap": False},
}


def arrmse(Y_test: np.ndarray, predicted: np.ndarray, Y_train: np.ndarray) -> float:
    """Mean over targets of ``sqrt(SSE / SSE of the training mean)``."""
    sse = ((Y_test - predicted) ** 2).sum(axis=0)
    base = ((Y_test - Y_train.mean(axis=0)) ** 2).sum(axis=0)
    return float(np.mean(np.sqrt(sse / base)))


def cross_validated(make_model, X: np.ndarray, Y: np.ndarray, folds: int, seed: int) -> tuple[float, float]:
    """Mean aRRMSE over the folds and the total fit time."""
    from sklearn.model_selection import KFold

    errors, seconds = [], 0.0
    for fold, (train, test) in enumerate(KFold(folds, shuffle=True, random_state=seed).split(X)):
        model = make_model(100 * seed + fold)
        start = time.perf_counter()
        model.fit(X[train], Y[train])
        seconds += time.perf_counter() - start
        errors.append(arrmse(Y[test], model.predict(X[test]), Y[train]))
    return float(np.mean(errors)), seconds


def run(trees: int, folds: int, seeds: list[int], data: list[str]) -> list[dict]:
    from sklearn.ensemble import ExtraTreesRegressor as SkExtraTrees
    from sklearn.ensemble import RandomForestRegressor as SkRandomForest

    from gpurpo.ensemble import ExtraTreesRegressor, RandomForestRegressor

    families = {"RandomForest": (RandomForestRegressor, SkRandomForest),
                "ExtraTrees": (ExtraTreesRegressor, SkExtraTrees)}
    rows = []
    for name in data:
        for family, (ours, theirs) in families.items():
            for setting, params in SETTINGS.items():
                totals = {"gpurpo": [], "sklearn": [], "gpurpo_s": 0.0, "sklearn_s": 0.0}
                for seed in seeds:
                    X, Y = DATA[name](seed)
                    for library, cls in (("gpurpo", ours), ("sklearn", theirs)):
                        error, seconds = cross_validated(
                            lambda rs, cls=cls: cls(n_estimators=trees, random_state=rs, n_jobs=1, **params),
                            X, Y, folds, seed,
                        )
                        totals[library].append(error)
                        totals[f"{library}_s"] += seconds
                row = {"data": name, "forest": family, "setting": setting, "trees": trees, "folds": folds,
                       "seeds": len(seeds), "gpurpo_arrmse": float(np.mean(totals["gpurpo"])),
                       "sklearn_arrmse": float(np.mean(totals["sklearn"])),
                       "gpurpo_fit_s": totals["gpurpo_s"], "sklearn_fit_s": totals["sklearn_s"]}
                row["relative_error"] = row["gpurpo_arrmse"] / row["sklearn_arrmse"]
                rows.append(row)
                print(f"{name:20s} {family:12s} {setting:32s} gpurpo {row['gpurpo_arrmse']:.4f} "
                      f"sklearn {row['sklearn_arrmse']:.4f} ratio {row['relative_error']:.3f}", flush=True)
    return rows


def summarize(rows: list[dict]) -> list[dict]:
    """One docs row: the worst and the median ratio of errors over every case."""
    ratios = np.array([row["relative_error"] for row in rows])
    return [{
        "data": "tie-heavy multi-target regression (correlated counts, duplicated and few-valued features)",
        "anchor": "scikit-learn's RandomForestRegressor and ExtraTreesRegressor, same folds",
        "gpurpo": f"aRRMSE {np.median(ratios):.3f}x scikit-learn's (median), {ratios.max():.3f}x (worst)",
    }]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trees", type=int, default=50)
    parser.add_argument("--folds", type=int, default=5)
    parser.add_argument("--seeds", type=int, default=3, help="data sets drawn per generator")
    parser.add_argument("--data", nargs="+", choices=sorted(DATA), default=sorted(DATA))
    parser.add_argument("--output", type=Path, default=None)
    parser.add_argument("--quick", action="store_true", help="a smoke run: 5 trees, 2 folds, 1 seed")
    args = parser.parse_args(argv)
    if args.quick:
        args.trees, args.folds, args.seeds = 5, 2, 1
    print(f"{cpu_description()}, one thread")
    rows = run(args.trees, args.folds, list(range(args.seeds)), args.data)
    if args.output is not None:
        write_record(args.output, make_record("forest_ties", rows, summarize(rows)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
