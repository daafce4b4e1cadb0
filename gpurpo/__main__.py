"""Command line: ``python -m gpurpo demo`` and ``python -m gpurpo info``.

``demo`` generates a structured multi-label problem and runs the main pieces of
gpurpo on it on the chosen device, printing accuracy and time for each:
randomized SVD of the label matrix (against the exact truncated SVD), ML-CSSP
label selection (against the optimal rank-k error and uniform column
sampling), and, where available, a random-output forest (LRAP, fit time, and
the effect of the projection size m).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from gpurpo import backend as _backend


def _timed(fn: Callable[[], Any]) -> tuple[Any, float]:
    start = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - start


def _frobenius_residual(Y_dense: np.ndarray, approx: np.ndarray) -> float:
    return float(np.linalg.norm(Y_dense - approx) / np.linalg.norm(Y_dense))


def _demo_linalg(Y: Any, Y_host: np.ndarray, rank: int, seed: int) -> None:
    from gpurpo.linalg import cssp_select, randomized_svd

    s_exact = np.linalg.svd(Y_host, compute_uv=False)
    optimal = float(np.sqrt((s_exact[rank:] ** 2).sum()) / np.linalg.norm(Y_host))

    randomized_svd(Y, rank, random_state=seed)  # warm-up (JIT, allocator)
    (U, s, Vt), seconds = _timed(lambda: randomized_svd(Y, rank, random_state=seed))
    U, s, Vt = (np.asarray(_backend.to_host(a)) for a in (U, s, Vt))
    err = _frobenius_residual(Y_host, (U * s) @ Vt)
    top_rel = float(np.max(np.abs(s - s_exact[:rank]) / s_exact[:rank]))
    print(f"randomized SVD, rank {rank}: {seconds * 1e3:8.1f} ms   "
          f"residual {err:.4f} (optimal {optimal:.4f}, ratio {err / optimal:.3f}); "
          f"max relative error of singular values {top_rel:.2e}")

    (cols, n_trials), seconds = _timed(lambda: cssp_select(Y, rank, random_state=seed))
    cols = np.asarray(_backend.to_host(cols))

    def encoding_error(columns: np.ndarray) -> float:
        Yc = Y_host[:, columns]
        return _frobenius_residual(Y_host, Yc @ (np.linalg.pinv(Yc) @ Y_host))

    rng = np.random.default_rng(seed)
    uniform = np.mean([
        encoding_error(rng.choice(Y_host.shape[1], rank, replace=False)) for _ in range(10)
    ])
    cssp_err = encoding_error(cols)
    print(f"ML-CSSP, {rank} labels   : {seconds * 1e3:8.1f} ms   "
          f"encoding error {cssp_err:.4f} (uniform columns {uniform:.4f}, "
          f"optimal rank-{rank} {optimal:.4f}); {n_trials} draws")


def _demo_forest(X: Any, Y: Any, device: str, seed: int, n_estimators: int) -> None:
    try:
        from gpurpo.ensemble import RandomForestRegressor
    except ImportError:
        return
    from gpurpo.metrics import label_ranking_average_precision

    n = X.shape[0]
    n_train = int(0.75 * n)
    X_train, X_test = X[:n_train], X[n_train:]
    Y_train, Y_test = Y[:n_train], Y[n_train:]
    d = Y.shape[1]
    baseline = np.asarray(_backend.to_host(Y_train.mean(axis=0))).ravel()
    base_scores = np.tile(baseline, (X_test.shape[0], 1))
    print(f"label-frequency baseline LRAP: "
          f"{label_ranking_average_precision(_backend.to_host(Y_test), base_scores):.4f}")
    # the first fit compiles the kernels (numba, or NVRTC on a GPU) and caches them on disk:
    # a tiny fit first, so that the timings below measure fitting only
    warm = RandomForestRegressor(n_estimators=2, max_features="sqrt", projection="gaussian",
                                 n_components=2, random_state=seed, device=device)
    print("compiling or loading the kernels (up to 2 minutes on a first run, then cached)...",
          flush=True)
    _, seconds = _timed(lambda: warm.fit(X_train[:200], Y_train[:200]))
    print(f"kernels compiled or loaded   : {seconds:6.2f} s (once per installation and device)")
    for m in (1, max(1, round(np.log(d))), 4 * max(1, round(np.log(d))), None):
        forest = RandomForestRegressor(
            n_estimators=n_estimators,
            max_features="sqrt",
            projection=None if m is None else "gaussian",
            n_components=m if m is not None else "log",
            random_state=seed,
            device=device,
        )
        _, seconds = _timed(lambda: forest.fit(X_train, Y_train))
        scores = forest.predict(X_test)
        lrap = label_ranking_average_precision(
            _backend.to_host(Y_test), np.asarray(_backend.to_host(scores))
        )
        label = "no projection" if m is None else f"Gaussian m = {m:3d}"
        print(f"forest of {n_estimators} trees, {label:17s}: fit {seconds:6.2f} s   "
              f"test LRAP {lrap:.4f}")


def demo(argv: Sequence[str] | None = None) -> int:
    """Run the demo; returns a process exit code."""
    parser = argparse.ArgumentParser(prog="python -m gpurpo demo",
                                     description="gpurpo on built-in synthetic data")
    parser.add_argument("--device", default="auto", choices=_backend.DEVICE_NAMES)
    parser.add_argument("--n-samples", type=int, default=4000)
    parser.add_argument("--n-features", type=int, default=40)
    parser.add_argument("--n-labels", type=int, default=400)
    parser.add_argument("--rank", type=int, default=20)
    parser.add_argument("--n-estimators", type=int, default=20)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)

    from gpurpo.datasets import make_multilabel

    _backend.show_backend()
    X, Y = make_multilabel(args.n_samples, args.n_features, args.n_labels,
                           label_cardinality=6.0, sparse_output=True,
                           random_state=args.seed)
    backend = _backend.resolve_backend(X, device=args.device)
    print(f"running on: {backend.name} ({backend.device_name})")
    print(f"data: n = {X.shape[0]}, p = {X.shape[1]}, d = {Y.shape[1]} labels, "
          f"{Y.nnz / Y.shape[0]:.1f} labels per sample (sparse Y)")
    Y_host = Y.toarray().astype(np.float64)
    Y_dev = backend.asarray(Y.astype(np.float64))
    _demo_linalg(Y_dev, Y_host, args.rank, args.seed)
    _demo_forest(backend.asarray(X), Y_dev, args.device, args.seed, args.n_estimators)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help"):
        print("usage: python -m gpurpo {demo,info} [options]\n"
              "  demo  run gpurpo on built-in synthetic data (see demo --help)\n"
              "  info  show the active backend, device and library versions")
        return 0 if argv else 2
    command, rest = argv[0], argv[1:]
    if command == "demo":
        return demo(rest)
    if command == "info":
        _backend.show_backend()
        return 0
    print(f"unknown command {command!r}; expected 'demo' or 'info'", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
