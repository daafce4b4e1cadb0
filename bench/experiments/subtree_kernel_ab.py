"""In-process A/B timing of the CPU subtree kernel under changed module constants.

Process-to-process timings on a shared machine vary by 10 % or more, which
hides the effect of a tuning constant. This script captures the arguments of
every ``tree_grow_subtrees`` call of a batch of bootstrap trees, then times
the kernel of ``gpurpo.tree._kernels_cpu`` and of variants compiled from the
same source with other constants, interleaved in one process (best of
``--repeats``; with ``--copies N`` each variant is compiled N times and the
mean of the copies' best times is reported)::

    NUMBA_NUM_THREADS=1 python bench/experiments/subtree_kernel_ab.py mediamill \\
        SORT_LIMIT=128 SORT_LIMIT=384
    git show HEAD:gpurpo/tree/_kernels_cpu.py > /tmp/old.py
    python bench/experiments/subtree_kernel_ab.py delicious file:/tmp/old.py

``text`` (a sparse X, binned without dense codes since session 19) runs only
variants from session 19 on: older kernels read the codes the binned X no
longer has.

"base" is the kernel of this source tree (loaded from numba's cache); a
variant naming the current value is a control, compiled in this process like
the other variants. Base and control, or two copies of one variant, have
differed by up to 10 % (code placement), so compare variants with each other
and with the control, over several copies.
"""

from __future__ import annotations

import argparse
import re
import sys
import time
import types
from pathlib import Path

import numpy as np
import scipy.sparse as sp

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import gpurpo.tree._kernels_cpu as base  # noqa: E402

import gpurpo.tree.grower as grower  # noqa: E402
from gpurpo.backend import NUMPY  # noqa: E402
from gpurpo.datasets import make_delicious_like, make_mediamill_like  # noqa: E402
from gpurpo.tree import BinMapper, GrowthParams, grow_trees, n_candidate_features  # noqa: E402


def variant(spec: str) -> types.ModuleType:
    """A copy of the CPU kernel module (compiled here).

    ``NAME=value``: this module with a constant changed; ``file:PATH``:
    another version of the module's source (e.g. ``git show REV:...``).
    """
    if spec.startswith("file:"):
        source = Path(spec[5:]).read_text()
    else:
        name, value = spec.split("=", 1)
        source = Path(base.__file__).read_text()
        source, found = re.subn(rf"^{name} = .*$", f"{name} = {value}", source, flags=re.M)
        if found != 1:
            raise SystemExit(f"no module constant {name!r} in {base.__file__}")
    module = types.ModuleType("subtree_variant_" + re.sub(r"\W", "_", spec))
    module.__file__ = base.__file__
    exec(compile(source.replace("cache=True", "cache=False"), base.__file__, "exec"),
         module.__dict__)
    return module


def text_like(n: int, p: int, per_row: int = 40, d: int = 1000) -> tuple:
    """CSR X with Zipf-like column popularity (``per_row`` draws per row) and CSR 0/1
    labels: each row's 5 best of ``d`` sparse linear scores."""
    rng = np.random.default_rng(0)
    popularity = 1.0 / np.arange(1, p + 1) ** 0.8
    cols = rng.choice(p, size=n * per_row, p=popularity / popularity.sum())
    rows = np.repeat(np.arange(n), per_row)
    values = rng.exponential(size=n * per_row).astype(np.float32)
    X = sp.csr_matrix((values, (rows, cols)), shape=(n, p))
    X.sum_duplicates()
    W = sp.random(p, d, density=20 / p, random_state=1, format="csr")
    top = np.empty((n, 5), dtype=np.int64)
    for r0 in range(0, n, 5000):
        scores = (X[r0:r0 + 5000] @ W).toarray()
        top[r0:r0 + 5000] = np.argpartition(-scores, 5, axis=1)[:, :5]
    Y = sp.csr_matrix((np.ones(top.size), top.ravel(), np.arange(0, top.size + 1, 5)),
                      shape=(n, d))
    return X, Y


def captured_calls(dataset: str, n_trees: int, rows: int = 0, features: int = 0) -> list[tuple]:
    """Arguments of the subtree kernel calls of one batch of bootstrap trees."""
    if dataset == "text":
        X, Y = text_like(rows, features)
        n = rows
    else:
        make = make_delicious_like if dataset == "delicious" else make_mediamill_like
        n = 12_920 if dataset == "delicious" else 30_993
        X, Y = make(random_state=0)[:2]
        X, Y = X[:n], Y[:n]
    binned = BinMapper().fit(X).transform(X, NUMPY)
    d = Y.shape[1]
    m = int(round(np.log(d)))
    rng = np.random.default_rng(0)
    targets = np.stack([np.asarray(Y @ rng.normal(size=(d, m))) for _ in range(n_trees)],
                       axis=1).astype(np.float32)
    weights = rng.multinomial(n, np.full(n, 1.0 / n), size=n_trees).astype(np.float32)
    params = GrowthParams(n_candidates=n_candidate_features("sqrt", X.shape[1]))
    calls = []
    original = grower.kernels.grow_subtrees

    def capture(backend, *args, **kwargs):
        # copies taken before the call: the kernel reorders sample_indices in place (to
        # leaf order), and a sparse X's nodes read their columns only where their rows
        # increase, so a replay of the reordered indices took another, slower path
        # (text-like 20,000 x 20,000, 4 trees: 42 s against 3 s)
        calls.append((tuple(a.copy() if isinstance(a, np.ndarray) else a for a in args),
                      kwargs))
        return original(backend, *args, **kwargs)

    grower.kernels.grow_subtrees = capture
    try:
        grow_trees(binned, targets, weights, params, np.random.default_rng(1), NUMPY)
    finally:
        grower.kernels.grow_subtrees = original
    return calls


class _VariantBackend:
    """The NumPy backend whose ``tree_grow_subtrees`` is a variant module's kernel."""

    def __init__(self, module: types.ModuleType) -> None:
        self._module = module

    def __getattr__(self, name: str):
        return getattr(NUMPY, name)

    def kernel(self, name: str):
        assert name == "tree_grow_subtrees", name
        return self._module.grow_subtrees


def run(module: types.ModuleType, calls: list[tuple]) -> float:
    """Seconds for all captured calls (fresh outputs and sample buffers), through the
    kernel wrapper of :mod:`gpurpo.tree.kernels`."""
    backend = _VariantBackend(module)
    start = time.perf_counter()
    for args, kwargs in calls:
        codes, sample_indices, *rest = args
        grower.kernels.grow_subtrees(backend, codes, sample_indices.copy(), *rest, **kwargs)
    return time.perf_counter() - start


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dataset", choices=["mediamill", "delicious", "text"])
    parser.add_argument("--rows", type=int, default=20_000, help="text: training rows")
    parser.add_argument("--features", type=int, default=20_000, help="text: columns")
    parser.add_argument("variants", nargs="*", help="NAME=value module constants, or file:PATH")
    parser.add_argument("--trees", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=9)
    parser.add_argument("--copies", type=int, default=1,
                        help="compile each variant this many times (code placement varies "
                             "between copies by up to 10 %%; compare the means)")
    args = parser.parse_args(argv)
    calls = captured_calls(args.dataset, args.trees, args.rows, args.features)
    copies = {"base": [base]}
    for spec in args.variants:
        copies[spec] = [variant(spec) for _ in range(args.copies)]
    for modules in copies.values():
        for module in modules:
            run(module, calls)  # compile
    best = {name: [float("inf")] * len(modules) for name, modules in copies.items()}
    for _ in range(args.repeats):
        for name, modules in copies.items():
            for i, module in enumerate(modules):
                best[name][i] = min(best[name][i], run(module, calls))
    reference = best["base"][0]
    for name, seconds in best.items():
        mean = sum(seconds) / len(seconds)
        spread = "  ".join(f"{t:.4f}" for t in seconds) if len(seconds) > 1 else ""
        print(f"{name:>24}  {mean:.4f} s  ({mean / reference:.3f} of base)  {spread}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
